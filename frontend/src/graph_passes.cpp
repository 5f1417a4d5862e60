// The graph passes' table of contents: a straight list, each pass logged, timed and verified.
#include "frontend/graph_passes.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <ostream>
#include <set>

#include "algorithms/registry.h"
#include "dsl/graph_text.h"
#include "dsl/registry.h"

namespace vpuc::frontend {

namespace {

struct GraphPass {
    std::string name;
    std::function<void(GraphPassState &)> run;
};

// Constants first, so the later passes see them; identities next, so that a reshape to the
// same shape does not keep a batch norm or an activation from its convolution; int8 max pools
// and reshapes of QDQ models before the fusions, which then see them in int8; batch norms
// before activations, since a batch norm folds only into a layer without an activation; SiLUs
// before activations, which would otherwise fuse into the multiply; views moved past element-wise
// layers before those are fused, so that a chain computes in one layout; fp16 forms of
// activations (when asked) after swish is fused and before the chains, which compose them;
// element-wise chains last, of the layers the fusions before leave.
const std::vector<GraphPass> &passes() {
    static const std::vector<GraphPass> list = {
        {"fold_constants", fold_constants},
        {"remove_identity_layers", remove_identity_layers},
        {"propagate_dequantize", propagate_dequantize},
        {"fold_batch_norm", fold_batch_norm},
        {"fuse_swish", fuse_swish},
        {"fuse_activations", fuse_activations},
        {"fp16_activations", fp16_activations},
        {"sink_views", sink_views},
        {"fuse_pointwise", fuse_pointwise},
    };
    return list;
}

void verify(const GraphPassState &state) {
    state.graph.verify(&algorithms::layer_registry());
}

} // namespace

const std::vector<std::string> &graph_pass_names() {
    static const std::vector<std::string> names = [] {
        std::vector<std::string> n;
        for (const GraphPass &pass : passes()) n.push_back(pass.name);
        return n;
    }();
    return names;
}

GraphPassState run_graph_passes(const dsl::Graph &graph, const GraphPassOptions &options) {
    const bool print_times = options.time_passes || std::getenv("VPUC_PASS_TIMES") != nullptr;
    GraphPassState state(graph.clone());
    state.fp16_activations = options.fp16_activations;
    size_t notes_logged = 0;
    for (const GraphPass &pass : passes()) {
        const auto start = std::chrono::steady_clock::now();
        pass.run(state);
        verify(state);
        const double ms =
            std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
                .count();
        if (options.log) *options.log << "graph pass " << pass.name << " done\n";
        for (; notes_logged < state.notes.size(); ++notes_logged)
            for (std::ostream *out : {options.log, options.notes})
                if (out) *out << "note: " << state.notes[notes_logged] << "\n";
        if (print_times) std::fprintf(stderr, "vpuc pass %-24s %9.3f ms\n", pass.name.c_str(), ms);
        if (options.dump_after == pass.name && options.log)
            *options.log << "graph after " << pass.name << ":\n" << dsl::print_graph(state.graph);
    }
    return state;
}

void run_graph_pass(GraphPassState &state, const std::string &name) {
    for (const GraphPass &pass : passes())
        if (pass.name == name) {
            pass.run(state);
            verify(state);
            return;
        }
    std::string known;
    for (const std::string &n : graph_pass_names()) known += (known.empty() ? "" : ", ") + n;
    throw dsl::GraphError("no graph pass '" + name + "' (passes: " + known + ")");
}

bool shave_elementwise(const dsl::Layer &layer) {
    static const std::set<std::string> ops = {
        "dequantize", "quantize",   "sigmoid",      "swish",      "mish",
        "gelu",       "erf",        "tanh",         "exp",        "log",
        "sqrt",       "reciprocal", "abs",          "neg",        "elu",
        "selu",       "softplus",   "hard_sigmoid", "hard_swish", "constant_eltwise"};
    if (!ops.count(layer.op())) return false;
    return layer.op() != "constant_eltwise" ||
           layer.inputs().at(0).output().shape == layer.output().shape;
}

bool dpu_elementwise(const dsl::Layer &layer) {
    static const std::set<std::string> ops = {"add", "sub", "mul"};
    if (!ops.count(layer.op())) return false;
    return std::all_of(layer.inputs().begin(), layer.inputs().end(), [&](const dsl::Layer &in) {
        return in.output().shape == layer.output().shape;
    });
}

bool elementwise_layer(const dsl::Layer &layer) {
    return !layer.is_input() && layer.outputs().size() == 1 &&
           (shave_elementwise(layer) || dpu_elementwise(layer));
}

dsl::Layer rebuild_layer(const dsl::Layer &layer, const std::string &name,
                         const dsl::Attrs &attrs) {
    dsl::Layer rebuilt =
        algorithms::layer_registry().build(layer.op(), name, layer.inputs(), attrs);
    rebuilt.schedule() = layer.schedule();
    return rebuilt;
}

void merge_into_producer(GraphPassState &state, const dsl::Layer &absorbed,
                         const dsl::Layer &producer, const dsl::Attrs &attrs,
                         const std::string &pass, const std::string &what) {
    const bool keeps_output_name = is_graph_output(state.graph, absorbed);
    const std::string &name = keeps_output_name ? absorbed.name() : producer.name();
    state.graph.replace(absorbed.name(), rebuild_layer(producer, name, attrs));
    state.merged_into[keeps_output_name ? producer.name() : absorbed.name()] = name;
    if (keeps_output_name)
        for (auto &[merged, into] : state.merged_into)
            if (into == producer.name()) into = name;
    state.notes.push_back(pass + ": '" + absorbed.name() + "' (" + absorbed.op() + ") " + what +
                          " '" + producer.name() + "'" +
                          (keeps_output_name ? ", which takes the graph output's name" : ""));
}

bool is_graph_output(const dsl::Graph &graph, const dsl::Layer &layer) {
    const auto &outputs = graph.outputs();
    return std::any_of(outputs.begin(), outputs.end(),
                       [&](const dsl::Layer &out) { return out.same_as(layer); });
}

bool in_graph(const dsl::Graph &graph, const dsl::Layer &layer) {
    const auto &layers = graph.layers();
    return std::any_of(layers.begin(), layers.end(),
                       [&](const dsl::Layer &l) { return l.same_as(layer); });
}

std::set<std::string> layer_names(const dsl::Graph &graph) {
    std::set<std::string> names;
    for (const dsl::Layer &layer : graph.inputs()) names.insert(layer.name());
    for (const dsl::Layer &layer : graph.layers()) names.insert(layer.name());
    return names;
}

std::string unused_name(std::set<std::string> &taken, const std::string &base) {
    std::string name = base;
    for (int n = 2; taken.count(name); ++n) name = base + "_" + std::to_string(n);
    taken.insert(name);
    return name;
}

} // namespace vpuc::frontend
