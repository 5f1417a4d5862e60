// What the lowering's tests share: small layers with deterministic constants, random inputs,
// and "compile, run on the simulator, compare with the CPU reference byte for byte".
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "algorithms/layers.h"
#include "algorithms/reference.h"
#include "codegen/check.h"
#include "codegen/lower.h"
#include "dsl/registry.h"
#include "vpu_target/simulator.h"

namespace vpuc::test {

// A 1xCxHxW NHWC activation: u8 quantized (0.05, 120), or `type` unquantized.
inline dsl::TensorDesc activation(const std::string &name, int64_t c, int64_t w, int64_t h,
                                  dsl::ElemType type = dsl::ElemType::U8) {
    dsl::TensorDesc t;
    t.name = name;
    t.shape = dsl::Shape({1, c, h, w});
    t.type = type;
    if (type == dsl::ElemType::U8) t.quant = dsl::Quant::per_tensor(0.05f, 120);
    t.order = dsl::DimsOrder::NHWC();
    return t;
}

// int8 weights (ic, k, k, oc) in [-100, 100] with per-channel bias and requantization, u8
// output: spread over the output range, so a wrong region or halo shows in many bytes.
inline algorithms::QuantWeights weights(int ic, int k, int oc, uint32_t seed) {
    std::mt19937 rng(seed);
    auto uni = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
    algorithms::QuantWeights qw;
    qw.weights = Halide::Buffer<int8_t>(ic, k, k, oc);
    qw.weights.for_each_value([&](int8_t &v) { v = int8_t(uni(-100, 100)); });
    qw.zero_point = 0;
    for (int c = 0; c < oc; ++c) {
        qw.bias.push_back(uni(-2000, 2000));
        qw.requant.push_back(algorithms::fixed_point(0.004 + 0.0003 * c));
    }
    qw.output_type = dsl::ElemType::U8;
    qw.output_quant = dsl::Quant::per_tensor(0.05f, 10);
    return qw;
}

// A 3x3 conv, padding 1, with ReLU fused unless `fused_relu` is false.
inline dsl::Layer conv3x3(const std::string &name, const dsl::Layer &in, int oc, uint32_t seed,
                          bool fused_relu = true) {
    algorithms::Conv2dParams p;
    p.pad_left = p.pad_right = p.pad_top = p.pad_bottom = 1;
    if (fused_relu) p.activation = algorithms::Activation::relu();
    const int ic = int(in.output().shape[dsl::dims::C]);
    return algorithms::conv2d(name, in, weights(ic, 3, oc, seed), p);
}

// A 3x3 max pool with stride 1 and padding 1: its output the size of its input.
inline dsl::Layer max_pool3x3(const std::string &name, const dsl::Layer &in) {
    algorithms::PoolParams pool;
    pool.kernel_w = pool.kernel_h = 3;
    pool.pad_left = pool.pad_right = pool.pad_top = pool.pad_bottom = 1;
    return algorithms::max_pool(name, in, pool);
}

// A constant of one dimension of i64 values, as ONNX shape arithmetic has them.
inline dsl::Layer i64_constant(const std::string &name, const std::vector<int64_t> &values) {
    Halide::Buffer<int64_t> b(int(values.size()));
    for (size_t i = 0; i < values.size(); ++i) b(int(i)) = values[i];
    return dsl::LayerRegistry::constant(name, b);
}

inline std::vector<uint8_t> bytes_of(const Halide::Buffer<> &b) {
    const auto *p = static_cast<const uint8_t *>(b.raw_buffer()->host);
    return std::vector<uint8_t>(p, p + b.size_in_bytes());
}

// Random bytes for integer inputs; values in [-4, 4) for f16 ones.
inline Halide::Buffer<> random_input(const dsl::TensorDesc &t, uint32_t seed) {
    Halide::Buffer<> b = algorithms::make_buffer(t);
    std::mt19937 rng(seed);
    if (t.type == dsl::ElemType::F16) {
        Halide::Buffer<Halide::float16_t> halves(b);
        halves.for_each_value(
            [&](Halide::float16_t &v) { v = Halide::float16_t(float(rng() % 256) / 32 - 4); });
    } else {
        auto *bytes = static_cast<uint8_t *>(b.raw_buffer()->host);
        for (size_t i = 0; i < b.size_in_bytes(); ++i) bytes[i] = uint8_t(rng());
    }
    return b;
}

// Real values in [lo, hi) rounded to fp16: full significands, so that sums in different
// orders round differently (sums of short exact fractions round alike in any order).
inline Halide::Buffer<Halide::float16_t> real_halves(const std::vector<int> &extents, float lo,
                                                     float hi, uint32_t seed) {
    std::mt19937 rng(seed);
    std::uniform_real_distribution<float> uniform(lo, hi);
    Halide::Buffer<Halide::float16_t> b(extents);
    b.for_each_value([&](Halide::float16_t &v) { v = Halide::float16_t(uniform(rng)); });
    return b;
}

// The ops per output vector the blob's kernel for `layer` counts (kernels are named after
// their layers).
inline float kernel_ops(const std::vector<uint8_t> &blob, const std::string &layer) {
    for (const auto *kernel : *blob::GetBlob(blob.data())->kernels())
        if (kernel->name()->str().find("_" + layer) != std::string::npos)
            return kernel->arith_ops_per_vector() + kernel->special_ops_per_vector();
    ADD_FAILURE() << "no kernel for layer '" << layer << "'";
    return 0;
}

struct Checked {
    std::vector<uint8_t> blob;
    sim::RunResult result;
};

// Compiles `graph` (lower() verifies the blob), runs it on inputs from `make_input` (random by
// default) and compares every output with the CPU reference (codegen::check_against_reference):
// byte for byte, or for fp16 outputs within `f16_ulps`.
inline Checked compile_and_check(const dsl::Graph &graph, const target::Target &target,
                                 const codegen::LowerOptions &options = {},
                                 Halide::Buffer<> (*make_input)(const dsl::TensorDesc &,
                                                                uint32_t) = random_input,
                                 int f16_ulps = 0) {
    codegen::CheckOptions check;
    uint32_t seed = 7;
    for (const auto &in : graph.inputs()) check.inputs.push_back(make_input(in.output(), seed++));
    check.tolerance.f16_ulp = f16_ulps;
    check.lower = options;
    codegen::CheckResult r = codegen::check_against_reference(graph, target, check);
    EXPECT_EQ(r.run.outputs.size(), graph.outputs().size());
    EXPECT_TRUE(r.ok()) << graph.name() << ":\n" << r.report();
    return {std::move(r.blob), std::move(r.run)};
}

inline Checked compile_and_check(const dsl::Graph &graph, const std::string &target_name) {
    return compile_and_check(graph, target::load_target(target_name));
}

} // namespace vpuc::test
