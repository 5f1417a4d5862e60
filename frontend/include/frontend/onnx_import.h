// The ONNX importer: a model file becomes a dsl::Graph of layer-registry layers.
//
// The model is read under the file rules (files::read_input_file: regular files only, size
// limited), its external data only from inside the model's directory, then checked by ONNX's
// checker, upgraded to opset 13 by ONNX's version converter when older, and its shapes inferred
// by ONNX's shape inference. Each node maps onto registry layers named after the node; shape
// sub-graphs fold into constants as they are built. Whatever cannot be imported (an op,
// attribute, type or dynamic shape) is a ModelError naming the file, the node, the op and what
// is missing.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "dsl/graph.h"
#include "vpu_target/error.h"

namespace vpuc::frontend {

// A model that cannot be read or imported. The message starts with the file.
class ModelError : public Error {
  public:
    using Error::Error;
};

enum class Precision {
    FP16, // float tensors computed in fp16 on the device
    INT8, // only pre-quantized (QDQ) models: a float layer needing calibration is an error
};

struct ImportOptions {
    Precision precision = Precision::FP16;
    // Shapes for graph inputs, by name, replacing what the model declares (fixing its dynamic
    // dimensions): "data" -> {1, 3, 224, 224}.
    std::map<std::string, std::vector<int64_t>> input_shapes;
    // Values of graph inputs known at compile time (the ONNX test data give a convolution's
    // weights as an input): where an op needs a constant (weights, a shape, K), the input's
    // value is taken; elsewhere it stays an input.
    std::map<std::string, Halide::Buffer<>> known_inputs;
};

struct ImportedModel {
    dsl::Graph graph;
    int64_t opset = 0;          // of the model as imported (after any upgrade)
    int64_t original_opset = 0; // as the file declares it
    // Per graph output, in order: its ONNX name. The output's layer has that name too, unless
    // another layer or input has it already.
    std::vector<std::string> output_names;
    // Per graph output, in order: the element type of its values in a tensor file (`vpuc
    // reference`, the conformance runner). The model's type where the device computes another
    // one for it: u16, i16, u32 and u64 (i32 on the device), bf16 as f32 (numpy has no
    // bfloat16; f16 on the device); for any other type, the type of the output's layer.
    std::vector<Halide::Type> output_types;
    // What a user should know: an upgrade of the opset, an input's type changed for the
    // device.
    std::vector<std::string> notes;
};

// The ONNX ops the importer maps onto the layer registry, and those the version converter
// replaces by one of them (Upsample), sorted.
std::vector<std::string> supported_onnx_ops();

// A node of this ONNX domain is the layer of the registry its op_type names (`vpuc layers`),
// its attributes by name: a layer ONNX has no op for reaches models without an importer.
inline constexpr const char *kRegistryDomain = "vpuc";

// Reads and imports the model at `path`. Throws ModelError (and files::InputFileError when the
// file cannot be read).
ImportedModel import_onnx(const std::string &path, const ImportOptions &options = {});

// The same from the bytes of a model; `path` names it in messages and locates its external
// data (its directory; none when empty, and then external data is an error).
ImportedModel import_onnx_bytes(const std::vector<uint8_t> &bytes, const std::string &path,
                                const ImportOptions &options = {});

} // namespace vpuc::frontend
