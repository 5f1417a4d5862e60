// Shape arithmetic at compile time: constants of any rank and graph type, ONNX's Shape,
// Gather, Concat, elementwise ops and Reshape on constants fold into constants, and a
// reshape takes its shape from a constant input. Nothing of it reaches the device.
#include <gtest/gtest.h>

#include "algorithms/layers.h"
#include "algorithms/registry.h"
#include "codegen/check.h"
#include "dsl/registry.h"
#include "lowering_fixtures.h"

namespace vpuc {
namespace {

dsl::LayerRegistry &registry() {
    return algorithms::layer_registry();
}

std::vector<int64_t> values(const dsl::Layer &constant) {
    EXPECT_TRUE(dsl::is_constant(constant)) << constant.name() << " is " << constant.op();
    Halide::Buffer<int64_t> b(dsl::constant_value(constant).copy());
    return std::vector<int64_t>(b.data(), b.data() + b.number_of_elements());
}

TEST(ConstantFolding, ShapeGatherConcatAndArithmeticFold) {
    const dsl::Layer in = dsl::Layer::input(test::activation("in", 16, 5, 6));
    const dsl::Layer shape = registry().build("shape", "shape", {in}, {});
    EXPECT_EQ(values(shape), (std::vector<int64_t>{1, 16, 6, 5}));
    EXPECT_EQ(shape.output().type, dsl::ElemType::I64);
    EXPECT_EQ(dsl::to_string(shape.output().shape), "4");
    const dsl::Layer hw =
        registry().build("gather", "hw", {shape, test::i64_constant("at", {-2, 3})}, {});
    EXPECT_EQ(values(hw), (std::vector<int64_t>{6, 5}));
    const dsl::Layer doubled =
        registry().build("mul", "doubled", {hw, test::i64_constant("two", {2, 1})}, {});
    EXPECT_EQ(values(doubled), (std::vector<int64_t>{12, 5}));
    dsl::Attrs axis0;
    axis0.set("axis", int64_t(0));
    const dsl::Layer target =
        registry().build("concat", "target", {test::i64_constant("nc", {1, 8}), doubled}, axis0);
    EXPECT_EQ(values(target), (std::vector<int64_t>{1, 8, 12, 5}));
    // Broadcasting over ranks: a scalar against a list.
    Halide::Buffer<int64_t> scalar = Halide::Buffer<int64_t>::make_scalar();
    scalar() = 3;
    const dsl::Layer three = dsl::LayerRegistry::constant("three", scalar);
    EXPECT_EQ(values(registry().build("sub", "less", {target, three}, {})),
              (std::vector<int64_t>{-2, 5, 9, 2}));
    // Floats, a 2x2 against a row of 2: (0.1, 2.5) scales each row.
    Halide::Buffer<float> m(2, 2), row(2);
    m(0, 0) = 1.5f, m(1, 0) = -3.25f, m(0, 1) = 0.3f, m(1, 1) = 7.0f;
    row(0) = 0.1f, row(1) = 2.5f;
    const dsl::Layer product = registry().build(
        "mul", "product",
        {dsl::LayerRegistry::constant("m", m), dsl::LayerRegistry::constant("row", row)}, {});
    Halide::Buffer<float> got(dsl::constant_value(product).copy());
    EXPECT_EQ(got(0, 0), 1.5f * 0.1f);
    EXPECT_EQ(got(1, 0), -3.25f * 2.5f);
    EXPECT_EQ(got(0, 1), 0.3f * 0.1f);
    EXPECT_EQ(got(1, 1), 7.0f * 2.5f);
}

TEST(ConstantFolding, GatherPicksAlongAnAxisOfAMatrix) {
    Halide::Buffer<int64_t> m(3, 2); // 2 rows of 3, row-major: dim 0 is the last logical one
    for (int r = 0; r < 2; ++r)
        for (int c = 0; c < 3; ++c) m(c, r) = 10 * r + c;
    const dsl::Layer matrix = dsl::LayerRegistry::constant("m", m);
    EXPECT_EQ(dsl::to_string(matrix.output().shape), "2x3");
    dsl::Attrs axis1;
    axis1.set("axis", int64_t(1));
    const dsl::Layer cols =
        registry().build("gather", "cols", {matrix, test::i64_constant("i", {2, 0})}, axis1);
    EXPECT_EQ(dsl::to_string(cols.output().shape), "2x2");
    EXPECT_EQ(values(cols), (std::vector<int64_t>{2, 0, 12, 10}));
    EXPECT_THROW(registry().build("gather", "g", {matrix, test::i64_constant("far", {3})}, axis1),
                 dsl::LayerError);
    // Rows picked by a 2x1 index tensor along axis 0: 2x1x3.
    Halide::Buffer<int64_t> which(1, 2);
    which(0, 0) = 1, which(0, 1) = -2;
    const dsl::Layer rows = registry().build(
        "gather", "rows", {matrix, dsl::LayerRegistry::constant("which", which)}, {});
    EXPECT_EQ(dsl::to_string(rows.output().shape), "2x1x3");
    EXPECT_EQ(values(rows), (std::vector<int64_t>{10, 11, 12, 0, 1, 2}));
}

TEST(ConstantFolding, ReshapeTakesItsShapeFromAConstantAndRunsOnTheDevice) {
    for (const dsl::ElemType type : {dsl::ElemType::U8, dsl::ElemType::F16}) {
        const dsl::Layer in = dsl::Layer::input(test::activation("in", 16, 5, 6, type));
        const dsl::Layer shape = registry().build("shape", "shape", {in}, {});
        const dsl::Layer c =
            registry().build("gather", "c", {shape, test::i64_constant("one", {1})}, {});
        // [1, 16 / 2 = 8 (as 16 - 8), 12, -1]: 16 channels of 6x5 as 8 of 12x5.
        dsl::Attrs axis0;
        axis0.set("axis", int64_t(0));
        const dsl::Layer half =
            registry().build("sub", "half", {c, test::i64_constant("eight", {8})}, {});
        const dsl::Layer target = registry().build(
            "concat", "target",
            {test::i64_constant("n", {1}), half, test::i64_constant("hw", {12, -1})}, axis0);
        const dsl::Layer reshaped = registry().build("reshape", "reshaped", {in, target}, {});
        EXPECT_EQ(reshaped.op(), "reshape");
        EXPECT_EQ(dsl::to_string(reshaped.output().shape), "1x8x12x5");
        EXPECT_EQ(reshaped.inputs().size(), 1u) << "the shape is an attribute now";
        EXPECT_EQ(reshaped.attrs().get_ints("shape"), (std::vector<int64_t>{1, 8, 12, -1}));
        const dsl::Graph g("reshaped", {reshaped});
        EXPECT_EQ(g.layers().size(), 1u) << "no constant is left in the graph";
        for (const char *target_name : {"vpu27", "vpu20"}) {
            codegen::CheckOptions exact;
            exact.tolerance.f16_ulp = 0; // a copy: bit for bit
            const codegen::CheckResult r =
                codegen::check_against_reference(g, target::load_target(target_name), exact);
            EXPECT_TRUE(r.ok()) << target_name << "\n" << r.report();
        }
    }
}

TEST(ConstantFolding, ReshapeFollowsOnnxRules) {
    const dsl::Layer data = test::i64_constant("data", {1, 2, 3, 4, 5, 6});
    auto reshape = [&](const std::vector<int64_t> &shape) {
        dsl::Attrs a;
        a.set("shape", shape);
        return registry().build("reshape", "r", {data}, a);
    };
    EXPECT_EQ(dsl::to_string(reshape({2, -1}).output().shape), "2x3");
    EXPECT_EQ(dsl::to_string(reshape({0, 1}).output().shape), "6x1") << "0 copies extent 0";
    EXPECT_EQ(values(reshape({3, 2})), (std::vector<int64_t>{1, 2, 3, 4, 5, 6}));
    EXPECT_THROW(reshape({4, -1}), dsl::LayerError);
    EXPECT_THROW(reshape({-1, -1}), dsl::LayerError);
    // On the device a reshape changing the batch is a view of bytes in logical order, which
    // an NHWC tensor of several channels and pixels does not hold.
    const dsl::Layer in = dsl::Layer::input(test::activation("in", 16, 5, 6));
    dsl::Attrs flat;
    flat.set("shape", std::vector<int64_t>{1, -1});
    EXPECT_EQ(dsl::to_string(registry().build("reshape", "flat", {in}, flat).output().shape),
              "1x480");
    dsl::Attrs two;
    two.set("shape", std::vector<int64_t>{2, -1});
    EXPECT_THROW(registry().build("reshape", "two", {in}, two), dsl::LayerError);
}

TEST(ConstantFolding, CompileTimeOpsRefuseComputedInputsByName) {
    const dsl::Layer in = dsl::Layer::input(test::activation("in", 16, 5, 6));
    try {
        registry().build("gather", "g", {in, in}, {});
        ADD_FAILURE() << "no error";
    } catch (const dsl::AttrError &e) {
        EXPECT_STREQ(e.what(), "gather 'g': input 'indices' is layer 'in' (input); it must be a "
                               "constant, known at compile time");
    }
    try {
        registry().build("reshape", "r", {in, in}, {});
        ADD_FAILURE() << "no error";
    } catch (const dsl::AttrError &e) {
        EXPECT_STREQ(e.what(), "reshape 'r': input 'shape' is layer 'in' (input); it must be a "
                               "constant, known at compile time");
    }
    // A constant left in a graph for the device is an error naming it.
    const dsl::Layer i64 = test::i64_constant("dims", {1, 2});
    EXPECT_THROW(codegen::lower(dsl::Graph("g", {i64}), target::load_target("vpu27")),
                 codegen::LoweringError);
}

} // namespace
} // namespace vpuc
