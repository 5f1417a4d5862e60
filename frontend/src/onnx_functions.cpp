// ONNX ops defined by a function: ONNX's schema gives each of these a body of other ONNX ops
// (for some built from the node's attributes and input types), and the importer replaces the
// node by that body, so that the ops it is made of import as usual.
#include <onnx/defs/schema.h>

#include <algorithm>
#include <map>
#include <set>

#include "onnx_internal.h"
#include "vpu_target/printable.h"

namespace vpuc::frontend::detail {

namespace {

// A body may hold ops expanded in turn (SoftmaxCrossEntropyLoss's holds a
// NegativeLogLikelihoodLoss); no schema's nests deeper than this.
constexpr int kMaxNesting = 4;

bool expands(const onnx::NodeProto &node) {
    if (!is_onnx_domain(node.domain())) return false;
    const std::vector<std::string> &ops = function_ops();
    return std::find(ops.begin(), ops.end(), node.op_type()) != ops.end();
}

std::map<std::string, onnx::TypeProto> value_types(const onnx::GraphProto &graph) {
    std::map<std::string, onnx::TypeProto> types;
    for (const auto *infos : {&graph.input(), &graph.output(), &graph.value_info()})
        for (const onnx::ValueInfoProto &v : *infos) types[v.name()] = v.type();
    for (const onnx::TensorProto &t : graph.initializer()) {
        onnx::TypeProto type;
        onnx::TypeProto_Tensor &tensor = *type.mutable_tensor_type();
        tensor.set_elem_type(t.data_type());
        for (int64_t d : t.dims()) tensor.mutable_shape()->add_dim()->set_dim_value(d);
        types[t.name()] = type;
    }
    return types;
}

// Whether two versions of an op take the same inputs, outputs and attributes.
bool same_signature(const onnx::OpSchema &a, const onnx::OpSchema &b) {
    auto names = [](const std::vector<onnx::OpSchema::FormalParameter> &params) {
        std::vector<std::string> out;
        for (const auto &p : params) out.push_back(p.GetName());
        return out;
    };
    auto attributes = [](const onnx::OpSchema &op) {
        std::set<std::string> out;
        for (const auto &[name, attribute] : op.attributes()) out.insert(name);
        return out;
    };
    return names(a.inputs()) == names(b.inputs()) && names(a.outputs()) == names(b.outputs()) &&
           attributes(a) == attributes(b);
}

class FunctionExpansion {
  public:
    FunctionExpansion(onnx::GraphProto &graph, int64_t opset, const std::string &path)
        : graph_(graph), opset_(opset), path_(path), names_(value_names(graph)),
          types_(value_types(graph)) {}

    // Replaces every node of a listed op by its body; adds the ops replaced to `expanded`.
    void run(std::set<std::string> &expanded) {
        google::protobuf::RepeatedPtrField<onnx::NodeProto> nodes;
        for (const onnx::NodeProto &node : graph_.node()) {
            if (!expands(node)) {
                *nodes.Add() = node;
                continue;
            }
            append_body(node, nodes);
            expanded.insert(node.op_type());
        }
        graph_.mutable_node()->Swap(&nodes);
    }

  private:
    [[noreturn]] void fail(const onnx::NodeProto &node, const std::string &what) const {
        const std::string name =
            node.name().empty() && node.output_size() > 0 ? node.output(0) : node.name();
        throw ModelError(path_ + ": node '" + printable(name) + "' (" + node.op_type() +
                         "): " + what);
    }

    // The body of `node`'s op, as its schema at the model's opset defines it for this node.
    onnx::FunctionProto body(const onnx::NodeProto &node) const {
        const onnx::OpSchema *schema =
            onnx::OpSchemaRegistry::Schema(node.op_type(), int(opset_), "");
        if (!schema) fail(node, "ONNX defines no such op at opset " + std::to_string(opset_));
        onnx::FunctionProto function;
        if (schema->HasFunction()) {
            function = *schema->GetFunction();
        } else {
            std::vector<onnx::TypeProto> input_types;
            for (const std::string &in : node.input()) {
                const auto type = types_.find(in);
                input_types.push_back(type == types_.end() ? onnx::TypeProto() : type->second);
            }
            const onnx::FunctionBodyBuildContextImpl context(node, input_types);
            bool built = false;
            try {
                built = schema->HasContextDependentFunction() &&
                        schema->BuildContextDependentFunction(context, function);
            } catch (const std::exception &e) {
                fail(node,
                     std::string("ONNX's schema cannot build its function body: ") + e.what());
            }
            if (!built)
                fail(node, "ONNX's schema builds no function body for this node (are its "
                           "inputs' types known?)");
        }
        check_body_opset(node, *schema, function);
        return function;
    }

    // The body is written for the opset it imports, its nodes imported at the model's: each op
    // of it must have the same inputs, outputs and attributes at both, a later version differing
    // in its element types only (Add 14 and Pow 15 in MeanVarianceNormalization's body of opset
    // 13).
    void check_body_opset(const onnx::NodeProto &node, const onnx::OpSchema &schema,
                          const onnx::FunctionProto &function) const {
        int64_t body_opset = schema.since_version();
        for (const onnx::OperatorSetIdProto &set : function.opset_import())
            if (is_onnx_domain(set.domain())) body_opset = set.version();
        for (const onnx::NodeProto &inner : function.node()) {
            if (!is_onnx_domain(inner.domain()))
                fail(node, "its function body uses op " + inner.op_type() + " of domain '" +
                               inner.domain() + "'");
            const onnx::OpSchema *written =
                onnx::OpSchemaRegistry::Schema(inner.op_type(), int(body_opset), "");
            const onnx::OpSchema *here =
                onnx::OpSchemaRegistry::Schema(inner.op_type(), int(opset_), "");
            if (!written || !here || here->deprecated() || !same_signature(*written, *here))
                fail(node, "its function body uses " + inner.op_type() + " as opset " +
                               std::to_string(body_opset) + " defines it, and opset " +
                               std::to_string(opset_) + " defines it otherwise");
        }
    }

