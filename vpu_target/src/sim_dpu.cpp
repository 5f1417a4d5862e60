// Functional DPU: conv, depthwise conv, pools, eltwise and matmul with the PPE, as dpu_arith.h
// defines them, computed by Halide pipelines compiled when vpuc is built (dpu_kernels/). This
// file turns a task into calls: views of memory as halide_buffer_t, the weight table read
// whole when the task starts (a task whose output overwrites its own table computes with the
// table it started with), the weights packed per output channel, and one call per variant's
// output box (per slice of its channels when the packed weights would be large). The verifier
// refuses outputs that overlap what the task reads, so the order of the pipelines' stores
// does not matter.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <mutex>
#include <optional>
#include <vector>

#include "HalideRuntime.h"
#include "dpu_kernel_abi.h"
#include "sim_memory.h"
#include "vpu_target/dpu_arith.h"
#include "vpuc_dpu_avgpool_f16.h"
#include "vpuc_dpu_avgpool_i8.h"
#include "vpuc_dpu_avgpool_i8_to_f16.h"
#include "vpuc_dpu_conv_f16.h"
#include "vpuc_dpu_conv_i8.h"
#include "vpuc_dpu_conv_i8_to_f16.h"
#include "vpuc_dpu_depthwise_f16.h"
#include "vpuc_dpu_depthwise_i8.h"
#include "vpuc_dpu_depthwise_i8_to_f16.h"
#include "vpuc_dpu_eltwise_f16.h"
#include "vpuc_dpu_eltwise_i8.h"
#include "vpuc_dpu_eltwise_i8_to_f16.h"
#include "vpuc_dpu_maxpool_f16.h"
#include "vpuc_dpu_maxpool_i8.h"
#include "vpuc_dpu_maxpool_i8_to_f16.h"

namespace vpuc::sim {

using blob::DpuOp;
using blob::DType;
using namespace dpu_kernels;

namespace {

// ---- Memory as Halide buffers ----------------------------------------------------------

constexpr halide_type_t kBits8{halide_type_uint, 8, 1};
constexpr halide_type_t kBits16{halide_type_uint, 16, 1};
constexpr halide_type_t kInt32{halide_type_int, 32, 1};
constexpr halide_type_t kFloat32{halide_type_float, 32, 1};

// A halide_buffer_t over memory the caller owns: `host` is the element at the dims' mins.
class HalideBuffer {
  public:
    HalideBuffer(const void *host, halide_type_t type, std::vector<halide_dimension_t> dims)
        : dims_(std::move(dims)) {
        buffer_.host = static_cast<uint8_t *>(const_cast<void *>(host));
        buffer_.type = type;
        buffer_.dimensions = int32_t(dims_.size());
        buffer_.dim = dims_.data();
    }
    HalideBuffer(const HalideBuffer &) = delete;
    HalideBuffer &operator=(const HalideBuffer &) = delete;
    halide_buffer_t *get() { return &buffer_; }

  private:
    std::vector<halide_dimension_t> dims_;
    halide_buffer_t buffer_{};
};

// A dense buffer of n1 x n0 int32 values (n0 innermost), dims starting at `min0`.
struct Table {
    Table(int64_t min0, int64_t n0, int64_t n1) : min0(min0), n0(n0), values(size_t(n0 * n1)) {}
    int32_t &at(int64_t i0, int64_t i1) { return values[size_t(i1 * n0 + (i0 - min0))]; }
    HalideBuffer buffer() const {
        return HalideBuffer(values.data(), kInt32,
                            {{int32_t(min0), int32_t(n0), 1, 0},
                             {0, int32_t(values.size() / size_t(n0)), int32_t(n0), 0}});
    }
    int64_t min0, n0;
    std::vector<int32_t> values;
};

int32_t bits_of(float f) {
    return int32_t(fp16::float_bits(f));
}

// ---- Views -----------------------------------------------------------------------------

// A (C, W, H, N) activation view, batch 1, strides in elements; C stride 1 (the verifier's).
struct View {
    uint8_t *base = nullptr;
    DType dtype = DType::U8;
    int elem = 1;
    int64_t c = 0, w = 0, h = 0;
    int64_t sw = 0, sh = 0;
    int32_t zero_point = 0;

