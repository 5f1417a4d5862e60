// Target descriptions: the hardware figures of one VPU generation, loaded from a data file.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "vpu_target/blob.h"
#include "vpu_target/error.h"
#include "vpu_target/timing_params.h"

namespace vpuc::target {

// Element types are the blob's (blob::dtype_bytes, blob::to_string).
using DType = blob::DType;

// One MPE mode: the output block a DPU produces per group of cycles.
struct MpeMode {
    std::string name;  // e.g. CUBOID_16x16
    int block_w = 0;   // output columns per block
    int block_h = 0;   // output rows per block
    int block_c = 0;   // output channels per block
    bool int8 = false; // usable with 8-bit inputs
    bool fp16 = false; // usable with fp16 inputs
};

struct Target {
    std::string name;
    std::string description;
    int tiles = 0;

    // DPU
    int dpus_per_tile = 0;
    int int8_macs_per_cycle = 0; // per DPU
    int fp16_macs_per_cycle = 0; // per DPU
    double dpu_clock_mhz = 0;
    std::vector<MpeMode> mpe_modes;
    int channel_alignment = 0;
    int max_stride = 0;
    int max_kernel = 0;
    int weight_table_entry_bytes = 0;
    DpuTimingParams dpu_timing;

    // Memory
    uint64_t cmx_bytes_per_tile = 0;
    uint64_t cmx_usable_bytes = 0;
    double cmx_clock_mhz = 0;
    uint64_t ddr_bytes = 0;
    double ddr_bandwidth_gbps = 0; // GB/s shared by all DMA engines
    double ddr_latency_ns = 0;

    // SHAVE
    int shaves_per_tile = 0; // ACT SHAVEs bound to a tile (0 when shared)
    int shared_shaves = 0;   // UPA SHAVEs shared by the whole device
    int shave_vector_bits = 0;
    double shave_clock_mhz = 0;
    ShaveTimingParams shave_timing;

    // DMA
    int dma_engines = 0;
    double dma_clock_mhz = 0;
    double dma_engine_bytes_per_cycle = 0; // one engine's peak, DMA clock
    DmaTimingParams dma_timing;

    // Synchronisation
    int barriers = 0;

    // The description this target was parsed from as canonical JSON (keys sorted, comments
    // dropped) and its SHA-256: what a blob compiled for the target carries.
    std::string description_json;
    blob::Sha256 description_sha256{};

    // Derived helpers.
    const MpeMode *find_mpe_mode(const std::string &mode_name) const;
    int shaves_available(int tile) const; // SHAVEs a task on `tile` may use
    int macs_per_cycle(DType input) const;
};

class TargetError : public Error {
  public:
    using Error::Error;
};

// Parses a target description (JSON with // comments). Throws TargetError naming the field
// when a field is missing, of the wrong type or nonsensical. `origin` names the source in
// messages.
Target parse_target(const std::string &text, const std::string &origin);

// Loads a bundled target by name ("vpu27", "vpu20") or a target file by path.
Target load_target(const std::string &name_or_path);

// Names of the bundled targets.
std::vector<std::string> bundled_target_names();

} // namespace vpuc::target
