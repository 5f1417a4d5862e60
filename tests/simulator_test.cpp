// The simulator: every task kind, barrier semantics and the timing model's basic properties.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <nlohmann/json.hpp>
#include <random>
#include <set>

#include "dpu_reference.h"
#include "vpu_target/blob_writer.h"
#include "vpu_target/dpu_arith.h"
#include "vpu_target/simulator.h"

using namespace vpuc;
using namespace vpuc::blob;

namespace {

const target::Target &vpu27() {
    static const target::Target t = target::load_target("vpu27");
    return t;
}

std::vector<uint8_t> random_bytes(size_t n, uint32_t seed) {
    std::mt19937 rng(seed);
    std::vector<uint8_t> v(n);
    for (auto &b : v) b = uint8_t(rng());
    return v;
}

sim::RunResult run(const target::Target &t, std::vector<uint8_t> bytes,
                   const std::vector<std::vector<uint8_t>> &inputs,
                   sim::Mode mode = sim::Mode::Functional) {
    sim::Simulator s(t, std::move(bytes));
    return s.run(inputs, mode);
}

const sim::TaskRecord &record(const sim::RunResult &r, const std::string &name) {
    for (const auto &t : r.tasks)
        if (t.name == name) return t;
    throw std::runtime_error("no task " + name);
}

// ---- DMA ------------------------------------------------------------------------------

TEST(SimulatorDma, ContiguousRoundTripThroughCmx) {
    BlobWriter w(vpuc::target::load_target("vpu27"), "roundtrip");
    w.add_input("in", {1000}, DType::U8, Layout::ND);
    w.add_output("out", {1000}, DType::U8, Layout::ND);
    uint32_t b = w.add_barrier(0);
    w.add_dma(0, "load", input_at(0), cmx_at(1, 64), 1000).update(b);
    w.add_dma(1, "store", cmx_at(1, 64), output_at(0), 1000).wait(b);
    auto in = random_bytes(1000, 1);
    auto r = run(vpu27(), w.finish(), {in});
    EXPECT_EQ(r.outputs[0], in);
    EXPECT_GE(record(r, "store").start_ns, record(r, "load").end_ns);
}

TEST(SimulatorDma, StridedChannelSliceAndBroadcast) {
    // An NHWC tensor of 16 channels: channels 4..11 of every pixel go to both tiles' CMX
    // densely, then each tile writes its copy into its half of the output.
    const uint32_t pixels = 50, c = 16, slice = 8;
    BlobWriter w(vpuc::target::load_target("vpu27"), "slice");
    w.add_input("in", {pixels * c}, DType::U8, Layout::ND);
    w.add_output("out", {2 * pixels * slice}, DType::U8, Layout::ND);
    uint32_t b = w.add_barrier(0);
    w.add_dma(0, "slice", input_at(0, 4), {cmx_at(0, 0), cmx_at(1, 256)}, slice,
              {DmaDim(pixels, c, slice)})
        .update(b);
    w.add_dma(0, "out0", cmx_at(0, 0), output_at(0, 0), pixels * slice).wait(b);
    w.add_dma(1, "out1", cmx_at(1, 256), output_at(0, pixels * slice), pixels * slice).wait(b);
    auto in = random_bytes(pixels * c, 2);
    auto r = run(vpu27(), w.finish(), {in});
    for (uint32_t copy = 0; copy < 2; ++copy)
        for (uint32_t p = 0; p < pixels; ++p)
            for (uint32_t ch = 0; ch < slice; ++ch)
                ASSERT_EQ(r.outputs[0][(copy * pixels + p) * slice + ch], in[p * c + 4 + ch]);
}

TEST(SimulatorDma, CmxToCmxBetweenTiles) {
    BlobWriter w(vpuc::target::load_target("vpu27"), "c2c");
    w.add_input("in", {300}, DType::U8, Layout::ND);
    w.add_output("out", {300}, DType::U8, Layout::ND);
    uint32_t b0 = w.add_barrier(0), b1 = w.add_barrier(1);
    w.add_dma(0, "load", input_at(0), cmx_at(0, 0), 300).update(b0);
    w.add_dma(1, "hop", cmx_at(0, 0), cmx_at(1, 4096), 300).wait(b0).update(b1);
    w.add_dma(0, "store", cmx_at(1, 4096), output_at(0), 300).wait(b1);
    auto in = random_bytes(300, 3);
    EXPECT_EQ(run(vpu27(), w.finish(), {in}).outputs[0], in);
}

// ---- DPU ------------------------------------------------------------------------------

struct DpuCase {
    DpuOp op = DpuOp::Conv;
    test::ConvShape shape;
    DType in_dtype = DType::U8;
    DType out_dtype = DType::U8;
    int32_t zp_in = 0, zp_out = 0;
    Activation activation = Activation::None;
    int leaky_mult = 1, leaky_shift = 0, relux_max = 0;
    int clamp_low = INT32_MIN, clamp_high = INT32_MAX;
    std::string mode = "CUBOID_16x16";
    int variants = 1; // split the output rows into this many workloads
};

struct DpuData {
    std::vector<uint8_t> input;
    std::vector<int8_t> weights;
    std::vector<int32_t> bias;
    std::vector<uint16_t> mult;
    std::vector<uint8_t> shift;
};

DpuData random_dpu_data(const DpuCase &c, uint32_t seed) {
    std::mt19937 rng(seed);
    auto uni = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
    const auto &s = c.shape;
    DpuData d;
    d.input.resize(size_t(s.c * s.w * s.h));
    for (auto &v : d.input) v = uint8_t(uni(0, 255));
    bool dw = c.op == DpuOp::DepthwiseConv;
    d.weights.resize(size_t(s.oc * s.k * s.k * (dw ? 1 : s.c)));
    for (auto &v : d.weights) v = int8_t(uni(-128, 127));
    for (int oc = 0; oc < s.oc; ++oc) {
        d.bias.push_back(uni(-5000, 5000));
        d.mult.push_back(uint16_t(uni(1, 1000)));
        d.shift.push_back(uint8_t(uni(12, 18)));
    }
    return d;
}

// DDR input -> CMX, weights and table -> CMX, one DPU task, CMX -> DDR output.
std::vector<uint8_t> dpu_blob(const DpuCase &c, const DpuData &d) {
    const auto &s = c.shape;
    const bool dw = c.op == DpuOp::DepthwiseConv;
    BlobWriter w(vpuc::target::load_target("vpu27"), "dpu");
    w.add_input("in", {1, uint32_t(s.c), uint32_t(s.h), uint32_t(s.w)}, c.in_dtype, Layout::NHWC);
    w.add_output("out", {1, uint32_t(s.oc), uint32_t(s.out_h()), uint32_t(s.out_w())}, c.out_dtype,
                 Layout::NHWC);
    const uint32_t per_channel = uint32_t(s.k * s.k * (dw ? 1 : s.c));
    std::vector<int32_t> table;
    for (int oc = 0; oc < s.oc; ++oc)
        table.insert(table.end(),
                     {int32_t(uint32_t(oc) * per_channel), 0,
                      int32_t(dpu::pack_requant(d.mult[size_t(oc)], d.shift[size_t(oc)])),
                      d.bias[size_t(oc)]});
    uint64_t weights_at = w.add_constant(d.weights), table_at = w.add_constant(table);
    const uint64_t in_cmx = 0, w_cmx = 1 << 18, t_cmx = 1 << 19, out_cmx = 1 << 20;
    uint32_t ready = w.add_barrier(0), done = w.add_barrier(1);
    const uint32_t in_bytes = uint32_t(d.input.size());
    w.add_dma(0, "in", input_at(0), cmx_at(0, in_cmx), in_bytes).update(ready);
    w.add_dma(1, "weights", constant_at(weights_at), cmx_at(0, w_cmx), uint32_t(d.weights.size()))
        .update(ready);
    w.add_dma(1, "table", constant_at(table_at), cmx_at(0, t_cmx), uint32_t(table.size() * 4))
        .update(ready);

    DpuTaskT t;
    t.op = c.op;
    t.kernel_w = t.kernel_h = uint8_t(s.k);
    t.stride_w = t.stride_h = uint8_t(s.stride);
    t.pad_left = t.pad_right = t.pad_top = t.pad_bottom = uint8_t(s.pad);
    t.input = std::make_unique<TensorRefT>(nhwc(cmx_at(0, in_cmx), c.in_dtype, uint32_t(s.c),
                                                uint32_t(s.w), uint32_t(s.h), 1, c.zp_in));
    bool has_weights = c.op == DpuOp::Conv || dw || c.op == DpuOp::MatMul;
    if (has_weights) {
        t.weights = std::make_unique<TensorRefT>(
            dw ? dense(cmx_at(0, w_cmx), DType::I8,
                       {1, uint32_t(s.k), uint32_t(s.k), uint32_t(s.oc)})
               : dense(cmx_at(0, w_cmx), DType::I8,
                       {uint32_t(s.c), uint32_t(s.k), uint32_t(s.k), uint32_t(s.oc)}));
        t.weight_table =
            std::make_unique<TensorRefT>(dense(cmx_at(0, t_cmx), DType::I32, {4, uint32_t(s.oc)}));
    }
    t.output =
        std::make_unique<TensorRefT>(nhwc(cmx_at(0, out_cmx), c.out_dtype, uint32_t(s.oc),
                                          uint32_t(s.out_w()), uint32_t(s.out_h()), 1, c.zp_out));
    t.ppe = std::make_unique<PpeT>();
    t.ppe->activation = c.activation;
    t.ppe->leaky_mult = c.leaky_mult;
    t.ppe->leaky_shift = uint8_t(c.leaky_shift);
    t.ppe->relux_max = c.relux_max;
    t.ppe->clamp_low = c.clamp_low;
    t.ppe->clamp_high = c.clamp_high;
    t.ppe->mult = d.mult[0];
    t.ppe->shift = d.shift[0];
    t.ppe->bias = d.bias[0];
    for (int v = 0; v < c.variants; ++v) {
        uint32_t y0 = uint32_t(s.out_h() * v / c.variants),
                 y1 = uint32_t(s.out_h() * (v + 1) / c.variants);
        t.variants.push_back(std::make_unique<DpuVariantT>(
            variant({0, y0, 0}, {uint32_t(s.out_w()), y1, uint32_t(s.oc)}, c.mode)));
    }
    w.add_dpu(0, 0, "dpu", std::move(t)).wait(ready).update(done);
    uint32_t out_bytes = uint32_t(s.oc * s.out_w() * s.out_h() * dtype_bytes(c.out_dtype));
    w.add_dma(0, "out", cmx_at(0, out_cmx), output_at(0), out_bytes).wait(done);
    return w.finish();
}

dpu::IntPpe int_ppe(const DpuCase &c) {
    dpu::IntPpe p;
    p.activation = dpu::Activation(int(c.activation));
    p.relux_max = c.relux_max;
    p.leaky_mult = c.leaky_mult;
    p.leaky_shift = c.leaky_shift;
    p.clamp_low = c.clamp_low;
    p.clamp_high = c.clamp_high;
    p.out_zero_point = c.zp_out;
    if (c.out_dtype == DType::U8) p.out_min = 0, p.out_max = 255;
    return p;
}

std::vector<int32_t> as_ints(const std::vector<uint8_t> &bytes, DType t) {
    std::vector<int32_t> v;
    for (uint8_t b : bytes) v.push_back(t == DType::I8 ? int32_t(int8_t(b)) : int32_t(b));
    return v;
}

void expect_conv_matches(const DpuCase &c, uint32_t seed) {
    DpuData d = random_dpu_data(c, seed);
    auto r = run(vpu27(), dpu_blob(c, d), {d.input});
    auto expected =
        test::reference_conv(c.shape, d.input, c.in_dtype == DType::I8, c.zp_in, d.weights, d.bias,
                             d.mult, d.shift, int_ppe(c), c.op == DpuOp::DepthwiseConv);
    EXPECT_EQ(as_ints(r.outputs[0], c.out_dtype), expected);
}

TEST(SimulatorDpu, ConvInt8BitExact) {
    DpuCase c;
    c.zp_in = 128;
    expect_conv_matches(c, 1);
}

TEST(SimulatorDpu, ConvStride2SignedWithVariantsAndModes) {
    DpuCase c;
    c.shape = {32, 15, 11, 48, 3, 2, 1};
    c.in_dtype = DType::I8;
    c.out_dtype = DType::I8;
    c.zp_out = -3;
    c.activation = Activation::Relu;
    c.mode = "CUBOID_4x16";
    c.variants = 3;
    expect_conv_matches(c, 2);
}

TEST(SimulatorDpu, ConvLeakyReluAndClamp) {
    DpuCase c;
    c.shape = {16, 9, 7, 16, 5, 1, 2};
    c.activation = Activation::LeakyRelu;
    c.leaky_mult = 13;
    c.leaky_shift = 7;
    c.in_dtype = DType::I8;
    c.out_dtype = DType::I8;
    c.clamp_low = -50;
    c.clamp_high = 90;
    expect_conv_matches(c, 3);
}

TEST(SimulatorDpu, ConvReluX) {
    DpuCase c;
    c.zp_in = 100;
    c.activation = Activation::ReluX;
    c.relux_max = 60;
    expect_conv_matches(c, 4);
}

TEST(SimulatorDpu, MatMulIsAOneByOneConv) {
    DpuCase c;
    c.op = DpuOp::MatMul;
    c.shape = {64, 12, 1, 32, 1, 1, 0};
    c.zp_in = 7;
    expect_conv_matches(c, 5);
}

TEST(SimulatorDpu, DepthwiseConvBitExact) {
    DpuCase c;
    c.op = DpuOp::DepthwiseConv;
    c.shape = {32, 10, 9, 32, 3, 2, 1};
    c.zp_in = 128;
    c.mode = "CUBOID_8x16";
    expect_conv_matches(c, 6);
}

// Pools and eltwise scale by the PPE's per-tensor mult/shift/bias.
TEST(SimulatorDpu, MaxAndAvgPoolBitExact) {
    for (DpuOp op : {DpuOp::MaxPool, DpuOp::AvgPool}) {
        DpuCase c;
        c.op = op;
        c.shape = {16, 9, 8, 16, 3, 2, 1};
        c.zp_in = 128;
        c.zp_out = 128;
        DpuData d = random_dpu_data(c, 7);
        auto r = run(vpu27(), dpu_blob(c, d), {d.input});
        const auto &s = c.shape;
        dpu::IntPpe ppe = int_ppe(c);
        for (int y = 0; y < s.out_h(); ++y)
            for (int x = 0; x < s.out_w(); ++x)
                for (int ch = 0; ch < s.c; ++ch) {
                    int32_t acc = 0;
                    bool any = false;
                    for (int ky = 0; ky < s.k; ++ky)
                        for (int kx = 0; kx < s.k; ++kx) {
                            int iy = y * s.stride - s.pad + ky, ix = x * s.stride - s.pad + kx;
                            if (iy < 0 || iy >= s.h || ix < 0 || ix >= s.w) continue;
                            int32_t v = d.input[size_t((iy * s.w + ix) * s.c + ch)] - c.zp_in;
                            acc = op == DpuOp::MaxPool ? (any ? std::max(acc, v) : v) : acc + v;
                            any = true;
                        }
                    int32_t want = dpu::requantize(acc + d.bias[0], d.mult[0], d.shift[0], ppe);
                    ASSERT_EQ(r.outputs[0][size_t((y * s.out_w() + x) * s.c + ch)], want)
                        << EnumNameDpuOp(op) << " at " << x << "," << y << "," << ch;
                }
    }
}

TEST(SimulatorDpu, EltwiseAddWithInputMultipliers) {
    const uint32_t c = 32, wd = 6, h = 5, n = c * wd * h;
    BlobWriter w(vpuc::target::load_target("vpu27"), "eltwise");
    w.add_input("a", {1, c, h, wd}, DType::U8, Layout::NHWC);
    w.add_input("b", {1, c, h, wd}, DType::U8, Layout::NHWC);
    w.add_output("out", {1, c, h, wd}, DType::I8, Layout::NHWC);
    uint32_t ready = w.add_barrier(0), done = w.add_barrier(1);
    w.add_dma(0, "a", input_at(0), cmx_at(1, 0), n).update(ready);
    w.add_dma(1, "b", input_at(1), cmx_at(1, 8192), n).update(ready);
    DpuTaskT t;
    t.op = DpuOp::Eltwise;
    t.input = std::make_unique<TensorRefT>(nhwc(cmx_at(1, 0), DType::U8, c, wd, h, 1, 120));
    t.input2 = std::make_unique<TensorRefT>(nhwc(cmx_at(1, 8192), DType::U8, c, wd, h, 1, 5));
    t.output = std::make_unique<TensorRefT>(nhwc(cmx_at(1, 16384), DType::I8, c, wd, h, 1, 3));
    t.ppe = std::make_unique<PpeT>();
    t.ppe->in1_mult = 3;
    t.ppe->in2_mult = 5;
    t.ppe->mult = 11;
    t.ppe->shift = 4;
    t.ppe->bias = 9;
    t.variants.push_back(
        std::make_unique<DpuVariantT>(variant({0, 0, 0}, {wd, h, c}, "CUBOID_16x16")));
    w.add_dpu(1, 0, "add", std::move(t)).wait(ready).update(done);
    w.add_dma(0, "out", cmx_at(1, 16384), output_at(0), n).wait(done);
    auto a = random_bytes(n, 8), b = random_bytes(n, 9);
    auto r = run(vpu27(), w.finish(), {a, b});
    dpu::IntPpe ppe;
    ppe.out_zero_point = 3;
    for (uint32_t i = 0; i < n; ++i) {
        int32_t acc = (int32_t(a[i]) - 120) * 3 + (int32_t(b[i]) - 5) * 5 + 9;
        ASSERT_EQ(int8_t(r.outputs[0][i]), dpu::requantize(acc, 11, 4, ppe)) << i;
    }
}

TEST(SimulatorDpu, Fp16ConvWithinTolerance) {
    const int c = 32, wd = 7, h = 6, oc = 16, k = 3;
    std::mt19937 rng(10);
    std::uniform_real_distribution<float> uni(-1.0f, 1.0f);
    std::vector<uint16_t> in(size_t(c * wd * h)), weights(size_t(oc * k * k * c));
    for (auto &v : in) v = fp16::from_float(uni(rng));
    for (auto &v : weights) v = fp16::from_float(uni(rng) * 0.2f);
    std::vector<float> scale(oc), bias(oc);
    for (int o = 0; o < oc; ++o)
        scale[size_t(o)] = 0.5f + 0.1f * float(o), bias[size_t(o)] = uni(rng);

    BlobWriter w(vpuc::target::load_target("vpu27"), "fp16");
    w.add_input("in", {1, uint32_t(c), uint32_t(h), uint32_t(wd)}, DType::F16, Layout::NHWC);
    w.add_output("out", {1, uint32_t(oc), uint32_t(h), uint32_t(wd)}, DType::F16, Layout::NHWC);
    std::vector<int32_t> table;
    for (int o = 0; o < oc; ++o)
        table.insert(table.end(),
                     {o * k * k * c * 2, 0, int32_t(fp16::float_bits(scale[size_t(o)])),
                      int32_t(fp16::float_bits(bias[size_t(o)]))});
    uint64_t w_at = w.add_constant(weights), t_at = w.add_constant(table);
    uint32_t ready = w.add_barrier(0), done = w.add_barrier(1);
    w.add_dma(0, "in", input_at(0), cmx_at(0, 0), uint32_t(in.size() * 2)).update(ready);
    w.add_dma(0, "w", constant_at(w_at), cmx_at(0, 65536), uint32_t(weights.size() * 2))
        .update(ready);
    w.add_dma(0, "t", constant_at(t_at), cmx_at(0, 131072), uint32_t(table.size() * 4))
        .update(ready);
    DpuTaskT t;
    t.op = DpuOp::Conv;
    t.kernel_w = t.kernel_h = k;
    t.pad_left = t.pad_right = t.pad_top = t.pad_bottom = 1;
    t.input = std::make_unique<TensorRefT>(nhwc(cmx_at(0, 0), DType::F16, c, wd, h));
    t.weights = std::make_unique<TensorRefT>(dense(cmx_at(0, 65536), DType::F16, {c, k, k, oc}));
    t.weight_table = std::make_unique<TensorRefT>(dense(cmx_at(0, 131072), DType::I32, {4, oc}));
    t.output = std::make_unique<TensorRefT>(nhwc(cmx_at(0, 196608), DType::F16, oc, wd, h));
    t.ppe = std::make_unique<PpeT>();
    t.ppe->activation = Activation::Relu;
    t.variants.push_back(
        std::make_unique<DpuVariantT>(variant({0, 0, 0}, {wd, h, oc}, "CUBOID_16x16")));
    w.add_dpu(0, 0, "conv", std::move(t)).wait(ready).update(done);
    w.add_dma(0, "out", cmx_at(0, 196608), output_at(0), uint32_t(oc * wd * h * 2)).wait(done);
    std::vector<uint8_t> in_bytes(in.size() * 2);
    std::memcpy(in_bytes.data(), in.data(), in_bytes.size());
    auto r = run(vpu27(), w.finish(), {in_bytes});

    // Tolerance: fp32 accumulation in a fixed order, then one fp16 rounding: within 2 fp16
    // ulps of the double-precision result.
    for (int y = 0; y < h; ++y)
        for (int x = 0; x < wd; ++x)
            for (int o = 0; o < oc; ++o) {
                double acc = 0;
                for (int ky = 0; ky < k; ++ky)
                    for (int kx = 0; kx < k; ++kx) {
                        int iy = y - 1 + ky, ix = x - 1 + kx;
                        if (iy < 0 || iy >= h || ix < 0 || ix >= wd) continue;
                        for (int ic = 0; ic < c; ++ic)
                            acc +=
                                double(fp16::to_float(in[size_t((iy * wd + ix) * c + ic)])) *
                                fp16::to_float(weights[size_t(((o * k + ky) * k + kx) * c + ic)]);
                    }
                double want = std::max(0.0, (acc + bias[size_t(o)]) * scale[size_t(o)]);
                uint16_t got_bits;
                std::memcpy(&got_bits, &r.outputs[0][size_t(((y * wd + x) * oc + o) * 2)], 2);
                double got = fp16::to_float(got_bits);
                double ulp = std::max(std::abs(want), 6.1e-5) * std::pow(2.0, -10);
                ASSERT_NEAR(got, want, 2 * ulp) << x << "," << y << "," << o;
            }
}

// The verifier follows the weight table from the constant section into CMX: a weights offset
// that would make the DPU read outside memory is refused before anything runs.
TEST(SimulatorDpu, WeightTablePointerOutsideMemoryIsRefused) {
    DpuCase c;
    DpuData d = random_dpu_data(c, 11);
    auto bytes = dpu_blob(c, d);
    // Corrupt the weights offset of channel 3 in the constant table before it reaches CMX.
    auto blob = UnPackBlob(bytes.data());
    const size_t table_at = (d.weights.size() + 63) / 64 * 64;
    int32_t bad = 0x7ffffff0;
    std::memcpy(&blob->constants[table_at + 3 * 16], &bad, 4);
    try {
        run(vpu27(), pack(*blob), {d.input});
        FAIL() << "expected a BlobError";
    } catch (const BlobError &e) {
        EXPECT_EQ(std::string(e.what()),
                  "task 'dpu' (DPU queue tile 0 dpu 0): weight_table: entry 3: weights offset "
                  "2147483632 puts the 144 bytes of the channel's weights past the end of CMX "
                  "tile 0 (2097152 bytes)");
    }
}

// ---- Barriers -------------------------------------------------------------------------

TEST(SimulatorBarriers, PhysicalBarriersAreReusedAfterRelease) {
    // A chain of 8 copies bouncing between the tiles, on alternating engines, using only two
    // physical barriers: each is reused as soon as its previous use was consumed.
    BlobWriter w(vpuc::target::load_target("vpu27"), "chain");
    w.add_input("in", {512}, DType::U8, Layout::ND);
    w.add_output("out", {512}, DType::U8, Layout::ND);
    const int hops = 8;
    uint32_t prev = w.add_barrier(0);
    w.add_dma(0, "hop0", input_at(0), cmx_at(0, 0), 512).update(prev);
    for (int i = 1; i < hops; ++i) {
        uint32_t next = w.add_barrier(uint16_t(i % 2));
        w.add_dma(uint32_t(i % 2), "hop" + std::to_string(i), cmx_at(uint32_t((i - 1) % 2), 0),
                  cmx_at(uint32_t(i % 2), 0), 512)
            .wait(prev)
            .update(next);
        prev = next;
    }
    w.add_dma(0, "store", cmx_at(uint32_t((hops - 1) % 2), 0), output_at(0), 512).wait(prev);
    auto in = random_bytes(512, 12);
    auto r = run(vpu27(), w.finish(), {in});
    EXPECT_EQ(r.outputs[0], in);
    for (int i = 1; i < hops; ++i)
        EXPECT_GE(record(r, "hop" + std::to_string(i)).start_ns,
                  record(r, "hop" + std::to_string(i - 1)).end_ns);
}

TEST(SimulatorBarriers, ConsumerWaitsForAllProducers) {
    BlobWriter w(vpuc::target::load_target("vpu27"), "join");
    w.add_input("in", {65536}, DType::U8, Layout::ND);
    w.add_output("out", {16}, DType::U8, Layout::ND);
    uint32_t b = w.add_barrier(5);
    w.add_dma(0, "small", input_at(0), cmx_at(0, 0), 16).update(b);
    w.add_dma(1, "large", input_at(0), cmx_at(1, 0), 65536).update(b);
    w.add_dma(0, "after", cmx_at(0, 0), output_at(0), 16).wait(b);
    auto r = run(vpu27(), w.finish(), {random_bytes(65536, 13)});
    EXPECT_GE(record(r, "after").start_ns, record(r, "large").end_ns);
    EXPECT_GT(record(r, "large").end_ns, record(r, "small").end_ns);
}

// ---- Timing ---------------------------------------------------------------------------

DpuCase big_conv() {
    DpuCase c;
    c.shape = {64, 28, 28, 64, 3, 1, 1};
    return c;
}

TEST(SimulatorTiming, DmaOverlapsCompute) {
    // The DPU conv and an unrelated 256 KB DMA on the other engine run at the same time.
    DpuCase c = big_conv();
    DpuData d = random_dpu_data(c, 14);
    auto base = UnPackBlob(dpu_blob(c, d).data());
    auto only_conv = run(vpu27(), pack(*base), {d.input}, sim::Mode::TimingOnly);
    const auto &conv = record(only_conv, "dpu");

    BlobWriter w(vpuc::target::load_target("vpu27"), "overlap");
    w.blob() = *base;
    w.blob().header->ddr_scratch_bytes = 1 << 18;
    w.add_dma(1, "unrelated", scratch_at(0), cmx_at(1, 0), 1 << 18);
    auto both = run(vpu27(), w.finish(), {d.input}, sim::Mode::TimingOnly);
    const auto &dma = record(both, "unrelated");
    const auto &conv2 = record(both, "dpu");
    EXPECT_LT(dma.start_ns, conv2.end_ns);
    EXPECT_GT(dma.end_ns, conv2.start_ns);
    double dpu_ns = conv.end_ns - conv.start_ns, dma_ns = dma.end_ns - dma.start_ns;
    EXPECT_LT(both.latency_ns, only_conv.latency_ns + dma_ns);
    EXPECT_GT(dpu_ns, 0);
}

TEST(SimulatorTiming, TwoTilesRunInParallel) {
    // The same conv twice: on one tile it runs twice in a row, on two tiles at once.
    auto conv_blob = [](bool two_tiles) {
        BlobWriter w(vpuc::target::load_target("vpu27"), "par");
        for (int i = 0; i < 2; ++i) {
            DpuTaskT t;
            uint32_t tile = two_tiles ? uint32_t(i) : 0;
            t.op = DpuOp::MaxPool;
            t.kernel_w = t.kernel_h = 3;
            t.pad_left = t.pad_right = t.pad_top = t.pad_bottom = 1;
            t.input = std::make_unique<TensorRefT>(nhwc(cmx_at(tile, 0), DType::U8, 64, 28, 28));
            t.output =
                std::make_unique<TensorRefT>(nhwc(cmx_at(tile, 1 << 20), DType::U8, 64, 28, 28));
            t.variants.push_back(
                std::make_unique<DpuVariantT>(variant({0, 0, 0}, {28, 28, 64}, "CUBOID_16x16")));
            w.add_dpu(tile, 0, "pool" + std::to_string(i), std::move(t));
        }
        return w.finish();
    };
    auto one = run(vpu27(), conv_blob(false), {}, sim::Mode::TimingOnly);
    auto two = run(vpu27(), conv_blob(true), {}, sim::Mode::TimingOnly);
    EXPECT_NEAR(two.latency_ns * 2, one.latency_ns, one.latency_ns * 1e-9);
    EXPECT_DOUBLE_EQ(record(two, "pool0").start_ns, record(two, "pool1").start_ns);
}

std::vector<uint8_t> dma_bound_blob() {
    BlobWriter w(vpuc::target::load_target("vpu27"), "dma_bound");
    w.add_input("in", {1 << 20}, DType::U8, Layout::ND);
    w.add_output("out", {1 << 20}, DType::U8, Layout::ND);
    uint32_t b = w.add_barrier(0);
    w.add_dma(0, "load0", input_at(0), cmx_at(0, 0), 1 << 19).update(b);
    w.add_dma(1, "load1", input_at(0, 1 << 19), cmx_at(1, 0), 1 << 19).update(b);
    w.add_dma(0, "store0", cmx_at(0, 0), output_at(0), 1 << 19).wait(b);
    w.add_dma(1, "store1", cmx_at(1, 0), output_at(0, 1 << 19), 1 << 19).wait(b);
    return w.finish();
}

TEST(SimulatorTiming, SlowerDdrMakesDmaBoundBlobsSlower) {
    target::Target slow = vpu27();
    slow.ddr_bandwidth_gbps /= 2;
    auto fast_run = run(vpu27(), dma_bound_blob(), {}, sim::Mode::TimingOnly);
    auto slow_run = run(slow, dma_bound_blob(), {}, sim::Mode::TimingOnly);
    EXPECT_GT(slow_run.latency_ns, fast_run.latency_ns * 1.5);
}

TEST(SimulatorTiming, DmaEnginesShareDdrBandwidth) {
    BlobWriter alone(vpuc::target::load_target("vpu27"), "alone");
    alone.add_input("in", {1 << 20}, DType::U8, Layout::ND);
    alone.add_dma(0, "load0", input_at(0), cmx_at(0, 0), 1 << 19);
    auto a = run(vpu27(), alone.finish(), {}, sim::Mode::TimingOnly);
    auto both = run(vpu27(), dma_bound_blob(), {}, sim::Mode::TimingOnly);
    double alone_ns = record(a, "load0").end_ns - record(a, "load0").start_ns;
    double shared_ns = record(both, "load0").end_ns - record(both, "load0").start_ns;
    EXPECT_GT(shared_ns, alone_ns * 1.3);
}

TEST(SimulatorTiming, TimingOnlyMatchesFunctionalTimingAndRunsAreDeterministic) {
    DpuCase c = big_conv();
    DpuData d = random_dpu_data(c, 15);
    auto bytes = dpu_blob(c, d);
    auto f1 = run(vpu27(), bytes, {d.input});
    auto f2 = run(vpu27(), bytes, {d.input});
    auto t = run(vpu27(), bytes, {}, sim::Mode::TimingOnly);
    EXPECT_EQ(f1.outputs, f2.outputs);
    EXPECT_EQ(f1.latency_ns, f2.latency_ns);
    EXPECT_EQ(f1.latency_ns, t.latency_ns);
    EXPECT_TRUE(t.outputs.empty());
}

TEST(SimulatorTrace, ValidJsonWithOneTrackPerEngine) {
    auto r = run(vpu27(), dma_bound_blob(), {}, sim::Mode::TimingOnly);
    auto doc = nlohmann::json::parse(sim::chrome_trace_json(r, "t"));
    std::set<int> tracks, used;
    for (const auto &e : doc["traceEvents"]) {
        if (e["ph"] == "M" && e["name"] == "thread_name") tracks.insert(e["tid"].get<int>());
        if (e["ph"] == "X") {
            used.insert(e["tid"].get<int>());
            EXPECT_GE(e["dur"].get<double>(), 0);
        }
    }
    EXPECT_EQ(tracks.size(), r.engines.size());
    EXPECT_EQ(used.size(), 2u); // both DMA engines
    for (int tid : used) EXPECT_TRUE(tracks.count(tid));
}

} // namespace