    uint8_t *at(int64_t ci, int64_t xi, int64_t yi) const {
        return base + (ci + xi * sw + yi * sh) * elem;
    }
    halide_type_t bits() const { return dtype == DType::F16 ? kBits16 : kBits8; }
    // Dims of a halide_buffer_t over channels [c0, c0 + nc), columns [x0, x0 + nx), rows
    // [y0, y0 + ny). The verifier keeps DPU tensors within 2 GiB, so they fit int32.
    std::vector<halide_dimension_t> dims(int64_t c0, int64_t nc, int64_t x0, int64_t nx, int64_t y0,
                                         int64_t ny) const {
        return {{int32_t(c0), int32_t(nc), 1, 0},
                {int32_t(x0), int32_t(nx), int32_t(sw), 0},
                {int32_t(y0), int32_t(ny), int32_t(sh), 0}};
    }
    HalideBuffer whole() const { return HalideBuffer(base, bits(), dims(0, c, 0, w, 0, h)); }
    // The input sign flip and zero point the pipelines take: i8 bits are read as u8 + 128.
    int32_t sign_flip() const { return dtype == DType::I8 ? 0x80 : 0; }
    int32_t flipped_zero_point() const { return zero_point + (dtype == DType::I8 ? 128 : 0); }
};

View view_of(const blob::TensorRef &t, Memory &memory) {
    View v;
    v.base = memory.at(*t.address());
    v.dtype = t.dtype();
    v.elem = blob::dtype_bytes(t.dtype());
    const auto *d = t.dims();
    v.c = d->Get(0)->extent();
    v.w = d->Get(1)->extent();
    v.h = d->Get(2)->extent();
    // A dimension of extent 1 is never stepped along, whatever its stride.
    v.sw = v.w > 1 ? d->Get(1)->stride() : 0;
    v.sh = v.h > 1 ? d->Get(2)->stride() : 0;
    v.zero_point = t.zero_point();
    return v;
}

// An input of a per-channel operation (depthwise, pools, eltwise) as a call reads it: a call
// computes whole tiles of kTileChannels channels and reads the same input channels, so an
// input of fewer channels is read from a dense copy with zeros past its own.
class ChannelInput {
  public:
    explicit ChannelInput(const View &in) : view_(in) {
        if (in.c >= kTileChannels) return;
        view_.c = kTileChannels;
        view_.sw = view_.c;
        view_.sh = view_.c * in.w;
        copy_.assign(size_t(view_.sh * in.h * in.elem), 0);
        view_.base = copy_.data();
        for (int64_t y = 0; y < in.h; ++y)
            for (int64_t x = 0; x < in.w; ++x)
                std::memcpy(view_.at(0, x, y), in.at(0, x, y), size_t(in.c * in.elem));
    }
    const View &view() const { return view_; }

