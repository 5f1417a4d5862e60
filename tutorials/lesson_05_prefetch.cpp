// Lesson 5: prefetching, so that DMA overlaps compute.
//
// Every task has three steps: DMA its input into CMX, compute, DMA its output back to DDR.
// The DMA engines and the DPUs are separate engines, so the input of the next task could be
// loading while the DPU computes this one. Whether it is depends on the order of the tasks in
// each engine's queue, since a queue runs its tasks strictly in order.
//
// This lesson uses the second bundled target, vpu20 (modeled on NPU 30XX): one DMA engine for
// the whole chip, and five DPUs per tile. Its one DMA queue carries loads and stores alike. The
// compiler emits a task's load, compute and store in turn, so without prefetching that queue
// reads load 0, store 0, load 1, store 1, ...: store 0 waits for compute 0, and load 1 waits
// behind store 0. The DMA engine and the DPUs take turns.
//
// `prefetch(depth)` issues the loads of each task `depth` tasks ahead of its compute: with
// prefetch(1) the queue reads load 0, load 1, store 0, load 2, store 1, ..., so load n+1 runs
// while task n computes. prefetch(1) is double buffering; each level of depth holds one more
// task's input in CMX. With five DPUs per tile, deeper prefetching keeps more of them fed.
//
// (vpu27 has a DMA engine for loads and one for stores, so its load queue never waits behind
// a store. The depth still bounds how far loads run ahead on every target: the input of task
// n loads only once task n - depth - 1 has computed, so that at most `depth` tasks' inputs
// wait in CMX, and prefetch(0) means no overlap there either.)
//
// This lesson runs one tiled conv with prefetch depth 0, 1 and 2, draws each run's timeline
// per engine from the simulator's task records, measures how long the DMA engine and a DPU
// were busy at the same time, and checks that the results are the reference's at every depth.
//
// Prefetching hides every load but the first and every store but the last: the pipeline's
// fill and drain. The second part, on vpu27, shortens those two with an uneven split,
// `split(y, yo, yi, {4, 12, 8, 4})`: a small first task whose input arrives soon, and a small
// last task whose output leaves soon.
//
// Build and run:  ninja -C build lesson_05_prefetch
//                 ./build/tutorials/lesson_05_prefetch

#include <Halide.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "algorithms/layers.h"
#include "algorithms/reference.h"
#include "codegen/lower.h"
#include "dsl/graph.h"
#include "vpu_target/simulator.h"
#include "vpu_target/target.h"

using namespace vpuc;

static std::vector<uint8_t> bytes_of(const Halide::Buffer<> &b) {
    const auto *p = static_cast<const uint8_t *>(b.raw_buffer()->host);
    return std::vector<uint8_t>(p, p + b.size_in_bytes());
}

static dsl::Layer make_conv(const dsl::Layer &image) {
    const int channels = int(image.output().shape[dsl::dims::C]);
    std::mt19937 rng(5);
    auto uniform = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
    algorithms::QuantWeights w;
    w.weights = Halide::Buffer<int8_t>(channels, 3, 3, channels);
    w.weights.for_each_value([&](int8_t &v) { v = int8_t(uniform(-50, 50)); });
    for (int oc = 0; oc < channels; ++oc) w.bias.push_back(uniform(-4000, 4000));
    w.requant = {algorithms::fixed_point(0.004)};
    w.output_type = dsl::ElemType::U8;
    w.output_quant = dsl::Quant::per_tensor(0.05f, 0);
    algorithms::Conv2dParams same;
    same.pad_left = same.pad_right = same.pad_top = same.pad_bottom = 1;
    same.activation = algorithms::Activation::relu();
    return algorithms::conv2d("conv", image, w, same);
}

static bool is_dma(const sim::TaskRecord &t) {
    return t.kind == blob::EngineKind::Dma;
}
static bool is_dpu(const sim::TaskRecord &t) {
    return t.kind == blob::EngineKind::Dpu;
}

