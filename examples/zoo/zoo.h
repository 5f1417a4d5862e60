// The model zoo: standard networks written as ONNX models with deterministic weights, the
// test material of the importer and the compiler on whole networks (`vpuc zoo`, docs/zoo.md).
//
// Each model is built node by node as PyTorch's exporter writes it (opset 13, or 17 where an
// op needs it; node names like "/layer1/layer1.0/conv1/Conv", tensors named apart from
// nodes; BatchNormalization kept, not folded). Weights come from a fixed-seed generator with
// He scaling, and batch norms carry non-trivial statistics, so that activations stay of order
// one through the depth and a wrong mean, variance or scale shows in the result. The same
// name always gives the same bytes.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "vpu_target/error.h"

namespace vpuc::zoo {

// An unknown model name, or a model file that cannot be written.
class ZooError : public Error {
  public:
    using Error::Error;
};

struct ModelInfo {
    std::string name;        // "resnet18": the file is resnet18.onnx
    std::string description; // one line
    std::string input_name;  // each model has one input, of floats
    std::vector<int64_t> input_shape;
    std::vector<std::string> output_names;
    bool has_qdq_form = false; // qdq_model_bytes gives its pre-quantized form
};

// Every model of the zoo, in a fixed order.
const std::vector<ModelInfo> &models();

// The model named `name`; throws ZooError listing the names otherwise.
const ModelInfo &model_info(const std::string &name);

// The serialized ONNX ModelProto of model `name`.
std::vector<uint8_t> model_bytes(const std::string &name);

// Writes model `name` to DIR/NAME.onnx and returns that path. The directory must exist.
std::string write_model(const std::string &name, const std::string &dir);

// The pre-quantized (QDQ) form of model `name`, as ONNX Runtime's quantize_static writes it
// from the model with its batch norms folded into the convolutions: QuantizeLinear and
// DequantizeLinear on every activation (uint8, per tensor, from its range over 4 standard
// normal inputs run through OpenCV DNN), DequantizeLinear of int8 weights (symmetric, one
// scale per output channel) and of int32 biases. Deterministic like model_bytes. Throws
// ZooError for a model without one (has_qdq_form).
std::vector<uint8_t> qdq_model_bytes(const std::string &name);

// Writes it to DIR/NAME_qdq.onnx and returns that path.
std::string write_qdq_model(const std::string &name, const std::string &dir);

} // namespace vpuc::zoo
