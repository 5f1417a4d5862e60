// Random legal schedules, drawn from the schedule space (schedule_space.h): the property
// tests' inputs ("a schedule changes speed, never results"), and a starting population for
// the autotuner.
#pragma once

#include <random>

#include "dsl/graph.h"
#include "dsl/layer.h"
#include "dsl/schedule.h"
#include "vpu_target/target.h"

namespace vpuc::codegen {

// A random schedule for `layer` (a layer of `graph`) on `target` and `engine` (Auto: the DPU
// when the DPU matcher recognizes the layer, else SHAVE). Every directive is one of the
// choices schedule_space() offers after the directives before it, so resolve_loop_nest
// accepts the schedule (anything else is a bug in the space). In order:
//   zero to five of: split (even, or uneven with two to four pieces; new names fresh or the
//                split loop's own, as in Halide's split(x, x, xi, f)), tile, distribute,
//                reorder (of some of the loops), fuse, compute_at (the likeliest when
//                offered: a producer with one consumer goes into it), store_in
//   workloads(v, n <= 6) on the DPU; vectorize and unroll (each on its own loop) on SHAVE
//   on_dpu(mode) or on_shave(), and now and then prefetch(0..3), each at a random place in
//   the list (the resolver reads them wherever they stand); on the DPU, about one schedule
//   in ten without an engine directive (the compiler's choice), when the resolver takes it.
//
// A layer gets at most 32 tasks, and about one schedule in ten is "tiny": up to 256 tasks of
// small factors (one row, one channel or channel group), the corner cases without the cost of
// thousands of tasks. The result depends only on the graph's shapes and types, the target and
// `rng`'s state; draws use rng() directly (not std::uniform_int_distribution, whose algorithm
// the standard leaves to the library), so a seed gives the same schedule everywhere.
dsl::Schedule random_schedule(const dsl::Graph &graph, const dsl::Layer &layer,
                              const target::Target &target, std::mt19937 &rng,
                              dsl::Engine engine = dsl::Engine::Auto);

} // namespace vpuc::codegen
