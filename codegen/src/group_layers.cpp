// group_layers: a graph scheduling pass. A layer whose output keep_in_cmx could not keep in CMX
// stores it to DDR, and its reader loads it back. Where that reader is a DPU layer computing its
// rows in tasks on each tile (SOH), the layer is computed at the reader instead
// (compute_at over the reader's task loop): for each task, the rows it reads, halo rows computed
// again, into that tile's CMX, and the tensor never touches DDR. This is TPU-MLIR's LayerGroup
// and VPUX's vertical fusion for a pair of layers (docs/graph-scheduling.md). A SHAVE layer
// starting the network is computed at its reader too, so that the DPUs start after its first
// band of rows (starts_network). It is taken when:
//  - the target's tiles have one DPU each (the layer's part for a task is one DPU task);
//  - both layers run on the DPU with default schedules, or the layer is a SHAVE layer reading
//    network inputs only (starts_network); the reader is the layer's only one, and the layer no
//    graph output;
//  - the rows computed again add at most a quarter to the layer's work;
//  - its weights, loaded again for each of the reader's tasks, move fewer bytes than the round
//    trip saves;
//  - its inputs are in DDR or whole in CMX. An input kept by rows cannot serve it (the
//    reader's halo reaches across the band's edge): it becomes a copy on each tile where copies
//    beat the round trip and it fits, and otherwise the layer is left alone.
#include <algorithm>
#include <set>

#include "algorithms/registry.h"
#include "codegen/bounds.h"
#include "codegen/dpu_match.h"
#include "passes.h"

