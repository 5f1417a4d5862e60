// Reductions along axes (reduce, ONNX's Reduce* ops), argmax and argmin, hardmax and
// log_softmax: the CPU reference against numpy's semantics computed in double precision from
// the same fp16 inputs (random real values, and exact small fractions whose results are exact
// before the output's rounding), on odd shapes and several axis sets; ties of argmax, argmin
// and hardmax resolved to the first or the last index as asked; the device against the
// reference on both targets.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "algorithms/reference.h"
#include "algorithms/registry.h"
#include "codegen/check.h"
#include "lowering_fixtures.h"
#include "vpu_target/target.h"

namespace vpuc {
namespace {

using Halide::float16_t;

// A graph input of `shape` (rank 3 or 4, batch 1), fp16 in logical order.
dsl::Layer input_of(const std::vector<int64_t> &shape, dsl::ElemType type = dsl::ElemType::F16) {
    dsl::TensorDesc t;
    t.name = "x";
    t.shape = dsl::Shape(shape);
    t.type = type;
    if (type == dsl::ElemType::U8) t.quant = dsl::Quant::per_tensor(0.05f, 120);
    t.order = dsl::DimsOrder::identity(int(shape.size()));
    return dsl::Layer::input(t);
}

// The dimension of the reference's buffers (c, x, y) holding logical axis `axis` (>= 1) of a
// tensor of rank 3 ([N, C, L]: C, W) or 4 ([N, C, H, W]).
int buffer_dim(int rank, int64_t axis) {
    if (axis < 0) axis += rank;
    if (axis == 1) return 0;
    return rank == 3 || axis == 3 ? 1 : 2;
}

// Random reals uniform in [lo, hi), rounded to fp16.
Halide::Buffer<float16_t> random_values(const dsl::Layer &x, double lo, double hi, uint32_t seed) {
    Halide::Buffer<float16_t> b(algorithms::make_buffer(x.output()));
    std::mt19937 rng(seed);
    std::uniform_real_distribution<double> real(lo, hi);
    b.for_each_value([&](float16_t &v) { v = float16_t(real(rng)); });
    return b;
}

// Multiples of 1/16 in [-2, 2]: their sums, sums of squares and absolute values are exact in
// float32.
Halide::Buffer<float16_t> fractions(const dsl::Layer &x, uint32_t seed) {
    Halide::Buffer<float16_t> b(algorithms::make_buffer(x.output()));
    std::mt19937 rng(seed);
    b.for_each_value([&](float16_t &v) { v = float16_t(float(int(rng() % 65) - 32) / 16); });
    return b;
}

// The elements of `in` along the buffer dimensions `dims` through point `at`.
std::vector<double> line_through(const Halide::Buffer<float16_t> &in, std::vector<int> at,
                                 const std::vector<int> &dims) {
    std::vector<double> values;
    std::function<void(size_t)> walk = [&](size_t k) {
        if (k == dims.size()) {
            values.push_back(double(in(at[0], at[1], at[2])));
            return;
        }
        for (int i = 0; i < in.dim(dims[k]).extent(); ++i) {
            at[size_t(dims[k])] = i;
            walk(k + 1);
        }
    };
    walk(0);
    return values;
}

// numpy's reduction of `kind` of `v`.
double reduction(const std::string &kind, const std::vector<double> &v) {
    double sum = 0, abs = 0, squares = 0, prod = 1, top = -INFINITY, bottom = INFINITY;
    for (double e : v) {
        sum += e;
        abs += std::fabs(e);
        squares += e * e;
        prod *= e;
        top = std::max(top, e);
        bottom = std::min(bottom, e);
    }
    double exps = 0;
    for (double e : v) exps += std::exp(e - top);
    if (kind == "sum") return sum;
    if (kind == "mean") return sum / double(v.size());
    if (kind == "max") return top;
    if (kind == "min") return bottom;
    if (kind == "prod") return prod;
    if (kind == "l1") return abs;
    if (kind == "l2") return std::sqrt(squares);
    if (kind == "log_sum") return std::log(sum);
    if (kind == "log_sum_exp") return top + std::log(exps);
    return squares;
}

// One fp16 unit in the last place at the magnitude of `v` (subnormals: 2^-24).
double fp16_ulp(double v) {
    const double magnitude = std::fabs(v);
    if (magnitude < std::ldexp(1.0, -14)) return std::ldexp(1.0, -24);
    return std::ldexp(1.0, int(std::floor(std::log2(magnitude))) - 10);
}

dsl::Layer reduce(const dsl::Layer &x, const std::string &kind, const std::vector<int64_t> &axes) {
    dsl::Attrs a;
    a.set("kind", kind).set("axes", axes);
    return algorithms::layer_registry().build("reduce", "r", {x}, a);
}

const std::vector<std::string> kKinds = {"sum", "mean", "max",     "min",         "prod",
                                         "l1",  "l2",   "log_sum", "log_sum_exp", "sum_square"};

struct ReduceCase {
    std::vector<int64_t> shape, axes;
};

// Every kind over each axis set: the output keeps the reduced axes with extent 1, and each
// element is within one fp16 ulp (plus float32's rounding of the terms' magnitude) of the
// double-precision result of the same fp16 inputs.
TEST(Reduce, EveryKindMatchesNumpyInDoublePrecision) {
    const std::vector<ReduceCase> cases = {{{1, 16, 3, 7}, {3, 1}},
                                           {{1, 5, 9, 11}, {2, 3}},
                                           {{1, 5, 3, 7}, {1, 2, 3}},
                                           {{1, 5, 3, 7}, {-1}},
                                           {{1, 13, 17}, {-2, 2}}};
    for (const std::string &kind : kKinds)
        for (const ReduceCase &c : cases) {
            const dsl::Layer x = input_of(c.shape);
            const dsl::Layer r = reduce(x, kind, c.axes);
            const int rank = int(c.shape.size());
            std::vector<int64_t> kept = c.shape;
            std::vector<int> dims;
            for (int64_t axis : c.axes) {
                kept[size_t(axis < 0 ? axis + rank : axis)] = 1;
                dims.push_back(buffer_dim(rank, axis));
            }
            const std::string where = kind + " of " + dsl::to_string(x.output().shape) + " over " +
                                      dsl::to_string(dsl::AttrValue(c.axes));
            ASSERT_EQ(r.output().shape.raw(), kept) << where;
            // log_sum of positive values; prod of values near 1, so that it stays in range.
            const double lo = kind == "log_sum" ? 0.05 : kind == "prod" ? 0.5 : -4;
            const double hi = kind == "prod" ? 1.5 : 4;
            const Halide::Buffer<float16_t> in = random_values(x, lo, hi, uint32_t(rank));
            const Halide::Buffer<float16_t> out(algorithms::run_reference(r, {in}));
            int failures = 0;
            out.for_each_element([&](int c0, int x0, int y0) {
                const std::vector<double> v = line_through(in, {c0, x0, y0}, dims);
                const double want = reduction(kind, v);
                double magnitude = 0;
                for (double e : v) magnitude += std::fabs(e) * std::max(1.0, std::fabs(e));
                const double got = double(out(c0, x0, y0));
                if (!(std::fabs(got - want) <= fp16_ulp(want) + 1e-6 * magnitude) && failures++ < 3)
                    ADD_FAILURE() << where << " at " << c0 << "," << x0 << "," << y0 << ": " << got
                                  << ", exactly " << want;
            });
        }
}

// Sums of multiples of 1/16 are exact in float32: the result is the exact value rounded once
// to fp16.
TEST(Reduce, ExactFractionsAreRoundedOnce) {
    const dsl::Layer x = input_of({1, 16, 5, 9});
    const Halide::Buffer<float16_t> in = fractions(x, 7);
    for (const std::string kind : {"sum", "max", "min", "l1", "sum_square"})
        for (const std::vector<int64_t> &axes : {std::vector<int64_t>{1}, {3}, {1, 2, 3}, {1, 3}}) {
            const Halide::Buffer<float16_t> out(
                algorithms::run_reference(reduce(x, kind, axes), {in}));
            std::vector<int> dims;
            for (int64_t axis : axes) dims.push_back(buffer_dim(4, axis));
            out.for_each_element([&](int c0, int x0, int y0) {
                const double want = reduction(kind, line_through(in, {c0, x0, y0}, dims));
                EXPECT_EQ(float(out(c0, x0, y0)), float(float16_t(float(want))))
                    << kind << " over " << dsl::to_string(dsl::AttrValue(axes)) << " at " << c0
                    << "," << x0 << "," << y0;
            });
        }
}

// log_sum_exp subtracts the maximum: large values do not overflow, rows of -inf give -inf.
TEST(Reduce, LogSumExpOfLargeAndInfiniteValues) {
    const dsl::Layer x = input_of({1, 3, 5});
    Halide::Buffer<float16_t> in(algorithms::make_buffer(x.output()));
    for (int i = 0; i < 5; ++i) {
        in(0, i) = float16_t(60000.0f);
        in(1, i) = float16_t(-INFINITY);
        in(2, i) = float16_t(float(i) - 30000.0f);
    }
    const Halide::Buffer<float16_t> out(
        algorithms::run_reference(reduce(x, "log_sum_exp", {2}), {in}));
    EXPECT_EQ(float(out(0, 0)), float(float16_t(60000.0 + std::log(5.0))));
    EXPECT_EQ(float(out(1, 0)), -INFINITY);
    double exps = 0;
    for (int i = 0; i < 5; ++i) exps += std::exp(double(float(in(2, i))) - double(float(in(2, 4))));
    EXPECT_EQ(float(out(2, 0)), float(float16_t(double(float(in(2, 4))) + std::log(exps))));
}

TEST(Reduce, ErrorsNameTheLayer) {
    const dsl::Layer x = input_of({2, 5, 7});
    auto message = [](const std::function<void()> &f) -> std::string {
        try {
            f();
        } catch (const std::exception &e) {
            return e.what();
        }
        return "";
    };
    EXPECT_NE(message([&] { reduce(x, "sum", {0}); }).find("reduce 'r': axis 0 of 'x'"),
              std::string::npos);
    EXPECT_NE(message([&] {
                  reduce(x, "sum", {1, -2});
              }).find("axis -2 is given twice"),
              std::string::npos);
    EXPECT_NE(message([&] { reduce(x, "median", {1}); }).find("must be one of sum"),
              std::string::npos);
    EXPECT_NE(message([&] {
                  reduce(input_of({1, 5, 7}, dsl::ElemType::U8), "mean", {1});
              }).find("reduce mean takes f16 or f32 (max and min take int8 too)"),
              std::string::npos);
    // A 5-D tensor's D and H share the device's H: one of them alone only where the other is 1.
    EXPECT_NE(message([&] {
                  reduce(input_of({1, 2, 3, 4, 5}), "sum", {2});
              }).find("shares the device's H with other axes above 1"),
              std::string::npos);
    EXPECT_EQ(reduce(input_of({1, 2, 3, 1, 5}), "sum", {2}).output().shape.raw(),
              (std::vector<int64_t>{1, 2, 1, 1, 5}));
}

// Values with many ties: multiples of 1/2 in [-2, 2].
Halide::Buffer<float16_t> tied_values(const dsl::Layer &x, uint32_t seed) {
    Halide::Buffer<float16_t> b(algorithms::make_buffer(x.output()));
    std::mt19937 rng(seed);
    b.for_each_value([&](float16_t &v) { v = float16_t(float(int(rng() % 9) - 4) / 2); });
    return b;
}

dsl::Layer arg(const std::string &op, const dsl::Layer &x, int64_t axis, int64_t last) {
    dsl::Attrs a;
    a.set("axis", axis).set("select_last_index", last);
    return algorithms::layer_registry().build(op, op, {x}, a);
}

// The index of the first (or last) extreme element along each line, as numpy's argmax of the
// line (or of the reversed line) gives it.
TEST(ArgMax, TiesGoToTheFirstOrTheLastIndex) {
    for (const std::vector<int64_t> &shape : {std::vector<int64_t>{1, 16, 5, 9}, {1, 7, 13}})
        for (const std::string op : {"argmax", "argmin"})
            for (int64_t axis = 1; axis < int64_t(shape.size()); ++axis)
                for (int64_t last : {0, 1}) {
                    const dsl::Layer x = input_of(shape);
                    const dsl::Layer a = arg(op, x, axis, last);
                    EXPECT_EQ(a.output().type, dsl::ElemType::I32);
                    const int dim = buffer_dim(int(shape.size()), axis);
                    const Halide::Buffer<float16_t> in = tied_values(x, uint32_t(axis + last));
                    const Halide::Buffer<int32_t> out(algorithms::run_reference(a, {in}));
                    EXPECT_EQ(out.dim(dim).extent(), 1);
                    out.for_each_element([&](int c0, int x0, int y0) {
                        const std::vector<double> v = line_through(in, {c0, x0, y0}, {dim});
                        int best = 0;
                        for (int i = 1; i < int(v.size()); ++i) {
                            const bool better = op == "argmax" ? v[size_t(i)] > v[size_t(best)]
                                                               : v[size_t(i)] < v[size_t(best)];
                            if (better || (last && v[size_t(i)] == v[size_t(best)])) best = i;
                        }
                        EXPECT_EQ(out(c0, x0, y0), best)
                            << op << " axis " << axis << " last " << last << " at " << c0 << ","
                            << x0 << "," << y0;
                    });
                }
}

// One 1 per line, at the first largest element.
TEST(Hardmax, OneAtTheFirstLargestElement) {
    const std::vector<int64_t> shape = {1, 7, 5, 13};
    for (int64_t axis = 1; axis < 4; ++axis) {
        const dsl::Layer x = input_of(shape);
        const dsl::Layer h =
            algorithms::layer_registry().build("hardmax", "h", {x}, dsl::Attrs().set("axis", axis));
        const int dim = buffer_dim(4, axis);
        const Halide::Buffer<float16_t> in = tied_values(x, uint32_t(axis));
        const Halide::Buffer<float16_t> out(algorithms::run_reference(h, {in}));
        out.for_each_element([&](int c0, int x0, int y0) {
            const int at[3] = {c0, x0, y0};
            const std::vector<double> v = line_through(in, {c0, x0, y0}, {dim});
            const int first = int(std::max_element(v.begin(), v.end()) - v.begin());
            EXPECT_EQ(float(out(c0, x0, y0)), at[dim] == first ? 1.0f : 0.0f)
                << "axis " << axis << " at " << c0 << "," << x0 << "," << y0;
        });
    }
}

// x - max - log(sum(exp(x - max))) within one fp16 ulp (and float32's rounding of log near 1)
// of double precision, along each axis, large values included.
TEST(LogSoftmax, MatchesDoublePrecisionAlongEveryAxis) {
    const std::vector<int64_t> shape = {1, 16, 3, 11};
    for (int64_t axis : {1, 2, 3, -1}) {
        const dsl::Layer x = input_of(shape);
        const dsl::Layer l = algorithms::layer_registry().build("log_softmax", "l", {x},
                                                                dsl::Attrs().set("axis", axis));
        const int dim = buffer_dim(4, axis);
        Halide::Buffer<float16_t> in = random_values(x, -8, 8, uint32_t(axis + 8));
        in(3, 4, 1) = float16_t(30000.0f);
        const Halide::Buffer<float16_t> out(algorithms::run_reference(l, {in}));
        int failures = 0;
        out.for_each_element([&](int c0, int x0, int y0) {
            const int at[3] = {c0, x0, y0};
            const std::vector<double> v = line_through(in, {c0, x0, y0}, {dim});
            const double want =
                double(in(c0, x0, y0)) - reduction("log_sum_exp", v); // x - logsumexp(x)
            const double got = double(out(c0, x0, y0));
            if (!(std::fabs(got - want) <= fp16_ulp(want) + 1e-6) && failures++ < 3)
                ADD_FAILURE() << "axis " << axis << " at " << at[0] << "," << at[1] << "," << at[2]
                              << ": " << got << ", exactly " << want;
        });
    }
    EXPECT_THROW(algorithms::layer_registry().build("log_softmax", "l",
                                                    {input_of({1, 5, 7}, dsl::ElemType::U8)}, {}),
                 dsl::LayerError);
}

// The device computes what the reference does, on both targets: reductions over C, over H and
// W (f16 and u8), argmax with ties, hardmax and log_softmax.
TEST(Reduce, TheDeviceMatchesTheReferenceOnEveryTarget) {
    auto &registry = algorithms::layer_registry();
    const dsl::Layer f16 = dsl::Layer::input(test::activation("x", 21, 9, 6, dsl::ElemType::F16));
    const dsl::Layer u8 = dsl::Layer::input(test::activation("x", 21, 9, 6, dsl::ElemType::U8));
    const std::vector<dsl::Layer> layers = {
        reduce(f16, "mean", {1}),
        reduce(f16, "l2", {2, 3}),
        reduce(u8, "max", {2, 3}),
        reduce(u8, "min", {1}),
        arg("argmax", f16, 1, 1),
        arg("argmin", u8, 3, 0),
        registry.build("hardmax", "h", {f16}, dsl::Attrs().set("axis", int64_t(1))),
        registry.build("log_softmax", "l", {f16}, dsl::Attrs().set("axis", int64_t(1)))};
    for (size_t i = 0; i < layers.size(); ++i)
        for (const char *target : {"vpu27", "vpu20"}) {
            const dsl::Layer &layer = layers[i];
            const dsl::Graph g("g", {layer});
            codegen::CheckOptions options;
            if (layer.inputs().at(0).output().type == dsl::ElemType::F16)
                options.inputs = {tied_values(layer.inputs().at(0), 5)};
            const codegen::CheckResult r =
                codegen::check_against_reference(g, target::load_target(target), options);
            EXPECT_TRUE(r.ok()) << "layer " << i << " (" << layer.op() << ") on " << target << "\n"
                                << r.report();
        }
}

} // namespace
} // namespace vpuc
