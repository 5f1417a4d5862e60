// DPU, DMA and SHAVE cost models. docs/timing-model.md gives the equations, the coefficients and
// how well they follow Intel's VPUNN predictions.
#include "vpu_target/timing_model.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "vpu_target/printable.h"

namespace vpuc::target {

namespace {

double ceil_div(double a, double b) {
    return std::ceil(a / b);
}

// Bytes that `channels` elements of `elem_bytes` occupy once padded to a `granule`.
double padded_bytes(int channels, int elem_bytes, int granule) {
    return ceil_div(double(channels) * elem_bytes, granule) * granule;
}

// Bytes per element of a DPU input or output; the DPU computes on 8-bit and fp16 data only.
int dpu_dtype_bytes(const Target &target, DType t) {
    if (t == DType::U8 || t == DType::I8 || t == DType::F16) return dtype_bytes(t);
    throw TargetError(target.name + ": the DPU does not compute on " + blob::to_string(t) +
                      " data");
}

std::string mode_names(const Target &target) {
    std::string names;
    for (const auto &m : target.mpe_modes) names += (names.empty() ? "" : ", ") + m.name;
    return names;
}

// Lines of input (columns or rows) that `n` outputs at stride `s` read with a `k`-tap kernel,
// bounded by the padded input `extent`.
double input_span(int n, int s, int k, int extent) {
    double span = k < s ? double(n) * k : double(n - 1) * s + k;
    return std::min<double>(span, extent);
}

// Everything the stage costs below share about one workload.
struct Workload {
    const DpuWorkload &w;
    const MpeMode &mode;
    const MpeModeTiming &timing;
    const DpuTimingParams &p;
    int in_bytes;
    int out_bytes;
    double pixels; // output pixels
    double taps;   // kernel taps
    double spatial_blocks;

    // Cycles the input data unit needs to bring `channel_bytes` of every needed input pixel,
    // `groups` times over (once per set of output channels that cannot share the fetch).
    double fetch_cycles(double channel_bytes, double groups) const {
        if (p.input_fetch == InputFetch::PerBlockWindow)
            return spatial_blocks * block_window_pixels() * groups * channel_bytes /
                   timing.input_bytes_per_cycle;
        // Per tap: each kernel tap reads one input pixel per output pixel, at the byte rate or
        // the issue rate, whichever is slower.
        double bytes_cycles = pixels * channel_bytes / timing.input_bytes_per_cycle;
        return taps * groups * std::max(bytes_cycles, tap_issue_cycles());
    }

    // Cycles the input data unit takes to issue the reads of one kernel tap, however narrow
    // its pixels (timing_params.h, InputIssueTiming).
    double tap_issue_cycles() const {
        const InputIssueTiming &issue = p.input_issue;
        if (!issue.present) return 0;
        double per_pixel = issue.pixel_cycles + issue.strided_pixel_cycles * (w.stride_w - 1);
        return spatial_blocks * issue.block_tap_cycles + pixels * per_pixel;
    }

    // Input pixels one output block reads over all its kernel taps: its window.
    double block_window_pixels() const {
        return input_span(mode.block_w, w.stride_w, w.kernel_w, w.in_w + w.pad_left + w.pad_right) *
               input_span(mode.block_h, w.stride_h, w.kernel_h, w.in_h + w.pad_top + w.pad_bottom);
    }

