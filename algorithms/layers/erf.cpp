// erf: the error function, ONNX's Erf, in float32 on the SHAVEs. The decomposed GELU of models
// exported at opset 17 and below (Div, Erf, Add, Mul, Mul) imports node by node through it.
#include "common.h"

namespace vpuc::algorithms {

namespace {

dsl::Layer build_erf(const std::string &name, const std::vector<dsl::Layer> &inputs,
                     const dsl::Attrs &) {
    const std::string what = "erf '" + name + "'";
    const dsl::Layer &input = inputs.at(0);
    const detail::InputInfo in = detail::input_info(what, input);
    if (in.quantized)
        detail::invalid(what, "input '" + input.output().name + "' is " + dsl::to_string(in.type) +
                                  "; erf takes f16 or f32");
    dsl::Algorithm algorithm = [=](const std::vector<Halide::Func> &funcs) {
        const auto &v = dsl::act_vars();
        Halide::Func out = detail::named_func(name);
        out(v.c, v.x, v.y) = Halide::cast(
            in.halide_type, Halide::erf(Halide::cast<float>(funcs.at(0)(v.c, v.x, v.y))));
        return out;
    };
    return dsl::Layer::make("erf", detail::output_desc(name, input, in.c, in.w, in.h, in.type, {}),
                            {input}, algorithm);
}

} // namespace

void register_layer_erf(dsl::LayerRegistry &registry) {
    dsl::LayerDef def;
    def.op = "erf";
    def.doc = "the error function in float32, on the SHAVEs";
    def.inputs = {"input"};
    def.build = build_erf;
    def.example = [](dsl::ElemType type) {
        if (dsl::is_quantized_int(type)) return dsl::Layer();
        return layer_registry().build("erf", "erf", {detail::example_input("in", 19, 11, 7, type)},
                                      {});
    };
    registry.add(std::move(def));
}

} // namespace vpuc::algorithms
