// fp16_activations: with GraphPassOptions::fp16_activations (`vpuc compile --fp16-activations`),
// every layer offering attribute `arithmetic` (elu, selu, swish, mish, sigmoid) on an fp16 input
// computes in fp16: every operation on fp16 vectors, as Intel's half8 kernels do, about twice as
// fast on the SHAVEs, within the error bound docs/layers.md states. Off by default: the float32
// form's result is the exact function rounded once.
#include "algorithms/registry.h"
#include "dsl/registry.h"
#include "frontend/graph_passes.h"

namespace vpuc::frontend {

namespace {

bool offers_fp16_arithmetic(const dsl::Layer &layer) {
    const dsl::LayerDef *def = algorithms::layer_registry().find(layer.op());
    if (!def) return false;
    for (const dsl::AttrSpec &spec : def->attrs)
        if (spec.name == "arithmetic") return true;
    return false;
}

} // namespace

void fp16_activations(GraphPassState &state) {
    if (!state.fp16_activations) return;
    dsl::Graph &graph = state.graph;
    int changed = 0;
    // A copy: replacing a layer rebuilds the graph's list.
    const std::vector<dsl::Layer> layers = graph.layers();
    for (const dsl::Layer &layer : layers) {
        if (layer.is_input() || layer.inputs().size() != 1 || !offers_fp16_arithmetic(layer) ||
            layer.inputs().at(0).output().type != dsl::ElemType::F16)
            continue;
        dsl::Attrs attrs = layer.attrs();
        if (attrs.has("arithmetic") && attrs.get_string("arithmetic") == "fp16") continue;
        attrs.set("arithmetic", std::string("fp16"));
        graph.replace(layer.name(), rebuild_layer(layer, layer.name(), attrs));
        ++changed;
    }
    if (changed > 0)
        state.notes.push_back("fp16_activations: " + std::to_string(changed) +
                              " layer(s) compute in fp16 arithmetic, within 2^-8 + 2^-9 |y| of "
                              "the exact function (docs/layers.md)");
}

} // namespace vpuc::frontend
