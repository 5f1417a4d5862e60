// Elementwise ops of several inputs with numpy broadcasting (add, sub, mul, max and min, with
// the DPU's int8 eltwise arithmetic; comparisons, logical ops, bit shifts, pow, mod, where and
// prelu on the SHAVEs).
#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>

#include "algorithms/layers.h"
#include "algorithms/registry.h"
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

// On Halide Exprs for the algorithm, on numbers when folding constants (max and min found
// by argument-dependent lookup for Exprs).
template <typename T> T apply(EltwiseOp op, const T &a, const T &b) {
    using std::max, std::min;
    switch (op) {
    case EltwiseOp::Add:
        return a + b;
    case EltwiseOp::Sub:
        return a - b;
    case EltwiseOp::Mul:
        return a * b;
    case EltwiseOp::Max:
        return max(a, b);
    case EltwiseOp::Min:
        return min(a, b);
    }
    return a;
}

int64_t broadcast(const std::string &what, const char *dim, int64_t a, int64_t b) {
    if (a != b && a != 1 && b != 1)
        invalid(what, std::string("extents ") + std::to_string(a) + " and " + std::to_string(b) +
                          " along " + dim + " do not broadcast");
    return std::max(a, b);
}

// Numpy broadcasting of inputs of one rank: their facts, the output's device extents and the
// output tensor, in the memory order of the input with the batch.
struct Broadcast {
    std::vector<InputInfo> inputs;
    int64_t c = 1, w = 1, h = 1;
    dsl::TensorDesc out;
};

Broadcast broadcast_inputs(const std::string &what, const std::string &name,
                           const std::vector<dsl::Layer> &inputs, bool takes_i32) {
    Broadcast b;
    const dsl::TensorDesc &first = inputs.at(0).output();
    std::vector<int64_t> extents = first.shape.raw();
    size_t batched = 0;
    int64_t n = 1;
    for (size_t i = 0; i < inputs.size(); ++i) {
        const dsl::TensorDesc &t = inputs[i].output();
        b.inputs.push_back(input_info(what, inputs[i], takes_i32));
        if (t.shape.rank() != first.shape.rank())
            invalid(what, "input '" + first.name + "' is " + dsl::to_string(first.shape) +
                              " and '" + t.name + "' " + dsl::to_string(t.shape) +
                              "; give them one rank (unsqueeze the smaller: numpy prepends "
                              "unit dimensions)");
        for (int d = 0; d < t.shape.rank(); ++d)
            extents[size_t(d)] = broadcast(what, ("axis " + std::to_string(d)).c_str(),
                                           extents[size_t(d)], t.shape[dsl::Dim(d)]);
        const InputInfo &in = b.inputs.back();
        if (in.n > b.inputs[batched].n) batched = i;
        n = broadcast(what, "N", n, in.n); // a tensor without batch serves every image
        b.c = broadcast(what, "C", b.c, in.c);
        b.w = broadcast(what, "W", b.w, in.w);
        b.h = broadcast(what, "H", b.h, in.h);
    }
    b.out = inputs[batched].output();
    b.out.name = name;
    b.out.shape = dsl::Shape(extents);
    b.out.quant = {};
    const dsl::Shape device = dsl::device_view(b.out).shape;
    if (device != dsl::Shape{device[dsl::dims::N], b.c, b.h, b.w}) {
        std::string shapes;
        for (const dsl::Layer &in : inputs)
            shapes += (shapes.empty() ? "" : " with ") + dsl::to_string(in.output().shape);
        invalid(what, "broadcasting " + shapes +
                          " along axes that share the device's H (those between C and the "
                          "last one of a tensor of rank 5 or more)");
    }
    return b;
}

dsl::TensorDesc with_type(dsl::TensorDesc t, dsl::ElemType type, dsl::Quant quant) {
    t.type = type;
    t.quant = std::move(quant);
    return t;
}

