// The CPU reference: layers' algorithms run by the Halide JIT, every layer computed whole
// (compute_root). The int8 algorithms use the DPU's arithmetic, so int8 results are the
// bit-exact expectation for the compiled network; fp16 results are too for DPU operations,
// and within one ulp for SHAVE kernels (docs/ARCHITECTURE.md, "fp16 results").
#pragma once

#include <Halide.h>

#include <cstdint>
#include <vector>

#include "dsl/graph.h"
#include "dsl/layer.h"

namespace vpuc::algorithms {

// Buffers that do not fit the graph or layer they are given to (count, type or shape).
class ReferenceError : public Error {
  public:
    using Error::Error;
};

// The JIT target: x86-64 with SSE4.1 and no FMA or AVX, as the SHAVE kernels are compiled, so
// float results do not depend on the machine, and strict_float, so float operations keep the
// definition's order (the DPU's order of summing).
const Halide::Target &reference_target();

// A buffer for `tensor`: dims (c, x, y) with extents (C, W, H) of its device view
// (dsl::device_view, so [N, K] has extents (K, 1, 1)), c innermost, of the tensor's element
// type; with a batch (N > 1), dims (c, x, y, n).
Halide::Buffer<> make_buffer(const dsl::TensorDesc &tensor);

// The bytes of `buffer` (laid out as make_buffer does) as `tensor` holds them in memory: its
// device view in its order (NHWC, NCHW, or a tensor of another rank in row-major order). These
// are the bytes of the tensor's input or output section of a blob.
std::vector<uint8_t> to_memory_order(const dsl::TensorDesc &tensor, const Halide::Buffer<> &buffer);
// The inverse: a buffer laid out as make_buffer does, from the tensor's bytes in memory. Throws
// ReferenceError when there are not as many bytes as the tensor holds.
Halide::Buffer<> from_memory_order(const dsl::TensorDesc &tensor,
                                   const std::vector<uint8_t> &bytes);

// Runs `graph` on `inputs` (one per graph input, in graph.inputs() order, dims as make_buffer)
// and returns one buffer per graph output. Layers compute one image at a time: a batch runs
// image by image, and a tensor without batch serves every image. Throws ReferenceError on an
// input of the wrong type or shape.
std::vector<Halide::Buffer<>> run_reference(const dsl::Graph &graph,
                                            const std::vector<Halide::Buffer<>> &inputs);

// Runs one layer on buffers for its inputs (layer.inputs() order).
Halide::Buffer<> run_reference(const dsl::Layer &layer,
                               const std::vector<Halide::Buffer<>> &inputs);

} // namespace vpuc::algorithms
