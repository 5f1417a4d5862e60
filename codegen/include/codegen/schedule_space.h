// The schedule space: for one layer on a target and engine, given the schedule so far, every
// directive that may come next and the values it may take, as data that an autotuner (or
// random_schedule.h) enumerates and samples.
//
// The legality is resolve_loop_nest's and the DPU matcher's, not a copy of it: the space tries
// each candidate (the schedule so far, the candidate, and the engine's directive when the
// schedule does not end on it) with the resolver and keeps what it accepts. What the space
// decides itself is which candidates to try (split factors 1 up to one past the loop's extent,
// tile counts up to the target's tiles, prefetch depths up to 16, vectorize widths up to one
// SHAVE vector) and what the layer registry forbids: loops from a dimension the layer's kernel
// may not split (softmax's axis) are not split, tiled, distributed over chunks or cut into
// workloads. Lives in codegen because both the resolver and the DPU matcher do.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "codegen/loop_nest.h"
#include "dsl/dims.h"
#include "dsl/graph.h"
#include "dsl/layer.h"
#include "dsl/schedule.h"
#include "vpu_target/target.h"

namespace vpuc::codegen {

// One directive that may come next, with everything fixed but its numbers and the names of
// the loops it makes.
struct Choice {
    dsl::Directive::Kind kind = dsl::Directive::Kind::Split;
    // The existing loops the directive names, in its argument order: split, unroll,
    // vectorize, workloads, distribute {v}; tile {x, y}; fuse {inner, outer}; compute_at {the
    // consumer's task loop}. reorder: the loops it may permute (any two or more of them, each
    // at most once).
    std::vector<std::string> loops;
    std::string name; // compute_at: the consumer; on_dpu: the MPE mode ("": the compiler's)
    dsl::MemoryLevel memory = dsl::MemoryLevel::DDR;         // store_in
    dsl::Strategy strategy = dsl::Strategy::SplitOverHeight; // distribute
    // The allowed values of each number the directive takes, in argument order: split {factors},
    // tile {x factors, y factors}, distribute {tile counts}, workloads {counts}, prefetch
    // {depths}, vectorize {widths}; empty for directives without numbers.
    std::vector<std::vector<int64_t>> values;
    // split: also uneven, with a list of extents from values[0], the last one the first whose
    // sum reaches the loop's extent.
    bool uneven = false;
    // How many new loop names the directive takes: split 2 (outer, inner), tile 4 (xo, yo,
    // xi, yi), fuse 1. They are identifiers no loop of the nest has (ScheduleSpace::
    // new_loop_name); a split may also reuse the name of the loop it splits.
    int new_loops = 0;

    // The directive with `numbers` (one of each of `values`, or an uneven split's extents) and
    // `names` (the new loops; for reorder, the loops to permute, innermost first). Throws
    // dsl::ScheduleError when they do not fit the choice.
    dsl::Directive make(const std::vector<int64_t> &numbers = {},
                        const std::vector<std::string> &names = {}) const;
    std::string to_string() const; // "split(y; 1..7, uneven)", "compute_at(conv2, yo)"
};

struct ScheduleSpace {
    dsl::Engine engine = dsl::Engine::DPU; // what the choices are for: DPU or SHAVE
    // The engines the layer can run on: the DPU when the DPU matcher recognizes it, SHAVE
    // always.
    std::vector<dsl::Engine> engines;
    int64_t channel_granule = 1; // passed to resolve_loop_nest (the DPU's channel alignment)
    std::vector<dsl::Dim> unsplittable_dims; // from algorithms::layer_registry()
    LoopNest nest;                           // the schedule so far, resolved
    std::vector<Choice> choices;

    std::vector<const Choice *> of_kind(dsl::Directive::Kind kind) const;
    // `stem`, or `stem` and a number: an identifier that no loop or loop variable has.
    std::string new_loop_name(const std::string &stem) const;
};

// The spaces of one layer, after any schedule so far. What does not depend on the schedule
// (the engine, whether the DPU matcher recognizes the layer, the unsplittable dims) is worked
// out once, on construction; `graph` and `target` must outlive it.
//
// `engine` Auto is the DPU when the DPU matcher recognizes the layer, SHAVE otherwise; DPU for
// a layer it does not recognize is a dsl::ScheduleError naming the layer and why.
class LayerScheduleSpace {
  public:
    LayerScheduleSpace(const dsl::Graph &graph, const dsl::Layer &layer,
                       const target::Target &target, dsl::Engine engine = dsl::Engine::Auto);

    // The space after `so_far`. Every choice, made with any of its values, is accepted by
    // resolve_loop_nest(graph, layer, target, channel_granule) after `so_far`, provided the
    // finished schedule names the space's engine (on_dpu/on_shave, wherever it stands; the
    // choices of that kind). Throws the resolver's error when `so_far` itself is not legal.
    // The layer's own schedule is left as it was (it is swapped while the space is built, so
    // layers of `graph` must not be used by another thread meanwhile).
    //
    // Each candidate costs a resolution, so a space takes hundreds of them: `kinds` limits it
    // to choices of those kinds (all when empty), for a search that picks the kind first.
    ScheduleSpace after(const dsl::Schedule &so_far,
                        const std::vector<dsl::Directive::Kind> &kinds = {}) const;
    dsl::Engine engine() const { return base_.engine; }

  private:
    const dsl::Graph &graph_;
    dsl::Layer layer_; // a handle: its schedule is the graph's
    const target::Target &target_;
    ScheduleSpace base_; // engine, engines, channel granule, unsplittable dims
};

// LayerScheduleSpace(graph, layer, target, engine).after(so_far, kinds).
ScheduleSpace schedule_space(const dsl::Graph &graph, const dsl::Layer &layer,
                             const target::Target &target, dsl::Engine engine = dsl::Engine::Auto,
                             const dsl::Schedule &so_far = {},
                             const std::vector<dsl::Directive::Kind> &kinds = {});

} // namespace vpuc::codegen
