// The DPU's arithmetic, defined once: the simulator executes it and the compiler's int8
// reference uses the same functions, so int8 results are bit-exact by construction.
//
// int8/uint8 path, per output element:
//   acc   = bias + sum((x - x_zero_point) * (w - w_zero_point))       int32 (wrapping)
//   y     = saturate_int32(round_shift(acc * mult, shift))              int64 product
//   y     = activation(y)                                               in the scaled domain
//   out   = saturate(clamp(y + out_zero_point, clamp_low, clamp_high))  to the output type
// round_shift rounds half up (toward +inf): it adds 1 << (shift - 1), then shifts
// arithmetically, as the PPE's rounding adder does.
//
// fp16 path: products and sums in fp32 (in kernel-window order ky, kx, c), then
//   y = (acc + bias) * scale, activation, clamp, round to fp16 (nearest even; every NaN is
//   stored as the quiet NaN 0x7e00, see fp16_output).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "vpu_target/fp16.h"

namespace vpuc::dpu {

// 32-bit two's complement wrap, as the hardware accumulator does.
inline int32_t wrap_add(int32_t a, int32_t b) {
    return int32_t(uint32_t(a) + uint32_t(b));
}

inline int64_t round_shift(int64_t value, int shift) {
    if (shift <= 0) return value;
    return (value + (int64_t(1) << (shift - 1))) >> shift;
}

// Weight-table requantization word: multiplier in bits 31..16, shift in bits 15..8.
inline uint32_t pack_requant(uint16_t mult, uint8_t shift) {
    return (uint32_t(mult) << 16) | (uint32_t(shift) << 8);
}
inline uint16_t requant_mult(uint32_t word) {
    return uint16_t(word >> 16);
}
inline uint8_t requant_shift(uint32_t word) {
    return uint8_t((word >> 8) & 0x3f);
}

enum class Activation { None, Relu, ReluX, LeakyRelu };

struct IntPpe {
    Activation activation = Activation::None;
    int32_t relux_max = 0;
    int32_t leaky_mult = 1;
    int leaky_shift = 0;
    int32_t clamp_low = INT32_MIN;
    int32_t clamp_high = INT32_MAX;
    int32_t out_zero_point = 0;
    int32_t out_min = -128; // range of the output type
    int32_t out_max = 127;
};

inline int32_t apply_int_ppe(int64_t scaled, const IntPpe &ppe) {
    // The PPE datapath is 32 bits wide: the scaled value saturates before the activation.
    int64_t y = std::clamp<int64_t>(scaled, INT32_MIN, INT32_MAX);
    switch (ppe.activation) {
    case Activation::None:
        break;
    case Activation::Relu:
        y = std::max<int64_t>(y, 0);
        break;
    case Activation::ReluX:
        y = std::clamp<int64_t>(y, 0, ppe.relux_max);
        break;
    case Activation::LeakyRelu:
        if (y < 0) y = round_shift(y * ppe.leaky_mult, ppe.leaky_shift);
        break;
    }
    y += ppe.out_zero_point;
    y = std::clamp<int64_t>(y, ppe.clamp_low, ppe.clamp_high);
    return int32_t(std::clamp<int64_t>(y, ppe.out_min, ppe.out_max));
}

// acc (already including bias) -> output value.
inline int32_t requantize(int32_t acc, uint16_t mult, int shift, const IntPpe &ppe) {
    return apply_int_ppe(round_shift(int64_t(acc) * mult, shift), ppe);
}

struct FloatPpe {
    Activation activation = Activation::None;
    float relux_max = 0;
    float leaky_alpha = 0;
    float clamp_low = -INFINITY;
    float clamp_high = INFINITY;
};

inline float apply_float_ppe(float y, const FloatPpe &ppe) {
    switch (ppe.activation) {
    case Activation::None:
        break;
    case Activation::Relu:
        y = std::max(y, 0.0f);
        break;
    case Activation::ReluX:
        y = std::clamp(y, 0.0f, ppe.relux_max);
        break;
    case Activation::LeakyRelu:
        if (y < 0) y = y * ppe.leaky_alpha;
        break;
    }
    return std::clamp(y, ppe.clamp_low, ppe.clamp_high);
}

// The PPE's fp16 output: y rounded to nearest even, and every NaN the quiet NaN 0x7e00. IEEE
// 754 leaves the sign of a NaN result unspecified: compiled code takes it from the order of an
// operation's operands, which compilers may change, so the DPU's NaN has no sign.
inline uint16_t fp16_output(float y) {
    return std::isnan(y) ? uint16_t(0x7e00) : fp16::from_float(y);
}

} // namespace vpuc::dpu
