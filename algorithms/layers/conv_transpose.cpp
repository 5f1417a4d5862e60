// conv_transpose: ONNX's ConvTranspose (a deconvolution) over an input of rank 3 to 5, on the
// SHAVEs, summing in float32. Gathered: output o along an axis takes input i through tap k
// where i * stride + k * dilation - pad_begin = o, so each output element sums the input
// elements whose scattered window covers it (in the order of input channel, then d, h and w
// from the last input back), after the bias. The output's extent along an axis is
// stride * (in - 1) + output_padding + (kernel - 1) * dilation + 1 - pad_begin - pad_end.
#include "window_nd.h"

namespace vpuc::algorithms {

namespace {

dsl::Layer build_conv_transpose(const std::string &name, const std::vector<dsl::Layer> &inputs,
                                const dsl::Attrs &attrs) {
    const std::string what = "conv_transpose '" + name + "'";
    const dsl::Layer &input = inputs.at(0);
    const detail::InputInfo info = detail::input_info(what, input);
    if (info.quantized)
        detail::invalid(what, "input '" + input.output().name + "' is " +
                                  dsl::to_string(info.type) + "; conv_transpose takes f16 or f32");
    const dsl::Shape &shape = input.output().logical_shape();
    const window_nd::Axes in = window_nd::spatial_extents(what, shape);
    const int rank = shape.rank();
    const Halide::Buffer<> w = window_nd::weights_5d(what, attrs, rank);
    const int64_t groups = attrs.get_int("groups");
    const int64_t group_outputs = w.dim(3).extent(), out_channels = group_outputs * groups;
    if (w.dim(4).extent() != info.c || info.c % groups != 0)
        detail::invalid(what, "weights for " + std::to_string(w.dim(4).extent()) +
                                  " input channels in " + std::to_string(groups) +
                                  " groups do not fit an input of " + std::to_string(info.c) +
                                  " channels");
    const int64_t group_channels = info.c / groups;
    const window_nd::Axes kernel = {w.dim(2).extent(), w.dim(1).extent(), w.dim(0).extent()};
    const window_nd::Axes strides = window_nd::per_axis(what, attrs, "strides", rank, 1);
    const window_nd::Axes dilations = window_nd::per_axis(what, attrs, "dilations", rank, 1);
    const window_nd::Axes extra = window_nd::per_axis(what, attrs, "output_padding", rank, 0);
    const std::pair<window_nd::Axes, window_nd::Axes> padding = window_nd::pads(what, attrs, rank);
    const window_nd::Axes begin = padding.first, end = padding.second;
    window_nd::Axes out;
    for (size_t a = 0; a < 3; ++a) {
        out[a] = strides[a] * (in[a] - 1) + extra[a] + (kernel[a] - 1) * dilations[a] + 1 -
                 begin[a] - end[a];
        if (out[a] < 1)
            detail::invalid(what, "the pads leave no output along spatial axis " +
                                      std::to_string(int(a) - (3 - (rank - 2))));
    }
    const Halide::Buffer<float> b = window_nd::bias(what, attrs, out_channels);
    // Along each axis, output o takes inputs i = (o + pad_begin) / stride - j for j below
    // `reach` (those whose taps can cover it), through tap k = (o + pad_begin - i * stride) /
    // dilation when that divides and is a tap. Counting from (o + pad_begin) / stride keeps
    // what a region of the output reads a window of the input the blob can state.
    window_nd::Axes reach;
    for (size_t a = 0; a < 3; ++a) reach[a] = (kernel[a] - 1) * dilations[a] / strides[a] + 1;
    dsl::Algorithm algorithm = [=](const std::vector<Halide::Func> &funcs) {
        const auto &v = dsl::act_vars();
        Halide::RDom r(
            {{0, int(reach[2])}, {0, int(reach[1])}, {0, int(reach[0])}, {0, int(group_channels)}},
            detail::rdom_name(name + "_r"));
        const window_nd::Coords o = window_nd::output_coords(out);
        const Halide::Expr steps[3] = {r.z, r.y, r.x};
        window_nd::Coords at, tap;
        Halide::Expr hit = Halide::Internal::const_true();
        for (size_t a = 0; a < 3; ++a) {
            const Halide::Expr shifted = o[a] + int(begin[a]);
            at[a] = shifted / int(strides[a]) - steps[a];
            const Halide::Expr offset = shifted - at[a] * int(strides[a]);
            hit = hit && offset % int(dilations[a]) == 0 && offset < int(kernel[a] * dilations[a]);
            tap[a] = Halide::clamp(offset / int(dilations[a]), 0, int(kernel[a] - 1));
        }
        hit = hit && window_nd::inside(at, in);
        const Halide::Expr ic = (v.c / int(group_outputs)) * int(group_channels) + r.w;
        const Halide::Expr x = Halide::select(
            hit, Halide::cast<float>(window_nd::read(funcs.at(0), ic, at, in)), 0.0f);
        Halide::Func acc = detail::named_func(name + "_acc");
        acc(v.c, v.x, v.y) = b(v.c);
        acc(v.c, v.x, v.y) +=
            x * Halide::cast<float>(w(tap[2], tap[1], tap[0], v.c % int(group_outputs), ic));
        Halide::Func result = detail::named_func(name);
        result(v.c, v.x, v.y) = Halide::cast(info.halide_type, acc(v.c, v.x, v.y));
        return result;
    };
    return dsl::Layer::make("conv_transpose",
                            window_nd::output_desc(name, input, out_channels, out, info.type, {}),
                            {input}, algorithm);
}

} // namespace

void register_layer_conv_transpose(dsl::LayerRegistry &registry) {
    dsl::LayerDef def;
    def.op = "conv_transpose";
    def.doc = "transposed convolution over rank 3 to 5, float32 sums (SHAVE)";
    def.inputs = {"input"};
    dsl::AttrSpec bias{
        "bias", dsl::AttrType::Tensor, std::nullopt, "f32, one per output channel", {}};
    bias.optional = true;
    def.attrs = {
        {"weights",
         dsl::AttrType::Tensor,
         std::nullopt,
         "f16 or f32 in ONNX's layout [ic, oc / groups, kernel...] (Halide dims reversed)",
         {}},
        bias,
        window_nd::axes_spec("strides", 1, 1, "one per spatial axis; 1 each when absent"),
        window_nd::axes_spec("dilations", 1, 1, "one per spatial axis; 1 each when absent"),
        window_nd::axes_spec("pads", 0, 2,
                             "begins, then ends, per spatial axis, taken off the output; 0 "
                             "when absent"),
        window_nd::axes_spec("output_padding", 0, 1,
                             "one per spatial axis, added to the output's end; 0 when absent"),
        {"groups", dsl::AttrType::Int, int64_t(1), "input and output channels in groups",
         [](const dsl::AttrValue &a) -> std::string {
             return std::get<int64_t>(a) >= 1 ? "" : "must be at least 1";
         }}};
    def.build = build_conv_transpose;
    // Device row y of a rank-5 tensor holds d and h together: an output row reads rows of other
    // depths.
    def.unsplittable_dims = [](const dsl::Layer &layer) {
        return layer.output().logical_shape().rank() == 5 ? std::vector<dsl::Dim>{dsl::dims::H}
                                                          : std::vector<dsl::Dim>{};
    };
    def.example = [](dsl::ElemType type) {
        if (dsl::is_quantized_int(type)) return dsl::Layer();
        dsl::Attrs a;
        a.set("weights", Halide::Buffer<>(detail::example_float_weights({3, 2, 3, 6}, 3).weights));
        a.set("strides", std::vector<int64_t>{2, 3});
        a.set("pads", std::vector<int64_t>{1, 0, 0, 2});
        a.set("output_padding", std::vector<int64_t>{1, 0});
        a.set("groups", int64_t(2));
        return layer_registry().build("conv_transpose", "conv_transpose",
                                      {detail::example_input("in", 6, 9, 7, type)}, a);
    };
    registry.add(std::move(def));
}

} // namespace vpuc::algorithms
