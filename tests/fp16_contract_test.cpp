// The fp16 contract (docs/ARCHITECTURE.md, "fp16 results"): a compiled fp16 network gives the
// CPU reference's bits for every DPU operation and every SHAVE kernel. Tested on
// real-valued random data (full 11-bit significands: sums of short exact fractions round
// alike in any order, and would hide a reordered sum), odd shapes, both targets.
#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "algorithms/layers.h"
#include "lowering_fixtures.h"

namespace vpuc {
namespace {

using dsl::ElemType;

// Real-valued weights in [-1, 1), and per-channel scales and biases.
algorithms::FloatWeights real_weights(const std::vector<int> &extents, int oc, uint32_t seed) {
    std::mt19937 rng(seed);
    auto uniform = [&](float lo, float hi) {
        return std::uniform_real_distribution<float>(lo, hi)(rng);
    };
    algorithms::FloatWeights fw;
    fw.weights = test::real_halves(extents, -1, 1, seed);
    for (int c = 0; c < oc; ++c) {
        fw.scale.push_back(uniform(0.3f, 1.7f));
        fw.bias.push_back(uniform(-2, 2));
    }
    return fw;
}

dsl::Layer f16_input(const std::string &name, int64_t c, int64_t w, int64_t h) {
    return dsl::Layer::input(test::activation(name, c, w, h, ElemType::F16));
}

// Compiles `layer` alone, runs it on real-valued inputs and expects the reference within
// `ulps` (0: the same bits) in every output element.
void expect_within(const dsl::Layer &layer, const std::string &target_name, int ulps) {
    SCOPED_TRACE(layer.name() + " on " + target_name);
    test::compile_and_check(dsl::Graph(layer.name(), {layer}), target::load_target(target_name), {},
                            codegen::random_buffer, ulps);
}

class Fp16Contract : public ::testing::TestWithParam<std::string> {};

TEST_P(Fp16Contract, ConvIsExact) {
    dsl::Layer in = f16_input("in", 19, 13, 11);
    algorithms::Conv2dParams p;
    p.pad_left = p.pad_right = p.pad_top = p.pad_bottom = 1;
    expect_within(algorithms::conv2d("conv", in, real_weights({19, 3, 3, 21}, 21, 1), p),
                  GetParam(), 0);
}

TEST_P(Fp16Contract, StridedConvWithLeakyReluIsExact) {
    dsl::Layer in = f16_input("in", 37, 15, 9);
    algorithms::Conv2dParams p;
    p.stride_w = p.stride_h = 2;
    p.pad_left = p.pad_top = 2;
    p.pad_right = p.pad_bottom = 1;
    p.activation = algorithms::Activation::leaky_relu(0.1f);
    expect_within(algorithms::conv2d("conv_s2", in, real_weights({37, 5, 5, 17}, 17, 2), p),
                  GetParam(), 0);
}

TEST_P(Fp16Contract, DepthwiseIsExact) {
    dsl::Layer in = f16_input("in", 23, 14, 9);
    algorithms::Conv2dParams p;
    p.pad_left = p.pad_right = p.pad_top = p.pad_bottom = 2;
    expect_within(algorithms::depthwise_conv2d("dw", in, real_weights({1, 5, 5, 23}, 23, 3), p),
                  GetParam(), 0);
}

TEST_P(Fp16Contract, MatmulIsExact) {
    dsl::Layer in = f16_input("in", 53, 9, 1);
    expect_within(algorithms::matmul("fc", in, real_weights({53, 29}, 29, 4)), GetParam(), 0);
}

TEST_P(Fp16Contract, PoolsAreExact) {
    dsl::Layer in = f16_input("in", 21, 15, 13);
    algorithms::PoolParams p;
    p.kernel_w = p.kernel_h = 3;
    p.stride_w = p.stride_h = 2;
    p.pad_left = p.pad_right = p.pad_top = p.pad_bottom = 1;
    expect_within(algorithms::max_pool("maxpool", in, p), GetParam(), 0);
    expect_within(algorithms::avg_pool("avgpool", in, p), GetParam(), 0);
    p.kernel_w = 5; // a sum of 15 real values, whose rounding depends on its order
    p.pad_left = p.pad_right = 2;
    expect_within(algorithms::avg_pool("avgpool5x3", in, p), GetParam(), 0);
}

TEST_P(Fp16Contract, EltwiseIsExact) {
    dsl::Layer a = f16_input("a", 19, 11, 7), b = f16_input("b", 19, 11, 7);
    for (const auto op :
         {algorithms::EltwiseOp::Add, algorithms::EltwiseOp::Sub, algorithms::EltwiseOp::Mul,
          algorithms::EltwiseOp::Max, algorithms::EltwiseOp::Min})
        expect_within(algorithms::eltwise("eltwise" + std::to_string(int(op)), op, a, b),
                      GetParam(), 0);
}

// SHAVE kernels are compiled with strict_float, as the reference: its bits.
TEST_P(Fp16Contract, ShaveLayersAreBitExact) {
    dsl::Layer in = f16_input("in", 19, 11, 7);
    expect_within(algorithms::sigmoid("sigmoid", in), GetParam(), 0);
    expect_within(algorithms::softmax("softmax", in), GetParam(), 0);
    expect_within(algorithms::softmax("softmax_w", in, dsl::dims::W), GetParam(), 0);
}

INSTANTIATE_TEST_SUITE_P(Targets, Fp16Contract, ::testing::Values("vpu27", "vpu20"));

} // namespace
} // namespace vpuc
