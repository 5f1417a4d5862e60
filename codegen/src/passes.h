// The lowering passes and the state they share. lower.cpp runs them in order.
#pragma once

#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "codegen/dpu_match.h"
#include "codegen/loop_nest.h"
#include "codegen/lower.h"
#include "codegen/task_ir.h"
#include "dsl/registry.h"

namespace vpuc::codegen {

struct LayerPlan {
    dsl::Layer layer;
    LoopNest nest;
    bool on_shave = false; // else on the DPU, as `dpu`
    DpuOpDesc dpu;
    uint32_t kernel = 0; // SHAVE layers: index into Program::kernels
    // A layer that only rearranges data (concat, slice), lowered as a view of DDR memory: no
    // task computes it (plan_views sets it from the layer registry).
    std::optional<dsl::ViewDef> view;
};

// A tensor that lies inside another's DDR memory: `box` of tensor `in`, or, for an alias, all
// of `in`'s bytes in this tensor's shape (plan_views).
struct Placement {
    std::string in;
    dsl::Box box;
    bool alias = false;
};

// The tasks of one layer computed at root, per tile in order: for each, the DMAs loading its
// inputs from DDR and the task computing it (build_tasks), which order_prefetch links so that
// loads run at most `prefetch` tasks ahead.
struct PrefetchChain {
    struct Step {
        std::vector<int> input_loads;
        int compute = -1;
    };
    std::string layer;
    int64_t prefetch = 0;
    std::vector<std::vector<Step>> tiles;
};

// A layer kept in CMX (LoopNest::broadcast): a copy of its whole output in the CMX of each
// tile that computes it or reads it (build_tasks), which broadcast_outputs keeps equal; or, for
// a layer of LoweringState::rows_in_cmx, on each tile computing it, the rows its tasks there
// compute or read, those computed on another tile (a halo) copied in by broadcast_outputs.
struct ResidentCopies {
    std::string layer;
    std::map<int, int> buffers; // tile -> CMX buffer
    // A replicated layer (Clustering) computes all of its output on each of these tiles.
    std::set<int> computing_all;
    // Kept by rows: the rows each buffer holds (all channels and columns). Empty: all of them.
    std::map<int, Interval> rows;
};

// A constant build_tasks reserved for the weights and weight table of output channels
// `channels` (unpadded) of `layer`, which pack_weights fills.
struct WeightPack {
    std::string layer;
    Interval channels;
    int constant = -1; // its buffer
};

// When each task starts and ends (ns), in program order, as order_as_run simulated them.
struct RunTimes {
    std::vector<double> start_ns, end_ns;
};

struct LoweringState {
    LoweringState(const dsl::Graph &g, const target::Target &t, Program p = {})
        : graph(g), target(t), program(std::move(p)) {}

    const dsl::Graph &graph;
    const target::Target &target;
    std::vector<LayerPlan> plans; // graph.layers() order
    Program program;
    // What the DPU matcher made of layers default_schedules sized (nullopt: not a DPU op), so
    // that select_engines need not match them again.
    std::map<std::string, std::optional<DpuOpDesc>> dpu_matches;
    // The layers default_schedules scheduled: the graph scheduling passes change these only,
    // never an author's schedule.
    std::set<std::string> defaulted_schedules;
    std::map<std::string, dsl::Schedule> authored_schedules; // the others, as their author wrote
    bool graph_scheduling = true;                            // LowerOptions::graph_scheduling
    // Layer or input name -> where its whole tensor is in DDR: a buffer of its own, or a part
    // of another tensor's (`placed`).
    std::map<std::string, View> tensor_views;
    std::map<std::string, Placement> placed;
    std::map<std::string, std::vector<int>> layer_writers; // layer -> tasks writing its output
    std::vector<WeightPack> weight_packs;                  // in the order of their constants
    std::vector<PrefetchChain> prefetch_chains;            // layers computed at root
    std::vector<ResidentCopies> resident_copies;           // layers kept in CMX
    std::optional<RunTimes> run_times; // set by order_as_run when it ordered the program
    // Set by prefetch_weights when it queued weight copies ahead of a layer before theirs.
    bool weights_prefetched = false;
    // Layers kept in CMX (store_in(CMX)) by rows (keep_in_cmx): each tile computing one holds
    // the rows given here, those it computes and those its tasks read, and every task reading
    // the layer runs on such a tile.
    std::map<std::string, std::map<int, Interval>> rows_in_cmx;
    std::vector<uint8_t> blob;
    // What a user should know about the lowering, such as a layer engine Auto put on the
    // SHAVEs and why; lower() logs each after its pass as "note: ...".
    std::vector<std::string> notes;

