// dequantize: an int8 tensor as fp16 real values, ONNX's DequantizeLinear of an activation with
// its per-tensor scale and zero point: (q - zero point) * scale in float32, stored as fp16; on
// the SHAVEs. The importer places it where a DequantizeLinear does not fold into the int8 layer
// after it (a float graph output, an op that has no int8 form).
#include "common.h"

namespace vpuc::algorithms {

namespace {

dsl::Layer build_dequantize(const std::string &name, const std::vector<dsl::Layer> &inputs,
                            const dsl::Attrs &) {
    const std::string what = "dequantize '" + name + "'";
    const dsl::Layer &input = inputs.at(0);
    const detail::InputInfo in = detail::input_info(what, input);
    if (!in.quantized || input.output().quant.empty())
        detail::invalid(what, "input '" + input.output().name + "' is " + dsl::to_string(in.type) +
                                  "; dequantize takes a quantized u8 or i8 tensor");
    dsl::Algorithm algorithm = [=](const std::vector<Halide::Func> &funcs) {
        const auto &v = dsl::act_vars();
        Halide::Func out = detail::named_func(name);
        out(v.c, v.x, v.y) =
            Halide::cast(Halide::Float(16), detail::dequantize(funcs.at(0)(v.c, v.x, v.y), in));
        return out;
    };
    return dsl::Layer::make(
        "dequantize", detail::output_desc(name, input, in.c, in.w, in.h, dsl::ElemType::F16, {}),
        {input}, algorithm);
}

} // namespace

void register_layer_dequantize(dsl::LayerRegistry &registry) {
    dsl::LayerDef def;
    def.op = "dequantize";
    def.doc = "u8/i8 to fp16: (q - zero point) * scale; on the SHAVEs";
    def.inputs = {"input"};
    def.build = build_dequantize;
    // The fp16 example dequantizes a u8 input; an int8 input has no int8 output.
    def.example = [](dsl::ElemType type) {
        if (dsl::is_quantized_int(type)) return dsl::Layer();
        return layer_registry().build("dequantize", "dequantize",
                                      {detail::example_input("in", 19, 11, 7, dsl::ElemType::U8)},
                                      {});
    };
    registry.add(std::move(def));
}

} // namespace vpuc::algorithms
