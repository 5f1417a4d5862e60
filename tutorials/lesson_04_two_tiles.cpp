// Lesson 4: spreading a layer over the NCE tiles.
//
// vpu27 has two tiles (NCE clusters), each with its own DPU, SHAVEs and CMX. A layer scheduled
// as in lesson 3 runs on tile 0 alone. `distribute(loop, tiles, strategy)` cuts a loop into
// one contiguous chunk per tile, like Halide's `parallel` over a loop of extent `tiles`:
//
//   SplitOverHeight (SOH)  each tile computes a band of output rows; it reads its band of
//                          input rows plus the halo rows the 3x3 window needs across the cut;
//   SplitOverKernel (SOK)  each tile computes a share of the output channels (the conv's
//                          kernels); it reads the whole input but only its share of weights.
//
// The tiles share the DMA engines and the DDR bandwidth, so two tiles are at most twice as
// fast, and less when the layer waits on memory. This lesson measures one tile against two,
// with both strategies, on a wide layer and on a deep one, then two layers in a row with the
// tensor between them kept in CMX (HKSwitch), and checks that every schedule gives the
// reference's bytes.
//
// Build and run:  ninja -C build lesson_04_two_tiles
//                 ./build/tutorials/lesson_04_two_tiles

#include <Halide.h>

#include <cstdint>
#include <cstdio>
#include <functional>
#include <map>
#include <random>
#include <string>
#include <tuple>
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

// A 3x3 conv + ReLU with as many output channels as input channels, built afresh for each
// schedule (a schedule belongs to its layer).
static dsl::Layer make_conv(const dsl::Layer &image, const std::string &name = "conv") {
    const int channels = int(image.output().shape[dsl::dims::C]);
    std::mt19937 rng(4);
    auto uniform = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
    algorithms::QuantWeights w;
    w.weights = Halide::Buffer<int8_t>(channels, 3, 3, channels);
    w.weights.for_each_value([&](int8_t &v) { v = int8_t(uniform(-20, 20)); });
    for (int oc = 0; oc < channels; ++oc) w.bias.push_back(uniform(-4000, 4000));
    w.requant = {algorithms::fixed_point(0.0025)};
    w.output_type = dsl::ElemType::U8;
    w.output_quant = dsl::Quant::per_tensor(0.05f, 0);
    algorithms::Conv2dParams same;
    same.pad_left = same.pad_right = same.pad_top = same.pad_bottom = 1;
    same.activation = algorithms::Activation::relu();
    return algorithms::conv2d(name, image, w, same);
}

static Halide::Buffer<uint8_t> random_pixels(const dsl::TensorDesc &image_desc) {
    Halide::Buffer<uint8_t> pixels = algorithms::make_buffer(image_desc);
    std::mt19937 rng(40);
    pixels.for_each_value([&](uint8_t &v) { v = uint8_t(rng()); });
    return pixels;
}

// Compiles and runs `graph`, prints its time against `baseline_cycles` (the first run sets
// it), its schedules and each engine's busy time; true when it gave the `expected` bytes.
static bool run_and_print(const target::Target &target, const dsl::Graph &graph,
                          const Halide::Buffer<uint8_t> &pixels,
                          const std::vector<uint8_t> &expected, const char *what,
                          double &baseline_cycles) {
    // lower() leaves the layers' schedules as they are and says which ones it compiled with:
    // the default schedule for a layer that has none.
    std::map<std::string, dsl::Schedule> schedules;
    codegen::LowerOptions options;
    options.schedules = &schedules;
    sim::Simulator simulator(target, codegen::lower(graph, target, options));
    sim::RunResult result = simulator.run({bytes_of(pixels)});
    const bool same = result.outputs.at(0) == expected;
    if (baseline_cycles == 0) baseline_cycles = result.latency_dpu_cycles;
    std::printf("  %-28s %8.0f DPU cycles, %.2fx, %s\n", what, result.latency_dpu_cycles,
                baseline_cycles / result.latency_dpu_cycles,
                same ? "same bytes" : "MISMATCH against the reference");
    for (const dsl::Layer &layer : graph.layers())
        std::printf("    %s: %s\n", layer.name().c_str(),
                    schedules.at(layer.name()).to_string().c_str());
    std::printf("    busy:");
    for (const sim::EngineStats &e : result.engines)
        std::printf(" %s %.1f us;", e.engine.c_str(), e.busy_ns / 1000);
    std::printf("\n");
    return same;
}

