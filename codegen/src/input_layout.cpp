// The cost of a network input's layout: the DPU and the SHAVEs read activations NHWC in CMX,
// so the DMAs that load an NCHW input gather each pixel's channels one element at a time.
#include <cmath>
#include <string>

#include "passes.h"
#include "vpu_target/timing_model.h"

namespace vpuc::codegen {

namespace {

// DMA cycles to load `t` whole from DDR into CMX, as lines of contiguous bytes: one element
// per line from NCHW, one pixel per line from NHWC (and one line when a pixel's channels are
// whole groups, as CMX holds them).
double whole_load_cycles(const dsl::TensorDesc &t, bool nchw, const target::Target &target) {
    using namespace dsl::dims;
    const uint64_t c = uint64_t(t.shape[C]), pixels = uint64_t(t.shape[H] * t.shape[W]);
    const uint64_t elem = uint64_t(dsl::bytes_of(t.type));
    target::DmaTransfer load;
    load.direction = target::DmaDirection::DdrToCmx;
    load.line_bytes = nchw ? elem : c * elem;
    load.lines = nchw ? c * pixels : pixels;
    load.src_contiguous = !nchw;
    load.dst_contiguous = !nchw && c % uint64_t(target.channel_alignment) == 0;
    return target::dma_transfer_ns(target, load) * target.dma_clock_mhz / 1000;
}

} // namespace

void note_input_layouts(LoweringState &s) {
    for (const dsl::Layer &input : s.graph.inputs()) {
        const dsl::TensorDesc &t = input.output();
        using namespace dsl::dims;
        // With one channel, or one pixel, NCHW and NHWC are the same bytes.
        if (!(t.order == dsl::DimsOrder::NCHW()) || t.shape.rank() != 4 || t.shape[C] == 1 ||
            t.shape[H] * t.shape[W] == 1)
            continue;
        const double nchw = whole_load_cycles(t, true, s.target);
        const double nhwc = whole_load_cycles(t, false, s.target);
        s.notes.push_back("input '" + t.name + "' is NCHW, and the DPU and SHAVEs read NHWC: its " +
                          "loads gather the channels one element at a time. Loading it once " +
                          "takes about " + std::to_string(std::llround(nchw)) + " DMA cycles, " +
                          std::to_string(std::llround(nchw - nhwc)) + " more than from NHWC (" +
                          std::to_string(std::llround(nhwc)) +
                          "); give it as NHWC (DimsOrder::NHWC)");
    }
}

} // namespace vpuc::codegen
