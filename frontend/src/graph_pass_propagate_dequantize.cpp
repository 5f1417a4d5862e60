// propagate_dequantize: QDQ models wrap every op they leave in float in a dequantize and a
// quantize. For an op that only selects or moves values (a max pool, a reshape), quantizing its
// result back to the quantization of the int8 tensor it dequantized gives that tensor's own
// values, so the op runs on the int8 tensor itself: the dequantize and quantize, two SHAVE
// layers reading the whole tensor, disappear, and a max pool runs on the DPU in int8.
#include <cmath>
#include <set>

#include "algorithms/registry.h"
#include "frontend/graph_passes.h"

namespace vpuc::frontend {

namespace {

// Ops whose every output value is one of their input's values (or, for a padded max pool, a
// value at least as large: the pad never wins; a resize when nearest: why_not_int8). Dequantizing
// is monotone and exact to half a quantization step, so each of these commutes with
// dequantize-then-quantize.
const std::set<std::string> &value_selecting_ops() {
    static const std::set<std::string> ops = {"max_pool",  "reshape",   "flatten", "squeeze",
                                              "unsqueeze", "transpose", "resize"};
    return ops;
}

bool same_quantization(const dsl::TensorDesc &a, const dsl::TensorDesc &b) {
    return a.type == b.type && a.quant.scale == b.quant.scale &&
           a.quant.zero_point == b.quant.zero_point;
}

// Why `op` cannot run on the int8 tensor, or "" when it can.
std::string why_not_int8(const dsl::Layer &op) {
    const dsl::Attrs &a = op.attrs();
    if (op.op() == "resize") {
        // Nearest copies values; linear and cubic blend them, and tf_crop_and_resize fills
        // outside the crop with a value of its own.
        if (a.get_string("mode") != "nearest")
            return "it blends values (mode " + a.get_string("mode") + ")";
        if (a.get_string("coordinate_transformation_mode") == "tf_crop_and_resize")
            return "it fills outside the crop with extrapolation_value";
        return "";
    }
    if (op.op() != "max_pool") return "";
    // A float activation or clamp would have to be requantized.
    if (a.get_string("activation") != "none" || !std::isinf(a.get_float("clamp_low")) ||
        !std::isinf(a.get_float("clamp_high")))
        return "it has an activation or clamp";
    return "";
}

} // namespace

void propagate_dequantize(GraphPassState &state) {
    dsl::Graph &graph = state.graph;
    const std::vector<dsl::Layer> layers = graph.layers();
    for (const dsl::Layer &quantize : layers) {
        if (quantize.op() != "quantize" || !in_graph(graph, quantize)) continue;
        const dsl::Layer op = quantize.inputs().at(0);
        if (op.is_input() || !value_selecting_ops().count(op.op()) || op.inputs().size() != 1)
            continue;
        const dsl::Layer dequantize = op.inputs().at(0);
        if (dequantize.is_input() || dequantize.op() != "dequantize") continue;
        // The float result is read elsewhere, or is a result of the network: it must stay.
        if (graph.consumers(op).size() != 1 || is_graph_output(graph, op)) continue;
        const dsl::Layer source = dequantize.inputs().at(0);
        const std::string prefix = "propagate_dequantize: '" + op.name() + "' (" + op.op() + ")";
        if (!same_quantization(source.output(), quantize.output()) ||
            quantize.output().quant.per_channel()) {
            state.notes.push_back(prefix + " stays in float: '" + quantize.name() +
                                  "' quantizes to " + quantize.output().describe() +
                                  ", not to the quantization of '" + source.name() + "'");
            continue;
        }
        const std::string why_not = why_not_int8(op);
        if (!why_not.empty()) {
            state.notes.push_back(prefix + " stays in float: " + why_not);
            continue;
        }
        // The layer keeps the op's name, or the quantize's when that is a graph output.
        const bool keeps_output_name = is_graph_output(graph, quantize);
        const std::string name = keeps_output_name ? quantize.name() : op.name();
        dsl::Layer int8_op =
            algorithms::layer_registry().build(op.op(), name, {source}, op.attrs());
        int8_op.schedule() = op.schedule();
        if (!same_quantization(int8_op.output(), quantize.output()) ||
            int8_op.output().shape != quantize.output().shape) {
            state.notes.push_back(prefix + " stays in float: on '" + source.name() +
                                  "' it would give " + int8_op.output().describe());
            continue;
        }
        const bool dequantize_goes = graph.consumers(dequantize).size() == 1;
        graph.replace(quantize.name(), int8_op);
        for (const dsl::Layer &gone : {quantize, op})
            if (gone.name() != name) state.merged_into[gone.name()] = name;
        if (dequantize_goes) state.merged_into[dequantize.name()] = name;
        for (auto &[merged, into] : state.merged_into)
            if (into == op.name() || into == quantize.name()) into = name;
        state.notes.push_back(prefix + " runs on the int8 '" + source.name() + "': '" +
                              quantize.name() + "' quantizes back to its quantization" +
                              (dequantize_goes ? ", and '" + dequantize.name() + "' goes" : ""));
    }
}

} // namespace vpuc::frontend
