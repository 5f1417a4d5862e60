// `vpuc bench timing-model`: how far the DPU, DMA and SHAVE cost models are from Intel's VPUNN.
#include <cstdio>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "bench/shave_calibration.h"
#include "command.h"
#include "options.h"
#include "vpu_target/input_file.h"
#include "vpu_target/timing_calibration.h"

namespace {

const char *kUsage =
    R"(usage: vpuc bench timing-model --reference FILE [--target T]

Compares the timing model with VPUNN's. FILE is a DPU, DMA or SHAVE reference CSV
(vpu_target/calibration/vpunn_dpu_reference.csv, vpunn_dma_reference.csv,
vpunn_shave_vpu27.csv); the kind is detected from the header.

DPU and DMA: every row is evaluated with the bundled target of its device (VPU_2_7:
vpu27, VPU_2_0: vpu20). Prints the timing model's version (docs/timing-model.md,
"Versions"), then the row count, median and 90th-percentile relative error
|ours - VPUNN| / VPUNN per group (DPU: device, op, dtype class, MPE mode; DMA:
direction, transfer pattern), and last the line "overall median relative error: X%".

SHAVE: VPUNN's models of Intel's fp16 kernels on VPU_2_7, against ours written as
Halide kernels, compiled and counted like every SHAVE kernel, on one SHAVE (vpu27, or
T). Prints each kernel's instructions and bytes per vector and its median and largest
error over a range of sizes; which kernels fitted the coefficients (abs, exp, log,
sqrt) and which only check them; the coefficients the fit gives next to the target's;
and last "fit median relative error: X%" and "check median relative error: Y%".

options:
  --reference FILE  the VPUNN reference CSV (required)
  --target T        evaluate only the rows of T's device, with T: a bundled target
                    name or a target file, e.g. an edited copy of vpu27.json
  -h, --help        this text
)";

const std::vector<vpuc::files::FileKind> kReads = {vpuc::files::FileKind::ReferenceCsv,
                                                   vpuc::files::FileKind::Target};

int run(const std::vector<std::string> &args) {
    const vpuc::tools::Options o =
        vpuc::tools::parse_options(args, {"--reference", "--target"}, {}, kReads);
    if (!o.positional.empty())
        throw std::runtime_error("unexpected argument '" + o.positional[0] + "' (see --help)");
    const std::string reference = o.get("--reference");
    if (reference.empty()) throw std::runtime_error("--reference FILE is required (see --help)");
    std::istringstream csv;
    try {
        csv.str(vpuc::files::read_text_file(reference, vpuc::files::FileKind::ReferenceCsv));
    } catch (const vpuc::files::InputFileError &e) {
        throw vpuc::target::CalibrationError(e.what());
    }
    std::string header;
    std::getline(csv, header);
    const auto kind = vpuc::target::reference_kind(header, reference);
    csv.seekg(0);
    if (kind == vpuc::target::ReferenceKind::Shave) {
        const std::string name = o.get("--target").empty() ? "vpu27" : o.get("--target");
        const vpuc::target::Target target = vpuc::target::load_target(name);
        if (target.name != "vpu27")
            throw vpuc::target::CalibrationError(reference +
                                                 ": VPUNN's SHAVE models are of VPU_2_7; target '" +
                                                 name + "' is not modeled on it (vpu27)");
        const auto report = vpuc::bench::calibrate_shave_model(
            vpuc::target::read_shave_reference(csv, reference), reference, target);
        std::fputs(vpuc::bench::format_shave_calibration(report).c_str(), stdout);
        return 0;
    }
    const auto report = vpuc::target::calibrate_timing_model(csv, reference, o.get("--target"));
    std::fputs(vpuc::target::format_calibration_report(report).c_str(), stdout);
    return 0;
}

const bool registered = vpuc::tools::register_command(
    {"bench timing-model", "compare the DPU/DMA/SHAVE timing model with VPUNN's",
     kUsage + vpuc::tools::size_options_help(kReads), run});

} // namespace
