// The DPU emulation as the simulator ran it before its Halide pipelines: scalar loops over each
// variant's output box, with the arithmetic of dpu_arith.h, reading the weight table whole at
// the task's start. The test oracle of dpu_emulation_test.cpp, which holds the pipelines
// (vpu_target/src/sim_dpu.cpp) to it bit for bit. Every tensor of the task lies in one CMX.
#pragma once

#include <algorithm>
#include <cstring>
#include <vector>

#include "vpu_target/blob.h"
#include "vpu_target/dpu_arith.h"

namespace vpuc::test {

using blob::DpuOp;
using blob::DType;

namespace oracle_detail {

// A (C, W, H, N) activation view with strides in elements.
struct View {
    uint8_t *base = nullptr;
    DType dtype = DType::U8;
    int elem = 1;
    int64_t c = 0, w = 0, h = 0;
    int64_t sc = 0, sw = 0, sh = 0;
    int32_t zero_point = 0;

    uint8_t *ptr(int64_t ci, int64_t xi, int64_t yi) const {
        return base + (ci * sc + xi * sw + yi * sh) * elem;
    }
};

inline View view_of(const blob::TensorRef &t, uint8_t *cmx) {
    View v;
    v.base = cmx + t.address()->offset();
    v.dtype = t.dtype();
    v.elem = blob::dtype_bytes(t.dtype());
    const auto *d = t.dims();
    v.c = d->Get(0)->extent();
    v.w = d->Get(1)->extent();
    v.h = d->Get(2)->extent();
    v.sc = d->Get(0)->stride();
    v.sw = d->Get(1)->stride();
    v.sh = d->Get(2)->stride();
    v.zero_point = t.zero_point();
    return v;
}

// fp16 data: the DPU's only float type (the verifier refuses others).
inline float load_half(const uint8_t *p) {
    uint16_t h;
    std::memcpy(&h, p, 2);
    return fp16::to_float(h);
}

inline void store_half(uint8_t *p, float value) {
    uint16_t h = dpu::fp16_output(value);
    std::memcpy(p, &h, 2);
}

inline int32_t load_int(const uint8_t *p, DType t) {
    return t == DType::I8 ? int32_t(int8_t(*p)) : int32_t(*p);
}

inline dpu::Activation activation_of(blob::Activation a) {
    switch (a) {
    case blob::Activation::None:
        return dpu::Activation::None;
    case blob::Activation::Relu:
        return dpu::Activation::Relu;
    case blob::Activation::ReluX:
        return dpu::Activation::ReluX;
    case blob::Activation::LeakyRelu:
        return dpu::Activation::LeakyRelu;
    }
    return dpu::Activation::None;
}

// Everything about the output stage of a task, resolved once.
struct OutputStage {
    View out;
    dpu::IntPpe int_ppe;
    dpu::FloatPpe float_ppe;
    // Per-tensor scale for pools and eltwise.
    uint16_t mult = 1;
    int shift = 0;
    int32_t bias = 0;
    float fp_scale = 1;

    OutputStage(const blob::DpuTask &task, uint8_t *cmx) : out(view_of(*task.output(), cmx)) {
        const blob::Ppe *ppe = task.ppe();
        if (out.dtype == DType::U8) {
            int_ppe.out_min = 0;
            int_ppe.out_max = 255;
        }
        int_ppe.out_zero_point = out.zero_point;
        if (!ppe) return;
        int_ppe.activation = float_ppe.activation = activation_of(ppe->activation());
        int_ppe.relux_max = ppe->relux_max();
        int_ppe.leaky_mult = ppe->leaky_mult();
        int_ppe.leaky_shift = ppe->leaky_shift();
        int_ppe.clamp_low = ppe->clamp_low();
        int_ppe.clamp_high = ppe->clamp_high();
        float_ppe.relux_max = float(ppe->relux_max());
        float_ppe.leaky_alpha = ppe->leaky_alpha();
        float_ppe.clamp_low = ppe->fp_clamp_low();
        float_ppe.clamp_high = ppe->fp_clamp_high();
        mult = uint16_t(ppe->mult());
        shift = ppe->shift();
        bias = ppe->bias();
        fp_scale = ppe->fp_scale();
    }

    // Integer accumulator (bias included) scaled by mult/shift, to the output.
    void store_int(int64_t x, int64_t y, int64_t c, int32_t acc, uint16_t m, int s,
                   float float_scale) const {
        uint8_t *p = out.ptr(c, x, y);
        if (out.dtype == DType::F16) {
            store_half(p, dpu::apply_float_ppe(float(acc) * float_scale, float_ppe));
            return;
        }
        int32_t v = dpu::requantize(acc, m, s, int_ppe);
        if (out.dtype == DType::U8)
            *p = uint8_t(v);
        else
            *p = uint8_t(int8_t(v));
    }

