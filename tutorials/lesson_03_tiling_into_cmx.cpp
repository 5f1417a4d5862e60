// Lesson 3: tiling a layer into tasks that fit in CMX.
//
// The DPU reads its input and weights from CMX and writes its output there: each tile has
// about 2 MB of it on vpu27, of which the compiler may use 1936 KB. A layer whose input,
// output and weights do not fit at once must be cut into pieces, each one DPU task with its
// own DMAs in and out. In vpuc, as in Halide, that is what `split` and `tile` do: the outer
// loop they make is a *task loop*, one task per iteration; what is inside runs in one task.
//
// This lesson compiles one 3x3 conv with several such schedules, prints the task program the
// compiler builds (its IR after CMX allocation), the simulated time of each, and checks that
// every schedule computes the same bytes as the reference.
//
// Build and run:  ninja -C build lesson_03_tiling_into_cmx
//                 ./build/tutorials/lesson_03_tiling_into_cmx

#include <Halide.h>

#include <cstdint>
#include <cstdio>
#include <functional>
#include <random>
#include <sstream>
#include <string>
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

// A 3x3 conv + ReLU from `channels` to `channels`. The layer is built afresh for every
// schedule: a schedule belongs to its layer, as in Halide.
static dsl::Layer make_conv(const dsl::Layer &image, int channels) {
    std::mt19937 rng(3);
    auto uniform = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
    algorithms::QuantWeights w;
    w.weights = Halide::Buffer<int8_t>(channels, 3, 3, channels);
    w.weights.for_each_value([&](int8_t &v) { v = int8_t(uniform(-50, 50)); });
    for (int oc = 0; oc < channels; ++oc) w.bias.push_back(uniform(-4000, 4000));
    w.requant = {algorithms::fixed_point(0.0025)};
    w.output_type = dsl::ElemType::U8;
    w.output_quant = dsl::Quant::per_tensor(0.05f, 0);
    algorithms::Conv2dParams same;
    same.pad_left = same.pad_right = same.pad_top = same.pad_bottom = 1;
    same.activation = algorithms::Activation::relu();
    return algorithms::conv2d("conv", image, w, same);
}

