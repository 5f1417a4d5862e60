// constant_eltwise: x OP c (or c OP x), c a constant broadcast to x as numpy broadcasts, in
// float32 on the SHAVEs: ONNX's Add, Sub, Mul, Div, Max, Min and Pow with one constant operand
// (a bias, a scale, GELU's 1/sqrt(2), a square), PRelu of a constant slope, and comparisons
// with a constant (bool results, held as u8 0 and 1). The DPU's eltwise reads two tensors and the
// lowering takes constants only as attributes, so the kernel carries the constant. Division is a
// float32 division, not a product by the reciprocal, so the one rounding is the final one to fp16.
#include <algorithm>
#include <cstdint>
#include <cstring>

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

Halide::Expr apply(const std::string &op, const Halide::Expr &a, const Halide::Expr &b) {
    if (op == "add") return a + b;
    if (op == "sub") return a - b;
    if (op == "mul") return a * b;
    if (op == "div") return a / b;
    if (op == "max") return Halide::max(a, b);
    if (op == "min") return Halide::min(a, b);
    if (op == "pow") return detail::onnx_pow(a, b);
    if (op == "prelu") return Halide::select(a < 0, a * b, a);
    return detail::compare(op, a, b);
}

// The constant broadcast over one image of `input` (logical shape `shape`, device extents c, w,
// h), as a buffer of dims (c, x, y) whose extent is 1 along each device dimension the values do
// not vary along: the kernel carries no more than it reads.
Halide::Buffer<float> broadcast_constant(const std::string &what, const dsl::ConstValues &k,
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
    Halide::Buffer<float> full(int(in.c), int(in.w), int(in.h));
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
                    float(k.is_float() ? k.reals[size_t(source)] : double(k.ints[size_t(source)]));
            }
    // Drop each dimension the values do not vary along, bit for bit (-0.0 is not 0.0).
    auto bits = [](float f) {
        uint32_t b;
        std::memcpy(&b, &f, sizeof b);
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
    Halide::Buffer<float> kept(extents[0], extents[1], extents[2]);
    kept.for_each_element([&](const int *at) { kept(at) = full(at); });
    return kept;
}

dsl::Layer build_constant_eltwise(const std::string &name, const std::vector<dsl::Layer> &inputs,
                                  const dsl::Attrs &attrs) {
    const std::string what = "constant_eltwise '" + name + "'";
    const dsl::Layer &input = inputs.at(0);
    const detail::InputInfo in = detail::input_info(what, input);
    if (in.quantized)
        detail::invalid(what, "input '" + input.output().name + "' is " + dsl::to_string(in.type) +
                                  "; constant_eltwise takes f16 or f32");
    const std::string op = attrs.get_string("op");
    const bool constant_first = attrs.get_int("constant_first") != 0;
    const dsl::ElemType out_type = is_comparison(op) ? dsl::ElemType::U8 : in.type;
    const dsl::ConstValues k = dsl::const_values(attrs.get_tensor("constant"), what);
    const Halide::Buffer<float> values =
        broadcast_constant(what, k, input.output().logical_shape(), in);
    dsl::Algorithm algorithm = [=](const std::vector<Halide::Func> &funcs) {
        const auto &v = dsl::act_vars();
        auto at = [&](const Halide::Var &var, int d) {
            return values.dim(d).extent() == 1 ? Halide::Expr(0) : Halide::Expr(var);
        };
        const Halide::Expr x = Halide::cast<float>(funcs.at(0)(v.c, v.x, v.y));
        const Halide::Expr c = values(at(v.c, 0), at(v.x, 1), at(v.y, 2));
        Halide::Func out = detail::named_func(name);
        out(v.c, v.x, v.y) = detail::stored_as(constant_first ? apply(op, c, x) : apply(op, x, c),
                                               dsl::halide_type(out_type));
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
    def.doc = "x op c (or c op x), c a constant broadcast to x, in float32, on the SHAVEs";
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
         "numbers of a shape that broadcasts to the input's (numpy's rules), not along the batch",
         {}},
        {"constant_first", dsl::AttrType::Int, int64_t(0),
         "1: c op x (sub, div, pow, a comparison); 0: x op c",
         [](const dsl::AttrValue &a) -> std::string {
             const int64_t v = std::get<int64_t>(a);
             return v == 0 || v == 1 ? "" : "must be 0 or 1";
         }}};
    def.build = build_constant_eltwise;
    // A divisor per element of the last axis, on an input of odd extents (logical [1, 7, 11, 13]).
    def.example = [](dsl::ElemType type) {
        if (dsl::is_quantized_int(type)) return dsl::Layer();
        std::vector<float> divisors;
        for (int i = 0; i < 13; ++i) divisors.push_back(0.75f + 0.375f * float(i % 7));
        dsl::Attrs a;
        a.set("op", std::string("div"));
        a.set("constant", detail::vector_tensor(divisors));
        return layer_registry().build("constant_eltwise", "constant_eltwise",
                                      {detail::example_input("in", 7, 13, 11, type)}, a);
    };
    registry.add(std::move(def));
}

} // namespace vpuc::algorithms
