// hard_sigmoid: max(0, min(1, alpha * x + beta)), ONNX's HardSigmoid, computed in float32 on the
// SHAVEs (MobileNet-V3's gates). A layer in one file: the algorithm and its registry entry
// (docs/adding-a-layer.md).
#include "common.h"

namespace vpuc::algorithms {

namespace {

dsl::Layer build_hard_sigmoid(const std::string &name, const std::vector<dsl::Layer> &inputs,
                              const dsl::Attrs &attrs) {
    const dsl::Layer &input = inputs.at(0);
    const detail::InputInfo in = detail::input_info("hard_sigmoid '" + name + "'", input);
    const float alpha = float(attrs.get_float("alpha")), beta = float(attrs.get_float("beta"));
    const dsl::Quant q = in.quantized
                             ? detail::probability_quant(in, detail::probability_quant_of(attrs))
                             : dsl::Quant{};
    dsl::Algorithm algorithm = [=](const std::vector<Halide::Func> &funcs) {
        const auto &v = dsl::act_vars();
        Halide::Expr x = detail::dequantize(funcs.at(0)(v.c, v.x, v.y), in);
        Halide::Expr y = Halide::clamp(alpha * x + beta, 0.0f, 1.0f);
        Halide::Func out = detail::named_func(name);
        out(v.c, v.x, v.y) =
            in.quantized ? detail::quantize(y, q, in.type) : Halide::cast(in.halide_type, y);
        return out;
    };
    return dsl::Layer::make("hard_sigmoid",
                            detail::output_desc(name, input, in.c, in.w, in.h, in.type, q), {input},
                            algorithm);
}

} // namespace

void register_layer_hard_sigmoid(dsl::LayerRegistry &registry) {
    dsl::LayerDef def;
    def.op = "hard_sigmoid";
    def.doc = "max(0, min(1, alpha * x + beta)) in float32, on the SHAVEs";
    def.inputs = {"input"};
    def.attrs = {{"alpha", dsl::AttrType::Float, 0.2, "slope", {}},
                 {"beta", dsl::AttrType::Float, 0.5, "offset", {}}};
    for (auto &spec : detail::probability_specs()) def.attrs.push_back(spec);
    def.build = build_hard_sigmoid;
    def.example = [](dsl::ElemType type) {
        return layer_registry().build("hard_sigmoid", "hard_sigmoid",
                                      {detail::example_input("in", 19, 11, 7, type)}, {});
    };
    registry.add(std::move(def));
}

} // namespace vpuc::algorithms
