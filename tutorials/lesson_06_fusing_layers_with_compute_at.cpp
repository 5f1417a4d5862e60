// Lesson 6: fusing layers with compute_at.
//
// By default every layer is computed at root: all of it, its output stored to DDR, and the
// next layer loads it back. Between two convolutions that is a round trip through DDR for the
// whole intermediate tensor. Halide's answer is compute_at: compute the producer inside the
// consumer's loop, only the part the consumer's current iteration needs. In vpuc,
// `producer.compute_at(consumer, loop)` computes, per iteration of the consumer's task loop
// `loop`, the producer's region that iteration reads, on the consumer's tile, straight into
// its CMX. The intermediate tensor never exists in DDR.
//
// Nothing is free: neighbouring consumer tasks of a 3x3 conv read overlapping input rows (the
// halo), and a fused producer computes those rows once per task that needs them. Bigger
// consumer tasks recompute less, but need more CMX.
//
// This lesson runs a conv -> conv pair three ways, prints what each costs and checks that all
// three compute the same bytes as the reference.
//
// Build and run:  ninja -C build lesson_06_fusing_layers_with_compute_at
//                 ./build/tutorials/lesson_06_fusing_layers_with_compute_at

#include <Halide.h>

#include <cstdint>
#include <cstdio>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "algorithms/layers.h"
#include "algorithms/reference.h"
#include "codegen/lower.h"
#include "dsl/graph.h"
#include "vpu_target/blob.h"
#include "vpu_target/simulator.h"
#include "vpu_target/target.h"

using namespace vpuc;

static std::vector<uint8_t> bytes_of(const Halide::Buffer<> &b) {
    const auto *p = static_cast<const uint8_t *>(b.raw_buffer()->host);
    return std::vector<uint8_t>(p, p + b.size_in_bytes());
}

// A 3x3 conv + ReLU keeping the channel count, with weights from `seed`.
static dsl::Layer make_conv(const std::string &name, const dsl::Layer &input, uint32_t seed) {
    const int channels = int(input.output().shape[dsl::dims::C]);
    std::mt19937 rng(seed);
    auto uniform = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
    algorithms::QuantWeights w;
    w.weights = Halide::Buffer<int8_t>(channels, 3, 3, channels);
    w.weights.for_each_value([&](int8_t &v) { v = int8_t(uniform(-50, 50)); });
    for (int oc = 0; oc < channels; ++oc) w.bias.push_back(uniform(-3000, 3000));
    w.requant = {algorithms::fixed_point(0.003)};
    w.output_type = dsl::ElemType::U8;
    w.output_quant = dsl::Quant::per_tensor(0.05f, 0);
    algorithms::Conv2dParams same;
    same.pad_left = same.pad_right = same.pad_top = same.pad_bottom = 1;
    same.activation = algorithms::Activation::relu();
    return algorithms::conv2d(name, input, w, same);
}

