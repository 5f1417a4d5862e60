// fuse_pointwise: a group of element-wise layers, each computing an element from the same element
// of its inputs, becomes one SHAVE layer whose algorithm is theirs composed: Halide inlines them
// into one kernel that reads the group's inputs once and writes its result once, where each layer
// was a kernel (or a DPU task) of its own, with its own task launches and a trip of its tensor
// through memory. The composed algorithm is the layers' own expressions, so the bytes are the
// same. A quantized SiLU (dequantize, sigmoid, quantize, dequantize, multiply, quantize) is one.
//
// A group that reads one 8-bit tensor has 256 possible inputs: its results for all of them,
// computed at compile time by the CPU reference from the same composed algorithm, make a table,
// and the SHAVE layer looks its result up instead of computing it (op "lookup"), as TPU-MLIR
// lowers int8 activations to a table. The same bytes again, for a load per element.
#include <algorithm>
#include <cstring>
#include <map>
#include <set>

#include "algorithms/reference.h"
#include "dsl/registry.h"
#include "frontend/graph_passes.h"
#include "vpu_target/parallel.h"

namespace vpuc::frontend {

namespace {

struct Group {
    dsl::Layer root;
    std::vector<dsl::Layer> members; // producers before consumers, the root last
    std::vector<dsl::Layer> inputs;  // the layers the members read from outside the group
    Halide::Buffer<> table;          // its result for each 8-bit input value, when tabulated
    std::string table_name;          // the name of the table's constant layer; empty: composed
};

bool contains(const std::vector<dsl::Layer> &layers, const dsl::Layer &layer) {
    return std::any_of(layers.begin(), layers.end(),
                       [&](const dsl::Layer &l) { return l.same_as(layer); });
}

// The group `root` ends: its producers joined while they are element-wise, no graph output, and
// read only by members. Empty when a DPU layer in it reads a layer outside: that would move DPU
// work onto the SHAVEs, which YOLO-tiny int8's residual adds showed slower (vpu27 3,436 us to
// 3,908 us).
std::vector<dsl::Layer> group_of(const dsl::Graph &graph, const dsl::Layer &root,
                                 const std::set<std::string> &taken) {
    std::vector<dsl::Layer> members = {root};
    for (bool grew = true; grew;) {
        grew = false;
        for (size_t m = 0; m < members.size(); ++m)
            for (const dsl::Layer &producer : members[m].inputs()) {
                if (contains(members, producer) || !elementwise_layer(producer) ||
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
    const bool dpu_inside = std::all_of(members.begin(), members.end(), [&](const dsl::Layer &m) {
        return !dpu_elementwise(m) ||
               std::all_of(m.inputs().begin(), m.inputs().end(),
                           [&](const dsl::Layer &in) { return contains(members, in); });
    });
    if (!dpu_inside) return {};
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

// The members' algorithms composed: each applied, in order, to the Funcs of its inputs, the
// group's own inputs being the algorithm's.
dsl::Algorithm composed_algorithm(const Group &g) {
    const std::vector<dsl::Layer> members = g.members, inputs = g.inputs;
    return [members, inputs](const std::vector<Halide::Func> &funcs) {
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
}

bool eight_bit(dsl::ElemType type) {
    return type == dsl::ElemType::U8 || type == dsl::ElemType::I8;
}

// Whether the group's result is a function of its one 8-bit input's value alone, and one worth
// a table: its quantizations are per tensor (a per-channel one makes the result depend on the
// channel), no member has a constant operand (which may vary over the tensor), and it computes
// more than a dequantization to floats (a conversion, a subtraction and a multiply per element,
// fewer instructions than the lookup's load per element). A requantization from 8 bits to 8
// bits (its float conversions, rounding and saturation) is worth one.
bool tabulable(const Group &g) {
    if (g.inputs.size() != 1 || !eight_bit(g.inputs[0].output().type) ||
        g.inputs[0].output().quant.per_channel())
        return false;
    bool computes = eight_bit(g.root.output().type);
    for (const dsl::Layer &m : g.members) {
        if (m.op() == "constant_eltwise" || m.output().quant.per_channel()) return false;
        computes = computes || (m.op() != "quantize" && m.op() != "dequantize");
    }
    return computes;
}

// One entry per 8-bit value, along the channels: `tensor`'s type and quantization.
dsl::TensorDesc table_desc(const dsl::TensorDesc &tensor, const std::string &name) {
    dsl::TensorDesc t = tensor;
    t.name = name;
    t.shape = dsl::Shape{1, 256, 1, 1};
    t.order = dsl::DimsOrder::NHWC();
    t.graph_shape.reset();
    return t;
}

// What a stored value of `type` adds to make its entry's index: u8 values 0..255 are their own
// index, i8 values -128..127 count from the table's start.
int index_offset(dsl::ElemType type) {
    return type == dsl::ElemType::I8 ? 128 : 0;
}

// The table of `g`: the CPU reference runs its composed algorithm on the input's 256 values.
Halide::Buffer<> table_of(const Group &g) {
    const dsl::TensorDesc in = table_desc(g.inputs[0].output(), g.inputs[0].name());
    Halide::Buffer<> values = algorithms::make_buffer(in);
    for (int v = 0; v < 256; ++v) {
        if (in.type == dsl::ElemType::U8)
            values.as<uint8_t>()(v, 0, 0) = uint8_t(v);
        else
            values.as<int8_t>()(v, 0, 0) = int8_t(v - index_offset(in.type));
    }
    const dsl::Layer layer =
        dsl::Layer::make("pointwise", table_desc(g.root.output(), g.root.name()),
                         {dsl::Layer::input(in)}, composed_algorithm(g));
    const std::vector<uint8_t> bytes =
        algorithms::to_memory_order(layer.output(), algorithms::run_reference(layer, {values}));
    Halide::Buffer<> table(dsl::halide_type(layer.output().type), 256);
    std::memcpy(table.data(), bytes.data(), bytes.size());
    return table;
}

// Fills the groups' tables on every core: each is a JIT compilation of its own (about 0.1 s).
void fill_tables(const std::vector<Group *> &groups) {
    run_in_parallel(groups.size(), [&](size_t i) { groups[i]->table = table_of(*groups[i]); });
}

// One layer computing the group: its table looked up, or the members' algorithms composed. The
// table is a constant input, which DMA brings into CMX and the timing model prices as any
// tensor, not data hidden in the kernel's code.
dsl::Layer fused_layer(const Group &g) {
    if (!g.table.defined())
        return dsl::Layer::make("pointwise", g.root.output(), g.inputs, composed_algorithm(g));
    const int offset = index_offset(g.inputs[0].output().type);
    const std::string name = dsl::halide_name(g.root.name());
    dsl::Algorithm algorithm = [offset, name](const std::vector<Halide::Func> &funcs) {
        const auto &v = dsl::act_vars();
        Halide::Func out(Halide::Internal::unique_name(name));
        Halide::Expr entry = Halide::cast<int32_t>(funcs.at(0)(v.c, v.x, v.y));
        if (offset != 0) entry += offset;
        out(v.c, v.x, v.y) = funcs.at(1)(entry, 0, 0);
        return out;
    };
    const dsl::Layer table = dsl::LayerRegistry::constant(g.table_name, g.table);
    return dsl::Layer::make("lookup", g.root.output(), {g.inputs[0], table}, algorithm);
}

} // namespace

void fuse_pointwise(GraphPassState &state) {
    dsl::Graph &graph = state.graph;
    const std::vector<dsl::Layer> order = graph.layers();
    std::set<std::string> taken;                      // layers already in a group
    std::vector<Group> groups;                        // consumers before producers
    std::set<std::string> names = layer_names(graph); // so that a table's name is new
    for (auto it = order.rbegin(); it != order.rend(); ++it) {
        if (!elementwise_layer(*it) || taken.count(it->name())) continue;
        const std::vector<dsl::Layer> members = group_of(graph, *it, taken);
        if (members.empty()) continue;
        Group g = make_group(*it, members, order);
        // One SHAVE layer replacing two or more, or a table replacing any computation.
        const bool is_tabulable = tabulable(g);
        if (!is_tabulable && std::count_if(members.begin(), members.end(), shave_elementwise) < 2)
            continue;
        for (const dsl::Layer &m : members) taken.insert(m.name());
        if (is_tabulable) g.table_name = unused_name(names, g.root.name() + "_table");
        groups.push_back(g);
    }
    std::vector<Group *> to_fill;
    for (Group &g : groups)
        if (!g.table_name.empty()) to_fill.push_back(&g);
    fill_tables(to_fill);
    // Producers first: a group reading another's result reads the fused layer, found by the
    // name it took.
    for (auto g = groups.rbegin(); g != groups.rend(); ++g) {
        for (dsl::Layer &in : g->inputs) in = graph.find(in.name());
        for (const dsl::Layer &m : g->members)
            if (!m.same_as(g->root)) state.merged_into[m.name()] = g->root.name();
        graph.replace(g->root.name(), fused_layer(*g));
        std::string members;
        for (const dsl::Layer &m : g->members)
            members += (members.empty() ? "" : ", ") + m.name() + " (" + m.op() + ")";
        state.notes.push_back("fuse_pointwise: '" + g->root.name() + "' computes " +
                              std::to_string(g->members.size()) +
                              (g->table.defined() ? " layers as a lookup in a 256-entry table: "
                                                  : " layers in one SHAVE kernel: ") +
                              members);
    }
}

} // namespace vpuc::frontend
