// remove_identity_layers: layers that hand their input on unchanged (ONNX exporters leave
// reshapes to the same shape, and slices and concats of one whole tensor) are taken out, so
// they neither cost a SHAVE kernel or a copy nor keep a producer from fusing with its reader.
#include <set>

#include "dsl/registry.h"
#include "frontend/graph_passes.h"

namespace vpuc::frontend {

namespace {

bool same_tensor(const dsl::TensorDesc &a, const dsl::TensorDesc &b) {
    return a.shape == b.shape && a.type == b.type && a.order == b.order &&
           a.quant.scale == b.quant.scale && a.quant.zero_point == b.quant.zero_point;
}

// Whether `layer` outputs its one input's elements in the same positions.
bool is_identity(const dsl::Layer &layer) {
    // Ops that only move elements: with an output of the input's shape they move none
    // (a slice of steps 1 then takes everything, a concat of one input is that input).
    static const std::set<std::string> rearranging = {"reshape",   "flatten", "squeeze",
                                                      "unsqueeze", "slice",   "concat"};
    if (layer.inputs().size() != 1 || layer.outputs().size() != 1) return false;
    if (!same_tensor(dsl::input_tensor(layer, 0), layer.output())) return false;
    if (rearranging.count(layer.op())) return true;
    // Without perm a transpose reverses the dimensions, which moves elements at rank 2 and up.
    if (layer.op() != "transpose" || !layer.attrs().has("perm")) return false;
    const std::vector<int64_t> perm = layer.attrs().get_ints("perm");
    for (size_t i = 0; i < perm.size(); ++i)
        if (perm[i] != int64_t(i)) return false;
    return true;
}

} // namespace

void remove_identity_layers(GraphPassState &state) {
    dsl::Graph &graph = state.graph;
    const std::vector<dsl::Layer> layers = graph.layers();
    for (const dsl::Layer &layer : layers) {
        // A graph output keeps its name, which the blob's output carries.
        if (!is_identity(layer) || is_graph_output(graph, layer)) continue;
        graph.remove(layer.name());
        state.merged_into[layer.name()] = layer.inputs().at(0).name();
        state.notes.push_back("remove_identity_layers: '" + layer.name() + "' (" + layer.op() +
                              ") returns its input; removed");
    }
}

} // namespace vpuc::frontend