    // The share of the MAC array's peak rate the mode and input type sustain.
    double mac_efficiency() const {
        bool fp16 = w.input_dtype == DType::F16;
        return (fp16 ? p.fp16_efficiency : p.int8_efficiency) * timing.mac_efficiency;
    }
};

// The PPE writes every output element; channels pad to the data-path word.
double ppe_cycles(const Workload &x) {
    bool fp16 = x.w.output_dtype == DType::F16;
    double rate = fp16 ? x.p.ppe_fp16_elements_per_cycle : x.p.ppe_int8_elements_per_cycle;
    double channels = padded_bytes(x.w.out_c, x.out_bytes, x.p.word_bytes) / x.out_bytes;
    return x.pixels * channels / rate;
}

// The output data unit writes the output one MPE block at a time, whatever its bytes: small
// blocks (CUBOID_4x16) make many writes.
double output_write_cycles(const Workload &x) {
    return x.spatial_blocks * ceil_div(x.w.out_c, x.mode.block_c) * x.p.output_block_cycles;
}

// Z-major convolution: the MAC array works on whole MPE blocks; input channels pad to a word.
double zmajor_mac_cycles(const Target &target, const Workload &x) {
    const MpeMode &m = x.mode;
    double blocks = x.spatial_blocks * ceil_div(x.w.out_c, m.block_c);
    double in_channels = padded_bytes(x.w.in_c, x.in_bytes, x.p.word_bytes) / x.in_bytes;
    double macs = blocks * m.block_w * m.block_h * m.block_c * in_channels * x.taps;
    return macs / (target.macs_per_cycle(x.w.input_dtype) * x.mac_efficiency());
}

// The MAC array takes in each output block's input window (channels padded to a word) once
// per block_c output channels and uses every pixel of it for all the taps that need it: a 1x1
// kernel uses a pixel once, a 3x3 one up to nine times, so 1x1 convolutions can be bound here.
double zmajor_feed_cycles(const Workload &x) {
    if (x.p.mac_feed_bytes_per_cycle <= 0) return 0;
    double window_bytes =
        x.block_window_pixels() * padded_bytes(x.w.in_c, x.in_bytes, x.p.word_bytes);
    return x.spatial_blocks * ceil_div(x.w.out_c, x.mode.block_c) * window_bytes /
           x.p.mac_feed_bytes_per_cycle;
}

// Activations and weights stream from CMX; an output tile shares one fetch of the weights.
double zmajor_fetch_cycles(const Target &target, const Workload &x) {
    int in_channels =
        std::max(target.channel_alignment,
                 int(ceil_div(x.w.in_c, target.channel_alignment)) * target.channel_alignment);
    double act = x.fetch_cycles(padded_bytes(in_channels, x.in_bytes, x.timing.input_granule_bytes),
                                ceil_div(x.w.out_c, x.timing.reuse_c));
    double weight_fetches =
        ceil_div(x.w.out_w, x.timing.reuse_w) * ceil_div(x.w.out_h, x.timing.reuse_h);
    double weight_bytes = double(x.w.out_c) * in_channels * x.taps * x.in_bytes;
    return act + weight_fetches * weight_bytes / x.p.weight_bytes_per_cycle;
}

// Channel-major convolution (few input channels, e.g. an RGB image): kernel taps are packed
// into the reduction, so the MACs cost little per tap, but the planar input fetch costs more.
// A pixel's input bytes are packed in units of cm_input_pack_bytes, and the packing never costs
// more than reducing one word per tap as a Z-major convolution does.
double channel_major_mac_cycles(const Target &target, const Workload &x) {
    double packed_bytes = padded_bytes(x.w.in_c, x.in_bytes, x.p.cm_input_pack_bytes);
    double per_tap = x.p.cm_tap_cycles + x.p.cm_tap_cycles_per_input_byte * packed_bytes;
    double packed =
        x.pixels * x.taps * ceil_div(x.w.out_c, x.mode.block_c) * per_tap / x.mac_efficiency();
    return std::min(packed, zmajor_mac_cycles(target, x));
}

double channel_major_fetch_cycles(const Target &target, const Workload &x) {
    double bytes = padded_bytes(target.channel_alignment, x.in_bytes, x.timing.input_granule_bytes);
    return x.fetch_cycles(bytes * x.p.cm_fetch_factor, ceil_div(x.w.out_c, x.timing.reuse_c));
}

// Depthwise convolution and pooling: each channel reads only its own input, no reduction.
double per_channel_fetch_cycles(const Workload &x) {
    return x.fetch_cycles(padded_bytes(x.w.out_c, x.in_bytes, x.timing.input_granule_bytes), 1);
}

// An operation that slides its kernel along the output rows (timing_params.h).
double sliding_window_cycles(const Target &target, const Workload &x,
                             const SlidingWindowTiming &window) {
    double per_step = window.pixel_cycles +
                      x.w.kernel_h * (window.row_cycles + window.column_cycles * x.w.stride_w);
    double dtype_cost =
        double(target.macs_per_cycle(DType::I8)) / target.macs_per_cycle(x.w.input_dtype);
    return x.pixels * ceil_div(x.w.out_c, target.channel_alignment) * per_step * dtype_cost;
}

// The pipeline stages overlap; a p-norm blends them so the slowest dominates smoothly.
double overlap(const std::vector<double> &stages, double p) {
    double slowest = *std::max_element(stages.begin(), stages.end());
    if (slowest <= 0) return 0;
    double sum = 0;
    for (double s : stages) sum += std::pow(s / slowest, p);
    return slowest * std::pow(sum, 1 / p);
}

void check_workload(const Target &target, const DpuWorkload &w, const MpeMode &mode) {
    if (w.out_w <= 0 || w.out_h <= 0 || w.out_c <= 0 || w.in_c <= 0 || w.kernel_w <= 0 ||
        w.kernel_h <= 0 || w.stride_w <= 0 || w.stride_h <= 0)
        throw TargetError(target.name +
                          ": DPU workload with a non-positive size, kernel or stride");
    bool fp16 = w.input_dtype == DType::F16;
    if (fp16 ? !mode.fp16 : !mode.int8)
        throw TargetError(target.name + ": MPE mode " + mode.name + " does not take " +
                          blob::to_string(w.input_dtype) + " inputs");
}

} // namespace

std::string timing_model_label(const Target &target) {
    std::string label = "timing model " + std::to_string(kTimingModelVersion);
    for (const auto &name : bundled_target_names())
        if (name == target.name &&
            load_target(name).description_sha256 == target.description_sha256)
            return label;
    return label + " with target '" + printable(target.name) + "' not as bundled (sha256 " +
           blob::hex(target.description_sha256).substr(0, 16) + "...)";
}

double dpu_workload_cycles(const Target &target, const DpuWorkload &w) {
    const MpeMode *mode = target.find_mpe_mode(w.mpe_mode);
    const MpeModeTiming *timing = target.dpu_timing.find_mode(w.mpe_mode);
    if (!mode || !timing)
        throw TargetError(target.name + ": unknown MPE mode '" + w.mpe_mode + "' (the target has " +
                          mode_names(target) + ")");
    check_workload(target, w, *mode);
    const DpuTimingParams &p = target.dpu_timing;
    Workload x{w,
               *mode,
               *timing,
               p,
               dpu_dtype_bytes(target, w.input_dtype),
               dpu_dtype_bytes(target, w.output_dtype),
               double(w.out_w) * w.out_h,
               double(w.kernel_w) * w.kernel_h,
               ceil_div(w.out_w, mode->block_w) * ceil_div(w.out_h, mode->block_h)};

    // A PPE activation slows a Z-major convolution's MAC array and fetch by one factor, and
    // every other stage by another (timing_params.h).
    ActivationSlowdown slowdown;
    if (w.activation)
        slowdown = w.input_dtype == DType::F16 ? p.activation_fp16 : p.activation_int8;
    double zmajor_slowdown = slowdown.zmajor, other_slowdown = slowdown.other;
    std::vector<double> stages{ppe_cycles(x) * other_slowdown,
                               output_write_cycles(x) * other_slowdown};
    switch (w.op) {
    case DpuOpKind::Conv:
    case DpuOpKind::MatMul:
        if (w.in_c < target.channel_alignment) {
            stages.push_back(channel_major_mac_cycles(target, x) * other_slowdown);
            stages.push_back((p.channel_major_window.present
                                  ? sliding_window_cycles(target, x, p.channel_major_window)
                                  : channel_major_fetch_cycles(target, x)) *
                             other_slowdown);
        } else {
            stages.push_back(zmajor_mac_cycles(target, x) * zmajor_slowdown);
            stages.push_back(zmajor_fetch_cycles(target, x) * zmajor_slowdown);
            stages.push_back(zmajor_feed_cycles(x) * zmajor_slowdown);
        }
        break;
    case DpuOpKind::DepthwiseConv:
    case DpuOpKind::MaxPool:
    case DpuOpKind::AvgPool: {
        // Priced by the input fetch (vpu27) or as a sliding window (vpu20); max pooling has a
        // window of its own if the target gives one.
        const SlidingWindowTiming &window = w.op == DpuOpKind::MaxPool && p.max_pool_window.present
                                                ? p.max_pool_window
                                                : p.depthwise_window;
        stages.push_back((window.present ? sliding_window_cycles(target, x, window)
                                         : per_channel_fetch_cycles(x)) *
                         other_slowdown);
        break;
    }
    case DpuOpKind::Eltwise:
        break; // bound by the PPE, which reads both inputs as it writes, and the output writes
    }
    return p.workload_overhead_cycles + p.channel_group_cycles * ceil_div(w.out_c, mode->block_c) +
           overlap(stages, p.bottleneck_exponent);
}

namespace {

// Bus bytes of the DDR side: DDR moves whole bursts, and a strided side pays per line.
double ddr_bus_bytes(const DmaTimingParams &p, const DmaTransfer &t, bool contiguous,
                     double line_overhead) {
    double burst = p.burst_bytes;
    if (contiguous) return ceil_div(double(t.line_bytes) * t.lines, burst) * burst;
    return double(t.lines) * (ceil_div(double(t.line_bytes), burst) * burst + line_overhead);
}

} // namespace

DmaCost dma_transfer_cost(const Target &target, const DmaTransfer &t) {
    const DmaTimingParams &p = target.dma_timing;
    DmaCost cost;
    cost.max_bandwidth_gbps = target.dma_engine_bytes_per_cycle * target.dma_clock_mhz / 1000.0;
    double read = ddr_bus_bytes(p, t, t.src_contiguous, p.ddr_read_line_overhead_bytes);
    double write = ddr_bus_bytes(p, t, t.dst_contiguous, p.ddr_write_line_overhead_bytes);
    switch (t.direction) {
    case DmaDirection::DdrToCmx:
        cost.latency_ns = p.ddr_to_cmx_latency_ns;
        cost.bus_bytes = read;
        break;
    case DmaDirection::CmxToDdr:
        cost.latency_ns = p.cmx_to_ddr_latency_ns;
        cost.bus_bytes = write;
        break;
    case DmaDirection::DdrToDdr:
        // The writes stream behind the reads, so only the read latency shows, but both
        // directions occupy the DDR bus.
        cost.latency_ns = p.ddr_to_cmx_latency_ns;
        cost.bus_bytes = read + write;
        break;
    case DmaDirection::CmxToCmx:
        cost.latency_ns = p.cmx_to_cmx_latency_ns;
        cost.bus_bytes = double(t.line_bytes) * t.lines;
        cost.uses_ddr = false;
        break;
    }
    return cost;
}

double dma_transfer_ns(const Target &target, const DmaTransfer &t) {
    DmaCost cost = dma_transfer_cost(target, t);
    double rate = cost.max_bandwidth_gbps;
    if (cost.uses_ddr) rate = std::min(rate, target.ddr_bandwidth_gbps);
    return cost.latency_ns + cost.bus_bytes / rate; // GB/s is bytes per ns
}

double shave_task_cycles(const Target &target, const ShaveWork &w) {
    const ShaveTimingParams &p = target.shave_timing;
    const int shaves = std::max(w.shaves, 1);
    const double lanes = std::max<uint32_t>(w.vector_lanes, 1);
    const double vectors_per_shave = ceil_div(ceil_div(w.output_elements, shaves), lanes);
    // Per vector, the VLIW core issues its instructions while the load/store units move its
    // bytes: the slower of the two sets the pace.
    const double issue = w.arith_ops_per_vector / p.arith_ops_per_cycle +
                         w.special_ops_per_vector * p.special_op_cycles;
    const double memory = w.cmx_bytes_per_vector / p.cmx_bytes_per_cycle;
    const double one_shave = vectors_per_shave * std::max(issue, memory);
    // Together the SHAVEs move every vector's bytes through the tile's shared CMX port.
    const double shared_port =
        vectors_per_shave * shaves * w.cmx_bytes_per_vector / p.tile_cmx_bytes_per_cycle;
    return p.launch_cycles + std::max(one_shave, shared_port);
}

} // namespace vpuc::target
