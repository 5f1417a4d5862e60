// Reading an ONNX model: the protobuf, its external data (from inside the model's directory
// only), the input shapes the user gives, ONNX's checker, the version converter and shape
// inference.
#include <onnx/checker.h>
#include <onnx/defs/schema.h>
#include <onnx/shape_inference/implementation.h>
#include <onnx/version_converter/convert.h>

#include <algorithm>
#include <filesystem>
#include <limits>
#include <map>

#include "onnx_internal.h"
#include "vpu_target/input_file.h"
#include "vpu_target/printable.h"

namespace vpuc::frontend::detail {

namespace {

namespace fs = std::filesystem;

// An unsigned decimal number, as external data's offset and length are written.
std::optional<uint64_t> parse_count(const std::string &text) {
    if (text.empty() || text.size() > 19) return std::nullopt;
    uint64_t value = 0;
    for (char ch : text) {
        if (ch < '0' || ch > '9') return std::nullopt;
        value = value * 10 + uint64_t(ch - '0');
    }
    return value;
}

// Loads every tensor of the model stored in external files, each from a file inside the model's
// directory: a location that is absolute, climbs out with "..", or resolves outside through a
// symbolic link is refused (CVE-2022-25882), as is a file other than a regular one, or a range
// past its end. Files are read once each, under the model file's size limit.
class ExternalData {
  public:
    explicit ExternalData(const std::string &model_path) : model_path_(model_path) {}

    void load(onnx::GraphProto &graph) {
        for (onnx::TensorProto &t : *graph.mutable_initializer()) load(t, "initializer");
        for (onnx::SparseTensorProto &s : *graph.mutable_sparse_initializer()) {
            load(*s.mutable_values(), "sparse initializer");
            load(*s.mutable_indices(), "sparse initializer");
        }
        for (onnx::NodeProto &node : *graph.mutable_node())
            for (onnx::AttributeProto &a : *node.mutable_attribute()) {
                const std::string what =
                    "attribute '" + a.name() + "' of node '" + node.name() + "'";
                if (a.has_t()) load(*a.mutable_t(), what);
                for (onnx::TensorProto &t : *a.mutable_tensors()) load(t, what);
                if (a.has_g()) load(*a.mutable_g());
                for (onnx::GraphProto &g : *a.mutable_graphs()) load(g);
            }
    }

  private:
    [[noreturn]] void fail(const std::string &tensor, const std::string &what) const {
        throw ModelError(model_path_ + ": tensor '" + tensor + "': external data: " + what);
    }

    void load(onnx::TensorProto &t, const std::string &role) {
        if (t.data_location() != onnx::TensorProto::EXTERNAL) return;
        std::string location;
        std::optional<uint64_t> offset = 0, length;
        for (const auto &entry : t.external_data()) {
            if (entry.key() == "location") {
                location = entry.value();
            } else if (entry.key() == "offset") {
                offset = parse_count(entry.value());
                if (!offset) fail(t.name(), "offset '" + entry.value() + "' is not a number");
            } else if (entry.key() == "length") {
                length = parse_count(entry.value());
                if (!length) fail(t.name(), "length '" + entry.value() + "' is not a number");
            }
        }
        uint64_t count = 1;
        for (int64_t d : t.dims()) {
            if (d < 0 || (d > 0 && count > std::numeric_limits<uint64_t>::max() / uint64_t(d)))
                fail(t.name(), "the " + role + "'s dims are negative or overflow");
            count *= uint64_t(d);
        }
        const std::optional<uint64_t> bytes = tensor_bytes(t.data_type(), count);
        if (!bytes) fail(t.name(), "the " + role + " has no fixed-size element type");
        if (length && *length != *bytes)
            fail(t.name(), "length " + std::to_string(*length) + " is not the " +
                               std::to_string(*bytes) + " bytes its dims and type take");
        const std::vector<uint8_t> &file = file_at(t.name(), location);
        if (*offset > file.size() || *bytes > file.size() - *offset)
            fail(t.name(), "bytes [" + std::to_string(*offset) + ", " +
                               std::to_string(*offset + *bytes) + ") run past the end of '" +
                               location + "' (" + std::to_string(file.size()) + " bytes)");
        t.set_raw_data(file.data() + *offset, size_t(*bytes));
        t.clear_external_data();
        t.set_data_location(onnx::TensorProto::DEFAULT);
    }

