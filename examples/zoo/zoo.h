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
};

// Every model of the zoo, in a fixed order.
const std::vector<ModelInfo> &models();

// The model named `name`; throws ZooError listing the names otherwise.
const ModelInfo &model_info(const std::string &name);

// The serialized ONNX ModelProto of model `name`.
std::vector<uint8_t> model_bytes(const std::string &name);

// Writes model `name` to DIR/NAME.onnx and returns that path. The directory must exist.
std::string write_model(const std::string &name, const std::string &dir);

} // namespace vpuc::zoo
