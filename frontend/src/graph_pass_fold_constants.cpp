// fold_constants: a layer computed from constants alone is computed once, at compile time, by
// the CPU reference, and becomes a constant. The registry already folds the ops that have a
// `fold` function as they are built (shape arithmetic); this pass folds every other op (an
// activation or a convolution of a constant), whose algorithm the reference runs as it is.
#include <cstring>

#include "algorithms/reference.h"
#include "dsl/registry.h"
#include "frontend/graph_passes.h"

namespace vpuc::frontend {

namespace {

// A constant's value (row-major, dim 0 innermost) in the reference's layout (make_buffer).
Halide::Buffer<> reference_input(const dsl::Layer &constant) {
    const Halide::Buffer<> &value = dsl::constant_value(constant);
    const auto *bytes = static_cast<const uint8_t *>(value.data());
    return algorithms::from_memory_order(
        constant.output(), std::vector<uint8_t>(bytes, bytes + value.size_in_bytes()));
}

// The reference's result for `layer` as a constant's value: its logical shape reversed into
// Halide's dims, row-major.
Halide::Buffer<> constant_of(const dsl::Layer &layer, const Halide::Buffer<> &result) {
    const dsl::TensorDesc &t = layer.output();
    const std::vector<uint8_t> bytes = algorithms::to_memory_order(t, result);
    std::vector<int> extents;
    for (int d = t.shape.rank() - 1; d >= 0; --d) extents.push_back(int(t.shape[dsl::Dim(d)]));
    Halide::Buffer<> value(dsl::halide_type(t.type), extents);
    std::memcpy(value.data(), bytes.data(), bytes.size());
    return value;
}

bool computes_from_constants(const dsl::Layer &layer) {
    if (layer.is_input() || layer.inputs().empty() || layer.outputs().size() != 1) return false;
    for (const dsl::Layer &in : layer.inputs())
        if (!dsl::is_constant(in)) return false;
    // A constant's value is row-major and has no quantization: a result stored in another
    // order would need reordering, and an int8 one would lose its scale.
    const dsl::TensorDesc &out = layer.output();
    return out.order == dsl::DimsOrder::identity(out.shape.rank()) && out.quant.scale.empty();
}

} // namespace

void fold_constants(GraphPassState &state) {
    dsl::Graph &graph = state.graph;
    const std::vector<dsl::Layer> layers = graph.layers();
    for (const dsl::Layer &layer : layers) {
        // A graph output stays a layer, so that the blob has an output to compute.
        if (!computes_from_constants(layer) || is_graph_output(graph, layer)) continue;
        std::vector<Halide::Buffer<>> inputs;
        for (const dsl::Layer &in : layer.inputs()) inputs.push_back(reference_input(in));
        const Halide::Buffer<> result = algorithms::run_reference(layer, inputs);
        graph.replace(layer.name(),
                      dsl::LayerRegistry::constant(layer.name(), constant_of(layer, result)));
        state.notes.push_back("fold_constants: '" + layer.name() + "' (" + layer.op() +
                              ") computed at compile time");
    }
}

} // namespace vpuc::frontend
