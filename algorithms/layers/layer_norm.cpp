// layer_norm: ONNX's LayerNormalization over the last axis, (x - mean) * inv_std_dev * scale +
// bias with inv_std_dev = 1 / sqrt(variance + epsilon), the statistics in float32 on the SHAVEs
// (transformers' norms). The scale and bias are constants, one value per element of the axis;
// the kernel carries them. layer_norm_stats: the mean and inv_std_dev themselves (ONNX's Mean
// and InvStdDev outputs), two outputs of one kernel.
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

// What layer_norm and layer_norm_stats share: the input checked, the device dimension of the
// normalized axis and its extent.
struct Normalized {
    detail::InputInfo in;
    int dim = 0; // of Halide's (c, x, y)
    int64_t extent = 1;
};

Normalized normalized(const std::string &op, const std::string &name, const dsl::Layer &input,
                      const dsl::Attrs &attrs) {
    const std::string what = op + " '" + name + "'";
    Normalized n;
    n.in = detail::input_info(what, input);
    if (n.in.quantized)
        detail::invalid(what, "input '" + input.output().name + "' is " +
                                  dsl::to_string(n.in.type) + "; " + op + " takes f16 or f32");
    const int64_t rank = input.output().logical_shape().rank();
    const int64_t axis = attrs.get_int("axis");
    if (axis != -1 && axis != rank - 1)
        detail::invalid(what, "axis " + std::to_string(axis) +
                                  " is not the last axis; only the last axis is normalized");
    n.dim = detail::halide_dim(detail::device_axis_of(what, input.output(), -1));
    n.extent = n.dim == 0 ? n.in.c : n.dim == 1 ? n.in.w : n.in.h;
    return n;
}

// The statistics of each row along the normalized dimension, in float32 as ONNX's reference
// computes them: the mean, the elements minus it, and 1 / sqrt(variance + epsilon). The mean
// and inv_std_dev are Funcs of all three dimensions that do not depend on the normalized one.
struct RowStatistics {
    Halide::Func mean, centred, inv_std_dev;
};

RowStatistics row_statistics(const std::string &name, const Halide::Func &input,
                             const Normalized &n, float epsilon) {
    const auto &v = dsl::act_vars();
    const std::vector<Halide::Var> all = {v.c, v.x, v.y};
    auto along = [&](const Halide::Expr &at) {
        std::vector<Halide::Expr> args(all.begin(), all.end());
        args[size_t(n.dim)] = at;
        return args;
    };
    // The row's statistics are computed once, at position 0 of the normalized dimension.
    const std::vector<Halide::Expr> row = along(0);
    Halide::RDom r(0, int(n.extent), detail::rdom_name(name + "_r"));
    RowStatistics s;
    Halide::Func sum = detail::named_func(name + "_sum");
    sum(all) = 0.0f;
    sum(all) += Halide::cast<float>(input(along(r.x)));
    s.mean = detail::named_func(name + "_mean");
    s.mean(all) = sum(row) / float(n.extent);
    s.centred = detail::named_func(name + "_centred");
    s.centred(all) = Halide::cast<float>(input(all)) - s.mean(all);
    Halide::Func squares = detail::named_func(name + "_squares");
    squares(all) = 0.0f;
    squares(all) += Halide::pow(s.centred(along(r.x)), 2);
    s.inv_std_dev = detail::named_func(name + "_inv_std_dev");
    s.inv_std_dev(all) = 1.0f / Halide::sqrt(squares(row) / float(n.extent) + epsilon);
    return s;
}