    const LayerPlan &plan_of(const std::string &layer) const {
        for (const LayerPlan &plan : plans)
            if (plan.layer.name() == layer) return plan;
        throw LoweringError("no plan for layer '" + layer + "'");
    }

    // A tensor of the graph by name: a graph input, or an output of a layer (dsl::output_name).
    const dsl::TensorDesc &tensor(const std::string &name) const {
        for (const dsl::Layer &in : graph.inputs())
            if (in.name() == name) return in.output();
        for (const LayerPlan &plan : plans)
            for (const dsl::TensorDesc &t : plan.layer.outputs())
                if (t.name == name) return t;
        throw LoweringError("no tensor '" + name + "'");
    }

    // After a pass replaced the program's tasks, the task indices the state keeps follow:
    // task `old` is now task new_index(old).
    template <typename F> void renumber_tasks(F new_index) {
        for (auto &[layer, writers] : layer_writers)
            for (int &w : writers) w = new_index(w);
        for (PrefetchChain &chain : prefetch_chains)
            for (auto &steps : chain.tiles)
                for (PrefetchChain::Step &step : steps) {
                    for (int &load : step.input_loads) load = new_index(load);
                    step.compute = new_index(step.compute);
                }
    }

    std::vector<int> writers_of(const std::string &layer) const {
        auto it = layer_writers.find(layer);
        return it == layer_writers.end() ? std::vector<int>{} : it->second;
    }
};

// The DMA engine that loads into a tile's CMX, and the one that stores out of it: different
// engines, so a tile's loads and stores run side by side.
inline int dma_engine_in(const target::Target &t, int tile) {
    return tile % t.dma_engines;
}
inline int dma_engine_out(const target::Target &t, int tile) {
    return (tile + 1) % t.dma_engines;
}

// A DMA task of `layer` on engine `engine`.
inline TaskIR dma_task(const std::string &name, const std::string &layer, int engine, DmaWork copy,
                       std::vector<int> deps) {
    TaskIR t;
    t.name = name;
    t.layer = layer;
    t.engine = blob::EngineKind::Dma;
    t.index = uint32_t(engine);
    t.work = std::move(copy);
    t.deps = std::move(deps);
    return t;
}

// The weight constants: what build_tasks reserved for pack_weights.
inline std::set<int> weight_constants(const LoweringState &s) {
    std::set<int> constants;
    for (const WeightPack &pack : s.weight_packs) constants.insert(pack.constant);
    return constants;
}

// Whether `t` copies one of `constants` (weight_constants) into CMX.
inline bool copies_weights(const TaskIR &t, const std::set<int> &constants) {
    const auto *dma = std::get_if<DmaWork>(&t.work);
    return dma && constants.count(dma->src.buffer);
}

// A CMX buffer that allocate_cmx moved out of CMX to make room at task `at`.
struct Eviction {
    int buffer = -1;
    int at = -1;
};

// Takes each evicted buffer out of CMX after its last use before `at` and brings it back, as
// a new buffer, before its next use; the tasks using it from then on use the new buffer.
// Computed data is stored to DDR scratch and loaded back; data copied from constants is
// copied from them again. (spill.cpp; used by allocate_cmx.)
void insert_spills(LoweringState &s, const std::vector<Eviction> &evictions);

// What allocating the program's CMX as it stands would evict; the program is left as it was
// (allocate.cpp).
std::vector<Eviction> cmx_evictions(LoweringState &s);

// Each pass does one job; each verify_* checks the pass's output and throws LoweringError.
// Every tensor of the graph has a device element type (i64, bool and f64 do not).
void check_element_types(LoweringState &s);
void default_schedules(LoweringState &s);
// Graph scheduling (docs/graph-scheduling.md), on the layers default_schedules scheduled, unless
// LowerOptions::graph_scheduling is off: SOK for layers that stream fewer weights that way, then
// outputs kept in CMX between their producer and their last reader when they fit, then a layer
// whose output was not kept computed at its one reader's tasks where that pays.
void choose_strategies(LoweringState &s);
void keep_in_cmx(LoweringState &s);
void group_layers(LoweringState &s);
// keep_in_cmx's measures, which group_layers shares: the most bytes a tensor kept in CMX takes
// of a tile's CMX; the bytes of `t` in CMX, channels in whole groups as the DPU holds them;
// whether copying a tensor to every tile's CMX costs less than a DDR round trip.
int64_t kept_tensor_limit(const target::Target &target);
int64_t cmx_bytes(const dsl::TensorDesc &t, int64_t channel_alignment);
bool copies_beat_round_trip(const target::Target &target);
// Only layers default_schedules scheduled have changed schedules, and no graph output stays in
// CMX.
void verify_graph_schedules(const LoweringState &s);
void resolve_schedules(LoweringState &s);
// Whether `layer` will run on the DPU: its schedule's engine, or the DPU matcher's answer (kept
// for select_engines).
bool runs_on_dpu(LoweringState &s, const dsl::Layer &layer);
void select_engines(LoweringState &s);
void compile_shave_kernels(LoweringState &s);
void plan_views(LoweringState &s);
void declare_tensors(LoweringState &s);
void build_tasks(LoweringState &s);
void broadcast_outputs(LoweringState &s);
void order_prefetch(LoweringState &s);
void pack_weights(LoweringState &s);
void choose_workloads(LoweringState &s);
void split_weight_copies(LoweringState &s);
// Graph scheduling on the task program: each layer's first weight copies queued before the
// layer before computes, unless CMX allocation would then evict a buffer while they wait.
void prefetch_weights(LoweringState &s);
void allocate_cmx(LoweringState &s);
void allocate_ddr(LoweringState &s);
// Once weights are prefetched: the DMA engine mapping (by tile, by direction, or weights apart)
// a timing-only trial of each shows fastest.
void assign_dma_engines(LoweringState &s);
// How long `s`'s program with `tasks` instead of its own runs on the simulator, timing only,
// each of its dependencies across queues a barrier of its own; nullopt for a program the trial
// blob cannot hold (more than 65,536 barriers) or of no task. (barriers.cpp)
std::optional<double> simulated_latency_ns(const LoweringState &s, std::vector<TaskIR> tasks);
void reduce_dependencies(LoweringState &s);
void order_as_run(LoweringState &s);
void assign_barriers(LoweringState &s);
void map_physical_barriers(LoweringState &s);
void assemble(LoweringState &s);

// Runs the passes of lower() from `first` through `last`, each followed by its verifier.
void run_passes(LoweringState &s, const std::string &first, const std::string &last);

// Notes each NCHW graph input with what its layout costs the DMAs (input_layout.cpp).
void note_input_layouts(LoweringState &s);

void verify_views(const LoweringState &s);
void verify_tensors(const LoweringState &s);
void verify_tasks(const LoweringState &s);
void verify_channel_padding(const LoweringState &s);
void verify_broadcasts(const LoweringState &s);
void verify_prefetch(const LoweringState &s);
void verify_weights(const LoweringState &s);
void verify_workloads(const LoweringState &s);
void verify_weight_copies(const LoweringState &s);
void verify_allocation(const LoweringState &s);
void verify_barriers(const LoweringState &s);
void verify_blob(const LoweringState &s);

// A program's tasks put in another order (prefetch_weights, order_as_run): entry i of `order`
// is the index of the task to put at i. new_indices gives where each task goes; reordered, the
// tasks in their new order, their dependencies renumbered.
std::vector<int> new_indices(const std::vector<int> &order);
std::vector<TaskIR> reordered(const std::vector<TaskIR> &tasks, const std::vector<int> &order);

IoDecl io_decl(const dsl::TensorDesc &t);
bool is_network_output(const LoweringState &s, const dsl::Layer &layer);
// A layer computed at root and not kept in CMX: its output goes to DDR.
inline bool stored_in_ddr(const LayerPlan &plan) {
    return plan.nest.compute_root && !plan.nest.broadcast;
}
// A dense view of all of `t` in `buffer`, in t's memory order: dims (C, W, H, N).
View tensor_view(int buffer, const dsl::TensorDesc &t);
// The part `box` (logical N, C, H, W) of `whole`, a view as tensor_view makes.
View box_view(const View &whole, const dsl::Box &box);
blob::DType blob_dtype(Halide::Type t);
blob::DType blob_dtype(dsl::ElemType t);

} // namespace vpuc::codegen
