// The SHAVE timing model against VPUNN's models of Intel's SHAVE kernels (docs/timing-model.md,
// "SHAVE"): the reference reader, the fit, and the errors of this model version.
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <functional>
#include <sstream>

#include "bench/shave_calibration.h"
#include "error_text.h"
#include "vpu_target/timing_calibration.h"
#include "vpu_target/timing_model.h"

using namespace vpuc;

namespace {

const std::string kReference =
    std::string(VPUC_SOURCE_DIR) + "/vpu_target/calibration/vpunn_shave_vpu27.csv";

std::vector<target::VpunnShaveKernel> reference_kernels() {
    std::ifstream in(kReference);
    return target::read_shave_reference(in, kReference);
}

const bench::ShaveCalibrationReport &vpu27_report() {
    static const bench::ShaveCalibrationReport report =
        bench::calibrate_shave_model(reference_kernels(), kReference, target::load_target("vpu27"));
    return report;
}

const bench::ShaveKernelResult &kernel(const std::string &name) {
    for (const auto &k : vpu27_report().kernels)
        if (k.name == name) return k;
    throw std::runtime_error("no kernel " + name);
}

using vpuc::testing::error_of;

const char *kHeader = "kernel_type,kernel_name,slope,intercept,scalar_offset,unroll_offset,"
                      "unroll_size,vector_size,DPU_frequency,SHV_frequency\n";

} // namespace

// The data README's worked example: sigmoid on 1x48x40x40 fp16 is 25.9 us (rounded, and
// without the scalar offset an exact multiple of the unrolled block adds).
TEST(ShaveCalibration, VpunnEquationAsDocumented) {
    const auto kernels = reference_kernels();
    EXPECT_EQ(kernels.size(), 49u);
    const auto &sigmoid = *std::find_if(kernels.begin(), kernels.end(),
                                        [](const auto &k) { return k.name == "sigmoid"; });
    EXPECT_NEAR(sigmoid.microseconds(48 * 40 * 40, 2), 25.9, 0.1);
    EXPECT_NEAR(sigmoid.microseconds(48 * 40 * 40, 2),
                sigmoid.slope_us_per_byte * 153600 + sigmoid.intercept_us +
                    sigmoid.scalar_offset_us,
                1e-12);
    // Below one unrolled block (8 x 16 elements) the unroll offset comes off; a partial
    // vector adds the scalar offset.
    EXPECT_NEAR(sigmoid.microseconds(100, 2),
                sigmoid.slope_us_per_byte * 200 + sigmoid.intercept_us - sigmoid.unroll_offset_us +
                    sigmoid.scalar_offset_us,
                1e-12);
}

TEST(ShaveCalibration, ReferenceErrorsNameTheLine) {
    auto error = [](const std::string &csv) {
        std::istringstream in(csv);
        return error_of([&] { target::read_shave_reference(in, "shave.csv"); });
    };
    EXPECT_EQ(error(std::string(kHeader) + "ShaveModel3on1,abs,0.1,2,0,0,8,8,1300,975\n"),
              "shave.csv:2: column 'kernel_type': unknown model 'ShaveModel3on1'");
    EXPECT_EQ(error(std::string(kHeader) + "ShaveModel1on1,abs,fast,2,0,0,8,8,1300,975\n"),
              "shave.csv:2: column 'slope': not a number: 'fast'");
    EXPECT_EQ(error(std::string(kHeader) + "ShaveModel1on1,abs,nan,2,0,0,8,8,1300,975\n"),
              "shave.csv:2: column 'slope': not a number: 'nan'");
    EXPECT_EQ(error(std::string(kHeader) + "ShaveModel1on1,abs,0.1,2,0,0,8\n"),
              "shave.csv:2: expected 10 fields, got 7");
    EXPECT_EQ(error(std::string(kHeader)), "shave.csv: no kernels");
    EXPECT_EQ(error(std::string(kHeader) + "ShaveModel1on1,a\x1b[2J,0.1,2,0,0,8,8,1300,975\n"),
              "shave.csv:2: column 'kernel_name': not a name of letters, digits and '_': "
              "'a\\x1b[2J'");
    EXPECT_EQ(error("kernel_type,kernel_name,colour\n"), "shave.csv:1: unknown column 'colour'");
    EXPECT_EQ(error_of([] { target::reference_kind("a,b,c", "x.csv"); }),
              "x.csv:1: not a VPUNN reference header (no 'op', 'direction' or 'kernel_type' "
              "column)");
}

