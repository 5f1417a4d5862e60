// Kernels beyond the DPU's limits (the target's dpu.max_kernel, counting a dilated kernel's
// span, and dpu.max_stride): the matcher refuses them for that target, engine Auto puts them on
// the SHAVEs with a note in the lowering log, and on_dpu() on them is an error naming the layer
// and the limit.
#include <gtest/gtest.h>

#include <sstream>
#include <string>

#include "algorithms/layers.h"
#include "codegen/dpu_match.h"
#include "codegen/lower.h"
#include "lowering_fixtures.h"

namespace vpuc {
namespace {

using dsl::ElemType;

// A depthwise conv of `kernel` x `kernel` taps dilated by `dilation`, padded to keep the size,
// over an odd-sized input of 21 channels: int8 (u8 in and out) or fp16 (real-valued weights).
dsl::Layer depthwise(const std::string &name, ElemType type, int kernel, int dilation) {
    const int c = 21, span = (kernel - 1) * dilation + 1;
    dsl::Layer in = dsl::Layer::input(test::activation("in", c, 19, 17, type));
    algorithms::Conv2dParams p;
    p.dilation_w = p.dilation_h = dilation;
    p.pad_left = p.pad_top = span / 2;
    p.pad_right = p.pad_bottom = span - 1 - span / 2;
    p.activation = algorithms::Activation::relu();
    if (type == ElemType::F16) {
        algorithms::FloatWeights fw;
        fw.weights = test::real_halves({1, kernel, kernel, c}, -0.5f, 0.5f, 5);
        for (int i = 0; i < c; ++i) {
            fw.scale.push_back(0.75f + 0.01f * float(i));
            fw.bias.push_back(0.1f * float(i % 7) - 0.3f);
        }
        return algorithms::depthwise_conv2d(name, in, fw, p);
    }
    algorithms::QuantWeights qw = test::weights(1, kernel, c, 6);
    qw.zero_point = 2;
    return algorithms::depthwise_conv2d(name, in, qw, p);
}

struct Beyond {
    int kernel, dilation;
    std::string why; // the part of the matcher's reason naming the window
};

const Beyond kBeyond[] = {{5, 3, "kernel 5x5 dilated by 3 spans 13x13"}, {13, 1, "kernel 13x13;"}};

class DpuLimits : public ::testing::TestWithParam<std::string> {};

// Engine Auto: the SHAVEs compute the layer, bit-exactly, and the log says why.
TEST_P(DpuLimits, AutoRunsKernelsBeyondTheDpuOnTheShaves) {
    const target::Target target = target::load_target(GetParam());
    for (const Beyond &b : kBeyond)
        for (const ElemType type : {ElemType::U8, ElemType::F16}) {
            const dsl::Layer dw = depthwise("dw", type, b.kernel, b.dilation);
            SCOPED_TRACE(b.why + (type == ElemType::F16 ? " fp16" : " u8"));
            std::ostringstream log;
            codegen::LowerOptions options;
            options.log = &log;
            // fp16 on the SHAVEs: within one ulp (docs/ARCHITECTURE.md, "fp16 results").
            test::compile_and_check(dsl::Graph("beyond", {dw}), target, options,
                                    codegen::random_buffer, 1);
            EXPECT_NE(log.str().find("note: SHAVE kernel for layer 'dw': " + b.why),
                      std::string::npos)
                << log.str();
            EXPECT_NE(log.str().find("the DPU of target '" + target.name +
                                     "' takes kernels of at most 11x11 (dpu.max_kernel)"),
                      std::string::npos)
                << log.str();
        }
}

// on_dpu(): an error naming the layer, its window and the target's limit.
TEST_P(DpuLimits, OnDpuBeyondTheDpuIsAnError) {
    const target::Target target = target::load_target(GetParam());
    for (const Beyond &b : kBeyond) {
        dsl::Layer dw = depthwise("dw", ElemType::U8, b.kernel, b.dilation);
        dw.schedule().on_dpu();
        try {
            codegen::lower(dsl::Graph("beyond", {dw}), target);
            ADD_FAILURE() << b.why << ": compiled";
        } catch (const codegen::DpuMatchError &e) {
            const std::string message = e.what();
            EXPECT_EQ(message.rfind("layer 'dw': " + b.why, 0), 0u) << message;
            EXPECT_NE(message.find("at most 11x11 (dpu.max_kernel)"), std::string::npos) << message;
        }
    }
}

// Windows up to the limit stay on the DPU: an 11x11 kernel, and 6x6 dilated by 2 (span 11).
TEST_P(DpuLimits, KernelsUpToTheLimitRunOnTheDpu) {
    const target::Target target = target::load_target(GetParam());
    for (const auto &[kernel, dilation] : {std::pair{11, 1}, std::pair{6, 2}}) {
        const dsl::Layer dw = depthwise("dw", ElemType::U8, kernel, dilation);
        SCOPED_TRACE(std::to_string(kernel) + " dilation " + std::to_string(dilation));
        std::string why;
        EXPECT_TRUE(codegen::try_match_dpu(dw, target, &why)) << why;
        std::ostringstream log;
        codegen::LowerOptions options;
        options.log = &log;
        test::compile_and_check(dsl::Graph("limit", {dw}), target, options, codegen::random_buffer);
        EXPECT_EQ(log.str().find("note: "), std::string::npos) << log.str();
    }
}

INSTANTIATE_TEST_SUITE_P(Targets, DpuLimits, ::testing::Values("vpu27", "vpu20"));

// The limits are the target's figures, not constants of the compiler.
TEST(DpuLimits, ComeFromTheTargetDescription) {
    target::Target narrow = target::load_target("vpu27");
    narrow.name = "narrow";
    narrow.max_kernel = 7;
    narrow.max_stride = 2;
    const dsl::Layer nine = depthwise("dw", ElemType::U8, 9, 1);
    std::string why;
    EXPECT_TRUE(codegen::try_match_dpu(nine, target::load_target("vpu27")));
    EXPECT_FALSE(codegen::try_match_dpu(nine, narrow, &why));
    EXPECT_EQ(why, "layer 'dw': kernel 9x9; the DPU of target 'narrow' takes kernels of at most "
                   "7x7 (dpu.max_kernel)");
    EXPECT_TRUE(codegen::try_match_dpu(nine)) << "the operation itself is a DPU one";

    dsl::Layer in = dsl::Layer::input(test::activation("in", 16, 12, 12));
    algorithms::PoolParams p;
    p.kernel_w = p.kernel_h = 3;
    p.stride_w = 3;
    p.stride_h = 2;
    const dsl::Layer pool = algorithms::max_pool("pool", in, p);
    EXPECT_TRUE(codegen::try_match_dpu(pool, target::load_target("vpu27")));
    EXPECT_THROW(codegen::match_dpu(pool, narrow), codegen::DpuMatchError);
    EXPECT_FALSE(codegen::try_match_dpu(pool, narrow, &why));
    EXPECT_EQ(why, "layer 'pool': stride 3x2; the DPU of target 'narrow' takes strides of at most "
                   "2 (dpu.max_stride)");
}

} // namespace
} // namespace vpuc