// How long at least one DMA engine and the DPU were busy at the same time: a sweep over the
// tasks' start and end times.
static double dma_dpu_overlap_ns(const std::vector<sim::TaskRecord> &tasks) {
    std::vector<std::pair<double, int>> events; // (time, +1/-1 DMA or +2/-2 DPU)
    for (const sim::TaskRecord &t : tasks) {
        const int kind = is_dma(t) ? 1 : is_dpu(t) ? 2 : 0;
        if (kind == 0) continue;
        events.push_back({t.start_ns, kind});
        events.push_back({t.end_ns, -kind});
    }
    std::sort(events.begin(), events.end());
    int dma = 0, dpu = 0;
    double overlap = 0, last = 0;
    for (const auto &[time, change] : events) {
        if (dma > 0 && dpu > 0) overlap += time - last;
        last = time;
        (std::abs(change) == 1 ? dma : dpu) += change > 0 ? 1 : -1;
    }
    return overlap;
}

// One line per engine, one character per `ns_per_column`: L a load of input, W weights or
// weight table, C a DPU task, S a store of output, '.' idle. (`vpuc run --trace` writes the
// same records as a Chrome trace, for https://ui.perfetto.dev.)
static void draw_timeline(const sim::RunResult &result, double ns_per_column) {
    const int width = int(result.latency_ns / ns_per_column + 0.5);
    for (const sim::EngineStats &engine : result.engines) {
        std::string line(size_t(width), '.');
        for (const sim::TaskRecord &t : result.tasks) {
            if (t.engine != engine.engine) continue;
            const char mark = is_dpu(t)                                    ? 'C'
                              : t.name.find(".load") != std::string::npos  ? 'L'
                              : t.name.find(".store") != std::string::npos ? 'S'
                                                                           : 'W';
            const int first = int(t.start_ns / ns_per_column);
            const int last = std::min(width - 1, int(t.end_ns / ns_per_column - 1e-9));
            for (int column = first; column <= last; ++column) line[size_t(column)] = mark;
        }
        std::printf("    %-13s |%s|\n", engine.engine.c_str(), line.c_str());
    }
}

