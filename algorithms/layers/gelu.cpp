// gelu: x * 0.5 * (1 + erf(x / sqrt(2))), or its tanh approximation x * 0.5 * (1 + tanh(
// sqrt(2 / pi) * (x + 0.044715 x^3))), ONNX's Gelu (opset 20) with `approximate` none or tanh,
// in float32 on the SHAVEs. int8 keeps the input's quantization: gelu(x) lies between
// min(x, 0) - 0.17 and max(x, 0).
#include <cmath>

#include "common.h"

namespace vpuc::algorithms {

namespace {

dsl::Layer build_gelu(const std::string &name, const std::vector<dsl::Layer> &inputs,
                      const dsl::Attrs &attrs) {
    const dsl::Layer &input = inputs.at(0);
    const detail::InputInfo in = detail::input_info("gelu '" + name + "'", input);
    const bool tanh_form = attrs.get_string("approximate") == "tanh";
    const dsl::Quant q = input.output().quant;
    dsl::Algorithm algorithm = [=](const std::vector<Halide::Func> &funcs) {
        const auto &v = dsl::act_vars();
        const Halide::Expr x = detail::dequantize(funcs.at(0)(v.c, v.x, v.y), in);
        const Halide::Expr inner =
            tanh_form ? Halide::tanh(float(std::sqrt(2.0 / M_PI)) * (x + 0.044715f * x * x * x))
                      : Halide::erf(x * float(1.0 / std::sqrt(2.0)));
        const Halide::Expr y = x * 0.5f * (1.0f + inner);
        Halide::Func out = detail::named_func(name);
        out(v.c, v.x, v.y) =
            in.quantized ? detail::quantize(y, q, in.type) : Halide::cast(in.halide_type, y);
        return out;
    };
    return dsl::Layer::make("gelu", detail::output_desc(name, input, in.c, in.w, in.h, in.type, q),
                            {input}, algorithm);
}

} // namespace

void register_layer_gelu(dsl::LayerRegistry &registry) {
    dsl::LayerDef def;
    def.op = "gelu";
    def.doc = "x * P(X <= x) for a standard normal X, erf or tanh form, in float32 (SHAVE)";
    def.inputs = {"input"};
    def.attrs = {{"approximate", dsl::AttrType::String, std::string("none"),
                  "none: the erf form; tanh: the tanh approximation",
                  [](const dsl::AttrValue &a) -> std::string {
                      const std::string &form = std::get<std::string>(a);
                      return form == "none" || form == "tanh" ? "" : "must be 'none' or 'tanh'";
                  }}};
    def.build = build_gelu;
    def.example = [](dsl::ElemType type) {
        return layer_registry().build("gelu", "gelu",
                                      {detail::example_input("in", 19, 11, 7, type)}, {});
    };
    registry.add(std::move(def));
}

} // namespace vpuc::algorithms
