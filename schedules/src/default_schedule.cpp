#include "schedules/default_schedule.h"

#include <algorithm>
#include <cmath>

#include "dsl/registry.h"

namespace vpuc::schedules {

namespace {

// Tasks per tile. One task per tile runs load, compute and store back to back; with several,
// the next task's input loads and the previous one's output stores while the DPU computes,
// and only the first load and the last store are exposed: a quarter of the tile's DMA at four
// tasks. More tasks shrink that further but pay the DPU's fixed cost per task (~190 cycles on
// vpu27, and the weights re-fetched per workload) and the DMAs' fixed latency. On vpu27 the
// 3x3, 1x1 and depthwise layers of `vpuc bench layers` take 12-31% less time with four tasks
// per tile than with one (docs/benchmarks.md).
constexpr int64_t kTasksPerTile = 4;

// A SHAVE task pays a kernel launch (vpu27: 2633 SHAVE cycles, 2.7 us), five DMA latencies:
// T tasks of a tile cost T launches and expose about 1/T of its DMA time (the first load, the
// last store) where the kernel outlasts its transfers, as nearly every kernel on a tile's own
// SHAVEs does (vpu27: two; an exp takes 8.5 cycles per vector of 16 bytes in and out). The sum
// is least at T = sqrt(DMA time / launch time), rounded. Not on targets whose SHAVEs are one
// pool (vpu20: every task takes all 16): there the one DMA engine bounds the layer, and more
// tasks overlap more of it (YOLO-tiny int8 on vpu20 took 14 us longer with this rule).
int64_t shave_tasks(const target::Target &target, int64_t dma_bytes) {
    const double launch_ns = target.shave_timing.launch_cycles / target.shave_clock_mhz * 1000;
    const double dma_ns = double(dma_bytes) / target.ddr_bandwidth_gbps;
    if (launch_ns <= 0) return kTasksPerTile;
    return std::clamp<int64_t>(std::llround(std::sqrt(dma_ns / launch_ns)), 1, kTasksPerTile);
}

// A task moves at least this many DMA latencies' worth of DDR bytes (vpu27: 560 ns per DDR
// read, 17 KB at 31.2 GB/s), so that the fixed latency stays under a third of its transfer
// time: small layers keep fewer tasks, down to one per tile.
constexpr double kMinTaskLatencies = 2;

int64_t ceil_div(int64_t a, int64_t b) {
    return (a + b - 1) / b;
}

// One row of `t` (W pixels of C channels); with `lanes_per_pixel` rounding C up to it, as the
// DPU holds channels in CMX in whole groups of the target's channel alignment.
int64_t row_bytes(const dsl::TensorDesc &tensor, int64_t lanes_per_pixel = 1) {
    const dsl::TensorDesc t = dsl::device_view(tensor);
    const int64_t lanes = ceil_div(t.shape[dsl::dims::C], lanes_per_pixel) * lanes_per_pixel;
    return lanes * t.shape[dsl::dims::W] * dsl::bytes_of(t.type);
}

// Output rows per block of the MPE mode with the highest MAC efficiency for the layer's input
// type (the first listed on a tie): the DPU computes whole blocks, so tasks whose rows are a
// multiple of it waste no partial blocks (vpu27's CUBOID_16x16: 4 rows; a 7-row task costs
// as much as an 8-row one), SHAVE layers included. 1 when no mode takes the input's type.
int64_t block_rows(const dsl::Layer &layer, const target::Target &target) {
    if (layer.inputs().empty()) return 1;
    const dsl::ElemType type = layer.inputs()[0].output().type;
    const bool int8 = dsl::is_quantized_int(type), fp16 = type == dsl::ElemType::F16;
    const target::MpeMode *best = nullptr;
    double best_efficiency = 0;
    for (const auto &mode : target.mpe_modes) {
        if (!(int8 && mode.int8) && !(fp16 && mode.fp16)) continue;
        const target::MpeModeTiming *timing = target.dpu_timing.find_mode(mode.name);
        const double efficiency = timing ? timing->mac_efficiency : 1;
        if (!best || efficiency > best_efficiency) {
            best = &mode;
            best_efficiency = efficiency;
        }
    }
    return best ? best->block_h : 1;
}

// The layer's time at the peak MAC rate of `tiles` tiles over its time moving its tensors and
// weights across DDR: above 1 it is bound by compute. A weight is a MAC per output element; a
// layer without weights (pools, eltwise) gives 0.
double compute_over_ddr(const dsl::Layer &layer, const target::Target &target, int64_t tiles,
                        int64_t weight_bytes) {
    if (weight_bytes <= 0 || layer.inputs().empty()) return 0;
    const dsl::TensorDesc out = dsl::device_view(layer.output());
    const dsl::ElemType type = layer.inputs()[0].output().type;
    const int64_t channels = out.shape[dsl::dims::C];
    const double macs_per_output =
        double(weight_bytes / channels - target.weight_table_entry_bytes) / dsl::bytes_of(type);
    const int macs_per_cycle =
        target.macs_per_cycle(type == dsl::ElemType::F16 ? target::DType::F16 : target::DType::I8);
    const double compute_ns = double(out.shape.elements()) * macs_per_output /
                              (double(macs_per_cycle) * double(tiles)) /
                              (target.dpu_clock_mhz / 1000);
    double bytes = double(out.bytes() + weight_bytes);
    for (const auto &in : layer.inputs()) bytes += double(in.output().bytes());
    return compute_ns / (bytes / target.ddr_bandwidth_gbps);
}

// DPUs of a tile worth a task each: all of them where the layer is bound by compute, one where
// it is bound by DDR, since there more tasks only add DMA latencies (vpu20's depthwise conv is
// slower as 20 tasks than as 4 on its one DMA engine). The peak MAC rate flatters some layers
// (channel-major convolutions run far below it), so a layer near the balance gets all the DPUs
// too.
int64_t busy_dpus(const dsl::Layer &layer, const target::Target &target, int64_t tiles,
                  int64_t weight_bytes) {
    if (target.dpus_per_tile <= 1) return 1;
    return compute_over_ddr(layer, target, tiles, weight_bytes) >= 0.5 ? target.dpus_per_tile : 1;
}

// The rows of each task of a tile, for an uneven split. With one task at a time on the tile,
// two or more of them, and a layer bound by compute (so that the middle tasks' DMA hides
// behind the DPU), only the first task's input load and the last task's store are exposed:
// the pipeline's fill and drain. The first task takes one MPE block of rows, the last the
// rows left over from whole blocks (one block when none are), and the middle tasks the rest,
// in whole blocks, larger first, within the CMX share (`fit_rows`). `rows` are those of the
// tile with the fewest; one with a row more repeats the last extent for it. vpu27's 3x3 conv
// 56x56x64->64: 4, 12, 8, 4 rows per tile take 27.07 us where four 8-row tasks take 27.96;
// with 18 rows per tile, 4, 12, 2 take 19.20 us where 8, 8, 2 take 20.00 and 4, 8, 6
// (leftover rows in the last block) 19.65 (docs/benchmarks.md). On a layer bound by DDR the
// small tasks only add DMA latencies (the 1x1 conv 28x28x256->512: 34.4 us against 30.7).
// Empty when the rows leave no middle block, for an even split.
std::vector<int64_t> ramp_rows(int64_t rows, int64_t tasks, int64_t block, int64_t fit_rows) {
    const int64_t fit_blocks = fit_rows / block, leftover = rows % block;
    const int64_t middle_blocks = rows / block - (leftover > 0 ? 1 : 2);
    if (tasks < 2 || middle_blocks < 1 || fit_blocks < 1) return {};
    const int64_t middle_tasks = std::min(
        middle_blocks, std::max({tasks - 2, int64_t(1), ceil_div(middle_blocks, fit_blocks)}));
    std::vector<int64_t> extents{block};
    for (int64_t k = 0; k < middle_tasks; ++k)
        extents.push_back(
            block * (middle_blocks / middle_tasks + (k < middle_blocks % middle_tasks ? 1 : 0)));
    extents.push_back(leftover > 0 ? leftover : block);
    return extents;
}

} // namespace

dsl::Schedule default_schedule(const dsl::Layer &layer, const target::Target &target, int max_tiles,
                               int64_t weight_bytes, const std::vector<dsl::Dim> &unsplittable,
                               bool on_shave) {
    // Schedules split device views (dsl::device_view): any rank maps onto 4-D.
    const dsl::TensorDesc out = dsl::device_view(layer.output());
    auto whole = [&](dsl::Dim d) {
        return std::find(unsplittable.begin(), unsplittable.end(), d) != unsplittable.end();
    };
    if (whole(dsl::dims::H)) max_tiles = 1;
    const int64_t rows = out.shape[dsl::dims::H];
    const int64_t tiles =
        std::min<int64_t>(max_tiles > 0 ? std::min(max_tiles, target.tiles) : target.tiles, rows);
    // Per output row: the bytes it costs in CMX, the row itself and the input rows it needs
    // (twice for strided or windowed layers, a bound that holds for stride and kernel up to 2x2
    // per row; larger windows are split by the lowering's CMX check), channels in whole groups
    // as on the DPU (a bound for SHAVE layers; an input of fewer channels than a group is
    // counted unpadded, as a channel-major convolution reads it), and the bytes it moves
    // between DDR and CMX (halos left out).
    const int64_t lanes = target.channel_alignment;
    int64_t cmx_per_row = 0, ddr_per_row = 0;
    for (const dsl::TensorDesc &o : layer.outputs()) {
        cmx_per_row += row_bytes(o, lanes);
        ddr_per_row += row_bytes(o);
    }
    for (size_t i = 0; i < layer.inputs().size(); ++i) {
        const dsl::TensorDesc in = dsl::device_view(dsl::input_tensor(layer, i));
        const int64_t ratio =
            std::max<int64_t>(1, in.shape[dsl::dims::H] / std::max<int64_t>(rows, 1));
        const bool channel_major = in.shape[dsl::dims::C] < lanes;
        cmx_per_row += 2 * ratio * row_bytes(in, channel_major ? 1 : lanes);
        ddr_per_row += ratio * row_bytes(in);
    }
    // A tile runs one task per busy DPU at once (vpu20: up to five), each with double-buffered
    // inputs and outputs, and needs room for the weights: a quarter of CMX per task with one
    // DPU, a tenth with five.
    const int64_t parallel = busy_dpus(layer, target, tiles, weight_bytes);
    const int64_t budget = int64_t(target.cmx_usable_bytes) / (2 * std::max<int64_t>(2, parallel));
    const int64_t fit_rows = std::max<int64_t>(1, budget / std::max<int64_t>(cmx_per_row, 1));
    const int64_t rows_per_tile = ceil_div(rows, tiles);
    // Tiles sharing a DMA engine queue their transfers, and their latencies, one after another
    // (vpu20: four tiles, one engine).
    const double tiles_per_engine = std::max(1.0, double(tiles) / target.dma_engines);
    const double min_task_bytes = kMinTaskLatencies * tiles_per_engine *
                                  target.dma_timing.ddr_to_cmx_latency_ns *
                                  target.ddr_bandwidth_gbps; // ns * bytes/ns
    // At least one task per busy DPU, or it idles.
    const int64_t overlap_tasks =
        on_shave && target.shaves_per_tile > 0
            ? shave_tasks(target, rows * ddr_per_row)
            : std::clamp<int64_t>(int64_t(double(rows_per_tile * ddr_per_row) / min_task_bytes), 1,
                                  kTasksPerTile);
    const int64_t tasks = std::max(
        {overlap_tasks, ceil_div(rows_per_tile, fit_rows), std::min(parallel, rows_per_tile)});
    // Equal tasks, rounded up to whole blocks unless that breaks the CMX share.
    const int64_t block = block_rows(layer, target);
    int64_t task_rows = ceil_div(rows_per_tile, tasks);
    if (ceil_div(task_rows, block) * block <= fit_rows)
        task_rows = std::min(ceil_div(task_rows, block) * block, rows_per_tile);

    // Output channels in groups whose weights fit a fifth of CMX (16 at least: the DPU's
    // channel block), one group at a time: the group's loop outside the rows'.
    const int64_t channels = out.shape[dsl::dims::C];
    const int64_t weight_budget = int64_t(target.cmx_usable_bytes) / 5;
    int64_t group = channels;
    if (weight_bytes > weight_budget) {
        const int64_t per_channel = ceil_div(weight_bytes, channels);
        group = std::max<int64_t>(16, weight_budget / per_channel / 16 * 16);
    }

    const bool ramp_up = parallel == 1 && compute_over_ddr(layer, target, tiles, weight_bytes) >= 1;
    const std::vector<int64_t> ramp =
        ramp_up ? ramp_rows(rows / tiles, tasks, block, fit_rows) : std::vector<int64_t>{};

    dsl::Schedule s;
    if (tiles > 1) s.distribute("y", tiles, dsl::Strategy::SplitOverHeight);
    const bool split_rows = !whole(dsl::dims::H) && (!ramp.empty() || task_rows < rows_per_tile);
    if (split_rows) {
        if (!ramp.empty())
            s.split("y", "yo", "yi", ramp);
        else
            s.split("y", "yo", "yi", task_rows);
    }
    if (group < channels && !whole(dsl::dims::C)) {
        s.split("c", "co", "ci", group);
        if (split_rows) s.reorder({"yo", "co"});
    }
    // Loads run ahead of the computation by one task per busy DPU: those DPUs then all compute
    // while the next inputs arrive (one is plain double buffering).
    s.prefetch(parallel);
    return s;
}

} // namespace vpuc::schedules
