// Standalone activations (relu, clamp, leaky relu: elementwise, fused into a producer's PPE when
// the graph allows) and the SHAVE layers sigmoid, softmax and log_softmax, computed in float32
// (sigmoid also in fp16 arithmetic).
#include <algorithm>
#include <cmath>
#include <limits>

#include "algorithms/layers.h"
#include "algorithms/registry.h"
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

dsl::Layer make_relu(const std::string &name, const dsl::Layer &input) {
    return unary("relu", name, input, [](const Expr &stored, const InputInfo &in) {
        if (in.quantized)
            return Halide::max(
                stored, Halide::Internal::make_const(in.halide_type, int64_t(in.zero_point)));
        return float_activation(stored, in, Activation::relu());
    });
}

dsl::Layer make_clamp(const std::string &name, const dsl::Layer &input, float low, float high) {
    if (!(low <= high)) invalid("clamp '" + name + "'", "low bound above the high bound");
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

dsl::Layer make_leaky_relu(const std::string &name, const dsl::Layer &input, float alpha) {
    if (!(alpha >= 0)) invalid("leaky_relu '" + name + "'", "alpha must be >= 0");
    const Activation act = Activation::leaky_relu(alpha);
    const dsl::TensorDesc &t = input.output();
    return unary("leaky_relu", name, input, [act, t](const Expr &stored, const InputInfo &in) {
        if (!in.quantized) return float_activation(stored, in, act);
        // In the quantized domain, with the input's zero point for both sides.
        Expr centered = Halide::cast<int64_t>(Halide::cast<int32_t>(stored) - in.zero_point);
        return apply_int_ppe(centered, int_ppe(act, t.type, t.quant), in.halide_type);
    });
}

// `half`: in fp16 arithmetic (detail::fp16_arithmetic), as (1 + tanh(x / 2)) / 2, one special
// function where e^-x and a division take two.
dsl::Layer make_sigmoid(const std::string &name, const dsl::Layer &input,
                        const std::optional<dsl::Quant> &out_quant, bool half) {
    const std::string what = "sigmoid '" + name + "'";
    const InputInfo in = input_info(what, input);
    if (half) check_fp16_arithmetic(what, input);
    const dsl::Quant q = in.quantized ? probability_quant(in, out_quant) : dsl::Quant{};
    dsl::Algorithm algorithm = [=](const std::vector<Func> &inputs) {
        const auto &v = dsl::act_vars();
        Func out = named_func(name);
        if (half) {
            const Expr x = inputs.at(0)(v.c, v.x, v.y), half_one = constant_like(x, 0.5);
            out(v.c, v.x, v.y) =
                Halide::strict_float(nan_as_x(x, half_one + half_one * Halide::tanh(half_one * x)));
            return out;
        }
        // e^-x taken at -x = 88 at most (e^88 is finite in float32): Halide's exp of +inf is no
        // infinity, and made sigmoid(-inf) 1. NaN is set explicitly, as Halide's exp of NaN is no
        // NaN (and Halide 14 stores a float32 NaN in fp16 as an infinity).
        const Expr x = dequantize(inputs.at(0)(v.c, v.x, v.y), in);
        const Expr y = 1.0f / (1.0f + Halide::exp(Halide::min(-x, 88.0f)));
        if (in.quantized) {
            out(v.c, v.x, v.y) = quantize(y, q, in.type);
            return out;
        }
        const Expr nan = in.halide_type == Halide::Float(16)
                             ? Halide::reinterpret(in.halide_type, Halide::cast<uint16_t>(0x7e00))
                             : Halide::cast(in.halide_type, x);
        out(v.c, v.x, v.y) =
            Halide::select(Halide::is_nan(x), nan, Halide::cast(in.halide_type, y));
        return out;
    };
    return dsl::Layer::make("sigmoid", output_desc(name, input, in.c, in.w, in.h, in.type, q),
                            {input}, algorithm);
}

// softmax, or with `log` log_softmax: (x - max) - log(sum(exp(x - max))), whose values are
// not probabilities (int8 inputs are refused).
dsl::Layer make_softmax(const std::string &name, const dsl::Layer &input, int64_t axis,
                        const std::optional<dsl::Quant> &out_quant, bool log) {
    const std::string op = log ? "log_softmax" : "softmax";
    const std::string what = op + " '" + name + "'";
    const InputInfo in = input_info(what, input);
    if (log && in.quantized)
        invalid(what, "input '" + input.output().name + "' is " + dsl::to_string(in.type) +
                          "; log_softmax takes f16 or f32");
    const int dim = halide_dim(device_axis_of(what, input.output(), axis));
    const int extent = int(dim == 0 ? in.c : dim == 1 ? in.w : in.h);
    const dsl::Quant q = in.quantized ? probability_quant(in, out_quant) : dsl::Quant{};

    dsl::Algorithm algorithm = [=](const std::vector<Func> &inputs) {
        const auto &v = dsl::act_vars();
        const std::vector<Halide::Var> all = {v.c, v.x, v.y};
        std::vector<Halide::Var> others;
        for (int d = 0; d < 3; ++d)
            if (d != dim) others.push_back(all[size_t(d)]);
        Halide::RDom r(0, extent, detail::rdom_name(name + "_r"));
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
        Func shifted = named_func(name + "_shifted");
        shifted(all) = value(along(all[size_t(dim)])) - max_of(others);
        Func e = named_func(name + "_exp");
        e(all) = Halide::exp(shifted(all));
        Func sum = named_func(name + "_sum");
        sum(others) = 0.0f;
        sum(others) += e(along(r.x));
        Expr y = log ? shifted(all) - Halide::log(sum(others)) : e(all) / sum(others);
        Func out = named_func(name);
        out(v.c, v.x, v.y) =
            in.quantized ? quantize(y, q, in.type) : Halide::cast(in.halide_type, y);
        return out;
    };
    return dsl::Layer::make(op, output_desc(name, input, in.c, in.w, in.h, in.type, q), {input},
                            algorithm);
}

// A one-input layer whose example is the op with `example_attrs` on an odd-shaped input.
dsl::LayerDef unary_def(const char *op, const char *doc, std::vector<dsl::AttrSpec> attrs,
                        dsl::LayerDef::BuildFn build, const dsl::Attrs &example_attrs = {}) {
    dsl::LayerDef def;
    def.op = op;
    def.doc = doc;
    def.inputs = {"input"};
    def.attrs = std::move(attrs);
    def.build = std::move(build);
    def.example = [op = std::string(op), example_attrs](dsl::ElemType type) {
        return layer_registry().build(op, op, {example_input("in", 19, 11, 7, type)},
                                      example_attrs);
    };
    return def;
}

dsl::AttrSpec float_spec(const char *name, const char *doc) {
    return {name, dsl::AttrType::Float, std::nullopt, doc, {}};
}

} // namespace

