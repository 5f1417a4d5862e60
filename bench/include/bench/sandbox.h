// What running SHAVE kernels in a sandboxed worker process costs: on layers that are nearly
// all SHAVE work, the worker's start and each task's trip to it and back, against the whole
// functional run (`vpuc bench sandbox`).
#pragma once

#include <string>
#include <vector>

#include "bench/layers.h"
#include "vpu_target/target.h"

namespace vpuc::bench {

struct SandboxCase {
    LayerSpec spec;
    Precision precision = Precision::Fp16;
};

// Softmax over 1000 channels (the standard layer) in int8 and fp16; a sigmoid and a softmax
// over the channels of 40x40x48 and of 112x112x64, fp16.
std::vector<SandboxCase> sandbox_cases();

// Host wall-clock figures, medians over the runs (docs/RELIABILITY.md explains them).
struct SandboxCost {
    std::string error; // why the layer did not compile or run; the figures are unset then
    uint64_t shave_tasks = 0;
    double run_ms = 0;   // the whole functional run (Simulator::run)
    double start_ms = 0; // the simulator blocked spawning the worker and waiting for it to load
    double first_start_ms = 0; // the same in the first run (the first in a process also starts
                               // the workers' fork server)
    double blocked_ms = 0;     // the simulator blocked on the worker in all (start included)
    double kernel_ms = 0;      // the kernels' own code, in the worker
    // What the sandbox adds to the run: the simulator's blocked time beyond the kernels' own
    // time (negative when kernels running beside the simulator save more than the sandbox
    // costs), and its share of the run.
    double overhead_ms() const { return blocked_ms - kernel_ms; }
    double overhead_share() const { return run_ms > 0 ? overhead_ms() / run_ms : 0; }
    // What each SHAVE task adds, the start left out.
    double task_overhead_us() const {
        return shave_tasks > 0 ? 1000 * (overhead_ms() - start_ms) / double(shave_tasks) : 0;
    }
};

// Compiles the case with its default schedule and runs it functionally `runs` times on random
// inputs.
SandboxCost measure_sandbox(const SandboxCase &c, const target::Target &target, int runs);

} // namespace vpuc::bench
