// One call for a kernel author: compile a graph, run it on the simulator and compare every
// output with the CPU reference, element by element, within a tolerance per element type.
#pragma once

#include <Halide.h>

#include <cstdint>
#include <string>
#include <vector>

#include "codegen/lower.h"
#include "dsl/graph.h"
#include "vpu_target/simulator.h"

namespace vpuc::codegen {

// How far a simulated output element may be from the reference's. Integer results (u8, i8,
// i32) are always compared exactly: int8 is bit-exact by contract. Float results are compared
// in units in the last place of their type (0: bit for bit; a NaN matches only a NaN).
// The default is the fp16 contract (docs/ARCHITECTURE.md, "fp16 results"): DPU operations are
// bit-exact, SHAVE kernels within 1 ulp; pass 0 to hold a DPU-only graph to its bits.
struct Tolerance {
    int64_t f16_ulp = 1;
    int64_t f32_ulp = 0;
};

struct CheckOptions {
    // One buffer per graph input (algorithms::make_buffer's layout); empty: random values
    // from `seed`, real-valued for float inputs (uniform in [-4, 4), rounded to the type).
    std::vector<Halide::Buffer<>> inputs;
    uint32_t seed = 1;
    Tolerance tolerance;
    LowerOptions lower;
};

struct OutputCheck {
    std::string name;
    int64_t elements = 0;
    int64_t mismatches = 0;     // beyond the tolerance
    int64_t max_ulp = 0;        // floats: the largest difference seen, in ulps
    std::string first_mismatch; // "c 3, x 7, y 0: got 0x3c01, expected 0x3c00 (1 ulp)"
};

struct CheckResult {
    std::vector<uint8_t> blob;
    sim::RunResult run;
    std::vector<OutputCheck> outputs;
    bool ok() const;
    // One line per output: "prob: 1024 elements, all match" or its mismatches and the first.
    std::string report() const;
};

// Throws what lower() and the simulator throw (every one a vpuc::Error).
CheckResult check_against_reference(const dsl::Graph &graph, const target::Target &target,
                                    const CheckOptions &options = {});

// One output's elements (stored bytes of `tensor`, c innermost) against the expected ones.
OutputCheck compare_output(const dsl::TensorDesc &tensor, const std::vector<uint8_t> &got,
                           const std::vector<uint8_t> &want, const Tolerance &tolerance);

// Random values for `tensor`: bytes for integer types, real values in [-4, 4) for floats.
Halide::Buffer<> random_buffer(const dsl::TensorDesc &tensor, uint32_t seed);

} // namespace vpuc::codegen
