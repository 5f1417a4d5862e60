// dequantize: an int8 tensor as fp16 real values, ONNX's DequantizeLinear of an activation with
// its scale and zero point, per tensor or per index of an axis (the input's quantization):
// (q - zero point) * scale in float32, stored as fp16; on the SHAVEs. The importer places it where
// a DequantizeLinear does not fold into the int8 layer after it (a float graph output, an op that
// has no int8 form).
#include "common.h"

namespace vpuc::algorithms {

namespace {

dsl::Layer build_dequantize(const std::string &name, const std::vector<dsl::Layer> &inputs,
                            const dsl::Attrs &) {
    const std::string what = "dequantize '" + name + "'";
    const dsl::Layer &input = inputs.at(0);
    const detail::InputInfo in = detail::per_axis_input_info(what, input);
    const dsl::Quant &quant = input.output().quant;
    if (!in.quantized || quant.empty())
        detail::invalid(what, "input '" + input.output().name + "' is " + dsl::to_string(in.type) +
                                  "; dequantize takes a quantized u8 or i8 tensor");
    // Per axis: the scales and zero points as tables indexed along the axis's device dimension.
    const bool per_axis = quant.per_channel();
    const int dim =
        per_axis
            ? detail::halide_dim(detail::device_axis_of(what, input.output(), quant.axis.index()))
            : 0;
    Halide::Buffer<float> scales(int(quant.scale.size()));
    Halide::Buffer<int32_t> zero_points(int(quant.scale.size()));
    for (int i = 0; i < scales.width(); ++i) {
        scales(i) = quant.scale[size_t(i)];
        zero_points(i) = quant.zero_point[size_t(i)];
    }
    dsl::Algorithm algorithm = [=](const std::vector<Halide::Func> &funcs) {
        const auto &v = dsl::act_vars();
        const Halide::Expr q = funcs.at(0)(v.c, v.x, v.y);
        Halide::Expr real = detail::dequantize(q, in);
        if (per_axis) {
            const Halide::Var at[] = {v.c, v.x, v.y};
            real = Halide::cast<float>(Halide::cast<int32_t>(q) - zero_points(at[dim])) *
                   scales(at[dim]);
        }
        Halide::Func out = detail::named_func(name);
        out(v.c, v.x, v.y) = Halide::cast(Halide::Float(16), real);
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
    def.doc = "u8/i8 to fp16: (q - zero point) * scale, per tensor or per index of an axis; on "
              "the SHAVEs";
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
