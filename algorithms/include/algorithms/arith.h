// The DPU's output arithmetic (vpu_target/dpu_arith.h) as Halide expressions, so the int8
// algorithms compute exactly what the DPU computes, and the activation parameters of layers in
// real units (what ONNX says) with their conversion to the PPE's terms.
//
// Each Halide helper mirrors the C++ function of the same name in dpu_arith.h, operation for
// operation, and builds the same expression every time: the DPU matcher recognizes this form.
#pragma once

#include <Halide.h>

#include <cmath>
#include <cstdint>

#include "dsl/tensor.h"
#include "vpu_target/dpu_arith.h"

namespace vpuc::algorithms {

// An activation and clamp fused into a layer's output stage, in real units.
struct Activation {
    dpu::Activation kind = dpu::Activation::None; // None, Relu or LeakyRelu (ReluX is a clamp)
    float alpha = 0;                              // LeakyRelu slope, >= 0
    float low = -INFINITY, high = INFINITY;       // clamp bounds, after the activation

    static Activation relu() { return {dpu::Activation::Relu}; }
    static Activation leaky_relu(float alpha) { return {dpu::Activation::LeakyRelu, alpha}; }
    static Activation clamp(float low, float high) { return {dpu::Activation::None, 0, low, high}; }
};

// A real multiplier in the PPE's fixed point: real ~= mult / 2^shift.
struct FixedPoint {
    uint16_t mult = 1;
    uint8_t shift = 0;
};

// The closest FixedPoint to `real` (0 <= real < 65536), with the largest shift that keeps
// mult below 2^16 (at most 63, the PPE's 6-bit field). Throws dsl::LayerError.
FixedPoint fixed_point(double real);

// The PPE's integer form of `act` for an output stored as `type` (u8/i8) with `quant`: the
// leaky slope becomes a FixedPoint, the clamp bounds become stored values (rounded to
// nearest, ties to even, saturated to the type).
dpu::IntPpe int_ppe(const Activation &act, dsl::ElemType type, const dsl::Quant &quant);
dpu::FloatPpe float_ppe(const Activation &act);

// dpu::round_shift: (value + (1 << (shift - 1))) >> shift, both int64. Halide shifts a signed
// value by a negative amount the other way, so shift 0 adds 0 and returns value.
Halide::Expr round_shift(Halide::Expr value, Halide::Expr shift);

// dpu::apply_int_ppe: `scaled` (int64) saturated to int32, activation, + zero point, clamp,
// cast to `out` (u8/i8). The clamp bounds are merged with the output range into one clamp.
Halide::Expr apply_int_ppe(Halide::Expr scaled, const dpu::IntPpe &ppe, Halide::Type out);

// dpu::requantize: `acc` (int32, bias included) times `mult` (uint16), round_shift by
// `shift` (uint8), then apply_int_ppe. mult and shift may be constants or per-channel calls.
Halide::Expr requantize(Halide::Expr acc, Halide::Expr mult, Halide::Expr shift,
                        const dpu::IntPpe &ppe, Halide::Type out);

// dpu::apply_float_ppe, then the rounding to `out` (f16 on the DPU): `value` is float32.
Halide::Expr apply_float_ppe(Halide::Expr value, const dpu::FloatPpe &ppe, Halide::Type out);

} // namespace vpuc::algorithms
