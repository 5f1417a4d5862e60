// Bounds inference with Halide's own machinery: which region of each input a layer reads to
// produce a region of its output (halos included).
#pragma once

#include <vector>

#include "codegen/loop_nest.h"
#include "dsl/layer.h"

namespace vpuc::codegen {

// One region per input of `layer`, clamped to the input's extents (a padded conv reads nothing
// outside its input; the padding is the DPU's or the kernel's business). Throws
// std::runtime_error naming the layer when a bound is not a constant.
std::vector<Region> input_regions(const dsl::Layer &layer, const Region &output);

} // namespace vpuc::codegen
