// Bounds inference: the input region a layer reads for an output region, from Halide.
#include <gtest/gtest.h>

#include "codegen/bounds.h"
#include "codegen/lower.h"

using namespace vpuc;
using codegen::Region;

namespace {

dsl::TensorDesc activation(const std::string &name, int64_t c, int64_t w, int64_t h) {
    dsl::TensorDesc t;
    t.name = name;
    t.shape = dsl::Shape({1, c, h, w});
    t.type = dsl::ElemType::U8;
    t.order = dsl::DimsOrder::NHWC();
    return t;
}

Region region(int64_t c0, int64_t c1, int64_t x0, int64_t x1, int64_t y0, int64_t y1) {
    Region r;
    r.dims = {codegen::Interval{c0, c1}, codegen::Interval{x0, x1}, codegen::Interval{y0, y1}};
    return r;
}

// A 3x3 sum over every input channel with zero padding and stride `s`, written as plain Halide.
dsl::Layer window_sum(const dsl::Layer &in, int s, int64_t out_w, int64_t out_h) {
    const auto shape = in.output().shape;
    const int W = int(shape[dsl::dims::W]), H = int(shape[dsl::dims::H]),
              C = int(shape[dsl::dims::C]);
    return dsl::Layer::make(
        "window_sum", activation("sum", 8, out_w, out_h), {in},
        [=](const std::vector<Halide::Func> &inputs) {
            const auto &v = dsl::act_vars();
            Halide::Func padded("padded"), sum("sum");
            Halide::Expr inside = v.x >= 0 && v.x < W && v.y >= 0 && v.y < H;
            padded(v.c, v.x, v.y) =
                Halide::select(inside,
                               Halide::cast<int32_t>(inputs[0](v.c, Halide::clamp(v.x, 0, W - 1),
                                                               Halide::clamp(v.y, 0, H - 1))),
                               0);
            Halide::RDom r(0, 3, 0, 3, 0, C);
            sum(v.c, v.x, v.y) = 0;
            sum(v.c, v.x, v.y) += padded(r.z, v.x * s + r.x - 1, v.y * s + r.y - 1);
            return sum;
        });
}

TEST(Bounds, ConvHaloIsClampedToTheInput) {
    dsl::Layer in = dsl::Layer::input(activation("in", 16, 16, 16));
    dsl::Layer conv = window_sum(in, 1, 16, 16);
    auto regions = codegen::input_regions(conv, region(0, 8, 0, 16, 8, 12));
    ASSERT_EQ(regions.size(), 1u);
    EXPECT_EQ(regions[0].to_string(), region(0, 16, 0, 16, 7, 13).to_string());
    regions = codegen::input_regions(conv, region(0, 8, 4, 8, 0, 4));
    EXPECT_EQ(regions[0].to_string(), region(0, 16, 3, 9, 0, 5).to_string());
}

// One InputBounds answers any number of regions, each on its own.
TEST(Bounds, InputBoundsAnswersManyRegions) {
    dsl::Layer in = dsl::Layer::input(activation("in", 16, 32, 32));
    dsl::Layer conv = window_sum(in, 2, 16, 16);
    const codegen::InputBounds bounds(conv);
    EXPECT_EQ(bounds(region(0, 8, 4, 8, 8, 16))[0].to_string(),
              region(0, 16, 7, 16, 15, 32).to_string());
    EXPECT_EQ(bounds(region(0, 8, 0, 4, 0, 2))[0].to_string(),
              region(0, 16, 0, 8, 0, 4).to_string());
    for (int64_t y = 0; y < 16; y += 5)
        EXPECT_EQ(bounds(region(0, 16, 0, 16, y, y + 3))[0].to_string(),
                  codegen::input_regions(conv, region(0, 16, 0, 16, y, y + 3))[0].to_string());
}

TEST(Bounds, StrideScalesTheRegion) {
    dsl::Layer in = dsl::Layer::input(activation("in", 16, 32, 32));
    dsl::Layer conv = window_sum(in, 2, 16, 16);
    auto regions = codegen::input_regions(conv, region(0, 8, 4, 8, 8, 16));
    EXPECT_EQ(regions[0].to_string(), region(0, 16, 7, 16, 15, 32).to_string());
}

TEST(Bounds, ElementwiseReadsTheSameRegionOfEachInput) {
    dsl::Layer a = dsl::Layer::input(activation("a", 32, 8, 8));
    dsl::Layer b = dsl::Layer::input(activation("b", 32, 8, 8));
    dsl::Layer add = dsl::Layer::make(
        "add", activation("add", 32, 8, 8), {a, b}, [](const std::vector<Halide::Func> &in) {
            const auto &v = dsl::act_vars();
            Halide::Func f("add");
            f(v.c, v.x, v.y) = in[0](v.c, v.x, v.y) + in[1](v.c, v.x, v.y);
            return f;
        });
    auto regions = codegen::input_regions(add, region(16, 32, 2, 5, 0, 8));
    ASSERT_EQ(regions.size(), 2u);
    for (const auto &r : regions) EXPECT_EQ(r.to_string(), region(16, 32, 2, 5, 0, 8).to_string());
}

// The message of the error input_regions throws for `layer`, or "" if it throws none.
std::string bounds_error(const dsl::Layer &layer, const Region &output) {
    try {
        codegen::input_regions(layer, output);
    } catch (const codegen::LoweringError &e) {
        return e.what();
    }
    return "";
}

const std::string kBoundaryAdvice =
    "; read the input through a boundary condition (Halide::BoundaryConditions::repeat_edge or "
    "constant_exterior, or clamp the coordinates), or declare an output that reads only inside "
    "the input";

TEST(Bounds, GatherThroughAByteIsBoundedByItsType) {
    // in(c, in(c, x, y), y): the index is a u8 value, so Halide bounds it by [0, 255], past the
    // row of 8; clamped, the read stays inside and covers the whole row.
    dsl::Layer in = dsl::Layer::input(activation("in", 16, 8, 8));
    auto gather = [&](bool clamped) {
        return dsl::Layer::make("gather", activation("gather", 16, 8, 8), {in},
                                [clamped](const std::vector<Halide::Func> &inputs) {
                                    const auto &v = dsl::act_vars();
                                    Halide::Expr index =
                                        Halide::cast<int32_t>(inputs[0](v.c, v.x, v.y));
                                    if (clamped) index = Halide::clamp(index, 0, 7);
                                    Halide::Func f("gather");
                                    f(v.c, v.x, v.y) = inputs[0](v.c, index, v.y);
                                    return f;
                                });
    };
    EXPECT_EQ(bounds_error(gather(false), region(0, 16, 2, 3, 4, 5)),
              "layer 'gather': its output, x [0, 8), reads x [0, 256) of input 'in', which has "
              "x [0, 8)" +
                  kBoundaryAdvice);
    auto regions = codegen::input_regions(gather(true), region(0, 16, 2, 3, 4, 5));
    EXPECT_EQ(regions[0].to_string(), region(0, 16, 0, 8, 4, 5).to_string());
}

// A pointwise layer declared larger than its input reads past the input; so does a stencil
// without a boundary condition. Per task, such reads were clamped to the input, which left
// tasks past the input with nothing to read (an empty buffer) or a region short of the read.
TEST(Bounds, ReadsOutsideAnInputAreRefusedNamingLayerAndInput) {
    dsl::Layer in = dsl::Layer::input(activation("in", 32, 20, 20));
    auto pointwise = [&](const std::string &name, int64_t w, int64_t h, int dx) {
        return dsl::Layer::make(name, activation(name, 32, w, h), {in},
                                [dx](const std::vector<Halide::Func> &inputs) {
                                    const auto &v = dsl::act_vars();
                                    Halide::Func f("f");
                                    f(v.c, v.x, v.y) = inputs[0](v.c, v.x + dx, v.y);
                                    return f;
                                });
    };
    EXPECT_EQ(bounds_error(pointwise("larger", 40, 40, 0), region(0, 32, 20, 40, 0, 40)),
              "layer 'larger': its output, x [0, 40), reads x [0, 40) of input 'in', which has "
              "x [0, 20)" +
                  kBoundaryAdvice);
    EXPECT_EQ(bounds_error(pointwise("taller", 20, 21, 0), region(0, 32, 0, 20, 0, 1)),
              "layer 'taller': its output, y [0, 21), reads y [0, 21) of input 'in', which has "
              "y [0, 20)" +
                  kBoundaryAdvice);
    EXPECT_EQ(bounds_error(pointwise("shifted", 20, 20, -1), region(0, 32, 0, 20, 0, 20)),
              "layer 'shifted': its output, x [0, 20), reads x [-1, 19) of input 'in', which "
              "has x [0, 20)" +
                  kBoundaryAdvice);
    EXPECT_EQ(bounds_error(pointwise("inside", 19, 20, 1), region(0, 32, 0, 19, 0, 20)), "");
}

TEST(Bounds, UnboundedAccessIsReported) {
    dsl::TensorDesc floats = activation("in", 16, 8, 8);
    floats.type = dsl::ElemType::F32;
    dsl::Layer in = dsl::Layer::input(floats);
    dsl::Layer gather = dsl::Layer::make(
        "gather", activation("gather", 16, 8, 8), {in},
        [](const std::vector<Halide::Func> &inputs) {
            const auto &v = dsl::act_vars();
            Halide::Func f("gather");
            f(v.c, v.x, v.y) = inputs[0](v.c, Halide::cast<int32_t>(inputs[0](v.c, v.x, v.y)), v.y);
            return f;
        });
    try {
        codegen::input_regions(gather, region(0, 16, 0, 8, 0, 8));
        FAIL() << "expected an error";
    } catch (const codegen::LoweringError &e) {
        EXPECT_NE(std::string(e.what()).find("layer 'gather': bounds inference: the bound"),
                  std::string::npos)
            << e.what();
    }
}

} // namespace