    void store_fp(int64_t x, int64_t y, int64_t c, float value) const {
        store_half(out.ptr(c, x, y), dpu::apply_float_ppe(value, float_ppe));
    }
};

// One weight-table entry: where a channel's weights are and how its output is scaled.
struct ChannelParams {
    const uint8_t *weights = nullptr;
    uint32_t requant = 0;
    int32_t bias = 0;
};

// The task's weight table, read whole when the task starts (as the verifier's replay reads it,
// weight_tables.h): a task whose output overwrites its own table computes with the table it
// started with.
class WeightTable {
  public:
    WeightTable(const blob::DpuTask &task, uint8_t *cmx) {
        const auto *table = task.weight_table();
        const uint8_t *words = cmx + table->address()->offset();
        const int64_t word_stride = table->dims()->Get(0)->stride();
        const int64_t channel_stride = table->dims()->Get(1)->stride();
        const uint64_t weights = task.weights()->address()->offset();
        for (uint32_t c = 0; c < table->dims()->Get(1)->extent(); ++c) {
            int32_t entry[4];
            for (int j = 0; j < 4; ++j)
                std::memcpy(&entry[j], words + (j * word_stride + c * channel_stride) * 4, 4);
            channels_.push_back({cmx + weights + uint32_t(entry[0]), uint32_t(entry[2]), entry[3]});
        }
    }

    const ChannelParams &channel(int64_t c) const { return channels_[size_t(c)]; }

