// How the DPU lays out what it reads and writes: channels in whole groups of the target's
// channel alignment, and weights with their weight table in one constant. Shared by
// build_tasks, which sizes and addresses the constants, and pack_weights, which fills them.
#pragma once

#include <cstdint>
#include <vector>

#include "passes.h"

namespace vpuc::codegen {

// --- channel padding -------------------------------------------------------------------------
// The DPU reads and writes channels in whole groups of the target's channel alignment (16). A
// CMX tensor the DPU touches holds channels from a multiple of it, in a whole number of groups
// per pixel; the lanes past the real channels are pad lanes.
inline int64_t floor_group(int64_t c, const target::Target &t) {
    return c / t.channel_alignment * t.channel_alignment;
}
inline int64_t ceil_group(int64_t c, const target::Target &t) {
    return floor_group(c + t.channel_alignment - 1, t);
}
// Whole groups around channels `c`: what a DPU task reads or writes.
inline Interval group_span(Interval c, const target::Target &t) {
    return {floor_group(c.begin, t), ceil_group(c.end, t)};
}

inline bool sums_channels(const DpuOpDesc &d) {
    return d.op == target::DpuOpKind::Conv || d.op == target::DpuOpKind::MatMul;
}
inline bool has_weights(const DpuOpDesc &d) {
    return d.op == target::DpuOpKind::Conv || d.op == target::DpuOpKind::DepthwiseConv ||
           d.op == target::DpuOpKind::MatMul;
}
// A convolution of fewer input channels than a group runs channel-major and reads them
// unpadded.
inline bool channel_major(const LayerPlan &plan, const target::Target &t) {
    return sums_channels(plan.dpu) &&
           plan.layer.inputs()[size_t(plan.dpu.input)].output().shape[dsl::dims::C] <
               t.channel_alignment;
}

// The DPU has no dilation: a dilated kernel runs as the kernel spanning the same window, with
// zero weights between the taps.
inline int kernel_span_w(const DpuOpDesc &d) {
    return (d.kernel_w - 1) * d.dilation_w + 1;
}
inline int kernel_span_h(const DpuOpDesc &d) {
    return (d.kernel_h - 1) * d.dilation_h + 1;
}

// --- weights ---------------------------------------------------------------------------------
// The constant holding the weights of a range of output channels in the DPU's layout: channel
// by channel in whole channel groups, each (IC, KW, KH) dense over the input channels the task
// reads, then, 64-byte aligned, the weight table (4 words per channel: the channel's weights'
// offset, 0, requantization, bias).
struct WeightLayout {
    Interval out_channels; // from the range's first channel, in whole channel groups
    Interval in_channels;  // the input channels the weights span
    int kernel_w = 1, kernel_h = 1;
    int elem_bytes = 1;
    uint64_t channel_bytes = 0; // one output channel's weights
    uint64_t table_offset = 0;  // where the weight table starts
    uint64_t bytes = 0;         // the whole constant
};

// The layout of the weights of output channels `channels` (unpadded) of a DPU layer with
// weights.
WeightLayout weight_layout(const LayerPlan &plan, const target::Target &target, Interval channels);

// The bytes of that constant. Pad channels, taps between a dilated kernel's, and input
// channels of other convolution groups get zero weights; pad channels a zero bias.
std::vector<uint8_t> pack_weight_constant(const LayerPlan &plan, const target::Target &target,
                                          Interval channels);

} // namespace vpuc::codegen
