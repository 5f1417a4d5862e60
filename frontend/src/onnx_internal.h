// The ONNX importer's parts: reading a model (onnx_model.cpp), its tensors as Halide buffers
// (onnx_tensor.cpp), and the ONNX ops as registry layers (onnx_ops.cpp).
#pragma once

#include <onnx/onnx_pb.h>

#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "dsl/constant_values.h"
#include "dsl/registry.h"
#include "frontend/onnx_import.h"

namespace vpuc::frontend::detail {

// The newest opset libonnx 1.12 knows, and the one older models are upgraded to.
constexpr int64_t kNewestOpset = 17;
constexpr int64_t kUpgradedOpset = 13;

struct LoadedModel {
    onnx::ModelProto proto;
    int64_t original_opset = 0, opset = 0;
    std::vector<std::string> notes;
};

// Parses `bytes`, loads external data from inside the directory of `path` (no other file),
// applies the input shapes of `options`, checks the model with ONNX's checker, upgrades an
// opset older than kUpgradedOpset and infers shapes. Throws ModelError naming `path`.
LoadedModel load_model(const std::vector<uint8_t> &bytes, const std::string &path,
                       const ImportOptions &options);

// Whether an op of `domain` is ONNX's own ("" or "ai.onnx").
inline bool is_onnx_domain(const std::string &domain) {
    return domain.empty() || domain == "ai.onnx";
}
// Every value name of `graph` (inputs, outputs, value infos, initializers, node inputs and
// outputs), so that nodes a rewrite adds get names of their own.
std::set<std::string> value_names(const onnx::GraphProto &graph);

// ONNX's shape inference of `model` in strict mode, with data propagation; throws ModelError
// naming `path`, saying `when` it ran (" after ...", or "").
void infer_shapes(onnx::ModelProto &model, const std::string &path, const std::string &when);
// Replaces each Einsum (of one or two operands, no ellipsis or diagonal) by the ReduceSum,
// Transpose, Reshape and MatMul nodes computing it (onnx_einsum.cpp), from the operands' inferred
// shapes; returns whether there was one. Throws ModelError naming `path` and the node.
bool lower_einsums(onnx::ModelProto &model, const std::string &path);

// The ops the importer replaces by the function body ONNX's schema defines them by
// (onnx_functions.cpp), and the replacing: each node of such an op, at `opset`, becomes its body's
// nodes, until none is left; shapes are inferred again. Throws ModelError naming `path` and the
// node.
const std::vector<std::string> &function_ops();
void expand_functions(onnx::ModelProto &model, int64_t opset, const std::string &path,
                      std::vector<std::string> &notes);

// The graph element type of an ONNX tensor type: INT16, UINT16, UINT32 and UINT64 are i64
// (tensor_value refuses a uint64 above 2^63 - 1), BFLOAT16 is f32 (which holds every bfloat16
// exactly). Throws ModelError with `what` for a type graph tensors do not have (strings,
// complex, 8-bit floats, 4-bit ints).
dsl::ElemType elem_type(int32_t onnx_type, const std::string &what);
// The short name of an ONNX tensor type, as vpuc names element types: "f32", "bf16", "u16",
// "i64". Throws as elem_type for a type graph tensors do not have.
std::string model_type_name(int32_t onnx_type);
// The value of an initializer or Constant (external data already loaded), the ONNX shape
// reversed into Halide's dims (dim 0 innermost). Throws ModelError with `what`.
Halide::Buffer<> tensor_value(const onnx::TensorProto &t, const std::string &what);
// The bytes of `count` elements of ONNX type `onnx_type`, or nullopt when unknown or
// overflowing.
std::optional<uint64_t> tensor_bytes(int32_t onnx_type, uint64_t count);

// Layer names unique in the graph: ONNX node names may be empty or repeat.
class UniqueNames {
  public:
    std::string take(const std::string &wanted);

  private:
    std::set<std::string> used_;
};

// A DequantizeLinear of a constant, as the importer keeps it beside the real values it gives
// (by the name of that constant layer): the integers, the scale and zero point (one, or one per
// index of `axis`). An int8 conv or matmul takes its weights' integers from here rather than
// recovering them from the reals.
struct DequantizedConstant {
    dsl::Layer integers;
    dsl::ConstValues scale, zero_point;
    int64_t axis = 0; // in 0..rank-1; meaningless for one scale
};
using DequantizedConstants = std::map<std::string, DequantizedConstant>;

// One node being imported: its inputs as layers, its attributes, and the registry.
class NodeImport {
  public:
    NodeImport(const onnx::NodeProto &node, std::string layer_name, std::string file,
               std::vector<std::optional<dsl::Layer>> inputs, const ImportOptions &options,
               UniqueNames &names, const std::map<std::string, int32_t> &value_types,
               DequantizedConstants &dequantized);

