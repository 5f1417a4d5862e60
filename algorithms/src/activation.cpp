// Standalone activations (relu, clamp, leaky relu: elementwise, fused into a producer's PPE when
// the graph allows) and the SHAVE layers sigmoid and softmax, computed in float32.
#include <algorithm>
#include <cmath>
#include <limits>

#include "algorithms/layers.h"
#include "common.h"

namespace vpuc::algorithms {

using Halide::Expr;
using Halide::Func;
using namespace detail;

namespace {

// One elementwise layer on one input, keeping the input's tensor type and quantization.
dsl::Layer unary(const char *op, const std::string &name, const dsl::Layer &input,
                 std::function<Expr(const Expr &stored, const InputInfo &in)> body) {
    const InputInfo in = input_info(std::string(op) + " '" + name + "'", input);
    dsl::Algorithm algorithm = [=](const std::vector<Func> &inputs) {
        const auto &v = dsl::act_vars();
        Func out = named_func(name);
        out(v.c, v.x, v.y) = body(inputs.at(0)(v.c, v.x, v.y), in);
        return out;
    };
    const dsl::TensorDesc &t = input.output();
    return dsl::Layer::make(op, output_desc(name, input, in.c, in.w, in.h, t.type, t.quant),
                            {input}, algorithm);
}

// The activation on a float input, through the PPE's float stage (its form fuses with a
// producer's output stage).
Expr float_activation(const Expr &stored, const InputInfo &in, const Activation &act) {
    return apply_float_ppe(Halide::cast<float>(stored), float_ppe(act), in.halide_type);
}

// Quantized output of a float value: round half to even, saturate to the type.
Expr quantize(const Expr &value, const dsl::Quant &q, dsl::ElemType type) {
    const bool u8 = type == dsl::ElemType::U8;
    Expr stored = Halide::round(value / q.scale_at(0)) + float(q.zero_point_at(0));
    return Halide::cast(dsl::halide_type(type),
                        Halide::clamp(stored, u8 ? 0.0f : -128.0f, u8 ? 255.0f : 127.0f));
}

Expr dequantize(const Expr &stored, const InputInfo &in) {
    if (!in.quantized) return Halide::cast<float>(stored);
    return Halide::cast<float>(Halide::cast<int32_t>(stored) - in.zero_point) * in.scale;
}

// The output quantization of an int8 sigmoid or softmax: [0, 1] over the type's 256 steps.
dsl::Quant probability_quant(const InputInfo &in, const std::optional<dsl::Quant> &given) {
    if (given) return *given;
    return dsl::Quant::per_tensor(1.0f / 256, in.type == dsl::ElemType::U8 ? 0 : -128);
}

} // namespace

dsl::Layer relu(const std::string &name, const dsl::Layer &input) {
    return unary("relu", name, input, [](const Expr &stored, const InputInfo &in) {
        if (in.quantized)
            return Halide::max(
                stored, Halide::Internal::make_const(in.halide_type, int64_t(in.zero_point)));
        return float_activation(stored, in, Activation::relu());
    });
}

dsl::Layer clamp(const std::string &name, const dsl::Layer &input, float low, float high) {
    if (!(low <= high))
        throw std::invalid_argument("clamp '" + name + "': low bound above the high bound");
    const Activation act = Activation::clamp(low, high);
    const dsl::TensorDesc &t = input.output();
    return unary("clamp", name, input, [act, t](const Expr &stored, const InputInfo &in) {
        if (!in.quantized) return float_activation(stored, in, act);
        const dpu::IntPpe ppe = int_ppe(act, t.type, t.quant);
        auto bound = [&](int32_t b) {
            return Halide::Internal::make_const(in.halide_type,
                                                int64_t(std::clamp(b, ppe.out_min, ppe.out_max)));
        };
        return Halide::clamp(stored, bound(ppe.clamp_low), bound(ppe.clamp_high));
    });
}

dsl::Layer leaky_relu(const std::string &name, const dsl::Layer &input, float alpha) {
    if (!(alpha >= 0)) throw std::invalid_argument("leaky_relu '" + name + "': alpha must be >= 0");
    const Activation act = Activation::leaky_relu(alpha);
    const dsl::TensorDesc &t = input.output();
    return unary("leaky_relu", name, input, [act, t](const Expr &stored, const InputInfo &in) {
        if (!in.quantized) return float_activation(stored, in, act);
        // In the quantized domain, with the input's zero point for both sides.
        Expr centered = Halide::cast<int64_t>(Halide::cast<int32_t>(stored) - in.zero_point);
        return apply_int_ppe(centered, int_ppe(act, t.type, t.quant), in.halide_type);
    });
}

dsl::Layer sigmoid(const std::string &name, const dsl::Layer &input,
                   const std::optional<dsl::Quant> &out_quant) {
    const std::string what = "sigmoid '" + name + "'";
    const InputInfo in = input_info(what, input);
    const dsl::Quant q = in.quantized ? probability_quant(in, out_quant) : dsl::Quant{};
    dsl::Algorithm algorithm = [=](const std::vector<Func> &inputs) {
        const auto &v = dsl::act_vars();
        Expr y = 1.0f / (1.0f + Halide::exp(-dequantize(inputs.at(0)(v.c, v.x, v.y), in)));
        Func out = named_func(name);
        out(v.c, v.x, v.y) =
            in.quantized ? quantize(y, q, in.type) : Halide::cast(in.halide_type, y);
        return out;
    };
    return dsl::Layer::make("sigmoid", output_desc(name, input, in.c, in.w, in.h, in.type, q),
                            {input}, algorithm);
}

dsl::Layer softmax(const std::string &name, const dsl::Layer &input, dsl::Dim axis,
                   const std::optional<dsl::Quant> &out_quant) {
    const std::string what = "softmax '" + name + "'";
    const InputInfo in = input_info(what, input);
    // Halide dims are (c, x, y): logical C, W, H.
    int dim = -1;
    if (axis == dsl::dims::C) dim = 0;
    if (axis == dsl::dims::W) dim = 1;
    if (axis == dsl::dims::H) dim = 2;
    if (dim < 0) invalid(what, "the axis must be C, H or W");
    const int extent = int(dim == 0 ? in.c : dim == 1 ? in.w : in.h);
    const dsl::Quant q = in.quantized ? probability_quant(in, out_quant) : dsl::Quant{};

    dsl::Algorithm algorithm = [=](const std::vector<Func> &inputs) {
        const auto &v = dsl::act_vars();
        const std::vector<Halide::Var> all = {v.c, v.x, v.y};
        std::vector<Halide::Var> others;
        for (int d = 0; d < 3; ++d)
            if (d != dim) others.push_back(all[size_t(d)]);
        Halide::RDom r(0, extent, Halide::Internal::unique_name(name + "_r"));
        auto along = [&](Expr at) {
            std::vector<Expr> args(all.begin(), all.end());
            args[size_t(dim)] = at;
            return args;
        };
        auto value = [&](const std::vector<Expr> &args) {
            return dequantize(inputs.at(0)(args), in);
        };
        // Subtracting the maximum keeps exp from overflowing.
        Func max_of = named_func(name + "_max");
        max_of(others) = -std::numeric_limits<float>::infinity();
        max_of(others) = Halide::max(max_of(others), value(along(r.x)));
        Func e = named_func(name + "_exp");
        e(all) = Halide::exp(value(along(all[size_t(dim)])) - max_of(others));
        Func sum = named_func(name + "_sum");
        sum(others) = 0.0f;
        sum(others) += e(along(r.x));
        Expr y = e(all) / sum(others);
        Func out = named_func(name);
        out(v.c, v.x, v.y) =
            in.quantized ? quantize(y, q, in.type) : Halide::cast(in.halide_type, y);
        return out;
    };
    return dsl::Layer::make("softmax", output_desc(name, input, in.c, in.w, in.h, in.type, q),
                            {input}, algorithm);
}

} // namespace vpuc::algorithms
