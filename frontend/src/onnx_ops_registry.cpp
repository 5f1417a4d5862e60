// Nodes of domain "vpuc": the layer of the registry the op names, so that a layer ONNX has no op
// for (a user's own, docs/adding-a-layer.md) reaches models without an importer of its own.
// Inputs in the entry's order; attributes by name, each ONNX type onto the registry's (INT,
// FLOAT, INTS, FLOATS, STRING, TENSOR); the registry checks them and fills in the defaults.
#include "algorithms/registry.h"
#include "onnx_internal.h"

namespace vpuc::frontend::detail {

std::vector<dsl::Layer> import_registry_layer(NodeImport &node) {
    const std::string &op = node.node().op_type();
    if (!algorithms::layer_registry().find(op))
        node.fail("op " + op + " is no layer of the registry (`vpuc layers` lists them)");
    dsl::Attrs attrs;
    for (const onnx::AttributeProto &a : node.node().attribute()) {
        const std::string &name = a.name();
        switch (a.type()) {
        case onnx::AttributeProto::INT:
            attrs.set(name, node.attr_int(name, 0));
            break;
        case onnx::AttributeProto::FLOAT:
            attrs.set(name, double(node.attr_float(name, 0.0f)));
            break;
        case onnx::AttributeProto::INTS:
            attrs.set(name, node.attr_ints(name, {}));
            break;
        case onnx::AttributeProto::FLOATS: {
            const std::vector<float> values = node.attr_floats(name, {});
            attrs.set(name, std::vector<double>(values.begin(), values.end()));
            break;
        }
        case onnx::AttributeProto::STRING:
            attrs.set(name, node.attr_string(name, ""));
            break;
        case onnx::AttributeProto::TENSOR:
            attrs.set(name, node.attr_tensor(name));
            break;
        default:
            node.fail("attribute '" + name + "' is " +
                      onnx::AttributeProto::AttributeType_Name(a.type()) +
                      ", which no layer attribute is");
        }
    }
    std::vector<dsl::Layer> inputs;
    for (size_t i = 0; i < node.input_count(); ++i) inputs.push_back(node.input(i));
    const dsl::Layer layer = node.build(op, inputs, attrs);
    if (layer.outputs().size() == 1) return {layer};
    return node.outputs_of(layer);
}

} // namespace vpuc::frontend::detail