    std::string fresh_name(const std::string &wanted) {
        std::string name = wanted;
        for (int k = 1; !names_.insert(name).second; ++k) name = wanted + "_" + std::to_string(k);
        return name;
    }

    // The body's nodes with the function's formal inputs and outputs bound to the node's
    // values (an omitted optional input to ""), its own values renamed NODE/VALUE, and attributes
    // that refer to the node's taken from it, or from the schema's default, or left out.
    void append_body(const onnx::NodeProto &node,
                     google::protobuf::RepeatedPtrField<onnx::NodeProto> &nodes) {
        const onnx::FunctionProto function = body(node);
        const onnx::OpSchema &schema =
            *onnx::OpSchemaRegistry::Schema(node.op_type(), int(opset_), "");
        const std::string prefix =
            (node.name().empty() ? (node.output_size() > 0 ? node.output(0) : node.op_type())
                                 : node.name()) +
            "/";
        std::map<std::string, std::string> bound;
        for (int i = 0; i < function.input_size(); ++i)
            bound[function.input(i)] = i < node.input_size() ? node.input(i) : "";
        // An output the node leaves out is still computed under a name of its own, as another
        // node of the body may read it; no graph output reads it.
        for (int i = 0; i < function.output_size() && i < node.output_size(); ++i)
            if (!node.output(i).empty()) bound[function.output(i)] = node.output(i);
        auto value = [&](const std::string &name) -> std::string {
            if (name.empty()) return name;
            auto found = bound.find(name);
            if (found == bound.end()) found = bound.emplace(name, fresh_name(prefix + name)).first;
            return found->second;
        };
        std::map<std::string, const onnx::AttributeProto *> node_attributes;
        for (const onnx::AttributeProto &a : node.attribute()) node_attributes[a.name()] = &a;
        for (const onnx::NodeProto &inner : function.node()) {
            onnx::NodeProto &out = *nodes.Add();
            out.set_op_type(inner.op_type());
            out.set_domain(inner.domain());
            out.set_name(
                fresh_name(prefix + (inner.name().empty() ? inner.op_type() : inner.name())));
            for (const std::string &in : inner.input()) out.add_input(value(in));
            for (const std::string &o : inner.output()) out.add_output(value(o));
            for (const onnx::AttributeProto &a : inner.attribute()) {
                if (a.ref_attr_name().empty()) {
                    *out.add_attribute() = a;
                    continue;
                }
                onnx::AttributeProto given;
                if (const auto from_node = node_attributes.find(a.ref_attr_name());
                    from_node != node_attributes.end()) {
                    given = *from_node->second;
                } else if (const auto declared = schema.attributes().find(a.ref_attr_name());
                           declared != schema.attributes().end() &&
                           declared->second.default_value.type() !=
                               onnx::AttributeProto::UNDEFINED) {
                    given = declared->second.default_value;
                } else {
                    continue;
                }
                given.set_name(a.name());
                *out.add_attribute() = std::move(given);
            }
        }
    }

    onnx::GraphProto &graph_;
    int64_t opset_;
    const std::string &path_;
    std::set<std::string> names_;
    std::map<std::string, onnx::TypeProto> types_;
};

bool has_function_op(const onnx::GraphProto &graph) {
    return std::any_of(graph.node().begin(), graph.node().end(), expands);
}

} // namespace

std::set<std::string> value_names(const onnx::GraphProto &graph) {
    std::set<std::string> names;
    for (const auto *infos : {&graph.input(), &graph.output(), &graph.value_info()})
        for (const onnx::ValueInfoProto &v : *infos) names.insert(v.name());
    for (const onnx::TensorProto &t : graph.initializer()) names.insert(t.name());
    for (const onnx::NodeProto &node : graph.node()) {
        names.insert(node.input().begin(), node.input().end());
        names.insert(node.output().begin(), node.output().end());
    }
    return names;
}

const std::vector<std::string> &function_ops() {
    // The ops whose bodies are made of ops the importer takes. Others ONNX defines by a function
    // are not listed: DynamicQuantizeLinear's body quantizes by a computed scale, Bernoulli's
    // draws random numbers, SequenceMap's loops over a sequence.
    static const std::vector<std::string> ops = {"BlackmanWindow",
                                                 "HammingWindow",
                                                 "HannWindow",
                                                 "MeanVarianceNormalization",
                                                 "NegativeLogLikelihoodLoss",
                                                 "SoftmaxCrossEntropyLoss"};
    return ops;
}

void expand_functions(onnx::ModelProto &model, int64_t opset, const std::string &path,
                      std::vector<std::string> &notes) {
    int nesting = 0;
    std::set<std::string> expanded;
    while (has_function_op(model.graph())) {
        if (++nesting > kMaxNesting)
            throw ModelError(path + ": function bodies nest more than " +
                             std::to_string(kMaxNesting) + " deep");
        FunctionExpansion(*model.mutable_graph(), opset, path).run(expanded);
        // The next round's context-dependent bodies read the types of the values made here.
        infer_shapes(model, path, " on the expanded function bodies");
    }
    for (const std::string &op : expanded)
        notes.push_back(op + " imported as the function body ONNX's schema defines it by");
}

} // namespace vpuc::frontend::detail
