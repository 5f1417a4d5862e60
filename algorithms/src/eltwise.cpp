// Elementwise binary ops with numpy broadcasting, and the DPU's int8 eltwise arithmetic.
#include <algorithm>
#include <cmath>

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

// The output tensor: numpy broadcasting of two inputs of one rank, in the memory order of
// `batched`, the one of them with the batch.
dsl::TensorDesc broadcast_tensor(const std::string &what, const std::string &name,
                                 const dsl::Layer &a, const dsl::Layer &b,
                                 const dsl::Layer &batched) {
    const dsl::TensorDesc &ta = a.output(), &tb = b.output();
    if (ta.shape.rank() != tb.shape.rank())
        invalid(what, "input '" + ta.name + "' is " + dsl::to_string(ta.shape) + " and '" +
                          tb.name + "' " + dsl::to_string(tb.shape) +
                          "; give them one rank (unsqueeze the smaller: numpy prepends "
                          "unit dimensions)");
    std::vector<int64_t> extents;
    for (int d = 0; d < ta.shape.rank(); ++d)
        extents.push_back(broadcast(what, ("axis " + std::to_string(d)).c_str(),
                                    ta.shape[dsl::Dim(d)], tb.shape[dsl::Dim(d)]));
    dsl::TensorDesc out = batched.output();
    out.name = name;
    out.shape = dsl::Shape(extents);
    return out;
}

dsl::TensorDesc with_type(dsl::TensorDesc t, dsl::ElemType type, dsl::Quant quant) {
    t.type = type;
    t.quant = std::move(quant);
    return t;
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

namespace {

dsl::Layer make_eltwise(const std::string &name, EltwiseOp op, const dsl::Layer &a,
                        const dsl::Layer &b, const Activation &activation,
                        const std::optional<QuantEltwise> &quant) {
    const std::string what = std::string(op_name(op)) + " '" + name + "'";
    const InputInfo ia = input_info(what, a, true), ib = input_info(what, b, true);
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
    const dsl::Layer &batched = ia.n >= ib.n ? a : b;
    const dsl::TensorDesc out_logical = broadcast_tensor(what, name, a, b, batched);
    broadcast(what, "N", ia.n, ib.n); // a tensor without batch serves every image
    const int64_t c = broadcast(what, "C", ia.c, ib.c);
    const int64_t w = broadcast(what, "W", ia.w, ib.w);
    const int64_t h = broadcast(what, "H", ia.h, ib.h);
    const dsl::Shape device = dsl::device_view(out_logical).shape;
    if (device != dsl::Shape{device[dsl::dims::N], c, h, w})
        invalid(what, "broadcasting " + dsl::to_string(a.output().shape) + " with " +
                          dsl::to_string(b.output().shape) +
                          " along D or H of a 5-D tensor, which share the device's H");

    // Integers combine exactly in their own type, sums and products wrapping around as
    // numpy's do (int32's in uint32, where Halide defines the wrap): a SHAVE kernel.
    if (integers) {
        if (quant || activation.kind != dpu::Activation::None || std::isfinite(activation.low) ||
            std::isfinite(activation.high))
            invalid(what, "integers without a quantization take no requantization or activation");
        dsl::Algorithm algorithm = [=](const std::vector<Func> &inputs) {
            const auto &v = dsl::act_vars();
            Func out = named_func(name);
            Expr va = inputs.at(0)(broadcast_at(ia, c, w, h));
            Expr vb = inputs.at(1)(broadcast_at(ib, c, w, h));
            const bool wraps =
                ia.type == dsl::ElemType::I32 && op != EltwiseOp::Max && op != EltwiseOp::Min;
            out(v.c, v.x, v.y) = wraps ? Halide::cast<int32_t>(apply(op, Halide::cast<uint32_t>(va),
                                                                     Halide::cast<uint32_t>(vb)))
                                       : apply(op, va, vb);
            return out;
        };
        return dsl::Layer::make(op_name(op), with_type(out_logical, ia.type, {}), {a, b},
                                algorithm);
    }

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
        return dsl::Layer::make(op_name(op), with_type(out_logical, ia.type, {}), {a, b},
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
    return dsl::Layer::make(op_name(op), with_type(out_logical, q.out.type, q.out.quant), {a, b},
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

} // namespace

void detail::register_eltwise_layers(dsl::LayerRegistry &r) {
    for (EltwiseOp op : kEltwiseOps) r.add(eltwise_def(op));
}

dsl::Layer eltwise(const std::string &name, EltwiseOp op, const dsl::Layer &a, const dsl::Layer &b,
                   const Activation &activation, const std::optional<QuantEltwise> &quant) {
    return layer_registry().build(op_name(op), name, {a, b}, eltwise_attrs(activation, quant));
}

} // namespace vpuc::algorithms
