// `vpuc bench timing-model`: how far the DPU and DMA cost models are from Intel's VPUNN.
#include <cstdio>
#include <stdexcept>
#include <string>
#include <vector>

#include "command.h"
#include "options.h"
#include "vpu_target/timing_calibration.h"

namespace {

const char *kUsage =
    R"(usage: vpuc bench timing-model --reference FILE [--target T]

Compares the timing model with VPUNN cycle predictions. FILE is a DPU or a DMA
reference CSV (vpu_target/calibration/vpunn_dpu_reference.csv, vpunn_dma_reference.csv); the
kind is detected from the header. Every row is evaluated with the bundled target of
its device (VPU_2_7: vpu27, VPU_2_0: vpu20).

Prints the timing model's version (docs/timing-model.md, "Versions"), then the row
count, median and 90th-percentile relative error |ours - VPUNN| / VPUNN
per group (DPU: device, op, dtype class, MPE mode; DMA: direction, transfer pattern),
and last the line "overall median relative error: X%".

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
    auto report = vpuc::target::calibrate_timing_model_file(reference, o.get("--target"));
    std::fputs(vpuc::target::format_calibration_report(report).c_str(), stdout);
    return 0;
}

const bool registered = vpuc::tools::register_command(
    {"bench timing-model", "compare the DPU/DMA timing model with VPUNN predictions",
     kUsage + vpuc::tools::size_options_help(kReads), run});

} // namespace
