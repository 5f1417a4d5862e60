// The element-wise layers of algorithms/layers/unary_math.cpp (ONNX's Abs, Neg, Sqrt, Exp,
// trigonometry, Elu, Selu, Celu, Shrink, HardSwish, IsNaN, IsInf, Not, ...): the CPU reference
// against double-precision math on random real data and against values worked out by hand
// (Round's halves to even, Shrink, Celu, Selu's constants, NaN and infinities), the simulator
// against the reference on odd shapes and integer types, bad inputs and attributes as errors
// naming the layer, and the ONNX backend test data of the ops (Debian's libonnx-testdata).
#include <gtest/gtest.h>

#include <onnx/onnx_pb.h>

#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <random>

#include "algorithms/reference.h"
#include "algorithms/registry.h"
#include "codegen/check.h"
#include "dsl/constant_values.h"
#include "frontend/onnx_import.h"
#include "onnx_node_test.h"
#include "vpu_target/target.h"

using namespace vpuc;

namespace {

const dsl::LayerRegistry &registry() {
    return algorithms::layer_registry();
}

const float kNaN = std::numeric_limits<float>::quiet_NaN();
const float kInf = std::numeric_limits<float>::infinity();

dsl::Layer input(const std::vector<int64_t> &shape, dsl::ElemType type, dsl::Quant quant = {}) {
    dsl::TensorDesc t;
    t.name = "in";
    t.shape = dsl::Shape(shape);
    t.type = type;
    t.quant = std::move(quant);
    t.order =
        shape.size() == 4 ? dsl::DimsOrder::NCHW() : dsl::DimsOrder::identity(int(shape.size()));
    return dsl::Layer::input(t);
}

dsl::Layer build(const std::string &op, const dsl::Layer &in, const dsl::Attrs &attrs = {}) {
    return registry().build(op, op, {in}, attrs);
}

// The CPU reference of `op` on an input of type T holding `values` (elementwise: the buffer's
// order in is its order out), as doubles.
template <typename T>
std::vector<double> reference(const std::string &op, dsl::ElemType type,
                              const std::vector<T> &values, const dsl::Attrs &attrs = {},
                              const dsl::Quant &quant = {}) {
    const dsl::Layer in = input({int64_t(values.size())}, type, quant);
    const dsl::Layer layer = build(op, in, attrs);
    Halide::Buffer<> buffer = algorithms::make_buffer(in.output());
    EXPECT_EQ(buffer.number_of_elements(), values.size());
    std::copy(values.begin(), values.end(), static_cast<T *>(buffer.data()));
    const Halide::Buffer<> out = algorithms::run_reference(layer, {buffer});
    std::vector<double> result;
    const Halide::Type t = out.type();
    for (size_t i = 0; i < values.size(); ++i) {
        const void *p = static_cast<const uint8_t *>(out.data()) + i * size_t(t.bytes());
        if (t == Halide::Float(32))
            result.push_back(*static_cast<const float *>(p));
        else if (t == Halide::Int(32))
            result.push_back(*static_cast<const int32_t *>(p));
        else if (t == Halide::Int(8))
            result.push_back(*static_cast<const int8_t *>(p));
        else if (t == Halide::UInt(8))
            result.push_back(*static_cast<const uint8_t *>(p));
        else
            ADD_FAILURE() << "unexpected output type";
    }
    return result;
}

std::vector<double> reference_f32(const std::string &op, const std::vector<float> &values,
                                  const dsl::Attrs &attrs = {}) {
    return reference(op, dsl::ElemType::F32, values, attrs);
}

// Equal, NaN to NaN included.
void expect_values(const std::vector<double> &got, const std::vector<double> &want,
                   double tolerance = 0) {
    ASSERT_EQ(got.size(), want.size());
    for (size_t i = 0; i < got.size(); ++i) {
        if (std::isnan(want[i])) {
            EXPECT_TRUE(std::isnan(got[i])) << "element " << i << ": " << got[i];
            continue;
        }
        if (std::isinf(want[i])) {
            EXPECT_EQ(got[i], want[i]) << "element " << i;
            continue;
        }
        EXPECT_NEAR(got[i], want[i], tolerance) << "element " << i;
    }
}

void expect_matches_reference(const dsl::Layer &layer, const codegen::CheckOptions &options = {}) {
    for (const char *name : {"vpu27", "vpu20"}) {
        const codegen::CheckResult r = codegen::check_against_reference(
            dsl::Graph(layer.name(), {layer}), target::load_target(name), options);
        EXPECT_TRUE(r.ok()) << name << ": " << r.report();
    }
}

std::string build_error(const std::string &op, const dsl::Layer &in, const dsl::Attrs &attrs = {}) {
    try {
        registry().build(op, op + "_bad", {in}, attrs);
    } catch (const Error &e) {
        return e.what();
    }
    return "";
}

struct MathCase {
    std::string op;
    std::function<double(double)> want;
    float low, high; // the random inputs' range
    dsl::Attrs attrs;
};

// Every float op's reference, on random reals of its domain, against the same function in
// double precision: float32 math, so within a few float32 ulps.
TEST(UnaryMath, ReferenceMatchesDoublePrecisionOnRandomReals) {
    const double selu_alpha = 1.67326319217681884765625, selu_gamma = 1.05070102214813232421875;
    const std::vector<MathCase> cases = {
        {"abs", [](double x) { return std::fabs(x); }, -4, 4, {}},
        {"neg", [](double x) { return -x; }, -4, 4, {}},
        {"sign", [](double x) { return double((x > 0) - (x < 0)); }, -4, 4, {}},
        {"ceil", [](double x) { return std::ceil(x); }, -4, 4, {}},
        {"floor", [](double x) { return std::floor(x); }, -4, 4, {}},
        {"round", [](double x) { return std::nearbyint(x); }, -4, 4, {}},
        {"sqrt", [](double x) { return std::sqrt(x); }, 0, 100, {}},
        {"reciprocal", [](double x) { return 1 / x; }, 0.1f, 9, {}},
        {"exp", [](double x) { return std::exp(x); }, -10, 10, {}},
        {"log", [](double x) { return std::log(x); }, 0.01f, 100, {}},
        {"sin", [](double x) { return std::sin(x); }, -7, 7, {}},
        {"cos", [](double x) { return std::cos(x); }, -7, 7, {}},
        {"tan", [](double x) { return std::tan(x); }, -1.2f, 1.2f, {}},
        {"asin", [](double x) { return std::asin(x); }, -1, 1, {}},
        {"acos", [](double x) { return std::acos(x); }, -1, 1, {}},
        {"atan", [](double x) { return std::atan(x); }, -9, 9, {}},
        {"sinh", [](double x) { return std::sinh(x); }, -5, 5, {}},
        {"cosh", [](double x) { return std::cosh(x); }, -5, 5, {}},
        {"tanh", [](double x) { return std::tanh(x); }, -5, 5, {}},
        {"asinh", [](double x) { return std::asinh(x); }, -9, 9, {}},
        {"acosh", [](double x) { return std::acosh(x); }, 1, 20, {}},
        {"atanh", [](double x) { return std::atanh(x); }, -0.99f, 0.99f, {}},
        {"softplus", [](double x) { return std::log1p(std::exp(x)); }, -20, 20, {}},
        {"softsign", [](double x) { return x / (1 + std::fabs(x)); }, -9, 9, {}},
        {"elu", [](double x) { return x < 0 ? 0.7 * std::expm1(x) : x; }, -4, 4,
         dsl::Attrs().set("alpha", 0.7)},
        {"selu",
         [=](double x) { return selu_gamma * (x > 0 ? x : selu_alpha * std::expm1(x)); },
         -4,
         4,
         {}},
        {"celu",
         [](double x) { return std::max(0.0, x) + std::min(0.0, 1.5 * std::expm1(x / 1.5)); }, -4,
         4, dsl::Attrs().set("alpha", 1.5)},
        {"thresholded_relu", [](double x) { return x > 0.25 ? x : 0; }, -4, 4,
         dsl::Attrs().set("alpha", 0.25)},
        {"shrink", [](double x) { return x < -1.25  ? x + 0.5
                                         : x > 1.25 ? x - 0.5
                                                    : 0; }, -4, 4,
         dsl::Attrs().set("bias", 0.5).set("lambd", 1.25)},
        {"swish", [](double x) { return x / (1 + std::exp(-1.5 * x)); }, -20, 20,
         dsl::Attrs().set("beta", 1.5)},
        {"mish", [](double x) { return x * std::tanh(std::log1p(std::exp(x))); }, -20, 20, {}},
        {"hard_swish",
         [](double x) { return x * std::max(0.0, std::min(1.0, x / 6 + 0.5)); },
         -5,
         5,
         {}},
    };
    std::mt19937 rng(7);
    for (const MathCase &c : cases) {
        SCOPED_TRACE(c.op);
        std::uniform_real_distribution<float> real(c.low, c.high);
        std::vector<float> x(97);
        for (float &v : x) v = real(rng);
        const std::vector<double> got = reference_f32(c.op, x, c.attrs);
        for (size_t i = 0; i < x.size(); ++i) {
            const double want = c.want(double(x[i]));
            EXPECT_NEAR(got[i], want, 1e-6 + 4e-7 * std::fabs(want)) << "x = " << x[i];
        }
    }
}

TEST(UnaryMath, ExactValues) {
    // Halves round to even, as ONNX's Round (numpy's).
    expect_values(reference_f32("round", {-2.5f, -1.5f, -0.5f, 0.5f, 1.5f, 2.5f, 0.49f, 2.51f}),
                  {-2, -2, 0, 0, 2, 2, 0, 3});
    expect_values(reference_f32("ceil", {-1.5f, -0.25f, 0, 0.25f, 2}), {-1, 0, 0, 1, 2});
    expect_values(reference_f32("floor", {-1.5f, -0.25f, 0, 0.25f, 2}), {-2, -1, 0, 0, 2});
    expect_values(reference_f32("sign", {-3.5f, -0.0f, 0, 0.125f, kNaN}), {-1, 0, 0, 1, kNaN});
    expect_values(reference_f32("sqrt", {0, 0.25f, 6.25f, -1}), {0, 0.5, 2.5, kNaN});
    expect_values(reference_f32("reciprocal", {0.25f, -8, 0}), {4, -0.125, kInf});
    expect_values(reference_f32("log", {1, 0, -1}), {0, -kInf, kNaN});
    // ONNX's Shrink example: bias 1.5, lambd 1.5.
    expect_values(
        reference_f32("shrink", {-2, -1, 0, 1, 2}, dsl::Attrs().set("bias", 1.5).set("lambd", 1.5)),
        {-0.5, 0, 0, 0, 0.5});
    expect_values(reference_f32("shrink", {-0.75f, -0.5f, 0.5f, 0.75f}), {-0.75, 0, 0, 0.75});
    expect_values(
        reference_f32("thresholded_relu", {-1, 1, 2, 2.5f}, dsl::Attrs().set("alpha", 2.0)),
        {0, 0, 0, 2.5});
    expect_values(reference_f32("hard_swish", {-4, -3, 0, 1.5f, 3, 4.5f}),
                  {0, 0, 0, 1.125, 3, 4.5});
    // Celu of alpha 2 at -2: 2 * (e^-1 - 1); positives pass.
    expect_values(reference_f32("celu", {-2, 0, 0.5f}, dsl::Attrs().set("alpha", 2.0)),
                  {2 * (std::exp(-1.0) - 1), 0, 0.5}, 1e-6);
    // Selu's default constants (ONNX's, as float32).
    expect_values(
        reference_f32("selu", {1, -1, 0}),
        {1.0507010221481323, 1.0507010221481323 * 1.6732631921768188 * (std::exp(-1.0) - 1), 0},
        1e-6);
    expect_values(reference_f32("elu", {-1, 2}), {std::exp(-1.0) - 1, 2}, 1e-6);
    // No overflow for large x, no underflow to -inf for small.
    expect_values(reference_f32("softplus", {100, -100, 0}), {100, 0, std::log(2.0)}, 1e-6);
    expect_values(reference_f32("softsign", {-3, 1}), {-0.75, 0.5});
    // SiLU at 0 and far out; mish's softplus does not overflow at 100.
    expect_values(reference_f32("swish", {0, 100, -100}), {0, 100, 0});
    expect_values(reference_f32("mish", {0, 100, -100}), {0, 100, 0}, 1e-6);
}

// round_bf16: the nearest bfloat16 (8 significant bits), halves to even, in float32 and as a
// folded f32 constant; past the largest bfloat16 an infinity, NaN kept.
TEST(UnaryMath, RoundBf16RoundsHalvesToEven) {
    const float half = std::ldexp(1.0f, -8); // half a bfloat16 step at 1
    const std::vector<float> x = {1 + half,        1 + 3 * half, 1 + half + std::ldexp(1.0f, -20),
                                  -(1 + half),     0.1f,         0x1.ff0000p127f,
                                  0x1.fefffep127f, -kInf,        kNaN};
    const std::vector<double> want = {1,    1 + 4 * half, 1 + 2 * half, -1,  0.10009765625,
                                      kInf, 0x1.fep127,   -kInf,        kNaN};
    expect_values(reference_f32("round_bf16", x), want);
    const dsl::Layer c = dsl::LayerRegistry::constant(
        "c", dsl::const_buffer({dsl::ElemType::F32,
                                {int64_t(x.size())},
                                {},
                                std::vector<double>(x.begin(), x.end())}));
    const dsl::ConstValues folded = dsl::const_values(build("round_bf16", c));
    EXPECT_EQ(folded.type, dsl::ElemType::F32);
    expect_values(folded.reals, want);
}

TEST(UnaryMath, IsNanAndIsInfOfNanAndInfinities) {
    const std::vector<float> x = {kNaN, kInf, -kInf, 0, 1, -65504, 3e38f};
    expect_values(reference_f32("is_nan", x), {1, 0, 0, 0, 0, 0, 0});
    expect_values(reference_f32("is_inf", x), {0, 1, 1, 0, 0, 0, 0});
    expect_values(reference_f32("is_inf", x, dsl::Attrs().set("detect_negative", int64_t(0))),
                  {0, 1, 0, 0, 0, 0, 0});
    expect_values(reference_f32("is_inf", x, dsl::Attrs().set("detect_positive", int64_t(0))),
                  {0, 0, 1, 0, 0, 0, 0});
    EXPECT_EQ(build("is_nan", input({3}, dsl::ElemType::F16)).output().type, dsl::ElemType::U8);
    expect_values(reference<uint8_t>("not", dsl::ElemType::U8, {0, 1, 1, 0}), {1, 0, 0, 1});
}

// NaN results stay NaN in fp16 (not an infinity), on the device as in the reference.
TEST(UnaryMath, NanResultsInFp16) {
    const dsl::Layer in = input({2, 3, 7}, dsl::ElemType::F16);
    Halide::Buffer<> values = algorithms::make_buffer(in.output());
    const float pattern[] = {-1, -0.5f, 2, kNaN, 0, -kInf, 0.25f};
    int i = 0;
    Halide::Buffer<Halide::float16_t>(values).for_each_value(
        [&](Halide::float16_t &v) { v = Halide::float16_t(pattern[i++ % 7]); });
    codegen::CheckOptions options;
    options.inputs = {values};
    for (const char *op : {"sqrt", "log", "exp", "abs"}) {
        SCOPED_TRACE(op);
        const dsl::Layer layer = build(op, in);
        const codegen::CheckResult r = codegen::check_against_reference(
            dsl::Graph(op, {layer}), target::load_target("vpu27"), options);
        EXPECT_TRUE(r.ok()) << r.report();
        const Halide::Buffer<Halide::float16_t> out(algorithms::run_reference(layer, {values}));
        int element = 0;
        out.for_each_value([&](Halide::float16_t v) {
            const double x = pattern[element++ % 7], y = double(v);
            const double want = std::string(op) == "sqrt"  ? std::sqrt(x)
                                : std::string(op) == "log" ? std::log(x)
                                : std::string(op) == "exp" ? std::exp(x)
                                                           : std::fabs(x);
            if (std::isnan(want))
                EXPECT_TRUE(std::isnan(y)) << op << "(" << x << ") = " << y;
            else
                EXPECT_EQ(y, double(Halide::float16_t(want))) << op << "(" << x << ")";
        });
    }
}

// swish on every fp16 value: within a float32 rounding of x / (1 + e^-x) in double, rounded to
// fp16, for every finite one (no NaN test: x is a factor, so NaN gives NaN); +inf gives +inf,
// and -inf gives -inf (Halide's exp of +inf is no infinity), as docs/benchmarks.md says. The
// device gives the reference's bits.
TEST(UnaryMath, SwishOnEveryFp16Value) {
    const dsl::Layer in = input({256, 256}, dsl::ElemType::F16);
    Halide::Buffer<> values = algorithms::make_buffer(in.output());
    uint16_t bits = 0;
    Halide::Buffer<Halide::float16_t>(values).for_each_value(
        [&](Halide::float16_t &v) { v = Halide::float16_t::make_from_bits(bits++); });
    const dsl::Layer layer = build("swish", in);
    codegen::CheckOptions options;
    options.inputs = {values};
    const codegen::CheckResult r = codegen::check_against_reference(
        dsl::Graph("swish", {layer}), target::load_target("vpu27"), options);
    EXPECT_TRUE(r.ok()) << r.report();
    const Halide::Buffer<Halide::float16_t> x(values);
    const Halide::Buffer<Halide::float16_t> out(algorithms::run_reference(layer, {values}));
    int wrong = 0;
    for (int j = 0; j < 256; ++j)
        for (int i = 0; i < 256; ++i) {
            const double v = double(x(i, j)), y = double(out(i, j));
            if (std::isnan(v)) {
                wrong += !std::isnan(y);
                continue;
            }
            if (std::isinf(v)) {
                wrong += y != v;
                continue;
            }
            const double want = v / (1 + std::exp(-v));
            // The float32 result rounds to fp16: one fp16 ulp of the exact value at most.
            const double ulp = std::max(std::ldexp(1.0, -24), std::ldexp(std::fabs(want), -10));
            if (std::fabs(y - want) > ulp) {
                if (wrong < 5) ADD_FAILURE() << "swish(" << v << ") = " << y << ", want " << want;
                ++wrong;
            }
        }
    EXPECT_EQ(wrong, 0);
}

// On every one of the 65,536 fp16 values, `ops` on fp16 inputs give the result of the same op
// on the float32 value, rounded to fp16, and NaN for every NaN (float32 included); the SHAVE
// kernel gives the reference's bits on the device.
void expect_float32_results_rounded_on_every_fp16_value(const std::vector<const char *> &ops) {
    const dsl::Layer in16 = input({256, 256}, dsl::ElemType::F16);
    const dsl::Layer in32 = input({256, 256}, dsl::ElemType::F32);
    Halide::Buffer<> bits16 = algorithms::make_buffer(in16.output());
    Halide::Buffer<> values32 = algorithms::make_buffer(in32.output());
    uint16_t *h = static_cast<uint16_t *>(bits16.data());
    float *f = static_cast<float *>(values32.data());
    for (uint32_t i = 0; i < 65536; ++i) {
        h[i] = uint16_t(i);
        f[i] = float(Halide::float16_t::make_from_bits(uint16_t(i)));
    }
    for (const char *op : ops) {
        SCOPED_TRACE(op);
        const Halide::Buffer<> got_buffer = algorithms::run_reference(build(op, in16), {bits16});
        const Halide::Buffer<> want_buffer = algorithms::run_reference(build(op, in32), {values32});
        ASSERT_EQ(got_buffer.type(), Halide::Float(16));
        ASSERT_EQ(want_buffer.type(), Halide::Float(32));
        const uint16_t *got = static_cast<const uint16_t *>(got_buffer.data());
        const float *want = static_cast<const float *>(want_buffer.data());
        int mismatches = 0;
        for (uint32_t i = 0; i < 65536; ++i) {
            const float w = want[i];
            const Halide::float16_t g = Halide::float16_t::make_from_bits(got[i]);
            if (Halide::float16_t::make_from_bits(uint16_t(i)).is_nan()) {
                EXPECT_TRUE(std::isnan(w)) << op << "(NaN), float32";
            }
            const bool same = std::isnan(w) ? g.is_nan() : got[i] == Halide::float16_t(w).to_bits();
            if (!same && ++mismatches <= 3)
                ADD_FAILURE() << op << " of fp16 bits 0x" << std::hex << i << std::dec << ": "
                              << double(g) << ", float32 rounded: " << double(Halide::float16_t(w));
        }
        EXPECT_EQ(mismatches, 0);
        codegen::CheckOptions options;
        options.inputs = {bits16};
        options.tolerance.f16_ulp = 0;
        const codegen::CheckResult r = codegen::check_against_reference(
            dsl::Graph(op, {build(op, in16)}), target::load_target("vpu27"), options);
        EXPECT_TRUE(r.ok()) << r.report();
    }
}

// The ops computed on fp16 vectors for fp16 inputs: the float32 result rounded, bit for bit.
TEST(UnaryMath, Fp16NativeOpsRoundTheFloat32ResultOnEveryFp16Value) {
    expect_float32_results_rounded_on_every_fp16_value({"abs", "neg", "ceil", "floor", "round",
                                                        "reciprocal", "exp", "atan", "sinh", "cosh",
                                                        "tanh", "asinh", "sqrt", "log"});
}

// The ops computed in float32, those whose math lets a NaN through by itself (elu, mish,
// hard_swish, swish: no NaN test) as much as the others.
TEST(UnaryMath, Float32OpsOnEveryFp16ValueAndNan) {
    expect_float32_results_rounded_on_every_fp16_value(
        {"elu", "selu", "mish", "hard_swish", "swish", "softplus", "celu", "sign", "sin"});
}

// Attribute arithmetic fp16 (elu, selu, swish, mish, sigmoid): on every one of the 65,536 fp16
// values, within 2^-8 + 2^-9 |y| of the exact function in double (about four fp16 ulps at 1, the
// bound docs/layers.md states), NaN for NaN, and for an infinity what the float32 form gives; the
// SHAVE kernel gives the reference's bits on the device.
// sigmoid of NaN is NaN and of -inf 0, in f16 and f32 (Halide's exp of NaN is no NaN and its exp
// of +inf no infinity: both gave 1), and of +inf 1; the device gives the reference's bits.
TEST(UnaryMath, SigmoidOfNanAndInfinities) {
    for (const dsl::ElemType type : {dsl::ElemType::F16, dsl::ElemType::F32}) {
        SCOPED_TRACE(dsl::to_string(type));
        const std::vector<float> x = {kNaN, -kInf, kInf, -100, 0, 100};
        const dsl::Layer in = input({int64_t(x.size())}, type);
        Halide::Buffer<> values = algorithms::make_buffer(in.output());
        for (size_t i = 0; i < x.size(); ++i) {
            if (type == dsl::ElemType::F16)
                static_cast<Halide::float16_t *>(values.data())[i] = Halide::float16_t(x[i]);
            else
                static_cast<float *>(values.data())[i] = x[i];
        }
        const dsl::Layer layer = build("sigmoid", in);
        const Halide::Buffer<> out = algorithms::run_reference(layer, {values});
        std::vector<double> got;
        for (size_t i = 0; i < x.size(); ++i)
            got.push_back(type == dsl::ElemType::F16
                              ? double(static_cast<const Halide::float16_t *>(out.data())[i])
                              : double(static_cast<const float *>(out.data())[i]));
        expect_values(got, {kNaN, 0, 1, 0, 0.5, 1}, 1e-30);
        codegen::CheckOptions options;
        options.inputs = {values};
        const codegen::CheckResult r = codegen::check_against_reference(
            dsl::Graph("sigmoid", {layer}), target::load_target("vpu27"), options);
        EXPECT_TRUE(r.ok()) << r.report();
    }
}

TEST(UnaryMath, Fp16ArithmeticIsWithinItsBoundOnEveryFp16Value) {
    const double selu_alpha = 1.67326319217681884765625, selu_gamma = 1.05070102214813232421875;
    struct Case {
        std::string op;
        dsl::Attrs attrs;
        std::function<double(double)> want;
    };
    const std::vector<Case> cases = {
        {"elu", {}, [](double x) { return x < 0 ? std::expm1(x) : x; }},
        {"elu", dsl::Attrs().set("alpha", 0.7),
         [](double x) { return x < 0 ? 0.7 * std::expm1(x) : x; }},
        {"selu",
         {},
         [=](double x) { return selu_gamma * (x > 0 ? x : selu_alpha * std::expm1(x)); }},
        {"swish", {}, [](double x) { return x / (1 + std::exp(-x)); }},
        {"swish", dsl::Attrs().set("beta", 1.5),
         [](double x) { return x / (1 + std::exp(-1.5 * x)); }},
        {"mish", {}, [](double x) { return x * std::tanh(std::log1p(std::exp(x))); }},
        {"sigmoid", {}, [](double x) { return 1 / (1 + std::exp(-x)); }},
    };
    const dsl::Layer in = input({256, 256}, dsl::ElemType::F16);
    Halide::Buffer<> values = algorithms::make_buffer(in.output());
    uint16_t *bits = static_cast<uint16_t *>(values.data());
    for (uint32_t i = 0; i < 65536; ++i) bits[i] = uint16_t(i);
    for (const Case &c : cases) {
        SCOPED_TRACE(c.op);
        dsl::Attrs half = c.attrs;
        half.set("arithmetic", std::string("fp16"));
        const dsl::Layer layer = build(c.op, in, half);
        const Halide::Buffer<> got = algorithms::run_reference(layer, {values});
        const Halide::Buffer<> float32 =
            algorithms::run_reference(build(c.op, in, c.attrs), {values});
        const uint16_t *y16 = static_cast<const uint16_t *>(got.data());
        const uint16_t *f16 = static_cast<const uint16_t *>(float32.data());
        int wrong = 0;
        for (uint32_t i = 0; i < 65536; ++i) {
            const double x = double(Halide::float16_t::make_from_bits(uint16_t(i)));
            const double y = double(Halide::float16_t::make_from_bits(y16[i]));
            const double want =
                std::isinf(x) ? double(Halide::float16_t::make_from_bits(f16[i])) : c.want(x);
            bool ok;
            if (std::isnan(x) || std::isnan(want))
                ok = std::isnan(y);
            else if (std::isinf(x))
                ok = y == want;
            else if (std::fabs(want) > 65504)
                ok = std::isinf(y) && std::signbit(y) == std::signbit(want);
            else
                ok = std::fabs(y - want) <= std::ldexp(1.0, -8) + std::ldexp(std::fabs(want), -9);
            if (!ok && ++wrong <= 3)
                ADD_FAILURE() << c.op << "(" << x << ") = " << y << ", want " << want;
        }
        EXPECT_EQ(wrong, 0);
        codegen::CheckOptions options;
        options.inputs = {values};
        options.tolerance.f16_ulp = 0;
        const codegen::CheckResult r = codegen::check_against_reference(
            dsl::Graph(c.op, {layer}), target::load_target("vpu27"), options);
        EXPECT_TRUE(r.ok()) << r.report();
    }
}

// node/test_tan's input 1.5327792 is 1.533203125 in fp16, where tan is 26.588 rather than
// 26.291: its expected output is out of fp16's reach, and the result is tan of the fp16 input.
TEST(UnaryMath, TanOfTheFp16InputNearItsPole) {
    const dsl::Layer in = input({1}, dsl::ElemType::F16);
    Halide::Buffer<> value = algorithms::make_buffer(in.output());
    Halide::Buffer<Halide::float16_t> typed(value);
    typed(0) = Halide::float16_t(1.5327792f);
    EXPECT_EQ(double(typed(0)), 1.533203125);
    const dsl::Layer tan = build("tan", in);
    const Halide::Buffer<Halide::float16_t> out(algorithms::run_reference(tan, {value}));
    EXPECT_EQ(double(out(0)), double(Halide::float16_t(std::tan(1.533203125))));
    EXPECT_NEAR(double(out(0)), 26.588, 0.01);
    codegen::CheckOptions options;
    options.inputs = {value};
    expect_matches_reference(tan, options);
}

// The simulator on fp16 NaN and infinities, in an odd shape: the same bools as the reference.
TEST(UnaryMath, IsNanAndIsInfOnTheDevice) {
    const dsl::Layer in = input({3, 7, 5}, dsl::ElemType::F16);
    Halide::Buffer<> values = algorithms::make_buffer(in.output());
    const float pattern[] = {kNaN, kInf, -kInf, 0.5f, -2, 65504, -kNaN};
    int i = 0;
    Halide::Buffer<Halide::float16_t>(values).for_each_value(
        [&](Halide::float16_t &v) { v = Halide::float16_t(pattern[i++ % 7]); });
    codegen::CheckOptions options;
    options.inputs = {values};
    for (const char *op : {"is_nan", "is_inf"}) {
        SCOPED_TRACE(op);
        expect_matches_reference(build(op, in), options);
    }
    expect_matches_reference(build("is_inf", in, dsl::Attrs().set("detect_positive", int64_t(0))),
                             options);
}

TEST(UnaryMath, IntegersExactly) {
    const int32_t min = std::numeric_limits<int32_t>::min();
    const int32_t max = std::numeric_limits<int32_t>::max();
    const std::vector<int32_t> i32 = {min, -7, -1, 0, 1, max};
    // The minimum wraps around to itself, as numpy's.
    expect_values(reference("abs", dsl::ElemType::I32, i32), {min, 7, 1, 0, 1, max});
    expect_values(reference("neg", dsl::ElemType::I32, i32), {min, 7, 1, 0, -1, -double(max)});
    expect_values(reference("sign", dsl::ElemType::I32, i32), {-1, -1, -1, 0, 1, 1});
    const std::vector<int8_t> i8 = {-128, -5, 0, 5, 127};
    expect_values(reference("abs", dsl::ElemType::I8, i8), {-128, 5, 0, 5, 127});
    expect_values(reference("neg", dsl::ElemType::I8, i8), {-128, 5, 0, -5, -127});
    expect_values(reference("sign", dsl::ElemType::I8, i8), {-1, -1, 0, 1, 1});
    const std::vector<uint8_t> u8 = {0, 1, 200, 255};
    expect_values(reference("abs", dsl::ElemType::U8, u8), {0, 1, 200, 255});
    expect_values(reference("sign", dsl::ElemType::U8, u8), {0, 1, 1, 1});
    EXPECT_EQ(build("abs", input({4}, dsl::ElemType::I32)).output().type, dsl::ElemType::I32);
}

// Integers in odd shapes, random over the whole type, on the device.
TEST(UnaryMath, IntegersOnTheDevice) {
    for (dsl::ElemType type : {dsl::ElemType::I32, dsl::ElemType::I8, dsl::ElemType::U8})
        for (const char *op : {"abs", "neg", "sign"}) {
            if (type == dsl::ElemType::U8 && std::string(op) == "neg") continue;
            SCOPED_TRACE(std::string(op) + " " + dsl::to_string(type));
            expect_matches_reference(build(op, input({2, 19, 3, 7}, type)));
        }
}

// Random reals on the device, in odd shapes and a multiple of 16 channels: fp16 within the
// contract's 1 ulp; float32 bit for bit where the arithmetic is exact (exp's float32 result
// may differ by an ulp between the SHAVE kernel and the reference, which e^x - 1 near 0
// magnifies).
TEST(UnaryMath, FloatsOnTheDevice) {
    for (const char *op : {"round", "softplus", "selu", "celu", "shrink", "hard_swish", "sign"}) {
        SCOPED_TRACE(op);
        expect_matches_reference(build(op, input({1, 32, 5, 3}, dsl::ElemType::F16)));
    }
    // Outside the domain, NaN; at 0, infinities: the same on the device as in the reference.
    for (const char *op : {"sqrt", "log", "reciprocal", "acosh", "atanh"}) {
        SCOPED_TRACE(op);
        expect_matches_reference(build(op, input({2, 17, 9}, dsl::ElemType::F16)));
    }
    for (const char *op : {"round", "floor", "shrink", "thresholded_relu", "sign", "abs"}) {
        SCOPED_TRACE(op);
        expect_matches_reference(build(op, input({3, 9, 13}, dsl::ElemType::F32)));
    }
}

// int8 in, int8 out: the dequantized value's function quantized to the output's quantization,
// the input's unless given.
TEST(UnaryMath, Int8WithAnOutputQuantization) {
    const dsl::Layer in = input({1, 5, 3, 17}, dsl::ElemType::I8, dsl::Quant::per_tensor(0.05f, 3));
    const dsl::Layer exp = build(
        "exp", in, dsl::Attrs().set("output_scale", 0.25).set("output_zero_point", int64_t(-100)));
    EXPECT_EQ(exp.output().quant.scale_at(0), 0.25f);
    EXPECT_EQ(exp.output().quant.zero_point_at(0), -100);
    expect_matches_reference(exp);
    const dsl::Layer tanh = build("tanh", in);
    EXPECT_EQ(tanh.output().quant.scale_at(0), 0.05f);
    EXPECT_EQ(tanh.output().quant.zero_point_at(0), 3);
    expect_matches_reference(tanh);
    // -0.15 (stored 0): e^-0.15 = 0.8607, stored round(3.443) - 100 = -97.
    const std::vector<double> got = reference<int8_t>(
        "exp", dsl::ElemType::I8, {0},
        dsl::Attrs().set("output_scale", 0.25).set("output_zero_point", int64_t(-100)),
        dsl::Quant::per_tensor(0.05f, 3));
    EXPECT_EQ(got, std::vector<double>{-97});
}

TEST(UnaryMath, RefusedInputsAndAttributes) {
    const dsl::Layer u8 = input({4, 5}, dsl::ElemType::U8, dsl::Quant::per_tensor(0.1f, 128));
    EXPECT_NE(build_error("sqrt", u8).find("sqrt 'sqrt_bad'"), std::string::npos);
    EXPECT_NE(build_error("sqrt", u8).find("NaN"), std::string::npos);
    const dsl::Layer plain_u8 = input({4, 5}, dsl::ElemType::U8);
    EXPECT_NE(build_error("neg", plain_u8).find("signed integers"), std::string::npos);
    EXPECT_NE(build_error("exp", input({4}, dsl::ElemType::I32)).find("exp 'exp_bad'"),
              std::string::npos);
    EXPECT_NE(build_error("exp", plain_u8).find("takes floats"), std::string::npos);
    EXPECT_NE(build_error("is_nan", u8).find("f16 or f32"), std::string::npos);
    EXPECT_NE(build_error("not", input({4}, dsl::ElemType::F16)).find("bool"), std::string::npos);
    const dsl::Layer f16 = input({4}, dsl::ElemType::F16);
    EXPECT_NE(build_error("celu", f16, dsl::Attrs().set("alpha", 0.0)).find("alpha"),
              std::string::npos);
    EXPECT_NE(build_error("is_inf", f16, dsl::Attrs().set("detect_negative", int64_t(2)))
                  .find("detect_negative"),
              std::string::npos);
    EXPECT_NE(build_error("abs", plain_u8, dsl::Attrs().set("output_scale", 0.5))
                  .find("no output quantization"),
              std::string::npos);
    const dsl::Attrs half = dsl::Attrs().set("arithmetic", std::string("fp16"));
    EXPECT_NE(build_error("elu", input({4}, dsl::ElemType::F32), half).find("takes an f16 input"),
              std::string::npos);
    EXPECT_NE(build_error("mish", u8, half).find("mish 'mish_bad'"), std::string::npos);
    EXPECT_NE(build_error("swish", f16, dsl::Attrs().set("arithmetic", std::string("fp8")))
                  .find("float32 or fp16"),
              std::string::npos);
}

dsl::Layer constant(dsl::ElemType type, std::vector<int64_t> ints, std::vector<double> reals) {
    const int64_t count = int64_t(std::max(ints.size(), reals.size()));
    return dsl::LayerRegistry::constant(
        "c", dsl::const_buffer({type, {count}, std::move(ints), std::move(reals)}));
}

// A layer of constants is their value at compile time: integers (int64 of shape arithmetic
// too) exactly, floats as the layer computes them, predicates as bool.
TEST(UnaryMath, ConstantsFoldAtCompileTime) {
    const int64_t min = std::numeric_limits<int64_t>::min();
    auto folded = [](const dsl::Layer &layer) {
        EXPECT_TRUE(dsl::is_constant(layer)) << layer.op();
        return dsl::const_values(layer);
    };
    const dsl::Layer i64 = constant(dsl::ElemType::I64, {min, -3, 0, 5}, {});
    EXPECT_EQ(folded(build("neg", i64)).ints, (std::vector<int64_t>{min, 3, 0, -5}));
    EXPECT_EQ(folded(build("abs", i64)).ints, (std::vector<int64_t>{min, 3, 0, 5}));
    EXPECT_EQ(folded(build("sign", i64)).ints, (std::vector<int64_t>{-1, -1, 0, 1}));
    const dsl::Layer scalar =
        dsl::LayerRegistry::constant("s", dsl::const_buffer({dsl::ElemType::I64, {}, {7}, {}}));
    const dsl::ConstValues neg_scalar = folded(build("neg", scalar));
    EXPECT_TRUE(neg_scalar.shape.empty());
    EXPECT_EQ(neg_scalar.ints, std::vector<int64_t>{-7});
    const dsl::ConstValues abs_i8 =
        folded(build("abs", constant(dsl::ElemType::I8, {-128, -7}, {})));
    EXPECT_EQ(abs_i8.type, dsl::ElemType::I8);
    EXPECT_EQ(abs_i8.ints, (std::vector<int64_t>{-128, 7}));

    const dsl::ConstValues sqrt =
        folded(build("sqrt", constant(dsl::ElemType::F32, {}, {6.25, -1, kNaN})));
    EXPECT_EQ(sqrt.type, dsl::ElemType::F32);
    expect_values(sqrt.reals, {2.5, kNaN, kNaN});
    const dsl::ConstValues exp16 =
        folded(build("exp", constant(dsl::ElemType::F16, {}, {0, 12, kNaN})));
    EXPECT_EQ(exp16.type, dsl::ElemType::F16);
    expect_values(exp16.reals, {1, kInf, kNaN}); // e^12 is beyond fp16's 65504
    expect_values(folded(build("round", constant(dsl::ElemType::F64, {}, {2.5, -0.5, 3.5}))).reals,
                  {2, 0, 4});

    const dsl::ConstValues nan =
        folded(build("is_nan", constant(dsl::ElemType::F32, {}, {kNaN, 1, kInf})));
    EXPECT_EQ(nan.type, dsl::ElemType::Bool);
    EXPECT_EQ(nan.ints, (std::vector<int64_t>{1, 0, 0}));
    EXPECT_EQ(folded(build("is_inf", constant(dsl::ElemType::F32, {}, {kNaN, -kInf, kInf}),
                           dsl::Attrs().set("detect_positive", int64_t(0))))
                  .ints,
              (std::vector<int64_t>{0, 1, 0}));
    EXPECT_EQ(folded(build("not", constant(dsl::ElemType::Bool, {1, 0, 1}, {}))).ints,
              (std::vector<int64_t>{0, 1, 0}));

    EXPECT_NE(build_error("exp", constant(dsl::ElemType::I64, {1}, {})).find("exp 'exp_bad'"),
              std::string::npos);
    EXPECT_NE(build_error("neg", constant(dsl::ElemType::U8, {1}, {})).find("u8"),
              std::string::npos);
    EXPECT_NE(build_error("not", constant(dsl::ElemType::F32, {}, {1})).find("bool"),
              std::string::npos);
}

onnx::ModelProto one_node_model(const std::string &op, const std::vector<int64_t> &shape,
                                int32_t elem_type = onnx::TensorProto::FLOAT) {
    onnx::ModelProto m;
    m.set_ir_version(8);
    m.add_opset_import()->set_version(17);
    onnx::GraphProto &g = *m.mutable_graph();
    g.set_name(op);
    onnx::NodeProto &node = *g.add_node();
    node.set_name("node");
    node.set_op_type(op);
    node.add_input("x");
    node.add_output("y");
    for (auto [v, name] : {std::pair{g.add_input(), "x"}, std::pair{g.add_output(), "y"}}) {
        v->set_name(name);
        onnx::TypeProto_Tensor &t = *v->mutable_type()->mutable_tensor_type();
        t.set_elem_type(elem_type);
        for (int64_t d : shape) t.mutable_shape()->add_dim()->set_dim_value(d);
    }
    return m;
}

void add_float_attr(onnx::ModelProto &m, const std::string &name, float value) {
    onnx::AttributeProto &a = *m.mutable_graph()->mutable_node(0)->add_attribute();
    a.set_name(name);
    a.set_type(onnx::AttributeProto::FLOAT);
    a.set_f(value);
}

frontend::ImportedModel import_model(const onnx::ModelProto &m) {
    const std::string s = m.SerializeAsString();
    return frontend::import_onnx_bytes({s.begin(), s.end()}, "model.onnx");
}

TEST(UnaryMath, ImportsOnnxAttributes) {
    onnx::ModelProto selu = one_node_model("Selu", {2, 3, 5});
    add_float_attr(selu, "alpha", 2);
    add_float_attr(selu, "gamma", 3);
    const dsl::Layer layer = import_model(selu).graph.outputs().at(0);
    EXPECT_EQ(layer.op(), "selu");
    EXPECT_EQ(layer.attrs().get_float("alpha"), 2);
    EXPECT_EQ(layer.attrs().get_float("gamma"), 3);
    EXPECT_EQ(import_model(one_node_model("HardSwish", {7})).graph.outputs().at(0).op(),
              "hard_swish");
    onnx::ModelProto celu = one_node_model("Celu", {7});
    add_float_attr(celu, "alpha", 0);
    try {
        import_model(celu);
        ADD_FAILURE() << "Celu of alpha 0 imported";
    } catch (const Error &e) {
        EXPECT_NE(std::string(e.what()).find("node 'node' (Celu)"), std::string::npos) << e.what();
        EXPECT_NE(std::string(e.what()).find("alpha"), std::string::npos) << e.what();
    }
}

// ONNX's int32 tensors: Abs, Neg and Sign exactly in int32 on the device.
TEST(UnaryMath, ImportsIntegerTensors) {
    for (const char *op : {"Abs", "Neg", "Sign"}) {
        SCOPED_TRACE(op);
        const frontend::ImportedModel model =
            import_model(one_node_model(op, {3, 5, 7}, onnx::TensorProto::INT32));
        ASSERT_EQ(model.graph.outputs().size(), 1u);
        EXPECT_EQ(model.graph.outputs()[0].output().type, dsl::ElemType::I32);
        const codegen::CheckResult r =
            codegen::check_against_reference(model.graph, target::load_target("vpu27"));
        EXPECT_TRUE(r.ok()) << r.report();
    }
}

// Every backend node test of the ops but test_tan (TanOfTheFp16InputNearItsPole above) and
// test_not_* (bool graph inputs).
class UnaryNodeTest : public ::testing::TestWithParam<std::string> {};

TEST_P(UnaryNodeTest, MatchesTheExpectedOutputs) {
    vpuc::testing::expect_node_test_passes(GetParam());
}

INSTANTIATE_TEST_SUITE_P(
    Onnx, UnaryNodeTest,
    ::testing::Values(
        "test_abs", "test_acos", "test_acos_example", "test_acosh", "test_acosh_example",
        "test_asin", "test_asin_example", "test_asinh", "test_asinh_example", "test_atan",
        "test_atan_example", "test_atanh", "test_atanh_example", "test_ceil", "test_ceil_example",
        "test_celu", "test_cos", "test_cos_example", "test_cosh", "test_cosh_example", "test_elu",
        "test_elu_default", "test_elu_example", "test_exp", "test_exp_example", "test_floor",
        "test_floor_example", "test_hardswish", "test_isinf", "test_isinf_negative",
        "test_isinf_positive", "test_isnan", "test_log", "test_log_example", "test_neg",
        "test_neg_example", "test_reciprocal", "test_reciprocal_example", "test_round", "test_selu",
        "test_selu_default", "test_selu_example", "test_shrink_hard", "test_shrink_soft",
        "test_sign", "test_sin", "test_sin_example", "test_sinh", "test_sinh_example",
        "test_softplus", "test_softplus_example", "test_softsign", "test_softsign_example",
        "test_sqrt", "test_sqrt_example", "test_tan_example", "test_tanh", "test_tanh_example",
        "test_thresholdedrelu", "test_thresholdedrelu_default", "test_thresholdedrelu_example"));

} // namespace
