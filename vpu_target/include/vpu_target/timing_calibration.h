// Compares the timing model with Intel VPUNN's cycle predictions (vpu_target/calibration/*.csv):
// reads a DPU or DMA reference file and reports the relative error per group of similar rows;
// reads VPUNN's SHAVE kernel models for the comparison bench/shave_calibration.h makes (it
// compiles kernels, which this layer cannot).
#pragma once

#include <cstddef>
#include <istream>
#include <stdexcept>
#include <string>
#include <vector>

#include "vpu_target/error.h"

namespace vpuc::target {

class CalibrationError : public Error {
  public:
    using Error::Error;
};

// Relative errors |ours - reference| / reference of a set of rows.
struct ErrorStats {
    std::string name;
    size_t rows = 0;
    double median = 0;
    double p90 = 0; // nearest-rank 90th percentile
};

ErrorStats error_stats(std::string name, std::vector<double> errors);

struct CalibrationReport {
    std::string reference;    // what was read, for the printout
    std::string timing_model; // timing_model_label() of the evaluated targets
    bool dma = false;         // a DMA reference (else DPU)
    // DPU: per device, op, dtype class (int8/fp16) and MPE mode.
    // DMA: per direction and transfer pattern (contiguous, 2D strided, 3D).
    std::vector<ErrorStats> groups;
    std::vector<ErrorStats> by_activation; // DPU only: per device and activation
    ErrorStats overall;
};

// Reads a reference CSV (the kind is detected from its header) and evaluates every row with
// the bundled target of its device, or only the rows of `target`'s device when `target` is
// given (a bundled name or a target file). Throws CalibrationError naming the line for an
// unknown or missing column or a malformed row.
CalibrationReport calibrate_timing_model(std::istream &csv, const std::string &origin,
                                         const std::string &target = "");
// The file at `path`, within the reference CSV size limit (vpu_target/input_file.h); a file
// that cannot be read, is not a regular file or is too large is a CalibrationError too.
CalibrationReport calibrate_timing_model_file(const std::string &path,
                                              const std::string &target = "");

// The table `vpuc bench timing-model` prints; its last line is
// "overall median relative error: X%".
std::string format_calibration_report(const CalibrationReport &report);

enum class ReferenceKind { Dpu, Dma, Shave };

// The kind of a VPUNN reference CSV, from its header line. Throws CalibrationError when it is
// none of them.
ReferenceKind reference_kind(std::string header, const std::string &origin);

// VPUNN's fitted model of one of Intel's SHAVE kernels on VPU_2_7 (vpunn_shave_vpu27.csv; the
// calibration README gives the equation, from VPUNN's ShaveModel1to1::getMicroSeconds).
struct VpunnShaveKernel {
    std::string name; // "sigmoid"
    int inputs = 1;   // ShaveModel1on1: 1; ShaveModel2on1: 2
    double slope_us_per_byte = 0;
    double intercept_us = 0;
    double scalar_offset_us = 0;
    double unroll_offset_us = 0;
    int unroll_size = 0; // vectors per unrolled block
    int vector_size = 0; // lanes per vector
    double shave_clock_mhz = 0;

    // VPUNN's time for one launch writing `elements` outputs of `element_bytes` each.
    double microseconds(int64_t elements, int element_bytes) const;
};

// Reads a SHAVE reference CSV. Throws CalibrationError naming the line for an unknown or
// missing column or a malformed row.
std::vector<VpunnShaveKernel> read_shave_reference(std::istream &csv, const std::string &origin);

} // namespace vpuc::target
