#include "algorithms/arith.h"

#include <algorithm>
#include <stdexcept>
#include <string>

namespace vpuc::algorithms {

using Halide::Expr;

namespace {

Expr i64(int64_t v) {
    return Expr(v);
}

void type_range(dsl::ElemType type, int32_t &lo, int32_t &hi) {
    if (type == dsl::ElemType::U8) {
        lo = 0;
        hi = 255;
    } else if (type == dsl::ElemType::I8) {
        lo = -128;
        hi = 127;
    } else {
        throw dsl::LayerError(std::string("int_ppe: the output type is ") + dsl::to_string(type) +
                              "; the integer PPE writes u8 or i8");
    }
}

// A real clamp bound as a stored value: rounded to nearest (ties to even), saturated.
int32_t quantized_bound(float bound, float scale, int32_t zero_point, int32_t lo, int32_t hi) {
    if (std::isinf(bound)) return bound < 0 ? INT32_MIN : INT32_MAX;
    double q = std::nearbyint(double(bound) / scale) + zero_point;
    return int32_t(std::clamp<double>(q, lo, hi));
}

} // namespace

FixedPoint fixed_point(double real) {
    if (!(real >= 0) || real >= 65536)
        throw dsl::LayerError("fixed_point: " + std::to_string(real) +
                              " is outside [0, 65536), the range of a 16-bit multiplier");
    if (real == 0) return {0, 0};
    int shift = 0;
    while (shift < 63 && std::llround(std::ldexp(real, shift + 1)) < 65536) ++shift;
    long long mult = std::llround(std::ldexp(real, shift));
    if (mult > 65535)
        throw dsl::LayerError("fixed_point: " + std::to_string(real) +
                              " rounds to 65536, beyond a 16-bit multiplier");
    return {uint16_t(mult), uint8_t(shift)};
}

dpu::IntPpe int_ppe(const Activation &act, dsl::ElemType type, const dsl::Quant &quant) {
    if (quant.per_channel())
        throw dsl::LayerError("int_ppe: the output quantization is per channel; the PPE's "
                              "zero point is per tensor");
    dpu::IntPpe ppe;
    type_range(type, ppe.out_min, ppe.out_max);
    const float scale = quant.empty() ? 1.0f : quant.scale_at(0);
    ppe.out_zero_point = quant.empty() ? 0 : quant.zero_point_at(0);
    switch (act.kind) {
    case dpu::Activation::None:
        break;
    case dpu::Activation::Relu:
        ppe.activation = dpu::Activation::Relu;
        break;
    case dpu::Activation::LeakyRelu: {
        FixedPoint slope = fixed_point(act.alpha);
        ppe.activation = dpu::Activation::LeakyRelu;
        ppe.leaky_mult = slope.mult;
        ppe.leaky_shift = slope.shift;
        break;
    }
    case dpu::Activation::ReluX:
        throw dsl::LayerError("int_ppe: give ReluX as Activation::clamp(0, max)");
    }
    ppe.clamp_low = quantized_bound(act.low, scale, ppe.out_zero_point, ppe.out_min, ppe.out_max);
    ppe.clamp_high = quantized_bound(act.high, scale, ppe.out_zero_point, ppe.out_min, ppe.out_max);
    return ppe;
}

dpu::FloatPpe float_ppe(const Activation &act) {
    if (act.kind == dpu::Activation::ReluX)
        throw dsl::LayerError("float_ppe: give ReluX as Activation::clamp(0, max)");
    dpu::FloatPpe ppe;
    ppe.activation = act.kind;
    ppe.leaky_alpha = act.alpha;
    ppe.clamp_low = act.low;
    ppe.clamp_high = act.high;
    return ppe;
}

Expr round_shift(Expr value, Expr shift) {
    return (value + (i64(1) << (shift - 1))) >> shift;
}

Expr apply_int_ppe(Expr scaled, const dpu::IntPpe &ppe, Halide::Type out) {
    Expr y = Halide::clamp(std::move(scaled), i64(INT32_MIN), i64(INT32_MAX));
    switch (ppe.activation) {
    case dpu::Activation::None:
        break;
    case dpu::Activation::Relu:
        y = Halide::max(y, i64(0));
        break;
    case dpu::Activation::ReluX:
        y = Halide::clamp(y, i64(0), i64(ppe.relux_max));
        break;
    case dpu::Activation::LeakyRelu:
        y = Halide::select(y < i64(0), round_shift(y * i64(ppe.leaky_mult), i64(ppe.leaky_shift)),
                           y);
        break;
    }
    y = y + i64(ppe.out_zero_point);
    // clamp(clamp(y, low, high), out_min, out_max) is one clamp with the bounds saturated.
    int64_t low = std::clamp(ppe.clamp_low, ppe.out_min, ppe.out_max);
    int64_t high = std::clamp(ppe.clamp_high, ppe.out_min, ppe.out_max);
    return Halide::cast(out, Halide::clamp(y, i64(low), i64(high)));
}

Expr requantize(Expr acc, Expr mult, Expr shift, const dpu::IntPpe &ppe, Halide::Type out) {
    Expr scaled = Halide::cast<int64_t>(std::move(acc)) * Halide::cast<int64_t>(std::move(mult));
    return apply_int_ppe(round_shift(scaled, Halide::cast<int64_t>(std::move(shift))), ppe, out);
}

Expr apply_float_ppe(Expr value, const dpu::FloatPpe &ppe, Halide::Type out) {
    Expr y = std::move(value);
    switch (ppe.activation) {
    case dpu::Activation::None:
        break;
    case dpu::Activation::Relu:
        y = Halide::max(y, 0.0f);
        break;
    case dpu::Activation::ReluX:
        y = Halide::clamp(y, 0.0f, ppe.relux_max);
        break;
    case dpu::Activation::LeakyRelu:
        y = Halide::select(y < 0.0f, y * ppe.leaky_alpha, y);
        break;
    }
    if (std::isfinite(ppe.clamp_low) || std::isfinite(ppe.clamp_high))
        y = Halide::clamp(y, ppe.clamp_low, ppe.clamp_high);
    return Halide::cast(out, y);
}

} // namespace vpuc::algorithms
