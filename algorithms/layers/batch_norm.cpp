// batch_norm: inference batch normalization as the per-channel affine y = x * scale + bias, in
// float32 on the SHAVEs (int8: requantized to the input's quantization). The importer folds
// ONNX's scale, B, mean, var and epsilon into these two vectors; the graph pass
// fold_batch_norm folds the layer into a preceding convolution, so it runs on its own only
// where no convolution precedes it. A layer in one file (docs/adding-a-layer.md).
#include "common.h"

namespace vpuc::algorithms {

namespace {

dsl::Layer build_batch_norm(const std::string &name, const std::vector<dsl::Layer> &inputs,
                            const dsl::Attrs &attrs) {
    const std::string what = "batch_norm '" + name + "'";
    const dsl::Layer &input = inputs.at(0);
    if (input.output().shape.rank() < 2)
        detail::invalid(what, "the input needs a channel axis (rank 2 or more)");
    const detail::InputInfo in = detail::input_info(what, input);
    const Halide::Buffer<float> scale = detail::tensor_as<float>(attrs, "scale");
    const Halide::Buffer<float> bias = detail::tensor_as<float>(attrs, "bias");
    for (const auto *b : {&scale, &bias})
        if (b->dimensions() != 1 || b->dim(0).extent() != in.c)
            detail::invalid(what, "scale and bias must hold one value per channel (" +
                                      std::to_string(in.c) + ")");
    const dsl::Quant q = input.output().quant;
    // int8 in the quantized domain, with the scales folded into the per-channel constants on
    // the host: the kernel then divides by nothing, so a SHAVE kernel compiled without
    // strict_float rounds as the reference does.
    Halide::Buffer<float> multiplier = scale.copy(), offset = bias.copy();
    if (in.quantized)
        for (int c = 0; c < int(in.c); ++c) {
            multiplier(c) = float(double(in.scale) * scale(c) / q.scale_at(0));
            offset(c) = float(double(bias(c)) / q.scale_at(0) + q.zero_point_at(0));
        }
    const bool u8 = in.type == dsl::ElemType::U8;
    dsl::Algorithm algorithm = [=](const std::vector<Halide::Func> &funcs) {
        const auto &v = dsl::act_vars();
        Halide::Expr x = funcs.at(0)(v.c, v.x, v.y);
        if (in.quantized) x = Halide::cast<int32_t>(x) - in.zero_point;
        Halide::Expr y = Halide::cast<float>(x) * multiplier(v.c) + offset(v.c);
        if (in.quantized)
            y = Halide::clamp(Halide::round(y), u8 ? 0.0f : -128.0f, u8 ? 255.0f : 127.0f);
        Halide::Func out = detail::named_func(name);
        out(v.c, v.x, v.y) = Halide::cast(in.halide_type, y);
        return out;
    };
    return dsl::Layer::make("batch_norm",
                            detail::output_desc(name, input, in.c, in.w, in.h, in.type, q), {input},
                            algorithm);
}

Halide::Buffer<> example_values(int channels, float first, float step) {
    Halide::Buffer<float> b(channels);
    for (int c = 0; c < channels; ++c) b(c) = first + step * float(c % 7);
    return b;
}

} // namespace

void register_layer_batch_norm(dsl::LayerRegistry &registry) {
    dsl::LayerDef def;
    def.op = "batch_norm";
    def.doc = "inference batch normalization: x * scale + bias per channel, float32, SHAVEs";
    def.inputs = {"input"};
    def.attrs = {{"scale",
                  dsl::AttrType::Tensor,
                  std::nullopt,
                  "f32 per channel: ONNX's scale / sqrt(var + epsilon)",
                  {}},
                 {"bias",
                  dsl::AttrType::Tensor,
                  std::nullopt,
                  "f32 per channel: ONNX's B - mean * scale / sqrt(var + epsilon)",
                  {}}};
    def.build = build_batch_norm;
    def.example = [](dsl::ElemType type) {
        constexpr int kChannels = 13;
        dsl::Attrs attrs;
        attrs.set("scale", example_values(kChannels, 0.25f, 0.125f));
        attrs.set("bias", example_values(kChannels, -0.5f, 0.0625f));
        return layer_registry().build("batch_norm", "batch_norm",
                                      {detail::example_input("in", kChannels, 11, 7, type)}, attrs);
    };
    registry.add(std::move(def));
}

} // namespace vpuc::algorithms
