// constant_eltwise: x OP c (or c OP x), c a constant broadcast to x as numpy broadcasts, on the
// SHAVEs: ONNX's Add, Sub, Mul, Div, Max, Min and Pow with one constant operand (a bias, a scale,
// GELU's 1/sqrt(2), a square), PRelu of a constant slope, and comparisons with a constant (bool
// results, held as u8 0 and 1). The DPU's eltwise reads two tensors and the lowering takes
// constants only as attributes, so the kernel carries the constant. Floats compute in float32:
// division is a float32 division, not a product by the reciprocal, so the one rounding is the
// final one to fp16. Integers without a quantization (u8, i8, i32) compute exactly in int32 with
// an integer constant, wrapping as the binary layers do (to their own type), dividing truncated
// toward zero (x / 0 = 0); Pow is the float32 power rounded, as the pow layer's.
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <functional>

#include "common.h"

namespace vpuc::algorithms {

namespace {

const std::vector<std::string> &operations() {
    static const std::vector<std::string> ops = {"add",
                                                 "sub",
                                                 "mul",
                                                 "div",
                                                 "max",
                                                 "min",
                                                 "pow",
                                                 "prelu",
                                                 "equal",
                                                 "greater",
                                                 "greater_or_equal",
                                                 "less",
                                                 "less_or_equal"};
    return ops;
}

bool is_comparison(const std::string &op) {
    return op == "equal" || op == "greater" || op == "greater_or_equal" || op == "less" ||
           op == "less_or_equal";
}

// On float32 operands, or on int32 ones exactly: sums, differences and products wrap (computed in
// uint32, where Halide defines the wrap), quotients truncate toward zero.
Halide::Expr apply(const std::string &op, const Halide::Expr &a, const Halide::Expr &b) {
    const bool integers = a.type().is_int();
    auto wrapped = [&](const std::function<Halide::Expr(Halide::Expr, Halide::Expr)> &f) {
        if (!integers) return f(a, b);
        return Halide::cast<int32_t>(f(Halide::cast<uint32_t>(a), Halide::cast<uint32_t>(b)));
    };
    if (op == "add") return wrapped([](Halide::Expr p, Halide::Expr q) { return p + q; });
    if (op == "sub") return wrapped([](Halide::Expr p, Halide::Expr q) { return p - q; });
    if (op == "mul") return wrapped([](Halide::Expr p, Halide::Expr q) { return p * q; });
    if (op == "div") return integers ? detail::quotient(a, b) : a / b;
    if (op == "max") return Halide::max(a, b);
    if (op == "min") return Halide::min(a, b);
    if (op == "pow" && integers)
        return Halide::cast<int32_t>(
            Halide::round(detail::onnx_pow(Halide::cast<float>(a), Halide::cast<float>(b))));
    if (op == "pow") return detail::onnx_pow(a, b);
    if (op == "prelu") return Halide::select(a < 0, apply("mul", a, b), a);
    return detail::compare(op, a, b);
}

// The constant broadcast over one image of `input` (logical shape `shape`, device extents c, w,
// h), as a buffer of T (float or int32_t) of dims (c, x, y) whose extent is 1 along each device
// dimension the values do not vary along: the kernel carries no more than it reads.
template <typename T>
Halide::Buffer<T> broadcast_constant(const std::string &what, const dsl::ConstValues &k,
                                     const dsl::Shape &shape, const detail::InputInfo &in) {
    const int rank = shape.rank();
    if (int(k.shape.size()) > rank)
        detail::invalid(what, "the constant has rank " + std::to_string(k.shape.size()) +
                                  ", above the input's " + std::to_string(rank));
    const int offset = rank - int(k.shape.size());
    // Axis 0 is the batch, except in a tensor of rank 1 (the device's C).
    const int first = rank >= 2 ? 1 : 0;
    for (int d = 0; d < rank; ++d) {
        const int64_t extent = d < offset ? 1 : k.shape[size_t(d - offset)];
        if (extent != 1 && extent != shape[dsl::Dim(d)])
            detail::invalid(what, "a constant of shape " + dsl::to_string(dsl::Shape(k.shape)) +
                                      " does not broadcast to " + dsl::to_string(shape));
        if (d < first && extent != 1 && shape[dsl::Dim(0)] != 1)
            detail::invalid(what, "the constant varies along axis 0, the batch, and the device "
                                  "computes one image at a time");
    }
    // One image in logical row-major order is the device's (C, H, W) in row-major order.
    Halide::Buffer<T> full(int(in.c), int(in.w), int(in.h));
    for (int64_t y = 0; y < in.h; ++y)
        for (int64_t c = 0; c < in.c; ++c)
            for (int64_t x = 0; x < in.w; ++x) {
                int64_t flat = (c * in.h + y) * in.w + x, source = 0, stride = 1;
                for (int d = rank - 1; d >= first; --d) {
                    const int64_t extent = shape[dsl::Dim(d)];
                    const int64_t at = flat % extent;
                    flat /= extent;
                    if (d < offset) continue;
                    const int64_t k_extent = k.shape[size_t(d - offset)];
                    if (k_extent != 1) source += at * stride;
                    stride *= k_extent;
                }
                full(int(c), int(x), int(y)) =
                    k.is_float() ? T(k.reals[size_t(source)]) : T(k.ints[size_t(source)]);
            }
    // Drop each dimension the values do not vary along, bit for bit (-0.0 is not 0.0).
    auto bits = [](T v) {
        uint32_t b;
        static_assert(sizeof v == sizeof b);
        std::memcpy(&b, &v, sizeof b);
        return b;
    };
    int extents[3] = {int(in.c), int(in.w), int(in.h)};
    for (int d = 0; d < 3; ++d) {
        bool uniform = true;
        full.for_each_element([&](const int *at) {
            int first[3] = {at[0], at[1], at[2]};
            first[d] = 0;
            uniform = uniform && bits(full(at)) == bits(full(first));
        });
        if (uniform) extents[d] = 1;
    }
    Halide::Buffer<T> kept(extents[0], extents[1], extents[2]);
    kept.for_each_element([&](const int *at) { kept(at) = full(at); });
    return kept;
}

// Integers without a quantization, which compute exactly.
bool plain_integers(const detail::InputInfo &in, const dsl::Layer &input) {
    return (in.quantized || in.type == dsl::ElemType::I32) && input.output().quant.empty();
}

// The constant, checked to hold integers within int32 (a float or a larger one is refused).
dsl::ConstValues int32_constant(const std::string &what, const dsl::ConstValues &k) {
    if (k.is_float())
        detail::invalid(what, std::string("an integer input takes an integer constant, not ") +
                                  dsl::to_string(k.type) + " values");
    for (int64_t v : k.ints)
        if (v < INT32_MIN || v > INT32_MAX)
            detail::invalid(what, "the constant " + std::to_string(v) +
                                      " lies outside i32, the device's integers");
    return k;
}

dsl::Layer build_constant_eltwise(const std::string &name, const std::vector<dsl::Layer> &inputs,
                                  const dsl::Attrs &attrs) {
    const std::string what = "constant_eltwise '" + name + "'";
    const dsl::Layer &input = inputs.at(0);
    const detail::InputInfo in = detail::input_info(what, input, true);
    const bool integers = plain_integers(in, input);
    if (in.quantized && !integers)
        detail::invalid(what, "input '" + input.output().name + "' is " + dsl::to_string(in.type) +
                                  " quantized; constant_eltwise takes f16, f32, or u8, i8 and "
                                  "i32 without a quantization");
    const std::string op = attrs.get_string("op");
    const bool constant_first = attrs.get_int("constant_first") != 0;
    const dsl::ElemType out_type = is_comparison(op) ? dsl::ElemType::U8 : in.type;
    const dsl::ConstValues k = dsl::const_values(attrs.get_tensor("constant"), what);
    const dsl::Shape shape = input.output().logical_shape();
    // One of the two buffers holds the constant: int32 for integers, else float32.
    const Halide::Buffer<int32_t> ints =
        integers ? broadcast_constant<int32_t>(what, int32_constant(what, k), shape, in)
                 : Halide::Buffer<int32_t>();
    const Halide::Buffer<float> reals =
        integers ? Halide::Buffer<float>() : broadcast_constant<float>(what, k, shape, in);
    dsl::Algorithm algorithm = [=](const std::vector<Halide::Func> &funcs) {
        const auto &v = dsl::act_vars();
        // The constant's element at (c, x, y): index 0 along a dimension it does not vary along.
        auto at = [&](const Halide::Buffer<> &values) {
            std::vector<Halide::Expr> where;
            for (const Halide::Var &var : {v.c, v.x, v.y})
                where.push_back(values.dim(int(where.size())).extent() == 1 ? Halide::Expr(0)
                                                                            : Halide::Expr(var));
            return where;
        };
        const Halide::Expr c =
            integers ? Halide::Expr(ints(at(ints))) : Halide::Expr(reals(at(reals)));
        const Halide::Expr stored = funcs.at(0)(v.c, v.x, v.y);
        const Halide::Expr x =
            integers ? Halide::cast<int32_t>(stored) : Halide::cast<float>(stored);
        const Halide::Expr result = constant_first ? apply(op, c, x) : apply(op, x, c);
        Halide::Func out = detail::named_func(name);
        // Integers wrap to their own type (Halide's narrowing casts keep the low bits).
        out(v.c, v.x, v.y) = integers ? Halide::cast(dsl::halide_type(out_type), result)
                                      : detail::stored_as(result, dsl::halide_type(out_type));
        return out;
    };
    return dsl::Layer::make("constant_eltwise",
                            detail::output_desc(name, input, in.c, in.w, in.h, out_type, {}),
                            {input}, algorithm);
}

} // namespace

void register_layer_constant_eltwise(dsl::LayerRegistry &registry) {
    dsl::LayerDef def;
    def.op = "constant_eltwise";
    def.doc = "x op c (or c op x), c a constant broadcast to x, on the SHAVEs: floats in float32, "
              "integers exactly";
    def.inputs = {"input"};
    def.attrs = {
        {"op", dsl::AttrType::String, std::nullopt,
         "add, sub, mul, div, max, min, pow, prelu (x < 0: c * x), or a comparison: equal, "
         "greater, greater_or_equal, less, less_or_equal (a bool result: u8 0 or 1)",
         [](const dsl::AttrValue &a) -> std::string {
             const auto &ops = operations();
             return std::find(ops.begin(), ops.end(), std::get<std::string>(a)) != ops.end()
                        ? ""
                        : "must be add, sub, mul, div, max, min, pow, prelu, equal, greater, "
                          "greater_or_equal, less or less_or_equal";
         }},
        {"constant",
         dsl::AttrType::Tensor,
         std::nullopt,
         "numbers of a shape that broadcasts to the input's (numpy's rules), not along the batch; "
         "integers (within i32) for an integer input",
         {}},
        {"constant_first", dsl::AttrType::Int, int64_t(0),
         "1: c op x (sub, div, pow, a comparison); 0: x op c",
         [](const dsl::AttrValue &a) -> std::string {
             const int64_t v = std::get<int64_t>(a);
             return v == 0 || v == 1 ? "" : "must be 0 or 1";
         }}};
    def.build = build_constant_eltwise;
    // A divisor per element of the last axis, on an input of odd extents (logical [1, 7, 11, 13]);
    // for u8 without a quantization, a factor per element that wraps past 255.
    def.example = [](dsl::ElemType type) {
        dsl::Attrs a;
        if (dsl::is_quantized_int(type)) {
            std::vector<int32_t> factors;
            for (int i = 0; i < 13; ++i) factors.push_back(1 + 37 * i);
            dsl::TensorDesc t = detail::example_input("in", 7, 13, 11, type).output();
            t.quant = {};
            a.set("op", std::string("mul"));
            a.set("constant", detail::vector_tensor(factors));
            return layer_registry().build("constant_eltwise", "constant_eltwise",
                                          {dsl::Layer::input(t)}, a);
        }
        std::vector<float> divisors;
        for (int i = 0; i < 13; ++i) divisors.push_back(0.75f + 0.375f * float(i % 7));
        a.set("op", std::string("div"));
        a.set("constant", detail::vector_tensor(divisors));
        return layer_registry().build("constant_eltwise", "constant_eltwise",
                                      {detail::example_input("in", 7, 13, 11, type)}, a);
    };
    registry.add(std::move(def));
}

} // namespace vpuc::algorithms
