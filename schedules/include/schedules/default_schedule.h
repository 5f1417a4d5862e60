// Default schedules: what a layer runs with when its author did not schedule it.
#pragma once

#include "dsl/graph.h"
#include "dsl/layer.h"
#include "vpu_target/target.h"

namespace vpuc::schedules {

// A schedule for `layer` on `target`: output rows spread over the NCE tiles (split over
// height), each tile's rows split into tasks whose input and output fit a share of CMX with
// room for double buffering, inputs prefetched one task ahead. The engine is left to the
// compiler (the DPU when the algorithm matches it).
dsl::Schedule default_schedule(const dsl::Layer &layer, const target::Target &target);

// Gives every layer of `graph` without a schedule its default schedule.
void apply_default_schedules(const dsl::Graph &graph, const target::Target &target);

} // namespace vpuc::schedules
