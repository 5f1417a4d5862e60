// Random legal schedules: the property test's inputs ("a schedule changes speed, never
// results"), and a starting population for the autotuner.
#pragma once

#include <random>

#include "dsl/layer.h"
#include "dsl/schedule.h"
#include "vpu_target/target.h"

namespace vpuc::schedules {

// A random schedule for `layer` on `target` that codegen::resolve_loop_nest accepts (anything
// else is a bug here), made of the directives the lowering supports today:
//   distribute(y | c or a loop split from it, 2..tiles, SOH | SOK)   at most once
//   split / tile of loops from c, x and y with random factors: dividing or not, 1, or larger
//                than the extent; new names are fresh or reuse the split loop's (Halide's
//                split(x, x, xi, f)); on the DPU, channel task boundaries fall on multiples
//                of the target's channel alignment (factors and SOK chunks of whole groups)
//   reorder      of a random subset of the task loops (sometimes of any loops)
//   prefetch(0..3)
// and for `engine` DPU (a layer the DPU runs; the engine asked for is the DPU or the
// compiler's choice):
//   workloads(v, n)   on a loop that runs inside a task
//   on_dpu("" or an MPE mode of `target` that takes the layer's input type)
// or for SHAVE (a layer the DPU cannot run):
//   vectorize(v, 2..16) and unroll(w)   on loops that run inside a task
//   on_shave()
// The engine directive and prefetch stand anywhere in the list, as the resolution allows.
//
// A layer gets at most 32 tasks, and about one schedule in ten is "tiny": up to 256 tasks of
// small factors (one row, one channel or channel group), the corner cases without the cost of
// thousands of tasks. The result depends only on the layer's shape and input type, the target and
// `rng`'s state; draws use rng() directly (not std::uniform_int_distribution, whose algorithm the
// standard leaves to the library), so a seed gives the same schedule everywhere.
dsl::Schedule random_schedule(const dsl::Layer &layer, const target::Target &target,
                              std::mt19937 &rng, dsl::Engine engine = dsl::Engine::DPU);

} // namespace vpuc::schedules
