#include "schedules/default_schedule.h"

#include <algorithm>

namespace vpuc::schedules {

namespace {

int64_t row_bytes(const dsl::TensorDesc &t) {
    return t.shape[dsl::dims::C] * t.shape[dsl::dims::W] * dsl::bytes_of(t.type);
}

} // namespace

dsl::Schedule default_schedule(const dsl::Layer &layer, const target::Target &target) {
    const dsl::TensorDesc &out = layer.output();
    const int64_t rows = out.shape[dsl::dims::H];
    const int64_t tiles = std::min<int64_t>(target.tiles, rows);
    // Bytes one output row costs in CMX: the row itself and the input rows it needs (twice
    // for strided or windowed layers, a bound that holds for stride and kernel up to 2x2 per
    // row; larger windows are split by the lowering's CMX check).
    int64_t per_row = row_bytes(out);
    for (const auto &in : layer.inputs()) {
        const int64_t ratio =
            std::max<int64_t>(1, in.output().shape[dsl::dims::H] / std::max<int64_t>(rows, 1));
        per_row += 2 * ratio * row_bytes(in.output());
    }
    // Double-buffered inputs and outputs, and room for the weights: a quarter of CMX per task.
    const int64_t budget = int64_t(target.cmx_usable_bytes) / 4;
    const int64_t rows_per_tile = (rows + tiles - 1) / tiles;
    const int64_t task_rows =
        std::clamp<int64_t>(budget / std::max<int64_t>(per_row, 1), 1, rows_per_tile);

    dsl::Schedule s;
    if (tiles > 1) s.distribute("y", tiles, dsl::Strategy::SplitOverHeight);
    if (task_rows < rows_per_tile) s.split("y", "yo", "yi", task_rows);
    s.prefetch(1);
    return s;
}

void apply_default_schedules(const dsl::Graph &graph, const target::Target &target) {
    for (const auto &layer : graph.layers()) {
        dsl::Layer handle = layer;
        if (handle.schedule().empty()) handle.schedule() = default_schedule(layer, target);
    }
}

} // namespace vpuc::schedules
