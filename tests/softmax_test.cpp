// Softmax on fp16 against a double-precision computation from the same fp16 inputs, compiled
// and simulated on both bundled targets and in the CPU reference: random rows, rows of large
// values (exp of them overflows float32 unless the row's maximum is subtracted first), rows of
// large negative values (whose exps underflow to 0 without it), and one large value among small
// ones; odd row lengths, along the device's W and C.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "algorithms/layers.h"
#include "algorithms/reference.h"
#include "codegen/check.h"
#include "vpu_target/target.h"

namespace vpuc {
namespace {

using Halide::float16_t;

// A graph input [1, rows, columns], fp16, row-major: device C = rows, W = columns.
dsl::Layer matrix_input(int64_t rows, int64_t columns) {
    dsl::TensorDesc t;
    t.name = "x";
    t.shape = dsl::Shape({1, rows, columns});
    t.type = dsl::ElemType::F16;
    t.order = dsl::DimsOrder::identity(3);
    return dsl::Layer::input(t);
}

// Values for `lines` lines of `length` elements, each line of a kind in turn: random in
// [-8, 8), around +-30000 or +60000 (fp16 steps of 16 and 32 there), or one large value among
// small ones. Rounded to fp16: the exact softmax is computed from these.
std::vector<std::vector<double>> lines_of_values(int64_t lines, int64_t length, uint32_t seed) {
    std::mt19937 rng(seed);
    auto uniform = [&](double lo, double hi) {
        return std::uniform_real_distribution<double>(lo, hi)(rng);
    };
    const double bases[] = {1000.0, 30000.0, -30000.0, 60000.0};
    std::vector<std::vector<double>> values(size_t(lines),
                                            std::vector<double>(size_t(length), 0.0));
    for (int64_t l = 0; l < lines; ++l) {
        const int kind = int(l % 4);
        for (int64_t i = 0; i < length; ++i) {
            double v = uniform(-8, 8);
            if (kind == 1) v = bases[size_t((l / 4) % 4)] + uniform(-300, 300);
            if (kind == 2) v = bases[size_t((l / 4) % 4)] * (i == length / 2 ? 1.0 : 0.0) + v;
            if (kind == 3) v = -30000.0 + uniform(-50, 50);
            values[size_t(l)][size_t(i)] = double(float(float16_t(v)));
        }
    }
    return values;
}

// exp(x - max) / sum(exp(x - max)) in double precision.
std::vector<double> exact_softmax(const std::vector<double> &x) {
    double top = -INFINITY, sum = 0;
    for (double v : x) top = std::max(top, v);
    std::vector<double> y;
    for (double v : x) y.push_back(std::exp(v - top));
    for (double v : y) sum += v;
    for (double &v : y) v /= sum;
    return y;
}

// One fp16 unit in the last place at the magnitude of `v` (subnormals: 2^-24).
double fp16_ulp(double v) {
    const double magnitude = std::fabs(v);
    if (magnitude < std::ldexp(1.0, -14)) return std::ldexp(1.0, -24);
    return std::ldexp(1.0, int(std::floor(std::log2(magnitude))) - 10);
}

struct Case {
    int64_t rows, columns;
    bool along_columns; // softmax along axis 2 (device W), else along axis 1 (device C)
};

class SoftmaxAccuracy : public ::testing::TestWithParam<Case> {};

// Every output element within one fp16 ulp of the exact softmax of the fp16 inputs, in the
// simulator and in the CPU reference.
TEST_P(SoftmaxAccuracy, WithinOneUlpOfDoublePrecision) {
    const Case c = GetParam();
    const dsl::Layer x = matrix_input(c.rows, c.columns);
    const dsl::Layer y = algorithms::softmax("y", x, dsl::Dim(c.along_columns ? 2 : 1));
    const dsl::Graph graph("softmax", {y});
    const int64_t lines = c.along_columns ? c.rows : c.columns;
    const int64_t length = c.along_columns ? c.columns : c.rows;
    const auto values = lines_of_values(lines, length, uint32_t(c.rows * 1000 + c.columns));
    // Buffer dims (c = row, x = column).
    auto at = [&](int64_t line, int64_t i) {
        return c.along_columns ? std::vector<int>{int(line), int(i)}
                               : std::vector<int>{int(i), int(line)};
    };
    Halide::Buffer<float16_t> input(algorithms::make_buffer(x.output()));
    for (int64_t l = 0; l < lines; ++l)
        for (int64_t i = 0; i < length; ++i) {
            const std::vector<int> p = at(l, i);
            input(p[0], p[1], 0) = float16_t(values[size_t(l)][size_t(i)]);
        }
    auto expect_exact = [&](const Halide::Buffer<> &result, const std::string &who) {
        const Halide::Buffer<float16_t> out(result);
        int64_t failures = 0;
        for (int64_t l = 0; l < lines; ++l) {
            const std::vector<double> want = exact_softmax(values[size_t(l)]);
            for (int64_t i = 0; i < length; ++i) {
                const std::vector<int> p = at(l, i);
                const double got = double(float(out(p[0], p[1], 0)));
                const double error = std::fabs(got - want[size_t(i)]);
                if (!(error <= fp16_ulp(want[size_t(i)])) && failures++ < 5)
                    ADD_FAILURE() << who << ": line " << l << ", element " << i << ": " << got
                                  << ", exactly " << want[size_t(i)] << " (input "
                                  << values[size_t(l)][size_t(i)] << ")";
            }
        }
        EXPECT_EQ(failures, 0) << who;
    };
    expect_exact(algorithms::run_reference(graph, {input}).at(0), "reference");
    for (const char *name : {"vpu27", "vpu20"}) {
        codegen::CheckOptions options;
        options.inputs = {input};
        const codegen::CheckResult r =
            codegen::check_against_reference(graph, target::load_target(name), options);
        EXPECT_TRUE(r.ok()) << name << ": " << r.report();
        ASSERT_EQ(r.run.outputs.size(), 1u);
        expect_exact(algorithms::from_memory_order(y.output(), r.run.outputs[0]), name);
    }
}

INSTANTIATE_TEST_SUITE_P(OddLengths, SoftmaxAccuracy,
                         ::testing::Values(Case{16, 1, true}, Case{12, 7, true}, Case{9, 33, true},
                                           Case{8, 255, true}, Case{13, 12, false},
                                           Case{37, 5, false}),
                         [](const auto &info) {
                             return std::to_string(info.param.rows) + "x" +
                                    std::to_string(info.param.columns) +
                                    (info.param.along_columns ? "_along_w" : "_along_c");
                         });

// ONNX's test_softmax_large_number: [[0, 1, 2, 3], [10000, 10001, 10002, 10003]]. In fp16,
// 10001 to 10003 round to 10000 (steps of 8 above 8192), so the second row is four equal values
// and its softmax 0.25 each: what the input's precision allows, not an error of the softmax.
TEST(Softmax, LargeNumbersRoundInTheInputNotInTheSoftmax) {
    EXPECT_EQ(float(float16_t(10003.0)), 10000.0f);
    const dsl::Layer x = matrix_input(2, 4);
    const dsl::Layer y = algorithms::softmax("y", x, dsl::Dim(2));
    Halide::Buffer<float16_t> input(algorithms::make_buffer(x.output()));
    for (int r = 0; r < 2; ++r)
        for (int i = 0; i < 4; ++i) input(r, i, 0) = float16_t(10000.0 * r + i);
    const Halide::Buffer<float16_t> out(
        algorithms::run_reference(dsl::Graph("softmax", {y}), {input}).at(0));
    const std::vector<double> first = exact_softmax({0, 1, 2, 3});
    for (int i = 0; i < 4; ++i) {
        EXPECT_NEAR(double(float(out(0, i, 0))), first[size_t(i)], fp16_ulp(first[size_t(i)]));
        EXPECT_EQ(float(out(1, i, 0)), 0.25f);
    }
}

} // namespace
} // namespace vpuc