    const onnx::NodeProto &node() const { return node_; }
    const std::string &name() const { return name_; } // the layer name for its first output
    const ImportOptions &options() const { return options_; }

    [[noreturn]] void fail(const std::string &what) const;
    // A name for another layer of this node (one per output of a node of several).
    std::string unique_name(const std::string &wanted) { return names_.take(wanted); }

    size_t input_count() const { return inputs_.size(); }
    bool has_input(size_t i) const { return i < inputs_.size() && inputs_[i].has_value(); }
    const dsl::Layer &input(size_t i) const; // fails when absent
    // The ONNX element type of input i as the model declares it or shape inference infers it
    // (the graph holds a u16 as i64, a bf16 as f32); 0 when unknown.
    int32_t input_onnx_type(size_t i) const;
    // Input i, which must be a constant (a weight, an axis list): a constant layer, or a graph
    // input of a known value (ImportOptions::known_inputs) as one.
    const dsl::Layer &constant_layer(size_t i, const std::string &role);
    const Halide::Buffer<> &constant_input(size_t i, const std::string &role) {
        return dsl::constant_value(constant_layer(i, role));
    }
    std::vector<int64_t> constant_ints(size_t i, const std::string &role);
    // The DequantizeLinear that gave constant layer `constant`, or null.
    const DequantizedConstant *dequantized(const dsl::Layer &constant) const;
    void record_dequantized(const dsl::Layer &constant, DequantizedConstant source) {
        dequantized_[constant.name()] = std::move(source);
    }

    // Attributes; each read marks it handled: an attribute no handler reads is an error.
    bool has_attr(const std::string &name) const;
    int64_t attr_int(const std::string &name, int64_t default_value);
    float attr_float(const std::string &name, float default_value);
    std::vector<int64_t> attr_ints(const std::string &name, std::vector<int64_t> default_value);
    std::vector<float> attr_floats(const std::string &name, std::vector<float> default_value);
    std::string attr_string(const std::string &name, const std::string &default_value);
    Halide::Buffer<> attr_tensor(const std::string &name);
    // Requires that the attribute is absent or has `expected` ("ceil_mode must be 0").
    void expect_int(const std::string &name, int64_t expected, const std::string &why);
    // Throws for an attribute no handler read.
    void check_all_attributes_read() const;

    // A registry layer named `layer_name`, errors rethrown as ModelError naming the node.
    dsl::Layer build(const std::string &op, const std::string &layer_name,
                     const std::vector<dsl::Layer> &inputs, const dsl::Attrs &attrs) const;
    dsl::Layer build(const std::string &op, const std::vector<dsl::Layer> &inputs,
                     const dsl::Attrs &attrs) const {
        return build(op, name_, inputs, attrs);
    }
    // Each output of a layer of several (topk's values and indices) as a tuple_element layer,
    // named after the node's output of its index (NAME.i when the node leaves it unnamed).
    std::vector<dsl::Layer> outputs_of(const dsl::Layer &layer);

  private:
    const onnx::AttributeProto *attr(const std::string &name, int32_t type);

