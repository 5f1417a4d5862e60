// fuse_activations: a standalone relu, clamp or leaky_relu becomes the PPE activation of the
// DPU layer it reads, so the DPU applies it on the way out instead of a second layer reading
// the whole tensor back.
#include <cmath>
#include <set>

#include "dsl/registry.h"
#include "frontend/graph_passes.h"

namespace vpuc::frontend {

namespace {

// The ops whose registry entries carry the PPE's activation attributes (activation, alpha,
// clamp_low, clamp_high).
const std::set<std::string> &producers_with_ppe() {
    static const std::set<std::string> ops = {
        "conv2d", "depthwise_conv2d", "matmul", "max_pool", "avg_pool", "add", "sub", "mul", "max",
        "min"};
    return ops;
}

bool has_activation(const dsl::Attrs &a) {
    return a.get_string("activation") != "none";
}

bool has_clamp(const dsl::Attrs &a) {
    return !std::isinf(a.get_float("clamp_low")) || !std::isinf(a.get_float("clamp_high"));
}

// The producer's attributes with `activation`'s op added to its PPE, or why it cannot be. The
// PPE applies its activation, then its clamp: a clamp joins a producer that has no clamp yet,
// a relu or leaky relu one that has neither.
std::string fused_attrs(const dsl::Layer &activation, const dsl::Layer &producer,
                        dsl::Attrs &attrs) {
    attrs = producer.attrs();
    const std::string &op = activation.op();
    const bool quantized = dsl::is_quantized_int(producer.output().type);
    if (op == "clamp") {
        if (has_clamp(attrs)) return "'" + producer.name() + "' clamps already";
        attrs.set("clamp_low", activation.attrs().get_float("low"));
        attrs.set("clamp_high", activation.attrs().get_float("high"));
        return "";
    }
    if (has_activation(attrs) || has_clamp(attrs))
        return "'" + producer.name() + "' has an activation already";
    if (op == "leaky_relu") {
        // The int8 PPE applies the slope before saturating to the output type, the standalone
        // layer after: their results differ below the type's range.
        if (quantized) return "the int8 PPE's leaky ReLU saturates in another order";
        attrs.set("activation", std::string("leaky_relu"));
        attrs.set("alpha", activation.attrs().get_float("alpha"));
        return "";
    }
    attrs.set("activation", std::string("relu"));
    return "";
}

} // namespace

void fuse_activations(GraphPassState &state) {
    dsl::Graph &graph = state.graph;
    const std::vector<dsl::Layer> layers = graph.layers();
    for (const dsl::Layer &activation : layers) {
        const std::string &op = activation.op();
        if (op != "relu" && op != "clamp" && op != "leaky_relu") continue;
        const dsl::Layer producer = activation.inputs().at(0);
        if (producer.is_input() || !producers_with_ppe().count(producer.op())) continue;
        // A producer read elsewhere must keep its own result; an output must keep its values.
        if (graph.consumers(producer).size() != 1 || is_graph_output(graph, producer)) continue;
        dsl::Attrs attrs;
        const std::string why_not = fused_attrs(activation, producer, attrs);
        if (!why_not.empty()) {
            state.notes.push_back("fuse_activations: '" + activation.name() +
                                  "' stays a layer of its own: " + why_not);
            continue;
        }
        merge_into_producer(state, activation, producer, attrs, "fuse_activations", "fused into");
    }
}

} // namespace vpuc::frontend
