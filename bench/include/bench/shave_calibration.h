// The SHAVE timing model against VPUNN's models of Intel's own SHAVE kernels: the plainest
// kernels (abs, exp, log, sqrt) fit the coefficients they reveal, the other vectorised ones
// check the model. Each kernel is a Halide algorithm computing what Intel's kernel computes,
// compiled and counted as every SHAVE kernel is (codegen/shave_kernel.h).
#pragma once

#include <string>
#include <vector>

#include "vpu_target/target.h"
#include "vpu_target/timing_calibration.h"

namespace vpuc::bench {

enum class ShaveKernelRole { Fit, Check };

// One kernel's figures and its error against VPUNN over the calibration sizes.
struct ShaveKernelResult {
    std::string name;
    ShaveKernelRole role = ShaveKernelRole::Check;
    double arith_ops = 0, special_ops = 0, cmx_bytes = 0; // per output vector
    double median_error = 0, max_error = 0;               // relative, over the sizes
};

struct ShaveCalibrationReport {
    std::string reference;      // what was read
    std::string timing_model;   // timing_model_label() of the target
    std::vector<int64_t> sizes; // output elements of the calibration launches
    std::vector<ShaveKernelResult> kernels;
    // The coefficients the fit kernels give (launch, CMX rate, special-function cycles; the
    // others as the target has them), and the target's own.
    target::ShaveTimingParams fitted, used;
    double fit_median = 0, check_median = 0;     // of the kernels' median errors
    std::vector<std::string> excluded_scalar;    // slopes of scalar code: not a model check
    std::vector<std::string> excluded_unwritten; // vectorised, not written as vpuc kernels
};

// The fp16 kernels compared: the fit set first, then the check set.
const std::vector<std::string> &shave_fit_kernels();   // abs, exp, log, sqrt
const std::vector<std::string> &shave_check_kernels(); // sigmoid, tanh, swish, hswish, gelu...

// Compares `target`'s SHAVE model (one SHAVE per launch, as VPUNN prices it) with `reference`
// and fits the coefficients the fit kernels reveal. Throws CalibrationError when a fit or
// check kernel is missing from the reference.
ShaveCalibrationReport calibrate_shave_model(const std::vector<target::VpunnShaveKernel> &reference,
                                             const std::string &origin,
                                             const target::Target &target);

// The table `vpuc bench timing-model` prints for a SHAVE reference; its last lines are
// "fit median relative error: X%" and "check median relative error: Y%".
std::string format_shave_calibration(const ShaveCalibrationReport &report);

} // namespace vpuc::bench
