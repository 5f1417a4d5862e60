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
    return t.engine.rfind("DMA", 0) == 0;
}
static bool is_dpu(const sim::TaskRecord &t) {
    return t.engine.rfind("DPU", 0) == 0;
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
            (e.engine.rfind("DMA", 0) == 0 ? dma_busy : dpu_busy) += e.busy_ns;
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
    return failures == 0 ? 0 : 1;
}