  private:
    View view_;
    std::vector<uint8_t> copy_;
};

// ---- The task's parameters ---------------------------------------------------------------

dpu::Activation activation_of(blob::Activation a) {
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

// The `ppe` buffer of every call: dpu::IntPpe and dpu::FloatPpe as the task sets them (their
// defaults without a Ppe), the output type's range, and the eltwise multipliers; and the two
// values that choose a pipeline's code path, the activation and the eltwise op.
class PpeFields {
  public:
    PpeFields(const blob::DpuTask &task, const View &out) {
        dpu::IntPpe i;
        dpu::FloatPpe f;
        if (out.dtype == DType::U8) i.out_min = 0, i.out_max = 255;
        i.out_zero_point = out.zero_point;
        int32_t in1_mult = 1, in2_mult = 1;
        if (const blob::Ppe *ppe = task.ppe()) {
            i.activation = f.activation = activation_of(ppe->activation());
            i.relux_max = ppe->relux_max();
            i.leaky_mult = ppe->leaky_mult();
            i.leaky_shift = ppe->leaky_shift();
            i.clamp_low = ppe->clamp_low();
            i.clamp_high = ppe->clamp_high();
            f.relux_max = float(ppe->relux_max());
            f.leaky_alpha = ppe->leaky_alpha();
            f.clamp_low = ppe->fp_clamp_low();
            f.clamp_high = ppe->fp_clamp_high();
            eltwise_op = int32_t(ppe->eltwise_op());
            in1_mult = ppe->in1_mult();
            in2_mult = ppe->in2_mult();
        }
        activation = int32_t(i.activation);
        fields_[kReluxMax] = i.relux_max;
        fields_[kLeakyMult] = i.leaky_mult;
        fields_[kLeakyShift] = i.leaky_shift;
        fields_[kClampLow] = i.clamp_low;
        fields_[kClampHigh] = i.clamp_high;
        fields_[kOutZeroPoint] = i.out_zero_point;
        fields_[kOutMin] = i.out_min;
        fields_[kOutMax] = i.out_max;
        fields_[kFpReluxMax] = bits_of(f.relux_max);
        fields_[kFpLeakyAlpha] = bits_of(f.leaky_alpha);
        fields_[kFpClampLow] = bits_of(f.clamp_low);
        fields_[kFpClampHigh] = bits_of(f.clamp_high);
        fields_[kIn1Mult] = in1_mult;
        fields_[kIn2Mult] = in2_mult;
    }
    HalideBuffer buffer() { return HalideBuffer(fields_, kInt32, {{0, kPpeFields, 1, 0}}); }

    int32_t activation = 0;
    int32_t eltwise_op = 0;

  private:
    int32_t fields_[kPpeFields] = {};
};

static_assert(int(blob::EltwiseOp::MAX) + 1 == kEltwiseOps, "the pipelines' eltwise ops");

// The `channels` buffer: each output channel's bias and scaling, for channels [0, C) and
// kTileChannels more (zeros), which a call computing a whole tile past C reads.
Table channel_table(int64_t channels) {
    return Table(0, channels + kTileChannels, kChannelFields);
}

// Pools and eltwise: one scaling for every channel (Ppe.mult/shift/bias/fp_scale). fp16
// inputs add a bias of -0.0, which changes no value.
Table per_tensor_scaling(const blob::DpuTask &task, const View &in, const View &out) {
    const blob::Ppe *ppe = task.ppe();
    const bool fp16 = in.dtype == DType::F16;
    Table t = channel_table(out.c);
    for (int64_t c = 0; c < out.c; ++c) {
        t.at(c, kBias) = fp16 ? bits_of(-0.0f) : ppe ? ppe->bias() : 0;
        t.at(c, kMult) = ppe ? uint16_t(ppe->mult()) : 1;
        t.at(c, kShift) = ppe ? ppe->shift() : 0;
        t.at(c, kScale) = bits_of(ppe ? ppe->fp_scale() : 1.0f);
    }
    return t;
}

// ---- Weights ---------------------------------------------------------------------------

// The task's weight table, read whole when the task starts (as the verifier's replay reads it,
// weight_tables.h): each output channel's weights and its scaling.
class WeightTable {
  public:
    WeightTable(const blob::DpuTask &task, Memory &memory, const std::string &task_name)
        : scaling_(channel_table(task.weight_table()->dims()->Get(1)->extent())) {
        const auto *table = task.weight_table();
        const uint8_t *words = memory.at(*table->address());
        const int64_t word_stride = table->dims()->Get(0)->stride();
        const int64_t channel_stride = table->dims()->Get(1)->stride();
        const blob::Address &weights = *task.weights()->address();
        const uint64_t span = blob::channel_weight_span(*task.weights());
        const bool fp16 = task.input()->dtype() == DType::F16;
        for (uint32_t c = 0; c < table->dims()->Get(1)->extent(); ++c) {
            int32_t entry[4];
            for (int j = 0; j < 4; ++j)
                std::memcpy(&entry[j], words + (j * word_stride + c * channel_stride) * 4, 4);
            const uint64_t offset = weights.offset() + uint32_t(entry[0]);
            // The verifier checked every entry: this is a guard, not a check.
            if (!memory.contains(weights.space(), weights.index(), offset, span))
                throw blob::BlobError("task '" + task_name + "': weight table entry " +
                                      std::to_string(c) + ": weights offset " +
                                      std::to_string(uint32_t(entry[0])) +
                                      " puts the channel's weights outside their memory (a "
                                      "verifier bug: it checks every entry)");
            pointers_.push_back(memory.at(blob::Address(weights.space(), weights.index(), offset)));
            const uint32_t requant = uint32_t(entry[2]);
            scaling_.at(c, kBias) = entry[3]; // fp16: the float's bits
            scaling_.at(c, kMult) = fp16 ? 0 : dpu::requant_mult(requant);
            scaling_.at(c, kShift) = fp16 ? 0 : dpu::requant_shift(requant);
            scaling_.at(c, kScale) = int32_t(requant); // fp16 outputs: the float's bits
        }
    }

    const uint8_t *weights(int64_t c) const { return pointers_[size_t(c)]; }
    int64_t channels() const { return int64_t(pointers_.size()); }
    const Table &scaling() const { return scaling_; }

  private:
    Table scaling_;
    std::vector<const uint8_t *> pointers_;
};

// One channel's weights as the task's weights tensor lays them out from its pointer:
// (IC, KW, KH) strides in elements (depthwise: IC 1).
struct WeightLayout {
    WeightLayout(const blob::DpuTask &task, bool depthwise) {
        const blob::TensorRef &w = *task.weights();
        const auto *d = w.dims();
        dtype = w.dtype();
        elem = blob::dtype_bytes(dtype);
        zero_point = task.weights_zero_point();
        ic = depthwise ? 1 : task.input()->dims()->Get(0)->extent();
        kw = task.kernel_w();
        kh = task.kernel_h();
        sc = d->Get(0)->stride();
        sx = d->Get(1)->stride();
        sy = d->Get(2)->stride();
    }
    int64_t per_channel() const { return ic * kw * kh; }

    DType dtype;
    int elem;
    int32_t zero_point;
    int64_t ic, kw, kh, sc, sx, sy;
};

// The weights of output channels [c0, c0 + n), dense as (c, ic, kx, ky) with c innermost:
// int32 minus the zero point, or float. Channels past the table's are zero.
class PackedWeights {
  public:
    PackedWeights(const WeightTable &table, const WeightLayout &l, int64_t c0, int64_t n)
        : layout_(l), c0_(c0), n_(n), values_(size_t(n * l.per_channel()), 0) {
        const int64_t end = std::min(c0 + n, table.channels());
        for (int64_t c = c0; c < end; ++c) pack_channel(table.weights(c), c - c0);
        finite_ =
            l.dtype != DType::F16 || std::all_of(values_.begin(), values_.end(), [](int32_t bits) {
                return std::isfinite(fp16::bits_float(uint32_t(bits)));
            });
    }

    // fp16: every weight finite (then the pipeline need not test padding taps).
    bool finite() const { return finite_; }

    // Channels [c0, c1), which must be packed.
    HalideBuffer buffer(int64_t c0, int64_t c1) const {
        const halide_type_t type = layout_.dtype == DType::F16 ? kFloat32 : kInt32;
        const int32_t n = int32_t(n_), ic = int32_t(layout_.ic), kw = int32_t(layout_.kw);
        return HalideBuffer(values_.data() + (c0 - c0_), type,
                            {{int32_t(c0), int32_t(c1 - c0), 1, 0},
                             {0, ic, n, 0},
                             {0, kw, n * ic, 0},
                             {0, int32_t(layout_.kh), n * ic * kw, 0}});
    }

  private:
    void pack_channel(const uint8_t *weights, int64_t c) {
        const WeightLayout &l = layout_;
        int32_t *out = values_.data() + c;
        for (int64_t ky = 0; ky < l.kh; ++ky)
            for (int64_t kx = 0; kx < l.kw; ++kx)
                for (int64_t ic = 0; ic < l.ic; ++ic, out += n_)
                    *out = value(weights + (ic * l.sc + kx * l.sx + ky * l.sy) * l.elem);
    }

    int32_t value(const uint8_t *p) const {
        switch (layout_.dtype) {
        case DType::F16: {
            uint16_t h;
            std::memcpy(&h, p, 2);
            return bits_of(fp16::to_float(h));
        }
        case DType::I8:
            return int32_t(int8_t(*p)) - layout_.zero_point;
        default:
            return int32_t(*p) - layout_.zero_point;
        }
    }

    const WeightLayout &layout_;
    int64_t c0_, n_;
    std::vector<int32_t> values_; // int32, or float bits
    bool finite_ = true;
};

// ---- Calls -----------------------------------------------------------------------------

struct Box {
    int64_t x0, y0, c0, x1, y1, c1;
};

std::vector<Box> variant_boxes(const blob::DpuTask &task) {
    std::vector<Box> boxes;
    for (const auto *v : *task.variants()) {
        const auto *s = v->start();
        const auto *e = v->end();
        boxes.push_back({s->Get(0), s->Get(1), s->Get(2), e->Get(0), e->Get(1), e->Get(2)});
    }
    return boxes;
}

// The message of the pipelines' last error on this thread (Halide's error handler is global to
// the process's ahead-of-time runtime; libHalide's JIT has its own).
thread_local std::string last_pipeline_error;

void keep_pipeline_error(void *, const char *message) {
    last_pipeline_error = message;
}

void check_call(int status, const std::string &task_name) {
    if (status != 0)
        throw blob::BlobError(
            "task '" + task_name +
            "': the DPU emulation failed (a simulator bug): " + last_pipeline_error);
}

// Computes `box` of `out` by calls of `call(output buffer, c0, c1)`, each computing channels
// [c0, c1) of its output buffer's columns and rows. A call computes at least kTileChannels
// channels and `tile_columns` columns, and at most `slice_channels` channels (when more than
// kTileChannels): a smaller box is computed into a scratch buffer of a tile's size and copied
// out. The scratch tile's channels stay inside [0, C) when C allows, as per-channel operations
// read the input's channels.
template <typename Call>
void compute_box(const View &out, const Box &box, int tile_columns, int64_t slice_channels,
                 const std::string &task_name, Call &&call) {
    static std::once_flag handler_set;
    std::call_once(handler_set, [] { halide_set_error_handler(keep_pipeline_error); });
    const int64_t nx = box.x1 - box.x0, ny = box.y1 - box.y0;
    slice_channels = std::max<int64_t>(slice_channels, kTileChannels);
    for (int64_t c0 = box.c0; c0 < box.c1; c0 += slice_channels) {
        int64_t c1 = std::min(c0 + slice_channels, box.c1);
        if (c1 - c0 < kTileChannels && box.c1 - box.c0 >= kTileChannels)
            c0 = c1 - kTileChannels; // the last slice overlaps the one before: same values
        if (c1 - c0 >= kTileChannels && nx >= tile_columns) {
            HalideBuffer o(out.at(c0, box.x0, box.y0), out.bits(),
                           out.dims(c0, c1 - c0, box.x0, nx, box.y0, ny));
            check_call(call(o.get(), c0, c1), task_name);
            continue;
        }
        const int64_t tile_nc = std::max<int64_t>(c1 - c0, kTileChannels);
        const int64_t tile_c0 = std::max<int64_t>(0, std::min(c0, out.c - tile_nc));
        const int64_t tile_nx = std::max<int64_t>(nx, tile_columns);
        std::vector<uint8_t> scratch(size_t(tile_nc * tile_nx * ny * out.elem));
        HalideBuffer o(scratch.data(), out.bits(),
                       {{int32_t(tile_c0), int32_t(tile_nc), 1, 0},
                        {int32_t(box.x0), int32_t(tile_nx), int32_t(tile_nc), 0},
                        {int32_t(box.y0), int32_t(ny), int32_t(tile_nc * tile_nx), 0}});
        check_call(call(o.get(), tile_c0, tile_c0 + tile_nc), task_name);
        const uint8_t *from = scratch.data() + (c0 - tile_c0) * out.elem;
        for (int64_t y = 0; y < ny; ++y)
            for (int64_t x = 0; x < nx; ++x)
                std::memcpy(out.at(c0, box.x0 + x, box.y0 + y),
                            from + (x + y * tile_nx) * tile_nc * out.elem,
                            size_t((c1 - c0) * out.elem));
    }
}

// Weights are packed once for all of a task's output channels when that takes at most this
// many bytes, else for each call (computing at most as many channels as fit).
constexpr int64_t kPackedWeightBytes = 64 << 20;

// The pipelines by element types: 8-bit in and out, 8-bit in and fp16 out, fp16 in and out
// (the verifier refuses an fp16 input with an 8-bit output).
template <typename F> F by_types(const View &in, const View &out, F i8, F i8_to_f16, F f16) {
    if (in.dtype == DType::F16) return f16;
    return out.dtype == DType::F16 ? i8_to_f16 : i8;
}

// Conv and MatMul (a 1x1 conv): the full input-channel reduction per output channel.
// Depthwise: each channel with its own kernel.
void run_conv(const blob::DpuTask &task, Memory &memory, const std::string &name, bool depthwise) {
    const View out = view_of(*task.output(), memory);
    // A conv reads every input channel, a depthwise conv those of its output channels.
    std::optional<ChannelInput> channel_input;
    View input = view_of(*task.input(), memory);
    if (depthwise) input = channel_input.emplace(input).view();
    WeightTable table(task, memory, name);
    const WeightLayout layout(task, depthwise);
    PpeFields ppe(task, out);
    const auto pipeline = depthwise ? by_types(input, out, vpuc_dpu_depthwise_i8,
                                               vpuc_dpu_depthwise_i8_to_f16, vpuc_dpu_depthwise_f16)
                                    : by_types(input, out, vpuc_dpu_conv_i8,
                                               vpuc_dpu_conv_i8_to_f16, vpuc_dpu_conv_f16);
    HalideBuffer in_buf = input.whole(), ppe_buf = ppe.buffer();
    HalideBuffer scaling = table.scaling().buffer();
    const int64_t channel_bytes = 4 * layout.per_channel();
    const int64_t all_channels = table.channels() + kTileChannels; // scratch tiles read past C
    std::optional<PackedWeights> all_weights;
    if (all_channels * channel_bytes <= kPackedWeightBytes)
        all_weights.emplace(table, layout, 0, all_channels);
    auto call = [&](halide_buffer_t *o, const PackedWeights &weights, int64_t c0, int64_t c1) {
        HalideBuffer w = weights.buffer(c0, c1);
        return pipeline(in_buf.get(), w.get(), scaling.get(), ppe_buf.get(), ppe.activation,
                        input.sign_flip(), input.flipped_zero_point(), task.stride_w(),
                        task.stride_h(), task.pad_left(), task.pad_top(), weights.finite(), o);
    };
    for (const Box &box : variant_boxes(task)) {
        const int64_t slice = all_weights ? box.c1 - box.c0 : kPackedWeightBytes / channel_bytes;
        compute_box(out, box, kConvTileColumns, slice, name,
                    [&](halide_buffer_t *o, int64_t c0, int64_t c1) {
                        if (all_weights) return call(o, *all_weights, c0, c1);
                        return call(o, PackedWeights(table, layout, c0, c1 - c0), c0, c1);
                    });
    }
}

void run_pool(const blob::DpuTask &task, Memory &memory, const std::string &name, bool max_pool) {
    const View out = view_of(*task.output(), memory);
    const ChannelInput channel_input(view_of(*task.input(), memory));
    const View &in = channel_input.view();
    Table scaling = per_tensor_scaling(task, in, out);
    PpeFields ppe(task, out);
    const auto pipeline = max_pool ? by_types(in, out, vpuc_dpu_maxpool_i8,
                                              vpuc_dpu_maxpool_i8_to_f16, vpuc_dpu_maxpool_f16)
                                   : by_types(in, out, vpuc_dpu_avgpool_i8,
                                              vpuc_dpu_avgpool_i8_to_f16, vpuc_dpu_avgpool_f16);
    HalideBuffer in_buf = in.whole(), ppe_buf = ppe.buffer(), scale_buf = scaling.buffer();
    for (const Box &box : variant_boxes(task))
        compute_box(out, box, kPoolTileColumns, box.c1 - box.c0, name,
                    [&](halide_buffer_t *o, int64_t, int64_t) {
                        return pipeline(in_buf.get(), scale_buf.get(), ppe_buf.get(),
                                        ppe.activation, in.sign_flip(), in.flipped_zero_point(),
                                        task.kernel_w(), task.kernel_h(), task.stride_w(),
                                        task.stride_h(), task.pad_left(), task.pad_top(), o);
                    });
}

void run_eltwise(const blob::DpuTask &task, Memory &memory, const std::string &name) {
    const View out = view_of(*task.output(), memory);
    const ChannelInput a_input(view_of(*task.input(), memory));
    const ChannelInput b_input(view_of(*task.input2(), memory));
    const View &a = a_input.view(), &b = b_input.view();
    Table scaling = per_tensor_scaling(task, a, out);
    PpeFields ppe(task, out);
    const auto pipeline =
        by_types(a, out, vpuc_dpu_eltwise_i8, vpuc_dpu_eltwise_i8_to_f16, vpuc_dpu_eltwise_f16);
    HalideBuffer a_buf = a.whole(), b_buf = b.whole(), ppe_buf = ppe.buffer();
    HalideBuffer scale_buf = scaling.buffer();
    for (const Box &box : variant_boxes(task))
        compute_box(out, box, 1, box.c1 - box.c0, name, [&](halide_buffer_t *o, int64_t, int64_t) {
            return pipeline(a_buf.get(), b_buf.get(), scale_buf.get(), ppe_buf.get(),
                            ppe.activation, ppe.eltwise_op, a.sign_flip(), a.flipped_zero_point(),
                            b.flipped_zero_point(), o);
        });
}

} // namespace

void run_dpu(const blob::DpuTask &task, Memory &memory, const std::string &task_name) {
    switch (task.op()) {
    case DpuOp::Conv:
    case DpuOp::MatMul:
        run_conv(task, memory, task_name, false);
        break;
    case DpuOp::DepthwiseConv:
        run_conv(task, memory, task_name, true);
        break;
    case DpuOp::MaxPool:
        run_pool(task, memory, task_name, true);
        break;
    case DpuOp::AvgPool:
        run_pool(task, memory, task_name, false);
        break;
    case DpuOp::Eltwise:
        run_eltwise(task, memory, task_name);
        break;
    }
}

} // namespace vpuc::sim
