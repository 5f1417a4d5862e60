// The simulator: our hardware. Runs a verified blob deterministically, functionally (DDR,
// per-tile CMX, DMA, DPU, SHAVE kernels) and with discrete-event timing (each queue in
// order, tasks gated by barriers, DDR bandwidth shared by the DMA engines).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "vpu_target/blob.h"
#include "vpu_target/shave_sandbox.h"
#include "vpu_target/target.h"

namespace vpuc::sim {

enum class Mode {
    Functional, // results and timing
    TimingOnly, // timing only: no memory is touched (fast, for the autotuner)
};

struct TaskRecord {
    std::string name;
    std::string layer;
    std::string engine; // e.g. "DMA 0", "DPU tile 1", "SHAVE tile 0"
    blob::EngineKind kind = blob::EngineKind::Dma;
    double start_ns = 0;
    double end_ns = 0;
    uint32_t queue = 0;    // the blob's queue that ran the task
    uint32_t position = 0; // and its place in that queue
};

struct EngineStats {
    std::string engine;
    blob::EngineKind kind = blob::EngineKind::Dma;
    double busy_ns = 0;
    uint64_t tasks = 0;
};

struct RunResult {
    std::vector<std::vector<uint8_t>> outputs; // one per blob output, in its section layout
    double latency_ns = 0;
    double latency_dpu_cycles = 0; // latency in DPU clock cycles
    std::vector<EngineStats> engines;
    std::vector<TaskRecord> tasks; // in start order
    SandboxStats sandbox;          // functional runs with SHAVE tasks
    // Functional runs: the host's wall-clock time computing DPU tasks (`vpuc bench simulator`).
    double dpu_emulation_ns = 0;
};

// How much of blob::verify the simulator runs on a blob.
enum class Checks {
    All,    // blob::verify: any blob, for any run
    Timing, // blob::verify_for_timing: a blob a compiler pass built, for TimingOnly runs
};

class Simulator {
  public:
    // Verifies the blob against the target (throws blob::BlobError).
    Simulator(target::Target target, std::vector<uint8_t> blob_bytes, Checks checks = Checks::All);
    ~Simulator();
    Simulator(const Simulator &) = delete;
    Simulator &operator=(const Simulator &) = delete;

    const blob::Blob &blob() const;
    const target::Target &target() const { return target_; }

    // How SHAVE kernels run in functional runs (the time limit per task).
    void set_sandbox_options(const SandboxOptions &options);

    // `inputs` holds one byte vector per blob input, sized as its IoTensor.bytes (ignored in
    // TimingOnly mode, where it may be empty). A functional run of a blob with SHAVE tasks
    // starts a sandboxed worker for its kernels before its first task. Throws KernelFault when
    // a kernel fails, crashes or exceeds its time limit, naming the task and the kernel: a
    // verified blob fails in no other way (blob::BlobError for inputs of the wrong size, or a
    // functional run of a blob checked for timing only).
    RunResult run(const std::vector<std::vector<uint8_t>> &inputs, Mode mode = Mode::Functional);

  private:
    struct Impl;
    target::Target target_;
    std::unique_ptr<Impl> impl_;
};

// Chrome trace-event JSON (opens in Perfetto and chrome://tracing): one track per engine.
std::string chrome_trace_json(const RunResult &result, const std::string &title);

} // namespace vpuc::sim
