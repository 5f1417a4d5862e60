// fold_batch_norm: y = conv(x) * a + b, per channel, folded into the convolution's own
// per-channel scale and bias. An fp16 conv computes (acc + bias) * scale, so the folded one
// computes (acc + bias + b / (scale * a)) * (scale * a): the weights stay as they are (folding
// a into fp16 weights would round every weight again), and the result is rounded to fp16
// once instead of twice.
#include <cmath>
#include <set>

#include "dsl/registry.h"
#include "frontend/graph_passes.h"

namespace vpuc::frontend {

namespace {

// The value of channel c of an optional per-channel f32 attribute: one value for all channels,
// one per channel, or `absent` when it is not set.
float per_channel(const dsl::Attrs &attrs, const std::string &name, int64_t c, float absent) {
    if (!attrs.has(name)) return absent;
    const Halide::Buffer<float> values(attrs.get_tensor(name));
    return values.number_of_elements() == 1 ? values(0) : values(int(c));
}

// The producer's attributes with the batch norm folded in, or why it cannot be.
std::string folded_attrs(const dsl::Layer &norm, const dsl::Layer &producer, dsl::Attrs &attrs) {
    attrs = producer.attrs();
    if (attrs.get_tensor("weights").type() != Halide::Float(16))
        return "'" + producer.name() + "' has int8 weights";
    if (attrs.get_string("activation") != "none" || !std::isinf(attrs.get_float("clamp_low")) ||
        !std::isinf(attrs.get_float("clamp_high")))
        return "'" + producer.name() + "' applies an activation before it";
    const Halide::Buffer<float> a(norm.attrs().get_tensor("scale"));
    const Halide::Buffer<float> b(norm.attrs().get_tensor("bias"));
    const int channels = a.dim(0).extent();
    Halide::Buffer<float> scale(channels), bias(channels);
    for (int c = 0; c < channels; ++c) {
        scale(c) = per_channel(attrs, "scale", c, 1.0f) * a(c);
        bias(c) = per_channel(attrs, "bias", c, 0.0f) + b(c) / scale(c);
        // A zero scale makes the channel the constant b, which (acc + bias) * 0 cannot give.
        if (scale(c) == 0 || !std::isfinite(scale(c)) || !std::isfinite(bias(c)))
            return "channel " + std::to_string(c) + " would get scale " + std::to_string(scale(c)) +
                   " and bias " + std::to_string(bias(c));
    }
    attrs.set("scale", scale);
    attrs.set("bias", bias);
    return "";
}

} // namespace

void fold_batch_norm(GraphPassState &state) {
    static const std::set<std::string> convolutions = {"conv2d", "depthwise_conv2d", "matmul"};
    dsl::Graph &graph = state.graph;
    const std::vector<dsl::Layer> layers = graph.layers();
    for (const dsl::Layer &norm : layers) {
        if (norm.op() != "batch_norm") continue;
        const dsl::Layer producer = norm.inputs().at(0);
        std::string why_not;
        dsl::Attrs attrs;
        if (producer.is_input() || !convolutions.count(producer.op()))
            why_not = "it reads no convolution";
        else if (graph.consumers(producer).size() != 1 || is_graph_output(graph, producer))
            why_not = "'" + producer.name() + "' has other readers";
        else
            why_not = folded_attrs(norm, producer, attrs);
        if (!why_not.empty()) {
            state.notes.push_back("fold_batch_norm: '" + norm.name() +
                                  "' stays a SHAVE layer: " + why_not);
            continue;
        }
        merge_into_producer(state, norm, producer, attrs, "fold_batch_norm", "folded into");
    }
}

} // namespace vpuc::frontend
