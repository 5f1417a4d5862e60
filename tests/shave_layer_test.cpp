// SHAVE layers through the lowering, from what the compiler refuses to what it makes of a
// layer's schedule and constants: reads outside an input are refused by name, the kernel keeps
// its vectorization under unroll and fuse, identical kernels compile once, and per-channel
// constants reach the kernel. Results are compared with the CPU reference byte for byte.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <thread>
#include <vector>

#include "codegen/shave_kernel.h"
#include "lowering_fixtures.h"

using namespace vpuc;
using vpuc::test::activation;

namespace {

// out(c, x, y) = max(in(c, x + dx, y), 120): a ReLU around the input's zero point, over an
// output of w x h, reading the input directly or through Halide's repeat_edge.
dsl::Layer shifted_relu(const std::string &name, const dsl::Layer &in, int64_t w, int64_t h, int dx,
                        bool repeat_edge = false) {
    const dsl::TensorDesc input = in.output();
    const int in_w = int(input.shape[dsl::dims::W]), in_h = int(input.shape[dsl::dims::H]),
              in_c = int(input.shape[dsl::dims::C]);
    return dsl::Layer::make("shifted_relu", activation(name, in_c, w, h), {in},
                            [=](const std::vector<Halide::Func> &inputs) {
                                const auto &v = dsl::act_vars();
                                Halide::Func source = inputs[0];
                                if (repeat_edge)
                                    source = Halide::BoundaryConditions::repeat_edge(
                                        inputs[0], {{0, in_c}, {0, in_w}, {0, in_h}});
                                Halide::Func f(name);
                                f(v.c, v.x, v.y) =
                                    Halide::max(source(v.c, v.x + dx, v.y), uint8_t(120));
                                return f;
                            });
}

// The message of the LoweringError lower() throws for `output`, or "" if it compiles.
std::string lowering_error(const dsl::Layer &output) {
    try {
        codegen::lower(dsl::Graph("g", {output}), target::load_target("vpu27"));
    } catch (const codegen::LoweringError &e) {
        return e.what();
    }
    return "";
}

// A pointwise layer declared larger than its input used to reach CMX allocation with an empty
// input buffer for the tasks past the input, and abort there.
TEST(ShaveLayer, AnOutputLargerThanItsInputIsRefused) {
    const dsl::Layer in = dsl::Layer::input(activation("in", 32, 20, 20));
    dsl::Layer larger = shifted_relu("larger", in, 40, 40, 0);
    larger.schedule().on_shave().split("y", "yo", "yi", 10);
    EXPECT_EQ(lowering_error(larger).rfind("layer 'larger': its output, x [0, 40), reads x [0, "
                                           "40) of input 'in', which has x [0, 20); read the "
                                           "input through a boundary condition",
                                           0),
              0u)
        << lowering_error(larger);
    dsl::Layer unscheduled = shifted_relu("unscheduled", in, 20, 40, 0);
    EXPECT_EQ(lowering_error(unscheduled)
                  .rfind("layer 'unscheduled': its output, y [0, 40), reads y [0, 40) of input "
                         "'in', which has y [0, 20)",
                         0),
              0u)
        << lowering_error(unscheduled);
}

// A stencil with no boundary condition reads a column past its input: refused at compile time
// with the advice to add one, and with repeat_edge it computes what the reference does.
TEST(ShaveLayer, AReadPastTheInputIsRefusedAndABoundaryConditionFixesIt) {
    const dsl::Layer in = dsl::Layer::input(activation("in", 32, 20, 20));
    dsl::Layer past = shifted_relu("past", in, 20, 20, 1);
    past.schedule().on_shave();
    EXPECT_EQ(lowering_error(past),
              "layer 'past': its output, x [0, 20), reads x [1, 21) of input 'in', which has x "
              "[0, 20); read the input through a boundary condition "
              "(Halide::BoundaryConditions::repeat_edge or constant_exterior, or clamp the "
              "coordinates), or declare an output that reads only inside the input");
    dsl::Layer edge = shifted_relu("edge", in, 20, 20, 1, true);
    edge.schedule().on_shave().split("x", "xo", "xi", 8);
    test::compile_and_check(dsl::Graph("edge", {edge}), "vpu27");
}

const dsl::Quant kProbability = dsl::Quant::per_tensor(1.0f / 256, 0);

// Scheduling the loops inside a task replaces the kernel's default schedule; without a
// vectorize of its own, the innermost loop is still vectorized by a full vector. A sigmoid
// computes in float32, so a scalar kernel would take about four times the instructions.
TEST(ShaveLayer, UnrollAndFuseKeepTheKernelVectorized) {
    const dsl::Layer in = dsl::Layer::input(activation("in", 32, 9, 10));
    dsl::Layer plain = algorithms::sigmoid("plain", in, kProbability);
    plain.schedule().on_shave();
    dsl::Layer unrolled = algorithms::sigmoid("unrolled", plain, kProbability);
    unrolled.schedule().on_shave().unroll("c");
    dsl::Layer fused = algorithms::sigmoid("fused", unrolled, kProbability);
    fused.schedule().on_shave().split("y", "yo", "yi", 2).fuse("c", "x", "cx");
    dsl::Layer rows = algorithms::sigmoid("rows", fused, kProbability);
    rows.schedule().on_shave().split("y", "yo", "yi", 5).unroll("yi");
    const std::vector<uint8_t> blob =
        test::compile_and_check(dsl::Graph("vectorized", {rows}), "vpu27").blob;
    const float vectorized = test::kernel_ops(blob, "plain");
    EXPECT_GT(vectorized, 0);
    for (const std::string layer : {"unrolled", "fused", "rows"})
        EXPECT_LE(test::kernel_ops(blob, layer), 1.25f * vectorized) << layer;
}

// A layer of a few channels (an image's 3) is vectorized along W, its channels unrolled: its
// vectors use nearly as many lanes as a layer of many channels does (the row's tail is one
// guarded vector per channel), not 3 of 16, and its results are the reference's.
TEST(ShaveLayer, FewChannelsVectorizeAlongTheRow) {
    const dsl::Layer wide = algorithms::sigmoid(
        "wide", dsl::Layer::input(activation("in_wide", 32, 37, 5)), kProbability);
    const std::vector<uint8_t> wide_blob =
        test::compile_and_check(dsl::Graph("wide", {wide}), "vpu27").blob;
    for (int64_t channels : {1, 2, 3, 4}) {
        const std::string name = "c" + std::to_string(channels);
        const dsl::Layer narrow = algorithms::sigmoid(
            name, dsl::Layer::input(activation("in", channels, 37, 5)), kProbability);
        for (const char *target : {"vpu27", "vpu20"}) {
            const std::vector<uint8_t> blob =
                test::compile_and_check(dsl::Graph(name, {narrow}), target).blob;
            if (std::string(target) == "vpu27") {
                EXPECT_LE(test::kernel_ops(blob, name), 1.5f * test::kernel_ops(wide_blob, "wide"))
                    << name;
            }
        }
    }
}

// out(c, x, y) = max(in(c, x, y), floor): the Func is named after the layer, as the library's
// layers name theirs.
dsl::Layer floor_at(const std::string &name, const dsl::Layer &in, uint8_t floor) {
    const dsl::TensorDesc input = in.output();
    return dsl::Layer::make("floor_at",
                            activation(name, input.shape[dsl::dims::C], input.shape[dsl::dims::W],
                                       input.shape[dsl::dims::H]),
                            {in}, [=](const std::vector<Halide::Func> &inputs) {
                                const auto &v = dsl::act_vars();
                                Halide::Func f(name);
                                f(v.c, v.x, v.y) = Halide::max(inputs[0](v.c, v.x, v.y), floor);
                                return f;
                            });
}

// Layers of different names computing the same thing share one compiled kernel: the first
// layer's, though the kernels compile on every core at once.
TEST(ShaveLayer, IdenticalKernelsOfDifferentLayersCompileOnce) {
    const dsl::Layer in = dsl::Layer::input(activation("in", 24, 7, 6));
    std::vector<dsl::Layer> chain;
    for (const char *name : {"first", "second", "third", "fourth", "fifth", "sixth"}) {
        chain.push_back(floor_at(name, chain.empty() ? in : chain.back(), 117));
        chain.back().schedule().on_shave();
    }
    const codegen::ShaveKernelCacheStats before = codegen::shave_kernel_cache_stats();
    const std::vector<uint8_t> blob =
        test::compile_and_check(dsl::Graph("six_times", {chain.back()}), "vpu27").blob;
    const codegen::ShaveKernelCacheStats after = codegen::shave_kernel_cache_stats();
    EXPECT_EQ(after.misses - before.misses, 1u);
    EXPECT_EQ(after.hits - before.hits, 5u);
    // Each keeps its own name in the blob.
    const auto *kernels = blob::GetBlob(blob.data())->kernels();
    ASSERT_EQ(kernels->size(), 6u);
    EXPECT_EQ(kernels->Get(0)->name()->str(), "k0_first");
    EXPECT_EQ(kernels->Get(1)->name()->str(), "k1_second");
    // The others are the first's object, entry point included.
    const auto *first_object = kernels->Get(0)->object();
    for (uint32_t k = 1; k < kernels->size(); ++k) {
        EXPECT_EQ(kernels->Get(k)->entry()->str(), "k0_first_argv") << k;
        const auto *object = kernels->Get(k)->object();
        EXPECT_TRUE(
            std::equal(first_object->begin(), first_object->end(), object->begin(), object->end()))
            << k;
    }
}

// A name says nothing of what a kernel computes: layers of the same name with different
// definitions each get their own kernel, and each computes its own result.
TEST(ShaveLayer, LayersOfTheSameNameWithDifferentDefinitionsDoNotShareAKernel) {
    const dsl::Layer in = dsl::Layer::input(activation("in", 24, 7, 6));
    dsl::Layer low = floor_at("same", in, 61);
    low.schedule().on_shave();
    dsl::Layer high = floor_at("same", in, 189);
    high.schedule().on_shave();
    const codegen::ShaveKernelCacheStats before = codegen::shave_kernel_cache_stats();
    const auto low_run = test::compile_and_check(dsl::Graph("low", {low}), "vpu27");
    const auto high_run = test::compile_and_check(dsl::Graph("high", {high}), "vpu27");
    const codegen::ShaveKernelCacheStats after = codegen::shave_kernel_cache_stats();
    EXPECT_EQ(after.misses - before.misses, 2u);
    EXPECT_EQ(after.hits - before.hits, 0u);
    EXPECT_NE(low_run.result.outputs.at(0), high_run.result.outputs.at(0));
}

// A scale and a bias per channel, as a Halide::Buffer read directly or through a Func over c.
dsl::Layer scale_bias(const std::string &name, const dsl::Layer &in, float scale_step,
                      bool through_func) {
    const dsl::TensorDesc input = in.output();
    const int channels = int(input.shape[dsl::dims::C]);
    Halide::Buffer<float> scale(channels, name + "_scale"), bias(channels, name + "_bias");
    for (int c = 0; c < channels; ++c) {
        scale(c) = 0.5f + scale_step * float(c);
        bias(c) = float(c % 5) * 3.25f - 6;
    }
    return dsl::Layer::make(
        "scale_bias",
        activation(name, channels, input.shape[dsl::dims::W], input.shape[dsl::dims::H]), {in},
        [=](const std::vector<Halide::Func> &inputs) {
            const auto &v = dsl::act_vars();
            Halide::Func scale_of, bias_of;
            if (through_func) {
                scale_of(v.c) = scale(v.c);
                bias_of(v.c) = bias(v.c);
            }
            Halide::Expr s = through_func ? scale_of(v.c) : scale(v.c);
            Halide::Expr b = through_func ? bias_of(v.c) : bias(v.c);
            Halide::Func f(name);
            f(v.c, v.x, v.y) = Halide::cast<uint8_t>(Halide::clamp(
                Halide::cast<float>(inputs[0](v.c, v.x, v.y)) * s + b + 0.5f, 0.0f, 255.0f));
            return f;
        });
}

// Per-channel constants in a SHAVE algorithm, both ways: Halide compiles the buffers into the
// kernel's object, and the results are the reference's.
TEST(ShaveLayer, PerChannelConstantsReachTheKernel) {
    const dsl::Layer in = dsl::Layer::input(activation("in", 40, 6, 5));
    dsl::Layer direct = scale_bias("direct", in, 0.03f, false);
    direct.schedule().on_shave().split("c", "co", "ci", 16);
    dsl::Layer through_func = scale_bias("through_func", direct, 0.02f, true);
    through_func.schedule().on_shave().distribute("y", 2, dsl::Strategy::SplitOverHeight);
    const std::vector<uint8_t> blob =
        test::compile_and_check(dsl::Graph("per_channel", {through_func}), "vpu27").blob;
    // No argument for the constants: each kernel takes its input and its output.
    for (const auto *kernel : *blob::GetBlob(blob.data())->kernels())
        EXPECT_EQ(kernel->args()->size(), 2u) << kernel->name()->str();
}

// The constants are part of what a kernel computes: the same definition with other values is
// another kernel, and with the same values the same one.
TEST(ShaveLayer, KernelsWithDifferentConstantsDoNotShare) {
    const dsl::Layer in = dsl::Layer::input(activation("in", 24, 5, 4));
    dsl::Layer steep = scale_bias("steep", in, 0.05f, false);
    steep.schedule().on_shave();
    dsl::Layer sloped = scale_bias("sloped", steep, 0.01f, false);
    sloped.schedule().on_shave();
    dsl::Layer sharp = scale_bias("sharp", sloped, 0.05f, false);
    sharp.schedule().on_shave();
    const codegen::ShaveKernelCacheStats before = codegen::shave_kernel_cache_stats();
    test::compile_and_check(dsl::Graph("constants", {sharp}), "vpu27");
    const codegen::ShaveKernelCacheStats after = codegen::shave_kernel_cache_stats();
    EXPECT_EQ(after.misses - before.misses, 2u);
    EXPECT_EQ(after.hits - before.hits, 1u);
}

// An algorithm may schedule its own output: the kernel keeps that Func as its output, schedule
// and all (inlined into another, its schedule would be an error).
TEST(ShaveLayer, AnAlgorithmThatSchedulesItsOutputCompiles) {
    const dsl::Layer in = dsl::Layer::input(activation("in", 24, 5, 4));
    dsl::Layer self_scheduled =
        dsl::Layer::make("self_scheduled", activation("self_scheduled", 24, 5, 4), {in},
                         [](const std::vector<Halide::Func> &inputs) {
                             const auto &v = dsl::act_vars();
                             Halide::Func f("self_scheduled");
                             f(v.c, v.x, v.y) = Halide::min(inputs[0](v.c, v.x, v.y), uint8_t(200));
                             f.vectorize(v.c, 8, Halide::TailStrategy::GuardWithIf);
                             return f;
                         });
    self_scheduled.schedule().on_shave();
    test::compile_and_check(dsl::Graph("self_scheduled", {self_scheduled}), "vpu27");
}

// The cache is shared by every thread: lowerings running at once find each other's kernels.
TEST(ShaveLayer, TheKernelCacheServesConcurrentLowerings) {
    std::vector<dsl::Graph> graphs;
    for (int i = 0; i < 4; ++i) {
        // Layers of their own: lowering writes default schedules into the layers it is given.
        const dsl::Layer in = dsl::Layer::input(activation("in", 20, 6, 5));
        dsl::Layer layer = floor_at("thread" + std::to_string(i), in, 83);
        layer.schedule().on_shave();
        graphs.emplace_back("thread" + std::to_string(i), std::vector<dsl::Layer>{layer});
    }
    const target::Target target = target::load_target("vpu27");
    const codegen::ShaveKernelCacheStats before = codegen::shave_kernel_cache_stats();
    std::vector<std::vector<uint8_t>> blobs(graphs.size());
    std::vector<std::thread> threads;
    for (size_t i = 0; i < graphs.size(); ++i)
        threads.emplace_back([&, i] { blobs[i] = codegen::lower(graphs[i], target); });
    for (std::thread &t : threads) t.join();
    const codegen::ShaveKernelCacheStats after = codegen::shave_kernel_cache_stats();
    EXPECT_EQ((after.hits - before.hits) + (after.misses - before.misses), graphs.size());
    EXPECT_GE(after.misses - before.misses, 1u);
    // Whoever compiled it, every blob computes the same.
    for (size_t i = 0; i < graphs.size(); ++i) test::compile_and_check(graphs[i], target);
}

} // namespace
