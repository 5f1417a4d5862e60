// The DPU matcher: every DPU layer kind is recognized with its parameters, composed
// activations fold into the PPE, and every matched description, run with the DPU's semantics
// (sim_dpu.cpp's loops on dpu_arith.h), reproduces the layer's reference bit-exactly. Layers
// that do not fit get an error naming the part of the definition.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <random>

#include "algorithms/layers.h"
#include "algorithms/reference.h"
#include "codegen/dpu_match.h"
#include "vpu_target/fp16.h"

using namespace vpuc;
using namespace vpuc::algorithms;
using codegen::DpuMatchError;
using codegen::DpuOpDesc;
using codegen::match_dpu;
using dsl::ElemType;
using Halide::Buffer;
using Halide::Expr;
using Halide::Func;
using target::DpuOpKind;
using testing::HasSubstr;

namespace {

// ---- Layers and data -----------------------------------------------------------------------

dsl::TensorDesc tensor(const std::string &name, int64_t c, int64_t h, int64_t w, ElemType type,
                       dsl::Quant quant = {}) {
    dsl::TensorDesc t;
    t.name = name;
    t.shape = dsl::Shape{1, c, h, w};
    t.type = type;
    t.quant = std::move(quant);
    return t;
}

dsl::Layer input(const std::string &name, int64_t c, int64_t h, int64_t w, ElemType type,
                 dsl::Quant quant = {}) {
    return dsl::Layer::input(tensor(name, c, h, w, type, std::move(quant)));
}

dsl::Layer u8_input(const std::string &name, int64_t c, int64_t h, int64_t w) {
    return input(name, c, h, w, ElemType::U8, dsl::Quant::per_tensor(0.02f, 120));
}

QuantWeights quant_weights(std::vector<int> sizes, int oc, uint32_t seed) {
    std::mt19937 rng(seed);
    QuantWeights qw;
    qw.weights = Buffer<int8_t>(sizes);
    qw.weights.for_each_value([&](int8_t &v) { v = int8_t(rng() & 0xff); });
    qw.zero_point = -2;
    for (int i = 0; i < oc; ++i) {
        qw.bias.push_back(std::uniform_int_distribution<int>(-5000, 5000)(rng));
        qw.requant.push_back({uint16_t(20000 + 1000 * i), uint8_t(21 + i % 3)});
    }
    qw.output_type = ElemType::U8;
    qw.output_quant = dsl::Quant::per_tensor(0.05f, 90);
    return qw;
}

FloatWeights float_weights(std::vector<int> sizes, int oc, uint32_t seed) {
    std::mt19937 rng(seed);
    FloatWeights fw;
    fw.weights = Buffer<Halide::float16_t>(sizes);
    fw.weights.for_each_value([&](Halide::float16_t &v) {
        v = Halide::float16_t(std::uniform_real_distribution<float>(-1, 1)(rng));
    });
    for (int i = 0; i < oc; ++i) {
        fw.scale.push_back(0.5f + 0.125f * float(i));
        fw.bias.push_back(0.25f * float(i) - 1);
    }
    return fw;
}

Buffer<> random_buffer(const dsl::TensorDesc &t, uint32_t seed) {
    std::mt19937 rng(seed);
    Buffer<> b = make_buffer(t);
    if (t.type == ElemType::F16) {
        Buffer<Halide::float16_t> f = b;
        f.for_each_value([&](Halide::float16_t &v) {
            v = Halide::float16_t(std::uniform_real_distribution<float>(-2, 2)(rng));
        });
    } else if (t.type == ElemType::I8) {
        Buffer<int8_t> i8 = b;
        i8.for_each_value([&](int8_t &v) { v = int8_t(rng() & 0xff); });
    } else {
        Buffer<uint8_t> u8 = b;
        u8.for_each_value([&](uint8_t &v) { v = uint8_t(rng() & 0xff); });
    }
    return b;
}

// A layer whose algorithm is `act`'s applied to `producer`'s: what activation fusion builds.
dsl::Layer compose(const dsl::Layer &act, const dsl::Layer &producer) {
    dsl::Algorithm a = act.algorithm(), p = producer.algorithm();
    return dsl::Layer::make(producer.op(), act.output(), producer.inputs(),
                            [a, p](const std::vector<Func> &in) { return a({p(in)}); });
}

// ---- The DPU's semantics, from the description alone ---------------------------------------

int32_t int_at(const Buffer<> &b, int c, int x, int y) {
    if (b.type() == Halide::UInt(8)) return b.as<uint8_t>()(c, x, y);
    return b.as<int8_t>()(c, x, y);
}

float float_at(const Buffer<> &b, int c, int x, int y) {
    return fp16::to_float(b.as<Halide::float16_t>()(c, x, y).to_bits());
}

float weight_at(const DpuOpDesc &d, int ic, int kx, int ky, int oc) {
    const Buffer<> &w = d.weights;
    if (w.type() == Halide::Float(16))
        return fp16::to_float(w.as<Halide::float16_t>()(ic, kx, ky, oc).to_bits());
    if (w.type() == Halide::UInt(8)) return w.as<uint8_t>()(ic, kx, ky, oc);
    return w.as<int8_t>()(ic, kx, ky, oc);
}

template <typename T> T at_or_first(const std::vector<T> &v, int i) {
    return v.size() == 1 ? v[0] : v[size_t(i)];
}

// One output element as sim_dpu.cpp computes it: padding skipped, int32 accumulation (fp32 in
// ky, kx, c order), then the PPE. Returns the stored bits.
int64_t dpu_element(const DpuOpDesc &d, const std::vector<Buffer<>> &in, int oc, int x, int y) {
    const bool fp = d.output_type.is_float();
    const Buffer<> &a = in[size_t(d.input)];
    auto store = [&](int32_t acc, float facc) -> int64_t {
        if (fp) return fp16::from_float(dpu::apply_float_ppe(facc, d.float_ppe));
        return dpu::requantize(acc, at_or_first(d.mult, oc), at_or_first(d.shift, oc), d.int_ppe);
    };
    if (d.op == DpuOpKind::Eltwise) {
        const Buffer<> &b = in[size_t(d.input2)];
        auto op = [&](auto u, auto v) -> decltype(u) {
            switch (d.eltwise) {
            case blob::EltwiseOp::Add:
                return u + v;
            case blob::EltwiseOp::Sub:
                return u - v;
            case blob::EltwiseOp::Mul:
                return u * v;
            case blob::EltwiseOp::Max:
                return std::max(u, v);
            case blob::EltwiseOp::Min:
                return std::min(u, v);
            }
            return u;
        };
        if (fp) return store(0, op(float_at(a, oc, x, y), float_at(b, oc, x, y)) * d.fp_scale[0]);
        auto operand = [](int32_t v, int32_t zp, int32_t m) {
            return std::clamp<int64_t>(int64_t(v - zp) * m, INT32_MIN, INT32_MAX);
        };
        int64_t r = op(operand(int_at(a, oc, x, y), d.input_zero_point, d.in1_mult),
                       operand(int_at(b, oc, x, y), d.input2_zero_point, d.in2_mult));
        return store(dpu::wrap_add(int32_t(uint32_t(uint64_t(r))), d.bias[0]), 0);
    }
    const bool pool = d.op == DpuOpKind::MaxPool || d.op == DpuOpKind::AvgPool;
    const bool max_pool = d.op == DpuOpKind::MaxPool;
    const int in_c = a.dim(0).extent(), ic_per_group = pool || d.op == DpuOpKind::DepthwiseConv
                                                           ? 1
                                                           : d.weights.dim(0).extent();
    const int oc_per_group = d.weights.defined() ? d.weights.dim(3).extent() / d.groups : 1;
    int32_t acc = pool || fp ? 0 : at_or_first(d.bias, oc);
    float facc = 0;
    bool any = false;
    for (int ky = 0; ky < d.kernel_h; ++ky)
        for (int kx = 0; kx < d.kernel_w; ++kx) {
            int ix = x * d.stride_w + kx * d.dilation_w - d.pad_left;
            int iy = y * d.stride_h + ky * d.dilation_h - d.pad_top;
            if (ix < 0 || iy < 0 || ix >= a.dim(1).extent() || iy >= a.dim(2).extent()) continue;
            for (int i = 0; i < ic_per_group; ++i) {
                int ic = pool || d.op == DpuOpKind::DepthwiseConv
                             ? oc
                             : (in_c == ic_per_group ? i : (oc / oc_per_group) * ic_per_group + i);
                if (fp) {
                    float v = float_at(a, ic, ix, iy);
                    float p = pool ? v : v * weight_at(d, i, kx, ky, oc);
                    facc = max_pool ? (any ? std::max(facc, p) : p) : facc + p;
                } else {
                    int32_t v = int_at(a, ic, ix, iy) - d.input_zero_point;
                    int32_t p =
                        pool ? v
                             : v * (int32_t(weight_at(d, i, kx, ky, oc)) - d.weights_zero_point);
                    acc = max_pool ? (any ? std::max(acc, p) : p) : acc + p;
                }
                any = true;
            }
        }
    if (pool && !fp) acc = dpu::wrap_add(acc, d.bias[0]);
    const float fbias = d.fp_bias.empty() ? 0.0f : at_or_first(d.fp_bias, oc);
    return store(acc, fp ? (facc + fbias) * at_or_first(d.fp_scale, oc) : 0);
}

int64_t stored_bits(const Buffer<> &b, int c, int x, int y) {
    if (b.type() == Halide::Float(16)) return b.as<Halide::float16_t>()(c, x, y).to_bits();
    return int_at(b, c, x, y);
}

// Matches `layer`, runs the description on random inputs and compares with the reference.
// `ulps` > 0 allows fp16 results that far apart (double rounding of a composed leaky relu).
DpuOpDesc match_and_check(const dsl::Layer &layer, int ulps = 0) {
    const DpuOpDesc d = match_dpu(layer);
    std::vector<Buffer<>> in;
    for (size_t i = 0; i < layer.inputs().size(); ++i)
        in.push_back(random_buffer(layer.inputs()[i].output(), uint32_t(100 + i)));
    const Buffer<> ref = run_reference(layer, in);
    int mismatches = 0;
    for (int y = 0; y < ref.dim(2).extent(); ++y)
        for (int x = 0; x < ref.dim(1).extent(); ++x)
            for (int c = 0; c < ref.dim(0).extent(); ++c) {
                const int64_t want = stored_bits(ref, c, x, y), got = dpu_element(d, in, c, x, y);
                if (std::abs(want - got) > ulps && ++mismatches <= 5)
                    ADD_FAILURE() << d.to_string() << " at (" << c << ", " << x << ", " << y
                                  << "): reference " << want << ", DPU " << got;
            }
    EXPECT_EQ(mismatches, 0) << d.to_string();
    return d;
}

Conv2dParams pads(int l, int r, int t, int b) {
    Conv2dParams p;
    p.pad_left = l;
    p.pad_right = r;
    p.pad_top = t;
    p.pad_bottom = b;
    return p;
}

// ---- Recognized layers ---------------------------------------------------------------------

TEST(DpuMatch, GroupedStridedInt8ConvWithRelu) {
    auto in = u8_input("in", 8, 9, 9);
    Conv2dParams p = pads(1, 1, 1, 1);
    p.stride_w = p.stride_h = 2;
    p.groups = 2;
    p.activation = Activation::relu();
    QuantWeights qw = quant_weights({4, 3, 3, 6}, 6, 1);
    DpuOpDesc d = match_and_check(conv2d("c1", in, qw, p));
    EXPECT_EQ(d.op, DpuOpKind::Conv);
    EXPECT_EQ(d.to_string(), "conv 3x3 s2 p1,1,1,1 g2 u8->u8 relu");
    EXPECT_EQ(d.input, 0);
    EXPECT_EQ(d.input_zero_point, 120);
    EXPECT_EQ(d.weights_zero_point, -2);
    ASSERT_EQ(d.weights.dimensions(), 4);
    EXPECT_EQ(d.weights.dim(0).extent(), 4);
    EXPECT_EQ(d.weights.dim(3).extent(), 6);
    EXPECT_EQ(d.weights.as<int8_t>()(1, 2, 0, 5), qw.weights(1, 2, 0, 5));
    EXPECT_EQ(d.bias, qw.bias);
    ASSERT_EQ(d.mult.size(), 6u);
    EXPECT_EQ(d.mult[5], qw.requant[5].mult);
    EXPECT_EQ(d.shift[5], qw.requant[5].shift);
    EXPECT_EQ(d.int_ppe.activation, dpu::Activation::Relu);
    EXPECT_EQ(d.int_ppe.out_zero_point, 90);
    EXPECT_EQ(d.int_ppe.clamp_low, 90);
    EXPECT_EQ(d.int_ppe.clamp_high, 255);
    EXPECT_EQ(d.output_type, Halide::UInt(8));
}

TEST(DpuMatch, DilationAndAsymmetricPaddingFromTheReadAndTheBoundary) {
    auto in = input("in", 4, 11, 10, ElemType::I8, dsl::Quant::per_tensor(0.1f, -3));
    Conv2dParams p = pads(2, 0, 1, 2);
    p.dilation_w = 2;
    p.stride_h = 2;
    p.activation = Activation::clamp(-1.0f, 2.0f);
    QuantWeights qw = quant_weights({4, 3, 2, 5}, 5, 2);
    qw.output_type = ElemType::I8;
    qw.output_quant = dsl::Quant::per_tensor(0.05f, -10);
    DpuOpDesc d = match_and_check(conv2d("c2", in, qw, p));
    EXPECT_EQ(d.to_string(), "conv 3x2 s1x2 d2x1 p2,0,1,2 i8->i8 clamp[-30,30]");
    EXPECT_EQ(d.int_ppe.activation, dpu::Activation::None);
}

TEST(DpuMatch, UnpaddedConvReadsTheInputDirectly) {
    auto in = u8_input("in", 16, 4, 4);
    DpuOpDesc d = match_and_check(conv2d("pw", in, quant_weights({16, 1, 1, 8}, 8, 3)));
    EXPECT_EQ(d.to_string(), "conv 1x1 s1 p0,0,0,0 u8->u8");
}

TEST(DpuMatch, DepthwiseConv) {
    auto in = u8_input("in", 6, 7, 7);
    Conv2dParams p = pads(1, 1, 1, 1);
    p.activation = Activation::leaky_relu(0.125f);
    DpuOpDesc d = match_and_check(depthwise_conv2d("dw", in, quant_weights({1, 3, 3, 6}, 6, 4), p));
    EXPECT_EQ(d.op, DpuOpKind::DepthwiseConv);
    EXPECT_EQ(d.to_string(), "dwconv 3x3 s1 p1,1,1,1 u8->u8 leaky");
    EXPECT_EQ(d.int_ppe.leaky_mult, 32768);
    EXPECT_EQ(d.int_ppe.leaky_shift, 18);
}

TEST(DpuMatch, MatmulWeightsBecomeAOneByOneConv) {
    auto in = input("in", 10, 1, 3, ElemType::I8, dsl::Quant::per_tensor(0.1f, 5));
    QuantWeights qw = quant_weights({10, 4}, 4, 5);
    DpuOpDesc d = match_and_check(matmul("fc", in, qw));
    EXPECT_EQ(d.op, DpuOpKind::MatMul);
    EXPECT_EQ(d.to_string(), "matmul i8->u8");
    ASSERT_EQ(d.weights.dimensions(), 4);
    EXPECT_EQ(d.weights.dim(0).extent(), 10);
    EXPECT_EQ(d.weights.dim(1).extent(), 1);
    EXPECT_EQ(d.weights.dim(3).extent(), 4);
    EXPECT_EQ(d.weights.as<int8_t>()(7, 0, 0, 3), qw.weights(7, 3));
}

TEST(DpuMatch, Fp16ConvAndMatmul) {
    auto in = input("in", 6, 5, 7, ElemType::F16);
    Conv2dParams p = pads(1, 1, 0, 0);
    p.stride_w = 2;
    p.activation = Activation::leaky_relu(0.2f);
    FloatWeights fw = float_weights({6, 3, 3, 4}, 4, 6);
    DpuOpDesc d = match_and_check(conv2d("fc", in, fw, p));
    EXPECT_EQ(d.to_string(), "conv 3x3 s2x1 p1,1,0,0 f16->f16 leaky");
    EXPECT_FLOAT_EQ(d.float_ppe.leaky_alpha, 0.2f);
    EXPECT_EQ(d.fp_scale, fw.scale);
    EXPECT_EQ(d.fp_bias, fw.bias);

    auto rows = input("rows", 6, 1, 4, ElemType::F16);
    EXPECT_EQ(match_and_check(matmul("fmm", rows, float_weights({6, 3}, 3, 7))).op,
              DpuOpKind::MatMul);
}

TEST(DpuMatch, PoolsWithPerTensorScale) {
    auto in = u8_input("in", 5, 8, 8);
    PoolParams p;
    p.kernel_w = p.kernel_h = 3;
    p.stride_w = p.stride_h = 2;
    p.pad_left = p.pad_right = p.pad_top = p.pad_bottom = 1;
    DpuOpDesc mp = match_and_check(max_pool("mp", in, p));
    EXPECT_EQ(mp.to_string(), "maxpool 3x3 s2 p1,0,1,0 u8->u8");
    EXPECT_EQ(mp.mult, std::vector<uint16_t>{1});
    DpuOpDesc ap = match_and_check(avg_pool("ap", in, p));
    EXPECT_EQ(ap.op, DpuOpKind::AvgPool);
    FixedPoint ninth = fixed_point(1.0 / 9);
    EXPECT_EQ(ap.mult, std::vector<uint16_t>{ninth.mult});
    EXPECT_EQ(ap.shift, std::vector<uint8_t>{ninth.shift});
    EXPECT_EQ(ap.bias, std::vector<int32_t>{0});

    auto f = input("f", 3, 6, 6, ElemType::F16);
    PoolParams q;
    q.kernel_w = q.kernel_h = q.stride_w = q.stride_h = 2;
    q.activation = Activation::relu();
    EXPECT_EQ(match_and_check(max_pool("fmp", f, q)).to_string(),
              "maxpool 2x2 s2 p0,0,0,0 f16->f16 relu");
    DpuOpDesc fap = match_and_check(avg_pool("fap", f, q));
    EXPECT_EQ(fap.fp_scale, std::vector<float>{0.25f});
}

TEST(DpuMatch, EltwiseInt8AndFp16) {
    auto a = u8_input("a", 4, 3, 5);
    auto b = input("b", 4, 3, 5, ElemType::I8, dsl::Quant::per_tensor(0.04f, 7));
    const dsl::Quant out = dsl::Quant::per_tensor(0.05f, 60);
    QuantEltwise q =
        quant_eltwise(EltwiseOp::Sub, b.output().quant, a.output().quant, ElemType::U8, out);
    DpuOpDesc sub = match_and_check(eltwise("sub", EltwiseOp::Sub, b, a, Activation::relu(), q));
    EXPECT_EQ(sub.to_string(), "eltwise sub i8->u8 relu");
    EXPECT_EQ(sub.input, 0);
    EXPECT_EQ(sub.input2, 1);
    EXPECT_EQ(sub.input_zero_point, 7);
    EXPECT_EQ(sub.input2_zero_point, 120);
    EXPECT_EQ(sub.in1_mult, q.in1_mult);
    EXPECT_EQ(sub.in2_mult, q.in2_mult);
    EXPECT_EQ(sub.mult, std::vector<uint16_t>{q.out.requant.mult});
    for (EltwiseOp op : {EltwiseOp::Add, EltwiseOp::Mul, EltwiseOp::Max, EltwiseOp::Min})
        match_and_check(
            eltwise("e", op, a, a, {},
                    quant_eltwise(op, a.output().quant, a.output().quant, ElemType::U8, out)));

    auto fa = input("fa", 3, 2, 4, ElemType::F16), fb = input("fb", 3, 2, 4, ElemType::F16);
    DpuOpDesc fmax = match_and_check(eltwise("fmax", EltwiseOp::Max, fa, fb));
    EXPECT_EQ(fmax.to_string(), "eltwise max f16->f16");
    EXPECT_EQ(fmax.input2, 1);
}

// ---- Composed activations fold into the PPE ------------------------------------------------

TEST(DpuMatch, ComposedInt8ActivationsFoldIntoThePpe) {
    auto in = u8_input("in", 8, 6, 6);
    dsl::Layer conv = conv2d("conv", in, quant_weights({8, 3, 3, 8}, 8, 9), pads(1, 1, 1, 1));

    DpuOpDesc r = match_and_check(compose(relu("r", conv), conv));
    EXPECT_EQ(r.int_ppe.activation, dpu::Activation::Relu);
    EXPECT_EQ(r.to_string(), "conv 3x3 s1 p1,1,1,1 u8->u8 relu");

    DpuOpDesc c = match_and_check(compose(clamp("c", conv, 0.0f, 6.0f), conv));
    EXPECT_EQ(c.int_ppe.activation, dpu::Activation::Relu);
    EXPECT_EQ(c.int_ppe.clamp_high, 210); // 6 / 0.05 + 90

    // Leaky relu after the producer saturated: exact with the clamp it implies.
    DpuOpDesc l = match_and_check(compose(leaky_relu("l", conv, 0.1f), conv));
    EXPECT_EQ(l.int_ppe.activation, dpu::Activation::LeakyRelu);
    EXPECT_EQ(l.int_ppe.clamp_low,
              90 + dpu::round_shift(-90 * l.int_ppe.leaky_mult, l.int_ppe.leaky_shift));

    // relu(clamp(conv)) and a clamp of a leaky conv compose too.
    dsl::Layer clamped = compose(clamp("c2", conv, -1.0f, 3.0f), conv);
    match_and_check(compose(relu("r2", clamped), clamped));
    Conv2dParams leaky = pads(1, 1, 1, 1);
    leaky.activation = Activation::leaky_relu(0.25f);
    dsl::Layer lconv = conv2d("lconv", in, quant_weights({8, 3, 3, 8}, 8, 10), leaky);
    EXPECT_EQ(match_and_check(compose(clamp("c3", lconv, -0.5f, 4.0f), lconv)).int_ppe.activation,
              dpu::Activation::LeakyRelu);
}

TEST(DpuMatch, ComposedFp16ActivationsFoldIntoThePpe) {
    auto in = input("in", 4, 5, 5, ElemType::F16);
    dsl::Layer conv = conv2d("conv", in, float_weights({4, 3, 3, 4}, 4, 11), pads(1, 1, 1, 1));
    EXPECT_EQ(match_and_check(compose(relu("r", conv), conv)).float_ppe.activation,
              dpu::Activation::Relu);
    DpuOpDesc c = match_and_check(compose(clamp("c", conv, -0.3f, 0.7f), conv));
    EXPECT_FLOAT_EQ(c.float_ppe.clamp_low, -0.3f);
    EXPECT_FLOAT_EQ(c.float_ppe.clamp_high, 0.7f);
    // Rounding to f16 before the leaky relu and after it: one ulp apart at most.
    EXPECT_EQ(match_and_check(compose(leaky_relu("l", conv, 0.1f), conv), 1).float_ppe.activation,
              dpu::Activation::LeakyRelu);
}

// ---- What does not fit the DPU -------------------------------------------------------------

std::string match_error(const dsl::Layer &layer) {
    try {
        match_dpu(layer);
    } catch (const DpuMatchError &e) {
        std::string why;
        EXPECT_FALSE(codegen::try_match_dpu(layer, &why));
        EXPECT_EQ(why, e.what());
        return e.what();
    }
    ADD_FAILURE() << "layer '" << layer.name() << "' matched";
    return "";
}

// A hand-written int8 conv-like layer: `term(input, weights, r)` is what the update adds.
dsl::Layer custom_conv(const std::string &name, const dsl::Layer &in,
                       std::function<Expr(Func, Buffer<int8_t>, Halide::RDom)> term,
                       Halide::RDom r = Halide::RDom(0, 4, 0, 1, 0, 1)) {
    Buffer<int8_t> w(4, 1, 1, 4);
    w.fill(1);
    dsl::TensorDesc out = tensor(name, 4, 4, 4, ElemType::U8);
    return dsl::Layer::make("conv2d", out, {in}, [=](const std::vector<Func> &inputs) {
        const auto &v = dsl::act_vars();
        Func acc(name + "_acc"), o(name);
        acc(v.c, v.x, v.y) = 0;
        acc(v.c, v.x, v.y) += term(inputs[0], w, r);
        dpu::IntPpe ppe;
        ppe.out_min = 0;
        ppe.out_max = 255;
        o(v.c, v.x, v.y) = requantize(acc(v.c, v.x, v.y), Expr(uint16_t(1)), Expr(uint8_t(0)), ppe,
                                      Halide::UInt(8));
        return o;
    });
}

Expr i32(const Expr &e) {
    return Halide::cast<int32_t>(e);
}

TEST(DpuMatchError, ShaveLayersAreNotDpuOperations) {
    auto f = input("f", 8, 4, 4, ElemType::F16);
    EXPECT_EQ(match_error(sigmoid("s", f)),
              "layer 's': not a reduction: the output is elementwise on one input and calls "
              "'exp', 'is_nan'; the DPU runs conv, depthwise conv, pools, eltwise and matmul");
    EXPECT_THAT(match_error(softmax("sm", f)),
                HasSubstr("layer 'sm': output: combines 2 reductions ('sm_max', 'sm_sum') and "
                          "calls 'exp'; a DPU operation has one accumulator"));
    EXPECT_THAT(match_error(relu("r", u8_input("q", 4, 4, 4))),
                HasSubstr("layer 'r': not a reduction: the output is elementwise on one input;"));
    EXPECT_EQ(match_error(u8_input("in", 4, 4, 4)),
              "layer 'in': input: a graph input has no algorithm");
}

TEST(DpuMatchError, ComputedWeightsProductsOfThreeAndNonAffineReads) {
    auto in = u8_input("in", 4, 4, 4);
    EXPECT_THAT(match_error(custom_conv(
                    "computed", in,
                    [](Func x, Buffer<int8_t>, Halide::RDom r) {
                        Func w("w");
                        const auto &v = dsl::act_vars();
                        w(v.c, v.x, v.y) = Halide::cast<int8_t>(v.c + v.x);
                        return (i32(x(r.x, dsl::act_vars().x, dsl::act_vars().y)) - 120) *
                               i32(w(r.x, r.y, r.z));
                    })),
                HasSubstr("layer 'computed': weights: are computed by Func 'w'; the DPU reads "
                          "weights from a constant Halide::Buffer"));
    EXPECT_THAT(match_error(custom_conv("three", in,
                                        [](Func x, Buffer<int8_t> w, Halide::RDom r) {
                                            const auto &v = dsl::act_vars();
                                            Expr wv = i32(w(r.x, r.y, r.z, v.c));
                                            return i32(x(r.x, v.x, v.y)) * wv * wv;
                                        })),
                HasSubstr("layer 'three': update definition of 'three_acc': the reduction adds "
                          "a product of 3 terms; a DPU MAC multiplies an input by a weight"));
    EXPECT_THAT(match_error(custom_conv("square", in,
                                        [](Func x, Buffer<int8_t> w, Halide::RDom r) {
                                            const auto &v = dsl::act_vars();
                                            return i32(x(r.x, v.x * v.x, v.y)) *
                                                   i32(w(r.x, r.y, r.z, v.c));
                                        })),
                HasSubstr("input read: the x index `(x*x)` is not affine in x and the kernel "
                          "window"));
    EXPECT_THAT(match_error(custom_conv("swapped", in,
                                        [](Func x, Buffer<int8_t> w, Halide::RDom r) {
                                            const auto &v = dsl::act_vars();
                                            return i32(x(r.x, v.x, v.y)) *
                                                   i32(w(r.y, r.x, r.z, v.c));
                                        })),
                HasSubstr("layer 'swapped': input read: the channel index"));
    Halide::RDom masked(0, 4, 0, 1, 0, 1);
    masked.where(masked.x < 2);
    EXPECT_THAT(match_error(custom_conv(
                    "masked", in,
                    [](Func x, Buffer<int8_t> w, Halide::RDom r) {
                        const auto &v = dsl::act_vars();
                        return i32(x(r.x, v.x, v.y)) * i32(w(r.x, r.y, r.z, v.c));
                    },
                    masked)),
                HasSubstr("reduction domain of 'masked_acc': has a predicate (RDom::where)"));
}

TEST(DpuMatchError, TwoRuntimeTensorsAndBroadcasting) {
    auto a = u8_input("a", 4, 4, 4), b = u8_input("b", 4, 4, 4);
    dsl::Layer mm = dsl::Layer::make(
        "matmul", tensor("mm", 4, 4, 4, ElemType::U8), {a, b}, [](const std::vector<Func> &in) {
            const auto &v = dsl::act_vars();
            Halide::RDom r(0, 4);
            Func acc("mm_acc"), o("mm");
            acc(v.c, v.x, v.y) = 0;
            acc(v.c, v.x, v.y) += i32(in[0](r, v.x, v.y)) * i32(in[1](v.c, r, v.y));
            o(v.c, v.x, v.y) = Halide::cast<uint8_t>(Halide::clamp(acc(v.c, v.x, v.y), 0, 255));
            return o;
        });
    EXPECT_THAT(match_error(mm), HasSubstr("layer 'mm': output stage:"));
    dsl::Layer mm2 = dsl::Layer::make(
        "matmul", tensor("mm2", 4, 4, 4, ElemType::U8), {a, b}, [](const std::vector<Func> &in) {
            const auto &v = dsl::act_vars();
            Halide::RDom r(0, 4);
            Func acc("mm2_acc"), o("mm2");
            acc(v.c, v.x, v.y) = 0;
            acc(v.c, v.x, v.y) += i32(in[0](r, v.x, v.y)) * i32(in[1](v.c, r, v.y));
            dpu::IntPpe ppe;
            ppe.out_min = 0;
            ppe.out_max = 255;
            o(v.c, v.x, v.y) = requantize(acc(v.c, v.x, v.y), Expr(uint16_t(1)), Expr(uint8_t(0)),
                                          ppe, Halide::UInt(8));
            return o;
        });
    EXPECT_THAT(match_error(mm2),
                HasSubstr("update definition of 'mm2_acc': multiplies two run-time tensors; a "
                          "DPU MAC multiplies an input by constant weights"));

    auto c1 = u8_input("c1", 1, 4, 4);
    const dsl::Quant out = dsl::Quant::per_tensor(0.05f, 60);
    EXPECT_EQ(match_error(eltwise("bc", EltwiseOp::Add, a, c1, {},
                                  quant_eltwise(EltwiseOp::Add, a.output().quant, c1.output().quant,
                                                ElemType::U8, out))),
              "layer 'bc': eltwise: input 'c1' is broadcast along c; the DPU's eltwise reads "
              "both inputs at the output's position");
}

TEST(DpuMatchError, OutputStagesThePpeCannotDo) {
    auto in = u8_input("in", 4, 4, 4);
    dsl::Layer conv = conv2d("conv", in, quant_weights({4, 3, 3, 4}, 4, 12), pads(1, 1, 1, 1));
    // A leaky relu on a conv that already has one.
    Conv2dParams lp = pads(1, 1, 1, 1);
    lp.activation = Activation::leaky_relu(0.1f);
    dsl::Layer lconv = conv2d("lconv", in, quant_weights({4, 3, 3, 4}, 4, 12), lp);
    EXPECT_THAT(match_error(compose(leaky_relu("ll", lconv, 0.2f), lconv)),
                HasSubstr("layer 'll': output stage: applies leaky relu twice; the PPE has one "
                          "activation"));
    // A leaky relu built for another zero point than the conv writes.
    dsl::Layer other = input("other", 4, 4, 4, ElemType::U8, dsl::Quant::per_tensor(0.05f, 7));
    EXPECT_THAT(match_error(compose(leaky_relu("lz", other, 0.2f), conv)),
                HasSubstr("reads the producer's output with zero point 7 but it was written "
                          "with 90"));
    // A float32 result.
    dsl::Layer f32 = dsl::Layer::make(
        "conv2d", tensor("f32", 4, 4, 4, ElemType::F32), {in}, [](const std::vector<Func> &x) {
            const auto &v = dsl::act_vars();
            Func o("f32");
            o(v.c, v.x, v.y) = Halide::cast<float>(x[0](v.c, v.x, v.y));
            return o;
        });
    EXPECT_EQ(match_error(f32), "layer 'f32': output: is f32; the DPU writes u8, i8 or f16");
    // A multiplier computed per channel instead of read from a buffer.
    dsl::Layer computed = dsl::Layer::make(
        "conv2d", tensor("cm", 4, 4, 4, ElemType::U8), {in}, [](const std::vector<Func> &x) {
            const auto &v = dsl::act_vars();
            Halide::RDom r(0, 4);
            Func acc("cm_acc"), o("cm");
            acc(v.c, v.x, v.y) = 0;
            Buffer<int8_t> w(4, 1, 1, 4);
            w.fill(1);
            acc(v.c, v.x, v.y) += (i32(x[0](r, v.x, v.y)) - 120) * i32(w(r, 0, 0, v.c));
            dpu::IntPpe ppe;
            ppe.out_min = 0;
            ppe.out_max = 255;
            o(v.c, v.x, v.y) = requantize(acc(v.c, v.x, v.y), Halide::cast<uint16_t>(v.c + 1),
                                          Expr(uint8_t(0)), ppe, Halide::UInt(8));
            return o;
        });
    EXPECT_THAT(match_error(computed),
                HasSubstr("layer 'cm': the requantization multiplier: is `"));
}

TEST(DpuMatchError, PaddingAndSummationOrder) {
    auto in = u8_input("in", 4, 5, 5);
    // Padding with a value that is not 0 after the zero point.
    dsl::Layer bad_pad = dsl::Layer::make(
        "avg_pool", tensor("bp", 4, 5, 5, ElemType::U8), {in}, [](const std::vector<Func> &x) {
            const auto &v = dsl::act_vars();
            Func p("bp_padded"), acc("bp_acc"), o("bp");
            p(v.c, v.x, v.y) = Halide::select(
                v.x >= 0 && v.x < 5 && v.y >= 0 && v.y < 5,
                i32(x[0](v.c, Halide::clamp(v.x, 0, 4), Halide::clamp(v.y, 0, 4))) - 120, 7);
            Halide::RDom r(0, 3, 0, 3);
            acc(v.c, v.x, v.y) = 0;
            acc(v.c, v.x, v.y) += p(v.c, v.x + r.x - 1, v.y + r.y - 1);
            dpu::IntPpe ppe;
            ppe.out_min = 0;
            ppe.out_max = 255;
            o(v.c, v.x, v.y) = requantize(acc(v.c, v.x, v.y), Expr(uint16_t(1)), Expr(uint8_t(3)),
                                          ppe, Halide::UInt(8));
            return o;
        });
    EXPECT_THAT(match_error(bad_pad),
                HasSubstr("layer 'bp': padded input: pads with 7; padding must contribute 0 to the "
                          "sum"));

    // A padded Func whose boundary is narrower than the input.
    dsl::Layer narrow = dsl::Layer::make(
        "avg_pool", tensor("np", 4, 5, 5, ElemType::U8), {in}, [](const std::vector<Func> &x) {
            const auto &v = dsl::act_vars();
            Func p("np_padded"), acc("np_acc"), o("np");
            p(v.c, v.x, v.y) = Halide::select(
                v.x >= 0 && v.x < 4 && v.y >= 0 && v.y < 5,
                i32(x[0](v.c, Halide::clamp(v.x, 0, 4), Halide::clamp(v.y, 0, 4))) - 120, 0);
            Halide::RDom r(0, 3, 0, 3);
            acc(v.c, v.x, v.y) = 0;
            acc(v.c, v.x, v.y) += p(v.c, v.x + r.x - 1, v.y + r.y - 1);
            dpu::IntPpe ppe;
            ppe.out_min = 0;
            ppe.out_max = 255;
            o(v.c, v.x, v.y) = requantize(acc(v.c, v.x, v.y), Expr(uint16_t(1)), Expr(uint8_t(3)),
                                          ppe, Halide::UInt(8));
            return o;
        });
    EXPECT_THAT(match_error(narrow),
                HasSubstr("layer 'np': padded input 'np_padded': pads x with the guard"));

    // fp16 summed in another order than the DPU's (ky, kx, ic innermost).
    auto f = input("f", 4, 4, 4, ElemType::F16);
    Buffer<Halide::float16_t> w(4, 3, 3, 2);
    w.fill(Halide::float16_t(0.5f));
    dsl::Layer order = dsl::Layer::make(
        "conv2d", tensor("order", 2, 2, 2, ElemType::F16), {f}, [w](const std::vector<Func> &x) {
            const auto &v = dsl::act_vars();
            Halide::RDom r(0, 3, 0, 3, 0, 4); // (kx, ky, ic)
            Func acc("order_acc"), o("order");
            acc(v.c, v.x, v.y) = 0.0f;
            acc(v.c, v.x, v.y) += Halide::cast<float>(x[0](r.z, v.x + r.x, v.y + r.y)) *
                                  Halide::cast<float>(w(r.z, r.x, r.y, v.c));
            o(v.c, v.x, v.y) = apply_float_ppe(acc(v.c, v.x, v.y) * 1.0f, {}, Halide::Float(16));
            return o;
        });
    EXPECT_THAT(match_error(order),
                HasSubstr("reduction domain of 'order_acc': the fp16 sum must run over (ic, kx, "
                          "ky), innermost first"));
}

} // namespace
