// layer_norm: ONNX's LayerNormalization over the last axis, (x - mean) / sqrt(variance +
// epsilon) * scale + bias, the statistics in float32 on the SHAVEs (transformers' norms). The
// scale and bias are constants, one value per element of the axis; the kernel carries them.
#include "common.h"

namespace vpuc::algorithms {

namespace {

// A per-element constant of the axis: attribute `name`, `extent` float32 values, or nullopt
// when the attribute is absent.
std::optional<Halide::Buffer<float>> axis_values(const std::string &what, const dsl::Attrs &attrs,
                                                 const std::string &name, int64_t extent) {
    if (!attrs.has(name)) return std::nullopt;
    Halide::Buffer<float> b = detail::tensor_as<float>(attrs, name);
    if (b.number_of_elements() != size_t(extent))
        detail::invalid(what, "attribute '" + name + "' holds " +
                                  std::to_string(b.number_of_elements()) + " values; the last " +
                                  "axis has " + std::to_string(extent));
    // A dense 1-D copy, indexed by the position along the axis.
    Halide::Buffer<float> values{int(extent)};
    std::copy(b.data(), b.data() + extent, values.data());
    return values;
}

dsl::Layer build_layer_norm(const std::string &name, const std::vector<dsl::Layer> &inputs,
                            const dsl::Attrs &attrs) {
    const std::string what = "layer_norm '" + name + "'";
    const dsl::Layer &input = inputs.at(0);
    const detail::InputInfo in = detail::input_info(what, input);
    if (in.quantized)
        detail::invalid(what, "input '" + input.output().name + "' is " + dsl::to_string(in.type) +
                                  "; layer_norm takes f16 or f32");
    const int64_t rank = input.output().logical_shape().rank();
    const int64_t axis = attrs.get_int("axis");
    if (axis != -1 && axis != rank - 1)
        detail::invalid(what, "axis " + std::to_string(axis) +
                                  " is not the last axis; only the last axis is normalized");
    const int dim = detail::halide_dim(detail::device_axis_of(what, input.output(), -1));
    const int64_t extent = dim == 0 ? in.c : dim == 1 ? in.w : in.h;
    const float epsilon = float(attrs.get_float("epsilon"));
    const auto scale = axis_values(what, attrs, "scale", extent);
    const auto bias = axis_values(what, attrs, "bias", extent);
    dsl::Algorithm algorithm = [=](const std::vector<Halide::Func> &funcs) {
        const auto &v = dsl::act_vars();
        const std::vector<Halide::Var> all = {v.c, v.x, v.y};
        std::vector<Halide::Var> others;
        for (int d = 0; d < 3; ++d)
            if (d != dim) others.push_back(all[size_t(d)]);
        auto along = [&](const Halide::Expr &at) {
            std::vector<Halide::Expr> args(all.begin(), all.end());
            args[size_t(dim)] = at;
            return args;
        };
        auto value = [&](const std::vector<Halide::Expr> &args) {
            return Halide::cast<float>(funcs.at(0)(args));
        };
        Halide::RDom r(0, int(extent), Halide::Internal::unique_name(name + "_r"));
        Halide::Func mean = detail::named_func(name + "_mean");
        mean(others) = 0.0f;
        mean(others) += value(along(r.x));
        Halide::Func centred = detail::named_func(name + "_centred");
        centred(all) = value(along(all[size_t(dim)])) - mean(others) / float(extent);
        Halide::Func variance = detail::named_func(name + "_variance");
        variance(others) = 0.0f;
        variance(others) += Halide::pow(centred(along(r.x)), 2);
        const Halide::Expr k = all[size_t(dim)];
        Halide::Expr y = centred(all) / Halide::sqrt(variance(others) / float(extent) + epsilon);
        if (scale) y = y * (*scale)(k);
        if (bias) y = y + (*bias)(k);
        Halide::Func out = detail::named_func(name);
        out(v.c, v.x, v.y) = Halide::cast(in.halide_type, y);
        return out;
    };
    return dsl::Layer::make("layer_norm",
                            detail::output_desc(name, input, in.c, in.w, in.h, in.type, {}),
                            {input}, algorithm);
}

} // namespace

void register_layer_layer_norm(dsl::LayerRegistry &registry) {
    dsl::LayerDef def;
    def.op = "layer_norm";
    def.doc = "layer normalization over the last axis, in float32, on the SHAVEs";
    def.inputs = {"input"};
    dsl::AttrSpec scale{"scale",
                        dsl::AttrType::Tensor,
                        std::nullopt,
                        "f32 per element of the last axis; absent: 1",
                        {}};
    scale.optional = true;
    dsl::AttrSpec bias{"bias",
                       dsl::AttrType::Tensor,
                       std::nullopt,
                       "f32 per element of the last axis; absent: 0",
                       {}};
    bias.optional = true;
    def.attrs = {{"axis", dsl::AttrType::Int, int64_t(-1), "the last axis (-1 or rank - 1)", {}},
                 {"epsilon", dsl::AttrType::Float, 1e-5, "added to the variance",
                  [](const dsl::AttrValue &a) -> std::string {
                      const double e = std::get<double>(a);
                      return e >= 0 && e < 1e30 ? "" : "must be >= 0 and finite";
                  }},
                 scale,
                 bias};
    def.build = build_layer_norm;
    // Every output element reads the whole axis.
    def.unsplittable_dims = [](const dsl::Layer &layer) {
        return std::vector<dsl::Dim>{
            detail::device_axis_of("layer_norm '" + layer.name() + "'", layer.output(), -1)};
    };
    def.example = [](dsl::ElemType type) {
        if (dsl::is_quantized_int(type)) return dsl::Layer();
        const int width = 13;
        std::vector<float> scale, bias;
        for (int i = 0; i < width; ++i) {
            scale.push_back(0.5f + 0.1f * float(i));
            bias.push_back(0.25f * float(i % 5) - 0.5f);
        }
        dsl::Attrs a;
        a.set("scale", detail::vector_tensor(scale));
        a.set("bias", detail::vector_tensor(bias));
        return layer_registry().build("layer_norm", "layer_norm",
                                      {detail::example_input("in", 19, width, 7, type)}, a);
    };
    registry.add(std::move(def));
}

} // namespace vpuc::algorithms
