// The layer library: every layer's Halide reference against a plain C++ loop written from the
// definitions (dpu_arith.h for int8), on small random data. int8 and fp16 DPU layers are
// compared bit-exactly; sigmoid and softmax within float tolerance.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <random>

#include "algorithms/layers.h"
#include "algorithms/reference.h"
#include "dsl/graph.h"
#include "vpu_target/dpu_arith.h"
#include "vpu_target/fp16.h"

using namespace vpuc;
using namespace vpuc::algorithms;
using dsl::ElemType;
using Halide::Buffer;

namespace {

// ---- Tensors and random data ---------------------------------------------------------------

dsl::Layer input(const std::string &name, int64_t c, int64_t h, int64_t w, ElemType type,
                 dsl::Quant quant = {}) {
    dsl::TensorDesc t;
    t.name = name;
    t.shape = dsl::Shape{1, c, h, w};
    t.type = type;
    t.quant = std::move(quant);
    return dsl::Layer::input(t);
}

template <typename T, typename Gen> void fill(const Buffer<> &b, Gen gen) {
    Buffer<T> typed = b;
    typed.for_each_value([&](T &v) { v = gen(); });
}

Buffer<> random_buffer(const dsl::TensorDesc &t, std::mt19937 &rng) {
    Buffer<> b = make_buffer(t);
    auto uniform = [&](float lo, float hi) {
        return std::uniform_real_distribution<float>(lo, hi)(rng);
    };
    switch (t.type) {
    case ElemType::U8:
        fill<uint8_t>(b, [&] { return uint8_t(rng() & 0xff); });
        break;
    case ElemType::I8:
        fill<int8_t>(b, [&] { return int8_t(rng() & 0xff); });
        break;
    case ElemType::F16:
        fill<Halide::float16_t>(b, [&] { return Halide::float16_t(uniform(-2, 2)); });
        break;
    case ElemType::F32:
        fill<float>(b, [&] { return uniform(-4, 4); });
        break;
    case ElemType::I32:
        fill<int32_t>(b, [&] { return int32_t(rng()); });
        break;
    case ElemType::I64:
    case ElemType::Bool:
    case ElemType::F64:
        ADD_FAILURE() << "no layer takes " << dsl::to_string(t.type);
        break;
    }
    return b;
}

Buffer<int8_t> random_weights(std::vector<int> sizes, std::mt19937 &rng) {
    Buffer<int8_t> w(sizes);
    w.for_each_value([&](int8_t &v) { v = int8_t(rng() & 0xff); });
    return w;
}

Buffer<Halide::float16_t> random_f16_weights(std::vector<int> sizes, std::mt19937 &rng) {
    Buffer<Halide::float16_t> w(sizes);
    w.for_each_value([&](Halide::float16_t &v) {
        v = Halide::float16_t(std::uniform_real_distribution<float>(-1, 1)(rng));
    });
    return w;
}

// An element as the DPU reads it: integer for u8/i8, float for f16/f32.
int32_t int_at(const Buffer<> &b, int c, int x, int y) {
    if (b.type() == Halide::UInt(8)) return b.as<uint8_t>()(c, x, y);
    return b.as<int8_t>()(c, x, y);
}

float float_at(const Buffer<> &b, int c, int x, int y) {
    if (b.type() == Halide::Float(16))
        return fp16::to_float(b.as<Halide::float16_t>()(c, x, y).to_bits());
    return b.as<float>()(c, x, y);
}

// The output element in its type's bits, to compare bit-exactly.
int64_t bits_at(const Buffer<> &b, int c, int x, int y) {
    if (b.type() == Halide::Float(16)) return b.as<Halide::float16_t>()(c, x, y).to_bits();
    return int_at(b, c, x, y);
}

int64_t expected_bits(const Buffer<> &out, double value) {
    if (out.type() == Halide::Float(16)) return fp16::from_float(float(value));
    return int64_t(value);
}

// Calls fn(c, x, y) for every element of a (c, x, y) buffer.
void for_each_cxy(const Buffer<> &b, const std::function<void(int, int, int)> &fn) {
    for (int y = 0; y < b.dim(2).extent(); ++y)
        for (int x = 0; x < b.dim(1).extent(); ++x)
            for (int c = 0; c < b.dim(0).extent(); ++c) fn(c, x, y);
}

// Compares every output element with `expect(c, x, y)` (the value in the output's type).
void expect_all(const Buffer<> &out, const std::function<double(int, int, int)> &expect) {
    int mismatches = 0;
    for_each_cxy(out, [&](int c, int x, int y) {
        int64_t want = expected_bits(out, expect(c, x, y));
        int64_t got = bits_at(out, c, x, y);
        if (want != got && ++mismatches <= 5)
            ADD_FAILURE() << "at (c, x, y) = (" << c << ", " << x << ", " << y << "): expected "
                          << want << ", got " << got;
    });
    EXPECT_EQ(mismatches, 0);
}

std::vector<int32_t> random_ints(size_t n, int lo, int hi, std::mt19937 &rng) {
    std::vector<int32_t> v(n);
    for (auto &e : v) e = std::uniform_int_distribution<int>(lo, hi)(rng);
    return v;
}

std::vector<FixedPoint> random_requant(size_t n, std::mt19937 &rng) {
    std::vector<FixedPoint> v(n);
    for (auto &f : v)
        f = {uint16_t(std::uniform_int_distribution<int>(1000, 60000)(rng)),
             uint8_t(std::uniform_int_distribution<int>(20, 24)(rng))};
    return v;
}

// ---- The requantization helper against dpu::requantize --------------------------------------

// Evaluates requantize() with Halide on every (acc, mult, shift) and compares with the C++.
void check_requantize(const dpu::IntPpe &ppe, Halide::Type out, const std::vector<int32_t> &accs,
                      const std::vector<uint16_t> &mults, const std::vector<uint8_t> &shifts) {
    const int n = int(accs.size());
    Buffer<int32_t> acc(n);
    Buffer<uint16_t> mult(n);
    Buffer<uint8_t> shift(n);
    for (int i = 0; i < n; ++i) {
        acc(i) = accs[size_t(i)];
        mult(i) = mults[size_t(i)];
        shift(i) = shifts[size_t(i)];
    }
    Halide::Var i;
    Halide::Func f;
    f(i) = Halide::cast<int32_t>(requantize(acc(i), mult(i), shift(i), ppe, out));
    Buffer<int32_t> got = f.realize({n}, reference_target());
    int mismatches = 0;
    for (int k = 0; k < n; ++k) {
        int32_t want = dpu::requantize(acc(k), mult(k), shift(k), ppe);
        if (want != got(k) && ++mismatches <= 5)
            ADD_FAILURE() << "acc " << acc(k) << " mult " << mult(k) << " shift " << int(shift(k))
                          << ": dpu " << want << ", Halide " << got(k);
    }
    EXPECT_EQ(mismatches, 0);
}

TEST(Requantize, MatchesDpuArithmeticOnRandomValuesAndEdges) {
    std::mt19937 rng(7);
    std::vector<int32_t> accs;
    std::vector<uint16_t> mults;
    std::vector<uint8_t> shifts;
    // Edges: extreme accumulators, multipliers and shifts, and exact halves (rounding ties).
    for (int32_t a : {INT32_MIN, INT32_MIN + 1, -65536, -3, -2, -1, 0, 1, 2, 3, 65535, INT32_MAX})
        for (uint16_t m : {uint16_t(0), uint16_t(1), uint16_t(3), uint16_t(32768), uint16_t(65535)})
            for (uint8_t s : {0, 1, 2, 15, 16, 31, 32, 47, 62, 63}) {
                accs.push_back(a);
                mults.push_back(m);
                shifts.push_back(s);
            }
    for (int k = 0; k < 4000; ++k) {
        accs.push_back(int32_t(rng()));
        mults.push_back(uint16_t(rng()));
        shifts.push_back(uint8_t(rng() % 64));
        // Small values where ties and the zero point matter.
        accs.push_back(std::uniform_int_distribution<int>(-5000, 5000)(rng));
        mults.push_back(uint16_t(rng() % 8));
        shifts.push_back(uint8_t(rng() % 6));
    }

    dpu::IntPpe u8;
    u8.out_min = 0;
    u8.out_max = 255;
    u8.out_zero_point = 128;
    dpu::IntPpe i8;
    i8.out_zero_point = -5;
    std::vector<std::pair<dpu::IntPpe, Halide::Type>> cases;
    for (dpu::IntPpe base : {u8, i8}) {
        Halide::Type type = base.out_min == 0 ? Halide::UInt(8) : Halide::Int(8);
        cases.push_back({base, type});
        dpu::IntPpe p = base;
        p.activation = dpu::Activation::Relu;
        cases.push_back({p, type});
        p.activation = dpu::Activation::ReluX;
        p.relux_max = 50;
        cases.push_back({p, type});
        p.activation = dpu::Activation::LeakyRelu;
        p.leaky_mult = 13;
        p.leaky_shift = 7;
        cases.push_back({p, type});
        p.leaky_mult = 1;
        p.leaky_shift = 0;
        p.clamp_low = 20;
        p.clamp_high = 100;
        cases.push_back({p, type});
        p.clamp_low = -1000; // beyond the type: the saturation wins
        p.clamp_high = 1000;
        cases.push_back({p, type});
    }
    for (const auto &[ppe, type] : cases) check_requantize(ppe, type, accs, mults, shifts);
}

TEST(FixedPoint, KeepsSixteenBitsAndRoundsTheReal) {
    FixedPoint half = fixed_point(0.5);
    EXPECT_EQ(half.mult, 32768);
    EXPECT_EQ(half.shift, 16);
    FixedPoint ninth = fixed_point(1.0 / 9);
    EXPECT_GE(ninth.mult, 32768);
    EXPECT_NEAR(std::ldexp(double(ninth.mult), -ninth.shift), 1.0 / 9, 1e-5);
    EXPECT_EQ(fixed_point(1000.0).mult, 64000);
    EXPECT_EQ(fixed_point(1000.0).shift, 6);
    EXPECT_THROW(fixed_point(70000.0), dsl::LayerError);
    EXPECT_THROW(fixed_point(-1.0), dsl::LayerError);
}

TEST(IntPpe, ConvertsRealActivationsToTheOutputDomain) {
    dpu::IntPpe p =
        int_ppe(Activation::clamp(0.0f, 6.0f), ElemType::U8, dsl::Quant::per_tensor(0.05f, 10));
    EXPECT_EQ(p.activation, dpu::Activation::None);
    EXPECT_EQ(p.clamp_low, 10);
    EXPECT_EQ(p.clamp_high, 130);
    EXPECT_EQ(p.out_zero_point, 10);
    EXPECT_EQ(p.out_max, 255);
    dpu::IntPpe leaky =
        int_ppe(Activation::leaky_relu(0.1f), ElemType::I8, dsl::Quant::per_tensor(1, 0));
    EXPECT_EQ(leaky.activation, dpu::Activation::LeakyRelu);
    EXPECT_NEAR(std::ldexp(double(leaky.leaky_mult), -leaky.leaky_shift), 0.1, 1e-5);
    EXPECT_EQ(leaky.out_min, -128);
}

// ---- Convolutions --------------------------------------------------------------------------

struct ConvCase {
    int c, h, w, oc, k;
    Conv2dParams p;
    ElemType in_type = ElemType::U8;
};

// The int8 conv of `layer` from its definition: skips padding, wraps nothing (small data).
void check_quant_conv(const dsl::Layer &layer, const QuantWeights &qw, const Conv2dParams &p,
                      bool depthwise, uint32_t seed) {
    std::mt19937 rng(seed);
    const dsl::TensorDesc &it = layer.inputs()[0].output();
    Buffer<> in = random_buffer(it, rng);
    Buffer<> out = run_reference(layer, {in});
    const int ic_total = int(it.shape[dsl::dims::C]), iw = int(it.shape[dsl::dims::W]),
              ih = int(it.shape[dsl::dims::H]);
    const int zp = it.quant.empty() ? 0 : it.quant.zero_point_at(0);
    const int icg = qw.weights.dim(0).extent(), kw = qw.weights.dim(1).extent(),
              kh = qw.weights.dim(2).extent(), oc_total = qw.weights.dim(3).extent();
    const int groups = depthwise ? oc_total : ic_total / icg;
    const int ocg = oc_total / groups;
    const dpu::IntPpe ppe = int_ppe(p.activation, qw.output_type, qw.output_quant);
    auto fp = [&](int oc) {
        return qw.requant.size() == 1 ? qw.requant[0] : qw.requant[size_t(oc)];
    };
    expect_all(out, [&](int oc, int x, int y) {
        int32_t acc = qw.bias.empty() ? 0 : qw.bias[size_t(oc)];
        for (int ky = 0; ky < kh; ++ky)
            for (int kx = 0; kx < kw; ++kx) {
                int ix = x * p.stride_w + kx * p.dilation_w - p.pad_left;
                int iy = y * p.stride_h + ky * p.dilation_h - p.pad_top;
                if (ix < 0 || ix >= iw || iy < 0 || iy >= ih) continue;
                for (int i = 0; i < (depthwise ? 1 : icg); ++i) {
                    int ic = depthwise ? oc : (oc / ocg) * icg + i;
                    acc +=
                        (int_at(in, ic, ix, iy) - zp) * (qw.weights(i, kx, ky, oc) - qw.zero_point);
                }
            }
        return dpu::requantize(acc, fp(oc).mult, fp(oc).shift, ppe);
    });
}

QuantWeights quant_weights(std::vector<int> sizes, int oc, std::mt19937 &rng) {
    QuantWeights qw;
    qw.weights = random_weights(std::move(sizes), rng);
    qw.zero_point = 3;
    qw.bias = random_ints(size_t(oc), -3000, 3000, rng);
    qw.requant = random_requant(size_t(oc), rng);
    qw.output_type = ElemType::U8;
    qw.output_quant = dsl::Quant::per_tensor(0.1f, 100);
    return qw;
}

TEST(Conv2d, Int8MatchesTheLoopWithStrideDilationPaddingAndGroups) {
    std::vector<ConvCase> cases;
    ConvCase plain{16, 7, 9, 8, 3, {}};
    plain.p.pad_left = plain.p.pad_right = plain.p.pad_top = plain.p.pad_bottom = 1;
    cases.push_back(plain);
    ConvCase strided{8, 9, 8, 16, 3, {}};
    strided.p.stride_w = 2;
    strided.p.stride_h = 3;
    strided.p.pad_left = 2;
    strided.p.pad_top = 1;
    strided.p.pad_bottom = 2;
    strided.in_type = ElemType::I8;
    cases.push_back(strided);
    ConvCase dilated{4, 10, 10, 4, 3, {}};
    dilated.p.dilation_w = 2;
    dilated.p.dilation_h = 3;
    dilated.p.pad_right = 1;
    dilated.p.activation = Activation::relu();
    cases.push_back(dilated);
    ConvCase grouped{8, 6, 6, 12, 3, {}};
    grouped.p.groups = 4;
    grouped.p.pad_left = grouped.p.pad_top = 1;
    grouped.p.activation = Activation::leaky_relu(0.1f);
    cases.push_back(grouped);
    ConvCase pointwise{16, 5, 4, 32, 1, {}};
    pointwise.p.activation = Activation::clamp(-2.0f, 6.0f);
    cases.push_back(pointwise);

    uint32_t seed = 1;
    for (const ConvCase &cc : cases) {
        std::mt19937 rng(seed);
        auto in = input("in", cc.c, cc.h, cc.w, cc.in_type, dsl::Quant::per_tensor(0.02f, 7));
        QuantWeights qw = quant_weights({cc.c / cc.p.groups, cc.k, cc.k, cc.oc}, cc.oc, rng);
        check_quant_conv(conv2d("conv", in, qw, cc.p), qw, cc.p, false, ++seed);
    }
}

TEST(Conv2d, PerTensorRequantAndNoBias) {
    std::mt19937 rng(3);
    auto in = input("in", 4, 5, 5, ElemType::U8, dsl::Quant::per_tensor(0.02f, 128));
    QuantWeights qw = quant_weights({4, 3, 3, 6}, 6, rng);
    qw.bias.clear();
    qw.requant = {FixedPoint{20000, 22}};
    check_quant_conv(conv2d("conv", in, qw), qw, {}, false, 4);
}

TEST(DepthwiseConv2d, Int8MatchesTheLoop) {
    std::mt19937 rng(5);
    auto in = input("in", 6, 8, 7, ElemType::U8, dsl::Quant::per_tensor(0.02f, 128));
    QuantWeights qw = quant_weights({1, 3, 3, 6}, 6, rng);
    Conv2dParams p;
    p.stride_w = p.stride_h = 2;
    p.pad_left = p.pad_right = p.pad_top = p.pad_bottom = 1;
    check_quant_conv(depthwise_conv2d("dw", in, qw, p), qw, p, true, 6);
}

// The fp16 conv from its definition: fp32 sums in the DPU's order (ky, kx, c innermost).
void check_float_conv(const dsl::Layer &layer, const FloatWeights &fw, const Conv2dParams &p,
                      bool depthwise, uint32_t seed) {
    std::mt19937 rng(seed);
    const dsl::TensorDesc &it = layer.inputs()[0].output();
    Buffer<> in = random_buffer(it, rng);
    Buffer<> out = run_reference(layer, {in});
    const int iw = int(it.shape[dsl::dims::W]), ih = int(it.shape[dsl::dims::H]);
    const int icg = fw.weights.dim(0).extent(), kw = fw.weights.dim(1).extent(),
              kh = fw.weights.dim(2).extent();
    const dpu::FloatPpe ppe = float_ppe(p.activation);
    expect_all(out, [&](int oc, int x, int y) {
        float acc = 0;
        for (int ky = 0; ky < kh; ++ky)
            for (int kx = 0; kx < kw; ++kx) {
                int ix = x * p.stride_w + kx * p.dilation_w - p.pad_left;
                int iy = y * p.stride_h + ky * p.dilation_h - p.pad_top;
                if (ix < 0 || ix >= iw || iy < 0 || iy >= ih) continue;
                for (int i = 0; i < icg; ++i)
                    acc += float_at(in, depthwise ? oc : i, ix, iy) *
                           fp16::to_float(fw.weights(i, kx, ky, oc).to_bits());
            }
        return dpu::apply_float_ppe((acc + fw.bias[size_t(oc)]) * fw.scale[size_t(oc)], ppe);
    });
}

FloatWeights float_weights(std::vector<int> sizes, int oc, std::mt19937 &rng) {
    FloatWeights fw;
    fw.weights = random_f16_weights(std::move(sizes), rng);
    for (int i = 0; i < oc; ++i) {
        fw.scale.push_back(std::uniform_real_distribution<float>(0.5f, 2)(rng));
        fw.bias.push_back(std::uniform_real_distribution<float>(-1, 1)(rng));
    }
    return fw;
}

TEST(Conv2d, Fp16MatchesTheLoopBitExactly) {
    std::mt19937 rng(11);
    auto in = input("in", 8, 6, 7, ElemType::F16);
    FloatWeights fw = float_weights({8, 3, 3, 5}, 5, rng);
    Conv2dParams p;
    p.stride_w = 2;
    p.pad_left = p.pad_right = p.pad_top = p.pad_bottom = 1;
    p.activation = Activation::leaky_relu(0.25f);
    check_float_conv(conv2d("conv", in, fw, p), fw, p, false, 12);

    FloatWeights dw = float_weights({1, 3, 3, 8}, 8, rng);
    Conv2dParams q;
    q.pad_top = q.pad_bottom = 1;
    q.activation = Activation::clamp(-1.0f, 1.0f);
    check_float_conv(depthwise_conv2d("dw", in, dw, q), dw, q, true, 13);
}

TEST(Matmul, Int8AndFp16AreOneByOneConvsOverRows) {
    std::mt19937 rng(17);
    // 5 rows of 12 features -> 7 outputs per row.
    auto in = input("in", 12, 1, 5, ElemType::I8, dsl::Quant::per_tensor(0.1f, -3));
    QuantWeights qw = quant_weights({12, 7}, 7, rng);
    dsl::Layer fc = matmul("fc", in, qw, Activation::relu());
    EXPECT_EQ(dsl::to_string(fc.output().shape), "1x7x1x5");
    Buffer<> x = random_buffer(in.output(), rng);
    Buffer<> out = run_reference(fc, {x});
    const dpu::IntPpe ppe = int_ppe(Activation::relu(), qw.output_type, qw.output_quant);
    expect_all(out, [&](int n, int row, int) {
        int32_t acc = qw.bias[size_t(n)];
        for (int k = 0; k < 12; ++k) acc += (int_at(x, k, row, 0) + 3) * (qw.weights(k, n) - 3);
        return dpu::requantize(acc, qw.requant[size_t(n)].mult, qw.requant[size_t(n)].shift, ppe);
    });

    auto fin = input("fin", 12, 1, 5, ElemType::F16);
    FloatWeights fw = float_weights({12, 7}, 7, rng);
    Buffer<> fx = random_buffer(fin.output(), rng);
    Buffer<> fout = run_reference(matmul("ffc", fin, fw), {fx});
    expect_all(fout, [&](int n, int row, int) {
        float acc = 0;
        for (int k = 0; k < 12; ++k)
            acc += float_at(fx, k, row, 0) * fp16::to_float(fw.weights(k, n).to_bits());
        return (acc + fw.bias[size_t(n)]) * fw.scale[size_t(n)];
    });
}

TEST(Conv2d, RejectsWeightsThatDoNotFitTheInput) {
    std::mt19937 rng(1);
    auto in = input("in", 8, 5, 5, ElemType::U8);
    QuantWeights qw = quant_weights({3, 3, 3, 4}, 4, rng);
    EXPECT_THROW(conv2d("c", in, qw), dsl::LayerError);
    FloatWeights fw = float_weights({8, 3, 3, 4}, 4, rng);
    EXPECT_THROW(conv2d("c", in, fw), dsl::LayerError); // u8 input, fp16 weights
}

// ---- Pools ---------------------------------------------------------------------------------

TEST(Pool, Int8MaxAndAverageMatchTheLoop) {
    std::mt19937 rng(23);
    auto in = input("in", 5, 7, 8, ElemType::U8, dsl::Quant::per_tensor(0.05f, 120));
    Buffer<> x = random_buffer(in.output(), rng);
    PoolParams p;
    p.kernel_w = p.kernel_h = 3;
    p.stride_w = p.stride_h = 2;
    p.pad_left = p.pad_top = p.pad_right = p.pad_bottom = 1;

    // Window sum and max over the valid elements, in the zero-point-free domain.
    auto window = [&](int c, int ox, int oy, bool is_max) {
        int32_t acc = is_max ? INT32_MIN : 0;
        for (int ky = 0; ky < 3; ++ky)
            for (int kx = 0; kx < 3; ++kx) {
                int ix = ox * 2 + kx - 1, iy = oy * 2 + ky - 1;
                if (ix < 0 || ix >= 8 || iy < 0 || iy >= 7) continue;
                int32_t v = int_at(x, c, ix, iy) - 120;
                acc = is_max ? std::max(acc, v) : acc + v;
            }
        return acc;
    };
    dpu::IntPpe same = int_ppe({}, ElemType::U8, in.output().quant);
    expect_all(run_reference(max_pool("mp", in, p), {x}), [&](int c, int ox, int oy) {
        return dpu::requantize(window(c, ox, oy, true), 1, 0, same);
    });
    FixedPoint ninth = fixed_point(1.0 / 9);
    expect_all(run_reference(avg_pool("ap", in, p), {x}), [&](int c, int ox, int oy) {
        return dpu::requantize(window(c, ox, oy, false), ninth.mult, ninth.shift, same);
    });

    QuantOutput requant{ElemType::I8, dsl::Quant::per_tensor(0.1f, -20), FixedPoint{3, 1}};
    PoolParams relu = p;
    relu.activation = Activation::relu();
    dpu::IntPpe to_i8 = int_ppe(relu.activation, ElemType::I8, requant.quant);
    expect_all(run_reference(avg_pool("ap8", in, relu, requant), {x}), [&](int c, int ox, int oy) {
        return dpu::requantize(window(c, ox, oy, false), 3, 1, to_i8);
    });
}

TEST(Pool, Fp16MaxAndAverageMatchTheLoop) {
    std::mt19937 rng(29);
    auto in = input("in", 3, 6, 6, ElemType::F16);
    Buffer<> x = random_buffer(in.output(), rng);
    PoolParams p;
    p.kernel_w = 2;
    p.kernel_h = 3;
    p.pad_top = p.pad_bottom = 1;
    auto window = [&](int c, int ox, int oy, bool is_max) {
        float acc = is_max ? -INFINITY : 0.0f;
        for (int ky = 0; ky < 3; ++ky)
            for (int kx = 0; kx < 2; ++kx) {
                int ix = ox + kx, iy = oy + ky - 1;
                if (iy < 0 || iy >= 6) continue;
                float v = float_at(x, c, ix, iy);
                acc = is_max ? std::max(acc, v) : acc + v;
            }
        return acc;
    };
    expect_all(run_reference(max_pool("mp", in, p), {x}),
               [&](int c, int ox, int oy) { return window(c, ox, oy, true); });
    expect_all(run_reference(avg_pool("ap", in, p), {x}),
               [&](int c, int ox, int oy) { return window(c, ox, oy, false) * (1.0f / 6); });
}

// ---- Eltwise -------------------------------------------------------------------------------

int64_t apply_op(EltwiseOp op, int64_t a, int64_t b) {
    switch (op) {
    case EltwiseOp::Add:
        return a + b;
    case EltwiseOp::Sub:
        return a - b;
    case EltwiseOp::Mul:
        return a * b;
    case EltwiseOp::Max:
        return std::max(a, b);
    case EltwiseOp::Min:
        return std::min(a, b);
    }
    return 0;
}

TEST(Eltwise, Int8WithBroadcastingMatchesTheDpuArithmetic) {
    std::mt19937 rng(31);
    auto a = input("a", 4, 3, 5, ElemType::U8, dsl::Quant::per_tensor(0.05f, 128));
    auto b_channel = input("b", 1, 3, 5, ElemType::I8, dsl::Quant::per_tensor(0.02f, 4));
    auto b_spatial = input("s", 4, 1, 1, ElemType::U8, dsl::Quant::per_tensor(0.1f, 10));
    for (const dsl::Layer &b : {a, b_channel, b_spatial})
        for (EltwiseOp op :
             {EltwiseOp::Add, EltwiseOp::Sub, EltwiseOp::Mul, EltwiseOp::Max, EltwiseOp::Min}) {
            QuantEltwise q = quant_eltwise(op, a.output().quant, b.output().quant, ElemType::U8,
                                           dsl::Quant::per_tensor(0.08f, 50));
            dsl::Layer e = eltwise("e", op, a, b, Activation::relu(), q);
            EXPECT_EQ(dsl::to_string(e.output().shape), "1x4x3x5");
            Buffer<> va = random_buffer(a.output(), rng), vb = random_buffer(b.output(), rng);
            Buffer<> out = run_reference(e, {va, vb});
            const dpu::IntPpe ppe = int_ppe(Activation::relu(), ElemType::U8, q.out.quant);
            const int bz = b.output().quant.zero_point_at(0);
            expect_all(out, [&](int c, int x, int y) {
                int bc = vb.dim(0).extent() == 1 ? 0 : c, bx = vb.dim(1).extent() == 1 ? 0 : x,
                    by = vb.dim(2).extent() == 1 ? 0 : y;
                auto operand = [](int32_t v, int32_t zp, int32_t m) {
                    return std::clamp<int64_t>(int64_t(v - zp) * m, INT32_MIN, INT32_MAX);
                };
                int64_t r = apply_op(op, operand(int_at(va, c, x, y), 128, q.in1_mult),
                                     operand(int_at(vb, bc, bx, by), bz, q.in2_mult));
                return dpu::requantize(int32_t(uint32_t(uint64_t(r))), q.out.requant.mult,
                                       q.out.requant.shift, ppe);
            });
        }
}

TEST(Eltwise, Fp16WithBroadcastingMatchesTheLoop) {
    std::mt19937 rng(37);
    auto a = input("a", 3, 4, 1, ElemType::F16);
    auto b = input("b", 1, 4, 6, ElemType::F16);
    Buffer<> va = random_buffer(a.output(), rng), vb = random_buffer(b.output(), rng);
    Buffer<> out = run_reference(eltwise("e", EltwiseOp::Mul, a, b), {va, vb});
    EXPECT_EQ(out.dim(0).extent(), 3);
    EXPECT_EQ(out.dim(1).extent(), 6);
    expect_all(out,
               [&](int c, int x, int y) { return float_at(va, c, 0, y) * float_at(vb, 0, x, y); });
    EXPECT_THROW(eltwise("bad", EltwiseOp::Add, a, input("c", 2, 4, 6, ElemType::F16)),
                 dsl::LayerError);
}

// Integers without a quantization combine exactly in their type, wrapping around as numpy's
// do, over full-range random values; another type or a quantized input beside them is refused.
template <typename T> void expect_integer_eltwise(ElemType type, std::mt19937 &rng) {
    auto a = input("a", 4, 3, 5, type);
    auto b = input("b", 1, 3, 5, type); // broadcast along C
    const Buffer<T> va = random_buffer(a.output(), rng), vb = random_buffer(b.output(), rng);
    for (EltwiseOp op :
         {EltwiseOp::Add, EltwiseOp::Sub, EltwiseOp::Mul, EltwiseOp::Max, EltwiseOp::Min}) {
        const dsl::Layer e = eltwise("e", op, a, b);
        EXPECT_EQ(e.output().type, type);
        const Buffer<T> out = run_reference(e, {va, vb});
        int mismatches = 0;
        for_each_cxy(out, [&](int c, int x, int y) {
            const T want = T(uint64_t(apply_op(op, va(c, x, y), vb(0, x, y))));
            if (out(c, x, y) != want && ++mismatches <= 5)
                ADD_FAILURE() << dsl::to_string(type) << " op " << int(op) << " at (" << c << ", "
                              << x << ", " << y << "): " << int64_t(out(c, x, y)) << " for "
                              << int64_t(want);
        });
    }
}

TEST(Eltwise, IntegersWithoutQuantizationWrapAroundAsNumpy) {
    std::mt19937 rng(53);
    expect_integer_eltwise<uint8_t>(ElemType::U8, rng);
    expect_integer_eltwise<int8_t>(ElemType::I8, rng);
    expect_integer_eltwise<int32_t>(ElemType::I32, rng);
    const dsl::Layer plain = input("p", 4, 3, 5, ElemType::U8);
    EXPECT_THROW(eltwise("e", EltwiseOp::Add, plain, input("i", 4, 3, 5, ElemType::I32)),
                 dsl::LayerError);
    EXPECT_THROW(eltwise("e", EltwiseOp::Add, plain,
                         input("q", 4, 3, 5, ElemType::U8, dsl::Quant::per_tensor(0.05f, 128))),
                 dsl::LayerError);
    EXPECT_THROW(eltwise("e", EltwiseOp::Add, plain, plain, Activation::relu()), dsl::LayerError);
}

TEST(QuantEltwise, ScalesOperandsToTheLargerScale) {
    QuantEltwise q = quant_eltwise(EltwiseOp::Add, dsl::Quant::per_tensor(0.1f, 0),
                                   dsl::Quant::per_tensor(0.05f, 0), ElemType::U8,
                                   dsl::Quant::per_tensor(0.2f, 0));
    EXPECT_EQ(q.in1_mult, 16384);
    EXPECT_EQ(q.in2_mult, 8192);
    EXPECT_NEAR(std::ldexp(double(q.out.requant.mult), -q.out.requant.shift), 0.1 / 16384 / 0.2,
                1e-9);
}

// ---- Activations ---------------------------------------------------------------------------

TEST(Activation, Int8InTheQuantizedDomain) {
    std::mt19937 rng(41);
    const dsl::Quant quant = dsl::Quant::per_tensor(0.05f, 100);
    auto in = input("in", 3, 4, 5, ElemType::U8, quant);
    Buffer<> x = random_buffer(in.output(), rng);
    expect_all(run_reference(relu("r", in), {x}),
               [&](int c, int px, int py) { return std::max(int_at(x, c, px, py), 100); });
    // Clip(-1, 2) -> stored bounds 80 and 140.
    expect_all(run_reference(clamp("cl", in, -1.0f, 2.0f), {x}),
               [&](int c, int px, int py) { return std::clamp(int_at(x, c, px, py), 80, 140); });
    dpu::IntPpe leaky = int_ppe(Activation::leaky_relu(0.2f), ElemType::U8, quant);
    expect_all(run_reference(leaky_relu("l", in, 0.2f), {x}), [&](int c, int px, int py) {
        return dpu::apply_int_ppe(int_at(x, c, px, py) - 100, leaky);
    });
}

TEST(Activation, Fp16ThroughTheFloatPpe) {
    std::mt19937 rng(43);
    auto in = input("in", 3, 4, 5, ElemType::F16);
    Buffer<> x = random_buffer(in.output(), rng);
    expect_all(run_reference(relu("r", in), {x}),
               [&](int c, int px, int py) { return std::max(float_at(x, c, px, py), 0.0f); });
    expect_all(run_reference(clamp("cl", in, -0.5f, 0.75f), {x}), [&](int c, int px, int py) {
        return std::clamp(float_at(x, c, px, py), -0.5f, 0.75f);
    });
    expect_all(run_reference(leaky_relu("l", in, 0.1f), {x}), [&](int c, int px, int py) {
        float v = float_at(x, c, px, py);
        return v < 0 ? v * 0.1f : v;
    });
}

// ---- SHAVE layers --------------------------------------------------------------------------

double sigmoid_of(double v) {
    return 1 / (1 + std::exp(-v));
}

TEST(Sigmoid, FloatAndInt8WithinTolerance) {
    std::mt19937 rng(47);
    auto f = input("f", 3, 4, 5, ElemType::F32);
    Buffer<> x = random_buffer(f.output(), rng);
    Buffer<> out = run_reference(sigmoid("s", f), {x});
    for_each_cxy(out, [&](int c, int px, int py) {
        EXPECT_NEAR(float_at(out, c, px, py), sigmoid_of(float_at(x, c, px, py)), 1e-6);
    });

    auto q = input("q", 3, 4, 5, ElemType::I8, dsl::Quant::per_tensor(0.05f, -10));
    Buffer<> xq = random_buffer(q.output(), rng);
    dsl::Layer s8 = sigmoid("s8", q);
    EXPECT_EQ(s8.output().quant.zero_point_at(0), -128);
    Buffer<> out8 = run_reference(s8, {xq});
    for_each_cxy(out8, [&](int c, int px, int py) {
        double want = sigmoid_of(0.05 * (int_at(xq, c, px, py) + 10)) * 256 - 128;
        EXPECT_NEAR(int_at(out8, c, px, py), std::clamp(want, -128.0, 127.0), 0.5 + 1e-3);
    });
}

TEST(Softmax, SumsToOneAlongTheAxis) {
    std::mt19937 rng(53);
    auto in = input("in", 6, 3, 4, ElemType::F16);
    Buffer<> x = random_buffer(in.output(), rng);
    for (dsl::Dim axis : {dsl::dims::C, dsl::dims::W, dsl::dims::H}) {
        Buffer<> out = run_reference(softmax("sm", in, axis), {x});
        const int d = axis == dsl::dims::C ? 0 : axis == dsl::dims::W ? 1 : 2;
        for_each_cxy(out, [&](int c, int px, int py) {
            double denom = 0;
            int q[3] = {c, px, py};
            for (q[d] = 0; q[d] < x.dim(d).extent(); ++q[d])
                denom += std::exp(double(float_at(x, q[0], q[1], q[2])));
            double want = std::exp(double(float_at(x, c, px, py))) / denom;
            EXPECT_NEAR(float_at(out, c, px, py), want, 1e-3);
        });
    }
    auto q = input("q", 5, 2, 2, ElemType::U8, dsl::Quant::per_tensor(0.1f, 128));
    Buffer<> xq = random_buffer(q.output(), rng);
    Buffer<> out8 = run_reference(softmax("sm8", q), {xq});
    for_each_cxy(out8, [&](int c, int px, int py) {
        double denom = 0;
        for (int k = 0; k < 5; ++k) denom += std::exp(0.1 * (int_at(xq, k, px, py) - 128));
        double want = std::exp(0.1 * (int_at(xq, c, px, py) - 128)) / denom * 256;
        EXPECT_NEAR(int_at(out8, c, px, py), std::min(want, 255.0), 0.5 + 1e-3);
    });
}

// ---- Graphs --------------------------------------------------------------------------------

TEST(Reference, AGraphEqualsItsLayersRunOneByOne) {
    std::mt19937 rng(59);
    auto in = input("in", 8, 6, 6, ElemType::U8, dsl::Quant::per_tensor(0.02f, 128));
    Conv2dParams p;
    p.pad_left = p.pad_right = p.pad_top = p.pad_bottom = 1;
    dsl::Layer conv = conv2d("conv", in, quant_weights({8, 3, 3, 8}, 8, rng), p);
    dsl::Layer act = relu("act", conv);
    PoolParams pp;
    pp.kernel_w = pp.kernel_h = pp.stride_w = pp.stride_h = 2;
    dsl::Layer pool = max_pool("pool", act, pp);
    dsl::Graph graph("g", {pool, act});

    Buffer<> x = random_buffer(in.output(), rng);
    std::vector<Buffer<>> outs = run_reference(graph, {x});
    ASSERT_EQ(outs.size(), 2u);
    Buffer<> conv_out = run_reference(conv, {x});
    Buffer<> act_out = run_reference(act, {conv_out});
    Buffer<> pool_out = run_reference(pool, {act_out});
    expect_all(outs[0], [&](int c, int px, int py) { return int_at(pool_out, c, px, py); });
    expect_all(outs[1], [&](int c, int px, int py) { return int_at(act_out, c, px, py); });

    EXPECT_THROW(run_reference(graph, {}), ReferenceError);
    EXPECT_THROW(run_reference(conv, {make_buffer(pool.output())}), ReferenceError);
}

} // namespace
