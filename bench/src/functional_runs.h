// What the benchmarks that run compiled layers functionally share (sandbox.cpp, emulation.cpp).
#pragma once

#include <cstdint>
#include <vector>

#include "bench/layers.h"
#include "vpu_target/blob.h"

namespace vpuc::bench {

// Deterministic inputs for every input of `blob`: fp16 values in [-2, 2) (a random bit pattern
// may be a NaN), any byte for int8.
std::vector<std::vector<uint8_t>> random_inputs(const blob::Blob &blob, Precision precision);

double median(std::vector<double> values);

} // namespace vpuc::bench
