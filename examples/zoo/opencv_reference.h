// OpenCV's DNN module as an independent reference for ONNX models: a second implementation of
// every op, written by other people, to compare vpuc's results with (docs/zoo.md).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "frontend/tensor_file.h"
#include "vpu_target/error.h"

namespace vpuc::zoo {

// A model OpenCV cannot read or run, or inputs it does not take. The message names the file.
class OpenCvReferenceError : public Error {
  public:
    using Error::Error;
};

// Runs the ONNX model at `path` with OpenCV DNN (its CPU backend, fp32) on `inputs`, float32
// tensors named after graph inputs, and returns the outputs named in `output_names`, in that
// order, as float32 tensors in the numpy convention of frontend/tensor_file.h (dim 0 the
// last numpy axis). OpenCV 4.6 reads Clip's bounds only as attributes (opset 6), so Clips
// with constant bounds are given them so first; the model computes the same.
std::vector<frontend::NamedTensor> run_opencv(const std::string &path,
                                              const std::vector<frontend::NamedTensor> &inputs,
                                              const std::vector<std::string> &output_names);
// The same for a model given as its bytes; `what` names it in errors. Outputs may be any
// node's output tensor, not only the graph's.
std::vector<frontend::NamedTensor>
run_opencv_bytes(const std::vector<uint8_t> &bytes, const std::string &what,
                 const std::vector<frontend::NamedTensor> &inputs,
                 const std::vector<std::string> &output_names);

} // namespace vpuc::zoo
