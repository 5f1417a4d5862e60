// How fast the simulator computes DPU tasks on the host (`vpuc bench simulator`): layers
// compiled with their default schedules, run functionally, the DPU emulation's own time
// measured (RunResult::dpu_emulation_ns).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "bench/layers.h"
#include "dsl/graph.h"
#include "vpu_target/target.h"

namespace vpuc::bench {

struct EmulationCase {
    std::string name; // "conv3x3 56x56x64->64"
    Precision precision = Precision::Int8;
    std::function<dsl::Graph()> build;
};

// Large int8 convolutions (3x3, 1x1 and the 7x7/2 stem of ResNet-50), the 3x3 conv in fp16,
// a 3x3 depthwise conv in int8 and fp16, ResNet-50's 3x3/2 max pool and a residual add.
std::vector<EmulationCase> emulation_cases();

struct EmulationSpeed {
    std::string error; // why the layer did not compile or run; the figures are unset then
    uint64_t dpu_tasks = 0;
    // What the DPU tasks compute: multiply-accumulates, or window elements for pools and
    // elements for eltwise (the verifier's measure of a task's work), channel padding included.
    uint64_t work = 0;
    double run_ms = 0; // the whole functional run, median
    double dpu_ms = 0; // the DPU emulation's share, median
    double giga_per_second() const { return dpu_ms > 0 ? double(work) / dpu_ms / 1e6 : 0; }
};

// Compiles the case with its default schedule and runs it functionally `runs` times on random
// inputs, one host thread.
EmulationSpeed measure_emulation(const EmulationCase &c, const target::Target &target, int runs);

} // namespace vpuc::bench
