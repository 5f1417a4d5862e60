// Pass pack_weights: fills the constants build_tasks reserved for weights with the weights and
// weight table of their range of output channels, in the DPU's layout.
#include <algorithm>
#include <cstring>

#include "dpu_layout.h"
#include "vpu_target/dpu_arith.h"
#include "vpu_target/fp16.h"

namespace vpuc::codegen {

namespace {

size_t per_channel_index(const std::vector<int32_t> &values, int64_t c) {
    return values.size() == 1 ? 0 : size_t(c);
}

uint32_t requant_word(const DpuOpDesc &d, int64_t c) {
    if (d.input_type.is_float())
        return fp16::float_bits(
            d.fp_scale.empty() ? 1.0f : d.fp_scale[d.fp_scale.size() == 1 ? 0 : size_t(c)]);
    size_t i = d.mult.size() == 1 ? 0 : size_t(c);
    return dpu::pack_requant(d.mult.at(i), d.shift.at(i));
}

int32_t bias_word(const DpuOpDesc &d, int64_t c) {
    if (d.input_type.is_float())
        return d.fp_bias.empty()
                   ? 0
                   : int32_t(fp16::float_bits(d.fp_bias[d.fp_bias.size() == 1 ? 0 : size_t(c)]));
    return d.bias.empty() ? 0 : d.bias[per_channel_index(d.bias, c)];
}

} // namespace

WeightLayout weight_layout(const LayerPlan &plan, const target::Target &target, Interval channels) {
    const DpuOpDesc &d = plan.dpu;
    WeightLayout l;
    l.out_channels = {channels.begin, channels.begin + ceil_group(channels.extent(), target)};
    if (d.op == target::DpuOpKind::DepthwiseConv) {
        l.in_channels = {0, 1};
    } else {
        // The input channels of the convolution groups of these output channels, in whole
        // channel groups unless channel-major.
        const int64_t per_group_out = plan.layer.output().shape[dsl::dims::C] / d.groups;
        const int64_t per_group_in = d.weights.dim(0).extent();
        const Interval real{channels.begin / per_group_out * per_group_in,
                            ((channels.end - 1) / per_group_out + 1) * per_group_in};
        l.in_channels = channel_major(plan, target) ? real : group_span(real, target);
    }
    l.kernel_w = kernel_span_w(d);
    l.kernel_h = kernel_span_h(d);
    l.elem_bytes = d.weights.type().bytes();
    l.channel_bytes = uint64_t(l.in_channels.extent()) * uint64_t(l.kernel_w) *
                      uint64_t(l.kernel_h) * uint64_t(l.elem_bytes);
    l.table_offset = (l.channel_bytes * uint64_t(l.out_channels.extent()) + 63) / 64 * 64;
    l.bytes = l.table_offset + uint64_t(l.out_channels.extent()) * 4 * sizeof(int32_t);
    return l;
}

std::vector<uint8_t> pack_weight_constant(const LayerPlan &plan, const target::Target &target,
                                          Interval channels) {
    const DpuOpDesc &d = plan.dpu;
    const WeightLayout l = weight_layout(plan, target, channels);
    const Interval oc = l.out_channels, in = l.in_channels;
    const int64_t out_channels = plan.layer.output().shape[dsl::dims::C];
    const auto &w = d.weights;
    const bool depthwise = d.op == target::DpuOpKind::DepthwiseConv;
    const int ic = int(in.extent());
    const int64_t per_group_out = out_channels / d.groups;
    const int64_t per_group_in = depthwise ? 1 : w.dim(0).extent();
    const int elem = l.elem_bytes;
    std::vector<uint8_t> data(l.bytes);
    // A weight equal to the zero point contributes nothing (int8); +0.0 for fp16.
    const uint8_t zero_weight = w.type().is_float() ? 0 : uint8_t(d.weights_zero_point);
    for (int64_t c = oc.begin; c < oc.end; ++c) {
        uint8_t *out = data.data() + uint64_t(c - oc.begin) * l.channel_bytes;
        // The input channels of c's convolution group, as offsets into the task's.
        const int64_t first = depthwise ? 0 : c / per_group_out * per_group_in - in.begin;
        // Per tap, the task's input channels: zeros, then c's group's run of weights (the
        // innermost dimension of `w`, copied at once when dense), then zeros.
        const int64_t run_begin = std::max<int64_t>(first, 0),
                      run_end = std::min<int64_t>(first + per_group_in, ic);
        for (int ky = 0; ky < l.kernel_h; ++ky)
            for (int kx = 0; kx < l.kernel_w; ++kx) {
                const bool tap = kx % d.dilation_w == 0 && ky % d.dilation_h == 0;
                if (c >= out_channels || !tap || run_begin >= run_end) {
                    std::memset(out, zero_weight, size_t(ic) * size_t(elem));
                    out += int64_t(ic) * elem;
                    continue;
                }
                std::memset(out, zero_weight, size_t(run_begin) * size_t(elem));
                int pos4[4] = {int(run_begin - first), kx / d.dilation_w, ky / d.dilation_h,
                               int(c)};
                int pos2[2] = {int(run_begin - first), int(c)};
                int *pos = w.dimensions() > 2 ? pos4 : pos2;
                uint8_t *run = out + run_begin * elem;
                if (w.dim(0).stride() == 1) {
                    std::memcpy(run, w.raw_buffer()->address_of(pos),
                                size_t(run_end - run_begin) * size_t(elem));
                } else {
                    for (int64_t i = run_begin; i < run_end; ++i, ++pos[0])
                        std::memcpy(run + (i - run_begin) * elem, w.raw_buffer()->address_of(pos),
                                    size_t(elem));
                }
                std::memset(out + run_end * elem, zero_weight, size_t(ic - run_end) * size_t(elem));
                out += int64_t(ic) * elem;
            }
        // Pad channels compute 0 (a finite value in fp16) scaled like the last channel.
        const int64_t real = std::min(c, out_channels - 1);
        const int32_t entry[4] = {int32_t(uint64_t(c - oc.begin) * l.channel_bytes), 0,
                                  int32_t(requant_word(d, real)),
                                  c < out_channels ? bias_word(d, c) : 0};
        std::memcpy(data.data() + l.table_offset + uint64_t(c - oc.begin) * sizeof(entry), entry,
                    sizeof(entry));
    }
    return data;
}

void pack_weights(LoweringState &s) {
    for (const WeightPack &pack : s.weight_packs) {
        const BufferDecl &constant = s.program.buffers.at(size_t(pack.constant));
        const std::vector<uint8_t> data =
            pack_weight_constant(s.plan_of(pack.layer), s.target, pack.channels);
        if (data.size() != constant.bytes ||
            constant.offset + data.size() > s.program.constants.size())
            throw LoweringError("layer '" + pack.layer + "': the constant '" + constant.name +
                                "' of " + std::to_string(constant.bytes) +
                                " bytes does not hold its " + std::to_string(data.size()) +
                                " bytes of weights");
        std::memcpy(s.program.constants.data() + constant.offset, data.data(), data.size());
    }
}

// Every DPU task of an operation with weights reads weights and a weight table, copied whole
// from one packed constant, and every table entry points at its channel's weights.
void verify_weights(const LoweringState &s) {
    const Program &p = s.program;
    // CMX buffer -> the constant copied into it.
    std::map<int, int> copied_from;
    for (const TaskIR &t : p.tasks)
        if (const auto *dma = std::get_if<DmaWork>(&t.work);
            dma && p.buffers[size_t(dma->src.buffer)].space == blob::MemSpace::Constant)
            for (const View &dst : dma->dsts) copied_from[dst.buffer] = dma->src.buffer;
    for (const TaskIR &t : p.tasks) {
        const auto *dpu = std::get_if<DpuWork>(&t.work);
        if (!dpu) continue;
        auto fail = [&](const std::string &what) {
            throw LoweringError("layer '" + t.layer + "': task '" + t.name + "': " + what);
        };
        if (dpu->has_weights != has_weights(s.plan_of(t.layer).dpu))
            fail(dpu->has_weights ? "weights for an operation without them"
                                  : "no weights and weight table");
        if (!dpu->has_weights) continue;
        if (dpu->weights.buffer != dpu->weight_table.buffer)
            fail("weights and weight table in different buffers");
        const auto source = copied_from.find(dpu->weight_table.buffer);
        if (source == copied_from.end()) fail("its weight table is copied from no constant");
        const BufferDecl &constant = p.buffers[size_t(source->second)];
        const uint64_t channels = dpu->weight_table.dims[1].extent();
        const uint64_t channel_bytes = uint64_t(dpu->weights.dims[3].stride()) *
                                       uint64_t(blob::dtype_bytes(dpu->weights.dtype));
        if (dpu->weight_table.offset + channels * 4 * sizeof(int32_t) > constant.bytes)
            fail("its weight table ends past its constant '" + constant.name + "'");
        for (uint64_t c = 0; c < channels; ++c) {
            int32_t entry = 0;
            std::memcpy(&entry,
                        p.constants.data() + constant.offset + dpu->weight_table.offset +
                            c * 4 * sizeof(int32_t),
                        sizeof(entry));
            if (uint64_t(entry) != c * channel_bytes)
                fail("weight table entry " + std::to_string(c) + " points at byte " +
                     std::to_string(entry) + ", not at the channel's weights");
        }
    }
}

} // namespace vpuc::codegen