namespace vpuc::codegen {

namespace {

constexpr double kMostRecomputed = 0.25; // the share of a layer's rows computed again

// Whether the layer's schedule keeps its output in CMX: its last store_in says where.
bool stays_in_cmx(const dsl::Layer &layer) {
    bool in_cmx = false;
    for (const dsl::Directive &d : layer.schedule().directives())
        if (d.kind == dsl::Directive::Kind::StoreIn) in_cmx = d.memory == dsl::MemoryLevel::CMX;
    return in_cmx;
}

// The loop of `reader`'s schedule that splits its rows into tasks over tiles split by rows
// (distribute over y with SOH, then split(y, outer, inner)): the outer loop's name, or empty.
std::string row_task_loop(const dsl::Layer &reader) {
    bool by_rows = false;
    std::string loop;
    for (const dsl::Directive &d : reader.schedule().directives()) {
        if (d.kind == dsl::Directive::Kind::Distribute)
            by_rows = d.loops.size() == 1 && d.loops[0] == "y" &&
                      d.strategy == dsl::Strategy::SplitOverHeight;
        if (d.kind == dsl::Directive::Kind::Split && d.loops.size() == 3 && d.loops[0] == "y")
            loop = d.loops[1];
    }
    return by_rows ? loop : "";
}

// A SHAVE layer reading network inputs only (a QDQ network's input QuantizeLinear). Nothing
// runs before it: computed whole, each tile's SHAVEs take its rows in a few long tasks, the
// reader's first task waits for the first of them and the other tile's for the halo rows the
// first tile computes last. Computed at the reader's tasks, each tile's DPU starts after one
// band of rows and the SHAVEs compute the next band meanwhile, though each band pays a launch.
// vpu27: ResNet-18 int8 778 to 739 us, ResNet-50 int8 1,657 to 1,623 us, MobileNet-V2 int8
// 375 to 365 us, YOLO-tiny int8 783 to 780 us. A SHAVE layer inside the network overlaps other
// layers' work already, and reads tensors kept by rows: grouping those too was slower (YOLO-tiny
// int8 783 to 814 us, fp16 1,420 to 1,511 us).
bool starts_network(LoweringState &s, const dsl::Layer &layer) {
    const std::vector<dsl::Layer> &inputs = layer.inputs();
    return !runs_on_dpu(s, layer) && !inputs.empty() &&
           std::all_of(inputs.begin(), inputs.end(),
                       [](const dsl::Layer &in) { return in.is_input(); });
}

// Whether `layer` may be computed at the tasks of its one reader `reader`, which splits its rows
// into tasks; the inputs of `layer` kept by rows that must then become copies go to `unbanded`.
bool may_group(LoweringState &s, const dsl::Layer &layer, const dsl::Layer &reader,
               std::vector<std::string> &unbanded) {
    const dsl::LayerRegistry &registry = algorithms::layer_registry();
    if (!s.defaulted_schedules.count(layer.name()) || !s.defaulted_schedules.count(reader.name()) ||
        layer.outputs().size() != 1 || layer.output().shape[dsl::dims::N] != 1 ||
        dsl::is_constant(layer) || registry.view(layer) || registry.view(reader) ||
        is_network_output(s, layer) || !runs_on_dpu(s, reader))
        return false;
    if (!starts_network(s, layer) && (stays_in_cmx(layer) || !runs_on_dpu(s, layer))) return false;
    // The rows the reader's tasks read, against the layer's.
    const LoopNest nest = resolve_loop_nest(s.graph, reader, s.target, s.target.channel_alignment);
    const InputBounds bounds(reader);
    const int64_t height = layer.output().shape[dsl::dims::H];
    int64_t rows_read = 0, tasks = 0;
    for (const Task &t : nest.tasks()) {
        const std::vector<Region> read = bounds(t.region);
        for (size_t i = 0; i < reader.inputs().size(); ++i) {
            if (!reader.inputs()[i].same_as(layer)) continue;
            const Interval r = read[i].dims[2];
            rows_read += std::min(r.end, height) - std::max<int64_t>(r.begin, 0);
        }
        ++tasks;
    }
    if (double(rows_read) > double(height) * (1 + kMostRecomputed)) return false;
    const int64_t round_trip = 2 * cmx_bytes(layer.output(), s.target.channel_alignment);
    if (dpu_weight_bytes(layer, s.target) * tasks >= round_trip) return false;
    for (const dsl::Layer &in : layer.inputs()) {
        if (!s.rows_in_cmx.count(in.name())) continue;
        if (!copies_beat_round_trip(s.target) ||
            cmx_bytes(in.output(), s.target.channel_alignment) > kept_tensor_limit(s.target))
            return false;
        unbanded.push_back(in.name());
    }
    return true;
}

} // namespace

void group_layers(LoweringState &s) {
    // The layer's part for each of its reader's tasks runs as one DPU task: on a tile of several
    // DPUs (vpu20: 5), that would leave the others idle while it computes.
    if (!s.graph_scheduling || s.target.dpus_per_tile != 1) return;
    std::vector<std::string> grouped;
    std::set<std::string> hosts; // readers a layer is computed at: their task loops stay
    for (const dsl::Layer &layer : s.graph.layers()) {
        const std::vector<dsl::Layer> readers = s.graph.consumers(layer);
        if (readers.size() != 1 || hosts.count(layer.name())) continue;
        const std::string loop = row_task_loop(readers[0]);
        std::vector<std::string> unbanded;
        if (loop.empty() || !may_group(s, layer, readers[0], unbanded)) continue;
        for (const std::string &name : unbanded) s.rows_in_cmx.erase(name);
        s.rows_in_cmx.erase(layer.name()); // a layer starting the network may have been kept
        dsl::Layer handle = layer;
        handle.schedule() = dsl::Schedule().compute_at(readers[0].name(), loop);
        hosts.insert(readers[0].name());
        grouped.push_back(layer.name() + " at " + readers[0].name());
    }
    if (grouped.empty()) return;
    std::string list;
    for (const std::string &g : grouped) list += (list.empty() ? "" : ", ") + g;
    s.notes.push_back("group_layers: " + std::to_string(grouped.size()) +
                      " layer(s) computed at their reader's tasks: " + list);
}

} // namespace vpuc::codegen
