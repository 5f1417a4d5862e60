// Convolutions and matmul: an accumulator Func reduced over the kernel window, then the
// output stage. The forms are listed in layers.h.
#include <algorithm>
#include <tuple>

#include "algorithms/layers.h"
#include "algorithms/registry.h"
#include "common.h"

namespace vpuc::algorithms {

using Halide::Expr;
using Halide::Func;
using Halide::RDom;
using namespace detail;

namespace {

enum class ConvKind { Conv, Depthwise, MatMul };

const char *op_name(ConvKind kind) {
    switch (kind) {
    case ConvKind::Conv:
        return "conv2d";
    case ConvKind::Depthwise:
        return "depthwise_conv2d";
    case ConvKind::MatMul:
        return "matmul";
    }
    return "?";
}

// Sizes of a conv-like layer, checked against its weights.
struct Geometry {
    ConvKind kind = ConvKind::Conv;
    std::string what; // "conv2d 'c1'", for errors
    InputInfo in;
    Conv2dParams p;
    int kw = 1, kh = 1;
    int64_t oc = 0, ow = 0, oh = 0;
    int64_t ic_per_group = 0, oc_per_group = 0;
    bool padded = false;
};

Geometry geometry(ConvKind kind, const std::string &name, const dsl::Layer &input,
                  const Halide::Buffer<> &weights, const Conv2dParams &p) {
    Geometry g;
    g.kind = kind;
    g.what = std::string(op_name(kind)) + " '" + name + "'";
    g.in = kind == ConvKind::MatMul ? input_info(g.what, input) : spatial_input_info(g.what, input);
    g.p = p;
    const int rank = kind == ConvKind::MatMul ? 2 : 4;
    if (!weights.defined() || weights.dimensions() != rank)
        invalid(g.what, "weights must be a " + std::to_string(rank) + "-D buffer");
    for (int d = 0; d < rank; ++d)
        if (weights.dim(d).min() != 0) invalid(g.what, "weights must start at index 0");
    if (kind == ConvKind::MatMul) {
        if (g.in.h != 1)
            invalid(g.what, "the input must be (1, K, 1, M): rows along W, features along C");
        if (weights.dim(0).extent() != g.in.c)
            invalid(g.what, "weights have " + std::to_string(weights.dim(0).extent()) +
                                " rows, the input has " + std::to_string(g.in.c) + " features");
        g.oc = weights.dim(1).extent();
        g.ow = g.in.w;
        g.oh = 1;
        return g;
    }
    g.kw = weights.dim(1).extent();
    g.kh = weights.dim(2).extent();
    g.oc = weights.dim(3).extent();
    const int groups = kind == ConvKind::Depthwise ? int(g.in.c) : p.groups;
    if (kind == ConvKind::Depthwise && p.groups != 1)
        invalid(g.what, "groups is implied (one per channel); leave it 1");
    if (groups < 1 || g.in.c % groups != 0 || g.oc % groups != 0)
        invalid(g.what, std::to_string(groups) + " groups do not divide " + std::to_string(g.in.c) +
                            " input and " + std::to_string(g.oc) + " output channels");
    g.ic_per_group = g.in.c / groups;
    g.oc_per_group = g.oc / groups;
    const int64_t expected_w0 = kind == ConvKind::Depthwise ? 1 : g.ic_per_group;
    if (weights.dim(0).extent() != expected_w0 || (kind == ConvKind::Depthwise && g.oc != g.in.c))
        invalid(g.what, "weights are " + std::to_string(weights.dim(0).extent()) + "x" +
                            std::to_string(g.kw) + "x" + std::to_string(g.kh) + "x" +
                            std::to_string(g.oc) + "; expected (" + std::to_string(expected_w0) +
                            ", kw, kh, " +
                            std::to_string(kind == ConvKind::Depthwise ? g.in.c : g.oc) + ")");
    g.ow = window_extent(g.what, g.in.w, p.pad_left, p.pad_right, g.kw, p.stride_w, p.dilation_w);
    g.oh = window_extent(g.what, g.in.h, p.pad_top, p.pad_bottom, g.kh, p.stride_h, p.dilation_h);
    g.padded = p.pad_left || p.pad_right || p.pad_top || p.pad_bottom;
    return g;
}

// The reduction domain and the coordinates one MAC reads, in the input and in the weights.
struct Window {
    RDom r;
    std::vector<Expr> input, weights;
};

Window window(const Geometry &g, const std::string &name) {
    const auto &v = dsl::act_vars();
    const std::string rname = detail::rdom_name(name + "_r");
    Window w;
    switch (g.kind) {
    case ConvKind::Conv: {
        w.r = RDom({{0, int(g.ic_per_group)}, {0, g.kw}, {0, g.kh}}, rname);
        Expr ic = g.ic_per_group == g.in.c
                      ? Expr(w.r.x)
                      : (v.c / int(g.oc_per_group)) * int(g.ic_per_group) + w.r.x;
        w.input = {ic, window_coord(v.x, g.p.stride_w, w.r.y, g.p.dilation_w, g.p.pad_left),
                   window_coord(v.y, g.p.stride_h, w.r.z, g.p.dilation_h, g.p.pad_top)};
        w.weights = {w.r.x, w.r.y, w.r.z, v.c};
        break;
    }
    case ConvKind::Depthwise:
        w.r = RDom({{0, g.kw}, {0, g.kh}}, rname);
        w.input = {v.c, window_coord(v.x, g.p.stride_w, w.r.x, g.p.dilation_w, g.p.pad_left),
                   window_coord(v.y, g.p.stride_h, w.r.y, g.p.dilation_h, g.p.pad_top)};
        w.weights = {0, w.r.x, w.r.y, v.c};
        break;
    case ConvKind::MatMul:
        w.r = RDom({{0, int(g.in.c)}}, rname);
        w.input = {w.r.x, v.x, v.y};
        w.weights = {w.r.x, v.c};
        break;
    }
    return w;
}

// The input operand of one MAC: through the padded Func when the layer pads.
Expr input_operand(const Geometry &g, const Func &in, const std::string &name,
                   const std::vector<Expr> &at) {
    if (!g.padded) return mac_operand(in(at), g.in);
    Expr outside = g.in.quantized ? Expr(0) : Expr(0.0f);
    return padded_input(name, in, g.in, outside)(at);
}

template <typename T>
Halide::Buffer<T> per_channel(const std::string &what, const char *field, std::vector<T> values,
                              int64_t channels, T fill) {
    if (values.empty()) values.assign(size_t(channels), fill);
    if (values.size() == 1) values.assign(size_t(channels), values[0]);
    if (int64_t(values.size()) != channels)
        invalid(what, std::string(field) + " has " + std::to_string(values.size()) +
                          " entries for " + std::to_string(channels) + " output channels");
    Halide::Buffer<T> b(static_cast<int>(channels));
    std::copy(values.begin(), values.end(), b.data());
    return b;
}

dsl::Layer quant_conv(ConvKind kind, const std::string &name, const dsl::Layer &input,
                      const QuantWeights &w, const Conv2dParams &p) {
    Geometry g = geometry(kind, name, input, w.weights, p);
    if (!g.in.quantized) invalid(g.what, "int8 weights need a u8 or i8 input");
    if (w.requant.empty()) invalid(g.what, "no requantization (mult, shift)");
    std::vector<uint16_t> mults;
    std::vector<uint8_t> shifts;
    for (const FixedPoint &f : w.requant) {
        mults.push_back(f.mult);
        shifts.push_back(f.shift);
    }
    Halide::Buffer<int32_t> bias = per_channel(g.what, "bias", w.bias, g.oc, 0);
    Halide::Buffer<uint16_t> mult = per_channel(g.what, "requant", mults, g.oc, uint16_t(1));
    Halide::Buffer<uint8_t> shift = per_channel(g.what, "requant", shifts, g.oc, uint8_t(0));
    const dpu::IntPpe ppe = int_ppe(p.activation, w.output_type, w.output_quant);
    const Halide::Type out_type = dsl::halide_type(w.output_type);
    const Halide::Buffer<int8_t> weights = w.weights;
    const int32_t weights_zp = w.zero_point;

    dsl::Algorithm algorithm = [=](const std::vector<Func> &inputs) {
        const auto &v = dsl::act_vars();
        Window win = window(g, name);
        Func acc = named_func(name + "_acc");
        acc(v.c, v.x, v.y) = bias(v.c);
        acc(v.c, v.x, v.y) += input_operand(g, inputs.at(0), name, win.input) *
                              (Halide::cast<int32_t>(weights(win.weights)) - weights_zp);
        Func out = named_func(name);
        out(v.c, v.x, v.y) = requantize(acc(v.c, v.x, v.y), mult(v.c), shift(v.c), ppe, out_type);
        return out;
    };
    return dsl::Layer::make(
        op_name(kind), output_desc(name, input, g.oc, g.ow, g.oh, w.output_type, w.output_quant),
        {input}, algorithm);
}

dsl::Layer float_conv(ConvKind kind, const std::string &name, const dsl::Layer &input,
                      const FloatWeights &w, const Conv2dParams &p) {
    Geometry g = geometry(kind, name, input, w.weights, p);
    if (g.in.quantized) invalid(g.what, "fp16 weights need an f16 or f32 input");
    Halide::Buffer<float> scale = per_channel(g.what, "scale", w.scale, g.oc, 1.0f);
    Halide::Buffer<float> bias = per_channel(g.what, "bias", w.bias, g.oc, 0.0f);
    const dpu::FloatPpe ppe = float_ppe(p.activation);
    const Halide::Type out_type = g.in.halide_type;
    const Halide::Buffer<Halide::float16_t> weights = w.weights;

    dsl::Algorithm algorithm = [=](const std::vector<Func> &inputs) {
        const auto &v = dsl::act_vars();
        Window win = window(g, name);
        Func acc = named_func(name + "_acc");
        acc(v.c, v.x, v.y) = 0.0f;
        acc(v.c, v.x, v.y) += input_operand(g, inputs.at(0), name, win.input) *
                              Halide::cast<float>(weights(win.weights));
        Func out = named_func(name);
        out(v.c, v.x, v.y) =
            apply_float_ppe((acc(v.c, v.x, v.y) + bias(v.c)) * scale(v.c), ppe, out_type);
        return out;
    };
    return dsl::Layer::make(op_name(kind),
                            output_desc(name, input, g.oc, g.ow, g.oh, g.in.type, {}), {input},
                            algorithm);
}

Conv2dParams with_activation(const Activation &activation) {
    Conv2dParams p;
    p.activation = activation;
    return p;
}

// The attributes of a conv-like layer: ONNX's order for strides, dilations and pads.
dsl::Attrs geometry_attrs(ConvKind kind, const Conv2dParams &p) {
    dsl::Attrs a;
    if (kind != ConvKind::MatMul) {
        a.set("strides", std::vector<int64_t>{p.stride_h, p.stride_w});
        a.set("dilations", std::vector<int64_t>{p.dilation_h, p.dilation_w});
        a.set("pads", std::vector<int64_t>{p.pad_top, p.pad_left, p.pad_bottom, p.pad_right});
    }
    if (kind == ConvKind::Conv) a.set("groups", int64_t(p.groups));
    set_activation(a, p.activation);
    return a;
}

Conv2dParams params_of(ConvKind kind, const dsl::Attrs &a) {
    Conv2dParams p;
    p.activation = activation_of(a);
    if (kind == ConvKind::MatMul) return p;
    std::tie(p.stride_h, p.stride_w) = pair_of(a, "strides");
    std::tie(p.dilation_h, p.dilation_w) = pair_of(a, "dilations");
    std::tie(p.pad_top, p.pad_left, p.pad_bottom, p.pad_right) = pads_of(a);
    if (kind == ConvKind::Conv) p.groups = int(a.get_int("groups"));
    return p;
}

dsl::Attrs quant_attrs(ConvKind kind, const QuantWeights &w, const Conv2dParams &p) {
    dsl::Attrs a = geometry_attrs(kind, p);
    a.set("weights", w.weights);
    a.set("weight_zero_point", int64_t(w.zero_point));
    if (!w.bias.empty()) a.set("bias", vector_tensor(w.bias));
    std::vector<uint16_t> mults;
    std::vector<uint8_t> shifts;
    for (const FixedPoint &f : w.requant) {
        mults.push_back(f.mult);
        shifts.push_back(f.shift);
    }
    if (!w.requant.empty()) {
        a.set("requant_mult", vector_tensor(mults));
        a.set("requant_shift", vector_tensor(shifts));
    }
    set_output_quant(a, w.output_type, w.output_quant);
    return a;
}

dsl::Attrs float_attrs(ConvKind kind, const FloatWeights &w, const Conv2dParams &p) {
    dsl::Attrs a = geometry_attrs(kind, p);
    a.set("weights", w.weights);
    if (!w.bias.empty()) a.set("bias", vector_tensor(w.bias));
    if (!w.scale.empty()) a.set("scale", vector_tensor(w.scale));
    return a;
}

dsl::Layer build_conv(ConvKind kind, const std::string &name, const dsl::Layer &input,
                      const dsl::Attrs &a) {
    const Conv2dParams p = params_of(kind, a);
    const Halide::Buffer<> &weights = a.get_tensor("weights");
    const std::string what = std::string(op_name(kind)) + " '" + name + "'";
    if (weights.type() == Halide::Int(8)) {
        QuantWeights w;
        w.weights = tensor_as<int8_t>(a, "weights");
        w.zero_point = int32_t(a.get_int("weight_zero_point"));
        w.bias = tensor_values<int32_t>(a, "bias");
        const auto mults = tensor_values<uint16_t>(a, "requant_mult");
        const auto shifts = tensor_values<uint8_t>(a, "requant_shift");
        if (mults.size() != shifts.size())
            invalid(what, "requant_mult has " + std::to_string(mults.size()) +
                              " entries, requant_shift " + std::to_string(shifts.size()));
        for (size_t i = 0; i < mults.size(); ++i) w.requant.push_back({mults[i], shifts[i]});
        output_quant_of(a, w.output_type, w.output_quant);
        return quant_conv(kind, name, input, w, p);
    }
    if (weights.type() == Halide::Float(16)) {
        if (a.has("requant_mult") || a.has("requant_shift") || a.has("output_type"))
            invalid(what, "fp16 weights take no requantization or output type");
        FloatWeights w;
        w.weights = tensor_as<Halide::float16_t>(a, "weights");
        w.bias = tensor_values<float>(a, "bias");
        w.scale = tensor_values<float>(a, "scale");
        return float_conv(kind, name, input, w, p);
    }
    invalid(what, std::string("weights of ") + dsl::type_name(weights.type()) +
                      "; expected i8 (int8) or f16");
}

// Odd shapes, so a channel group, a row split or a halo that is off shows.
dsl::Layer conv_example(ConvKind kind, dsl::ElemType type) {
    const bool int8 = dsl::is_quantized_int(type);
    Conv2dParams p;
    p.pad_left = p.pad_right = p.pad_top = p.pad_bottom = 1;
    p.activation = Activation::relu();
    switch (kind) {
    case ConvKind::Conv: {
        dsl::Layer in = example_input("in", 19, 13, 11, type);
        const std::vector<int> dims = {19, 3, 3, 21};
        return int8 ? conv2d("conv2d", in, example_quant_weights(dims, 21), p)
                    : conv2d("conv2d", in, example_float_weights(dims, 21), p);
    }
    case ConvKind::Depthwise: {
        dsl::Layer in = example_input("in", 21, 13, 9, type);
        p.stride_w = p.stride_h = 2;
        const std::vector<int> dims = {1, 3, 3, 21};
        return int8 ? depthwise_conv2d("depthwise_conv2d", in, example_quant_weights(dims, 21), p)
                    : depthwise_conv2d("depthwise_conv2d", in, example_float_weights(dims, 21), p);
    }
    case ConvKind::MatMul: {
        dsl::Layer in = example_input("in", 37, 5, 1, type);
        const std::vector<int> dims = {37, 19};
        return int8 ? matmul("matmul", in, example_quant_weights(dims, 19))
                    : matmul("matmul", in, example_float_weights(dims, 19));
    }
    }
    return {};
}

dsl::LayerDef conv_def(ConvKind kind, const std::string &doc) {
    dsl::LayerDef def;
    def.op = op_name(kind);
    def.doc = doc;
    def.inputs = {"input"};
    if (kind != ConvKind::MatMul) {
        def.attrs.push_back(pair_spec("strides", 1, "[h, w]"));
        def.attrs.push_back(pair_spec("dilations", 1, "[h, w]"));
        def.attrs.push_back(pads_spec());
    }
    if (kind == ConvKind::Conv)
        def.attrs.push_back({"groups", dsl::AttrType::Int, int64_t(1), "groups of channels",
                             [](const dsl::AttrValue &v) -> std::string {
                                 return std::get<int64_t>(v) >= 1 ? "" : "must be >= 1";
                             }});
    for (auto &spec : activation_specs()) def.attrs.push_back(spec);
    const char *layout = kind == ConvKind::Conv        ? "(ic / groups, kw, kh, oc)"
                         : kind == ConvKind::Depthwise ? "(1, kw, kh, c)"
                                                       : "(k, n)";
    def.attrs.push_back({"weights",
                         dsl::AttrType::Tensor,
                         std::nullopt,
                         std::string("i8 or f16, dims ") + layout,
                         {}});
    def.attrs.push_back({"weight_zero_point", dsl::AttrType::Int, int64_t(0), "int8 weights", {}});
    auto optional_tensor = [&](const char *name, const char *what) {
        dsl::AttrSpec spec{name, dsl::AttrType::Tensor, std::nullopt, what, {}};
        spec.optional = true;
        def.attrs.push_back(spec);
    };
    optional_tensor("bias", "per output channel: i32 (int8) or f32 (fp16)");
    optional_tensor("scale", "fp16: f32 per output channel, after the bias");
    optional_tensor("requant_mult", "int8: u16 per output channel, or one for all");
    optional_tensor("requant_shift", "int8: u8, as requant_mult");
    for (auto &spec : output_quant_specs()) def.attrs.push_back(spec);
    def.example = [kind](dsl::ElemType type) { return conv_example(kind, type); };
    def.build = [kind](const std::string &name, const std::vector<dsl::Layer> &inputs,
                       const dsl::Attrs &attrs) {
        return build_conv(kind, name, inputs.at(0), attrs);
    };
    return def;
}

} // namespace

void detail::register_conv_layers(dsl::LayerRegistry &r) {
    r.add(conv_def(ConvKind::Conv, "2-D convolution, optionally grouped, on the DPU"));
    r.add(conv_def(ConvKind::Depthwise, "depthwise 2-D convolution, on the DPU"));
    r.add(conv_def(ConvKind::MatMul, "fully connected: (1, K, 1, M) rows times (K, N) weights"));
}

dsl::Layer conv2d(const std::string &name, const dsl::Layer &input, const QuantWeights &w,
                  const Conv2dParams &p) {
    return layer_registry().build("conv2d", name, {input}, quant_attrs(ConvKind::Conv, w, p));
}

dsl::Layer conv2d(const std::string &name, const dsl::Layer &input, const FloatWeights &w,
                  const Conv2dParams &p) {
    return layer_registry().build("conv2d", name, {input}, float_attrs(ConvKind::Conv, w, p));
}

dsl::Layer depthwise_conv2d(const std::string &name, const dsl::Layer &input, const QuantWeights &w,
                            const Conv2dParams &p) {
    return layer_registry().build("depthwise_conv2d", name, {input},
                                  quant_attrs(ConvKind::Depthwise, w, p));
}

dsl::Layer depthwise_conv2d(const std::string &name, const dsl::Layer &input, const FloatWeights &w,
                            const Conv2dParams &p) {
    return layer_registry().build("depthwise_conv2d", name, {input},
                                  float_attrs(ConvKind::Depthwise, w, p));
}

dsl::Layer matmul(const std::string &name, const dsl::Layer &input, const QuantWeights &w,
                  const Activation &activation) {
    return layer_registry().build("matmul", name, {input},
                                  quant_attrs(ConvKind::MatMul, w, with_activation(activation)));
}

dsl::Layer matmul(const std::string &name, const dsl::Layer &input, const FloatWeights &w,
                  const Activation &activation) {
    return layer_registry().build("matmul", name, {input},
                                  float_attrs(ConvKind::MatMul, w, with_activation(activation)));
}

} // namespace vpuc::algorithms
