// unary_math: ONNX's element-wise math and activations on one tensor (Abs, Neg, Sqrt, Exp,
// trigonometry, Elu, Selu, Shrink, HardSwish, Swish, Mish, ...), the predicates IsNaN and IsInf,
// and Not. Float math runs in float32 on the SHAVEs and is stored in the input's type; int8 inputs
// are dequantized, and the result quantized to the output's quantization; elu, selu, swish and
// mish also in fp16 arithmetic (UnaryOp::half_math). Abs, Neg and Sign are exact on integers
// without a quantization. One registry entry per op.
#include <cmath>
#include <functional>

#include "common.h"

namespace vpuc::algorithms {

namespace {

using detail::constant_like;
using detail::nan_as_x;
using Halide::Expr;

// The float32 function of an op, given its (complete) attributes.
using FloatMath = std::function<Expr(const Expr &x, const dsl::Attrs &attrs)>;
// The exact function of an op on stored integers of `type` (no quantization).
using IntegerMath = std::function<Expr(const Expr &x, dsl::ElemType type)>;

struct UnaryOp {
    std::string op, doc;
    FloatMath math;
    std::vector<dsl::AttrSpec> attrs;
    // Some real inputs give NaN (sqrt, log, asin...): no int8 form, which has no NaN.
    bool takes_int8 = true;
    IntegerMath integer;           // empty: floats (and int8) only
    bool unsigned_integers = true; // and u8 among them (ONNX's Neg has no unsigned types)
    // The example's input layer, for ops defined on part of the reals; empty: the input itself.
    std::function<dsl::Layer(const dsl::Layer &in)> example_domain;
    // The math is one operation of x, exact or rounded once, whose only NaN is a NaN input's:
    // fp16 inputs then run it on fp16 vectors (Halide computes an fp16 function as the float32
    // one, rounded to fp16), the float32 result rounded to fp16, bit for bit, for half the
    // SHAVE's vector instructions.
    bool fp16_native = false;
    // The math is bit operations that keep a NaN NaN: no NaN test on fp16 vectors.
    bool keeps_nan = false;
    // The float32 math is a NaN for a NaN x by itself (x is a factor of it, whatever Halide's
    // exp gives for NaN): no NaN test.
    bool nan_passes = false;
    // Ops defined on x >= 0 (sqrt, log): NaN for NaN and the negatives is set explicitly on
    // fp16 vectors, as Halide 14 would store the float32 NaN in fp16 as an infinity.
    bool nan_below_zero = false;
    // The op in fp16 arithmetic, every operation on fp16 vectors as Intel's half8 kernels
    // compute it, for attribute `arithmetic` fp16 on fp16 inputs (empty: float32 only). Half
    // the vectors and special functions of float32, within the error bound docs/layers.md
    // states (tests/unary_ops_test.cpp checks it on every fp16 value); NaN gives NaN.
    FloatMath half_math;
};

// ONNX's attribute defaults, as the float32 values a model holds.
const double kSeluAlpha = double(1.67326319217681884765625f);
const double kSeluGamma = double(1.05070102214813232421875f);

dsl::AttrSpec float_attr(const std::string &name, double default_value, const std::string &doc) {
    return {name, dsl::AttrType::Float, default_value, doc, {}};
}

// Plain integers: ONNX's uint8, int8 and int32 tensors, which carry no quantization.
bool plain_integers(const detail::InputInfo &in, const dsl::Layer &input) {
    return (in.quantized || in.type == dsl::ElemType::I32) && input.output().quant.empty();
}

// Negation in the unsigned type of the width of `type`, wrapping around as numpy's does.
Expr wrapping_negation(const Expr &x, dsl::ElemType type) {
    const Halide::Type t = dsl::halide_type(type), u = t.with_code(Halide::Type::UInt);
    return Halide::cast(t, Halide::cast(u, 0) - Halide::cast(u, x));
}

// `y` stored as float `type`. Halide 14's float32 to float16 conversion (bit arithmetic on
// hosts without F16C, as the SHAVE kernels and the reference are compiled) tests for overflow
// before NaN and so stores NaN as an infinity: NaN is stored explicitly.
Expr stored_float(const Expr &y, const Halide::Type &type) {
    if (type != Halide::Float(16)) return Halide::cast(type, y);
    const Expr nan = Halide::reinterpret(type, Halide::cast<uint16_t>(0x7e00));
    return Halide::select(Halide::is_nan(y), nan, Halide::cast(type, y));
}

// The float32 result of `u` at `x`, in IEEE arithmetic: Halide's fast math would assume no NaN
// and no infinity, which these ops give (a square root of a negative, a logarithm of 0).
// Halide's exp and log do not propagate NaN: it passes explicitly.
Expr float_result(const UnaryOp &u, const Expr &x, const dsl::Attrs &attrs) {
    if (u.nan_passes) return Halide::strict_float(u.math(x, attrs));
    return Halide::strict_float(Halide::select(Halide::is_nan(x), x, u.math(x, attrs)));
}

// The same on fp16 vectors (UnaryOp::fp16_native). NaN is the value unequal to itself (Halide
// 14 cannot compile is_nan of an fp16 value in strict float).
Expr fp16_result(const UnaryOp &u, const Expr &x, const dsl::Attrs &attrs) {
    if (u.keeps_nan) return u.math(x, attrs);
    if (u.nan_below_zero) {
        // Not select(x >= 0, ...): Halide rewrites x >= 0 as !(x < 0), which NaN passes.
        const Expr nan = Halide::reinterpret(x.type(), Halide::cast<uint16_t>(0x7e00));
        return Halide::strict_float(Halide::select(x != x || x < 0, nan, u.math(x, attrs)));
    }
    return Halide::strict_float(Halide::select(x != x, x, u.math(x, attrs)));
}

dsl::Layer build_unary(const UnaryOp &u, const std::string &name,
                       const std::vector<dsl::Layer> &inputs, const dsl::Attrs &attrs) {
    const std::string what = u.op + " '" + name + "'";
    const dsl::Layer &input = inputs.at(0);
    const detail::InputInfo in = detail::input_info(what, input, bool(u.integer));
    const bool integers = plain_integers(in, input);
    if (integers && !u.integer)
        detail::invalid(what, "input '" + input.output().name + "' is " +
                                  input.output().describe() + "; " + u.op +
                                  " takes floats or int8 with a quantization");
    if (integers && !u.unsigned_integers && !in.halide_type.is_int())
        detail::invalid(what, "input '" + input.output().name + "' is " +
                                  input.output().describe() + "; " + u.op +
                                  " takes signed integers (i8, i32)");
    if (integers && (attrs.has("output_scale") || attrs.has("output_zero_point")))
        detail::invalid(what, "integers without a quantization take no output quantization");
    if (in.quantized && !integers && !u.takes_int8)
        detail::invalid(what, "input '" + input.output().name + "' is " + dsl::to_string(in.type) +
                                  "; " + u.op +
                                  " gives NaN for some real inputs, which int8 does not hold: it "
                                  "takes f16 or f32");
    const bool half = detail::fp16_arithmetic(attrs);
    if (half) detail::check_fp16_arithmetic(what, input);
    dsl::Quant q;
    if (in.quantized && !integers)
        q = detail::probability_quant_of(attrs).value_or(input.output().quant);
    dsl::Algorithm algorithm = [=](const std::vector<Halide::Func> &funcs) {
        const auto &v = dsl::act_vars();
        const Expr stored = funcs.at(0)(v.c, v.x, v.y);
        Halide::Func out = detail::named_func(name);
        if (integers) {
            out(v.c, v.x, v.y) = u.integer(stored, in.type);
        } else if (half) {
            out(v.c, v.x, v.y) = Halide::strict_float(u.half_math(stored, attrs));
        } else if (u.fp16_native && in.halide_type == Halide::Float(16)) {
            out(v.c, v.x, v.y) = fp16_result(u, stored, attrs);
        } else {
            const Expr y = float_result(u, detail::dequantize(stored, in), attrs);
            out(v.c, v.x, v.y) =
                in.quantized ? detail::quantize(y, q, in.type) : stored_float(y, in.halide_type);
        }
        return out;
    };
    return dsl::Layer::make(u.op, detail::output_desc(name, input, in.c, in.w, in.h, in.type, q),
                            {input}, algorithm);
}

bool is_float_type(dsl::ElemType t) {
    return t == dsl::ElemType::F16 || t == dsl::ElemType::F32 || t == dsl::ElemType::F64;
}

// A constant's value through `f`, element by element, computed on the CPU at compile time.
Halide::Buffer<> fold_elementwise(const dsl::Layer &constant,
                                  const std::function<Expr(const Expr &value)> &f) {
    const Halide::Buffer<> &value = dsl::constant_value(constant);
    std::vector<Halide::Var> vars(size_t(value.dimensions()));
    std::vector<int> extents;
    for (int d = 0; d < value.dimensions(); ++d) extents.push_back(value.dim(d).extent());
    Halide::Func folded;
    folded(vars) = f(value(std::vector<Expr>(vars.begin(), vars.end())));
    return folded.realize(extents);
}

// The layer's value for a constant input: float math as the layer computes it, stored in the
// constant's type; integers (int64 too, as shape arithmetic holds them) exactly.
Halide::Buffer<> fold_unary(const UnaryOp &u, const std::string &name,
                            const std::vector<dsl::Layer> &inputs, const dsl::Attrs &attrs) {
    const dsl::Layer &constant = inputs.at(0);
    const dsl::ElemType type = constant.output().type;
    if (detail::fp16_arithmetic(attrs)) {
        detail::check_fp16_arithmetic(u.op + " '" + name + "'", constant);
        return fold_elementwise(
            constant, [&](const Expr &v) { return Halide::strict_float(u.half_math(v, attrs)); });
    }
    if (is_float_type(type))
        return fold_elementwise(constant, [&](const Expr &v) {
            return stored_float(float_result(u, Halide::cast<float>(v), attrs), v.type());
        });
    const bool integer = type == dsl::ElemType::U8 || type == dsl::ElemType::I8 ||
                         type == dsl::ElemType::I32 || type == dsl::ElemType::I64;
    if (!integer || !u.integer || (!u.unsigned_integers && type == dsl::ElemType::U8))
        detail::invalid(u.op + " '" + name + "'", "constant '" + constant.name() + "' is " +
                                                      dsl::to_string(type) + "; " + u.op +
                                                      " does not take it");
    return fold_elementwise(constant, [&](const Expr &v) { return u.integer(v, type); });
}

// Unsigned integers have no negatives: abs is the value itself. Abs of a signed minimum wraps
// around to itself, as numpy's does.
Expr integer_abs(const Expr &x, dsl::ElemType type) {
    const Halide::Type t = dsl::halide_type(type);
    return t.is_int() ? Halide::cast(t, Halide::abs(x)) : x;
}

Expr integer_sign(const Expr &x, dsl::ElemType) {
    const Halide::Type t = x.type();
    return Halide::select(x > 0, Halide::cast(t, 1), x < 0, Halide::cast(t, -1),
                          Halide::cast(t, 0));
}

// The bfloat16 nearest float32 `x`, ties to even: a bfloat16 is the high half of a float32's
// bits. Rounding past the largest finite bfloat16 gives an infinity; NaN passes (float_result).
Expr nearest_bf16(const Expr &x) {
    const Expr bits = Halide::reinterpret<uint32_t>(x);
    const Expr half_up =
        Halide::Internal::make_const(Halide::UInt(32), 0x7fff) + ((bits >> 16) & 1);
    return Halide::reinterpret<float>((bits + half_up) &
                                      Halide::Internal::make_const(Halide::UInt(32), 0xffff0000u));
}

FloatMath of(Expr (*f)(Expr)) {
    return [f](const Expr &x, const dsl::Attrs &) { return f(x); };
}

// The sign bit cleared, as IEEE's abs: |-0| is +0 (Halide's abs of fp16 keeps -0).
Expr float_abs(const Expr &x, const dsl::Attrs &) {
    const Halide::Type bits = Halide::UInt(x.type().bits());
    const Expr magnitude = Halide::cast(bits, Halide::Expr(bits.max())) >> 1;
    return Halide::reinterpret(x.type(), Halide::reinterpret(bits, x) & magnitude);
}

Expr float_negation(const Expr &x, const dsl::Attrs &) {
    const Halide::Type bits = Halide::UInt(x.type().bits());
    const Expr sign = ~(Halide::cast(bits, Halide::Expr(bits.max())) >> 1);
    return Halide::reinterpret(x.type(), Halide::reinterpret(bits, x) ^ sign);
}

UnaryOp fp16_native(UnaryOp u) {
    u.fp16_native = true;
    return u;
}

UnaryOp fp16_native_on_positives(UnaryOp u) {
    u.fp16_native = u.nan_below_zero = true;
    return u;
}

UnaryOp entry(const std::string &op, const std::string &doc, FloatMath math) {
    UnaryOp u;
    u.op = op;
    u.doc = doc;
    u.math = std::move(math);
    return u;
}

// An op giving NaN for some reals, its example on inputs inside its domain: `domain_op` of
// the example's input.
UnaryOp partial(UnaryOp u, const std::string &domain_op) {
    u.takes_int8 = false;
    u.example_domain = [domain_op](const dsl::Layer &in) {
        return layer_registry().build(domain_op, domain_op, {in}, {});
    };
    return u;
}

std::vector<UnaryOp> unary_ops() {
    using Halide::exp, Halide::select;
    std::vector<UnaryOp> ops;

    UnaryOp abs = entry("abs", "|x|: the sign bit cleared; integers exactly", float_abs);
    abs.integer = integer_abs;
    abs.fp16_native = abs.keeps_nan = true;
    ops.push_back(abs);
    UnaryOp neg = entry("neg",
                        "-x: the sign bit flipped; signed integers exactly (wrapping as "
                        "numpy's)",
                        float_negation);
    neg.integer = wrapping_negation;
    neg.fp16_native = neg.keeps_nan = true;
    neg.unsigned_integers = false;
    ops.push_back(neg);
    UnaryOp sign = entry("sign", "-1, 0 or 1 by the sign of x (NaN stays NaN); integers exactly",
                         [](const Expr &x, const dsl::Attrs &) {
                             return select(x > 0.0f, 1.0f, x < 0.0f, -1.0f, x);
                         });
    sign.integer = integer_sign;
    ops.push_back(sign);

    ops.push_back(fp16_native(entry("ceil", "the least integer not below x", of(Halide::ceil))));
    UnaryOp round_bf16 = entry("round_bf16",
                               "the nearest bfloat16 (halves to even; ONNX's Cast to BFLOAT16), "
                               "held in the input's float type",
                               [](const Expr &x, const dsl::Attrs &) { return nearest_bf16(x); });
    round_bf16.takes_int8 = false;
    ops.push_back(round_bf16);
    ops.push_back(
        fp16_native(entry("floor", "the greatest integer not above x", of(Halide::floor))));
    ops.push_back(
        fp16_native(entry("round", "the nearest integer, halves to even", of(Halide::round))));
    ops.push_back(partial(
        fp16_native_on_positives(entry("sqrt", "the square root", of(Halide::sqrt))), "abs"));
    ops.push_back(fp16_native(entry("reciprocal", "1 / x", [](const Expr &x, const dsl::Attrs &) {
        return Halide::cast(x.type(), 1) / x;
    })));
    ops.push_back(fp16_native(entry("exp", "e^x", of(Halide::exp))));
    ops.push_back(partial(
        fp16_native_on_positives(entry("log", "the natural logarithm", of(Halide::log))), "abs"));
    ops.push_back(entry("sin", "the sine", of(Halide::sin)));
    ops.push_back(entry("cos", "the cosine", of(Halide::cos)));
    ops.push_back(entry("tan", "the tangent", of(Halide::tan)));
    ops.push_back(partial(entry("asin", "the arcsine", of(Halide::asin)), "tanh"));
    ops.push_back(partial(entry("acos", "the arccosine", of(Halide::acos)), "tanh"));
    ops.push_back(fp16_native(entry("atan", "the arctangent", of(Halide::atan))));
    ops.push_back(fp16_native(entry("sinh", "the hyperbolic sine", of(Halide::sinh))));
    ops.push_back(fp16_native(entry("cosh", "the hyperbolic cosine", of(Halide::cosh))));
    ops.push_back(fp16_native(entry("tanh", "the hyperbolic tangent", of(Halide::tanh))));
    ops.push_back(fp16_native(entry("asinh", "the inverse hyperbolic sine", of(Halide::asinh))));
    ops.push_back(
        partial(entry("acosh", "the inverse hyperbolic cosine", of(Halide::acosh)), "cosh"));
    ops.push_back(
        partial(entry("atanh", "the inverse hyperbolic tangent", of(Halide::atanh)), "tanh"));

    ops.push_back(entry("softplus", "log(1 + e^x), without overflow for large x",
                        [](const Expr &x, const dsl::Attrs &) {
                            return Halide::max(x, 0.0f) + Halide::log(1.0f + exp(-Halide::abs(x)));
                        }));
    ops.push_back(entry("softsign", "x / (1 + |x|)", [](const Expr &x, const dsl::Attrs &) {
        return x / (1.0f + Halide::abs(x));
    }));

    UnaryOp elu = entry("elu", "x for x >= 0, alpha * (e^x - 1) below",
                        [](const Expr &x, const dsl::Attrs &a) {
                            const float alpha = float(a.get_float("alpha"));
                            return select(x < 0.0f, alpha * (exp(x) - 1.0f), x);
                        });
    elu.attrs = {float_attr("alpha", 1.0, "scale of the negative part")};
    elu.nan_passes = true; // NaN < 0 is false: x itself
    elu.half_math = [](const Expr &x, const dsl::Attrs &a) {
        return select(x < constant_like(x, 0),
                      constant_like(x, a.get_float("alpha")) * (exp(x) - constant_like(x, 1)), x);
    };
    ops.push_back(elu);

    UnaryOp selu = entry("selu", "gamma * x for x > 0, gamma * alpha * (e^x - 1) else",
                         [](const Expr &x, const dsl::Attrs &a) {
                             const float alpha = float(a.get_float("alpha"));
                             const float gamma = float(a.get_float("gamma"));
                             return gamma * select(x > 0.0f, x, alpha * (exp(x) - 1.0f));
                         });
    selu.attrs = {float_attr("alpha", kSeluAlpha, "scale of the negative part"),
                  float_attr("gamma", kSeluGamma, "scale of the whole")};
    selu.half_math = [](const Expr &x, const dsl::Attrs &a) {
        const double alpha = a.get_float("alpha"), gamma = a.get_float("gamma");
        return select(
            x > constant_like(x, 0), constant_like(x, gamma) * x,
            nan_as_x(x, constant_like(x, gamma * alpha) * (exp(x) - constant_like(x, 1))));
    };
    ops.push_back(selu);

    UnaryOp celu =
        entry("celu", "max(0, x) + min(0, alpha * (e^(x / alpha) - 1))",
              [](const Expr &x, const dsl::Attrs &a) {
                  const float alpha = float(a.get_float("alpha"));
                  return Halide::max(x, 0.0f) + Halide::min(alpha * (exp(x / alpha) - 1.0f), 0.0f);
              });
    celu.attrs = {{"alpha", dsl::AttrType::Float, 1.0, "scale of the negative part",
                   [](const dsl::AttrValue &v) -> std::string {
                       return std::get<double>(v) != 0 ? "" : "must not be 0 (x is divided by it)";
                   }}};
    ops.push_back(celu);

    UnaryOp thresholded = entry("thresholded_relu", "x for x > alpha, else 0",
                                [](const Expr &x, const dsl::Attrs &a) {
                                    return select(x > float(a.get_float("alpha")), x, 0.0f);
                                });
    thresholded.attrs = {float_attr("alpha", 1.0, "threshold")};
    ops.push_back(thresholded);

    UnaryOp shrink = entry("shrink", "x + bias below -lambd, x - bias above lambd, else 0",
                           [](const Expr &x, const dsl::Attrs &a) {
                               const float bias = float(a.get_float("bias"));
                               const float lambd = float(a.get_float("lambd"));
                               return select(x<-lambd, x + bias, x> lambd, x - bias, 0.0f);
                           });
    shrink.attrs = {float_attr("bias", 0.0, "moves the kept values towards 0 by this"),
                    float_attr("lambd", 0.5, "half-width of the band set to 0")};
    ops.push_back(shrink);

    UnaryOp swish =
        entry("swish", "x * sigmoid(beta * x) (SiLU for beta 1), as x / (1 + e^(-beta x))",
              [](const Expr &x, const dsl::Attrs &a) {
                  // Exact for every finite fp16 x; Halide's exp gives no infinity for an
                  // infinite argument, so swish(-inf) is -inf (x / (1 + e^-x) is NaN there).
                  const float beta = float(a.get_float("beta"));
                  return x / (1.0f + exp(-beta * x));
              });
    swish.attrs = {float_attr("beta", 1.0, "scale of x inside the sigmoid")};
    swish.nan_passes = true;
    // sigmoid(z) = (1 + tanh(z / 2)) / 2: one special function where e^-z and a division
    // take two (and beta x, overflowing fp16, gives 0 where e^-z would give x).
    swish.half_math = [](const Expr &x, const dsl::Attrs &a) {
        const Expr half_x = constant_like(x, 0.5) * x;
        return nan_as_x(
            x, half_x + half_x * Halide::tanh(constant_like(x, 0.5 * a.get_float("beta")) * x));
    };
    ops.push_back(swish);
    // softplus without overflow for large x, as the softplus entry computes it.
    UnaryOp mish = entry("mish", "x * tanh(log(1 + e^x))", [](const Expr &x, const dsl::Attrs &) {
        return x * Halide::tanh(Halide::max(x, 0.0f) + Halide::log(1.0f + exp(-Halide::abs(x))));
    });
    mish.nan_passes = true; // x is a factor
    // tanh(log(1 + e^x)) = n / (n + 2) with n = e^x (e^x + 2): no cancellation for negative
    // x, where 1 + e^x would round to 1; e^x taken at 5 at most, where n / (n + 2) is 1 in fp16
    // and n still fits it. mish(-inf) is -inf * 0, NaN, as in float32.
    mish.half_math = [](const Expr &x, const dsl::Attrs &) {
        const Expr e = exp(Halide::min(x, constant_like(x, 5)));
        const Expr n = e * (e + constant_like(x, 2));
        const Expr nan = Halide::reinterpret(x.type(), Halide::cast<uint16_t>(0x7e00));
        return select(x == constant_like(x, -INFINITY), nan,
                      nan_as_x(x, x * (n / (n + constant_like(x, 2)))));
    };
    ops.push_back(mish);
    UnaryOp hard_swish = entry("hard_swish", "x * max(0, min(1, x / 6 + 1 / 2))",
                               [](const Expr &x, const dsl::Attrs &) {
                                   return x * Halide::clamp(x * (1.0f / 6) + 0.5f, 0.0f, 1.0f);
                               });
    hard_swish.nan_passes = true; // x is a factor
    ops.push_back(hard_swish);
    return ops;
}

// The output of IsNaN, IsInf and Not: ONNX's bool, held on the device as u8 0 or 1.
dsl::Layer make_bool_output(const std::string &op, const std::string &name, const dsl::Layer &input,
                            const detail::InputInfo &in,
                            const std::function<Expr(const Expr &stored)> &predicate) {
    dsl::Algorithm algorithm = [=](const std::vector<Halide::Func> &funcs) {
        const auto &v = dsl::act_vars();
        Halide::Func out = detail::named_func(name);
        out(v.c, v.x, v.y) = Halide::cast<uint8_t>(predicate(funcs.at(0)(v.c, v.x, v.y)));
        return out;
    };
    return dsl::Layer::make(
        op, detail::output_desc(name, input, in.c, in.w, in.h, dsl::ElemType::U8, {}), {input},
        algorithm);
}

using Predicate = std::function<Expr(const Expr &stored, const dsl::Attrs &attrs)>;

Expr is_nan_of(const Expr &stored, const dsl::Attrs &) {
    return Halide::is_nan(Halide::cast<float>(stored));
}

// Halide's float comparisons assume no NaN and no infinity (fast math): is_inf and the sign bit
// are exact.
Expr is_inf_of(const Expr &stored, const dsl::Attrs &attrs) {
    const bool negative = attrs.get_int("detect_negative") != 0;
    const bool positive = attrs.get_int("detect_positive") != 0;
    const Expr x = Halide::cast<float>(stored);
    const Expr sign_bit = Halide::reinterpret<uint32_t>(x) >> 31;
    return Halide::is_inf(x) && ((negative && sign_bit == 1) || (positive && sign_bit == 0));
}

Expr not_of(const Expr &stored, const dsl::Attrs &) {
    return Halide::cast<uint8_t>(stored) == 0;
}

// IsNaN and IsInf take floats (int8 holds neither), Not bool: on the device u8 without a
// quantization, as a constant bool or u8.
dsl::LayerDef predicate_def(const std::string &op, const std::string &doc, Predicate predicate) {
    const bool logical = op == "not";
    auto refuse = [op](const std::string &name, const dsl::TensorDesc &t) {
        detail::invalid(
            op + " '" + name + "'",
            "input '" + t.name + "' is " + t.describe() + "; " + op + " takes " +
                (op == "not" ? "bool (u8 without a quantization on the device)" : "f16 or f32"));
    };
    dsl::LayerDef def;
    def.op = op;
    def.doc = doc;
    def.inputs = {"input"};
    def.build = [=](const std::string &name, const std::vector<dsl::Layer> &inputs,
                    const dsl::Attrs &attrs) {
        const dsl::Layer &input = inputs.at(0);
        const detail::InputInfo in = detail::input_info(op + " '" + name + "'", input);
        const bool plain_u8 = in.type == dsl::ElemType::U8 && input.output().quant.empty();
        if (logical ? !plain_u8 : in.quantized) refuse(name, input.output());
        return make_bool_output(op, name, input, in,
                                [=](const Expr &x) { return predicate(x, attrs); });
    };
    def.fold = [=](const std::string &name, const std::vector<dsl::Layer> &inputs,
                   const dsl::Attrs &attrs) {
        const dsl::ElemType type = inputs.at(0).output().type;
        const bool takes = logical ? type == dsl::ElemType::Bool || type == dsl::ElemType::U8
                                   : is_float_type(type);
        if (!takes) refuse(name, inputs.at(0).output());
        return fold_elementwise(inputs.at(0), [&](const Expr &x) { return predicate(x, attrs); });
    };
    return def;
}

dsl::AttrSpec flag_attr(const std::string &name, const std::string &doc) {
    return {name, dsl::AttrType::Int, int64_t(1), doc, [](const dsl::AttrValue &v) -> std::string {
                const int64_t f = std::get<int64_t>(v);
                return f == 0 || f == 1 ? "" : "must be 0 or 1";
            }};
}

} // namespace

void register_layer_unary_math(dsl::LayerRegistry &registry) {
    for (const UnaryOp &u : unary_ops()) {
        dsl::LayerDef def;
        def.op = u.op;
        def.doc = u.doc + (u.integer     ? ", on the SHAVEs"
                           : u.half_math ? "; float32, or fp16 with arithmetic fp16 (within "
                                           "2^-8 + 2^-9 |y|), on the SHAVEs"
                                         : "; float32, on the SHAVEs");
        def.inputs = {"input"};
        def.attrs = u.attrs;
        if (u.half_math) def.attrs.push_back(detail::arithmetic_spec());
        if (u.takes_int8)
            for (auto &spec : detail::probability_specs()) {
                spec.doc += " (default: the input's)";
                def.attrs.push_back(spec);
            }
        def.build = [u](const std::string &name, const std::vector<dsl::Layer> &inputs,
                        const dsl::Attrs &attrs) { return build_unary(u, name, inputs, attrs); };
        def.fold = [u](const std::string &name, const std::vector<dsl::Layer> &inputs,
                       const dsl::Attrs &attrs) { return fold_unary(u, name, inputs, attrs); };
        def.example = [u](dsl::ElemType type) {
            if (dsl::is_quantized_int(type) && !u.takes_int8) return dsl::Layer();
            dsl::Layer in = detail::example_input("in", 19, 11, 7, type);
            if (u.example_domain) in = u.example_domain(in);
            return layer_registry().build(u.op, u.op, {in}, {});
        };
        registry.add(std::move(def));
    }

    dsl::LayerDef is_nan =
        predicate_def("is_nan", "1 where x is NaN, else 0 (bool, as u8), on the SHAVEs", is_nan_of);
    is_nan.example = [](dsl::ElemType type) {
        if (dsl::is_quantized_int(type)) return dsl::Layer();
        // The logarithm of negative inputs is NaN.
        const dsl::Layer log = layer_registry().build(
            "log", "log", {detail::example_input("in", 19, 11, 7, type)}, {});
        return layer_registry().build("is_nan", "is_nan", {log}, {});
    };
    registry.add(std::move(is_nan));

    dsl::LayerDef is_inf = predicate_def(
        "is_inf",
        "1 where x is an infinity of a detected sign, else 0 (bool, as u8), on the SHAVEs",
        is_inf_of);
    is_inf.attrs = {flag_attr("detect_negative", "1: -inf counts"),
                    flag_attr("detect_positive", "1: +inf counts")};
    is_inf.example = [](dsl::ElemType type) {
        if (dsl::is_quantized_int(type)) return dsl::Layer();
        // e^(e^x) overflows to +inf for x above 2.4 in f16.
        const dsl::Layer exp = layer_registry().build(
            "exp", "exp", {detail::example_input("in", 19, 11, 7, type)}, {});
        const dsl::Layer twice = layer_registry().build("exp", "exp_exp", {exp}, {});
        return layer_registry().build("is_inf", "is_inf", {twice}, {});
    };
    registry.add(std::move(is_inf));

    dsl::LayerDef logical_not =
        predicate_def("not", "logical not of bool (u8 0 or 1), on the SHAVEs", not_of);
    logical_not.example = [](dsl::ElemType type) {
        if (type != dsl::ElemType::U8) return dsl::Layer();
        dsl::TensorDesc t = detail::example_input("in", 19, 11, 7, type).output();
        t.quant = {};
        return layer_registry().build("not", "not", {dsl::Layer::input(t)}, {});
    };
    registry.add(std::move(logical_not));
}

} // namespace vpuc::algorithms