dsl::Layer build_layer_norm(const std::string &name, const std::vector<dsl::Layer> &inputs,
                            const dsl::Attrs &attrs) {
    const std::string what = "layer_norm '" + name + "'";
    const dsl::Layer &input = inputs.at(0);
    const Normalized n = normalized("layer_norm", name, input, attrs);
    const float epsilon = float(attrs.get_float("epsilon"));
    const auto scale = axis_values(what, attrs, "scale", n.extent);
    const auto bias = axis_values(what, attrs, "bias", n.extent);
    dsl::Algorithm algorithm = [=](const std::vector<Halide::Func> &funcs) {
        const auto &v = dsl::act_vars();
        const RowStatistics s = row_statistics(name, funcs.at(0), n, epsilon);
        const Halide::Expr k = std::vector<Halide::Expr>{v.c, v.x, v.y}[size_t(n.dim)];
        Halide::Expr y = s.centred(v.c, v.x, v.y) * s.inv_std_dev(v.c, v.x, v.y);
        if (scale) y = y * (*scale)(k);
        if (bias) y = y + (*bias)(k);
        Halide::Func out = detail::named_func(name);
        out(v.c, v.x, v.y) = Halide::cast(n.in.halide_type, y);
        return out;
    };
    return dsl::Layer::make("layer_norm",
                            detail::output_desc(name, input, n.in.c, n.in.w, n.in.h, n.in.type, {}),
                            {input}, algorithm);
}

// ONNX's Mean and InvStdDev outputs of LayerNormalization: the input's shape with the last
// axis 1, in the input's type.
dsl::Layer build_layer_norm_stats(const std::string &name, const std::vector<dsl::Layer> &inputs,
                                  const dsl::Attrs &attrs) {
    const dsl::Layer &input = inputs.at(0);
    const Normalized n = normalized("layer_norm_stats", name, input, attrs);
    const float epsilon = float(attrs.get_float("epsilon"));
    dsl::Algorithm algorithm = [=](const std::vector<Halide::Func> &funcs) {
        const auto &v = dsl::act_vars();
        const RowStatistics s = row_statistics(name, funcs.at(0), n, epsilon);
        Halide::Func out = detail::named_func(name);
        out(v.c, v.x, v.y) =
            Halide::Tuple(Halide::cast(n.in.halide_type, s.mean(v.c, v.x, v.y)),
                          Halide::cast(n.in.halide_type, s.inv_std_dev(v.c, v.x, v.y)));
        return out;
    };
    std::vector<int64_t> extent = {n.in.c, n.in.w, n.in.h}; // Halide's (c, x, y)
    extent[size_t(n.dim)] = 1;
    const dsl::TensorDesc mean =
        detail::output_desc(name, input, extent[0], extent[1], extent[2], n.in.type, {});
    return dsl::Layer::make("layer_norm_stats", {mean, mean}, {input}, algorithm);
}

dsl::AttrSpec axis_spec() {
    return {"axis", dsl::AttrType::Int, int64_t(-1), "the last axis (-1 or rank - 1)", {}};
}

dsl::AttrSpec epsilon_spec() {
    return {"epsilon", dsl::AttrType::Float, 1e-5, "added to the variance",
            [](const dsl::AttrValue &a) -> std::string {
                const double e = std::get<double>(a);
                return e >= 0 && e < 1e30 ? "" : "must be >= 0 and finite";
            }};
}

// Every output element reads the whole axis.
std::vector<dsl::Dim> normalized_axis(const dsl::Layer &layer) {
    return {detail::device_axis_of(layer.op() + " '" + layer.name() + "'", layer.output(), -1)};
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
    def.attrs = {axis_spec(), epsilon_spec(), scale, bias};
    def.build = build_layer_norm;
    def.unsplittable_dims = normalized_axis;
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

    dsl::LayerDef stats;
    stats.op = "layer_norm_stats";
    stats.doc = "layer_norm's mean and 1 / sqrt(variance + epsilon) over the last axis, the "
                "axis kept with extent 1 (two outputs, SHAVE)";
    stats.inputs = {"input"};
    stats.attrs = {axis_spec(), epsilon_spec()};
    stats.build = build_layer_norm_stats;
    stats.unsplittable_dims = normalized_axis;
    // The statistics of rows of 13 with a large epsilon, as ONNX's tests have them.
    stats.example = [](dsl::ElemType type) {
        if (dsl::is_quantized_int(type)) return dsl::Layer();
        return layer_registry().build("layer_norm_stats", "layer_norm_stats",
                                      {detail::example_input("in", 19, 13, 7, type)},
                                      dsl::Attrs().set("epsilon", 0.1));
    };
    registry.add(std::move(stats));
}

} // namespace vpuc::algorithms
