// codegen::check_against_reference: compile, simulate and compare in one call.
#include <gtest/gtest.h>

#include "codegen/check.h"
#include "examples/small_net.h"
#include "lowering_fixtures.h"

namespace vpuc {
namespace {

std::vector<uint8_t> halves(std::initializer_list<uint16_t> bits) {
    std::vector<uint8_t> bytes;
    for (uint16_t b : bits) {
        bytes.push_back(uint8_t(b & 0xff));
        bytes.push_back(uint8_t(b >> 8));
    }
    return bytes;
}

TEST(CheckAgainstReference, ANetworkMatchesOnBothTargets) {
    for (const char *target : {"vpu27", "vpu20"}) {
        const codegen::CheckResult r = codegen::check_against_reference(
            examples::small_net(3).graph, target::load_target(target));
        EXPECT_TRUE(r.ok()) << r.report();
        ASSERT_EQ(r.outputs.size(), 1u);
        EXPECT_EQ(r.outputs[0].elements, 16 * 14 * 14);
        EXPECT_EQ(r.report(), "prob: 3136 elements, all match\n");
        EXPECT_FALSE(r.blob.empty());
        EXPECT_GT(r.run.latency_ns, 0);
    }
}

TEST(CheckAgainstReference, FloatsWithinTheirUlpsIntegersExactly) {
    const dsl::TensorDesc f16 = test::activation("h", 2, 2, 1, dsl::ElemType::F16);
    // 1.0, -0.0, NaN, 2.0 against 1.0 + 1 ulp, +0.0, NaN, 2.0 - 3 ulp.
    const auto got = halves({0x3c00, 0x8000, 0x7e00, 0x4000});
    const auto want = halves({0x3c01, 0x0000, 0x7e00, 0x3ffd});
    codegen::OutputCheck exact = codegen::compare_output(f16, got, want, {0, 0});
    EXPECT_EQ(exact.mismatches, 3);
    EXPECT_EQ(exact.max_ulp, 3);
    EXPECT_EQ(exact.first_mismatch, "c 0, x 0, y 0: got 0x3c00, expected 0x3c01 (1 ulp)");
    codegen::Tolerance one;
    one.f16_ulp = 1;
    EXPECT_EQ(codegen::compare_output(f16, got, want, one).mismatches, 1);
    one.f16_ulp = 3;
    EXPECT_EQ(codegen::compare_output(f16, got, want, one).mismatches, 0);
    // A NaN against a number is never within a tolerance.
    EXPECT_EQ(codegen::compare_output(f16, halves({0x7e00, 0, 0, 0}), halves({0x3c00, 0, 0, 0}),
                                      {1000, 1000})
                  .mismatches,
              1);

    const dsl::TensorDesc u8 = test::activation("q", 3, 1, 1);
    codegen::Tolerance loose{1000, 1000};
    const codegen::OutputCheck ints = codegen::compare_output(u8, {1, 2, 3}, {1, 2, 4}, loose);
    EXPECT_EQ(ints.mismatches, 1);
    EXPECT_EQ(ints.first_mismatch, "c 2, x 0, y 0: got 0x03, expected 0x04");
    EXPECT_EQ(codegen::compare_output(u8, {1, 2}, {1, 2, 4}, loose).mismatches, 3);
}

TEST(CheckAgainstReference, RandomFloatInputsAreRealValued) {
    const dsl::TensorDesc t = test::activation("h", 64, 8, 8, dsl::ElemType::F16);
    Halide::Buffer<Halide::float16_t> b(codegen::random_buffer(t, 5));
    int not_dyadic_32 = 0;
    b.for_each_value([&](Halide::float16_t v) {
        const float f = float(v);
        EXPECT_GE(f, -4.0f);
        EXPECT_LE(f, 4.0f);
        not_dyadic_32 += f * 32 != std::floor(f * 32);
    });
    EXPECT_GT(not_dyadic_32, 64 * 8 * 8 / 2);
}

} // namespace
} // namespace vpuc
