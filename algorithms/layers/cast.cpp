// cast: a tensor's elements in another device element type, ONNX's Cast on the device. Floats
// round to nearest even; a float to an integer type truncates towards zero and saturates (ONNX
// leaves values out of range undefined); integers to a narrower integer type keep their low bits,
// as numpy does. A cast to the input's own type is a copy: a view of the input's bytes (the one
// DMA into its section when it is a graph output).
#include "common.h"

namespace vpuc::algorithms {

namespace {

const std::vector<dsl::ElemType> &device_types() {
    static const std::vector<dsl::ElemType> types = {dsl::ElemType::U8, dsl::ElemType::I8,
                                                     dsl::ElemType::F16, dsl::ElemType::F32,
                                                     dsl::ElemType::I32};
    return types;
}

dsl::ElemType type_named(const std::string &name) {
    for (dsl::ElemType t : device_types())
        if (name == dsl::to_string(t)) return t;
    throw dsl::LayerError("cast: no device element type '" + name + "'");
}

bool same_type(const dsl::Layer &layer) {
    return type_named(layer.attrs().get_string("to")) == layer.inputs().at(0).output().type;
}

dsl::Layer build_cast(const std::string &name, const std::vector<dsl::Layer> &inputs,
                      const dsl::Attrs &attrs) {
    const std::string what = "cast '" + name + "'";
    const dsl::Layer &input = inputs.at(0);
    const dsl::TensorDesc &from = input.output();
    const dsl::ElemType to = type_named(attrs.get_string("to"));
    if (!dsl::is_device_type(from.type))
        detail::invalid(what, "input '" + from.name + "' is " + dsl::to_string(from.type) +
                                  ", which the device does not have");
    if (to != from.type && !from.quant.empty())
        detail::invalid(what, "input '" + from.name +
                                  "' is quantized: its integers are not its values (dequantize "
                                  "it first)");
    const dsl::TensorDesc device = dsl::device_view(from);
    using namespace dsl::dims;
    const dsl::TensorDesc out = detail::output_desc(name, input, device.shape[C], device.shape[W],
                                                    device.shape[H], to, from.quant);
    const Halide::Type type = dsl::halide_type(to);
    const bool saturate = from.type == dsl::ElemType::F16 || from.type == dsl::ElemType::F32;
    dsl::Algorithm algorithm = [=](const std::vector<Halide::Func> &funcs) {
        const auto &v = dsl::act_vars();
        const Halide::Expr x = funcs.at(0)(v.c, v.x, v.y);
        Halide::Func f = detail::named_func(name);
        f(v.c, v.x, v.y) =
            saturate && !type.is_float() ? Halide::saturating_cast(type, x) : Halide::cast(type, x);
        return f;
    };
    return dsl::Layer::make("cast", out, {input}, algorithm);
}

} // namespace

void register_layer_cast(dsl::LayerRegistry &registry) {
    dsl::LayerDef def;
    def.op = "cast";
    def.doc = "elements in another device type, on the SHAVEs (a view when the type is the same)";
    def.inputs = {"input"};
    dsl::AttrSpec to{"to", dsl::AttrType::String, std::nullopt, "u8, i8, f16, f32 or i32", {}};
    to.check = [](const dsl::AttrValue &value) -> std::string {
        const std::string &name = std::get<std::string>(value);
        for (dsl::ElemType t : device_types())
            if (name == dsl::to_string(t)) return "";
        return "'" + name + "' is not a device element type (u8, i8, f16, f32, i32)";
    };
    def.attrs = {to};
    def.build = build_cast;
    def.view = [](const dsl::Layer &layer) -> std::optional<dsl::ViewDef> {
        if (!same_type(layer)) return std::nullopt;
        return dsl::ViewDef{dsl::ViewDef::Kind::Alias, {}};
    };
    // The int8 example copies its input (a view); the fp16 one converts to i32 on the SHAVEs.
    def.example = [](dsl::ElemType type) {
        dsl::Attrs a;
        a.set("to", std::string(dsl::is_quantized_int(type) ? dsl::to_string(type) : "i32"));
        return layer_registry().build("cast", "cast",
                                      {detail::example_input("in", 19, 11, 7, type)}, a);
    };
    registry.add(std::move(def));
}

} // namespace vpuc::algorithms