    const onnx::NodeProto &node_;
    std::string name_, file_;
    std::vector<std::optional<dsl::Layer>> inputs_;
    const ImportOptions &options_;
    UniqueNames &names_;
    const std::map<std::string, int32_t> &value_types_;
    DequantizedConstants &dequantized_;
    std::set<std::string> read_;
};

// What a node becomes: a layer per ONNX output (undefined for an output nobody may read).
using OpImporter = std::function<std::vector<dsl::Layer>(NodeImport &node)>;
const std::map<std::string, OpImporter> &op_importers();

// The handlers of ops in files of their own.
std::vector<dsl::Layer> batch_normalization(NodeImport &node);    // onnx_ops_norm.cpp
std::vector<dsl::Layer> instance_normalization(NodeImport &node); // onnx_ops_norm.cpp
std::vector<dsl::Layer> import_registry_layer(NodeImport &node);  // onnx_ops_registry.cpp
// onnx_ops_nn.cpp: resampling, layer normalization, Erf, products of two computed tensors, and
// global pools beyond the DPU's window.
std::vector<dsl::Layer> import_resize(NodeImport &node);
std::vector<dsl::Layer> import_layer_norm(NodeImport &node);
std::vector<dsl::Layer> import_erf(NodeImport &node);
std::vector<dsl::Layer> import_batch_matmul(NodeImport &node);
std::vector<dsl::Layer> import_linear(NodeImport &node);
std::vector<dsl::Layer> import_constant_eltwise(NodeImport &node, const std::string &op);
std::vector<dsl::Layer> import_global_pool(NodeImport &node, bool is_max);
// onnx_ops_scatter.cpp: GatherND, ScatterND, ScatterElements (and Scatter), ReverseSequence and
// MaxUnpool of constant indices (or lengths), as one gather of constant indices.
std::vector<dsl::Layer> import_gather_nd(NodeImport &node);
std::vector<dsl::Layer> import_scatter_nd(NodeImport &node);
std::vector<dsl::Layer> import_scatter_elements(NodeImport &node);
std::vector<dsl::Layer> import_reverse_sequence(NodeImport &node);
std::vector<dsl::Layer> import_max_unpool(NodeImport &node);
// onnx_ops_sample.cpp: GridSample of a constant grid and RoiAlign of constant boxes, as one
// weighted gather.
std::vector<dsl::Layer> import_grid_sample(NodeImport &node);
std::vector<dsl::Layer> import_roi_align(NodeImport &node);

// The convolution geometry readers of onnx_ops.cpp: an attribute of one entry per spatial
// dimension (`dims`, 1 or 2) as (H, W), and the pads [top, left, bottom, right] from `pads` or
// auto_pad for an input of rank 3 or 4.
std::vector<int64_t> pair_attr(NodeImport &node, const std::string &name, int dims,
                               std::vector<int64_t> default_value);
std::vector<int64_t> window_pads(NodeImport &node, const dsl::Shape &input,
                                 const std::vector<int64_t> &kernel,
                                 const std::vector<int64_t> &strides,
                                 const std::vector<int64_t> &dilations);
// A convolution's geometry attributes (strides, dilations, pads, groups) for an input `x` and
// weights `w` in ONNX's (oc, icg, kh, kw) or (oc, icg, kw) (1-D), checked against each other;
// `depthwise` when each channel is its own group.
dsl::Attrs conv_geometry(NodeImport &node, const dsl::Layer &x, const dsl::ConstValues &w,
                         bool &depthwise);
// ONNX's weights (oc, icg, kh, kw) or (oc, icg, kw) as the registry's logical (oc, kh, kw, icg).
dsl::ConstValues conv_layout(const dsl::ConstValues &w);

// Whether a layer along logical axis `axis` (negative counts from the end) of `x` would compute
// along the device's batch: axis 0 of a computed tensor of rank 2 or more.
bool along_batch(const dsl::Layer &x, int64_t axis);
// Layers compute image after image, so a layer along axis 0 runs on its inputs with a leading
// unit dimension (a view moving whole images: the batch becomes axis 1), and its result, `op`
// with `attrs` along the axis after, loses that dimension again as layer `name`.
dsl::Layer along_unit_batch(NodeImport &node, const std::string &op, const std::string &name,
                            const std::vector<dsl::Layer> &inputs, const dsl::Attrs &attrs);

// onnx_ops_quant.cpp: pre-quantized models (QDQ, QLinearConv, QLinearMatMul) as int8 layers.
bool reads_int8(const NodeImport &node); // input 0 is a u8/i8 tensor or its dequantize
// Input 0 is a quantized u8/i8 tensor or its dequantize (not a plain uint8/int8 tensor).
bool reads_quantized_int8(const NodeImport &node);
bool awaits_quantize(const dsl::Layer &layer); // an int8 result before its QuantizeLinear
std::vector<dsl::Layer> import_quant_conv(NodeImport &node);
std::vector<dsl::Layer> import_quant_fully_connected(NodeImport &node); // Gemm, MatMul
std::vector<dsl::Layer> import_quant_add(NodeImport &node);
std::vector<dsl::Layer> import_quant_activation(NodeImport &node); // Relu, Clip
std::vector<dsl::Layer> import_quantize_linear(NodeImport &node);
std::vector<dsl::Layer> import_dequantize_linear(NodeImport &node);
std::vector<dsl::Layer> import_qlinear_conv(NodeImport &node);
std::vector<dsl::Layer> import_qlinear_matmul(NodeImport &node);

} // namespace vpuc::frontend::detail
