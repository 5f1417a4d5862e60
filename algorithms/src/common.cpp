#include "common.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>

namespace vpuc::algorithms::detail {

using Halide::Expr;

namespace {

// The device view of `input`'s tensor; throws LayerError naming `what` when it has none.
dsl::TensorDesc input_view(const std::string &what, const dsl::Layer &input) {
    try {
        return dsl::device_view(input.output());
    } catch (const dsl::LayerError &e) {
        invalid(what, e.what());
    }
}

InputInfo info_of(const std::string &what, const dsl::Layer &input, bool takes_i32,
                  bool takes_per_axis) {
    const dsl::TensorDesc t = input_view(what, input);
    for (int64_t extent : t.shape.raw())
        if (extent < 1)
            invalid(what, "input '" + t.name + "' is " + dsl::to_string(input.output().shape) +
                              "; every extent must be at least 1");
    if (t.quant.per_channel() && !takes_per_axis)
        invalid(what, "input '" + t.name +
                          "' is quantized per channel; activations are "
                          "quantized per tensor");
    InputInfo info;
    info.n = t.shape[dsl::dims::N];
    info.c = t.shape[dsl::dims::C];
    info.w = t.shape[dsl::dims::W];
    info.h = t.shape[dsl::dims::H];
    info.type = t.type;
    info.halide_type = dsl::halide_type(t.type);
    info.quantized = dsl::is_quantized_int(t.type);
    if (!t.quant.empty()) {
        info.scale = t.quant.scale_at(0);
        info.zero_point = t.quant.zero_point_at(0);
    }
    if (!info.quantized && t.type != dsl::ElemType::F16 && t.type != dsl::ElemType::F32 &&
        !(takes_i32 && t.type == dsl::ElemType::I32))
        invalid(what, std::string("input '") + t.name + "' is " + dsl::to_string(t.type) +
                          (takes_i32 ? "; this layer takes u8, i8, f16, f32 or i32"
                                     : "; layers take u8, i8, f16 or f32"));
    return info;
}

} // namespace

InputInfo input_info(const std::string &what, const dsl::Layer &input, bool takes_i32) {
    return info_of(what, input, takes_i32, false);
}

InputInfo per_axis_input_info(const std::string &what, const dsl::Layer &input) {
    return info_of(what, input, false, true);
}

Halide::Expr any_image_element(const Halide::Func &input, const InputInfo &in,
                               const Halide::Expr &flat) {
    auto inside = [](const Halide::Expr &e, int64_t extent) {
        return Halide::clamp(e & 0x7fffffff, 0, int(extent - 1));
    };
    const Halide::Expr plane = int(in.h * in.w), at = flat % plane;
    return input(inside(flat / plane, in.c), inside(at % int(in.w), in.w),
                 inside(at / int(in.w), in.h));
}

Halide::Func named_func(const std::string &name) {
    return Halide::Func(Halide::Internal::unique_name(dsl::halide_name(name)));
}

std::string rdom_name(const std::string &name) {
    return Halide::Internal::unique_name(dsl::halide_name(name));
}

Expr mac_operand(const Expr &stored, const InputInfo &in) {
    if (in.quantized) return Halide::cast<int32_t>(stored) - in.zero_point;
    return Halide::cast<float>(stored);
}

Halide::Func padded_input(const std::string &name, const Halide::Func &in, const InputInfo &info,
                          const Expr &outside) {
    const auto &v = dsl::act_vars();
    Halide::Func padded = named_func(name + "_padded");
    Expr inside = v.x >= 0 && v.x < int(info.w) && v.y >= 0 && v.y < int(info.h);
    // The clamp keeps the read inside the image; the select discards it outside.
    Expr stored =
        in(v.c, Halide::clamp(v.x, 0, int(info.w - 1)), Halide::clamp(v.y, 0, int(info.h - 1)));
    padded(v.c, v.x, v.y) = Halide::select(inside, mac_operand(stored, info), outside);
    return padded;
}

Expr window_coord(const Expr &v, int stride, const Expr &k, int dilation, int pad) {
    Expr e = (stride == 1 ? v : v * stride) + (dilation == 1 ? k : k * dilation);
    return pad == 0 ? e : e - pad;
}

int64_t window_extent(const std::string &what, int64_t in, int pad_a, int pad_b, int kernel,
                      int stride, int dilation) {
    if (kernel < 1 || stride < 1 || dilation < 1 || pad_a < 0 || pad_b < 0)
        invalid(what, "kernel, stride and dilation must be >= 1 and pads >= 0");
    int64_t span = int64_t(kernel - 1) * dilation + 1;
    int64_t padded = in + pad_a + pad_b;
    if (padded < span)
        invalid(what, "the window (" + std::to_string(span) +
                          ") is larger than the padded input (" + std::to_string(padded) + ")");
    return (padded - span) / stride + 1;
}

std::vector<int64_t> memory_sequence(const dsl::TensorDesc &t) {
    const std::vector<int64_t> strides = t.order.logical_strides(t.shape);
    std::vector<int64_t> dims;
    for (size_t d = 0; d < strides.size(); ++d)
        if (t.shape.raw()[d] > 1) dims.push_back(int64_t(d));
    std::sort(dims.begin(), dims.end(),
              [&](int64_t a, int64_t b) { return strides[size_t(a)] > strides[size_t(b)]; });
    return dims;
}

dsl::Dim device_axis_of(const std::string &what, const dsl::TensorDesc &t, int64_t axis) {
    const dsl::Shape &shape = t.logical_shape();
    const int64_t rank = shape.rank();
    if (axis < -rank || axis >= rank)
        invalid(what, "axis " + std::to_string(axis) + " is outside the rank of '" + t.name +
                          "' (" + dsl::to_string(shape) + ")");
    const int logical = int(axis < 0 ? axis + rank : axis);
    const std::optional<dsl::Dim> device = dsl::device_axis(shape, logical);
    if (!device)
        invalid(what, "axis " + std::to_string(logical) + " of '" + t.name + "' (" +
                          dsl::to_string(shape) +
                          ") shares the device's H with other axes above 1; the device "
                          "computes along it only where they have extent 1");
    if (*device == dsl::dims::N)
        invalid(what, "axis " + std::to_string(logical) + " of '" + t.name + "' (" +
                          dsl::to_string(shape) +
                          ") is the batch, and the device computes one image at a time");
    return *device;
}

int halide_dim(dsl::Dim device) {
    if (device == dsl::dims::C) return 0;
    if (device == dsl::dims::W) return 1;
    if (device == dsl::dims::H) return 2;
    throw std::logic_error("halide_dim: the batch has no dimension in (c, x, y)");
}

dsl::TensorDesc graph_tensor(const dsl::TensorDesc &t) {
    if (!t.graph_shape) return t;
    dsl::TensorDesc g = t;
    g.shape = *t.graph_shape;
    g.order = dsl::DimsOrder::identity(g.shape.rank());
    g.graph_shape.reset();
    return g;
}

std::optional<dsl::Box> device_box(const dsl::Shape &logical, const dsl::Box &box) {
    const int rank = logical.rank();
    if (rank == 4) return box;
    dsl::Box device{std::vector<int64_t>(4, 0), std::vector<int64_t>(4, 1)};
    const std::vector<std::vector<int>> groups = dsl::device_groups(rank);
    for (size_t d = 0; d < groups.size(); ++d) {
        // The axes sharing a device dimension, innermost first: a box there while each is
        // whole, then one cut, then only unit extents outside it.
        int64_t start = 0, extent = 1, inner = 1;
        bool cut = false;
        for (size_t i = groups[d].size(); i-- > 0;) {
            const size_t axis = size_t(groups[d][i]);
            const int64_t size = logical.raw()[axis];
            if (cut && box.extent[axis] != 1) return std::nullopt;
            start += box.start[axis] * inner;
            extent *= box.extent[axis];
            inner *= size;
            cut = cut || box.extent[axis] != size;
        }
        device.start[d] = start;
        device.extent[d] = extent;
    }
    return device;
}

InputInfo spatial_input_info(const std::string &what, const dsl::Layer &input) {
    const dsl::Shape &shape = input.output().shape;
    if (shape.rank() != 3 && shape.rank() != 4)
        invalid(what, "input '" + input.output().name + "' is " + dsl::to_string(shape) +
                          "; a window slides over H and W of a 4-D tensor (N, C, H, W), or W of "
                          "a 3-D one (N, C, W)");
    return input_info(what, input);
}

dsl::TensorDesc output_desc(const std::string &name, const dsl::Layer &like, int64_t c, int64_t w,
                            int64_t h, dsl::ElemType type, dsl::Quant quant) {
    const dsl::TensorDesc &in = like.output();
    const dsl::Shape device{dsl::device_view(in).shape[dsl::dims::N], c, h, w};
    const std::optional<dsl::Shape> shape = dsl::logical_shape(in.shape, device);
    if (!shape)
        invalid("layer '" + name + "'", "its output " + dsl::to_string(device) +
                                            " (N, C, H, W) has no shape of the rank of its "
                                            "input '" +
                                            in.name + "' (" + dsl::to_string(in.shape) + ")");
    dsl::TensorDesc t;
    t.name = name;
    t.shape = *shape;
    t.type = type;
    t.quant = std::move(quant);
    t.order = in.order;
    return t;
}

QuantWeights example_quant_weights(const std::vector<int> &dims, int out_channels) {
    std::mt19937 rng(uint32_t(dims.size() * 131 + size_t(out_channels)));
    QuantWeights w;
    w.weights = Halide::Buffer<int8_t>(dims);
    w.weights.for_each_value([&](int8_t &v) { v = int8_t(int(rng() % 201) - 100); });
    for (int c = 0; c < out_channels; ++c) {
        w.bias.push_back(int32_t(rng() % 4001) - 2000);
        w.requant.push_back(fixed_point(0.004 + 0.0003 * c));
    }
    w.output_type = dsl::ElemType::U8;
    w.output_quant = dsl::Quant::per_tensor(0.05f, 10);
    return w;
}

FloatWeights example_float_weights(const std::vector<int> &dims, int out_channels) {
    std::mt19937 rng(uint32_t(dims.size() * 137 + size_t(out_channels)));
    auto real = [&](float scale) { return scale * (float(rng() % 2001) / 1000.0f - 1.0f); };
    FloatWeights w;
    w.weights = Halide::Buffer<Halide::float16_t>(dims);
    w.weights.for_each_value([&](Halide::float16_t &v) { v = Halide::float16_t(real(0.3f)); });
    for (int c = 0; c < out_channels; ++c) {
        w.bias.push_back(real(1.0f));
        w.scale.push_back(1.0f + real(0.25f));
    }
    return w;
}

} // namespace vpuc::algorithms::detail

