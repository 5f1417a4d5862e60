// Whole networks on the simulator against their roofline (`vpuc bench models`,
// docs/PERFORMANCE.md): the latency, the engines' utilisation, the CMX and DDR use of a compiled
// graph, and a roofline computed from the graph alone, independent of the scheduler and the
// lowering.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "dsl/graph.h"
#include "vpu_target/target.h"

namespace vpuc::bench {

// The larger of two bounds:
// - compute: every layer the DPU runs at the DPU's peak for its op kind on every DPU of the
//   target: conv and matmul at the target's MACs per cycle (vpu27: 2048 int8, 1024 fp16 per
//   DPU), depthwise conv and pools at a sixteenth of it (one MAC per channel of a 16-channel
//   block: 128 and 64), eltwise at a thirty-second (64 and 32 elements); SHAVE layers and
//   views count nothing;
// - DDR: the graph's inputs, outputs and constants moved once at the target's DDR bandwidth.
struct ModelRoofline {
    double compute_ns = 0;
    double ddr_ns = 0;
    int64_t ddr_bytes = 0;
    double bound_ns() const { return compute_ns > ddr_ns ? compute_ns : ddr_ns; }
    const char *bound_by() const { return compute_ns >= ddr_ns ? "compute" : "DDR"; }
};

ModelRoofline model_roofline(const dsl::Graph &graph, const target::Target &target);

// The bytes a blob's DMA tasks move between DDR and CMX, by what they carry (read from the
// blob: the DDR section each DMA reads or writes). A broadcast to several tiles reads DDR once.
struct DdrTraffic {
    int64_t constants = 0;         // weights, weight tables and other constants, DDR -> CMX
    int64_t network_inputs = 0;    // the network's inputs, DDR -> CMX
    int64_t activation_loads = 0;  // intermediate tensors (and spills), DDR scratch -> CMX
    int64_t activation_stores = 0; // intermediate tensors (and spills), CMX -> DDR scratch
    int64_t network_outputs = 0;   // the network's outputs, CMX -> DDR
    int64_t total() const {
        return constants + network_inputs + activation_loads + activation_stores + network_outputs;
    }
};

struct ModelMeasurement {
    std::string error; // why the graph did not compile or run; the numbers are unset then
    int layers = 0;
    double lower_ms = 0;               // codegen::lower, verification and race check included
    double simulate_timing_ms = 0;     // a timing-only run, wall clock
    double simulate_functional_ms = 0; // a functional run on random inputs, wall clock
    double latency_ns = 0;             // simulated
    double dpu_busy = 0, dma_busy = 0, shave_busy = 0; // mean busy share of each kind's engines
    int64_t cmx_high_water_bytes = 0; // the highest CMX byte any task addresses, over tiles
    DdrTraffic ddr;
};

// Lowers `graph` for `target` (default schedules for unscheduled layers, changed by the graph
// scheduling passes unless `graph_scheduling` is off) and simulates it, timing only and
// functionally. Errors are caught into ModelMeasurement::error.
ModelMeasurement measure_model(const dsl::Graph &graph, const target::Target &target,
                               bool graph_scheduling = true);

// The simulated latency of `graph` lowered for `target`, timing only (the other side of an
// A/B). Throws what the lowering throws.
double simulated_latency_ns(const dsl::Graph &graph, const target::Target &target,
                            bool graph_scheduling);

// Reads a blob's DMA traffic by kind and its CMX high-water mark (blob bytes already verified).
DdrTraffic ddr_traffic(const std::vector<uint8_t> &blob);
int64_t cmx_high_water_bytes(const std::vector<uint8_t> &blob);

} // namespace vpuc::bench