// Where input i is read for output (c, x, y): index 0 along the dims it is broadcast in.
std::vector<Expr> broadcast_at(const Broadcast &b, size_t i) {
    const auto &v = dsl::act_vars();
    const InputInfo &in = b.inputs.at(i);
    return {in.c == b.c ? Expr(v.c) : Expr(0), in.w == b.w ? Expr(v.x) : Expr(0),
            in.h == b.h ? Expr(v.y) : Expr(0)};
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

namespace {

dsl::Layer make_eltwise(const std::string &name, EltwiseOp op, const dsl::Layer &a,
                        const dsl::Layer &b, const Activation &activation,
                        const std::optional<QuantEltwise> &quant) {
    const std::string what = std::string(op_name(op)) + " '" + name + "'";
    const Broadcast bc = broadcast_inputs(what, name, {a, b}, true);
    const InputInfo &ia = bc.inputs[0], &ib = bc.inputs[1];
    // Integers without a quantization (ONNX's uint8, int8 and int32 tensors).
    auto plain_integers = [](const InputInfo &in, const dsl::Layer &layer) {
        return (in.quantized || in.type == dsl::ElemType::I32) && layer.output().quant.empty();
    };
    const bool integers = plain_integers(ia, a);
    if ((integers || plain_integers(ib, b)) &&
        (ia.type != ib.type || integers != plain_integers(ib, b)))
        invalid(what, "input '" + a.output().name + "' is " + a.output().describe() + " and '" +
                          b.output().name + "' " + b.output().describe() +
                          "; integers without a quantization combine only with their own type");
    if (ia.quantized != ib.quantized) invalid(what, "one input is int8 and the other is not");

    // Integers combine exactly in their own type, sums and products wrapping around as
    // numpy's do (int32's in uint32, where Halide defines the wrap): a SHAVE kernel.
    if (integers) {
        if (quant || activation.kind != dpu::Activation::None || std::isfinite(activation.low) ||
            std::isfinite(activation.high))
            invalid(what, "integers without a quantization take no requantization or activation");
        dsl::Algorithm algorithm = [=](const std::vector<Func> &inputs) {
            const auto &v = dsl::act_vars();
            Func out = named_func(name);
            Expr va = inputs.at(0)(broadcast_at(bc, 0));
            Expr vb = inputs.at(1)(broadcast_at(bc, 1));
            const bool wraps =
                ia.type == dsl::ElemType::I32 && op != EltwiseOp::Max && op != EltwiseOp::Min;
            out(v.c, v.x, v.y) = wraps ? Halide::cast<int32_t>(apply(op, Halide::cast<uint32_t>(va),
                                                                     Halide::cast<uint32_t>(vb)))
                                       : apply(op, va, vb);
            return out;
        };
        return dsl::Layer::make(op_name(op), with_type(bc.out, ia.type, {}), {a, b}, algorithm);
    }

    if (!ia.quantized) {
        const dpu::FloatPpe ppe = float_ppe(activation);
        const Halide::Type out_type = ia.halide_type;
        dsl::Algorithm algorithm = [=](const std::vector<Func> &inputs) {
            const auto &v = dsl::act_vars();
            Expr va = Halide::cast<float>(inputs.at(0)(broadcast_at(bc, 0)));
            Expr vb = Halide::cast<float>(inputs.at(1)(broadcast_at(bc, 1)));
            Func out = named_func(name);
            out(v.c, v.x, v.y) = apply_float_ppe(apply(op, va, vb) * 1.0f, ppe, out_type);
            return out;
        };
        return dsl::Layer::make(op_name(op), with_type(bc.out, ia.type, {}), {a, b}, algorithm);
    }

    if (!quant) invalid(what, "int8 inputs need the QuantEltwise parameters");
    const QuantEltwise q = *quant;
    const dpu::IntPpe ppe = int_ppe(activation, q.out.type, q.out.quant);
    const Halide::Type out_type = dsl::halide_type(q.out.type);
    dsl::Algorithm algorithm = [=](const std::vector<Func> &inputs) {
        const auto &v = dsl::act_vars();
        Expr va = scaled_operand(inputs.at(0)(broadcast_at(bc, 0)), ia.zero_point, q.in1_mult);
        Expr vb = scaled_operand(inputs.at(1)(broadcast_at(bc, 1)), ib.zero_point, q.in2_mult);
        // The int64 result wraps to 32 bits, like the DPU's accumulator.
        Expr acc = Halide::cast<int32_t>(apply(op, va, vb));
        Func out = named_func(name);
        out(v.c, v.x, v.y) =
            requantize(acc, Expr(q.out.requant.mult), Expr(q.out.requant.shift), ppe, out_type);
        return out;
    };
    return dsl::Layer::make(op_name(op), with_type(bc.out, q.out.type, q.out.quant), {a, b},
                            algorithm);
}

constexpr EltwiseOp kEltwiseOps[] = {EltwiseOp::Add, EltwiseOp::Sub, EltwiseOp::Mul, EltwiseOp::Max,
                                     EltwiseOp::Min};

dsl::Attrs eltwise_attrs(const Activation &activation, const std::optional<QuantEltwise> &quant) {
    dsl::Attrs a;
    set_activation(a, activation);
    if (quant) {
        a.set("in1_mult", int64_t(quant->in1_mult));
        a.set("in2_mult", int64_t(quant->in2_mult));
        set_output_quant(a, quant->out.type, quant->out.quant);
        a.set("requant_mult", int64_t(quant->out.requant.mult));
        a.set("requant_shift", int64_t(quant->out.requant.shift));
    }
    return a;
}

// Constants combined at compile time (shape arithmetic), with numpy's broadcasting over any
// rank; no fused activation or requantization.
Halide::Buffer<> fold_eltwise(EltwiseOp op, const std::string &name,
                              const std::vector<dsl::Layer> &inputs, const dsl::Attrs &attrs) {
    const std::string what = std::string(op_name(op)) + " '" + name + "'";
    const Activation act = activation_of(attrs);
    if (act.kind != dpu::Activation::None || std::isfinite(act.low) || std::isfinite(act.high) ||
        attrs.has("in1_mult"))
        invalid(what, "constants fold without an activation or requantization");
    const dsl::ConstValues a = dsl::const_values(inputs.at(0)), b = dsl::const_values(inputs.at(1));
    if (a.type != b.type)
        invalid(what, "constants of " + std::string(dsl::to_string(a.type)) + " and " +
                          dsl::to_string(b.type));
    // Shapes aligned at their last dimension, as numpy broadcasts.
    const size_t rank = std::max(a.shape.size(), b.shape.size());
    auto padded = [&](const std::vector<int64_t> &s) {
        std::vector<int64_t> p(rank - s.size(), 1);
        p.insert(p.end(), s.begin(), s.end());
        return p;
    };
    const std::vector<int64_t> sa = padded(a.shape), sb = padded(b.shape);
    dsl::ConstValues out;
    out.type = a.type;
    for (size_t d = 0; d < rank; ++d)
        out.shape.push_back(
            broadcast(what, ("dimension " + std::to_string(d)).c_str(), sa[d], sb[d]));
    for (int64_t i = 0; i < out.elements(); ++i) {
        // The element of each input that output element i reads.
        int64_t rest = i, ia = 0, ib = 0, stride_a = 1, stride_b = 1;
        for (size_t d = rank; d-- > 0;) {
            const int64_t at = rest % out.shape[d];
            rest /= out.shape[d];
            ia += (sa[d] == 1 ? 0 : at) * stride_a;
            ib += (sb[d] == 1 ? 0 : at) * stride_b;
            stride_a *= sa[d];
            stride_b *= sb[d];
        }
        if (a.is_float())
            out.reals.push_back(apply(op, a.reals[size_t(ia)], b.reals[size_t(ib)]));
        else
            out.ints.push_back(apply(op, a.ints[size_t(ia)], b.ints[size_t(ib)]));
    }
    return dsl::const_buffer(out);
}

dsl::LayerDef eltwise_def(EltwiseOp op) {
    dsl::LayerDef def;
    def.op = op_name(op);
    def.doc = std::string("elementwise ") + op_name(op) + " with numpy broadcasting";
    def.inputs = {"a", "b"};
    def.attrs = activation_specs();
    auto optional_int = [&](const char *name, const char *doc, int64_t lo, int64_t hi) {
        dsl::AttrSpec spec{name, dsl::AttrType::Int, std::nullopt, doc,
                           [lo, hi](const dsl::AttrValue &v) -> std::string {
                               const int64_t x = std::get<int64_t>(v);
                               return x >= lo && x <= hi ? ""
                                                         : "must be in [" + std::to_string(lo) +
                                                               ", " + std::to_string(hi) + "]";
                           }};
        spec.optional = true;
        def.attrs.push_back(spec);
    };
    optional_int("in1_mult", "int8: a's multiplier", INT32_MIN, INT32_MAX);
    optional_int("in2_mult", "int8: b's multiplier", INT32_MIN, INT32_MAX);
    for (auto &spec : output_quant_specs()) def.attrs.push_back(spec);
    optional_int("requant_mult", "int8 output: u16", 0, 65535);
    optional_int("requant_shift", "int8 output: 0..63", 0, 63);
    def.example = [op](dsl::ElemType type) {
        dsl::Layer a = example_input("a", 21, 9, 7, type), b = example_input("b", 21, 9, 7, type);
        std::optional<QuantEltwise> q;
        if (dsl::is_quantized_int(type))
            q = quant_eltwise(op, a.output().quant, b.output().quant, dsl::ElemType::U8,
                              dsl::Quant::per_tensor(0.08f, 100));
        return eltwise(op_name(op), op, a, b, {}, q);
    };
    def.fold = [op](const std::string &name, const std::vector<dsl::Layer> &inputs,
                    const dsl::Attrs &a) { return fold_eltwise(op, name, inputs, a); };
    def.build = [op](const std::string &name, const std::vector<dsl::Layer> &inputs,
                     const dsl::Attrs &a) {
        std::optional<QuantEltwise> quant;
        QuantEltwise q;
        if (output_quant_of(a, q.out.type, q.out.quant)) {
            for (const char *needed : {"in1_mult", "in2_mult", "requant_mult", "requant_shift"})
                if (!a.has(needed))
                    invalid(std::string(op_name(op)) + " '" + name + "'",
                            std::string("an int8 output needs ") + needed);
            q.in1_mult = int32_t(a.get_int("in1_mult"));
            q.in2_mult = int32_t(a.get_int("in2_mult"));
            q.out.requant = {uint16_t(a.get_int("requant_mult")),
                             uint8_t(a.get_int("requant_shift"))};
            quant = q;
        }
        return make_eltwise(name, op, inputs.at(0), inputs.at(1), activation_of(a), quant);
    };
    return def;
}

// ---- ONNX's other elementwise ops of several inputs: SHAVE kernels ----------------------
//
// Comparisons (bool results, held as u8 0 and 1), logical ops on bools (u8, nonzero true),
// bit shifts of unsigned integers (u8, or the values of a wider type in i32), Pow, Mod, Where and
// PRelu, with numpy broadcasting. Floats compute in float32, integers exactly in their own type;
// each op also folds constants at compile time.

// What an op takes: `Numbers` one type for all inputs, float or integers without a
// quantization; `Bools` u8 without a quantization (nonzero as true); `Unsigned` the values of
// an unsigned type of `bits` bits without a quantization: u8 for 8, i32 (i64 constants) for
// 16, 32 and 64;
// `Powers` a float or plain integer base and exponent of any such types; `Select` a u8
// condition, then two values of one type and quantization; `Floats` float of one type.
// Floats: of one type, the second broadcast to the first (PRelu's slope); Reals: of one type,
// broadcast both ways.
enum class Takes { Numbers, Bools, Unsigned, Powers, Select, Floats, Reals };
// The result's type: bool (u8 0 or 1), or the type (and quantization) of the first value
// (input 0; Where's input 1).
enum class Gives { Bool, Value };

struct ElementwiseDef {
    const char *op;
    const char *doc;
    std::vector<std::string> inputs;
    Takes takes;
    Gives gives;
    // The result from the operands as stored (floats as float32), and the same on numbers at
    // compile time (integers exact as doubles up to 2^53).
    std::function<Expr(const std::vector<Expr> &, const dsl::Attrs &)> compute;
    std::function<double(const std::vector<double> &, const dsl::Attrs &)> fold;
    std::vector<dsl::AttrSpec> attrs;
    // An integer result at compile time is the fold's value truncated toward zero, 0 when it is
    // not finite (a quotient, as the kernel's integer division gives it); else rounded to
    // nearest.
    bool folds_truncated = false;
};

bool is_float_type(dsl::ElemType t) {
    return t == dsl::ElemType::F16 || t == dsl::ElemType::F32 || t == dsl::ElemType::F64;
}

// Integers without a quantization: u8, i8 and i32 on the device; i64 and bool constants fold.
bool is_plain_integer(const dsl::TensorDesc &t) {
    return !is_float_type(t.type) && t.quant.empty();
}

// Refuses inputs the op does not take, naming them.
void check_operands(const std::string &what, const ElementwiseDef &def,
                    const std::vector<dsl::Layer> &inputs, const dsl::Attrs &attrs) {
    auto refuse = [&](const dsl::TensorDesc &t, const std::string &takes) {
        invalid(what,
                "input '" + t.name + "' is " + t.describe() + "; " + def.op + " takes " + takes);
    };
    const dsl::TensorDesc &first = inputs.at(0).output();
    for (size_t i = 0; i < inputs.size(); ++i) {
        const dsl::TensorDesc &t = inputs[i].output();
        switch (def.takes) {
        case Takes::Numbers:
            if (!is_float_type(t.type) && !is_plain_integer(t))
                refuse(t, "floats, or u8, i8 and i32 without a quantization");
            if (t.type != first.type)
                refuse(t, std::string("inputs of one type, as '") + first.name + "' (" +
                              dsl::to_string(first.type) + ")");
            break;
        case Takes::Bools:
            if (!(t.type == dsl::ElemType::U8 || t.type == dsl::ElemType::Bool) || !t.quant.empty())
                refuse(t, "bools (u8 without a quantization)");
            break;
        case Takes::Unsigned:
            if (attrs.get_int("bits") == 8
                    ? t.type != dsl::ElemType::U8
                    : t.type != dsl::ElemType::I32 && t.type != dsl::ElemType::I64)
                refuse(t, attrs.get_int("bits") == 8
                              ? std::string("u8 without a quantization (bits 8)")
                              : "i32 (i64 constants) holding unsigned values of " +
                                    std::to_string(attrs.get_int("bits")) + " bits");
            if (!t.quant.empty() || t.type != first.type)
                refuse(t, std::string("inputs of one type without a quantization, as '") +
                              first.name + "' (" + dsl::to_string(first.type) + ")");
            break;
        case Takes::Powers:
            if (!is_float_type(t.type) && !is_plain_integer(t))
                refuse(t, "floats, or u8, i8 and i32 without a quantization");
            break;
        case Takes::Select: {
            if (i == 0 && ((t.type != dsl::ElemType::U8 && t.type != dsl::ElemType::Bool) ||
                           !t.quant.empty()))
                refuse(t, "a bool condition (u8 without a quantization)");
            const dsl::TensorDesc &x = inputs.at(1).output();
            if (i == 2 && (t.type != x.type || t.quant.scale != x.quant.scale ||
                           t.quant.zero_point != x.quant.zero_point))
                refuse(t, "two values of one type and quantization, as '" + x.name + "' (" +
                              x.describe() + ")");
            break;
        }
        case Takes::Floats:
        case Takes::Reals:
            if (!is_float_type(t.type) || t.type != first.type) refuse(t, "floats of one type");
            break;
        }
    }
}

dsl::Layer make_elementwise(const ElementwiseDef &def, const std::string &name,
                            const std::vector<dsl::Layer> &inputs, const dsl::Attrs &attrs) {
    const std::string what = std::string(def.op) + " '" + name + "'";
    check_operands(what, def, inputs, attrs);
    const Broadcast bc = broadcast_inputs(what, name, inputs, true);
    const size_t value = def.takes == Takes::Select ? 1 : 0;
    const dsl::TensorDesc &first = inputs[value].output();
    // PRelu's slope broadcasts to x, not x to it.
    if (def.takes == Takes::Floats && bc.out.shape != first.shape)
        invalid(what, "'" + inputs[1].output().name + "' " +
                          dsl::to_string(inputs[1].output().shape) + " broadcasts to '" +
                          first.name + "' " + dsl::to_string(first.shape) +
                          " only if the result keeps the shape of '" + first.name + "'");
    const dsl::TensorDesc out = def.gives == Gives::Bool
                                    ? with_type(bc.out, dsl::ElemType::U8, {})
                                    : with_type(bc.out, first.type, first.quant);
    const auto compute = def.compute;
    dsl::Algorithm algorithm = [=](const std::vector<Func> &funcs) {
        const auto &v = dsl::act_vars();
        std::vector<Expr> operands;
        for (size_t i = 0; i < funcs.size(); ++i) {
            Expr stored = funcs[i](broadcast_at(bc, i));
            operands.push_back(stored.type().is_float() ? Halide::cast<float>(stored) : stored);
        }
        Expr result = compute(operands, attrs);
        Func f = named_func(name);
        if (def.gives == Gives::Bool)
            f(v.c, v.x, v.y) = Halide::cast<uint8_t>(result);
        else if (result.type().is_float() && !dsl::halide_type(out.type).is_float())
            f(v.c, v.x, v.y) = Halide::cast(dsl::halide_type(out.type), Halide::round(result));
        else
            f(v.c, v.x, v.y) = stored_as(result, dsl::halide_type(out.type));
        return f;
    };
    return dsl::Layer::make(def.op, out, inputs, algorithm);
}

// Constants combined at compile time, with numpy's broadcasting over any rank.
Halide::Buffer<> fold_elementwise(const ElementwiseDef &def, const std::string &name,
                                  const std::vector<dsl::Layer> &inputs, const dsl::Attrs &attrs) {
    const std::string what = std::string(def.op) + " '" + name + "'";
    check_operands(what, def, inputs, attrs);
    std::vector<dsl::ConstValues> values;
    size_t rank = 0;
    for (const dsl::Layer &in : inputs) {
        values.push_back(dsl::const_values(in));
        rank = std::max(rank, values.back().shape.size());
    }
    // Shapes aligned at their last dimension, as numpy broadcasts.
    std::vector<std::vector<int64_t>> shapes;
    dsl::ConstValues out;
    out.shape.assign(rank, 1);
    for (const dsl::ConstValues &v : values) {
        std::vector<int64_t> padded(rank - v.shape.size(), 1);
        padded.insert(padded.end(), v.shape.begin(), v.shape.end());
        for (size_t d = 0; d < rank; ++d)
            out.shape[d] = broadcast(what, ("dimension " + std::to_string(d)).c_str(), out.shape[d],
                                     padded[d]);
        shapes.push_back(padded);
    }
    const dsl::ConstValues &first = values[def.takes == Takes::Select ? 1 : 0];
    out.type = def.gives == Gives::Bool ? dsl::ElemType::Bool : first.type;
    std::vector<double> operands(values.size());
    for (int64_t i = 0; i < out.elements(); ++i) {
        for (size_t k = 0; k < values.size(); ++k) {
            // The element of input k that output element i reads.
            int64_t rest = i, at = 0, stride = 1;
            for (size_t d = rank; d-- > 0;) {
                const int64_t index = rest % out.shape[d];
                rest /= out.shape[d];
                at += (shapes[k][d] == 1 ? 0 : index) * stride;
                stride *= shapes[k][d];
            }
            operands[k] = values[k].is_float() ? values[k].reals[size_t(at)]
                                               : double(values[k].ints[size_t(at)]);
        }
        const double result = def.fold(operands, attrs);
        if (out.is_float())
            out.reals.push_back(result);
        else if (def.folds_truncated)
            out.ints.push_back(std::isfinite(result) ? int64_t(std::trunc(result)) : 0);
        else
            out.ints.push_back(int64_t(std::nearbyint(result)));
    }
    return dsl::const_buffer(out);
}

template <typename Compare> ElementwiseDef comparison(const char *op, const char *doc) {
    return {
        op,
        doc,
        {"a", "b"},
        Takes::Numbers,
        Gives::Bool,
        [op](const std::vector<Expr> &v, const dsl::Attrs &) { return compare(op, v[0], v[1]); },
        [](const std::vector<double> &v, const dsl::Attrs &) {
            return Compare{}(v[0], v[1]) ? 1.0 : 0.0;
        },
        {}};
}

template <typename Combine> ElementwiseDef logical(const char *op, const char *doc) {
    return {op,
            doc,
            {"a", "b"},
            Takes::Bools,
            Gives::Bool,
            [](const std::vector<Expr> &v, const dsl::Attrs &) {
                return Combine{}(v[0] != 0, v[1] != 0);
            },
            [](const std::vector<double> &v, const dsl::Attrs &) {
                return Combine{}(v[0] != 0, v[1] != 0) ? 1.0 : 0.0;
            },
            {}};
}

struct NotEqual {
    template <typename T> auto operator()(const T &a, const T &b) const { return a != b; }
};

// Numpy's remainder (fmod 0: the sign of the divisor) or C's fmod (fmod 1: the dividend's).
Expr remainder(const std::vector<Expr> &v, const dsl::Attrs &attrs) {
    const Expr &a = v[0], &b = v[1];
    const bool c_fmod = attrs.get_int("fmod") != 0;
    if (a.type().is_float())
        return Halide::strict_float(a - b * (c_fmod ? Halide::trunc(a / b) : Halide::floor(a / b)));
    // Halide's % is never negative (and 0 for a divisor of 0, as numpy's).
    const Expr r = a % b;
    if (a.type().is_uint()) return r;
    const Expr zero = Halide::Internal::make_zero(a.type());
    if (c_fmod)
        return Halide::select(r != zero && a < zero, r + Halide::select(b < zero, b, -b), r);
    return Halide::select(r != zero && b < zero, r + b, r);
}

double remainder(const std::vector<double> &v, const dsl::Attrs &attrs) {
    const double a = v[0], b = v[1];
    if (attrs.get_int("fmod") != 0) return std::fmod(a, b);
    if (b == 0) return std::floor(a) == a ? 0 : std::nan("");
    const double r = std::fmod(a, b);
    return r != 0 && (r < 0) != (b < 0) ? r + b : r;
}

// The values of an unsigned type of `bits` bits, as numpy shifts them: a left shift drops the
// bits past the width, a shift by the width or more gives 0. The operands' bits read unsigned
// (an i32 holds a u32 of 2^31 or more as negative).
uint64_t width_mask(int64_t bits) {
    return bits == 64 ? ~uint64_t(0) : (uint64_t(1) << bits) - 1;
}

Expr shifted(const std::vector<Expr> &v, const dsl::Attrs &attrs) {
    const int64_t bits = attrs.get_int("bits");
    auto unsigned_bits = [](const Expr &e) {
        return Halide::cast<uint64_t>(Halide::cast(Halide::UInt(e.type().bits()), e));
    };
    const Expr a = unsigned_bits(v[0]), by = unsigned_bits(v[1]);
    const Expr moved = attrs.get_string("direction") == "LEFT" ? a << by : a >> by;
    Expr result =
        Halide::select(by >= Expr(uint64_t(bits)), Halide::Internal::make_zero(moved.type()),
                       moved & Expr(width_mask(bits)));
    // In i32, a u32 of 2^31 or more is negative; a u64 beyond the 32 bits becomes -2^31. Either
    // is no value of the type: reading the output in the model's type refuses it.
    if (bits == 64)
        result =
            Halide::select(result > Expr(uint64_t(INT32_MAX)), Expr(uint64_t(1) << 31), result);
    return result;
}

double shifted(const std::vector<double> &v, const dsl::Attrs &attrs) {
    const int64_t bits = attrs.get_int("bits");
    if (v[1] >= double(bits)) return 0;
    const uint64_t a = uint64_t(v[0]), by = uint64_t(v[1]);
    const uint64_t moved =
        (attrs.get_string("direction") == "LEFT" ? a << by : a >> by) & width_mask(bits);
    // Folded values are doubles, exact up to 2^53.
    if (moved > (uint64_t(1) << 53))
        throw dsl::LayerError("bit_shift: " + std::to_string(a) + " shifted by " +
                              std::to_string(by) + " gives " + std::to_string(moved) +
                              ", beyond the 2^53 a folded constant holds exactly");
    return double(moved);
}

const std::vector<ElementwiseDef> &elementwise_defs() {
    using Binary = std::vector<std::string>;
    static const std::vector<ElementwiseDef> defs = {
        comparison<std::equal_to<>>("equal", "a == b with numpy broadcasting: bool (u8 0 or 1)"),
        comparison<std::greater<>>("greater", "a > b with numpy broadcasting: bool (u8 0 or 1)"),
        comparison<std::greater_equal<>>("greater_or_equal",
                                         "a >= b with numpy broadcasting: bool (u8 0 or 1)"),
        comparison<std::less<>>("less", "a < b with numpy broadcasting: bool (u8 0 or 1)"),
        comparison<std::less_equal<>>("less_or_equal",
                                      "a <= b with numpy broadcasting: bool (u8 0 or 1)"),
        logical<std::logical_and<>>("and", "a and b of bools with numpy broadcasting"),
        logical<std::logical_or<>>("or", "a or b of bools with numpy broadcasting"),
        logical<NotEqual>("xor", "a xor b of bools with numpy broadcasting"),
        {"bit_shift",
         "unsigned a shifted by b bits (LEFT or RIGHT) at the width of their type (u8, or u16, "
         "u32 and u64 values in i32) with numpy broadcasting",
         Binary{"a", "b"},
         Takes::Unsigned,
         Gives::Value,
         [](const std::vector<Expr> &v, const dsl::Attrs &a) { return shifted(v, a); },
         [](const std::vector<double> &v, const dsl::Attrs &a) { return shifted(v, a); },
         {{"direction", dsl::AttrType::String, std::nullopt, "LEFT or RIGHT",
           [](const dsl::AttrValue &a) -> std::string {
               const std::string &d = std::get<std::string>(a);
               return d == "LEFT" || d == "RIGHT" ? "" : "must be LEFT or RIGHT";
           }},
          {"bits", dsl::AttrType::Int, int64_t(8),
           "the width of the values' unsigned type: 8 (u8), 16, 32 or 64 (values in i32)",
           [](const dsl::AttrValue &a) -> std::string {
               const int64_t b = std::get<int64_t>(a);
               return b == 8 || b == 16 || b == 32 || b == 64 ? "" : "must be 8, 16, 32 or 64";
           }}}},
        {"pow",
         "a to the power b (ONNX's Pow) in float32, of a's type, with numpy broadcasting",
         Binary{"a", "b"},
         Takes::Powers,
         Gives::Value,
         [](const std::vector<Expr> &v, const dsl::Attrs &) {
             return onnx_pow(Halide::cast<float>(v[0]), Halide::cast<float>(v[1]));
         },
         [](const std::vector<double> &v, const dsl::Attrs &) { return std::pow(v[0], v[1]); },
         {}},
        {"div",
         "a / b with numpy broadcasting: float32 for floats; integers without a quantization "
         "truncated toward zero, x / 0 = 0",
         Binary{"a", "b"},
         Takes::Numbers,
         Gives::Value,
         [](const std::vector<Expr> &v, const dsl::Attrs &) { return quotient(v[0], v[1]); },
         [](const std::vector<double> &v, const dsl::Attrs &) { return v[0] / v[1]; },
         {},
         true},
        {"mod",
         "a mod b (ONNX's Mod: fmod 0 the divisor's sign, 1 the dividend's) with numpy "
         "broadcasting",
         Binary{"a", "b"},
         Takes::Numbers,
         Gives::Value,
         [](const std::vector<Expr> &v, const dsl::Attrs &a) { return remainder(v, a); },
         [](const std::vector<double> &v, const dsl::Attrs &a) { return remainder(v, a); },
         {{"fmod", dsl::AttrType::Int, int64_t(0),
           "0: the sign of the divisor (numpy's remainder); 1: of the dividend (C's fmod)",
           [](const dsl::AttrValue &a) -> std::string {
               const int64_t f = std::get<int64_t>(a);
               return f == 0 || f == 1 ? "" : "must be 0 or 1";
           }}}},
        {"where",
         "x where condition, else y, with numpy broadcasting of all three",
         Binary{"condition", "x", "y"},
         Takes::Select,
         Gives::Value,
         [](const std::vector<Expr> &v, const dsl::Attrs &) {
             return Halide::select(v[0] != 0, v[1], v[2]);
         },
         [](const std::vector<double> &v, const dsl::Attrs &) { return v[0] != 0 ? v[1] : v[2]; },
         {}},
        {"squared_difference",
         "(a - b)^2 of floats with numpy broadcasting, in float32 (TensorFlow's "
         "SquaredDifference)",
         Binary{"a", "b"},
         Takes::Reals,
         Gives::Value,
         [](const std::vector<Expr> &v, const dsl::Attrs &) {
             const Expr d = v[0] - v[1];
             return d * d;
         },
         [](const std::vector<double> &v, const dsl::Attrs &) {
             return (v[0] - v[1]) * (v[0] - v[1]);
         },
         {}},
        {"prelu",
         "x, or slope * x where x < 0 (ONNX's PRelu), the slope broadcast to x, in float32",
         Binary{"x", "slope"},
         Takes::Floats,
         Gives::Value,
         [](const std::vector<Expr> &v, const dsl::Attrs &) {
             return Halide::select(v[0] < 0, v[0] * v[1], v[0]);
         },
         [](const std::vector<double> &v, const dsl::Attrs &) {
             return v[0] < 0 ? v[0] * v[1] : v[0];
         },
         {}},
    };
    return defs;
}

// An input of the registry examples: u8 values without a quantization (integers, bools), else
// example_input's.
dsl::Layer plain_example_input(const std::string &name, int64_t c, int64_t w, int64_t h,
                               dsl::ElemType type) {
    dsl::TensorDesc t = example_input(name, c, w, h, type).output();
    t.quant = {};
    return dsl::Layer::input(t);
}

// Broadcasting both ways on odd extents: a varies along C and H, b along W and H (and a
// condition along all three).
dsl::Layer elementwise_example(const ElementwiseDef &def, dsl::ElemType type) {
    const bool bytes = def.takes == Takes::Bools || def.takes == Takes::Unsigned;
    if (type == dsl::ElemType::U8
            ? def.takes == Takes::Powers || def.takes == Takes::Floats || def.takes == Takes::Reals
            : bytes)
        return dsl::Layer();
    std::vector<dsl::Layer> inputs;
    if (def.takes == Takes::Select) {
        inputs = {plain_example_input("condition", 21, 9, 7, dsl::ElemType::U8),
                  example_input("x", 21, 1, 7, type), example_input("y", 1, 9, 7, type)};
    } else if (def.takes == Takes::Floats) {
        inputs = {example_input("x", 21, 9, 7, type), example_input("slope", 21, 1, 1, type)};
    } else {
        inputs = {plain_example_input("a", 21, 1, 7, type),
                  plain_example_input("b", 1, 9, 7, type)};
    }
    dsl::Attrs attrs;
    if (def.op == std::string("bit_shift")) attrs.set("direction", std::string("LEFT"));
    return layer_registry().build(def.op, def.op, inputs, attrs);
}

dsl::LayerDef layer_def(const ElementwiseDef &def) {
    dsl::LayerDef d;
    d.op = def.op;
    d.doc = def.doc;
    d.inputs = def.inputs;
    d.attrs = def.attrs;
    d.build = [&def](const std::string &name, const std::vector<dsl::Layer> &inputs,
                     const dsl::Attrs &attrs) {
        return make_elementwise(def, name, inputs, attrs);
    };
    d.fold = [&def](const std::string &name, const std::vector<dsl::Layer> &inputs,
                    const dsl::Attrs &attrs) { return fold_elementwise(def, name, inputs, attrs); };
    d.example = [&def](dsl::ElemType type) { return elementwise_example(def, type); };
    return d;
}

} // namespace

Expr detail::onnx_pow(const Expr &base, const Expr &exponent) {
    // |base|^exponent, its sign from an odd integer exponent; a negative base to a power that
    // is not an integer is NaN. Halide's pow approximates and leaves NaN to the caller: as C's,
    // x^0 and 1^y are 1, any other power of or to a NaN is NaN.
    const Expr magnitude = Halide::pow(Halide::abs(base), exponent);
    const Expr integer = Halide::floor(exponent) == exponent;
    const Expr odd = integer && Halide::floor(exponent * 0.5f) != exponent * 0.5f;
    const Expr nan = Halide::Expr(std::numeric_limits<float>::quiet_NaN());
    return Halide::strict_float(Halide::select(exponent == 0.0f || base == 1.0f, Halide::Expr(1.0f),
                                               Halide::is_nan(base) || Halide::is_nan(exponent) ||
                                                   (base < 0.0f && !integer),
                                               nan, base < 0.0f && odd, -magnitude, magnitude));
}

Expr detail::quotient(const Expr &a, const Expr &b) {
    if (a.type().is_float()) return Halide::strict_float(a / b);
    const Expr zero = Halide::Internal::make_zero(a.type());
    const Expr one = Halide::Internal::make_one(a.type());
    const Expr euclidean = a / b;
    if (a.type().is_uint()) return euclidean;
    return Halide::select(a < zero && a % b != zero,
                          euclidean + Halide::select(b > zero, one, -one), euclidean);
}

Expr detail::stored_as(const Expr &value, const Halide::Type &type) {
    if (!value.type().is_float() || type != Halide::Float(16)) return Halide::cast(type, value);
    const Expr quiet_nan = Halide::reinterpret(type, Halide::Expr(uint16_t(0x7e00)));
    return Halide::strict_float(
        Halide::select(Halide::is_nan(value), quiet_nan, Halide::cast(type, value)));
}

Expr detail::compare(const std::string &op, const Expr &a, const Expr &b) {
    if (op == "equal") return Halide::strict_float(a == b);
    // Halide may rewrite a >= b as !(a < b), true for a NaN: ordered operands first.
    const Expr ordered = a.type().is_float() ? !Halide::is_nan(a) && !Halide::is_nan(b)
                                             : Halide::Internal::const_true();
    const Expr result = op == "greater"            ? a > b
                        : op == "greater_or_equal" ? a >= b
                        : op == "less"             ? a < b
                                                   : a <= b;
    return Halide::strict_float(ordered && result);
}

void detail::register_eltwise_layers(dsl::LayerRegistry &r) {
    for (EltwiseOp op : kEltwiseOps) r.add(eltwise_def(op));
    for (const ElementwiseDef &def : elementwise_defs()) r.add(layer_def(def));
}

dsl::Layer eltwise(const std::string &name, EltwiseOp op, const dsl::Layer &a, const dsl::Layer &b,
                   const Activation &activation, const std::optional<QuantEltwise> &quant) {
    return layer_registry().build(op_name(op), name, {a, b}, eltwise_attrs(activation, quant));
}

} // namespace vpuc::algorithms