    const std::vector<uint8_t> &file_at(const std::string &tensor, const std::string &location) {
        if (auto it = files_.find(location); it != files_.end()) return it->second;
        if (model_path_.empty()) fail(tensor, "a model read from memory has no directory");
        if (location.empty()) fail(tensor, "no location");
        const fs::path relative(location);
        if (relative.is_absolute() || relative.has_root_name() || relative.has_root_directory())
            fail(tensor, "location '" + location +
                             "' is absolute; it must lie inside the "
                             "model's directory");
        for (const fs::path &part : relative)
            if (part == "..")
                fail(tensor, "location '" + location + "' leaves the model's directory");
        std::error_code error;
        const fs::path dir =
            fs::canonical(fs::absolute(fs::path(model_path_)).parent_path(), error);
        if (error) fail(tensor, "cannot resolve the model's directory: " + error.message());
        const fs::path resolved = fs::weakly_canonical(dir / relative, error);
        if (error) fail(tensor, "cannot resolve '" + location + "': " + error.message());
        const auto [dir_end, unused] =
            std::mismatch(dir.begin(), dir.end(), resolved.begin(), resolved.end());
        if (dir_end != dir.end())
            fail(tensor, "location '" + location + "' resolves to '" + resolved.string() +
                             "', outside the model's directory");
        try {
            return files_[location] =
                       files::read_input_file(resolved.string(), files::FileKind::Model);
        } catch (const files::InputFileError &e) {
            fail(tensor, e.what());
        }
    }

