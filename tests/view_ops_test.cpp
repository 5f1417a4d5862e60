// The ops that only rearrange data, beyond concat and slice: transpose and gather (SHAVE
// kernels on the device, folded for constants), flatten, squeeze and unsqueeze (folded for
// constants; rank_test and the registry examples run them on the device), and split (one slice per
// part). Each is checked against index arithmetic written out here, not only against the reference,
// which shares the algorithm.
#include <gtest/gtest.h>

#include <algorithm>

#include "algorithms/layers.h"
#include "algorithms/reference.h"
#include "algorithms/registry.h"
#include "codegen/check.h"
#include "codegen/lower.h"
#include "lowering_fixtures.h"

namespace vpuc {
namespace {

dsl::LayerRegistry &registry() {
    return algorithms::layer_registry();
}

std::string shape_of(const dsl::Layer &layer) {
    return dsl::to_string(layer.output().shape);
}

// Every permutation keeping N first: out(n, i1, i2, i3) = in at the permuted coordinates, on
// both targets, odd extents.
TEST(ViewOps, TransposeMovesEachElementWhereThePermutationSays) {
    const std::vector<std::vector<int64_t>> perms = {
        {0, 1, 3, 2}, {0, 2, 1, 3}, {0, 2, 3, 1}, {0, 3, 1, 2}, {0, 3, 2, 1}};
    const dsl::Layer in = dsl::Layer::input(test::activation("in", 19, 11, 7));
    const Halide::Buffer<uint8_t> x(test::random_input(in.output(), 5));
    for (const auto &perm : perms) {
        dsl::Attrs a;
        a.set("perm", perm);
        const dsl::Layer t = registry().build("transpose", "t", {in}, a);
        const std::vector<int64_t> &from = in.output().shape.raw();
        EXPECT_EQ(t.output().shape.raw(),
                  (std::vector<int64_t>{1, from[size_t(perm[1])], from[size_t(perm[2])],
                                        from[size_t(perm[3])]}));
        const dsl::Graph g("transpose", {t});
        const Halide::Buffer<uint8_t> out(algorithms::run_reference(g, {x})[0]);
        // Logical index (n, i1, i2, i3) of the output; the input's coordinate along
        // dimension perm[k] is i_k. Buffers are (c, x, y) = (C, W, H).
        out.for_each_element([&](int c, int w, int h) {
            int64_t at[4] = {0, 0, 0, 0};
            const int64_t idx[4] = {0, c, h, w};
            for (int k = 1; k < 4; ++k) at[perm[size_t(k)]] = idx[k];
            EXPECT_EQ(out(c, w, h), x(int(at[1]), int(at[3]), int(at[2])));
        });
        for (const char *target : {"vpu27", "vpu20"}) {
            codegen::CheckOptions options;
            options.inputs = {x};
            const codegen::CheckResult r =
                codegen::check_against_reference(g, target::load_target(target), options);
            EXPECT_TRUE(r.ok()) << target << "\n" << r.report();
        }
    }
    dsl::Attrs batch;
    batch.set("perm", std::vector<int64_t>{1, 0, 2, 3});
    EXPECT_THROW(registry().build("transpose", "t", {in}, batch), dsl::LayerError);
    dsl::Attrs twice;
    twice.set("perm", std::vector<int64_t>{0, 1, 1, 2});
    EXPECT_THROW(registry().build("transpose", "t", {in}, twice), dsl::LayerError);
}

// Gather of a computed tensor with constant indices (repeated, out of order, negative) along
// C, H and W, and with 2-D indices: each output element is the input's at the picked index,
// on both targets, odd extents; along the batch, or an index outside the extent, is refused.
TEST(ViewOps, GatherPicksAlongEachAxisButTheBatch) {
    const dsl::Layer in = dsl::Layer::input(test::activation("in", 19, 11, 7));
    const Halide::Buffer<uint8_t> x(test::random_input(in.output(), 9));
    const std::vector<int64_t> indices = {4, 0, -1, 4, 2, -7};
    auto picked = [&](int k, int64_t extent) {
        const int64_t i = indices[size_t(k)];
        return int(i < 0 ? i + extent : i);
    };
    for (int64_t axis : {1, 2, 3, -1}) {
        dsl::Attrs a;
        a.set("axis", axis);
        const dsl::Layer g =
            registry().build("gather", "g", {in, test::i64_constant("i", indices)}, a);
        std::vector<int64_t> shape = {1, 19, 7, 11};
        shape[size_t(axis < 0 ? axis + 4 : axis)] = int64_t(indices.size());
        EXPECT_EQ(g.output().shape.raw(), shape);
        const dsl::Graph graph("gather", {g});
        const Halide::Buffer<uint8_t> out(algorithms::run_reference(graph, {x})[0]);
        // Buffers are (c, x, y) = (C, W, H).
        out.for_each_element([&](int c, int w, int h) {
            const int from_c = axis == 1 ? picked(c, 19) : c;
            const int from_h = axis == 2 ? picked(h, 7) : h;
            const int from_w = axis == 3 || axis == -1 ? picked(w, 11) : w;
            EXPECT_EQ(out(c, w, h), x(from_c, from_w, from_h)) << "axis " << axis;
        });
        for (const char *target : {"vpu27", "vpu20"}) {
            codegen::CheckOptions options;
            options.inputs = {x};
            const codegen::CheckResult r =
                codegen::check_against_reference(graph, target::load_target(target), options);
            EXPECT_TRUE(r.ok()) << target << " axis " << axis << "\n" << r.report();
        }
    }
    // 2-D indices along H: [1, 19, 2, 3, 11], in fp16.
    const dsl::Layer halves =
        dsl::Layer::input(test::activation("h", 19, 11, 7, dsl::ElemType::F16));
    Halide::Buffer<int64_t> rows(3, 2);
    for (int i = 0; i < 6; ++i) rows(i % 3, i / 3) = indices[size_t(i)];
    dsl::Attrs along_h;
    along_h.set("axis", int64_t(2));
    const dsl::Layer g2 = registry().build(
        "gather", "g2", {halves, dsl::LayerRegistry::constant("rows", rows)}, along_h);
    EXPECT_EQ(shape_of(g2), "1x19x2x3x11");
    codegen::CheckOptions options;
    options.inputs = {test::random_input(halves.output(), 4)};
    const codegen::CheckResult r = codegen::check_against_reference(
        dsl::Graph("gather2", {g2}), target::load_target("vpu27"), options);
    EXPECT_TRUE(r.ok()) << r.report();

    dsl::Attrs batch;
    batch.set("axis", int64_t(0));
    EXPECT_THROW(registry().build("gather", "g", {in, test::i64_constant("i", {0})}, batch),
                 dsl::LayerError);
    dsl::Attrs along_w;
    along_w.set("axis", int64_t(3));
    EXPECT_THROW(registry().build("gather", "g", {in, test::i64_constant("i", {11})}, along_w),
                 dsl::LayerError);
    EXPECT_THROW(registry().build("gather", "g", {in, test::i64_constant("i", {-12})}, along_w),
                 dsl::LayerError);
}

TEST(ViewOps, TransposeFoldsAConstantOfAnyRank) {
    // A 2x3x4 constant holding its own row-major index; perm (2, 0, 1) gives 4x2x3.
    Halide::Buffer<int64_t> v(4, 3, 2);
    v.for_each_element([&](int k, int j, int i) { v(k, j, i) = (i * 3 + j) * 4 + k; });
    dsl::Attrs a;
    a.set("perm", std::vector<int64_t>{2, 0, 1});
    const dsl::Layer t =
        registry().build("transpose", "t", {dsl::LayerRegistry::constant("v", v)}, a);
    ASSERT_TRUE(dsl::is_constant(t));
    EXPECT_EQ(shape_of(t), "4x2x3");
    const Halide::Buffer<int64_t> got(dsl::constant_value(t).copy());
    got.for_each_element(
        [&](int j, int i, int k) { EXPECT_EQ(got(j, i, k), (i * 3 + j) * 4 + k); });
    // No perm: reversed.
    const dsl::Layer r =
        registry().build("transpose", "r", {dsl::LayerRegistry::constant("v", v)}, {});
    EXPECT_EQ(shape_of(r), "4x3x2");
}

// The spatial part of a Shape, and a box of a matrix.
TEST(ViewOps, SliceFoldsAConstantOfAnyRank) {
    const dsl::Layer in = dsl::Layer::input(test::activation("in", 16, 5, 6));
    const dsl::Layer shape = registry().build("shape", "shape", {in}, {});
    dsl::Attrs tail;
    tail.set("starts", std::vector<int64_t>{2}).set("ends", std::vector<int64_t>{100});
    tail.set("axes", std::vector<int64_t>{0});
    const dsl::Layer hw = registry().build("slice", "hw", {shape}, tail);
    ASSERT_TRUE(dsl::is_constant(hw));
    const Halide::Buffer<int64_t> got(dsl::constant_value(hw).copy());
    EXPECT_EQ(std::vector<int64_t>(got.data(), got.data() + got.number_of_elements()),
              (std::vector<int64_t>{6, 5}));
    Halide::Buffer<float> m(4, 3); // logical 3x4
    m.for_each_element([&](int j, int i) { m(j, i) = float(i * 4 + j) + 0.5f; });
    dsl::Attrs box;
    box.set("starts", std::vector<int64_t>{1, -3}).set("ends", std::vector<int64_t>{3, 3});
    box.set("axes", std::vector<int64_t>{0, 1});
    const dsl::Layer part =
        registry().build("slice", "part", {dsl::LayerRegistry::constant("m", m)}, box);
    EXPECT_EQ(shape_of(part), "2x2");
    const Halide::Buffer<float> p(dsl::constant_value(part).copy());
    p.for_each_element(
        [&](int j, int i) { EXPECT_EQ(p(j, i), float((i + 1) * 4 + (j + 1)) + 0.5f); });
}

TEST(ViewOps, FlattenSqueezeAndUnsqueezeFoldConstantsAsOnnxDoes) {
    Halide::Buffer<int64_t> v(3, 1, 2); // logical 2x1x3
    v.for_each_element([&](int k, int j, int i) { v(k, j, i) = i * 3 + k; });
    const dsl::Layer c = dsl::LayerRegistry::constant("c", v);
    dsl::Attrs axis;
    axis.set("axis", int64_t(-1));
    EXPECT_EQ(shape_of(registry().build("flatten", "f", {c}, axis)), "2x3");
    EXPECT_EQ(shape_of(registry().build("flatten", "f0", {c}, axis.set("axis", int64_t(0)))),
              "1x6");
    EXPECT_EQ(shape_of(registry().build("squeeze", "s", {c}, {})), "2x3");
    // Axes given as a constant input (ONNX opset 13).
    EXPECT_EQ(shape_of(registry().build("squeeze", "s1", {c, test::i64_constant("a", {-2})}, {})),
              "2x3");
    EXPECT_THROW(registry().build("squeeze", "s0", {c, test::i64_constant("a", {0})}, {}),
                 dsl::LayerError)
        << "axis 0 has extent 2";
    const dsl::Layer u =
        registry().build("unsqueeze", "u", {c, test::i64_constant("a", {0, -1})}, {});
    EXPECT_EQ(shape_of(u), "1x2x1x3x1");
    // The elements keep their order.
    const Halide::Buffer<int64_t> got(dsl::constant_value(u).copy());
    EXPECT_EQ(std::vector<int64_t>(got.data(), got.data() + 6),
              (std::vector<int64_t>{0, 1, 2, 3, 4, 5}));
    // A computed tensor does not fold: the op is a layer of the device (the registry examples
    // run flatten, squeeze and unsqueeze there).
    const dsl::Layer in = dsl::Layer::input(test::activation("in", 16, 5, 6));
    const dsl::Layer f = registry().build("flatten", "f", {in}, {});
    EXPECT_FALSE(dsl::is_constant(f));
    EXPECT_EQ(shape_of(f), "1x480");
}

// Split's parts are slices: views of the input's memory, no task moves data for them.
TEST(ViewOps, SplitCutsIntoSlicesThatAreViews) {
    const dsl::Layer in = dsl::Layer::input(test::activation("in", 21, 9, 7));
    const dsl::Layer a = test::conv3x3("a", in, 21, 4);
    const std::vector<dsl::Layer> parts = algorithms::split({"p0", "p1", "p2"}, a, 1, {5, 11, 5});
    ASSERT_EQ(parts.size(), 3u);
    EXPECT_EQ(shape_of(parts[1]), "1x11x7x9");
    algorithms::PoolParams pool;
    pool.kernel_w = pool.kernel_h = 2;
    const dsl::Graph g("split", {algorithms::max_pool("m0", parts[0], pool),
                                 algorithms::max_pool("m1", parts[1], pool),
                                 algorithms::max_pool("m2", parts[2], pool)});
    const Halide::Buffer<> x = test::random_input(in.output(), 9);
    const Halide::Buffer<uint8_t> conv(algorithms::run_reference(dsl::Graph("a", {a}), {x})[0]);
    const Halide::Buffer<uint8_t> p1(
        algorithms::run_reference(dsl::Graph("p1", {parts[1]}), {x})[0]);
    p1.for_each_element([&](int c, int w, int h) { EXPECT_EQ(p1(c, w, h), conv(c + 5, w, h)); });
    for (const char *target : {"vpu27", "vpu20"}) {
        const codegen::CheckResult r =
            codegen::check_against_reference(g, target::load_target(target));
        EXPECT_TRUE(r.ok()) << target << "\n" << r.report();
        for (const sim::TaskRecord &t : r.run.tasks) EXPECT_NE(t.layer.rfind("p", 0), 0u) << t.name;
    }
    EXPECT_THROW(algorithms::split({"p0", "p1"}, a, 1, {5, 11}), dsl::LayerError);
}

// The tasks `layer` ran.
std::vector<std::string> tasks_of(const codegen::CheckResult &r, const std::string &layer) {
    std::vector<std::string> names;
    for (const sim::TaskRecord &t : r.run.tasks)
        if (t.layer == layer) names.push_back(t.name);
    return names;
}

// A reshape or transpose that keeps the bytes' order is an alias of its input's memory: no
// task for it, or one DMA copying the bytes when it is a graph output. One that reorders them
// stays a SHAVE kernel.
TEST(ViewOps, ReshapeAndTransposeKeepingTheBytesAreViews) {
    algorithms::PoolParams pool;
    pool.kernel_w = pool.kernel_h = 2;
    for (const dsl::ElemType type : {dsl::ElemType::U8, dsl::ElemType::F16}) {
        // One channel of 6x5 pixels read as 5x6: NHWC with C = 1 is in logical order.
        const dsl::Layer in = dsl::Layer::input(test::activation("in", 16, 5, 6, type));
        dsl::Attrs one;
        one.set("starts", std::vector<int64_t>{3}).set("ends", std::vector<int64_t>{4});
        const dsl::Layer plane = algorithms::max_pool(
            "plane", registry().build("slice", "ch3", {in}, one), algorithms::PoolParams{});
        dsl::Attrs shape;
        shape.set("shape", std::vector<int64_t>{1, 1, 5, 6});
        const dsl::Layer turned = registry().build("reshape", "turned", {plane}, shape);
        // A row of pixels (H = 1) to a column: (1, 16, 1, 9) -> (1, 1, 9, 16), the same bytes.
        const dsl::Layer row = dsl::Layer::input(test::activation("row", 16, 9, 1, type));
        dsl::Attrs perm;
        perm.set("perm", std::vector<int64_t>{0, 2, 3, 1});
        const dsl::Layer column = registry().build("transpose", "column", {row}, perm);
        EXPECT_EQ(shape_of(column), "1x1x9x16");
        // A transpose that moves bytes.
        dsl::Attrs swap;
        swap.set("perm", std::vector<int64_t>{0, 1, 3, 2});
        const dsl::Layer swapped = registry().build("transpose", "swapped", {plane}, swap);
        const dsl::Graph g("aliases", {algorithms::max_pool("p1", turned, pool),
                                       algorithms::max_pool("p2", column, pool), turned, swapped});
        for (const char *target : {"vpu27", "vpu20"}) {
            const codegen::CheckResult r =
                codegen::check_against_reference(g, target::load_target(target));
            EXPECT_TRUE(r.ok()) << target << "\n" << r.report();
            EXPECT_TRUE(tasks_of(r, "column").empty()) << target;
            EXPECT_EQ(tasks_of(r, "turned"), std::vector<std::string>{"turned.copy0"}) << target;
            const std::vector<std::string> moved = tasks_of(r, "swapped");
            EXPECT_TRUE(std::any_of(moved.begin(), moved.end(), [](const std::string &t) {
                return t.find(".shave.") != std::string::npos;
            })) << target;
        }
    }
}

// A reshape changing the batch (the first extent) moves whole images: a view of its input's
// bytes, no task moving data for it (one DMA when it is a graph output). Both tensors must
// hold their elements in logical order and the view lives in DDR; else an error naming the
// layer.
TEST(ViewOps, AReshapeChangingTheBatchIsAViewOfItsInputsBytes) {
    dsl::TensorDesc t;
    t.name = "x";
    t.shape = dsl::Shape({6, 10});
    t.order = dsl::DimsOrder::identity(2);
    t.type = dsl::ElemType::F16;
    const dsl::Layer x = dsl::Layer::input(t);
    auto build = [&](const std::string &suffix) {
        const dsl::Layer r = algorithms::relu("r" + suffix, x);
        dsl::Attrs shape;
        shape.set("shape", std::vector<int64_t>{3, 20});
        return registry().build("reshape", "wide" + suffix, {r}, shape);
    };
    const dsl::Layer wide = build("");
    EXPECT_EQ(shape_of(wide), "3x20");
    const Halide::Buffer<Halide::float16_t> in = test::real_halves({10, 1, 1, 6}, -2, 2, 3);
    const Halide::Buffer<Halide::float16_t> out(
        algorithms::run_reference(dsl::Graph("wide", {wide}), {in})[0]);
    ASSERT_EQ(out.dimensions(), 4);
    out.for_each_element([&](int c, int, int, int n) {
        const int flat = n * 20 + c;
        EXPECT_EQ(float(out(c, 0, 0, n)), std::max(0.0f, float(in(flat % 10, 0, 0, flat / 10))));
    });
    const dsl::Layer sum = algorithms::relu("after", wide);
    for (const char *target : {"vpu27", "vpu20"}) {
        codegen::CheckOptions options;
        options.inputs = {in};
        const codegen::CheckResult inner = codegen::check_against_reference(
            dsl::Graph("inner", {sum}), target::load_target(target), options);
        EXPECT_TRUE(inner.ok()) << target << "\n" << inner.report();
        EXPECT_TRUE(tasks_of(inner, "wide").empty()) << target;
        const codegen::CheckResult output = codegen::check_against_reference(
            dsl::Graph("output", {wide}), target::load_target(target), options);
        EXPECT_TRUE(output.ok()) << target << "\n" << output.report();
        EXPECT_EQ(tasks_of(output, "wide"), std::vector<std::string>{"wide.copy0"}) << target;
    }

    // Kept in CMX it cannot be a view.
    const dsl::Layer kept = build("_cmx");
    dsl::Layer handle = kept;
    handle.schedule().store_in(dsl::MemoryLevel::CMX);
    try {
        codegen::lower(dsl::Graph("cmx", {algorithms::relu("after", kept)}),
                       target::load_target("vpu27"));
        ADD_FAILURE() << "no error";
    } catch (const codegen::LoweringError &e) {
        EXPECT_NE(std::string(e.what()).find("layer 'wide_cmx' (reshape) moves whole images, 6x10 "
                                             "to 3x20: it is a view of DDR memory only"),
                  std::string::npos)
            << e.what();
    }
    // An NHWC tensor's bytes are not in logical order.
    dsl::TensorDesc nhwc = t;
    nhwc.shape = dsl::Shape({2, 3, 4, 5});
    nhwc.order = dsl::DimsOrder::NHWC();
    dsl::Attrs flat;
    flat.set("axis", int64_t(0));
    try {
        registry().build("flatten", "flat", {dsl::Layer::input(nhwc)}, flat);
        ADD_FAILURE() << "no error";
    } catch (const dsl::LayerError &e) {
        EXPECT_EQ(std::string(e.what()),
                  "flatten 'flat': reshapes 2x3x4x5 to 1x120, changing the batch (the first "
                  "extent): on the device that is a view of the input's bytes, and 'x' is held "
                  "NHWC, not in logical order");
    }
}

} // namespace
} // namespace vpuc
