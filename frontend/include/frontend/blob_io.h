// A blob's inputs and outputs as tensors, in the numpy convention of frontend/tensor_file.h:
// the model's logical shape (NCHW for 4-D, as ONNX has it), dim 0 the innermost. This is what
// `vpuc run` reads from .npy/.npz files and writes to .npz, and what the conformance runner
// feeds a blob with.
#pragma once

#include <Halide.h>

#include <cstdint>
#include <string>
#include <vector>

#include "dsl/tensor.h"
#include "frontend/tensor_file.h"
#include "vpu_target/blob.h"

namespace vpuc::frontend {

// A tensor that does not fit the blob input it is given to. The message names the input.
class BlobIoError : public Error {
  public:
    using Error::Error;
};

// How a blob holds one of its inputs or outputs: the tensor's numpy shape, its element type,
// and its layout in its section (NHWC: a 4-D NCHW tensor channel-innermost; NCHW and ND: C
// order).
struct IoLayout {
    std::string name;
    std::vector<int64_t> shape;
    Halide::Type type;
    blob::Layout layout = blob::Layout::ND;
};

IoLayout io_layout(const blob::IoTensor &io);
// As a compiled graph's input or output `tensor` is held (codegen's blob I/O); the CPU
// reference's buffers convert through it too (algorithms::to_memory_order).
IoLayout io_layout(const dsl::TensorDesc &tensor);

// The bytes of the section of `io` holding `value`. `value`'s numpy shape must be the input's
// shape. Its values convert to the input's element type: floats to f16 or f32 rounded to
// nearest even; integers, bools and floats holding integers to an integer type only when
// every value is exact in it. Anything else (a shape, a value out of range, a fraction for an
// integer input) is a BlobIoError naming the input, the element and the value.
std::vector<uint8_t> input_bytes(const IoLayout &io, const Halide::Buffer<> &value);

// The tensor a section holds: `io`'s shape and element type (f16 stays f16).
Halide::Buffer<> output_tensor(const IoLayout &io, const std::vector<uint8_t> &bytes);

// `output`'s values in element type `type` (ImportedModel::output_types: a u16 output the
// device computed in i32), converted as input_bytes converts: integers only when exact in
// `type`, floats rounded to nearest even. A value `type` does not hold (a u32 of 2^31 or more,
// which the device's i32 holds as negative) is a BlobIoError naming the output, the element
// and the value.
Halide::Buffer<> output_in_type(const NamedTensor &output, const Halide::Type &type);

// The input sections of `blob` from named tensors, one per blob input, matched by name. A
// missing input, an unknown name or a repeated one is a BlobIoError listing the blob's
// inputs.
std::vector<std::vector<uint8_t>> blob_inputs(const blob::Blob &blob,
                                              const std::vector<NamedTensor> &tensors);

// The blob's outputs, named as the blob names them, from a run's output sections.
std::vector<NamedTensor> blob_outputs(const blob::Blob &blob,
                                      const std::vector<std::vector<uint8_t>> &sections);

} // namespace vpuc::frontend
