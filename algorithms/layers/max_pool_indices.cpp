// max_pool_indices: ONNX's MaxPool with its Indices output, over an input of rank 3 to 5, on
// the SHAVEs. One kernel computes both outputs: the maxima (the input's type and quantization)
// and, as i32 (the device's integers, as topk's indices), the index of each maximum in the
// input flattened in NCHW order (storage_order 0; 1: its spatial axes column-major), the first
// in the window's row-major order when several are equal. Flat indices count the images
// before, which a kernel computing one image at a time does not know: the input holds one.
#include "window_nd.h"

namespace vpuc::algorithms {

namespace {

dsl::Layer build_max_pool_indices(const std::string &name, const std::vector<dsl::Layer> &inputs,
                                  const dsl::Attrs &attrs) {
    const std::string what = "max_pool_indices '" + name + "'";
    const dsl::Layer &input = inputs.at(0);
    const detail::InputInfo info = detail::input_info(what, input);
    const dsl::Shape &shape = input.output().logical_shape();
    const window_nd::Axes in = window_nd::spatial_extents(what, shape);
    const int rank = shape.rank();
    if (shape[dsl::Dim(0)] != 1)
        detail::invalid(what, "the input is " + dsl::to_string(shape) +
                                  "; flat indices count whole images, and a kernel computes one "
                                  "image at a time: the batch must be 1");
    if (int64_t(info.c) * in[0] * in[1] * in[2] > std::numeric_limits<int32_t>::max())
        detail::invalid(what, "the input has more elements than i32 indices count");
    const window_nd::Axes kernel = window_nd::per_axis(what, attrs, "kernel_shape", rank, 1);
    const window_nd::Axes strides = window_nd::per_axis(what, attrs, "strides", rank, 1);
    const window_nd::Axes dilations = window_nd::per_axis(what, attrs, "dilations", rank, 1);
    const std::pair<window_nd::Axes, window_nd::Axes> padding = window_nd::pads(what, attrs, rank);
    const window_nd::Axes begin = padding.first, end = padding.second;
    const bool ceil_mode = attrs.get_int("ceil_mode") != 0;
    const bool column_major = attrs.get_int("storage_order") != 0;
    window_nd::Axes out;
    for (size_t a = 0; a < 3; ++a) {
        if (begin[a] >= kernel[a] || end[a] >= kernel[a])
            detail::invalid(what, "every pad must be smaller than the kernel");
        out[a] = window_nd::pool_extent(what, in[a], begin[a], end[a], kernel[a], strides[a],
                                        dilations[a], ceil_mode);
    }
    dsl::Algorithm algorithm = [=](const std::vector<Halide::Func> &funcs) {
        const auto &v = dsl::act_vars();
        const std::string r_name = detail::rdom_name(name + "_r");
        const window_nd::Coords o = window_nd::output_coords(out);
        // The window's element (d, h, w) at tap `r`.
        auto at = [&](const Halide::RDom &r) {
            const Halide::Expr taps[3] = {r.z, r.y, r.x};
            window_nd::Coords c;
            for (size_t a = 0; a < 3; ++a)
                c[a] = detail::window_coord(o[a], int(strides[a]), taps[a], int(dilations[a]),
                                            int(begin[a]));
            return c;
        };
        // Its value; padding never wins: the lowest value of the type compared, -inf for
        // floats.
        const Halide::Expr lowest = info.quantized
                                        ? Halide::Expr(Halide::Int(32).min())
                                        : Halide::Expr(-std::numeric_limits<float>::infinity());
        auto value = [&](const window_nd::Coords &c) {
            const Halide::Expr stored = window_nd::read(funcs.at(0), v.c, c, in);
            return Halide::select(
                window_nd::inside(c, in),
                info.quantized ? Halide::cast<int>(stored) : Halide::cast<float>(stored), lowest);
        };
        const Halide::RDom r({{0, int(kernel[2])}, {0, int(kernel[1])}, {0, int(kernel[0])}},
                             r_name + "_max");
        Halide::Func maximum = detail::named_func(name + "_max");
        maximum(v.c, v.x, v.y) = lowest;
        maximum(v.c, v.x, v.y) = Halide::max(maximum(v.c, v.x, v.y), value(at(r)));
        // The first maximum in the window's row-major order has the lowest row-major index in
        // the input (strides and dilations are positive).
        const Halide::RDom s({{0, int(kernel[2])}, {0, int(kernel[1])}, {0, int(kernel[0])}},
                             r_name + "_first");
        const window_nd::Coords c = at(s);
        const int64_t volume = in[0] * in[1] * in[2];
        const Halide::Expr row_major = (c[0] * int(in[1]) + c[1]) * int(in[2]) + c[2];
        Halide::Func first = detail::named_func(name + "_first");
        first(v.c, v.x, v.y) = int(volume);
        first(v.c, v.x, v.y) =
            Halide::min(first(v.c, v.x, v.y),
                        Halide::select(value(c) == maximum(v.c, v.x, v.y), row_major, int(volume)));
        // Back to (d, h, w), and column-major for storage_order 1.
        const Halide::Expr i = Halide::min(first(v.c, v.x, v.y), int(volume - 1));
        const Halide::Expr d = i / int(in[1] * in[2]), h = (i / int(in[2])) % int(in[1]),
                           w = i % int(in[2]);
        const Halide::Expr spatial = column_major ? (w * int(in[1]) + h) * int(in[0]) + d : i;
        Halide::Func result = detail::named_func(name);
        result(v.c, v.x, v.y) = Halide::Tuple(
            Halide::cast(info.halide_type, maximum(v.c, v.x, v.y)), v.c * int(volume) + spatial);
        return result;
    };
    dsl::TensorDesc values =
        window_nd::output_desc(name, input, info.c, out, info.type, input.output().quant);
    dsl::TensorDesc indices = values;
    indices.type = dsl::ElemType::I32;
    indices.quant = {};
    return dsl::Layer::make("max_pool_indices", {values, indices}, {input}, algorithm);
}

} // namespace

void register_layer_max_pool_indices(dsl::LayerRegistry &registry) {
    dsl::LayerDef def;
    def.op = "max_pool_indices";
    def.doc = "max pooling over rank 3 to 5 with the flat NCHW index of each maximum, i32 "
              "(SHAVE)";
    def.inputs = {"input"};
    auto flag = [](const std::string &name, const std::string &doc) {
        return dsl::AttrSpec{name, dsl::AttrType::Int, int64_t(0), doc,
                             [](const dsl::AttrValue &a) -> std::string {
                                 const int64_t f = std::get<int64_t>(a);
                                 return f == 0 || f == 1 ? "" : "must be 0 or 1";
                             }};
    };
    dsl::AttrSpec kernel = window_nd::axes_spec("kernel_shape", 1, 1, "one per spatial axis");
    kernel.optional = false;
    def.attrs = {
        kernel,
        window_nd::axes_spec("strides", 1, 1, "one per spatial axis; 1 each when absent"),
        window_nd::axes_spec("dilations", 1, 1, "one per spatial axis; 1 each when absent"),
        window_nd::axes_spec("pads", 0, 2, "begins, then ends, per spatial axis; 0 when absent"),
        flag("ceil_mode",
             "1: output extents rounded up, the last window reaching past the padding"),
        flag("storage_order", "0: indices of the spatial axes row-major, 1: column-major")};
    def.build = build_max_pool_indices;
    // Device row y of a rank-5 tensor holds d and h together: an output row reads rows of other
    // depths.
    def.unsplittable_dims = [](const dsl::Layer &layer) {
        return layer.output().logical_shape().rank() == 5 ? std::vector<dsl::Dim>{dsl::dims::H}
                                                          : std::vector<dsl::Dim>{};
    };
    def.example = [](dsl::ElemType type) {
        dsl::Attrs a;
        a.set("kernel_shape", std::vector<int64_t>{3, 2});
        a.set("strides", std::vector<int64_t>{2, 1});
        a.set("pads", std::vector<int64_t>{1, 0, 1, 1});
        a.set("storage_order", int64_t(1));
        return layer_registry().build("max_pool_indices", "max_pool_indices",
                                      {detail::example_input("in", 13, 9, 11, type)}, a);
    };
    registry.add(std::move(def));
}

} // namespace vpuc::algorithms