namespace vpuc::algorithms::detail {

namespace {

std::string at_least(const dsl::AttrValue &v, int64_t min, size_t count) {
    const auto &l = std::get<std::vector<int64_t>>(v);
    if (l.size() != count) return "expected " + std::to_string(count) + " values";
    for (int64_t x : l)
        if (x < min || x > 65535)
            return "each value must be in [" + std::to_string(min) + ", 65535]";
    return "";
}

} // namespace

std::vector<dsl::AttrSpec> activation_specs() {
    return {
        {"activation", dsl::AttrType::String, std::string("none"),
         "fused activation: none, relu or leaky_relu",
         [](const dsl::AttrValue &v) -> std::string {
             const auto &s = std::get<std::string>(v);
             return s == "none" || s == "relu" || s == "leaky_relu"
                        ? ""
                        : "expected none, relu or leaky_relu";
         }},
        {"alpha", dsl::AttrType::Float, 0.0, "leaky_relu slope, >= 0",
         [](const dsl::AttrValue &v) -> std::string {
             return std::get<double>(v) >= 0 ? "" : "must be >= 0";
         }},
        {"clamp_low", dsl::AttrType::Float, -double(INFINITY), "clamp after the activation", {}},
        {"clamp_high", dsl::AttrType::Float, double(INFINITY), "clamp after the activation", {}},
    };
}

void set_activation(dsl::Attrs &attrs, const Activation &act) {
    attrs.set("activation", std::string(act.kind == dpu::Activation::Relu        ? "relu"
                                        : act.kind == dpu::Activation::LeakyRelu ? "leaky_relu"
                                                                                 : "none"));
    attrs.set("alpha", double(act.alpha));
    attrs.set("clamp_low", double(act.low));
    attrs.set("clamp_high", double(act.high));
}

Activation activation_of(const dsl::Attrs &attrs) {
    Activation act;
    const std::string &kind = attrs.get_string("activation");
    act.kind = kind == "relu"         ? dpu::Activation::Relu
               : kind == "leaky_relu" ? dpu::Activation::LeakyRelu
                                      : dpu::Activation::None;
    act.alpha = float(attrs.get_float("alpha"));
    act.low = float(attrs.get_float("clamp_low"));
    act.high = float(attrs.get_float("clamp_high"));
    return act;
}

dsl::AttrSpec pair_spec(const std::string &name, int64_t min, const std::string &doc) {
    return {name, dsl::AttrType::Ints, std::vector<int64_t>{1, 1}, doc,
            [min](const dsl::AttrValue &v) { return at_least(v, min, 2); }};
}

dsl::AttrSpec pads_spec() {
    return {"pads", dsl::AttrType::Ints, std::vector<int64_t>{0, 0, 0, 0},
            "[top, left, bottom, right]",
            [](const dsl::AttrValue &v) { return at_least(v, 0, 4); }};
}

std::tuple<int, int> pair_of(const dsl::Attrs &attrs, const std::string &name) {
    const auto v = attrs.get_ints(name);
    return {int(v.at(0)), int(v.at(1))};
}

std::tuple<int, int, int, int> pads_of(const dsl::Attrs &attrs) {
    const auto v = attrs.get_ints("pads");
    return {int(v.at(0)), int(v.at(1)), int(v.at(2)), int(v.at(3))};
}

std::vector<dsl::AttrSpec> output_quant_specs() {
    dsl::AttrSpec type{"output_type", dsl::AttrType::String, std::nullopt, "int8 output: u8 or i8",
                       [](const dsl::AttrValue &v) -> std::string {
                           const auto &s = std::get<std::string>(v);
                           return s == "u8" || s == "i8" ? "" : "expected u8 or i8";
                       }};
    type.optional = true;
    dsl::AttrSpec scale{"output_scale", dsl::AttrType::Float, std::nullopt,
                        "int8 output: per-tensor scale",
                        [](const dsl::AttrValue &v) -> std::string {
                            const double s = std::get<double>(v);
                            return s > 0 && std::isfinite(s) ? "" : "must be positive and finite";
                        }};
    scale.optional = true;
    dsl::AttrSpec zero_point{"output_zero_point", dsl::AttrType::Int, std::nullopt,
                             "int8 output: zero point", [](const dsl::AttrValue &v) -> std::string {
                                 const int64_t z = std::get<int64_t>(v);
                                 return z >= -128 && z <= 255 ? "" : "must be in [-128, 255]";
                             }};
    zero_point.optional = true;
    return {type, scale, zero_point};
}

void set_output_quant(dsl::Attrs &attrs, dsl::ElemType type, const dsl::Quant &quant) {
    attrs.set("output_type", std::string(dsl::to_string(type)));
    if (quant.empty()) return;
    attrs.set("output_scale", double(quant.scale_at(0)));
    attrs.set("output_zero_point", int64_t(quant.zero_point_at(0)));
}

bool output_quant_of(const dsl::Attrs &attrs, dsl::ElemType &type, dsl::Quant &quant) {
    if (!attrs.has("output_type")) return false;
    type = attrs.get_string("output_type") == "i8" ? dsl::ElemType::I8 : dsl::ElemType::U8;
    quant = attrs.has("output_scale")
                ? dsl::Quant::per_tensor(float(attrs.get_float("output_scale")),
                                         attrs.has("output_zero_point")
                                             ? int32_t(attrs.get_int("output_zero_point"))
                                             : 0)
                : dsl::Quant{};
    return true;
}

dsl::Layer example_input(const std::string &name, int64_t c, int64_t w, int64_t h,
                         dsl::ElemType type) {
    dsl::TensorDesc t;
    t.name = name;
    t.shape = dsl::Shape({1, c, h, w});
    t.type = type;
    if (dsl::is_quantized_int(type)) t.quant = dsl::Quant::per_tensor(0.05f, 120);
    t.order = dsl::DimsOrder::NHWC();
    return dsl::Layer::input(t);
}

namespace {

float stored_min(dsl::ElemType type) {
    return type == dsl::ElemType::U8 ? 0.0f : -128.0f;
}
float stored_max(dsl::ElemType type) {
    return type == dsl::ElemType::U8 ? 255.0f : 127.0f;
}

} // namespace

dsl::AttrSpec arithmetic_spec() {
    return {"arithmetic", dsl::AttrType::String, std::string("float32"),
            "float32: the float32 result rounded once to the output's type; fp16: every "
            "operation in fp16, for fp16 inputs (faster; the error bound of docs/layers.md)",
            [](const dsl::AttrValue &v) -> std::string {
                const std::string &a = std::get<std::string>(v);
                return a == "float32" || a == "fp16" ? "" : "must be float32 or fp16";
            }};
}

bool fp16_arithmetic(const dsl::Attrs &attrs) {
    return attrs.has("arithmetic") && attrs.get_string("arithmetic") == "fp16";
}

void check_fp16_arithmetic(const std::string &what, const dsl::Layer &input) {
    if (input.output().type != dsl::ElemType::F16)
        invalid(what, "arithmetic fp16 takes an f16 input; input '" + input.output().name +
                          "' is " + input.output().describe());
}

Expr constant_like(const Expr &x, double value) {
    return Halide::cast(x.type(), Expr(value));
}

Expr nan_as_x(const Expr &x, const Expr &y) {
    return Halide::select(x != x, x, y);
}

Expr saturate(const Expr &stored, dsl::ElemType type) {
    return Halide::cast(dsl::halide_type(type),
                        Halide::clamp(stored, stored_min(type), stored_max(type)));
}

// Quantized output of a float value: round half to even, saturate to the type.
Expr quantize(const Expr &value, const dsl::Quant &q, dsl::ElemType type) {
    return saturate(Halide::round(value / q.scale_at(0)) + float(q.zero_point_at(0)), type);
}

std::optional<float> exact_f16_reciprocal(float scale, int32_t zero_point, dsl::ElemType type) {
    const float reciprocal = 1.0f / scale;
    const float zero = float(zero_point), lo = stored_min(type), hi = stored_max(type);
    for (uint32_t bits = 0; bits <= 0xffff; ++bits) {
        const float x = float(Halide::float16_t::make_from_bits(uint16_t(bits)));
        if (std::isnan(x)) continue; // NaN either way
        const float divided = std::clamp(std::nearbyint(x / scale) + zero, lo, hi);
        const float multiplied = std::clamp(std::nearbyint(x * reciprocal) + zero, lo, hi);
        // A NaN from the product (an infinite reciprocal times 0) fails this too.
        if (!(divided == multiplied)) return std::nullopt;
    }
    return reciprocal;
}

namespace {

// ONNX's QuantizeLinear of x: round(x / scale) half to even, plus the zero point, saturated.
float onnx_quantized(float x, float scale, int32_t zero_point, dsl::ElemType type) {
    return std::clamp(std::nearbyint(x / scale) + float(zero_point), stored_min(type),
                      stored_max(type));
}

// What the kernel of Fp16QuantizeByBits computes, operation by operation in IEEE float32, as
// the integer stored.
int32_t quantized_by_bits(float x, const Fp16QuantizeByBits &form, int32_t zero_point,
                          dsl::ElemType type) {
    const float clamped = std::clamp(x, float(form.low), float(form.high));
    const float product = clamped * form.reciprocal;
    const float sum = product + kRoundingBias;
    uint32_t word;
    std::memcpy(&word, &sum, sizeof word);
    const uint8_t byte = uint8_t(uint8_t(word) + uint8_t(zero_point));
    return type == dsl::ElemType::U8 ? int32_t(byte) : int32_t(int8_t(byte));
}

// Every fp16 value but NaN, in increasing order; made once, as a per-axis quantize checks every
// index's scale against all of them.
const std::vector<float> &ordered_f16_values() {
    static const std::vector<float> values = [] {
        std::vector<float> v;
        v.reserve(65536);
        for (uint32_t bits = 0; bits <= 0xffff; ++bits) {
            const float x = float(Halide::float16_t::make_from_bits(uint16_t(bits)));
            if (!std::isnan(x)) v.push_back(x);
        }
        std::sort(v.begin(), v.end());
        return v;
    }();
    return values;
}

} // namespace

std::optional<Fp16QuantizeByBits> fp16_quantize_by_bits(float scale, int32_t zero_point,
                                                        dsl::ElemType type) {
    Fp16QuantizeByBits form;
    form.reciprocal = 1.0f / scale;
    // Quantizing is monotone in x: low is the largest fp16 value giving the type's minimum, high
    // the smallest giving its maximum (-inf and +inf give them; fp16 bits 0xfc00 and 0x7c00).
    const std::vector<float> &ordered = ordered_f16_values();
    float low = ordered.front(), high = ordered.back();
    for (float x : ordered)
        if (onnx_quantized(x, scale, zero_point, type) == stored_min(type)) low = x;
    for (auto x = ordered.rbegin(); x != ordered.rend(); ++x)
        if (onnx_quantized(*x, scale, zero_point, type) == stored_max(type)) high = *x;
    form.low = Halide::float16_t(low);
    form.high = Halide::float16_t(high);
    for (float x : ordered) {
        const float product = std::clamp(x, low, high) * form.reciprocal;
        if (!(std::fabs(product) < 4194304.0f)) return std::nullopt; // 2^22
        if (float(quantized_by_bits(x, form, zero_point, type)) !=
            onnx_quantized(x, scale, zero_point, type))
            return std::nullopt;
    }
    return form;
}

Expr dequantize(const Expr &stored, const InputInfo &in) {
    if (!in.quantized) return Halide::cast<float>(stored);
    // An 8-bit integer minus an 8-bit zero point fits 16 bits: the same values in half the
    // vectors of int32.
    return Halide::cast<float>(Halide::cast<int16_t>(stored) -
                               Halide::cast<int16_t>(in.zero_point)) *
           in.scale;
}

// The output quantization of an int8 sigmoid or softmax: [0, 1] over the type's 256 steps.
dsl::Quant probability_quant(const InputInfo &in, const std::optional<dsl::Quant> &given) {
    if (given) return *given;
    return dsl::Quant::per_tensor(1.0f / 256, in.type == dsl::ElemType::U8 ? 0 : -128);
}

// A probability output's optional per-tensor quantization: output_scale, output_zero_point.
std::vector<dsl::AttrSpec> probability_specs() {
    std::vector<dsl::AttrSpec> specs = output_quant_specs();
    specs.erase(specs.begin()); // the type is the input's
    return specs;
}

void set_probability_quant(dsl::Attrs &a, const std::optional<dsl::Quant> &q) {
    if (!q || q->empty()) return;
    a.set("output_scale", double(q->scale_at(0)));
    a.set("output_zero_point", int64_t(q->zero_point_at(0)));
}

std::optional<dsl::Quant> probability_quant_of(const dsl::Attrs &a) {
    if (!a.has("output_scale")) return std::nullopt;
    return dsl::Quant::per_tensor(
        float(a.get_float("output_scale")),
        a.has("output_zero_point") ? int32_t(a.get_int("output_zero_point")) : 0);
}

} // namespace vpuc::algorithms::detail
