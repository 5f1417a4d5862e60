// lp_normalize: x divided by its Lp norm along one axis, ONNX's LpNormalization (p 1 or 2) and
// OpenVINO's NormalizeL2 over one axis: y = x / max(norm, epsilon), norm = sqrt(sum of x^2) for
// p 2 or sum of |x| for p 1, in float32 on the SHAVEs, rounded once. With epsilon 0 (ONNX's) a
// vector of zeros gives NaN, as 0 / 0. Each output reads the whole axis, so a task covers it.
// Floats only: an int8 input would need an output quantization of its own, which ONNX's op does
// not give.
#include "common.h"

namespace vpuc::algorithms {

namespace {

dsl::Layer build_lp_normalize(const std::string &name, const std::vector<dsl::Layer> &inputs,
                              const dsl::Attrs &attrs) {
    const std::string what = "lp_normalize '" + name + "'";
    const dsl::Layer &input = inputs.at(0);
    const detail::InputInfo in = detail::input_info(what, input);
    if (in.quantized)
        detail::invalid(what, "input '" + input.output().name + "' is " +
                                  input.output().describe() + "; lp_normalize takes f16 or f32");
    const int dim =
        detail::halide_dim(detail::device_axis_of(what, input.output(), attrs.get_int("axis")));
    const int64_t extent = dim == 0 ? in.c : dim == 1 ? in.w : in.h;
    const bool l2 = attrs.get_int("p") == 2;
    const float epsilon = float(attrs.get_float("epsilon"));
    dsl::Algorithm algorithm = [=](const std::vector<Halide::Func> &funcs) {
        const auto &v = dsl::act_vars();
        const std::vector<Halide::Var> all = {v.c, v.x, v.y};
        std::vector<Halide::Var> others; // the norm's dimensions: all but the axis
        for (int d = 0; d < 3; ++d)
            if (d != dim) others.push_back(all[size_t(d)]);
        Halide::RDom r(0, int(extent), detail::rdom_name(name + "_r"));
        std::vector<Halide::Expr> along(all.begin(), all.end());
        along[size_t(dim)] = r.x;
        const Halide::Expr element = Halide::cast<float>(funcs.at(0)(along));
        Halide::Func sum = detail::named_func(name + "_sum");
        sum(others) = 0.0f;
        sum(others) += l2 ? element * element : Halide::abs(element);
        const Halide::Expr norm = l2 ? Halide::sqrt(sum(others)) : sum(others);
        Halide::Func out = detail::named_func(name);
        // A NaN norm (a NaN in the vector) stays NaN past the epsilon.
        const Halide::Expr divisor =
            epsilon > 0 ? Halide::select(Halide::is_nan(norm), norm, Halide::max(norm, epsilon))
                        : norm;
        out(all) =
            detail::stored_as(Halide::cast<float>(funcs.at(0)(all)) / divisor, in.halide_type);
        return out;
    };
    return dsl::Layer::make("lp_normalize",
                            detail::output_desc(name, input, in.c, in.w, in.h, in.type, {}),
                            {input}, algorithm);
}

} // namespace

void register_layer_lp_normalize(dsl::LayerRegistry &registry) {
    dsl::LayerDef def;
    def.op = "lp_normalize";
    def.doc = "x / max(Lp norm along an axis, epsilon), p 1 or 2, float32 (SHAVE)";
    def.inputs = {"input"};
    def.attrs = {{"axis",
                  dsl::AttrType::Int,
                  int64_t(-1),
                  "logical axis, not the batch; negative counts from the end",
                  {}},
                 {"p", dsl::AttrType::Int, int64_t(2), "1 or 2",
                  [](const dsl::AttrValue &v) -> std::string {
                      const int64_t p = std::get<int64_t>(v);
                      return p == 1 || p == 2 ? "" : "must be 1 or 2";
                  }},
                 {"epsilon", dsl::AttrType::Float, 0.0, "the least norm divided by, >= 0",
                  [](const dsl::AttrValue &v) -> std::string {
                      return std::get<double>(v) >= 0 ? "" : "must be >= 0";
                  }}};
    def.build = build_lp_normalize;
    def.unsplittable_dims = [](const dsl::Layer &layer) {
        return std::vector<dsl::Dim>{detail::device_axis_of(
            "lp_normalize '" + layer.name() + "'", layer.output(), layer.attrs().get_int("axis"))};
    };
    // Along the channels of an odd shape.
    def.example = [](dsl::ElemType type) {
        if (dsl::is_quantized_int(type)) return dsl::Layer();
        return layer_registry().build("lp_normalize", "lp_normalize",
                                      {detail::example_input("in", 19, 11, 7, type)},
                                      dsl::Attrs().set("axis", int64_t(1)));
    };
    registry.add(std::move(def));
}

} // namespace vpuc::algorithms