// A check kernel missing from the reference is an error, not a shorter table.
TEST(ShaveCalibration, MissingKernelIsNamed) {
    std::istringstream in(std::string(kHeader) + "ShaveModel1on1,abs,0.1,2,0,0,8,8,1300,975\n");
    const auto kernels = target::read_shave_reference(in, "shave.csv");
    EXPECT_EQ(error_of([&] {
                  bench::calibrate_shave_model(kernels, "shave.csv", target::load_target("vpu27"));
              }),
              "shave.csv: no one-input kernel 'exp' (the SHAVE model is fitted and checked on it)");
}

// The bundled coefficients are the fit's, rounded: nothing tuned by hand, and the fit kernels
// follow VPUNN closely.
TEST(ShaveCalibration, BundledCoefficientsAreTheFit) {
    const auto &r = vpu27_report();
    EXPECT_NEAR(r.used.launch_cycles, r.fitted.launch_cycles, 0.005 * r.fitted.launch_cycles);
    EXPECT_NEAR(r.used.cmx_bytes_per_cycle, r.fitted.cmx_bytes_per_cycle,
                0.005 * r.fitted.cmx_bytes_per_cycle);
    EXPECT_NEAR(r.used.special_op_cycles, r.fitted.special_op_cycles,
                0.005 * r.fitted.special_op_cycles);
    for (const auto &name : bench::shave_fit_kernels()) EXPECT_LT(kernel(name).max_error, 0.1);
    // vpu20 has no reference of its own: it prices SHAVE cycles as vpu27 does.
    const target::Target vpu20 = target::load_target("vpu20");
    EXPECT_EQ(vpu20.shave_timing.launch_cycles, r.used.launch_cycles);
    EXPECT_EQ(vpu20.shave_timing.special_op_cycles, r.used.special_op_cycles);
    EXPECT_EQ(vpu20.shave_timing.cmx_bytes_per_cycle, r.used.cmx_bytes_per_cycle);
}

// What each kernel executes per vector of 8 fp16 (docs/timing-model.md, "SHAVE"): the counts
// the model's errors are explained by.
TEST(ShaveCalibration, KernelCounts) {
    // Counted on a launch of 200704 elements: the loop's own overhead is a trace.
    constexpr double kTrace = 1e-3;
    EXPECT_NEAR(kernel("abs").arith_ops, 1, kTrace);
    EXPECT_NEAR(kernel("abs").cmx_bytes, 32, kTrace);
    for (const char *special : {"exp", "log", "sqrt", "tanh"}) {
        EXPECT_NEAR(kernel(special).special_ops, 1, kTrace) << special;
        EXPECT_NEAR(kernel(special).arith_ops, 0, kTrace) << special;
    }
    // An exp and a divide.
    EXPECT_NEAR(kernel("sigmoid").special_ops, 2, kTrace);
    EXPECT_NEAR(kernel("swish").special_ops, 2, kTrace);
    // Under strict_float the division by 6 stays one, as in Intel's kernel.
    EXPECT_NEAR(kernel("hswish").special_ops, 1, kTrace);
    EXPECT_NEAR(kernel("mish").special_ops, 3, kTrace);
}

// The errors of this version of the model (docs/timing-model.md, "Versions"), as
// TimingCalibration.ErrorsOfThisModelVersion pins the DPU's and DMA's.
TEST(ShaveCalibration, ErrorsOfThisModelVersion) {
    ASSERT_EQ(target::kTimingModelVersion, 3);
    const auto &r = vpu27_report();
    EXPECT_NEAR(r.fit_median, 0.0044, 5e-4);
    EXPECT_NEAR(r.check_median, 0.3073, 5e-4);
    EXPECT_EQ(r.excluded_scalar.size(), 32u);
    EXPECT_EQ(r.excluded_unwritten,
              (std::vector<std::string>{"hsigmoid", "sinh", "cosh", "hardswish", "hardsigmoid"}));
}

TEST(ShaveCalibration, ReportNamesTheFitAndTheModel) {
    const std::string text = bench::format_shave_calibration(vpu27_report());
    EXPECT_NE(text.find("\ntiming model 3\n"), std::string::npos) << text;
    EXPECT_NE(text.find("fitted on abs, exp, log, sqrt:"), std::string::npos) << text;
    EXPECT_NE(text.find("\nsigmoid  check "), std::string::npos) << text;
    EXPECT_NE(text.find("\ncheck median relative error: "), std::string::npos) << text;
}
