// max_pool3d and avg_pool3d: ONNX's MaxPool and AveragePool over an input of rank 5
// (N, C, D, H, W), on the SHAVEs: the device's H holds D and H together, which the DPU's 2-D
// window cannot slide over. The attributes are max_pool's and avg_pool's over three axes:
// ceil_mode (a last window may reach past the padding, and that part is padding; a window
// starting in the end padding is left out), max's dilations, and the average's
// count_include_pad (1: the divisor counts the window's elements in the padded input, 0: in
// the input). Averages sum in float32; a max of int8 compares the stored values, which orders
// them as their real values, and keeps the input's quantization.
#include "window_nd.h"

namespace vpuc::algorithms {

namespace {

dsl::Layer build_pool3d(bool is_max, const std::string &name, const std::vector<dsl::Layer> &inputs,
                        const dsl::Attrs &attrs) {
    const std::string op = is_max ? "max_pool3d" : "avg_pool3d";
    const std::string what = op + " '" + name + "'";
    const dsl::Layer &input = inputs.at(0);
    const detail::InputInfo info = detail::input_info(what, input);
    if (!is_max && info.quantized)
        detail::invalid(what, "input '" + input.output().name + "' is " +
                                  dsl::to_string(info.type) + "; avg_pool3d takes f16 or f32");
    const dsl::Shape &shape = input.output().logical_shape();
    if (shape.rank() != 5)
        detail::invalid(what, "the input is " + dsl::to_string(shape) + "; " + op +
                                  " takes rank 5 (N, C, D, H, W)");
    const window_nd::Axes in = window_nd::spatial_extents(what, shape);
    const window_nd::Axes kernel = window_nd::per_axis(what, attrs, "kernel_shape", 5, 1);
    const window_nd::Axes strides = window_nd::per_axis(what, attrs, "strides", 5, 1);
    const window_nd::Axes dilations =
        is_max ? window_nd::per_axis(what, attrs, "dilations", 5, 1) : window_nd::Axes{1, 1, 1};
    const std::pair<window_nd::Axes, window_nd::Axes> padding = window_nd::pads(what, attrs, 5);
    const window_nd::Axes begin = padding.first, end = padding.second;
    const bool ceil_mode = attrs.get_int("ceil_mode") != 0;
    const bool count_include_pad = !is_max && attrs.get_int("count_include_pad") != 0;
    window_nd::Axes out;
    for (size_t a = 0; a < 3; ++a) {
        if (begin[a] >= kernel[a] || end[a] >= kernel[a])
            detail::invalid(what, "every pad must be smaller than the kernel");
        out[a] = window_nd::pool_extent(what, in[a], begin[a], end[a], kernel[a], strides[a],
                                        dilations[a], ceil_mode);
    }
    dsl::Algorithm algorithm = [=](const std::vector<Halide::Func> &funcs) {
        const auto &v = dsl::act_vars();
        Halide::RDom r({{0, int(kernel[2])}, {0, int(kernel[1])}, {0, int(kernel[0])}},
                       detail::rdom_name(name + "_r"));
        const window_nd::Coords o = window_nd::output_coords(out);
        const Halide::Expr taps[3] = {r.z, r.y, r.x};
        window_nd::Coords at;
        for (size_t a = 0; a < 3; ++a)
            at[a] = detail::window_coord(o[a], int(strides[a]), taps[a], int(dilations[a]),
                                         int(begin[a]));
        const Halide::Expr stored = window_nd::read(funcs.at(0), v.c, at, in);
        const Halide::Expr inside = window_nd::inside(at, in);
        Halide::Func acc = detail::named_func(name + "_acc");
        Halide::Func result = detail::named_func(name);
        if (is_max) {
            // Padding never wins: the lowest value of the type compared, -inf for floats.
            const Halide::Expr value =
                info.quantized ? Halide::cast<int>(stored) : Halide::cast<float>(stored);
            const Halide::Expr lowest = info.quantized
                                            ? Halide::Expr(Halide::Int(32).min())
                                            : Halide::Expr(-std::numeric_limits<float>::infinity());
            acc(v.c, v.x, v.y) = lowest;
            acc(v.c, v.x, v.y) =
                Halide::max(acc(v.c, v.x, v.y), Halide::select(inside, value, lowest));
            result(v.c, v.x, v.y) = Halide::cast(info.halide_type, acc(v.c, v.x, v.y));
            return result;
        }
        acc(v.c, v.x, v.y) = 0.0f;
        acc(v.c, v.x, v.y) += Halide::select(inside, Halide::cast<float>(stored), 0.0f);
        // The divisor: the window's elements inside the padded input (count_include_pad) or
        // the input, along each axis.
        Halide::Expr count = 1;
        for (size_t a = 0; a < 3; ++a) {
            const int64_t lo = count_include_pad ? -begin[a] : 0;
            const int64_t hi = in[a] + (count_include_pad ? end[a] : 0);
            const Halide::Expr start = o[a] * int(strides[a]) - int(begin[a]);
            count *= Halide::min(start + int(kernel[a]), int(hi)) - Halide::max(start, int(lo));
        }
        result(v.c, v.x, v.y) =
            Halide::cast(info.halide_type, acc(v.c, v.x, v.y) / Halide::cast<float>(count));
        return result;
    };
    return dsl::Layer::make(
        op, window_nd::output_desc(name, input, info.c, out, info.type, input.output().quant),
        {input}, algorithm);
}

dsl::AttrSpec flag_spec(const std::string &name, int64_t default_value, const std::string &doc) {
    return {name, dsl::AttrType::Int, default_value, doc, [](const dsl::AttrValue &a) {
                const int64_t f = std::get<int64_t>(a);
                return f == 0 || f == 1 ? "" : "must be 0 or 1";
            }};
}

dsl::LayerDef pool3d_def(bool is_max) {
    dsl::LayerDef def;
    def.op = is_max ? "max_pool3d" : "avg_pool3d";
    def.doc = is_max ? "max pooling over D, H and W of a rank-5 input, optionally dilated (SHAVE)"
                     : "average pooling over D, H and W of a rank-5 input, float32 sums (SHAVE)";
    def.inputs = {"input"};
    dsl::AttrSpec kernel = window_nd::axes_spec("kernel_shape", 1, 1, "[d, h, w]");
    kernel.optional = false;
    def.attrs = {
        kernel, window_nd::axes_spec("strides", 1, 1, "[d, h, w]; 1 each when absent"),
        window_nd::axes_spec("pads", 0, 2, "[d, h, w begins, d, h, w ends]; 0 when absent"),
        flag_spec("ceil_mode", 0,
                  "1: output extents rounded up, the last window reaching past the "
                  "padding")};
    if (is_max)
        def.attrs.push_back(
            window_nd::axes_spec("dilations", 1, 1, "[d, h, w]; 1 each when absent"));
    else
        def.attrs.push_back(flag_spec("count_include_pad", 1,
                                      "1: divide by the window's elements in the padded input; "
                                      "0: by those in the input"));
    def.build = [is_max](const std::string &name, const std::vector<dsl::Layer> &inputs,
                         const dsl::Attrs &attrs) {
        return build_pool3d(is_max, name, inputs, attrs);
    };
    // Device row y holds d and h together: an output row reads rows of other depths.
    def.unsplittable_dims = [](const dsl::Layer &) { return std::vector<dsl::Dim>{dsl::dims::H}; };
    def.example = [is_max](dsl::ElemType type) {
        if (!is_max && dsl::is_quantized_int(type)) return dsl::Layer();
        dsl::Attrs a;
        a.set("kernel_shape", std::vector<int64_t>{2, 3, 2});
        a.set("strides", std::vector<int64_t>{2, 2, 1});
        a.set("pads", std::vector<int64_t>{1, 1, 0, 0, 1, 1});
        a.set("ceil_mode", int64_t(1));
        if (!is_max) a.set("count_include_pad", int64_t(0));
        const std::string op = is_max ? "max_pool3d" : "avg_pool3d";
        return layer_registry().build(op, op, {window_nd::example_input_5d(11, 5, 7, 6, type)}, a);
    };
    return def;
}

} // namespace

void register_layer_pool3d(dsl::LayerRegistry &registry) {
    registry.add(pool3d_def(true));
    registry.add(pool3d_def(false));
}

} // namespace vpuc::algorithms