int main() {
    const target::Target target = target::load_target("vpu27");

    dsl::TensorDesc image_desc;
    image_desc.name = "image";
    image_desc.shape = dsl::Shape{1, 32, 64, 64}; // N, C, H, W
    image_desc.type = dsl::ElemType::U8;
    image_desc.quant = dsl::Quant::per_tensor(0.02f, 128);
    image_desc.order = dsl::DimsOrder::NHWC();
    dsl::Layer image = dsl::Layer::input(image_desc);

    Halide::Buffer<uint8_t> pixels = algorithms::make_buffer(image_desc);
    std::mt19937 rng(60);
    pixels.for_each_value([&](uint8_t &v) { v = uint8_t(rng()); });
    const std::vector<uint8_t> expected =
        bytes_of(algorithms::run_reference(
                     dsl::Graph("reference", {make_conv("conv2", make_conv("conv1", image, 1), 2)}),
                     {pixels})
                     .at(0));

    // ---- Three schedules of the same pair ----------------------------------------------------
    //
    // Root: each conv split into 8-row tasks; conv1's whole output goes to DDR and comes back.
    //
    // Fused, 8 rows: conv2 keeps its 8-row tasks, and conv1.compute_at("conv2", "yo") computes,
    // for each of them, the 10 rows of conv1 it reads (8 plus a halo row above and below, less
    // at the image's edges) into CMX. conv1 has no schedule of its own beyond that: it runs
    // as one task per region, on conv2's tile, its input DMAs issued as conv2 asks for it.
    //
    // Fused, 16 rows: the same with 16-row consumer tasks, so the halo is recomputed half as
    // often.
    struct Variant {
        const char *what;
        std::function<void(dsl::Layer &, dsl::Layer &)> schedule;
    };
    const std::vector<Variant> variants = {
        {"root, 8-row tasks",
         [](dsl::Layer &conv1, dsl::Layer &conv2) {
             conv1.schedule().split("y", "yo", "yi", 8).prefetch(1);
             conv2.schedule().split("y", "yo", "yi", 8).prefetch(1);
         }},
        {"conv1 at conv2.yo, 8 rows",
         [](dsl::Layer &conv1, dsl::Layer &conv2) {
             conv2.schedule().split("y", "yo", "yi", 8).prefetch(1);
             conv1.schedule().compute_at("conv2", "yo");
         }},
        {"conv1 at conv2.yo, 16 rows",
         [](dsl::Layer &conv1, dsl::Layer &conv2) {
             conv2.schedule().split("y", "yo", "yi", 16).prefetch(1);
             conv1.schedule().compute_at("conv2", "yo");
         }},
    };

    // What the simulator reports: the latency, how long the DPU and the DMA engines were busy
    // (the DPU's time grows with the recomputed halo; the DMAs' shrinks without the round trip
    // through DDR), and the DDR scratch memory the blob asks for (where intermediate tensors
    // live: none once conv1 is fused).
    int failures = 0;
    std::printf("%-28s %10s %10s %10s %14s\n", "schedule", "cycles", "DPU us", "DMA us",
                "DDR scratch B");
    for (const Variant &v : variants) {
        dsl::Layer conv1 = make_conv("conv1", image, 1);
        dsl::Layer conv2 = make_conv("conv2", conv1, 2);
        v.schedule(conv1, conv2);
        dsl::Graph graph("pair", {conv2});
        std::vector<uint8_t> blob = codegen::lower(graph, target);
        sim::Simulator simulator(target, blob);
        sim::RunResult result = simulator.run({bytes_of(pixels)});
        double dpu_ns = 0, dma_ns = 0;
        for (const sim::EngineStats &e : result.engines) {
            if (e.kind == blob::EngineKind::Dpu) dpu_ns += e.busy_ns;
            if (e.kind == blob::EngineKind::Dma) dma_ns += e.busy_ns;
        }
        const bool same = result.outputs.at(0) == expected;
        failures += !same;
        std::printf("%-28s %10.0f %10.2f %10.2f %14llu%s\n", v.what, result.latency_dpu_cycles,
                    dpu_ns / 1000, dma_ns / 1000,
                    static_cast<unsigned long long>(simulator.blob().header()->ddr_scratch_bytes()),
                    same ? "" : "  MISMATCH against the reference");
    }

    // On vpu27 this pair is bound by the DPU, not by DDR: fusing halves the DMA time and
    // removes the 128 KB intermediate from DDR, but the recomputed halo rows (10 rows of conv1
    // per 8 rows of conv2, 18 per 16) cost more DPU time than the DMAs saved, and the fused
    // schedules are slower. Fusion pays where DDR is the bottleneck: large activations with
    // few MACs per byte, such as depthwise and 1x1 layers. The compiler does not guess; the
    // schedule says.

    // ---- What is legal --------------------------------------------------------------------
    //
    // The loop must be a task loop of the consumer (the fused layer is computed per task, so
    // a loop inside a task has nothing to attach to), and the producer must have no other
    // consumer and not be a network output: its result only ever exists in one consumer's
    // CMX. Errors say so, naming the layer and the directive.
    {
        dsl::Layer conv1 = make_conv("conv1", image, 1);
        dsl::Layer conv2 = make_conv("conv2", conv1, 2);
        conv2.schedule().split("y", "yo", "yi", 8);
        conv1.schedule().compute_at("conv2", "yi");
        try {
            codegen::lower(dsl::Graph("pair", {conv2}), target);
            std::printf("MISMATCH: compute_at a loop inside a task should be refused\n");
            ++failures;
        } catch (const dsl::ScheduleError &e) {
            std::printf("\n%s\n", e.what());
        }
    }
    std::printf("\n%zu schedules, %d differing from the reference\n", variants.size(), failures);
    return failures == 0 ? 0 : 1;
}