int main() {
    const target::Target target = target::load_target("vpu20");
    dsl::TensorDesc image_desc;
    image_desc.name = "image";
    image_desc.shape = dsl::Shape{1, 16, 64, 64}; // N, C, H, W
    image_desc.type = dsl::ElemType::U8;
    image_desc.quant = dsl::Quant::per_tensor(0.02f, 128);
    image_desc.order = dsl::DimsOrder::NHWC();
    dsl::Layer image = dsl::Layer::input(image_desc);

    Halide::Buffer<uint8_t> pixels = algorithms::make_buffer(image_desc);
    std::mt19937 rng(50);
    pixels.for_each_value([&](uint8_t &v) { v = uint8_t(rng()); });
    const std::vector<uint8_t> expected = bytes_of(
        algorithms::run_reference(dsl::Graph("reference", {make_conv(image)}), {pixels}).at(0));

    // ---- The same tiling, three prefetch depths ---------------------------------------------
    //
    // 16 tasks of 4 output rows each, on tile 0, which hands them to its five DPUs in turn.
    // The timelines share one scale: 96 columns for the slowest run, the first.
    int failures = 0;
    double ns_per_column = 0;
    for (int depth = 0; depth <= 2; ++depth) {
        dsl::Layer conv = make_conv(image);
        conv.schedule().split("y", "yo", "yi", 4).prefetch(depth).on_dpu();
        sim::Simulator simulator(target, codegen::lower(dsl::Graph("prefetch", {conv}), target));
        sim::RunResult result = simulator.run({bytes_of(pixels)});
        const bool same = result.outputs.at(0) == expected;
        failures += !same;

        double dma_busy = 0, dpu_busy = 0;
        for (const sim::EngineStats &e : result.engines)
            (e.kind == blob::EngineKind::Dma ? dma_busy : dpu_busy) += e.busy_ns;
        std::printf("%s\n  %.0f DPU cycles (%.2f us), %s\n", conv.schedule().to_string().c_str(),
                    result.latency_dpu_cycles, result.latency_ns / 1000,
                    same ? "same bytes as the reference" : "MISMATCH against the reference");
        std::printf("  busy: DPUs %.2f us, DMA %.2f us in all; DMA and a DPU at the same time: "
                    "%.2f us\n",
                    dpu_busy / 1000, dma_busy / 1000, dma_dpu_overlap_ns(result.tasks) / 1000);
        if (depth == 0) ns_per_column = result.latency_ns / 96;
        draw_timeline(result, ns_per_column);
    }

    // ---- Reading the timelines ----------------------------------------------------------
    //
    // Without prefetch the DMA row has gaps and only one DPU computes at a time: every load
    // waited for the store queued before it, and that store for its task's compute. With
    // prefetch(1) each load runs while the task before it computes, and two DPUs work at once;
    // prefetch(2) keeps three busy. The busy times do not change: the same bytes move and the
    // same tasks compute, only the order of the DMA queue differs.
    std::printf("\n3 prefetch depths, %d differing from the reference\n", failures);

    // ---- Filling and draining the pipeline: an uneven split -----------------------------
    //
    // vpu27, a 3x3 conv of 64 channels over 56x56 pixels on both tiles, 28 rows each, with
    // double buffering. Split by 8, a tile's tasks are 8, 8, 8 and 4 rows: the DPU waits for
    // the weights and the first task's input (10 rows with the halo) before it starts, and
    // the last task's 4 rows go out after it ends. An uneven split lists the extents of the
    // pieces, in order: 4, 12, 8 and 4 rows. The first task needs about half as many input
    // rows, so the DPU starts sooner; the last one stays small; the middle tasks, whose DMA
    // overlaps the DPU, take the rest. (The last extent repeats until the loop is covered, so
    // split(y, yo, yi, 8) is split(y, yo, yi, {8}).) The default schedule makes this choice
    // itself for layers bound by compute; docs/benchmarks.md has the measurements.
    const target::Target vpu27 = target::load_target("vpu27");
    dsl::TensorDesc wide_desc = image_desc;
    wide_desc.shape = dsl::Shape{1, 64, 56, 56};
    dsl::Layer wide = dsl::Layer::input(wide_desc);
    Halide::Buffer<uint8_t> wide_pixels = algorithms::make_buffer(wide_desc);
    wide_pixels.for_each_value([&](uint8_t &v) { v = uint8_t(rng()); });
    const std::vector<uint8_t> wide_expected = bytes_of(
        algorithms::run_reference(dsl::Graph("reference", {make_conv(wide)}), {wide_pixels}).at(0));
    int split_failures = 0;
    for (const bool uneven : {false, true}) {
        dsl::Layer conv = make_conv(wide);
        conv.schedule().distribute("y", 2, dsl::Strategy::SplitOverHeight);
        if (uneven)
            conv.schedule().split("y", "yo", "yi", {4, 12, 8, 4});
        else
            conv.schedule().split("y", "yo", "yi", 8);
        conv.schedule().prefetch(1).on_dpu();
        sim::Simulator simulator(vpu27, codegen::lower(dsl::Graph("ramp", {conv}), vpu27));
        sim::RunResult result = simulator.run({bytes_of(wide_pixels)});
        const bool same = result.outputs.at(0) == wide_expected;
        split_failures += !same;
        double first_dpu_ns = result.latency_ns, last_dpu_ns = 0;
        for (const sim::TaskRecord &t : result.tasks)
            if (is_dpu(t)) {
                first_dpu_ns = std::min(first_dpu_ns, t.start_ns);
                last_dpu_ns = std::max(last_dpu_ns, t.end_ns);
            }
        std::printf("%s\n  %.2f us, %s; first DPU task at %.2f us, %.2f us after the last\n",
                    conv.schedule().to_string().c_str(), result.latency_ns / 1000,
                    same ? "same bytes as the reference" : "MISMATCH against the reference",
                    first_dpu_ns / 1000, (result.latency_ns - last_dpu_ns) / 1000);
        draw_timeline(result, 300);
    }
    std::printf("\n2 splits, %d differing from the reference\n", split_failures);
    return failures + split_failures == 0 ? 0 : 1;
}
