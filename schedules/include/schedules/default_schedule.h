// Default schedules: what a layer runs with when its author did not schedule it.
#pragma once

#include "dsl/graph.h"
#include "dsl/layer.h"
#include "vpu_target/target.h"

namespace vpuc::schedules {

// A schedule for `layer` on `target`: output rows spread over the NCE tiles (split over
// height), each tile's rows split into up to four tasks so that DMA overlaps compute (fewer
// when a task would move too few bytes to amortize a DMA's latency, more when its input and
// output would not fit a share of CMX with room for double buffering, at least one per DPU
// when the layer is bound by compute), task rows a multiple of the most efficient MPE mode's
// block height, inputs prefetched one task per busy DPU ahead. `weight_bytes` is the size of the
// layer's constant weights in the DPU's layout (0: none); weights larger than a fifth of CMX are
// split by output channels, each group of channels computed over all rows before the next, so that
// one group's weights are in CMX at a time. The engine is left to the compiler (the DPU when the
// algorithm matches it). `max_tiles` limits the distribution to that many tiles (0: all of the
// target's), e.g. to measure what more tiles gain. `unsplittable` lists the logical dimensions
// a task must cover whole (the layer registry's answer): along them, no split and no
// distribution. `on_shave`: the layer runs on the SHAVEs, whose tasks each pay a kernel
// launch: fewer tasks, as many as balance the launches against the DMA they hide.
dsl::Schedule default_schedule(const dsl::Layer &layer, const target::Target &target,
                               int max_tiles = 0, int64_t weight_bytes = 0,
                               const std::vector<dsl::Dim> &unsplittable = {},
                               bool on_shave = false);

} // namespace vpuc::schedules
