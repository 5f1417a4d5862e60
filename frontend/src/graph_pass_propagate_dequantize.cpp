// propagate_dequantize: QDQ models wrap every op they leave in float in a dequantize and a
// quantize. For an op that only selects or moves values (a max pool, a reshape), quantizing its
// result back to the quantization of the int8 tensor it dequantized gives that tensor's own
// values, so the op runs on the int8 tensor itself: the dequantize and quantize, two SHAVE
// layers reading the whole tensor, disappear, and a max pool runs on the DPU in int8. An average
// pool runs in int8 too, requantized to the quantize's scale, as the importer builds one after an
// int8 layer: within one quantization step of ONNX's rounding (docs/onnx.md, "Rounding"). A
// concat quantized as a whole is quantized part by part instead, so that it runs on int8 tensors
// too.
#include <cmath>
#include <set>

#include "algorithms/layers.h"
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
    if (op.op() != "max_pool" && op.op() != "avg_pool") return "";
    // A float activation or clamp would have to be requantized.
    if (a.get_string("activation") != "none" || !std::isinf(a.get_float("clamp_low")) ||
        !std::isinf(a.get_float("clamp_high")))
        return "it has an activation or clamp";
    return "";
}

// quantize(concat(x_1, ..., x_n)), the concat read by the quantize alone, becomes
// concat(p_1, ..., p_n): quantizing is element-wise and a concat only moves values, so each part
// quantizes on its own. A part that dequantizes an int8 tensor of the quantize's own
// quantization is that tensor (quantizing its values back gives them, as above); any other part
// is quantized alone (a requantization, which fuse_pointwise makes a table lookup). The concat
// then copies int8 values. Returns whether the graph changed.
bool quantize_concat_parts(GraphPassState &state, const dsl::Layer &quantize,
                           std::set<std::string> &names) {
    dsl::Graph &graph = state.graph;
    const dsl::Layer concat = quantize.inputs().at(0);
    if (concat.is_input() || concat.op() != "concat" || graph.consumers(concat).size() != 1 ||
        is_graph_output(graph, concat) || quantize.output().quant.per_channel())
        return false;
    const std::vector<dsl::Layer> &parts = concat.inputs();
    if (std::any_of(parts.begin(), parts.end(), dsl::is_constant)) return false;
    const dsl::LayerRegistry &registry = algorithms::layer_registry();
    std::vector<dsl::Layer> int8_parts;
    std::string kept;
    for (size_t i = 0; i < parts.size(); ++i) {
        const dsl::Layer &part = parts[i];
        if (part.op() == "dequantize" && !part.is_input() &&
            same_quantization(part.inputs().at(0).output(), quantize.output())) {
            int8_parts.push_back(part.inputs().at(0));
            kept += (kept.empty() ? "'" : ", '") + part.inputs().at(0).name() + "'";
            continue;
        }
        const std::string name = unused_name(names, quantize.name() + ".part" + std::to_string(i));
        int8_parts.push_back(registry.build("quantize", name, {part}, quantize.attrs()));
    }
    // The layer keeps the concat's name, or the quantize's when that is a graph output.
    const std::string name = is_graph_output(graph, quantize) ? quantize.name() : concat.name();
    const dsl::Layer int8_concat = registry.build("concat", name, int8_parts, concat.attrs());
    const std::string prefix = "propagate_dequantize: '" + concat.name() + "' (concat)";
    if (!same_quantization(int8_concat.output(), quantize.output()) ||
        int8_concat.output().shape != quantize.output().shape) {
        state.notes.push_back(prefix + " stays in float: on its parts it would give " +
                              int8_concat.output().describe());
        return false;
    }
    graph.replace(quantize.name(), int8_concat);
    for (const dsl::Layer &gone : {quantize, concat})
        if (gone.name() != name) state.merged_into[gone.name()] = name;
    for (auto &[merged, into] : state.merged_into)
        if (into == concat.name() || into == quantize.name()) into = name;
    state.notes.push_back(prefix + " copies int8 parts: '" + quantize.name() +
                          "' quantizes each part" +
                          (kept.empty() ? "" : "; of its quantization already: " + kept));
    return true;
}

} // namespace

void propagate_dequantize(GraphPassState &state) {
    dsl::Graph &graph = state.graph;
    const std::vector<dsl::Layer> layers = graph.layers();
    std::set<std::string> names = layer_names(graph); // so that a new quantize's name is new
    for (const dsl::Layer &quantize : layers) {
        if (quantize.op() != "quantize" || !in_graph(graph, quantize)) continue;
        if (quantize_concat_parts(state, quantize, names)) continue;
        const dsl::Layer op = quantize.inputs().at(0);
        const bool averages = !op.is_input() && op.op() == "avg_pool";
        if (op.is_input() || (!value_selecting_ops().count(op.op()) && !averages) ||
            op.inputs().size() != 1)
            continue;
        const dsl::Layer dequantize = op.inputs().at(0);
        if (dequantize.is_input() || dequantize.op() != "dequantize") continue;
        // The float result is read elsewhere, or is a result of the network: it must stay.
        if (graph.consumers(op).size() != 1 || is_graph_output(graph, op)) continue;
        const dsl::Layer source = dequantize.inputs().at(0);
        const std::string prefix = "propagate_dequantize: '" + op.name() + "' (" + op.op() + ")";
        const dsl::Quant &source_quant = source.output().quant;
        if (averages && (source_quant.empty() || source_quant.per_channel() ||
                         quantize.output().quant.per_channel())) {
            state.notes.push_back(prefix + " stays in float: its int8 form is requantized per "
                                           "tensor");
            continue;
        }
        if (!averages && (!same_quantization(source.output(), quantize.output()) ||
                          quantize.output().quant.per_channel())) {
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
        dsl::Layer int8_op;
        try {
            const dsl::Attrs attrs =
                averages
                    ? algorithms::int8_pool_attrs(op, source_quant.scale_at(0),
                                                  quantize.output().type, quantize.output().quant)
                    : op.attrs();
            int8_op = algorithms::layer_registry().build(op.op(), name, {source}, attrs);
        } catch (const dsl::LayerError &e) {
            state.notes.push_back(prefix + " stays in float: " + e.what());
            continue;
        }
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
                              quantize.name() +
                              (averages ? "' gives its output's quantization"
                                        : "' quantizes back to its quantization") +
                              (dequantize_goes ? ", and '" + dequantize.name() + "' goes" : ""));
    }
}

} // namespace vpuc::frontend