void detail::register_activation_layers(dsl::LayerRegistry &r) {
    using Inputs = std::vector<dsl::Layer>;
    r.add(unary_def("relu", "max(x, 0)", {},
                    [](const std::string &name, const Inputs &in, const dsl::Attrs &) {
                        return make_relu(name, in.at(0));
                    }));
    r.add(unary_def(
        "clamp", "clamp(x, low, high), in real units",
        {float_spec("low", "lower bound"), float_spec("high", "upper bound")},
        [](const std::string &name, const Inputs &in, const dsl::Attrs &a) {
            return make_clamp(name, in.at(0), float(a.get_float("low")),
                              float(a.get_float("high")));
        },
        dsl::Attrs().set("low", 0.5).set("high", 6.0)));
    r.add(unary_def(
        "leaky_relu", "x < 0 ? alpha * x : x",
        {{"alpha", dsl::AttrType::Float, std::nullopt, "slope below zero, >= 0",
          [](const dsl::AttrValue &v) -> std::string {
              return std::get<double>(v) >= 0 ? "" : "must be >= 0";
          }}},
        [](const std::string &name, const Inputs &in, const dsl::Attrs &a) {
            return make_leaky_relu(name, in.at(0), float(a.get_float("alpha")));
        },
        dsl::Attrs().set("alpha", 0.1)));
    std::vector<dsl::AttrSpec> sigmoid_attrs = probability_specs();
    sigmoid_attrs.push_back(arithmetic_spec());
    r.add(unary_def(
        "sigmoid",
        "1 / (1 + exp(-x)) in float32, or fp16 with arithmetic fp16 (within 2^-8 + "
        "2^-9 |y|), on the SHAVEs",
        sigmoid_attrs, [](const std::string &name, const Inputs &in, const dsl::Attrs &a) {
            return make_sigmoid(name, in.at(0), probability_quant_of(a), fp16_arithmetic(a));
        }));
    const dsl::AttrSpec axis_spec = {"axis",
                                     dsl::AttrType::Int,
                                     int64_t(1),
                                     "logical axis, not the batch; negative counts from the end",
                                     {}};
    // Every output element reads the whole input along the axis.
    auto along_axis = [](const dsl::Layer &layer) {
        return std::vector<dsl::Dim>{device_axis_of(layer.op() + " '" + layer.name() + "'",
                                                    layer.output(), layer.attrs().get_int("axis"))};
    };
    std::vector<dsl::AttrSpec> softmax_attrs = {axis_spec};
    for (auto &spec : probability_specs()) softmax_attrs.push_back(spec);
    dsl::LayerDef softmax_def = unary_def(
        "softmax", "exp(x) / sum(exp(x)) along an axis, in float32, on the SHAVEs", softmax_attrs,
        [](const std::string &name, const Inputs &in, const dsl::Attrs &a) {
            return make_softmax(name, in.at(0), a.get_int("axis"), probability_quant_of(a), false);
        });
    softmax_def.unsplittable_dims = along_axis;
    r.add(std::move(softmax_def));
    dsl::LayerDef log_softmax_def = unary_def(
        "log_softmax", "x - log(sum(exp(x))) along an axis, in float32, on the SHAVEs (no int8)",
        {axis_spec}, [](const std::string &name, const Inputs &in, const dsl::Attrs &a) {
            return make_softmax(name, in.at(0), a.get_int("axis"), std::nullopt, true);
        });
    log_softmax_def.unsplittable_dims = along_axis;
    // int8 has no form of it; fp16 on the example's odd shape.
    log_softmax_def.example = [](dsl::ElemType type) {
        if (dsl::is_quantized_int(type)) return dsl::Layer();
        return layer_registry().build("log_softmax", "log_softmax",
                                      {example_input("in", 19, 11, 7, type)}, {});
    };
    r.add(std::move(log_softmax_def));
}

dsl::Layer relu(const std::string &name, const dsl::Layer &input) {
    return layer_registry().build("relu", name, {input}, {});
}

dsl::Layer clamp(const std::string &name, const dsl::Layer &input, float low, float high) {
    dsl::Attrs a;
    a.set("low", double(low)).set("high", double(high));
    return layer_registry().build("clamp", name, {input}, a);
}

dsl::Layer leaky_relu(const std::string &name, const dsl::Layer &input, float alpha) {
    dsl::Attrs a;
    a.set("alpha", double(alpha));
    return layer_registry().build("leaky_relu", name, {input}, a);
}

dsl::Layer sigmoid(const std::string &name, const dsl::Layer &input,
                   const std::optional<dsl::Quant> &out_quant) {
    dsl::Attrs a;
    set_probability_quant(a, out_quant);
    return layer_registry().build("sigmoid", name, {input}, a);
}

dsl::Layer softmax(const std::string &name, const dsl::Layer &input, dsl::Dim axis,
                   const std::optional<dsl::Quant> &out_quant) {
    dsl::Attrs a;
    a.set("axis", int64_t(axis.index()));
    set_probability_quant(a, out_quant);
    return layer_registry().build("softmax", name, {input}, a);
}

} // namespace vpuc::algorithms
