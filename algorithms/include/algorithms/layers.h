// The layer library: each layer kind as a dsl::Layer whose algorithm is an exact Halide
// definition. Activations are Funcs of (c, x, y) (dsl::act_vars()), batch 1; every shape is
// logical NCHW with N = 1.
//
// Canonical forms (the DPU matcher in codegen/dpu_match recognizes these, and only these):
//   padded input  P(c, x, y) = select(0 <= x < W && 0 <= y < H,
//                                     i32(in(c, clamp(x, 0, W-1), clamp(y, 0, H-1))) - zp, 0)
//                 (fp: f32(in(...)) and 0.0f; max pool: the type's lowest value outside);
//                 only when the layer pads, else the reduction reads i32(in(...)) - zp itself
//   conv          acc(c, x, y) = bias(c);  acc(c, x, y) += P(ic, x*sx + kx*dx - pl,
//                 y*sy + ky*dy - pt) * (i32(w(r_ic, kx, ky, c)) - zp_w) over RDom(ic, kx, ky),
//                 ic = r_ic, or (c / oc_per_group) * ic_per_group + r_ic with groups;
//                 out = requantize(acc, mult(c), shift(c)) (arith.h)
//                 fp: acc = 0.0f; += P(...) * f32(w(...)); out = apply_float_ppe((acc + bias(c))
//                 * scale(c)), the RDom order (ic, kx, ky) innermost first, as the DPU sums
//   depthwise     as conv with RDom(kx, ky), P(c, ...) * (i32(w(0, kx, ky, c)) - zp_w)
//   matmul        as conv with RDom(k): (i32(in(k, x, y)) - zp) * (i32(w(k, c)) - zp_w)
//   max pool      acc = lowest; acc = max(acc, P(c, x*sx + kx - pl, y*sy + ky - pt))
//   avg pool      acc = 0; acc += P(c, ...): the sum over the whole window, divided by its
//                 area (count_include_pad) by the output stage
//   pools' output int8: requantize(acc, mult, shift) with per-tensor constants;
//                 fp: apply_float_ppe(acc * scale), scale 1 (max) or 1 / area (average)
//   eltwise       out = requantize(i32(op(sat(i64(i32(a) - zp_a) * m1),
//                 sat(i64(i32(b) - zp_b) * m2))), mult, shift), sat = saturate to int32;
//                 fp: apply_float_ppe(op(f32(a), f32(b)) * 1.0f)
//   relu/clamp    int8: max(x, zp) and clamp(x, lo, hi) on the stored values;
//                 fp: apply_float_ppe(f32(x)) with the activation
//   leaky relu    int8: apply_int_ppe(i64(i32(x) - zp)) with the leaky slope in fixed point
#pragma once

#include <Halide.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "algorithms/arith.h"
#include "dsl/layer.h"
#include "vpu_target/blob_generated.h"