using ScheduleFn = std::function<void(dsl::Schedule &)>;

// Compiles the conv on `image` with each schedule, runs it, prints the time and where it went,
// and returns how many schedules gave other bytes than the reference.
static int compare_schedules(const target::Target &target, const dsl::TensorDesc &image_desc,
                             const std::vector<std::pair<const char *, ScheduleFn>> &schedules) {
    dsl::Layer image = dsl::Layer::input(image_desc);
    const Halide::Buffer<uint8_t> pixels = random_pixels(image_desc);
    const std::vector<uint8_t> expected = bytes_of(
        algorithms::run_reference(dsl::Graph("reference", {make_conv(image)}), {pixels}).at(0));

    std::printf("conv 3x3 on %s\n", image_desc.describe().c_str());
    int failures = 0;
    double one_tile_cycles = 0;
    for (const auto &[what, apply] : schedules) {
        dsl::Layer conv = make_conv(image);
        apply(conv.schedule());
        failures += !run_and_print(target, dsl::Graph("tiles", {conv}), pixels, expected, what,
                                   one_tile_cycles);
    }
    return failures;
}

// The same for two convs in a row, each schedule pair applied to the first and the second.
static int
compare_chains(const target::Target &target, const dsl::TensorDesc &image_desc,
               const std::vector<std::tuple<const char *, ScheduleFn, ScheduleFn>> &schedules) {
    dsl::Layer image = dsl::Layer::input(image_desc);
    const Halide::Buffer<uint8_t> pixels = random_pixels(image_desc);
    const dsl::Layer reference = make_conv(make_conv(image, "conv1"), "conv2");
    const std::vector<uint8_t> expected =
        bytes_of(algorithms::run_reference(dsl::Graph("reference", {reference}), {pixels}).at(0));

    std::printf("two convs 3x3 on %s\n", image_desc.describe().c_str());
    int failures = 0;
    double baseline_cycles = 0;
    for (const auto &[what, first, second] : schedules) {
        dsl::Layer conv1 = make_conv(image, "conv1");
        dsl::Layer conv2 = make_conv(conv1, "conv2");
        first(conv1.schedule());
        second(conv2.schedule());
        failures += !run_and_print(target, dsl::Graph("chain", {conv2}), pixels, expected, what,
                                   baseline_cycles);
    }
    return failures;
}

