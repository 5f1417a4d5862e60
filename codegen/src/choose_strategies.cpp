// choose_strategies: a graph scheduling pass. Default schedules split every layer's rows over
// the tiles (SOH), so each tile needs every weight: when the weights do not fit half of CMX,
// each tile streams all of them from DDR. Splitting output channels (SOK) instead streams each
// weight once, at the price of every tile reading the whole input. A cost model estimates each
// layer both ways and keeps the faster (docs/graph-scheduling.md).
#include <algorithm>

#include "algorithms/registry.h"
#include "algorithms/views.h"
#include "passes.h"
#include "schedules/default_schedule.h"
#include "vpu_target/timing_model.h"

namespace vpuc::codegen {

namespace {

// SOK must beat SOH by this factor: the estimate leaves out what SOK adds (each tile's output
// stored as strided channel slices, DPU variants of fewer channels).
constexpr double kSokMargin = 0.9;

// A SHAVE layer of one row is spread over the tiles when each of their SHAVEs gets this many
// output vectors at least: at a kernel's few to few tens of cycles per vector, about the
// 2,633-cycle launch each tile adds.
constexpr int64_t kMinVectorsPerShave = 64;

struct Split {
    int64_t tiles = 1;
    bool over_channels = false;
};

// The tile count of the schedule's distribute over rows, 1 without one; 0 when the schedule
// distributes some other way.
int64_t rows_tiles(const dsl::Schedule &schedule) {
    int64_t tiles = 1;
    for (const dsl::Directive &d : schedule.directives())
        if (d.kind == dsl::Directive::Kind::Distribute) {
            if (d.strategy != dsl::Strategy::SplitOverHeight || d.loops.at(0) != "y") return 0;
            tiles = d.factors.at(0);
        }
    return tiles;
}

// Whether each tile of an SOH layer loads every weight with DMAs of its own: when its channel
// ranges do not all fit half of CMX, each is loaded afresh as its tasks reach it (build_tasks);
// otherwise one broadcast DMA per range serves every tile.
bool reloads_weights_per_tile(const target::Target &target, int64_t weight_bytes) {
    return weight_bytes > int64_t(target.cmx_usable_bytes) / 2;
}

// DPU time of one tile's share, as one workload in the target's fastest MPE mode, spread over
// the tile's DPUs.
double dpu_ns(const DpuOpDesc &op, const dsl::Layer &layer, const target::Target &target,
              const Split &split) {
    const dsl::Shape &out = layer.output().shape;
    const dsl::Shape &in = layer.inputs().at(size_t(op.input)).output().shape;
    const bool fp16 = op.input_type.is_float();
    target::DpuWorkload w;
    w.op = op.op;
    w.input_dtype = w.output_dtype = fp16 ? target::DType::F16 : target::DType::I8;
    w.out_c = int(out[dsl::dims::C] / (split.over_channels ? split.tiles : 1));
    w.out_w = int(out[dsl::dims::W]);
    w.out_h = int((out[dsl::dims::H] + (split.over_channels ? 0 : split.tiles - 1)) /
                  (split.over_channels ? 1 : split.tiles));
    w.in_c = int(in[dsl::dims::C]);
    w.kernel_w = op.kernel_w;
    w.kernel_h = op.kernel_h;
    w.stride_w = op.stride_w;
    w.stride_h = op.stride_h;
    w.in_w = (w.out_w - 1) * w.stride_w + w.kernel_w;
    w.in_h = (w.out_h - 1) * w.stride_h + w.kernel_h;
    double best = -1;
    for (const target::MpeMode &mode : target.mpe_modes) {
        if (!(fp16 ? mode.fp16 : mode.int8)) continue;
        w.mpe_mode = mode.name;
        const double cycles = target::dpu_workload_cycles(target, w);
        if (best < 0 || cycles < best) best = cycles;
    }
    // A tile's tasks share its DPUs (vpu20: five).
    return std::max(best, 0.0) / (target.dpu_clock_mhz / 1000) / std::max(target.dpus_per_tile, 1);
}

// DDR time of the layer's loads and stores: its inputs once per tile that reads them whole
// (SOK) or once (SOH, halos left out), its output once, its weights once per tile when SOH
// reloads them per tile, else once (a broadcast DMA, or each tile its own channels).
double ddr_ns(const dsl::Layer &layer, const target::Target &target, int64_t weight_bytes,
              const Split &split, bool weights_per_tile) {
    double inputs = 0;
    for (const dsl::Layer &in : layer.inputs()) inputs += double(in.output().bytes());
    const double bytes =
        inputs * double(split.over_channels ? split.tiles : 1) + double(layer.output().bytes()) +
        double(weight_bytes) * double(!split.over_channels && weights_per_tile ? split.tiles : 1);
    return bytes / target.ddr_bandwidth_gbps;
}

double estimate_ns(const DpuOpDesc &op, const dsl::Layer &layer, const target::Target &target,
                   int64_t weight_bytes, const Split &split, bool weights_per_tile) {
    return std::max(dpu_ns(op, layer, target, split),
                    ddr_ns(layer, target, weight_bytes, split, weights_per_tile));
}

// The default schedule of a layer whose output channels are spread over `tiles`: each tile
// computes every row of its channels, split into tasks as the default schedule splits the rows
// of a layer on one tile, its channels in groups whose weights fit a fifth of CMX.
dsl::Schedule over_channels(const dsl::Layer &layer, const target::Target &target, int64_t tiles,
                            int64_t weight_bytes, const std::vector<dsl::Dim> &unsplittable) {
    const dsl::Schedule rows =
        schedules::default_schedule(layer, target, 1, weight_bytes, unsplittable);
    dsl::Schedule sok;
    sok.distribute("c", tiles, dsl::Strategy::SplitOverKernel);
    for (const dsl::Directive &d : rows.directives()) sok.add(d);
    return sok;
}

// Whether `layer` is a SHAVE layer of one row, which the default schedule, splitting rows over
// the tiles, leaves on one tile (a transformer's [1, 64, 512] is C 64, H 1, W 512 on the
// device), and whose channels can be spread over `tiles` instead: each tile then computes its
// channels with its own SHAVEs and DMAs. Not a layer whose result is a view of its input's
// memory, nor one too small to gain: below kMinVectorsPerShave output vectors for each SHAVE
// of each tile, a launch and a DMA latency per tile cost about what the split saves (a
// classifier's dequantize of 1000 logits made ResNet-50 int8 on vpu20 3.8 us slower).
bool one_row_on_shave(const LoweringState &s, const dsl::Layer &layer, int64_t tiles) {
    const auto match = s.dpu_matches.find(layer.name());
    if (match != s.dpu_matches.end() && match->second) return false;
    if (layer.is_input() || dsl::is_constant(layer) || layer.outputs().size() != 1 ||
        algorithms::moves_images(layer) || algorithms::layer_registry().view(layer).has_value())
        return false;
    const dsl::Shape out = dsl::device_view(layer.output()).shape;
    if (out[dsl::dims::H] != 1 || out[dsl::dims::C] < 2 * tiles) return false;
    const int64_t lanes = s.target.shave_vector_bits / (8 * dsl::bytes_of(layer.output().type));
    const int64_t vectors = (out.elements() + lanes - 1) / std::max<int64_t>(lanes, 1);
    if (vectors < kMinVectorsPerShave * tiles * std::max(s.target.shaves_available(0), 1))
        return false;
    const std::vector<dsl::Dim> unsplittable =
        algorithms::layer_registry().unsplittable_dims(layer);
    return std::find(unsplittable.begin(), unsplittable.end(), dsl::dims::C) == unsplittable.end();
}

// Whether `layer`, a DPU layer, is of one row, which the default schedule leaves on one tile
// (a classifier, a projection of one token's features): split over output channels instead,
// each tile computes its channels and loads their weights, so that every tile's DPU and DMA
// engine share the work. The estimates cannot tell the two apart, both bound by the same
// weight bytes over DDR, so no margin applies. Measured with `vpuc bench models` against one
// tile: vpu27 MobileNet-V2 int8 412 to 400 us and fp16 613 to 608 us, ResNet-50 fp16 3,582 to
// 3,568 us, ResNet-18 fp16 1,450 to 1,473 us (the classifier's weights, prefetched by both
// engines, slow the last convolution's), the others the same or up to 1% faster; vpu20 the
// transformer 892 to 786 us, MobileNet-V2 fp16 2,446 to 2,313 us, ResNet-50 fp16 17,603 to
// 17,375 us, the others the same or up to 2% faster.
bool one_row_on_dpu(const dsl::Layer &layer, int64_t row_tiles) {
    return row_tiles == 1 && dsl::device_view(layer.output()).shape[dsl::dims::H] == 1;
}

} // namespace

void choose_strategies(LoweringState &s) {
    if (!s.graph_scheduling) return;
    const int64_t tiles = s.target.tiles;
    if (tiles < 2) return;
    int chosen = 0, spread = 0;
    for (const dsl::Layer &layer : s.graph.layers()) {
        if (!s.defaulted_schedules.count(layer.name())) continue;
        dsl::Layer one_row = layer;
        if (rows_tiles(one_row.schedule()) == 1 && one_row_on_shave(s, layer, tiles)) {
            dsl::Schedule over_tiles;
            over_tiles.distribute("c", tiles, dsl::Strategy::SplitOverKernel);
            for (const dsl::Directive &d : one_row.schedule().directives()) over_tiles.add(d);
            one_row.schedule() = over_tiles;
            ++spread;
            continue;
        }
        const auto match = s.dpu_matches.find(layer.name());
        if (match == s.dpu_matches.end() || !match->second) continue;
        const DpuOpDesc &op = *match->second;
        if (op.op != target::DpuOpKind::Conv && op.op != target::DpuOpKind::MatMul) continue;
        const int64_t weight_bytes = dpu_weight_bytes(op, s.target);
        const int64_t channels = layer.output().shape[dsl::dims::C];
        dsl::Layer handle = layer;
        const int64_t row_tiles = rows_tiles(handle.schedule());
        // Every tile needs whole channel groups of its own.
        if (row_tiles == 0 || weight_bytes == 0 ||
            channels < tiles * int64_t(s.target.channel_alignment))
            continue;
        const std::vector<dsl::Dim> unsplittable =
            algorithms::layer_registry().unsplittable_dims(layer);
        if (std::find(unsplittable.begin(), unsplittable.end(), dsl::dims::C) != unsplittable.end())
            continue;
        if (!one_row_on_dpu(layer, row_tiles)) {
            const bool per_tile = reloads_weights_per_tile(s.target, weight_bytes);
            const double soh =
                estimate_ns(op, layer, s.target, weight_bytes, {row_tiles, false}, per_tile);
            const double sok =
                estimate_ns(op, layer, s.target, weight_bytes, {tiles, true}, per_tile);
            if (sok >= kSokMargin * soh) continue;
        }
        handle.schedule() = over_channels(layer, s.target, tiles, weight_bytes, unsplittable);
        ++chosen;
    }
    if (chosen > 0)
        s.notes.push_back("choose_strategies: " + std::to_string(chosen) +
                          " layer(s) split over output channels (SOK), each weight streamed once; "
                          "--dump-after choose_strategies lists every layer's schedule");
    if (spread > 0)
        s.notes.push_back("choose_strategies: " + std::to_string(spread) +
                          " SHAVE layer(s) of one row split over channels across the tiles; "
                          "--dump-after choose_strategies lists every layer's schedule");
}

} // namespace vpuc::codegen