    std::string model_path_;
    std::map<std::string, std::vector<uint8_t>> files_;
};

// Replaces the declared shapes of the graph inputs named in `shapes`.
void apply_input_shapes(onnx::GraphProto &graph, const std::string &path,
                        const std::map<std::string, std::vector<int64_t>> &shapes) {
    std::set<std::string> initializers;
    for (const onnx::TensorProto &t : graph.initializer()) initializers.insert(t.name());
    for (const auto &[name, shape] : shapes) {
        onnx::ValueInfoProto *input = nullptr;
        std::string known;
        for (onnx::ValueInfoProto &in : *graph.mutable_input()) {
            if (initializers.count(in.name())) continue;
            known += (known.empty() ? "'" : ", '") + in.name() + "'";
            if (in.name() == name) input = &in;
        }
        const std::string what = path + ": input shape for '" + name + "': ";
        if (!input) throw ModelError(what + "the model has no such input (inputs: " + known + ")");
        if (!input->type().has_tensor_type()) throw ModelError(what + "the input is not a tensor");
        onnx::TypeProto_Tensor &type = *input->mutable_type()->mutable_tensor_type();
        if (type.has_shape() && type.shape().dim_size() != int(shape.size()))
            throw ModelError(what + "the model declares rank " +
                             std::to_string(type.shape().dim_size()) + ", not " +
                             std::to_string(shape.size()));
        type.mutable_shape()->clear_dim();
        for (int64_t extent : shape) {
            if (extent < 1) throw ModelError(what + "extents must be at least 1");
            type.mutable_shape()->add_dim()->set_dim_value(extent);
        }
    }
}

// Every graph output, of the graph and of the sub-graphs in its nodes' attributes, must be a
// value the graph defines or, for a sub-graph, sees from outside. ONNX 1.12's checker lets an
// undefined one pass, and its version converter then dereferences a null value.
void check_outputs_defined(const onnx::GraphProto &graph, std::set<std::string> visible,
                           const std::string &path) {
    for (const onnx::ValueInfoProto &in : graph.input()) visible.insert(in.name());
    for (const onnx::TensorProto &t : graph.initializer()) visible.insert(t.name());
    for (const onnx::SparseTensorProto &s : graph.sparse_initializer())
        visible.insert(s.values().name());
    for (const onnx::NodeProto &node : graph.node())
        visible.insert(node.output().begin(), node.output().end());
    for (const onnx::ValueInfoProto &out : graph.output())
        if (!visible.count(out.name()))
            throw ModelError(path + ": graph '" + printable(graph.name()) + "': output '" +
                             printable(out.name()) +
                             "' is no node's output, graph input or initializer");
    for (const onnx::NodeProto &node : graph.node())
        for (const onnx::AttributeProto &a : node.attribute()) {
            if (a.has_g()) check_outputs_defined(a.g(), visible, path);
            for (const onnx::GraphProto &g : a.graphs()) check_outputs_defined(g, visible, path);
        }
}

// ONNX 1.12 infers LayerNormalization's Mean and InvStdDev shapes by indexing the input's dims
// from `axis` on, without checking the axis against the rank: below -rank it reads outside
// them. The ranks come from inferring a copy whose LayerNormalization nodes keep only their
// first output (that part of the inference is sound), and such an axis is refused first.
bool is_layer_norm_with_stats(const onnx::NodeProto &node) {
    return node.op_type() == "LayerNormalization" &&
           (node.domain().empty() || node.domain() == "ai.onnx") && node.output_size() > 1;
}

bool has_layer_norm_with_stats(const onnx::GraphProto &graph) {
    for (const onnx::NodeProto &node : graph.node()) {
        if (is_layer_norm_with_stats(node)) return true;
        for (const onnx::AttributeProto &a : node.attribute()) {
            if (a.has_g() && has_layer_norm_with_stats(a.g())) return true;
            for (const onnx::GraphProto &g : a.graphs())
                if (has_layer_norm_with_stats(g)) return true;
        }
    }
    return false;
}

void keep_first_outputs_of_layer_norms(onnx::GraphProto &graph) {
    for (onnx::NodeProto &node : *graph.mutable_node()) {
        if (is_layer_norm_with_stats(node))
            node.mutable_output()->DeleteSubrange(1, node.output_size() - 1);
        for (onnx::AttributeProto &a : *node.mutable_attribute()) {
            if (a.has_g()) keep_first_outputs_of_layer_norms(*a.mutable_g());
            for (onnx::GraphProto &g : *a.mutable_graphs()) keep_first_outputs_of_layer_norms(g);
        }
    }
}

// `ranks` holds the values visible from outside the graph; the inferred copy's graph is walked
// beside the model's own, node for node.
void check_layer_norm_axes(const onnx::GraphProto &graph, const onnx::GraphProto &inferred,
                           std::map<std::string, int> ranks, const std::string &path) {
    auto note = [&](const onnx::ValueInfoProto &v) {
        if (v.type().has_tensor_type() && v.type().tensor_type().has_shape())
            ranks[v.name()] = v.type().tensor_type().shape().dim_size();
    };
    for (const onnx::ValueInfoProto &v : inferred.input()) note(v);
    for (const onnx::ValueInfoProto &v : inferred.value_info()) note(v);
    for (const onnx::ValueInfoProto &v : inferred.output()) note(v);
    for (const onnx::TensorProto &t : inferred.initializer()) ranks[t.name()] = t.dims_size();
    for (int n = 0; n < graph.node_size() && n < inferred.node_size(); ++n) {
        const onnx::NodeProto &node = graph.node(n);
        if (is_layer_norm_with_stats(node) && node.input_size() > 0) {
            const auto rank = ranks.find(node.input(0));
            int64_t axis = -1;
            for (const onnx::AttributeProto &a : node.attribute())
                if (a.name() == "axis") axis = a.i();
            if (rank != ranks.end() && (axis < -rank->second || axis >= rank->second))
                throw ModelError(
                    path + ": node '" + printable(node.name()) + "' (LayerNormalization): axis " +
                    std::to_string(axis) + " is outside [-" + std::to_string(rank->second) + ", " +
                    std::to_string(rank->second) + ") for input '" + printable(node.input(0)) +
                    "' of rank " + std::to_string(rank->second));
        }
        const onnx::NodeProto &inferred_node = inferred.node(n);
        for (int i = 0; i < node.attribute_size() && i < inferred_node.attribute_size(); ++i) {
            const onnx::AttributeProto &a = node.attribute(i), &b = inferred_node.attribute(i);
            if (a.has_g() && b.has_g()) check_layer_norm_axes(a.g(), b.g(), ranks, path);
            for (int g = 0; g < a.graphs_size() && g < b.graphs_size(); ++g)
                check_layer_norm_axes(a.graphs(g), b.graphs(g), ranks, path);
        }
    }
}

void check_layer_norm_axes(const onnx::ModelProto &model, const std::string &path) {
    if (!has_layer_norm_with_stats(model.graph())) return;
    onnx::ModelProto copy = model;
    keep_first_outputs_of_layer_norms(*copy.mutable_graph());
    try {
        onnx::shape_inference::InferShapes(copy);
    } catch (const std::exception &) {
        // The real inference below reports what fails.
    }
    check_layer_norm_axes(model.graph(), copy.graph(), {}, path);
}

// Before opset 13 Hardmax took its input as a matrix: the axes before `axis` (default 1) its
// rows, the rest its columns. ONNX 1.12's version converter upgrades the node unchanged (it
// rewrites Softmax and LogSoftmax, whose meaning changed alike), so each upgraded Hardmax
// becomes that matrix form at opset 13: its input's Shape, a Flatten at the axis (NODE.rows),
// the Hardmax along the rows (NODE.hardmax) and a Reshape back to the input's shape, which
// computes the node's output under its name.
void upgrade_hardmax(onnx::GraphProto &graph) {
    google::protobuf::RepeatedPtrField<onnx::NodeProto> nodes;
    auto axis_attribute = [](onnx::NodeProto &node, int64_t axis) {
        onnx::AttributeProto &a = *node.add_attribute();
        a.set_name("axis");
        a.set_type(onnx::AttributeProto::INT);
        a.set_i(axis);
    };
    for (const onnx::NodeProto &node : graph.node()) {
        const bool onnx_domain = node.domain().empty() || node.domain() == "ai.onnx";
        if (node.op_type() != "Hardmax" || !onnx_domain || node.input_size() != 1 ||
            node.output_size() != 1) {
            *nodes.Add() = node;
            continue;
        }
        int64_t axis = 1;
        for (const onnx::AttributeProto &a : node.attribute())
            if (a.name() == "axis") axis = a.i();
        const std::string base = node.name().empty() ? node.output(0) : node.name();
        const std::string &x = node.input(0), &y = node.output(0);
        onnx::NodeProto &shape = *nodes.Add();
        shape.set_op_type("Shape");
        shape.set_name(base + ".shape");
        shape.add_input(x);
        shape.add_output(y + ".shape");
        onnx::NodeProto &rows = *nodes.Add();
        rows.set_op_type("Flatten");
        rows.set_name(base + ".rows");
        rows.add_input(x);
        rows.add_output(y + ".rows");
        axis_attribute(rows, axis);
        onnx::NodeProto &hardmax = *nodes.Add();
        hardmax.set_op_type("Hardmax");
        hardmax.set_name(base + ".hardmax");
        hardmax.add_input(y + ".rows");
        hardmax.add_output(y + ".hardmax");
        axis_attribute(hardmax, 1);
        onnx::NodeProto &back = *nodes.Add();
        back.set_op_type("Reshape");
        back.set_name(node.name());
        back.add_input(y + ".hardmax");
        back.add_input(y + ".shape");
        back.add_output(y);
    }
    graph.mutable_node()->Swap(&nodes);
}

// Before opset 7 PRelu's slope was one value or one per channel (axis 1), where opset 7 on
// broadcasts it from the last axis; ONNX 1.12's version converter upgrades the node unchanged.
// So a constant slope of C values for an input of rank 3 or more becomes a copy of shape
// [C, 1, ...] (NAME.per_channel), which broadcasts along axis 1. The input's rank comes from the
// shape inference before the upgrade.
void upgrade_prelu_slopes(onnx::GraphProto &graph) {
    const std::string kPerChannel = ".per_channel";
    std::map<std::string, int> ranks;
    for (const auto *values : {&graph.input(), &graph.value_info()})
        for (const onnx::ValueInfoProto &v : *values)
            if (v.type().has_tensor_type() && v.type().tensor_type().has_shape())
                ranks[v.name()] = v.type().tensor_type().shape().dim_size();
    std::map<std::string, const onnx::TensorProto *> initializers;
    for (const onnx::TensorProto &t : graph.initializer()) initializers[t.name()] = &t;
    std::vector<onnx::TensorProto> per_channel;
    for (onnx::NodeProto &node : *graph.mutable_node()) {
        const bool onnx_domain = node.domain().empty() || node.domain() == "ai.onnx";
        if (node.op_type() != "PRelu" || !onnx_domain || node.input_size() != 2) continue;
        const auto rank = ranks.find(node.input(0));
        const auto slope = initializers.find(node.input(1));
        if (rank == ranks.end() || rank->second < 3 || slope == initializers.end() ||
            slope->second->dims_size() != 1 || slope->second->dims(0) < 2)
            continue;
        onnx::TensorProto copy = *slope->second;
        copy.set_name(slope->first + kPerChannel);
        for (int d = 2; d < rank->second; ++d) copy.add_dims(1);
        node.set_input(1, copy.name());
        per_channel.push_back(std::move(copy));
    }
    for (onnx::TensorProto &t : per_channel) {
        if (initializers.count(t.name())) continue; // a slope two PRelus share: copied once
        initializers[t.name()] = nullptr;
        // Models of IR version 3 list their initializers as graph inputs too, as the converter
        // expects of them.
        const std::string original = t.name().substr(0, t.name().size() - kPerChannel.size());
        for (int i = 0; i < graph.input_size(); ++i) {
            if (graph.input(i).name() != original) continue;
            onnx::ValueInfoProto input = graph.input(i);
            input.set_name(t.name());
            onnx::TensorShapeProto &shape =
                *input.mutable_type()->mutable_tensor_type()->mutable_shape();
            shape.clear_dim();
            for (int64_t d : t.dims()) shape.add_dim()->set_dim_value(d);
            *graph.add_input() = std::move(input);
            break;
        }
        *graph.add_initializer() = std::move(t);
    }
}

} // namespace

LoadedModel load_model(const std::vector<uint8_t> &bytes, const std::string &path,
                       const ImportOptions &options) {
    auto fail = [&](const std::string &what) { throw ModelError(path + ": " + what); };
    LoadedModel m;
    if (bytes.size() > size_t(std::numeric_limits<int>::max()))
        fail("larger than the 2 GiB a protobuf can hold");
    if (!m.proto.ParseFromArray(bytes.data(), int(bytes.size())))
        fail("not an ONNX model: the protobuf does not parse (truncated, or another format)");
    if (!m.proto.has_graph()) fail("not an ONNX model: it has no graph");
    bool declared = false;
    for (const onnx::OperatorSetIdProto &set : m.proto.opset_import())
        if (set.domain().empty() || set.domain() == "ai.onnx") {
            m.original_opset = set.version();
            declared = true;
        }
    if (!declared) fail("it imports no opset of the default ONNX domain (opset_import)");
    if (m.original_opset < 1 || m.original_opset > kNewestOpset)
        fail("opset " + std::to_string(m.original_opset) + " is not one of 1.." +
             std::to_string(kNewestOpset) + ", the opsets ONNX 1.12 knows");
    ExternalData(path).load(*m.proto.mutable_graph());
    apply_input_shapes(*m.proto.mutable_graph(), path, options.input_shapes);
    try {
        onnx::checker::check_model(m.proto);
    } catch (const std::exception &e) {
        fail(std::string("ONNX's checker rejects the model: ") + e.what());
    }
    check_outputs_defined(m.proto.graph(), {}, path);
    m.opset = m.original_opset;
    if (m.opset < kUpgradedOpset) {
        // The converter's adapters (Gemm's and Add's broadcasting before opset 7) read the
        // shapes of their inputs, which an intermediate value has only once inferred.
        try {
            onnx::shape_inference::InferShapes(m.proto);
        } catch (const std::exception &e) {
            fail(std::string("ONNX's shape inference fails before the upgrade to opset ") +
                 std::to_string(kUpgradedOpset) + ": " + e.what());
        }
        if (m.opset < 7) upgrade_prelu_slopes(*m.proto.mutable_graph());
        try {
            m.proto = onnx::version_conversion::ConvertVersion(m.proto, int(kUpgradedOpset));
        } catch (const std::exception &e) {
            fail("ONNX's version converter cannot upgrade opset " + std::to_string(m.opset) +
                 " to " + std::to_string(kUpgradedOpset) + ": " + e.what());
        }
        upgrade_hardmax(*m.proto.mutable_graph());
        m.notes.push_back("upgraded from opset " + std::to_string(m.opset) + " to " +
                          std::to_string(kUpgradedOpset) + " by ONNX's version converter");
        m.opset = kUpgradedOpset;
    }
    check_layer_norm_axes(m.proto, path);
    infer_shapes(m.proto, path, "");
    if (lower_einsums(m.proto, path)) infer_shapes(m.proto, path, " after Einsum's lowering");
    expand_functions(m.proto, m.opset, path, m.notes);
    return m;
}

void infer_shapes(onnx::ModelProto &model, const std::string &path, const std::string &when) {
    try {
        onnx::shape_inference::InferShapes(model, onnx::OpSchemaRegistry::Instance(),
                                           onnx::ShapeInferenceOptions(true, 1, true));
    } catch (const std::exception &e) {
        throw ModelError(path + ": ONNX's shape inference fails" + when + ": " + e.what());
    }
}

} // namespace vpuc::frontend::detail
