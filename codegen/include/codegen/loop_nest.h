// The loop nest a schedule gives one layer, resolved and checked: which loops exist, which
// are task loops (each iteration a DPU/SHAVE task with its own DMAs), and the output region
// of every task. The first lowering pass builds one per layer.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "dsl/graph.h"
#include "dsl/layer.h"
#include "vpu_target/target.h"

namespace vpuc::codegen {

// A half-open interval of one pure dimension.
struct Interval {
    int64_t begin = 0, end = 0;
    int64_t extent() const { return end - begin; }
    bool operator==(const Interval &o) const { return begin == o.begin && end == o.end; }
};

// An output region over the pure dims (c, x, y).
struct Region {
    std::array<Interval, 3> dims; // c, x, y
    int64_t elements() const { return dims[0].extent() * dims[1].extent() * dims[2].extent(); }
    bool operator==(const Region &o) const { return dims == o.dims; }
    std::string to_string() const; // "c[0,64) x[0,56) y[8,16)"
};

struct Loop {
    std::string name;
    int64_t extent = 1;
    bool task_loop = false; // made by split/tile/distribute: iterates tasks
    bool unrolled = false;  // SHAVE kernels
    int64_t vector_width = 0;
    int64_t tiles = 0; // > 0 on the tile loop of distribute: its index is the NCE tile
    dsl::Strategy strategy = dsl::Strategy::SplitOverHeight;
    int var = -1; // index into LoopNest::vars
};

// Every loop variable the schedule defined: the pure dims c, x, y are vars 0, 1, 2, then one per
// loop a directive made. Names can repeat: distribute keeps the name of the loop it divides.
struct LoopVar {
    std::string name;
    int64_t extent = 1;
    int dim = -1; // 0, 1, 2: c, x or y or split from it; -1: fused, or a tile loop
    // Elements of its dim per iteration: 1 for c, x, y; the factor for the outer loop of a
    // split; for an uneven one, the gcd of the pieces before the last.
    int64_t unit = 1;
};

// How variables derive from each other: the split tree (a DAG once fuse joins two loops).
// Values are offsets from the start of the range the parent covers; every relation clamps to
// its parent, so a non-dividing factor makes the last iteration smaller (nothing recomputed).
struct LoopRelation {
    enum class Kind { Split, Distribute, Fuse };
    Kind kind = Kind::Split;
    // Split:      whole = starts[outer] + inner, clamped to the piece [starts[outer],
    //             starts[outer + 1]); a split by factor f has starts 0, f, 2f, ... (the last
    //             one the extent of whole).
    // Distribute: whole = start of chunk `outer` + inner, where `whole` is cut into `factor`
    //             contiguous chunks of whole `granule`s (the last one may be cut short) whose
    //             granule counts differ by at most one, larger chunks first; with
    //             `replicate` (Clustering) every chunk is the whole range.
    // Fuse:       `whole` is the fused loop: inner = whole % extent(inner),
    //             outer = whole / extent(inner).
    int whole = 0, outer = 0, inner = 0; // indices into LoopNest::vars
    int64_t factor = 1;                  // Distribute: the chunks; Fuse: the inner extent
    int64_t granule = 1;
    bool replicate = false;
    std::vector<int64_t> starts; // Split
};

struct Task {
    Region region;                   // the output this task computes
    int tile = 0;                    // NCE tile
    std::vector<int64_t> loop_index; // of every task loop, outermost first
};

// Task loops are always outside the loops that run inside a task: after applying the schedule
// in Halide order, resolution moves loops that are not task loops inward, keeping the relative
// order within each group. A task is one iteration of every task loop.
struct LoopNest {
    std::string layer;
    std::vector<Loop> loops; // innermost first
    std::vector<LoopVar> vars;
    std::vector<LoopRelation> relations; // in the order the schedule made them
    dsl::Engine engine = dsl::Engine::Auto;
    std::string mpe_mode; // "" when the compiler chooses
    std::string workload_loop;
    int64_t workloads = 1;
    int64_t prefetch = 0;
    bool compute_root = true;
    std::string compute_at_layer, compute_at_loop;
    dsl::MemoryLevel store = dsl::MemoryLevel::DDR;
    bool spill = false;
    // Computed at root with its whole output kept in CMX (store_in(CMX), or HKSwitch): every
    // tile that computes it or runs a consumer holds all of it; consumers read it there.
    bool broadcast = false;

    // Every task in execution order (outermost task loop slowest), with its tile. Iterations
    // that clamping leaves empty (nested non-dividing splits) are not tasks. Without task loops
    // there is one task covering the whole output, on tile 0.
    std::vector<Task> tasks() const;
    const Loop *find(const std::string &name) const;
    std::vector<std::string> task_loop_names() const; // outermost first
};

// Applies `layer`'s schedule to its output extents (c, x, y) and checks every directive
// against the layer, its place in `graph` (compute_at names a consumer and one of its task
// loops) and the target. Throws dsl::ScheduleError naming the layer and directive and
// listing what is legal:
//   "layer 'conv1': split(z, zo, zi, 8): no loop 'z' (loops: c, x, y)"
// The nest covers one image; a batch runs it once per image. Throws LoweringError when the
// output is not NxCxHxW with N, C, H, W > 0.
//
// Semantics beyond schedule.h:
// - split(v, o, i, f): o, i replace v in place (i inside o). o is a task loop; i is one only if
//   v was. New names are identifiers (letters, digits, '_') not used by another loop; v's own
//   name may be reused. A fused loop that runs inside a task cannot be split (its parts would
//   not be boxes). With extents {e0, e1, ...} (uneven), o has one iteration per piece and i the
//   largest piece's extent; smaller pieces clamp i. Listing more extents than it takes to cover
//   v is an error.
// - reorder(...): the named loops are permuted among the positions they hold (Halide).
// - fuse(inner, outer, f): inner must be directly inside outer and both task loops or neither;
//   f takes inner's place with the product extent. A fused loop is not split from one pure
//   dimension, so it cannot be distributed or carry workloads.
// - distribute(v, n, s): v becomes the tile loop "v.tile" (a task loop, extent and tiles n,
//   strategy s; its index is Task::tile) directly outside a remainder loop that keeps the
//   name v and v's task-ness. SOH and HKSwitch cut v into n contiguous chunks whose sizes
//   differ by at most one, larger first (HKSwitch also keeps the output in CMX: `broadcast`);
//   SOK does the same on a loop from c, in whole channel granules (below). Clustering replicates:
//   the remainder keeps v's extent and every tile computes the same regions. n is at most the
//   target's tiles and, except for Clustering, v's extent. The tile loop cannot be split, fused or
//   distributed.
// - Loops that are unrolled or vectorized cannot be split, fused or distributed afterwards.
// - unroll/vectorize and workloads check the schedule's final engine (its last
//   on_dpu/on_shave), wherever they stand in it.
// - compute_at resolves the consumer's own schedule (its errors propagate, naming it).
// - `channel_granule`: every task's output channels start and end on a multiple of it, or
//   end at the layer's channel count. The DPU computes output channels in groups of the
//   target's channel alignment (16), so a layer on the DPU passes that: split and tile then
//   take channel factors that keep task boundaries on it, and SOK cuts whole granules.
LoopNest resolve_loop_nest(const dsl::Graph &graph, const dsl::Layer &layer,
                           const target::Target &target, int64_t channel_granule = 1);

} // namespace vpuc::codegen
