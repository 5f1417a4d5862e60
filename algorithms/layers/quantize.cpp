// quantize: a float tensor stored as int8, ONNX's QuantizeLinear with a per-tensor scale and
// zero point: round(x / scale) half to even, plus the zero point, saturated to the type; in
// float32 on the SHAVEs. The importer places it where a QuantizeLinear cannot fold into the
// layer before it (a graph input, an fp16 op between a dequantize and a quantize).
#include "common.h"

namespace vpuc::algorithms {

namespace {

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
    const int32_t zero_point = quant.zero_point_at(0);
    if (type == dsl::ElemType::U8 ? zero_point < 0 || zero_point > 255
                                  : zero_point < -128 || zero_point > 127)
        detail::invalid(what, "zero point " + std::to_string(zero_point) + " is outside " +
                                  dsl::to_string(type));
    dsl::Algorithm algorithm = [=](const std::vector<Halide::Func> &funcs) {
        const auto &v = dsl::act_vars();
        Halide::Func out = detail::named_func(name);
        out(v.c, v.x, v.y) =
            detail::quantize(Halide::cast<float>(funcs.at(0)(v.c, v.x, v.y)), quant, type);
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
    def.doc = "float to u8/i8: round(x / scale) half to even + zero point, saturated; on the "
              "SHAVEs";
    def.inputs = {"input"};
    def.attrs = detail::output_quant_specs();
    def.attrs.at(0).optional = false; // output_type
    def.attrs.at(1).optional = false; // output_scale
    def.attrs.at(2).optional = false;
    def.attrs.at(2).default_value = int64_t(0); // output_zero_point
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