int main() {
    const target::Target target = target::load_target("vpu27");
    dsl::TensorDesc image_desc;
    image_desc.name = "image";
    image_desc.type = dsl::ElemType::U8;
    image_desc.quant = dsl::Quant::per_tensor(0.02f, 128);
    image_desc.order = dsl::DimsOrder::NHWC();

    // ---- A wide layer: 64 channels of 96 x 96 pixels ----------------------------------------
    //
    // Every schedule cuts the work into tasks of 24 output rows (lesson 3), so each tile sees
    // the same kind of task and only the distribution differs.
    //
    // distribute("y", 2, SOH) replaces the loop y by a tile loop "y.tile" of extent 2 and a
    // loop that keeps the name y over each tile's 48 rows, which split() then cuts further.
    // distribute("c", 2, SOK) does the same to the output channels: 32 per tile.
    image_desc.shape = dsl::Shape{1, 64, 96, 96};
    int failures = compare_schedules(
        target, image_desc,
        {{"1 tile", [](dsl::Schedule &s) { s.split("y", "yo", "yi", 24).on_dpu(); }},
         {"2 tiles, split over height",
          [](dsl::Schedule &s) {
              s.distribute("y", 2, dsl::Strategy::SplitOverHeight)
                  .split("y", "yo", "yi", 24)
                  .on_dpu();
          }},
         {"2 tiles, split over kernel", [](dsl::Schedule &s) {
              s.distribute("c", 2, dsl::Strategy::SplitOverKernel)
                  .split("y", "yo", "yi", 24)
                  .on_dpu();
          }}});

    // SOH halves each DPU's busy time; the DMAs' grows, since the two tiles' transfers now run
    // at once and share the DDR bandwidth. SOK is no faster than one tile here:
    // each tile reads the whole input (twice the bytes in all), and writes every pixel's output
    // as a 32-byte piece of a 64-byte row in DDR; short strided DMA lines cost extra time
    // (docs/timing-model.md).

    // ---- A deep layer: 256 channels of 14 x 14 pixels --------------------------------------
    //
    // Here the weights (256 x 3 x 3 x 256 bytes, 576 KB) outweigh the input (49 KB), and
    // moving them is most of the DMA time. SOK gives each tile only the weights of its own
    // output channels; SOH needs all of them on both tiles (a DMA can write to both tiles' CMX
    // at once, a broadcast). Reading the whole input on each tile, SOK's cost on the wide
    // layer, is small here. The whole layer fits in CMX, so each tile runs one task.
    image_desc.shape = dsl::Shape{1, 256, 14, 14};
    failures += compare_schedules(
        target, image_desc,
        {{"1 tile", [](dsl::Schedule &s) { s.on_dpu(); }},
         {"2 tiles, split over height",
          [](dsl::Schedule &s) { s.distribute("y", 2, dsl::Strategy::SplitOverHeight).on_dpu(); }},
         {"2 tiles, split over kernel", [](dsl::Schedule &s) {
              s.distribute("c", 2, dsl::Strategy::SplitOverKernel).on_dpu();
          }}});

    // Which strategy wins depends on the layer: SOH needs rows to share out, SOK costs extra
    // input reads and output writes that only a small input makes cheap. The default schedules
    // (schedules/) use SOH; choosing per layer is what a tuned schedule is for.

    // ---- Two deep layers: the tensor between them kept in CMX -------------------------------
    //
    // Between two layers the tensor normally goes through DDR: the first layer stores it and
    // the second loads it back. distribute("y", 2, HKSwitch) splits the first layer over height
    // as SOH does, but keeps its output in CMX: each tile holds a copy of the whole tensor
    // (buffer conv1.cmx), and each task's result goes into its own tile's copy and, by one DMA
    // with two destinations, into the other's. The second layer, split over kernel, needs every
    // row on both tiles: it reads them from its own CMX, with no load. store_in(CMX) keeps any
    // root layer's output in CMX the same way (SOK with store_in(CMX) is SOK with its output
    // broadcast). The tensor must fit, on every tile, next to what the tasks need; when it
    // does not, the allocator spills it (lesson 3's error names what fills CMX).
    failures += compare_chains(
        target, image_desc,
        {{"through DDR (SOH, then SOK)",
          [](dsl::Schedule &s) { s.distribute("y", 2, dsl::Strategy::SplitOverHeight).on_dpu(); },
          [](dsl::Schedule &s) { s.distribute("c", 2, dsl::Strategy::SplitOverKernel).on_dpu(); }},
         {"in CMX (HKSwitch, then SOK)",
          [](dsl::Schedule &s) { s.distribute("y", 2, dsl::Strategy::HKSwitch).on_dpu(); },
          [](dsl::Schedule &s) {
              s.distribute("c", 2, dsl::Strategy::SplitOverKernel).on_dpu();
          }}});
    // The gain is small here: the weights (576 KB per layer), not the 49 KB tensor, are most
    // of the DMA time. Keeping a tensor in CMX pays where activations outweigh weights.
    std::printf("\n8 schedules, %d differing from the reference\n", failures);
    return failures == 0 ? 0 : 1;
}
