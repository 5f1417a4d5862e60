// The benchmark layers: the standard shapes `vpuc bench layers` reports, as single-layer
// graphs, with their roofline bound and a measurement (compile with the default schedules,
// simulate timing only). Tests can run the same layers through the same functions.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "dsl/graph.h"
#include "dsl/schedule.h"
#include "vpu_target/target.h"

namespace vpuc::bench {

enum class Precision { Int8, Fp16 };

const char *to_string(Precision precision); // "int8", "fp16"

// One layer's shape; the graph, its MAC count and its DDR traffic all derive from it.
struct LayerSpec {
    enum class Kind { Conv, Depthwise, Softmax, Sigmoid };
    std::string name; // "conv3x3 56x56x64->64"
    Kind kind = Kind::Conv;
    int64_t in_c = 0, in_w = 0, in_h = 0;
    int64_t out_c = 0; // conv; the other kinds keep in_c
    int kernel = 1, stride = 1, pad = 0;

    int64_t out_w() const;
    int64_t out_h() const;
    int64_t macs() const;            // 0 for softmax and sigmoid (no DPU work)
    int64_t weight_elements() const; // 0 for softmax and sigmoid
};

// 3x3 conv 56x56x64->64, 1x1 conv 28x28x256->512, 3x3 depthwise 112x112x32,
// 7x7/2 conv 224x224x3->64 (pad 3), softmax over 1000 channels.
const std::vector<LayerSpec> &standard_layers();

// `spec` with `height` input rows (its constants unchanged), named after its new shape:
// with_height(conv3x3 56x56x64->64, 36) is conv3x3 56x36x64->64 (width x height x channels).
LayerSpec with_height(const LayerSpec &spec, int64_t height);

// The standard layer also measured on one tile, to show what distribution over tiles gains:
// the 3x3 conv.
const LayerSpec &scaling_layer();

// `spec` named after its shape ("softmax 40x40x48", "sigmoid 40x40x48"): width x height x
// channels of the input.
LayerSpec named(LayerSpec spec);

// A graph of `spec` alone in `precision` (int8: u8 activations, i8 weights; fp16 throughout)
// with deterministic random constants, no schedule. Convolutions end in a ReLU.
dsl::Graph build_graph(const LayerSpec &spec, Precision precision);

// The activations of the benchmark graphs: 1 x c x h x w NHWC, u8 (scale 0.05, zero point 120)
// or f16.
dsl::TensorDesc activation(const std::string &name, int64_t c, int64_t w, int64_t h,
                           Precision precision);

// Input, weights and output bytes, each moved between DDR and CMX once.
int64_t ddr_bytes(const LayerSpec &spec, Precision precision);

// The lower bound on a layer's time: every DPU of every tile at its peak MAC rate, or the DDR
// moving `ddr_bytes` at its full bandwidth, whichever takes longer.
struct Roofline {
    double compute_ns = 0; // macs / (macs_per_cycle(dtype) * dpus_per_tile * tiles) DPU cycles
    double ddr_ns = 0;     // ddr_bytes / ddr_bandwidth_gbps
    double bound_ns() const { return compute_ns > ddr_ns ? compute_ns : ddr_ns; }
    const char *bound_by() const { return compute_ns >= ddr_ns ? "compute" : "DDR"; }
};

Roofline roofline(const LayerSpec &spec, Precision precision, const target::Target &target);

struct Measurement {
    std::string error;     // why the layer did not compile or run; the numbers are unset then
    double compile_ms = 0; // wall clock of codegen::lower
    double latency_ns = 0;
    double latency_cycles = 0; // DPU clock
    int tiles_used = 0;        // NCE tiles whose DPUs or SHAVEs ran a task
    double shave_busy_ns = 0;  // the busiest SHAVE engine's busy time (0: no SHAVE task)
    double dma_busy_ns = 0;    // the busiest DMA engine's busy time
    std::string schedule;      // the schedule the lowering used
    std::vector<uint8_t> blob; // the compiled blob, e.g. to run again with a trace
};

// Compiles `spec` with its default schedule and simulates it in timing-only mode. `tiles` > 0
// gives the layer default_schedule(layer, target, tiles) before lowering; 0 leaves it
// unscheduled, for lower() to apply the default over all tiles. Errors of the layer library,
// the lowering or the simulator are caught and returned in Measurement::error, prefixed
// "build: ", "compile: " or "simulate: ".
Measurement measure(const LayerSpec &spec, Precision precision, const target::Target &target,
                    int tiles = 0);

// Compiles `graph` (layers without a schedule get lower()'s default) and simulates it in
// timing-only mode; Measurement::schedule is its first output's. Errors as measure()'s.
Measurement measure_graph(const dsl::Graph &graph, const target::Target &target);

// Wall-clock milliseconds since `start`: the benchmarks' compile and simulation times.
double ms_since(std::chrono::steady_clock::time_point start);

// The bytes `graph` must move between DDR and CMX at least once: its inputs, its outputs and
// its layers' constant tensors (the DDR term of a roofline for any graph).
int64_t graph_ddr_bytes(const dsl::Graph &graph);

// The same with `schedule` as the layer's schedule instead of a default one.
Measurement measure(const LayerSpec &spec, Precision precision, const target::Target &target,
                    const dsl::Schedule &schedule);

} // namespace vpuc::bench