int main() {
    const target::Target target = target::load_target("vpu27");

    // 32 channels of 180 x 180 pixels: the input and the output are 1012 KB each, the weights
    // 9 KB. Together they are more than one tile's CMX.
    const int channels = 32, size = 180;
    dsl::TensorDesc image_desc;
    image_desc.name = "image";
    image_desc.shape = dsl::Shape{1, channels, size, size};
    image_desc.type = dsl::ElemType::U8;
    image_desc.quant = dsl::Quant::per_tensor(0.02f, 128);
    image_desc.order = dsl::DimsOrder::NHWC();
    dsl::Layer image = dsl::Layer::input(image_desc);

    Halide::Buffer<uint8_t> pixels = algorithms::make_buffer(image_desc);
    std::mt19937 rng(30);
    pixels.for_each_value([&](uint8_t &v) { v = uint8_t(rng()); });
    const std::vector<uint8_t> expected = bytes_of(
        algorithms::run_reference(dsl::Graph("reference", {make_conv(image, channels)}), {pixels})
            .at(0));

    // ---- One task for the whole layer does not fit -----------------------------------------
    //
    // With only on_dpu(), the whole output is one task, so the whole input, output and weights
    // must be in CMX at once. CMX allocation (the allocate_cmx pass) finds no room and says
    // which buffer did not fit and what to do about it.
    {
        dsl::Layer conv = make_conv(image, channels);
        conv.schedule().on_dpu();
        try {
            codegen::lower(dsl::Graph("whole", {conv}), target);
            std::printf("MISMATCH: the whole layer should not fit in CMX\n");
            return 1;
        } catch (const codegen::LoweringError &e) {
            std::printf("%s:\n  %s\n\n", conv.schedule().to_string().c_str(), e.what());
        }
    }

    // ---- The task program, after CMX allocation ---------------------------------------------
    //
    // split("y", "yo", "yi", 90) makes two tasks of 90 output rows each. Bounds inference
    // (Halide's, on the conv's definition) works out that 90 output rows of a 3x3 conv read 91
    // input rows (92 less the one of padding at the image edge): the DMAs bring in the *halo*
    // rows too. LowerOptions::dump_after prints the IR after any pass; after allocate_cmx,
    // every CMX buffer has an offset, and tasks list the tasks they wait for ("after"). Note
    // the weights, loaded once for both tasks. The two tasks' buffers do not all fit side by
    // side, so some of the second task's go where the first task's were: their first user
    // then waits for every task that used that memory before (a write-after-read dependency).
    {
        dsl::Layer conv = make_conv(image, channels);
        conv.schedule().split("y", "yo", "yi", 90).on_dpu();
        std::ostringstream log;
        codegen::LowerOptions options;
        options.dump_after = "allocate_cmx";
        options.log = &log;
        codegen::lower(dsl::Graph("two_tasks", {conv}), target, options);
        // The log also lists every pass as it finishes; print only the IR.
        const std::string text = log.str();
        const size_t begin = text.find("IR after"), end = text.find("pass allocate_ddr");
        std::printf("%s\n%s\n", conv.schedule().to_string().c_str(),
                    text.substr(begin, end - begin).c_str());
    }

    // ---- Different tilings, same results ----------------------------------------------------
    //
    // Each of these schedules fits. They differ in how much they move and how well the
    // engines are used: small tasks repeat the halo rows more often and pay each DMA's fixed
    // cost more often; large tasks leave the DPU idle while the first input loads and the last
    // output is stored (lesson 5 is about overlapping DMA with compute); splitting the output
    // channels (c) reloads the same input for each channel group, and writes each pixel's
    // channels back to DDR in pieces of 16 bytes, which DMA moves less efficiently than whole
    // rows (docs/timing-model.md).
    struct Tiling {
        const char *what;
        std::function<void(dsl::Schedule &)> apply;
    };
    const std::vector<Tiling> tilings = {
        {"2 tasks of 90 rows", [](dsl::Schedule &s) { s.split("y", "yo", "yi", 90); }},
        {"4 tasks of 45 rows", [](dsl::Schedule &s) { s.split("y", "yo", "yi", 45); }},
        {"18 tasks of 10 rows", [](dsl::Schedule &s) { s.split("y", "yo", "yi", 10); }},
        {"90 tasks of 2 rows", [](dsl::Schedule &s) { s.split("y", "yo", "yi", 2); }},
        {"4 tasks of 90x90 pixels",
         [](dsl::Schedule &s) { s.tile("x", "y", "xo", "yo", "xi", "yi", 90, 90); }},
        {"4 tasks: 2 row halves x 2 channel halves",
         [](dsl::Schedule &s) { s.split("y", "yo", "yi", 90).split("c", "co", "ci", 16); }},
    };
    int failures = 0;
    std::printf("%-42s %7s %12s  %s\n", "tiling", "tasks", "DPU cycles", "schedule");
    for (const Tiling &tiling : tilings) {
        dsl::Layer conv = make_conv(image, channels);
        tiling.apply(conv.schedule());
        conv.schedule().on_dpu();
        std::vector<uint8_t> blob = codegen::lower(dsl::Graph("tiled", {conv}), target);
        sim::Simulator simulator(target, blob);
        sim::RunResult result = simulator.run({bytes_of(pixels)});
        uint64_t dpu_tasks = 0;
        for (const sim::EngineStats &e : result.engines)
            if (e.kind == blob::EngineKind::Dpu) dpu_tasks += e.tasks;
        const bool same = result.outputs.at(0) == expected;
        failures += !same;
        std::printf("%-42s %7llu %12.0f  %s%s\n", tiling.what,
                    static_cast<unsigned long long>(dpu_tasks), result.latency_dpu_cycles,
                    conv.schedule().to_string().c_str(),
                    same ? "" : "  MISMATCH against the reference");
    }
    std::printf("\n%zu tilings, %d differing from the reference\n", tilings.size(), failures);

    // ---- Channels come in groups of 16 ------------------------------------------------------
    //
    // The DPU computes output channels 16 at a time, and holds every tensor in CMX in whole
    // groups of 16 channels per pixel (a 24-channel tensor takes 32; the compiler pads them
    // and stores only the real ones). So a split of channels on the DPU must keep tasks on
    // whole groups, and the compiler says so rather than computing something else:
    dsl::Layer eighths = make_conv(image, channels);
    eighths.schedule().split("c", "co", "ci", 8).on_dpu();
    try {
        codegen::lower(dsl::Graph("eighths", {eighths}), target);
        std::printf("split(c, co, ci, 8) compiled; it should not have\n");
        ++failures;
    } catch (const dsl::ScheduleError &e) {
        std::printf("\n%s\n", e.what());
    }
    return failures == 0 ? 0 : 1;
}
