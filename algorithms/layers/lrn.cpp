// lrn: local response normalization across channels, ONNX's LRN (AlexNet, GoogLeNet):
// y = x / (bias + alpha / size * sum of x^2 over the channels c - floor((size - 1) / 2) to
// c + ceil((size - 1) / 2) that exist)^beta, in float32 on the SHAVEs. Each output reads its
// neighbouring channels, so a task covers every channel. Floats only: an int8 input would need
// an output quantization of its own, which ONNX's LRN does not give.
#include <cmath>

#include "common.h"

namespace vpuc::algorithms {

namespace {

dsl::Layer build_lrn(const std::string &name, const std::vector<dsl::Layer> &inputs,
                     const dsl::Attrs &attrs) {
    const std::string what = "lrn '" + name + "'";
    const dsl::Layer &input = inputs.at(0);
    const detail::InputInfo in = detail::input_info(what, input);
    if (in.quantized)
        detail::invalid(what, "input '" + input.output().name + "' is " +
                                  input.output().describe() + "; lrn takes f16 or f32");
    const int dim = detail::halide_dim(detail::device_axis_of(what, input.output(), 1));
    const int64_t channels = dim == 0 ? in.c : dim == 1 ? in.w : in.h;
    const int64_t size = attrs.get_int("size");
    const float alpha = float(attrs.get_float("alpha")), beta = float(attrs.get_float("beta"));
    const float bias = float(attrs.get_float("bias"));
    dsl::Algorithm algorithm = [=](const std::vector<Halide::Func> &funcs) {
        const auto &v = dsl::act_vars();
        const std::vector<Halide::Var> at = {v.c, v.x, v.y};
        // Every read is of the window's channel clamped into the channels, the centre's too
        // (taken at the window's middle tap): what a task reads is then the clamp of its
        // channels widened by the window, a form a blob states, where a read of the centre
        // alone would add its own clamp to the union.
        Halide::RDom r(0, int(size), detail::rdom_name(name + "_r"));
        const int64_t before = (size - 1) / 2;
        const Halide::Expr channel = at[size_t(dim)] - int(before) + r.x;
        std::vector<Halide::Expr> index(at.begin(), at.end());
        index[size_t(dim)] = Halide::clamp(channel, 0, int(channels) - 1);
        const Halide::Expr value = Halide::cast<float>(funcs.at(0)(index));
        Halide::Func window = detail::named_func(name + "_window");
        // The sum of squares, and the centre as -0 plus the other taps' -0 plus its value:
        // exactly the value, -0 included.
        window(at) = {0.0f, -0.0f};
        window(at) = {window(at)[0] + Halide::select(channel >= 0 && channel < int(channels),
                                                     value * value, 0.0f),
                      window(at)[1] + Halide::select(r.x == int(before), value, -0.0f)};
        const Halide::Expr y =
            window(at)[1] / Halide::pow(bias + alpha / float(size) * window(at)[0], beta);
        Halide::Func out = detail::named_func(name);
        out(at) = detail::stored_as(y, in.halide_type);
        return out;
    };
    return dsl::Layer::make("lrn", detail::output_desc(name, input, in.c, in.w, in.h, in.type, {}),
                            {input}, algorithm);
}

} // namespace

void register_layer_lrn(dsl::LayerRegistry &registry) {
    dsl::LayerDef def;
    def.op = "lrn";
    def.doc = "x / (bias + alpha / size * sum of x^2 over size neighbouring channels)^beta, "
              "float32 (SHAVE)";
    def.inputs = {"input"};
    auto positive = [](const dsl::AttrValue &v) -> std::string {
        return std::get<double>(v) > 0 ? "" : "must be > 0";
    };
    def.attrs = {{"size", dsl::AttrType::Int, std::nullopt,
                  "channels summed, centred on the output's (one more after it when even)",
                  [](const dsl::AttrValue &v) -> std::string {
                      const int64_t s = std::get<int64_t>(v);
                      return s >= 1 && s <= 1024 ? "" : "must be 1 to 1024";
                  }},
                 {"alpha", dsl::AttrType::Float, 1e-4, "scale of the sum of squares", {}},
                 {"beta", dsl::AttrType::Float, 0.75, "exponent", {}},
                 {"bias", dsl::AttrType::Float, 1.0, "added to the scaled sum, > 0", positive}};
    def.build = build_lrn;
    def.unsplittable_dims = [](const dsl::Layer &layer) {
        return std::vector<dsl::Dim>{
            detail::device_axis_of("lrn '" + layer.name() + "'", layer.output(), 1)};
    };
    def.example = [](dsl::ElemType type) {
        if (dsl::is_quantized_int(type)) return dsl::Layer();
        return layer_registry().build("lrn", "lrn", {detail::example_input("in", 19, 11, 7, type)},
                                      dsl::Attrs().set("size", int64_t(5)));
    };
    registry.add(std::move(def));
}

} // namespace vpuc::algorithms
