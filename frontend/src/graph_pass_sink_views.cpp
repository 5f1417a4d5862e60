// sink_views: an element-wise layer that reads a relabelling view (reshape, transpose...) of a
// tensor the DPU wrote (4-D, NHWC) computes on that tensor instead, and the views move after it.
// The DPU and the SHAVEs hold activations NHWC in CMX. A transformer's linear layer runs on the
// DPU's matmul between views that relabel [1, M, K] rows as its (1, K, 1, M) NHWC input and its
// output as rows again (docs/onnx.md, MatMul); a bias, a GELU or a quantization of those rows
// would read them as a [1, M, 1, N] tensor in row-major order, whose NHWC copy in CMX swaps every
// element. On the matmul's own output the same computation is a plain copy in and out, and
// every value is the same: an element-wise layer computes each element alone, wherever it lies.
// The views after it give its readers the bytes they read before.
#include <algorithm>
#include <cstring>
#include <numeric>
#include <optional>
#include <set>

#include "algorithms/registry.h"
#include "dsl/constant_values.h"
#include "dsl/registry.h"
#include "frontend/graph_passes.h"

namespace vpuc::frontend {

namespace {

// Views that keep the row-major order of the elements (reshape and its kin) or permute the axes.
bool relabelling_view(const dsl::Layer &layer) {
    static const std::set<std::string> ops = {"reshape", "flatten", "squeeze", "unsqueeze",
                                              "transpose"};
    return !layer.is_input() && ops.count(layer.op()) && layer.inputs().size() == 1 &&
           algorithms::layer_registry().view(layer).has_value();
}

bool in_dpu_layout(const dsl::TensorDesc &t) {
    return t.shape.rank() == 4 && t.order == dsl::DimsOrder::NHWC();
}

// Whether `t`'s bytes are not in the order NHWC would hold them: a device view in NCHW with more
// than one channel and more than one pixel.
bool held_in_another_order(const dsl::TensorDesc &t) {
    const dsl::TensorDesc device = dsl::device_view(t);
    const dsl::Shape &s = device.shape;
    return device.order != dsl::DimsOrder::NHWC() && s[dsl::dims::C] > 1 &&
           s[dsl::dims::H] * s[dsl::dims::W] > 1;
}

// The views from a tensor in the DPU's layout to `layer`, the source's reader first.
struct ViewChain {
    dsl::Layer source;
    std::vector<dsl::Layer> views;
};

std::optional<ViewChain> chain_to(const dsl::Layer &layer) {
    ViewChain chain;
    dsl::Layer at = layer;
    while (!in_dpu_layout(at.output()) && relabelling_view(at)) {
        chain.views.insert(chain.views.begin(), at);
        at = at.inputs().at(0);
    }
    if (chain.views.empty() || !in_dpu_layout(at.output())) return std::nullopt;
    chain.source = at;
    return chain;
}

// The same ops with the same attributes, from sources of one shape and order.
bool same_views(const ViewChain &a, const ViewChain &b) {
    if (a.source.output().shape != b.source.output().shape ||
        a.source.output().order != b.source.output().order || a.views.size() != b.views.size())
        return false;
    for (size_t i = 0; i < a.views.size(); ++i)
        if (a.views[i].op() != b.views[i].op() ||
            a.views[i].output().shape != b.views[i].output().shape ||
            a.views[i].attrs() != b.views[i].attrs())
            return false;
    return true;
}

std::vector<int64_t> transpose_perm(const dsl::Layer &transpose) {
    if (transpose.attrs().has("perm")) return transpose.attrs().get_ints("perm");
    std::vector<int64_t> reversed(size_t(transpose.output().shape.rank()));
    std::iota(reversed.rbegin(), reversed.rend(), 0);
    return reversed;
}

// For each element of the chain's result, in row-major order, the row-major index of the element
// of its source it is: the indices of the source carried through the views.
dsl::ConstValues source_indices(const ViewChain &chain) {
    dsl::ConstValues at{dsl::ElemType::I64, chain.source.output().shape.raw(), {}, {}};
    at.ints.resize(size_t(at.elements()));
    std::iota(at.ints.begin(), at.ints.end(), 0);
    for (const dsl::Layer &view : chain.views) {
        const std::vector<int64_t> out_shape = view.output().shape.raw();
        if (view.op() != "transpose") {
            at.shape = out_shape; // the same elements in the same order
            continue;
        }
        // Input axis d is output axis output_axis[d] (perm[output_axis[d]] = d).
        const std::vector<int64_t> perm = transpose_perm(view);
        std::vector<size_t> output_axis(perm.size());
        for (size_t j = 0; j < perm.size(); ++j) output_axis[size_t(perm[j])] = j;
        const std::vector<int64_t> in_shape = at.shape;
        at = dsl::pick_elements(at, out_shape, [&](const std::vector<int64_t> &index) {
            int64_t flat = 0;
            for (size_t d = 0; d < in_shape.size(); ++d)
                flat = flat * in_shape[d] + index[output_axis[d]];
            return flat;
        });
    }
    return at;
}

// constant_eltwise's constant, which broadcasts to the layer's input (numpy's rules), moved onto
// the chain's source: each element where the views take the input element it meets, every axis
// along which it does not vary of extent 1.
Halide::Buffer<> constant_on_source(const dsl::Layer &layer, const ViewChain &chain) {
    const dsl::ConstValues k = dsl::const_values(layer.attrs().get_tensor("constant"),
                                                 "constant of '" + layer.name() + "'");
    const std::vector<int64_t> input_shape = chain.views.back().output().shape.raw();
    const dsl::ConstValues indices = source_indices(chain);
    // Source element (row-major) -> the layer's input element (row-major).
    std::vector<int64_t> input_of(indices.ints.size());
    for (size_t i = 0; i < indices.ints.size(); ++i) input_of[size_t(indices.ints[i])] = int64_t(i);
    // The constant's element a row-major index of the layer's input reads.
    auto constant_element = [&](int64_t flat) {
        int64_t element = 0, stride = 1;
        for (size_t d = input_shape.size(); d-- > 0;) {
            const int64_t at = flat % input_shape[d];
            flat /= input_shape[d];
            const size_t offset = input_shape.size() - k.shape.size();
            if (d < offset) continue;
            const int64_t extent = k.shape[d - offset];
            if (extent != 1) element += at * stride;
            stride *= extent;
        }
        return element;
    };
    const std::vector<int64_t> source_shape = chain.source.output().shape.raw();
    auto row_major = [](const std::vector<int64_t> &index, const std::vector<int64_t> &shape) {
        int64_t flat = 0;
        for (size_t d = 0; d < shape.size(); ++d) flat = flat * shape[d] + index[d];
        return flat;
    };
    const dsl::ConstValues full =
        dsl::pick_elements(k, source_shape, [&](const std::vector<int64_t> &index) {
            return constant_element(input_of[size_t(row_major(index, source_shape))]);
        });
    // Axes along which every element equals the first: extent 1.
    auto value_of = [&](int64_t flat) {
        return full.is_float() ? full.reals[size_t(flat)] : double(full.ints[size_t(flat)]);
    };
    std::vector<int64_t> kept_shape = source_shape;
    for (size_t d = 0; d < source_shape.size(); ++d) {
        bool uniform = true;
        for (int64_t flat = 0; uniform && flat < full.elements(); ++flat) {
            std::vector<int64_t> index(source_shape.size());
            int64_t rest = flat;
            for (size_t e = source_shape.size(); e-- > 0;) {
                index[e] = rest % source_shape[e];
                rest /= source_shape[e];
            }
            index[d] = 0;
            const double first = value_of(row_major(index, source_shape)), here = value_of(flat);
            uniform = std::memcmp(&first, &here, sizeof first) == 0;
        }
        if (uniform) kept_shape[d] = 1;
    }
    return dsl::const_buffer(
        dsl::pick_elements(full, kept_shape, [&](const std::vector<int64_t> &index) {
            return row_major(index, source_shape);
        }));
}

// The chains every input of `layer` reads through, when each is a chain of the same views: none
// for a layer that reads a graph input or a constant directly, or one quantized per channel.
std::optional<std::vector<ViewChain>> sinkable_inputs(const dsl::Layer &layer) {
    if (!elementwise_layer(layer) || layer.output().quant.per_channel() ||
        !held_in_another_order(layer.inputs().at(0).output()))
        return std::nullopt;
    std::vector<ViewChain> chains;
    for (const dsl::Layer &input : layer.inputs()) {
        std::optional<ViewChain> chain = chain_to(input);
        if (!chain || chain->source.output().quant.per_channel() ||
            (!chains.empty() && !same_views(chains.front(), *chain)))
            return std::nullopt;
        chains.push_back(std::move(*chain));
    }
    return chains;
}

} // namespace

void sink_views(GraphPassState &state) {
    dsl::Graph &graph = state.graph;
    const dsl::LayerRegistry &registry = algorithms::layer_registry();
    std::set<std::string> names = layer_names(graph);
    std::vector<std::string> sunk;
    const std::vector<dsl::Layer> layers = graph.layers();
    for (const dsl::Layer &layer : layers) {
        // A graph output keeps its shape; a replaced layer's readers read its views now.
        if (!in_graph(graph, layer) || is_graph_output(graph, layer)) continue;
        const std::optional<std::vector<ViewChain>> chains = sinkable_inputs(layer);
        if (!chains) continue;
        dsl::Attrs attrs = layer.attrs();
        if (layer.op() == "constant_eltwise")
            attrs.set("constant", constant_on_source(layer, chains->front()));
        std::vector<dsl::Layer> sources;
        for (const ViewChain &chain : *chains) sources.push_back(chain.source);
        dsl::Layer computed = registry.build(layer.op(), layer.name(), sources, attrs);
        computed.schedule() = layer.schedule();
        dsl::Layer result = computed;
        for (const dsl::Layer &view : chains->front().views)
            result = registry.build(view.op(), unused_name(names, layer.name() + ".view"), {result},
                                    view.attrs());
        graph.replace(layer.name(), result);
        sunk.push_back(layer.name());
    }
    if (sunk.empty()) return;
    std::string list;
    for (const std::string &name : sunk) list += (list.empty() ? "'" : ", '") + name + "'";
    state.notes.push_back("sink_views: " + std::to_string(sunk.size()) +
                          " element-wise layer(s) compute on the NHWC tensor they read through "
                          "views, the views after them: " +
                          list);
}

} // namespace vpuc::frontend
