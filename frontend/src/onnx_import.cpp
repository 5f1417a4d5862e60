// The ONNX importer: the graph's initializers become constants, its inputs graph inputs, and
// each node, in the model's (topological) order, the layers its op maps onto.
#include "frontend/onnx_import.h"

#include <algorithm>
#include <filesystem>

#include "algorithms/registry.h"
#include "dsl/constant_values.h"
#include "onnx_internal.h"
#include "vpu_target/input_file.h"

namespace vpuc::frontend {

namespace detail {

NodeImport::NodeImport(const onnx::NodeProto &node, std::string layer_name, std::string file,
                       std::vector<std::optional<dsl::Layer>> inputs, const ImportOptions &options,
                       UniqueNames &names, const std::map<std::string, int32_t> &value_types,
                       DequantizedConstants &dequantized)
    : node_(node), name_(std::move(layer_name)), file_(std::move(file)), inputs_(std::move(inputs)),
      options_(options), names_(names), value_types_(value_types), dequantized_(dequantized) {}

std::string UniqueNames::take(const std::string &wanted) {
    const std::string base = wanted.empty() ? "node" : wanted;
    std::string name = base;
    for (int k = 1; !used_.insert(name).second; ++k) name = base + "_" + std::to_string(k);
    return name;
}

void NodeImport::fail(const std::string &what) const {
    throw ModelError(file_ + ": node '" + name_ + "' (" + node_.op_type() + "): " + what);
}

const dsl::Layer &NodeImport::input(size_t i) const {
    if (!has_input(i)) fail("input " + std::to_string(i) + " is missing");
    return *inputs_[i];
}

int32_t NodeImport::input_onnx_type(size_t i) const {
    if (i >= size_t(node_.input_size())) return 0;
    const auto type = value_types_.find(node_.input(int(i)));
    return type == value_types_.end() ? 0 : type->second;
}

const dsl::Layer &NodeImport::constant_layer(size_t i, const std::string &role) {
    if (!has_input(i)) fail("input " + std::to_string(i) + " (" + role + ") is missing");
    dsl::Layer &in = *inputs_[i];
    if (in.is_input())
        if (const auto known = options_.known_inputs.find(in.name());
            known != options_.known_inputs.end())
            in = dsl::LayerRegistry::constant(unique_name(in.name()), known->second);
    if (!dsl::is_constant(in))
        fail("input " + std::to_string(i) + " (" + role + ", '" + node_.input(int(i)) +
             "') must be a constant (an initializer, or computed from constants)");
    return in;
}

const DequantizedConstant *NodeImport::dequantized(const dsl::Layer &constant) const {
    const auto found = dequantized_.find(constant.name());
    return found == dequantized_.end() ? nullptr : &found->second;
}

std::vector<int64_t> NodeImport::constant_ints(size_t i, const std::string &role) {
    const Halide::Buffer<> &value = constant_input(i, role);
    const dsl::ConstValues v = dsl::const_values(value, node_.input(int(i)));
    if (v.is_float()) fail("input " + std::to_string(i) + " (" + role + ") must be integers");
    return v.ints;
}

bool NodeImport::has_attr(const std::string &name) const {
    for (const onnx::AttributeProto &a : node_.attribute())
        if (a.name() == name) return true;
    return false;
}

const onnx::AttributeProto *NodeImport::attr(const std::string &name, int32_t type) {
    for (const onnx::AttributeProto &a : node_.attribute()) {
        if (a.name() != name) continue;
        read_.insert(name);
        if (a.type() != type)
            fail("attribute '" + name + "' is " +
                 onnx::AttributeProto::AttributeType_Name(a.type()) + ", not " +
                 onnx::AttributeProto::AttributeType_Name(
                     onnx::AttributeProto::AttributeType(type)));
        return &a;
    }
    return nullptr;
}

int64_t NodeImport::attr_int(const std::string &name, int64_t default_value) {
    const auto *a = attr(name, onnx::AttributeProto::INT);
    return a ? a->i() : default_value;
}

float NodeImport::attr_float(const std::string &name, float default_value) {
    const auto *a = attr(name, onnx::AttributeProto::FLOAT);
    return a ? a->f() : default_value;
}

std::vector<int64_t> NodeImport::attr_ints(const std::string &name,
                                           std::vector<int64_t> default_value) {
    const auto *a = attr(name, onnx::AttributeProto::INTS);
    return a ? std::vector<int64_t>(a->ints().begin(), a->ints().end()) : default_value;
}

std::vector<float> NodeImport::attr_floats(const std::string &name,
                                           std::vector<float> default_value) {
    const auto *a = attr(name, onnx::AttributeProto::FLOATS);
    return a ? std::vector<float>(a->floats().begin(), a->floats().end()) : default_value;
}

std::string NodeImport::attr_string(const std::string &name, const std::string &default_value) {
    const auto *a = attr(name, onnx::AttributeProto::STRING);
    return a ? a->s() : default_value;
}

Halide::Buffer<> NodeImport::attr_tensor(const std::string &name) {
    const auto *a = attr(name, onnx::AttributeProto::TENSOR);
    if (!a) fail("attribute '" + name + "' is missing");
    return tensor_value(a->t(), file_ + ": node '" + name_ + "': attribute '" + name + "'");
}

void NodeImport::expect_int(const std::string &name, int64_t expected, const std::string &why) {
    const int64_t value = attr_int(name, expected);
    if (value != expected)
        fail("attribute " + name + " = " + std::to_string(value) + " is not supported: " + why);
}

void NodeImport::check_all_attributes_read() const {
    for (const onnx::AttributeProto &a : node_.attribute())
        if (!read_.count(a.name())) fail("attribute '" + a.name() + "' is not supported");
}

dsl::Layer NodeImport::build(const std::string &op, const std::string &layer_name,
                             const std::vector<dsl::Layer> &inputs, const dsl::Attrs &attrs) const {
    try {
        return algorithms::layer_registry().build(op, layer_name, inputs, attrs);
    } catch (const ModelError &) {
        throw;
    } catch (const Error &e) {
        fail(e.what());
    }
}

std::vector<dsl::Layer> NodeImport::outputs_of(const dsl::Layer &layer) {
    std::vector<dsl::Layer> outputs;
    for (size_t i = 0; i < layer.outputs().size(); ++i) {
        const bool named = int(i) < node_.output_size() && !node_.output(int(i)).empty();
        outputs.push_back(dsl::LayerRegistry::output_of(
            unique_name(named ? node_.output(int(i)) : name_ + "." + std::to_string(i)), layer,
            int64_t(i)));
    }
    return outputs;
}

} // namespace detail

namespace {

// A graph input: its declared type (float ones in the precision's type) and static shape.
dsl::Layer graph_input(const onnx::ValueInfoProto &in, const std::string &path,
                       std::vector<std::string> &notes) {
    const std::string what = path + ": graph input '" + in.name() + "'";
    if (!in.type().has_tensor_type()) throw ModelError(what + ": not a tensor");
    const onnx::TypeProto_Tensor &type = in.type().tensor_type();
    dsl::TensorDesc t;
    t.name = in.name();
    t.type = detail::elem_type(type.elem_type(), what);
    const std::string model_type = detail::model_type_name(type.elem_type());
    if (t.type == dsl::ElemType::F32 || t.type == dsl::ElemType::F64) {
        notes.push_back("graph input '" + in.name() + "' is " + model_type +
                        " in the model and f16 on the device (precision fp16)");
        t.type = dsl::ElemType::F16;
    }
    if (t.type == dsl::ElemType::Bool) t.type = dsl::ElemType::U8; // the device's bools: 0, 1
    if (t.type == dsl::ElemType::I64) {
        // The device's widest integers (i64 holds the 16-bit and unsigned ones in the graph);
        // inputs are checked to fit when the blob runs.
        notes.push_back("graph input '" + in.name() + "' is " + model_type +
                        " in the model and i32 on the device (each value must fit; integer "
                        "arithmetic wraps at 32 bits)");
        t.type = dsl::ElemType::I32;
    }
    if (!type.has_shape()) throw ModelError(what + ": no shape; give one with --input-shape");
    std::vector<int64_t> shape;
    for (int i = 0; i < type.shape().dim_size(); ++i) {
        const onnx::TensorShapeProto_Dimension &d = type.shape().dim(i);
        if (!d.has_dim_value() || d.dim_value() < 1)
            throw ModelError(what + ": dimension " + std::to_string(i) + " is " +
                             (d.has_dim_param() ? "'" + d.dim_param() + "'" : "unknown") +
                             ", not a fixed extent; give the shape with --input-shape " +
                             in.name() + "=...");
        shape.push_back(d.dim_value());
    }
    if (shape.empty() || shape.size() > size_t(dsl::kMaxRank))
        throw ModelError(what + ": rank " + std::to_string(shape.size()) +
                         " (graph inputs have ranks 1 to " + std::to_string(dsl::kMaxRank) + ")");
    t.order =
        shape.size() == 4 ? dsl::DimsOrder::NHWC() : dsl::DimsOrder::identity(int(shape.size()));
    t.shape = dsl::Shape(shape);
    return dsl::Layer::input(t);
}

// The layer computing graph output `value` on the device: a constant (a scalar too), in its
// device type (dsl::to_device: i64 as i32, bool as u8, f64 as f32), copied from the blob's
// constants; a graph input copied by a cast to its own type; any other layer itself. A new layer
// is named after `output` (unless a node or input has that name). An empty constant has no
// device form.
dsl::Layer output_layer(const dsl::Layer &value, detail::UniqueNames &names,
                        const std::string &output, const std::string &what) {
    try {
        if (dsl::is_constant(value) && value.output().shape.elements() == 0)
            throw ModelError(what + ": an empty constant (" + dsl::to_string(value.output().shape) +
                             "); the device has no tensor of an extent 0");
        if (dsl::is_constant(value))
            return dsl::LayerRegistry::constant(
                names.take(output), dsl::to_device(value.output(), dsl::constant_value(value)));
        if (!value.is_input()) return value;
        dsl::Attrs attrs;
        attrs.set("to", std::string(dsl::to_string(value.output().type)));
        return algorithms::layer_registry().build("cast", names.take(output), {value}, attrs);
    } catch (const ModelError &) {
        throw;
    } catch (const Error &e) {
        throw ModelError(what + ": " + e.what());
    }
}

} // namespace

// The type of graph output `layer`'s values in a tensor file (ImportedModel::output_types),
// `onnx_type` as the model declares it; a note says where it is not the device's.
Halide::Type output_type(const dsl::Layer &layer, const std::string &name, int32_t onnx_type,
                         std::vector<std::string> &notes) {
    const Halide::Type device = dsl::halide_type(layer.output().type);
    Halide::Type model;
    switch (onnx_type) {
    case onnx::TensorProto::INT16:
        model = Halide::Int(16);
        break;
    case onnx::TensorProto::UINT16:
        model = Halide::UInt(16);
        break;
    case onnx::TensorProto::UINT32:
        model = Halide::UInt(32);
        break;
    case onnx::TensorProto::UINT64:
        model = Halide::UInt(64);
        break;
    case onnx::TensorProto::BFLOAT16:
        model = Halide::Float(32);
        break;
    default:
        return device;
    }
    notes.push_back("graph output '" + name + "' is " + detail::model_type_name(onnx_type) +
                    " in the model and " + dsl::to_string(layer.output().type) +
                    " on the device (read in the model's type, each value must fit)");
    return model;
}

std::vector<std::string> supported_onnx_ops() {
    std::vector<std::string> ops;
    for (const auto &[op, importer] : detail::op_importers()) ops.push_back(op);
    // Upsample (opset 7 to 9) becomes Resize when the version converter upgrades its model.
    ops.push_back("Upsample");
    for (const std::string &op : detail::function_ops()) ops.push_back(op);
    ops.push_back("Einsum"); // lowered to other ONNX ops before the import
    std::sort(ops.begin(), ops.end());
    return ops;
}

ImportedModel import_onnx_bytes(const std::vector<uint8_t> &bytes, const std::string &path,
                                const ImportOptions &options) {
    detail::LoadedModel loaded = detail::load_model(bytes, path, options);
    const onnx::GraphProto &g = loaded.proto.graph();
    std::vector<std::string> notes = loaded.notes, output_names;
    std::vector<Halide::Type> output_types;
    detail::UniqueNames names;
    detail::DequantizedConstants dequantized;
    std::map<std::string, dsl::Layer> values; // ONNX value name -> the layer computing it
    // ONNX value name -> its element type, as declared or inferred.
    std::map<std::string, int32_t> value_types;
    for (const auto *infos : {&g.input(), &g.value_info(), &g.output()})
        for (const onnx::ValueInfoProto &info : *infos)
            if (info.type().has_tensor_type() && info.type().tensor_type().elem_type())
                value_types[info.name()] = info.type().tensor_type().elem_type();
    for (const onnx::TensorProto &t : g.initializer()) value_types[t.name()] = t.data_type();
    for (const onnx::TensorProto &t : g.initializer())
        values[t.name()] = dsl::LayerRegistry::constant(
            names.take(t.name()),
            detail::tensor_value(t, path + ": initializer '" + t.name() + "'"));
    for (const onnx::ValueInfoProto &in : g.input()) {
        if (values.count(in.name())) continue; // an initializer (IR < 4 lists them as inputs)
        if (names.take(in.name()) != in.name())
            throw ModelError(path + ": graph input '" + in.name() + "' is named twice");
        try {
            values[in.name()] = graph_input(in, path, notes);
        } catch (const ModelError &) {
            // A known input no graph input can hold (a scalar Clip bound) is a constant.
            const auto known = options.known_inputs.find(in.name());
            if (known == options.known_inputs.end()) throw;
            values[in.name()] = dsl::LayerRegistry::constant(in.name(), known->second);
        }
    }
    const auto &importers = detail::op_importers();
    for (const onnx::NodeProto &node : g.node()) {
        // Unnamed, a node takes the name of its output, or, with several, of its op.
        const std::string name = names.take(!node.name().empty()      ? node.name()
                                            : node.output_size() == 1 ? node.output(0)
                                                                      : node.op_type());
        const std::string what = path + ": node '" + name + "' (" + node.op_type() + ")";
        const bool registry_layer = node.domain() == kRegistryDomain;
        if (!node.domain().empty() && node.domain() != "ai.onnx" && !registry_layer)
            throw ModelError(what + ": domain '" + node.domain() + "' is not supported (only " +
                             "ONNX's, and '" + kRegistryDomain + "' for layers of the registry)");
        const auto importer = importers.find(node.op_type());
        if (!registry_layer && importer == importers.end())
            throw ModelError(what + ": op " + node.op_type() +
                             " is not supported (docs/onnx.md lists the supported ops)");
        std::vector<std::optional<dsl::Layer>> inputs;
        for (const std::string &in : node.input()) {
            if (in.empty()) {
                inputs.push_back(std::nullopt);
                continue;
            }
            const auto value = values.find(in);
            if (value == values.end())
                throw ModelError(what + ": input '" + in + "' is computed by no earlier node");
            inputs.push_back(value->second);
        }
        detail::NodeImport import(node, name, path, std::move(inputs), options, names, value_types,
                                  dequantized);
        const std::vector<dsl::Layer> outputs =
            registry_layer ? detail::import_registry_layer(import) : importer->second(import);
        import.check_all_attributes_read();
        for (int i = 0; i < node.output_size(); ++i) {
            if (node.output(i).empty()) continue;
            if (size_t(i) >= outputs.size() || !outputs[size_t(i)].defined())
                import.fail("output " + std::to_string(i) + " ('" + node.output(i) +
                            "') is not supported");
            values[node.output(i)] = outputs[size_t(i)];
        }
    }
    std::vector<dsl::Layer> outputs;
    for (const onnx::ValueInfoProto &out : g.output()) {
        const std::string what = path + ": graph output '" + out.name() + "'";
        const auto value = values.find(out.name());
        if (value == values.end()) throw ModelError(what + ": computed by no node");
        outputs.push_back(output_layer(value->second, names, out.name(), what));
        output_names.push_back(out.name());
        output_types.push_back(
            output_type(outputs.back(), out.name(), out.type().tensor_type().elem_type(), notes));
    }
    if (outputs.empty()) throw ModelError(path + ": the graph has no outputs");
    const std::string graph_name =
        !g.name().empty() ? g.name() : std::filesystem::path(path).stem().string();
    try {
        dsl::Graph graph(graph_name.empty() ? "model" : graph_name, outputs);
        // A graph output's layer takes the output's name, so that results are named as the
        // model names them (in the blob, in .npz files and in comparisons with ONNX's).
        for (size_t i = 0; i < outputs.size(); ++i)
            if (outputs[i].name() != output_names[i] &&
                names.take(output_names[i]) == output_names[i])
                graph.rename(outputs[i].name(), output_names[i]);
        graph.verify(&algorithms::layer_registry());
        return {std::move(graph),        loaded.opset,
                loaded.original_opset,   std::move(output_names),
                std::move(output_types), std::move(notes)};
    } catch (const ModelError &) {
        throw;
    } catch (const Error &e) {
        throw ModelError(path + ": " + e.what());
    }
}

ImportedModel import_onnx(const std::string &path, const ImportOptions &options) {
    const std::vector<uint8_t> bytes = files::read_input_file(path, files::FileKind::Model);
    return import_onnx_bytes(bytes, path, options);
}

} // namespace vpuc::frontend
