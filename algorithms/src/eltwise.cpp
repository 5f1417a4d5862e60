// Elementwise binary ops with numpy broadcasting, and the DPU's int8 eltwise arithmetic.
#include <algorithm>
#include <cmath>

#include "algorithms/layers.h"
#include "common.h"

namespace vpuc::algorithms {

using Halide::Expr;
using Halide::Func;
using namespace detail;

namespace {

const char *op_name(EltwiseOp op) {
    switch (op) {
    case EltwiseOp::Add:
        return "add";
    case EltwiseOp::Sub:
        return "sub";
    case EltwiseOp::Mul:
        return "mul";
    case EltwiseOp::Max:
        return "max";
    case EltwiseOp::Min:
        return "min";
    }
    return "?";
}

Expr apply(EltwiseOp op, const Expr &a, const Expr &b) {
    switch (op) {
    case EltwiseOp::Add:
        return a + b;
    case EltwiseOp::Sub:
        return a - b;
    case EltwiseOp::Mul:
        return a * b;
    case EltwiseOp::Max:
        return Halide::max(a, b);
    case EltwiseOp::Min:
        return Halide::min(a, b);
    }
    return a;
}

int64_t broadcast(const std::string &what, const char *dim, int64_t a, int64_t b) {
    if (a != b && a != 1 && b != 1)
        invalid(what, std::string("extents ") + std::to_string(a) + " and " + std::to_string(b) +
                          " along " + dim + " do not broadcast");
    return std::max(a, b);
}

// Where an input is read for output (c, x, y): index 0 along the dims it is broadcast in.
std::vector<Expr> broadcast_at(const InputInfo &in, int64_t c, int64_t w, int64_t h) {
    const auto &v = dsl::act_vars();
    return {in.c == c ? Expr(v.c) : Expr(0), in.w == w ? Expr(v.x) : Expr(0),
            in.h == h ? Expr(v.y) : Expr(0)};
}

// (v - zero point) * mult, saturated to int32 as the DPU does to each scaled operand.
Expr scaled_operand(const Expr &stored, int32_t zero_point, int32_t mult) {
    Expr scaled =
        Halide::cast<int64_t>(Halide::cast<int32_t>(stored) - zero_point) * Expr(int64_t(mult));
    return Halide::clamp(scaled, Expr(int64_t(INT32_MIN)), Expr(int64_t(INT32_MAX)));
}

float scale_of(const dsl::Quant &q) {
    return q.empty() ? 1.0f : q.scale_at(0);
}

} // namespace

QuantEltwise quant_eltwise(EltwiseOp op, const dsl::Quant &a, const dsl::Quant &b,
                           dsl::ElemType out_type, const dsl::Quant &out) {
    const double sa = scale_of(a), sb = scale_of(b), so = scale_of(out);
    QuantEltwise q;
    q.out.type = out_type;
    q.out.quant = out;
    if (op == EltwiseOp::Mul) {
        q.out.requant = fixed_point(sa * sb / so);
        return q;
    }
    // Both operands on a grid of max(sa, sb) / 2^14: the multipliers keep 14 bits.
    const double grid = std::max(sa, sb) / 16384.0;
    q.in1_mult = int32_t(std::lround(sa / grid));
    q.in2_mult = int32_t(std::lround(sb / grid));
    q.out.requant = fixed_point(grid / so);
    return q;
}

dsl::Layer eltwise(const std::string &name, EltwiseOp op, const dsl::Layer &a, const dsl::Layer &b,
                   const Activation &activation, const std::optional<QuantEltwise> &quant) {
    const std::string what = std::string(op_name(op)) + " '" + name + "'";
    const InputInfo ia = input_info(what, a), ib = input_info(what, b);
    if (ia.quantized != ib.quantized) invalid(what, "one input is int8 and the other is not");
    const int64_t c = broadcast(what, "C", ia.c, ib.c);
    const int64_t w = broadcast(what, "W", ia.w, ib.w);
    const int64_t h = broadcast(what, "H", ia.h, ib.h);

    if (!ia.quantized) {
        const dpu::FloatPpe ppe = float_ppe(activation);
        const Halide::Type out_type = ia.halide_type;
        dsl::Algorithm algorithm = [=](const std::vector<Func> &inputs) {
            const auto &v = dsl::act_vars();
            Expr va = Halide::cast<float>(inputs.at(0)(broadcast_at(ia, c, w, h)));
            Expr vb = Halide::cast<float>(inputs.at(1)(broadcast_at(ib, c, w, h)));
            Func out = named_func(name);
            out(v.c, v.x, v.y) = apply_float_ppe(apply(op, va, vb) * 1.0f, ppe, out_type);
            return out;
        };
        return dsl::Layer::make(op_name(op), output_desc(name, a, c, w, h, ia.type, {}), {a, b},
                                algorithm);
    }

    if (!quant) invalid(what, "int8 inputs need the QuantEltwise parameters");
    const QuantEltwise q = *quant;
    const dpu::IntPpe ppe = int_ppe(activation, q.out.type, q.out.quant);
    const Halide::Type out_type = dsl::halide_type(q.out.type);
    dsl::Algorithm algorithm = [=](const std::vector<Func> &inputs) {
        const auto &v = dsl::act_vars();
        Expr va =
            scaled_operand(inputs.at(0)(broadcast_at(ia, c, w, h)), ia.zero_point, q.in1_mult);
        Expr vb =
            scaled_operand(inputs.at(1)(broadcast_at(ib, c, w, h)), ib.zero_point, q.in2_mult);
        // The int64 result wraps to 32 bits, like the DPU's accumulator.
        Expr acc = Halide::cast<int32_t>(apply(op, va, vb));
        Func out = named_func(name);
        out(v.c, v.x, v.y) =
            requantize(acc, Expr(q.out.requant.mult), Expr(q.out.requant.shift), ppe, out_type);
        return out;
    };
    return dsl::Layer::make(op_name(op), output_desc(name, a, c, w, h, q.out.type, q.out.quant),
                            {a, b}, algorithm);
}

} // namespace vpuc::algorithms
