// quantize: a float tensor stored as int8, ONNX's QuantizeLinear: round(x / scale) half to even,
// plus the zero point, saturated to the type; in float32 on the SHAVEs (an fp16 input times
// 1 / scale where every fp16 value rounds the same: common.h, exact_f16_reciprocal, and then
// rounded and saturated by bit arithmetic where that too gives every fp16 value's integer:
// fp16_quantize_by_bits). One scale
// and zero point for the tensor, or one per index of a logical axis (`axis`, `output_scales`,
// `output_zero_points`: the output is then quantized per axis). The importer places it where a
// QuantizeLinear cannot fold into the layer before it (a graph input, an fp16 op between a
// dequantize and a quantize).
#include "common.h"

namespace vpuc::algorithms {

namespace {

void check_zero_point(const std::string &what, int32_t zero_point, dsl::ElemType type) {
    if (type == dsl::ElemType::U8 ? zero_point < 0 || zero_point > 255
                                  : zero_point < -128 || zero_point > 127)
        detail::invalid(what, "zero point " + std::to_string(zero_point) + " is outside " +
                                  dsl::to_string(type));
}

// The per-axis quantization the attributes give, along logical axis `axis` of `input`.
dsl::Quant per_axis_quant(const std::string &what, const dsl::Layer &input, const dsl::Attrs &attrs,
                          dsl::ElemType type) {
    if (attrs.has("output_scale"))
        detail::invalid(what, "give output_scale or output_scales, not both");
    const std::vector<float> scales = detail::tensor_values<float>(attrs, "output_scales");
    const std::vector<int32_t> zero_points =
        attrs.has("output_zero_points")
            ? detail::tensor_values<int32_t>(attrs, "output_zero_points")
            : std::vector<int32_t>(scales.size(), 0);
    const dsl::Shape &shape = input.output().logical_shape();
    const int64_t rank = shape.rank(), axis = attrs.get_int("axis");
    if (axis < -rank || axis >= rank)
        detail::invalid(what, "axis " + std::to_string(axis) + " is outside the rank of '" +
                                  input.output().name + "' (" + dsl::to_string(shape) + ")");
    const int logical = int(axis < 0 ? axis + rank : axis);
    const int64_t extent = shape[dsl::Dim(logical)];
    if (int64_t(scales.size()) != extent || int64_t(zero_points.size()) != extent)
        detail::invalid(what, "output_scales and output_zero_points must hold one value per "
                              "index of axis " +
                                  std::to_string(logical) + " (" + std::to_string(extent) + ")");
    for (float s : scales)
        if (!(s > 0) || !std::isfinite(s))
            detail::invalid(what, "output_scales must be positive and finite");
    for (int32_t z : zero_points) check_zero_point(what, z, type);
    return dsl::Quant::per_channel(scales, zero_points, dsl::Dim(logical));
}

dsl::Layer build_quantize(const std::string &name, const std::vector<dsl::Layer> &inputs,
                          const dsl::Attrs &attrs) {
    const std::string what = "quantize '" + name + "'";
    const dsl::Layer &input = inputs.at(0);
    const detail::InputInfo in = detail::input_info(what, input);
    if (in.quantized)
        detail::invalid(what, "input '" + input.output().name + "' is " + dsl::to_string(in.type) +
                                  "; quantize takes f16 or f32");
    dsl::ElemType type = dsl::ElemType::U8;
    dsl::Quant quant;
    detail::output_quant_of(attrs, type, quant);
    if (attrs.has("output_scales"))
        quant = per_axis_quant(what, input, attrs, type);
    else if (quant.empty())
        detail::invalid(what, "give output_scale (per tensor) or output_scales (per axis)");
    else
        check_zero_point(what, quant.zero_point_at(0), type);
    // Per axis (of an extent above 1): the scales and zero points as tables indexed along the
    // axis's device dimension.
    const bool per_axis = quant.per_channel();
    const int dim =
        per_axis
            ? detail::halide_dim(detail::device_axis_of(what, input.output(), quant.axis.index()))
            : 0;
    const int64_t count = int64_t(quant.scale.size());
    Halide::Buffer<float> scales(static_cast<int>(count)), zero_points(static_cast<int>(count));
    for (int i = 0; i < scales.width(); ++i) {
        scales(i) = quant.scale[size_t(i)];
        zero_points(i) = float(quant.zero_point[size_t(i)]);
    }
    // An fp16 input is multiplied by 1 / scale where that rounds every fp16 value as the
    // division does: the factors then replace the scales. Where every index also allows it,
    // the rounding and saturation are the bit form's (common.h, Fp16QuantizeByBits).
    const bool f16 = in.type == dsl::ElemType::F16;
    bool by_bits = f16, multiply = f16;
    Halide::Buffer<float> factors(static_cast<int>(count));
    Halide::Buffer<float> lows(static_cast<int>(count)), highs(static_cast<int>(count));
    // Integers: Halide simplifies a float's cast through int32 to u8 into one conversion, which
    // is undefined for a negative zero point (the device gave 0).
    Halide::Buffer<int32_t> zero_point_words(static_cast<int>(count));
    for (int i = 0; i < zero_point_words.width(); ++i)
        zero_point_words(i) = quant.zero_point[size_t(i)];
    for (int i = 0; by_bits && i < factors.width(); ++i) {
        const std::optional<detail::Fp16QuantizeByBits> form = detail::fp16_quantize_by_bits(
            quant.scale[size_t(i)], quant.zero_point[size_t(i)], type);
        if (!form) {
            by_bits = false;
            break;
        }
        factors(i) = form->reciprocal;
        lows(i) = float(form->low);
        highs(i) = float(form->high);
    }
    for (int i = 0; !by_bits && multiply && i < factors.width(); ++i) {
        const std::optional<float> reciprocal =
            detail::exact_f16_reciprocal(quant.scale[size_t(i)], quant.zero_point[size_t(i)], type);
        multiply = reciprocal.has_value();
        factors(i) = reciprocal.value_or(0.0f);
    }
    dsl::Algorithm algorithm = [=](const std::vector<Halide::Func> &funcs) {
        const auto &v = dsl::act_vars();
        const Halide::Var at[] = {v.c, v.x, v.y};
        // Per tensor, the constants are immediates of the kernel.
        const auto value = [&](const auto &table) {
            return per_axis ? Halide::Expr(table(at[dim])) : Halide::Expr(table(0));
        };
        Halide::Func out = detail::named_func(name);
        if (by_bits) {
            const Halide::Expr x = Halide::clamp(funcs.at(0)(v.c, v.x, v.y),
                                                 Halide::cast<Halide::float16_t>(value(lows)),
                                                 Halide::cast<Halide::float16_t>(value(highs)));
            const Halide::Expr word = Halide::reinterpret(
                Halide::Int(32), Halide::cast<float>(x) * value(factors) + detail::kRoundingBias);
            // The integer modulo 256 plus the zero point, wrapping in 8 bits: in range by the
            // clamp.
            const Halide::Expr byte =
                Halide::cast<uint8_t>(word) + Halide::cast<uint8_t>(value(zero_point_words));
            out(v.c, v.x, v.y) =
                type == dsl::ElemType::U8 ? byte : Halide::reinterpret(Halide::Int(8), byte);
            return out;
        }
        const Halide::Expr x = Halide::cast<float>(funcs.at(0)(v.c, v.x, v.y));
        const Halide::Expr scaled = multiply ? x * value(factors) : x / value(scales);
        out(v.c, v.x, v.y) = detail::saturate(Halide::round(scaled) + value(zero_points), type);
        return out;
    };
    return dsl::Layer::make("quantize",
                            detail::output_desc(name, input, in.c, in.w, in.h, type, quant),
                            {input}, algorithm);
}

} // namespace

void register_layer_quantize(dsl::LayerRegistry &registry) {
    dsl::LayerDef def;
    def.op = "quantize";
    def.doc = "float to u8/i8: round(x / scale) half to even + zero point, saturated, per "
              "tensor or per index of an axis; on the SHAVEs";
    def.inputs = {"input"};
    def.attrs = detail::output_quant_specs();
    def.attrs.at(0).optional = false; // output_type
    def.attrs.at(2).optional = false;
    def.attrs.at(2).default_value = int64_t(0); // output_zero_point
    def.attrs.push_back({"axis",
                         dsl::AttrType::Int,
                         int64_t(1),
                         "per axis: the logical axis of output_scales (negative counts from "
                         "the end); not the batch",
                         {}});
    dsl::AttrSpec scales{"output_scales",
                         dsl::AttrType::Tensor,
                         std::nullopt,
                         "per axis: f32, one scale per index of axis (instead of output_scale)",
                         {}};
    scales.optional = true;
    dsl::AttrSpec zero_points{"output_zero_points",
                              dsl::AttrType::Tensor,
                              std::nullopt,
                              "per axis: i32, one zero point per index of axis (default 0)",
                              {}};
    zero_points.optional = true;
    def.attrs.push_back(scales);
    def.attrs.push_back(zero_points);
    def.build = build_quantize;
    // The int8 example quantizes an fp16 input; there is no fp16 output.
    def.example = [](dsl::ElemType type) {
        if (!dsl::is_quantized_int(type)) return dsl::Layer();
        return layer_registry().build(
            "quantize", "quantize", {detail::example_input("in", 19, 11, 7, dsl::ElemType::F16)},
            dsl::Attrs()
                .set("output_type", std::string(dsl::to_string(type)))
                .set("output_scale", 0.01)
                .set("output_zero_point", int64_t(type == dsl::ElemType::U8 ? 128 : 3)));
    };
    registry.add(std::move(def));
}

} // namespace vpuc::algorithms
