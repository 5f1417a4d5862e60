// Networks of several branches joined and cut again: a channel concat of three branches (one
// at an offset that is not a whole channel group), a slice and a TopK, compiled for both
// targets and checked against the reference. Stored in DDR, concat and slice are views that move no
// data: the producers write their parts in place, and a DMA copies only what cannot be placed.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>

#include "algorithms/registry.h"
#include "codegen/check.h"
#include "lowering_fixtures.h"

namespace vpuc {
namespace {

dsl::Graph branches_joined() {
    const dsl::Layer in = dsl::Layer::input(test::activation("in", 16, 12, 10));
    algorithms::Conv2dParams pointwise;
    pointwise.activation = algorithms::Activation::relu();
    const dsl::Layer a = test::conv3x3("a", in, 16, 1);
    const dsl::Layer b = algorithms::conv2d("b", in, test::weights(16, 1, 5, 2), pointwise);
    const dsl::Layer c = test::conv3x3("c", in, 19, 3);
    // a at channel 0, b at 16, c at 21.
    const dsl::Layer joined = algorithms::layer_registry().build("concat", "joined", {a, b, c}, {});
    dsl::Attrs cut;
    cut.set("starts", std::vector<int64_t>{8, 2}).set("ends", std::vector<int64_t>{30, 9});
    cut.set("axes", std::vector<int64_t>{1, 3});
    const dsl::Layer sliced = algorithms::layer_registry().build("slice", "sliced", {joined}, cut);
    const dsl::Layer head =
        algorithms::conv2d("head", sliced, test::weights(22, 1, 16, 4), pointwise);
    return dsl::Graph("branches_joined", {head, joined});
}

// The names of the tasks `layer` ran, and whether any task ran on a SHAVE.
std::vector<std::string> tasks_of(const codegen::CheckResult &r, const std::string &layer) {
    std::vector<std::string> names;
    for (const sim::TaskRecord &t : r.run.tasks)
        if (t.layer == layer) names.push_back(t.name);
    std::sort(names.begin(), names.end());
    return names;
}

bool any_shave_task(const codegen::CheckResult &r) {
    for (const sim::TaskRecord &t : r.run.tasks)
        if (t.engine.rfind("SHAVE", 0) == 0) return true;
    return false;
}

TEST(Network, ChannelConcatOfThreeBranchesAndASlice) {
    const dsl::Graph g = branches_joined();
    EXPECT_EQ(dsl::to_string(g.find("joined").output().shape), "1x40x10x12");
    EXPECT_EQ(dsl::to_string(g.find("sliced").output().shape), "1x22x10x7");
    for (const char *target : {"vpu27", "vpu20"}) {
        const codegen::CheckResult r =
            codegen::check_against_reference(g, target::load_target(target));
        EXPECT_TRUE(r.ok()) << target << "\n" << r.report();
        EXPECT_EQ(r.outputs.size(), 2u);
        // a, b and c store straight into the concat's memory (the network output), and head
        // reads its window of it: neither view runs a task.
        EXPECT_TRUE(tasks_of(r, "joined").empty()) << target;
        EXPECT_TRUE(tasks_of(r, "sliced").empty()) << target;
        EXPECT_FALSE(any_shave_task(r)) << target;
    }
}

// What cannot be placed in the concat's memory is copied there by a DMA: a graph input, a part
// that is itself a network output, and the second use of a layer the concat reads twice. A slice of
// a graph input along the height is a view of the input; a slice that is a network output is a
// copy.
TEST(Network, ConcatCopiesWhatItCannotPlaceAndSlicesAlongTheHeight) {
    for (const dsl::ElemType type : {dsl::ElemType::U8, dsl::ElemType::F16}) {
        const dsl::Layer in = dsl::Layer::input(test::activation("in", 16, 9, 13, type));
        algorithms::PoolParams pool;
        pool.kernel_w = pool.kernel_h = 3;
        pool.pad_left = pool.pad_right = pool.pad_top = pool.pad_bottom = 1;
        const dsl::Layer a = algorithms::max_pool("a", in, pool);
        const dsl::Layer b = algorithms::avg_pool("b", in, pool);
        auto &registry = algorithms::layer_registry();
        dsl::Attrs along_h;
        along_h.set("axis", int64_t(2));
        // Along the height: in (a graph input), a twice, b (also a network output).
        const dsl::Layer joined = registry.build("concat", "joined", {in, a, a, b}, along_h);
        dsl::Attrs rows;
        rows.set("starts", std::vector<int64_t>{4}).set("ends", std::vector<int64_t>{11});
        rows.set("axes", std::vector<int64_t>{2});
        const dsl::Layer top = registry.build("slice", "top", {in}, rows);
        const dsl::Layer head = algorithms::max_pool("head", top, pool);
        const dsl::Layer cut = registry.build("slice", "cut", {joined}, rows);
        const dsl::Graph g("copies", {joined, b, head, cut});
        EXPECT_EQ(dsl::to_string(joined.output().shape), "1x16x52x9");
        for (const char *target : {"vpu27", "vpu20"}) {
            codegen::CheckOptions options;
            options.tolerance.f16_ulp = 0; // copies and DPU operations only: bit for bit
            const codegen::CheckResult r =
                codegen::check_against_reference(g, target::load_target(target), options);
            EXPECT_TRUE(r.ok()) << target << "\n" << r.report();
            EXPECT_EQ(tasks_of(r, "joined"),
                      (std::vector<std::string>{"joined.copy0", "joined.copy2", "joined.copy3"}))
                << target;
            EXPECT_TRUE(tasks_of(r, "top").empty()) << target;
            EXPECT_FALSE(tasks_of(r, "cut").empty()) << "a network output has its own memory";
        }
    }
}

// A batch of two: every layer computes image after image (DPU layers, a layer computed at its
// consumer's loop, SHAVE kernels, a channel concat of three branches and a graph input, one
// branch at channel 21, a slice, a TopK's values and indices, a reshape whose shape is i64
// arithmetic folded at compile time), and an eltwise reads a tensor without batch for both
// images. Both images must match, so a task reading or writing the wrong image shows.
dsl::Graph batch_of_two(dsl::ElemType type) {
    const bool int8 = type == dsl::ElemType::U8;
    dsl::TensorDesc in_desc = test::activation("in", 16, 11, 9, type);
    in_desc.shape[dsl::dims::N] = 2;
    const dsl::Layer in = dsl::Layer::input(in_desc);
    const dsl::Layer bias = dsl::Layer::input(test::activation("bias", 16, 11, 9, type));
    algorithms::PoolParams pool;
    pool.kernel_w = pool.kernel_h = 3;
    pool.pad_left = pool.pad_right = pool.pad_top = pool.pad_bottom = 1;
    const dsl::Layer a = algorithms::max_pool("a", in, pool);
    dsl::Layer b = algorithms::avg_pool("b", in, pool);
    dsl::Attrs first5;
    first5.set("starts", std::vector<int64_t>{0}).set("ends", std::vector<int64_t>{5});
    const dsl::Layer narrow = algorithms::max_pool(
        "narrow", algorithms::layer_registry().build("slice", "in5", {in}, first5), pool);
    // a, narrow and b store into joined in place, at channels 0, 16 and 21; in, a graph input,
    // is copied there (at 37) by one DMA.
    const dsl::Layer joined =
        algorithms::layer_registry().build("concat", "joined", {a, narrow, b, in}, {});
    dsl::Attrs cut;
    cut.set("starts", std::vector<int64_t>{5}).set("ends", std::vector<int64_t>{21});
    const dsl::Layer sliced = algorithms::layer_registry().build("slice", "sliced", {joined}, cut);
    std::optional<algorithms::QuantEltwise> q;
    if (int8)
        q = algorithms::quant_eltwise(algorithms::EltwiseOp::Add, sliced.output().quant,
                                      bias.output().quant, dsl::ElemType::U8,
                                      dsl::Quant::per_tensor(0.1f, 5));
    dsl::Layer sum = algorithms::eltwise("sum", algorithms::EltwiseOp::Add, sliced, bias, {}, q);
    const dsl::Layer squashed = algorithms::sigmoid(
        "squashed", sum,
        int8 ? std::optional(dsl::Quant::per_tensor(1.0f / 256, 0)) : std::nullopt);
    dsl::Layer out = squashed;
    out.schedule().split("y", "yo", "yi", 4);
    sum.schedule().compute_at("squashed", "yo");
    b.schedule().split("y", "yo", "yi", 5).distribute("yo", 2, dsl::Strategy::SplitOverHeight);
    // The shape of a reshape as an ONNX model computes it, in i64 at compile time:
    // [N, 8, 2 * H, W] of squashed's shape.
    auto &registry = algorithms::layer_registry();
    const dsl::Layer shape = registry.build("shape", "shape", {squashed}, {});
    auto pick = [&](const char *name, int64_t index) {
        return registry.build("gather", name,
                              {shape, test::i64_constant(std::string(name) + ".at", {index})}, {});
    };
    const dsl::Layer rows =
        registry.build("mul", "rows", {pick("h", 2), test::i64_constant("two", {2})}, {});
    dsl::Attrs axis0;
    axis0.set("axis", int64_t(0));
    const dsl::Layer target =
        registry.build("concat", "target",
                       {pick("n", 0), test::i64_constant("eight", {8}), rows, pick("w", 3)}, axis0);
    const dsl::Layer folded = registry.build("reshape", "folded", {squashed, target}, {});
    // The 4 best channels of each pixel: values feed a pool, indices are an output.
    dsl::Attrs four;
    four.set("k", int64_t(4));
    const dsl::Layer best = registry.build("topk", "best", {sliced}, four);
    const dsl::Layer values =
        registry.build("tuple_element", "values", {best}, dsl::Attrs().set("index", int64_t(0)));
    const dsl::Layer indices =
        registry.build("tuple_element", "indices", {best}, dsl::Attrs().set("index", int64_t(1)));
    const dsl::Layer best_pooled = algorithms::max_pool("best_pooled", values, pool);
    return dsl::Graph("batch_of_two", {folded, joined, best_pooled, indices});
}

TEST(Network, BatchOfTwo) {
    for (const dsl::ElemType type : {dsl::ElemType::U8, dsl::ElemType::F16}) {
        const dsl::Graph g = batch_of_two(type);
        EXPECT_EQ(dsl::to_string(g.find("squashed").output().shape), "2x16x9x11");
        EXPECT_EQ(dsl::to_string(g.find("folded").output().shape), "2x8x18x11");
        for (const char *target : {"vpu27", "vpu20"}) {
            const codegen::CheckResult r =
                codegen::check_against_reference(g, target::load_target(target));
            EXPECT_TRUE(r.ok()) << dsl::to_string(type) << " on " << target << "\n" << r.report();
            EXPECT_EQ(tasks_of(r, "joined"), std::vector<std::string>{"joined.copy3"}) << target;
            EXPECT_TRUE(tasks_of(r, "values").empty()) << target;
        }
    }
}

// Graph outputs that no engine computes: a graph input's copy (a cast to its own type) and
// constants of the device's types are each one DMA, into the output section, from the input's
// section or the blob's constant section.
dsl::Graph outputs_by_copies() {
    const dsl::Layer in = dsl::Layer::input(test::activation("in", 19, 11, 7, dsl::ElemType::F16));
    dsl::Attrs same;
    same.set("to", std::string("f16"));
    const dsl::Layer copy = algorithms::layer_registry().build("cast", "copy", {in}, same);
    std::mt19937 rng(5);
    Halide::Buffer<int32_t> ints(7, 5, 3); // 3x5x7, values over all of i32
    ints.for_each_value([&](int32_t &v) { v = int32_t(rng()); });
    Halide::Buffer<uint8_t> mask(3, 2); // a bool mask as the device holds one
    mask.for_each_value([&](uint8_t &v) { v = uint8_t(rng() % 2); });
    Halide::Buffer<float> fractions(9); // exact small fractions and real values
    for (int i = 0; i < 9; ++i)
        fractions(i) = i % 2 ? float(int(rng() % 64) - 32) / 8 : std::ldexp(float(rng()), -29);
    return dsl::Graph("outputs_by_copies", {copy, dsl::LayerRegistry::constant("ints", ints),
                                            dsl::LayerRegistry::constant("mask", mask),
                                            dsl::LayerRegistry::constant("fractions", fractions)});
}

TEST(Network, OutputsThatAreInputsOrConstantsAreOneDmaEach) {
    const dsl::Graph g = outputs_by_copies();
    for (const char *target : {"vpu27", "vpu20"}) {
        const codegen::CheckResult r =
            codegen::check_against_reference(g, target::load_target(target));
        EXPECT_TRUE(r.ok()) << target << "\n" << r.report();
        for (const char *layer : {"copy", "ints", "mask", "fractions"})
            EXPECT_EQ(tasks_of(r, layer), std::vector<std::string>{std::string(layer) + ".copy0"})
                << target;
        EXPECT_FALSE(any_shave_task(r)) << target;
        const auto *outputs = blob::GetBlob(r.blob.data())->header()->outputs();
        ASSERT_EQ(outputs->size(), 4u);
        EXPECT_EQ(outputs->Get(1)->dtype(), blob::DType::I32);
        EXPECT_EQ(outputs->Get(2)->dtype(), blob::DType::U8);
        EXPECT_EQ(outputs->Get(3)->dtype(), blob::DType::F32);
        // The constants' bytes, row-major, exactly.
        const Halide::Buffer<> ints = dsl::constant_value(g.find("ints"));
        EXPECT_EQ(r.run.outputs.at(1), test::bytes_of(ints));
        EXPECT_EQ(r.run.outputs.at(3), test::bytes_of(dsl::constant_value(g.find("fractions"))));
    }
}

// A cast that changes the type runs on the SHAVEs: floats to integers truncate towards zero and
// saturate, integers to floats round to nearest even.
TEST(Network, CastsBetweenDeviceTypes) {
    const dsl::TensorDesc t = test::activation("in", 21, 5, 3, dsl::ElemType::F16);
    const dsl::Layer in = dsl::Layer::input(t);
    auto cast = [](const std::string &name, const dsl::Layer &x, const char *to) {
        dsl::Attrs a;
        a.set("to", std::string(to));
        return algorithms::layer_registry().build("cast", name, {x}, a);
    };
    const dsl::Layer i32 = cast("i32", in, "i32");
    const dsl::Layer u8 = cast("u8", in, "u8");
    const dsl::Layer back = cast("back", i32, "f16");
    const dsl::Graph g("casts", {i32, u8, back});
    Halide::Buffer<Halide::float16_t> x = test::real_halves({21, 5, 3}, -300, 300, 3);
    x(0, 0, 0) = Halide::float16_t(-2.75f);
    x(1, 0, 0) = Halide::float16_t(2.75f);
    x(2, 0, 0) = Halide::float16_t(-0.5f);
    x(3, 0, 0) = Halide::float16_t(65504.0f);
    codegen::CheckOptions check;
    check.inputs = {x};
    const codegen::CheckResult r =
        codegen::check_against_reference(g, target::load_target("vpu27"), check);
    EXPECT_TRUE(r.ok()) << r.report();
    EXPECT_TRUE(any_shave_task(r));
    // NHWC: element (c, 0, 0) is the c-th of each output.
    const auto *ints = reinterpret_cast<const int32_t *>(r.run.outputs.at(0).data());
    EXPECT_EQ(std::vector<int32_t>(ints, ints + 4), (std::vector<int32_t>{-2, 2, 0, 65504}));
    const std::vector<uint8_t> &bytes = r.run.outputs.at(1);
    EXPECT_EQ(std::vector<uint8_t>(bytes.begin(), bytes.begin() + 4),
              (std::vector<uint8_t>{0, 2, 0, 255}));
    const auto *halves = reinterpret_cast<const Halide::float16_t *>(r.run.outputs.at(2).data());
    EXPECT_EQ(float(halves[0]), -2.0f);
    EXPECT_EQ(float(halves[3]), 65504.0f);
}

TEST(Network, ConcatAndSliceRefuseWhatTheyCannotDo) {
    const dsl::Layer in = dsl::Layer::input(test::activation("in", 16, 12, 10));
    const dsl::Layer other = dsl::Layer::input(test::activation("other", 16, 11, 10));
    auto &registry = algorithms::layer_registry();
    EXPECT_THROW(registry.build("concat", "j", {in, other}, {}), dsl::LayerError)
        << "widths differ off the axis";
    const dsl::Layer f16 = dsl::Layer::input(test::activation("h", 16, 12, 10, dsl::ElemType::F16));
    EXPECT_THROW(registry.build("concat", "j", {in, f16}, {}), dsl::LayerError);
    EXPECT_THROW(registry.build("concat", "j", {}, {}), dsl::AttrError) << "no inputs";
    dsl::Attrs empty;
    empty.set("starts", std::vector<int64_t>{5}).set("ends", std::vector<int64_t>{5});
    EXPECT_THROW(registry.build("slice", "s", {in}, empty), dsl::LayerError);
    dsl::Attrs batch = empty;
    batch.set("axes", std::vector<int64_t>{0});
    EXPECT_THROW(registry.build("slice", "s", {in}, batch), dsl::LayerError);
}

} // namespace
} // namespace vpuc
