// conv3d: ONNX's Conv over an input of rank 5 (N, C, D, H, W), on the SHAVEs, summing in
// float32 (bias first, then the taps in the order of input channel, d, h and w). The device's
// H holds D and H together, which the DPU's 2-D window cannot slide over; the kernel carries
// the weights.
#include "window_nd.h"

namespace vpuc::algorithms {

namespace {

dsl::Layer build_conv3d(const std::string &name, const std::vector<dsl::Layer> &inputs,
                        const dsl::Attrs &attrs) {
    const std::string what = "conv3d '" + name + "'";
    const dsl::Layer &input = inputs.at(0);
    const detail::InputInfo info = detail::input_info(what, input);
    if (info.quantized)
        detail::invalid(what, "input '" + input.output().name + "' is " +
                                  dsl::to_string(info.type) + "; conv3d takes f16 or f32");
    const dsl::Shape &shape = input.output().logical_shape();
    if (shape.rank() != 5)
        detail::invalid(what, "the input is " + dsl::to_string(shape) +
                                  "; conv3d takes rank 5 (N, C, D, H, W)");
    const window_nd::Axes in = window_nd::spatial_extents(what, shape);
    const Halide::Buffer<> w = window_nd::weights_5d(what, attrs, 5);
    const int64_t out_channels = w.dim(4).extent(), group_channels = w.dim(3).extent();
    const int64_t groups = attrs.get_int("groups");
    if (info.c != group_channels * groups || out_channels % groups != 0)
        detail::invalid(what, "weights of " + std::to_string(group_channels) +
                                  " input channels per group x " + std::to_string(groups) +
                                  " groups do not fit an input of " + std::to_string(info.c) +
                                  " channels and " + std::to_string(out_channels) + " outputs");
    const window_nd::Axes kernel = {w.dim(2).extent(), w.dim(1).extent(), w.dim(0).extent()};
    const window_nd::Axes strides = window_nd::per_axis(what, attrs, "strides", 5, 1);
    const window_nd::Axes dilations = window_nd::per_axis(what, attrs, "dilations", 5, 1);
    const std::pair<window_nd::Axes, window_nd::Axes> padding = window_nd::pads(what, attrs, 5);
    const window_nd::Axes begin = padding.first, end = padding.second;
    window_nd::Axes out;
    for (size_t a = 0; a < 3; ++a)
        out[a] = detail::window_extent(what, in[a], int(begin[a]), int(end[a]), int(kernel[a]),
                                       int(strides[a]), int(dilations[a]));
    const Halide::Buffer<float> b = window_nd::bias(what, attrs, out_channels);
    const int64_t group_outputs = out_channels / groups;
    dsl::Algorithm algorithm = [=](const std::vector<Halide::Func> &funcs) {
        const auto &v = dsl::act_vars();
        Halide::RDom r({{0, int(kernel[2])},
                        {0, int(kernel[1])},
                        {0, int(kernel[0])},
                        {0, int(group_channels)}},
                       detail::rdom_name(name + "_r"));
        const window_nd::Coords o = window_nd::output_coords(out);
        const Halide::Expr taps[3] = {r.z, r.y, r.x};
        window_nd::Coords at;
        for (size_t a = 0; a < 3; ++a)
            at[a] = detail::window_coord(o[a], int(strides[a]), taps[a], int(dilations[a]),
                                         int(begin[a]));
        const Halide::Expr ic = (v.c / int(group_outputs)) * int(group_channels) + r.w;
        const Halide::Expr x =
            Halide::select(window_nd::inside(at, in),
                           Halide::cast<float>(window_nd::read(funcs.at(0), ic, at, in)), 0.0f);
        Halide::Func acc = detail::named_func(name + "_acc");
        acc(v.c, v.x, v.y) = b(v.c);
        acc(v.c, v.x, v.y) += x * Halide::cast<float>(w(r.x, r.y, r.z, r.w, v.c));
        Halide::Func result = detail::named_func(name);
        result(v.c, v.x, v.y) = Halide::cast(info.halide_type, acc(v.c, v.x, v.y));
        return result;
    };
    return dsl::Layer::make("conv3d",
                            window_nd::output_desc(name, input, out_channels, out, info.type, {}),
                            {input}, algorithm);
}

} // namespace

void register_layer_conv3d(dsl::LayerRegistry &registry) {
    dsl::LayerDef def;
    def.op = "conv3d";
    def.doc = "convolution over D, H and W of a rank-5 input, float32 sums (SHAVE)";
    def.inputs = {"input"};
    dsl::AttrSpec bias{
        "bias", dsl::AttrType::Tensor, std::nullopt, "f32, one per output channel", {}};
    bias.optional = true;
    def.attrs = {
        {"weights",
         dsl::AttrType::Tensor,
         std::nullopt,
         "f16 or f32 in ONNX's layout [oc, ic / groups, kd, kh, kw] (Halide dims reversed)",
         {}},
        bias,
        window_nd::axes_spec("strides", 1, 1, "[d, h, w]; 1 each when absent"),
        window_nd::axes_spec("dilations", 1, 1, "[d, h, w]; 1 each when absent"),
        window_nd::axes_spec("pads", 0, 2, "[d, h, w begins, d, h, w ends]; 0 when absent"),
        {"groups", dsl::AttrType::Int, int64_t(1), "input and output channels in groups",
         [](const dsl::AttrValue &a) -> std::string {
             return std::get<int64_t>(a) >= 1 ? "" : "must be at least 1";
         }}};
    def.build = build_conv3d;
    // Device row y holds d and h together: an output row reads rows of other depths.
    def.unsplittable_dims = [](const dsl::Layer &) { return std::vector<dsl::Dim>{dsl::dims::H}; };
    def.example = [](dsl::ElemType type) {
        if (dsl::is_quantized_int(type)) return dsl::Layer();
        dsl::Attrs a;
        a.set("weights",
              Halide::Buffer<>(detail::example_float_weights({3, 2, 3, 7, 6}, 6).weights));
        a.set("strides", std::vector<int64_t>{1, 2, 1});
        a.set("pads", std::vector<int64_t>{1, 0, 1, 0, 1, 1});
        a.set("groups", int64_t(2));
        return layer_registry().build("conv3d", "conv3d",
                                      {window_nd::example_input_5d(14, 5, 9, 7, type)}, a);
    };
    registry.add(std::move(def));
}

} // namespace vpuc::algorithms