  private:
    std::vector<ChannelParams> channels_;
};

struct Window {
    int kw, kh, sw, sh, pad_left, pad_top;
};

inline Window window_of(const blob::DpuTask &t) {
    return {t.kernel_w(), t.kernel_h(), t.stride_w(), t.stride_h(), t.pad_left(), t.pad_top()};
}

template <typename Fn> void for_each_variant(const blob::DpuTask &task, Fn &&fn) {
    for (const auto *v : *task.variants()) {
        const auto *s = v->start();
        const auto *e = v->end();
        for (int64_t y = s->Get(1); y < e->Get(1); ++y)
            for (int64_t x = s->Get(0); x < e->Get(0); ++x) fn(x, y, s->Get(2), e->Get(2));
    }
}

// Conv and MatMul (a 1x1 conv): full input-channel reduction per output channel.
// Depthwise: each channel with its own kernel.
inline void run_conv(const blob::DpuTask &task, uint8_t *cmx, bool depthwise) {
    View in = view_of(*task.input(), cmx);
    OutputStage stage(task, cmx);
    WeightTable table(task, cmx);
    const auto *wd = task.weights()->dims();
    const int64_t w_sc = wd->Get(0)->stride(), w_sx = wd->Get(1)->stride(),
                  w_sy = wd->Get(2)->stride();
    const DType wt = task.weights()->dtype();
    const int w_elem = blob::dtype_bytes(wt);
    const int32_t w_zp = task.weights_zero_point();
    const Window win = window_of(task);
    const bool fp = in.dtype == DType::F16;

    for_each_variant(task, [&](int64_t x, int64_t y, int64_t c0, int64_t c1) {
        for (int64_t oc = c0; oc < c1; ++oc) {
            const ChannelParams &ch = table.channel(oc);
            int64_t ic0 = depthwise ? oc : 0, ic1 = depthwise ? oc + 1 : in.c;
            int32_t acc = ch.bias;
            float facc = 0;
            for (int ky = 0; ky < win.kh; ++ky) {
                int64_t iy = y * win.sh - win.pad_top + ky;
                if (iy < 0 || iy >= in.h) continue;
                for (int kx = 0; kx < win.kw; ++kx) {
                    int64_t ix = x * win.sw - win.pad_left + kx;
                    if (ix < 0 || ix >= in.w) continue;
                    const uint8_t *wp = ch.weights + (kx * w_sx + ky * w_sy) * w_elem;
                    for (int64_t ic = ic0; ic < ic1; ++ic) {
                        const uint8_t *xp = in.ptr(ic, ix, iy);
                        const uint8_t *wcp = wp + (depthwise ? 0 : ic * w_sc * w_elem);
                        if (fp) {
                            facc += load_half(xp) * load_half(wcp);
                        } else {
                            int32_t prod = (load_int(xp, in.dtype) - in.zero_point) *
                                           (load_int(wcp, wt) - w_zp);
                            acc = dpu::wrap_add(acc, prod);
                        }
                    }
                }
            }
            if (fp) {
                float scale = fp16::bits_float(ch.requant);
                float bias = fp16::bits_float(uint32_t(ch.bias));
                stage.store_fp(x, y, oc, (facc + bias) * scale);
            } else {
                stage.store_int(x, y, oc, acc, dpu::requant_mult(ch.requant),
                                dpu::requant_shift(ch.requant), fp16::bits_float(ch.requant));
            }
        }
    });
}

inline void run_pool(const blob::DpuTask &task, uint8_t *cmx, bool max_pool) {
    View in = view_of(*task.input(), cmx);
    OutputStage stage(task, cmx);
    const Window win = window_of(task);
    const bool fp = in.dtype == DType::F16;

    for_each_variant(task, [&](int64_t x, int64_t y, int64_t c0, int64_t c1) {
        for (int64_t c = c0; c < c1; ++c) {
            int32_t acc = 0;
            float facc = 0;
            bool any = false;
            for (int ky = 0; ky < win.kh; ++ky) {
                int64_t iy = y * win.sh - win.pad_top + ky;
                if (iy < 0 || iy >= in.h) continue;
                for (int kx = 0; kx < win.kw; ++kx) {
                    int64_t ix = x * win.sw - win.pad_left + kx;
                    if (ix < 0 || ix >= in.w) continue;
                    const uint8_t *p = in.ptr(c, ix, iy);
                    if (fp) {
                        float v = load_half(p);
                        facc = max_pool ? (any ? std::max(facc, v) : v) : facc + v;
                    } else {
                        int32_t v = load_int(p, in.dtype) - in.zero_point;
                        acc = max_pool ? (any ? std::max(acc, v) : v) : acc + v;
                    }
                    any = true;
                }
            }
            if (fp)
                stage.store_fp(x, y, c, facc * stage.fp_scale);
            else
                stage.store_int(x, y, c, dpu::wrap_add(acc, stage.bias), stage.mult, stage.shift,
                                stage.fp_scale);
        }
    });
}

template <typename T> T eltwise(blob::EltwiseOp op, T a, T b) {
    switch (op) {
    case blob::EltwiseOp::Add:
        return a + b;
    case blob::EltwiseOp::Sub:
        return a - b;
    case blob::EltwiseOp::Mul:
        return a * b;
    case blob::EltwiseOp::Max:
        return std::max(a, b);
    case blob::EltwiseOp::Min:
        return std::min(a, b);
    }
    return a;
}

inline void run_eltwise(const blob::DpuTask &task, uint8_t *cmx) {
    View a = view_of(*task.input(), cmx);
    View b = view_of(*task.input2(), cmx);
    OutputStage stage(task, cmx);
    const blob::Ppe *ppe = task.ppe();
    const blob::EltwiseOp op = ppe ? ppe->eltwise_op() : blob::EltwiseOp::Add;
    const int32_t m1 = ppe ? ppe->in1_mult() : 1, m2 = ppe ? ppe->in2_mult() : 1;
    const bool fp = a.dtype == DType::F16;

    for_each_variant(task, [&](int64_t x, int64_t y, int64_t c0, int64_t c1) {
        for (int64_t c = c0; c < c1; ++c) {
            if (fp) {
                float v = eltwise(op, load_half(a.ptr(c, x, y)), load_half(b.ptr(c, x, y)));
                stage.store_fp(x, y, c, v * stage.fp_scale);
            } else {
                // Each scaled operand saturates to 32 bits; the result wraps like the
                // accumulator does.
                auto operand = [](int32_t v, int32_t zp, int32_t m) {
                    return std::clamp<int64_t>(int64_t(v - zp) * m, INT32_MIN, INT32_MAX);
                };
                int64_t va = operand(load_int(a.ptr(c, x, y), a.dtype), a.zero_point, m1);
                int64_t vb = operand(load_int(b.ptr(c, x, y), b.dtype), b.zero_point, m2);
                int32_t acc = int32_t(uint32_t(uint64_t(eltwise(op, va, vb))));
                stage.store_int(x, y, c, dpu::wrap_add(acc, stage.bias), stage.mult, stage.shift,
                                stage.fp_scale);
            }
        }
    });
}

} // namespace oracle_detail

// Runs `task`, every tensor of which lies in the CMX memory `cmx`.
inline void run_dpu_scalar(const blob::DpuTask &task, uint8_t *cmx) {
    using namespace oracle_detail;
    switch (task.op()) {
    case DpuOp::Conv:
    case DpuOp::MatMul:
        run_conv(task, cmx, false);
        break;
    case DpuOp::DepthwiseConv:
        run_conv(task, cmx, true);
        break;
    case DpuOp::MaxPool:
        run_pool(task, cmx, true);
        break;
    case DpuOp::AvgPool:
        run_pool(task, cmx, false);
        break;
    case DpuOp::Eltwise:
        run_eltwise(task, cmx);
        break;
    }
}

} // namespace vpuc::test