namespace vpuc::algorithms {

struct Conv2dParams {
    int stride_w = 1, stride_h = 1;
    int dilation_w = 1, dilation_h = 1;
    int pad_left = 0, pad_right = 0, pad_top = 0, pad_bottom = 0;
    int groups = 1; // conv2d only
    Activation activation;
};

// The constants of an int8 conv, depthwise conv or matmul (u8/i8 input).
struct QuantWeights {
    // conv (ic / groups, kw, kh, oc); depthwise (1, kw, kh, c); matmul (k, n).
    Halide::Buffer<int8_t> weights;
    int32_t zero_point = 0;
    std::vector<int32_t> bias;       // per output channel; empty: no bias
    std::vector<FixedPoint> requant; // per output channel, or one for all
    dsl::ElemType output_type = dsl::ElemType::U8;
    dsl::Quant output_quant; // per tensor; gives the output zero point
};

// The constants of an fp16 conv, depthwise conv or matmul (f16 input): out = (acc + bias) *
// scale per output channel.
struct FloatWeights {
    Halide::Buffer<Halide::float16_t> weights; // dims as QuantWeights::weights
    std::vector<float> scale, bias;            // per output channel; empty: 1 and 0
};

dsl::Layer conv2d(const std::string &name, const dsl::Layer &input, const QuantWeights &w,
                  const Conv2dParams &p = {});
dsl::Layer conv2d(const std::string &name, const dsl::Layer &input, const FloatWeights &w,
                  const Conv2dParams &p = {});
dsl::Layer depthwise_conv2d(const std::string &name, const dsl::Layer &input, const QuantWeights &w,
                            const Conv2dParams &p = {});
dsl::Layer depthwise_conv2d(const std::string &name, const dsl::Layer &input, const FloatWeights &w,
                            const Conv2dParams &p = {});

// Fully connected / matmul: the input (1, K, 1, M) is M rows of K features; the output is
// (1, N, 1, M). A 1x1 conv over (c = features, x = rows, y = 1).
dsl::Layer matmul(const std::string &name, const dsl::Layer &input, const QuantWeights &w,
                  const Activation &activation = {});
dsl::Layer matmul(const std::string &name, const dsl::Layer &input, const FloatWeights &w,
                  const Activation &activation = {});

struct PoolParams {
    int kernel_w = 1, kernel_h = 1;
    int stride_w = 1, stride_h = 1;
    int dilation_w = 1, dilation_h = 1;                           // max pool only
    int pad_left = 0, pad_right = 0, pad_top = 0, pad_bottom = 0; // each < the kernel
    // The output extent rounded up: the last window may reach past the padding (not past its
    // start), that part counting as padding.
    bool ceil_mode = false;
    // Average pool: the divisor is the window's elements inside the padded input; without,
    // its elements inside the input (an int8 average takes a divisor the same everywhere).
    bool count_include_pad = true;
    Activation activation;
};

// The output of an int8 pool or eltwise: its type and quantization, and the per-tensor
// fixed-point scale the PPE applies to the int32 result.
struct QuantOutput {
    dsl::ElemType type = dsl::ElemType::U8;
    dsl::Quant quant;
    FixedPoint requant;
};

// Without `out`, an int8 pool keeps the input's type and quantization (avg pool: requant
// 1 / (kernel_w * kernel_h)).
dsl::Layer max_pool(const std::string &name, const dsl::Layer &input, const PoolParams &p,
                    const std::optional<QuantOutput> &out = {});
dsl::Layer avg_pool(const std::string &name, const dsl::Layer &input, const PoolParams &p,
                    const std::optional<QuantOutput> &out = {});

// `pool` (a max_pool or avg_pool layer) as an int8 pool of an input quantized with `in_scale`,
// storing `out_type` quantized per tensor as `out`: its attributes with the output's type and
// quantization and the PPE's fixed-point scale in_scale / out_scale, over the window's area
// for an average. Throws dsl::LayerError when that scale has no fixed-point form.
dsl::Attrs int8_pool_attrs(const dsl::Layer &pool, double in_scale, dsl::ElemType out_type,
                           const dsl::Quant &out);

// The blob's enum (schema/blob.fbs), as the DPU runs them.
using EltwiseOp = blob::EltwiseOp;

// int8 eltwise: (a - zp_a) * in1_mult op (b - zp_b) * in2_mult, requantized per tensor.
struct QuantEltwise {
    int32_t in1_mult = 1, in2_mult = 1;
    QuantOutput out;
};

// The fixed-point parameters of a quantized eltwise from the tensors' scales (per tensor):
// add/sub/max/min scale both operands to a common 2^-14 grid of the larger scale; mul
// requantizes the product by scale_a * scale_b / scale_out.
QuantEltwise quant_eltwise(EltwiseOp op, const dsl::Quant &a, const dsl::Quant &b,
                           dsl::ElemType out_type, const dsl::Quant &out);

// Numpy broadcasting over (c, x, y): an extent 1 in one input stretches to the other's.
// int8 inputs need `quant`; fp16 ignores it.
dsl::Layer eltwise(const std::string &name, EltwiseOp op, const dsl::Layer &a, const dsl::Layer &b,
                   const Activation &activation = {},
                   const std::optional<QuantEltwise> &quant = {});

// Standalone activations; the output keeps the input's type and quantization.
dsl::Layer relu(const std::string &name, const dsl::Layer &input);
dsl::Layer clamp(const std::string &name, const dsl::Layer &input, float low, float high);
dsl::Layer leaky_relu(const std::string &name, const dsl::Layer &input, float alpha);

// SHAVE layers, computed in float32. int8 inputs are dequantized, and the result quantized to
// `out_quant` (default u8 scale 1/256, zero point 0) rounding half to even.
dsl::Layer sigmoid(const std::string &name, const dsl::Layer &input,
                   const std::optional<dsl::Quant> &out_quant = {});
dsl::Layer softmax(const std::string &name, const dsl::Layer &input, dsl::Dim axis = dsl::dims::C,
                   const std::optional<dsl::Quant> &out_quant = {});

// ONNX's Split: `input` cut along logical `axis` (1 C, 2 H, 3 W) into consecutive parts of
// `sizes`, one slice layer each, named `names`: views of its memory when stored in DDR
// (algorithms/layers/slice.cpp).
std::vector<dsl::Layer> split(const std::vector<std::string> &names, const dsl::Layer &input,
                              int64_t axis, const std::vector<int64_t> &sizes);

} // namespace vpuc::algorithms
