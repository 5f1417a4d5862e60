// fuse_pointwise: a group of element-wise layers, each computing an element from the same element
// of its inputs, becomes one SHAVE layer whose algorithm is theirs composed: Halide inlines them
// into one kernel that reads the group's inputs once and writes its result once, where each layer
// was a kernel (or a DPU task) of its own, with its own task launches and a trip of its tensor
// through memory. The composed algorithm is the layers' own expressions, so the bytes are the
// same. A quantized SiLU (dequantize, sigmoid, quantize, dequantize, multiply, quantize) is one.
#include <algorithm>
#include <map>
#include <set>

#include "dsl/registry.h"
#include "frontend/graph_passes.h"

namespace vpuc::frontend {

namespace {

// Element-wise layers the SHAVEs run: quantization, activations and math of one tensor, and a
// constant operand (constant_eltwise: its result has the computed input's shape).
bool shave_pointwise(const dsl::Layer &layer) {
    static const std::set<std::string> ops = {
        "dequantize", "quantize",   "sigmoid",      "swish",      "mish",
        "gelu",       "erf",        "tanh",         "exp",        "log",
        "sqrt",       "reciprocal", "abs",          "neg",        "elu",
        "selu",       "softplus",   "hard_sigmoid", "hard_swish", "constant_eltwise"};
    if (!ops.count(layer.op())) return false;
    return layer.op() != "constant_eltwise" ||
           layer.inputs().at(0).output().shape == layer.output().shape;
}

// Element-wise layers the DPU runs: one joins a group only when it reads members only. One that
// reads a layer outside would move DPU work onto the SHAVEs, which YOLO-tiny int8's residual adds
// showed slower (vpu27 3,436 us to 3,908 us).
bool dpu_pointwise(const dsl::Layer &layer) {
    static const std::set<std::string> ops = {"add", "sub", "mul"};
    if (!ops.count(layer.op())) return false;
    // No broadcasting: every input of the output's shape.
    return std::all_of(layer.inputs().begin(), layer.inputs().end(), [&](const dsl::Layer &in) {
        return in.output().shape == layer.output().shape;
    });
}

bool pointwise(const dsl::Layer &layer) {
    return !layer.is_input() && layer.outputs().size() == 1 &&
           (shave_pointwise(layer) || dpu_pointwise(layer));
}

struct Group {
    dsl::Layer root;
    std::vector<dsl::Layer> members; // producers before consumers, the root last
    std::vector<dsl::Layer> inputs;  // the layers the members read from outside the group
};

bool contains(const std::vector<dsl::Layer> &layers, const dsl::Layer &layer) {
    return std::any_of(layers.begin(), layers.end(),
                       [&](const dsl::Layer &l) { return l.same_as(layer); });
}

// The group `root` ends: its producers joined while they are element-wise, no graph output, and
// read only by members, then kept if it holds two SHAVE layers or more and each DPU layer in it
// reads members only. Empty when it is not kept.
std::vector<dsl::Layer> group_of(const dsl::Graph &graph, const dsl::Layer &root,
                                 const std::set<std::string> &taken) {
    std::vector<dsl::Layer> members = {root};
    for (bool grew = true; grew;) {
        grew = false;
        for (size_t m = 0; m < members.size(); ++m)
            for (const dsl::Layer &producer : members[m].inputs()) {
                if (contains(members, producer) || !pointwise(producer) ||
                    taken.count(producer.name()) || is_graph_output(graph, producer))
                    continue;
                const std::vector<dsl::Layer> readers = graph.consumers(producer);
                if (!std::all_of(readers.begin(), readers.end(),
                                 [&](const dsl::Layer &r) { return contains(members, r); }))
                    continue;
                members.push_back(producer);
                grew = true;
            }
    }
    const auto shave = std::count_if(members.begin(), members.end(), shave_pointwise);
    const bool dpu_inside = std::all_of(members.begin(), members.end(), [&](const dsl::Layer &m) {
        return !dpu_pointwise(m) ||
               std::all_of(m.inputs().begin(), m.inputs().end(),
                           [&](const dsl::Layer &in) { return contains(members, in); });
    });
    if (shave < 2 || !dpu_inside) return {};
    return members;
}

// The members in `order` (the graph's topological one), and the inputs they read from outside.
Group make_group(const dsl::Layer &root, const std::vector<dsl::Layer> &members,
                 const std::vector<dsl::Layer> &order) {
    Group g;
    g.root = root;
    for (const dsl::Layer &layer : order)
        if (contains(members, layer)) g.members.push_back(layer);
    for (const dsl::Layer &m : g.members)
        for (const dsl::Layer &in : m.inputs())
            if (!contains(members, in) && !contains(g.inputs, in)) g.inputs.push_back(in);
    return g;
}

// One layer computing the group: each member's algorithm applied, in order, to the Funcs of
// its inputs, the group's own inputs being the fused layer's.
dsl::Layer fused_layer(const Group &g) {
    const std::vector<dsl::Layer> members = g.members, inputs = g.inputs;
    dsl::Algorithm algorithm = [members, inputs](const std::vector<Halide::Func> &funcs) {
        std::map<std::string, Halide::Func> computed;
        for (size_t i = 0; i < inputs.size(); ++i) computed[inputs[i].name()] = funcs.at(i);
        Halide::Func last;
        for (const dsl::Layer &m : members) {
            std::vector<Halide::Func> in;
            for (const dsl::Layer &producer : m.inputs())
                in.push_back(computed.at(producer.name()));
            last = m.algorithm()(in);
            computed[m.name()] = last;
        }
        return last;
    };
    return dsl::Layer::make("pointwise", g.root.output(), g.inputs, algorithm);
}

} // namespace

void fuse_pointwise(GraphPassState &state) {
    dsl::Graph &graph = state.graph;
    const std::vector<dsl::Layer> order = graph.layers();
    std::set<std::string> taken; // layers already in a group
    std::vector<Group> groups;   // consumers before producers
    for (auto it = order.rbegin(); it != order.rend(); ++it) {
        if (!pointwise(*it) || taken.count(it->name())) continue;
        const std::vector<dsl::Layer> members = group_of(graph, *it, taken);
        if (members.empty()) continue;
        for (const dsl::Layer &m : members) taken.insert(m.name());
        groups.push_back(make_group(*it, members, order));
    }
    // Producers first: a group reading another's result reads the fused layer, found by the
    // name it took.
    for (auto g = groups.rbegin(); g != groups.rend(); ++g) {
        for (dsl::Layer &in : g->inputs) in = graph.find(in.name());
        for (const dsl::Layer &m : g->members)
            if (!m.same_as(g->root)) state.merged_into[m.name()] = g->root.name();
        graph.replace(g->root.name(), fused_layer(*g));
        std::string names;
        for (const dsl::Layer &m : g->members)
            names += (names.empty() ? "" : ", ") + m.name() + " (" + m.op() + ")";
        state.notes.push_back("fuse_pointwise: '" + g->root.name() + "' computes " +
                              std::to_string(g->members.size()) +
                              " layers in one SHAVE kernel: " + names);
    }
}

} // namespace vpuc::frontend
