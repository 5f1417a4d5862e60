// Default schedules: what a layer runs with when its author did not schedule it.
#pragma once

#include "dsl/graph.h"
#include "dsl/layer.h"
#include "vpu_target/target.h"

namespace vpuc::schedules {

// A schedule for `layer` on `target`: output rows spread over the NCE tiles (split over
// height), each tile's rows split into up to four tasks so that DMA overlaps compute (fewer
// when a task would move too few bytes to amortize a DMA's latency, more when its input and
// output would not fit a share of CMX with room for double buffering), task rows a multiple
// of the most efficient MPE mode's block height, inputs prefetched one task ahead. The engine
// is left to the compiler (the DPU when the algorithm matches it). `max_tiles` limits the
// distribution to that many tiles (0: all of the target's), e.g. to measure what more tiles
// gain.
dsl::Schedule default_schedule(const dsl::Layer &layer, const target::Target &target,
                               int max_tiles = 0);

// Gives every layer of `graph` without a schedule its default schedule.
void apply_default_schedules(const dsl::Graph &graph, const target::Target &target);

} // namespace vpuc::schedules
