// fuse_swish: x * sigmoid(x), as exported SiLUs are written (Sigmoid, then Mul by its own
// input), becomes one swish layer: the SHAVEs compute x / (1 + e^-x) in float32 in one pass,
// where the pair ran a sigmoid on the SHAVEs, then a DPU multiply reading both tensors back.
#include <cmath>

#include "algorithms/registry.h"
#include "dsl/registry.h"
#include "frontend/graph_passes.h"

namespace vpuc::frontend {

namespace {

// The sigmoid among `mul`'s two inputs whose own input is the other one, or null.
const dsl::Layer *sigmoid_of_other_input(const dsl::Layer &mul) {
    const std::vector<dsl::Layer> &in = mul.inputs();
    for (size_t i = 0; i < 2; ++i)
        if (!in[i].is_input() && in[i].op() == "sigmoid" && in[i].inputs().at(0).same_as(in[1 - i]))
            return &in[i];
    return nullptr;
}

bool plain_mul(const dsl::Layer &mul) {
    const dsl::Attrs &a = mul.attrs();
    return a.get_string("activation") == "none" && std::isinf(a.get_float("clamp_low")) &&
           std::isinf(a.get_float("clamp_high"));
}

} // namespace

void fuse_swish(GraphPassState &state) {
    dsl::Graph &graph = state.graph;
    const std::vector<dsl::Layer> layers = graph.layers();
    int fused = 0;
    for (const dsl::Layer &mul : layers) {
        if (mul.op() != "mul" || mul.inputs().size() != 2 || !in_graph(graph, mul)) continue;
        const dsl::Layer *sigmoid = sigmoid_of_other_input(mul);
        if (!sigmoid) continue;
        // Floats only: an int8 sigmoid and multiply each round to their own quantization, which
        // one swish would not; the sigmoid must have no other reader and not be an output.
        if (dsl::is_quantized_int(mul.output().type) ||
            dsl::is_quantized_int(sigmoid->output().type) || !plain_mul(mul) ||
            graph.consumers(*sigmoid).size() != 1 || is_graph_output(graph, *sigmoid))
            continue;
        const dsl::Layer swish = algorithms::layer_registry().build(
            "swish", mul.name(), {sigmoid->inputs().at(0)}, dsl::Attrs().set("beta", 1.0));
        state.merged_into[sigmoid->name()] = mul.name();
        graph.replace(mul.name(), swish);
        ++fused;
    }
    if (fused > 0)
        state.notes.push_back("fuse_swish: " + std::to_string(fused) +
                              " x * sigmoid(x) pair(s) computed as one swish layer each, named "
                              "after the multiply");
}

} // namespace vpuc::frontend
