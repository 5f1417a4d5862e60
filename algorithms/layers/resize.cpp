// resize: ONNX's Resize over H and W of a 4-D tensor, nearest or bilinear, on the SHAVEs. Each
// output coordinate maps back onto the input by the coordinate transformation mode; nearest
// rounds it by the nearest mode, linear blends the two neighbours, in float32. Coordinates past
// the border take the edge (ONNX's reference pads with the edge). int8 keeps the input's
// quantization: nearest copies stored values, linear blends real values and rounds back.
#include <algorithm>
#include <cmath>

#include "common.h"

namespace vpuc::algorithms {

namespace {

const std::vector<std::string> kModes = {"nearest", "linear"};
const std::vector<std::string> kCoordinateModes = {"half_pixel", "asymmetric", "align_corners",
                                                   "pytorch_half_pixel"};
const std::vector<std::string> kNearestModes = {"round_prefer_floor", "round_prefer_ceil", "floor",
                                                "ceil"};

std::function<std::string(const dsl::AttrValue &)> one_of(const std::vector<std::string> &choices) {
    return [choices](const dsl::AttrValue &a) -> std::string {
        const std::string &value = std::get<std::string>(a);
        if (std::find(choices.begin(), choices.end(), value) != choices.end()) return "";
        std::string list;
        for (const std::string &c : choices) list += (list.empty() ? "" : ", ") + c;
        return "'" + value + "' is not supported (" + list + ")";
    };
}

// How one axis maps: the input extent, the output extent, ONNX's scale (output / input) and
// the resized length align_corners divides by: the input's times the scale, not rounded down
// (ONNX's reference), which is the output extent when sizes are given.
struct Axis {
    int64_t in = 1, out = 1;
    double scale = 1, resized = 1;
};

// The input coordinate, in float32, that output coordinate `o` maps back onto. Strict, as the
// reference is: a fused multiply-add moves a coordinate that lands on a half (nearest's ties)
// or an integer by a rounding step, to the other side of it.
Halide::Expr source_coord(const Halide::Expr &o, const Axis &axis, const std::string &mode) {
    const Halide::Expr at = Halide::cast<float>(o);
    const float scale = float(axis.scale);
    if (mode == "asymmetric") return Halide::strict_float(at / scale);
    if (mode == "align_corners")
        return axis.out == 1
                   ? Halide::Expr(0.0f)
                   : Halide::strict_float(at * float(double(axis.in - 1) / (axis.resized - 1)));
    if (mode == "pytorch_half_pixel" && axis.out == 1) return Halide::Expr(0.0f);
    return Halide::strict_float((at + 0.5f) / scale - 0.5f); // half_pixel, pytorch_half_pixel
}

Halide::Expr nearest_index(const Halide::Expr &coord, const std::string &mode) {
    if (mode == "floor") return Halide::floor(coord);
    if (mode == "ceil") return Halide::ceil(coord);
    if (mode == "round_prefer_ceil") return Halide::floor(coord + 0.5f);
    return Halide::ceil(coord - 0.5f); // round_prefer_floor: halves go down
}

// The input coordinate clamped to the axis: ONNX's edge padding, and every index derived from it
// (floor, ceil, rounding: monotonic, integers fixed) stays inside.
Halide::Expr inside(const Halide::Expr &coord, int64_t extent) {
    return Halide::clamp(coord, 0.0f, float(extent - 1));
}

// The input index of each output coordinate along one axis, as a Func of it. The blob states a
// kernel's reads per output bound in an affine form, which a scaled coordinate is not; a Func
// with an update definition is never inlined, so bounds inference (the kernel's and the
// lowering's alike) sees only the clamp around a read of it (read_index), and a task reads the
// whole axis.
Halide::Func index_func(const std::string &name, const Halide::Var &at, const Halide::Expr &index) {
    Halide::Func f = detail::named_func(name);
    f(at) = 0;
    f(at) += Halide::cast<int>(index);
    return f;
}

Halide::Expr read_index(const Halide::Expr &index, int64_t extent) {
    return Halide::clamp(index, 0, int(extent - 1));
}

dsl::Layer build_resize(const std::string &name, const std::vector<dsl::Layer> &inputs,
                        const dsl::Attrs &attrs) {
    const std::string what = "resize '" + name + "'";
    const dsl::Layer &input = inputs.at(0);
    if (input.output().shape.rank() != 4)
        detail::invalid(what, "input '" + input.output().name + "' is " +
                                  dsl::to_string(input.output().shape) +
                                  "; resize takes a 4-D tensor (N, C, H, W)");
    const detail::InputInfo in = detail::input_info(what, input);
    const std::vector<int64_t> sizes = attrs.get_ints("sizes");
    Axis h{in.h, sizes.at(0), double(sizes.at(0)) / double(in.h), double(sizes.at(0))};
    Axis w{in.w, sizes.at(1), double(sizes.at(1)) / double(in.w), double(sizes.at(1))};
    if (attrs.has("scales")) {
        const std::vector<double> scales = attrs.get_floats("scales");
        h.scale = scales.at(0);
        w.scale = scales.at(1);
        h.resized = double(h.in) * h.scale;
        w.resized = double(w.in) * w.scale;
        for (const Axis *axis : {&h, &w})
            if (int64_t(std::floor(double(axis->in) * axis->scale)) != axis->out)
                detail::invalid(what, "sizes [" + std::to_string(h.out) + ", " +
                                          std::to_string(w.out) +
                                          "] are not the input's extents times the scales "
                                          "(rounded down)");
    }
    const std::string mode = attrs.get_string("mode");
    const std::string coordinates = attrs.get_string("coordinate_transformation_mode");
    const std::string nearest = attrs.get_string("nearest_mode");
    const dsl::Quant q = input.output().quant;
    dsl::Algorithm algorithm = [=](const std::vector<Halide::Func> &funcs) {
        const auto &v = dsl::act_vars();
        const Halide::Func &x = funcs.at(0);
        const Halide::Expr sx = inside(source_coord(v.x, w, coordinates), w.in);
        const Halide::Expr sy = inside(source_coord(v.y, h, coordinates), h.in);
        Halide::Func out = detail::named_func(name);
        if (mode == "nearest") {
            const Halide::Func ix = index_func(name + "_ix", v.x, nearest_index(sx, nearest));
            const Halide::Func iy = index_func(name + "_iy", v.y, nearest_index(sy, nearest));
            out(v.c, v.x, v.y) = x(v.c, read_index(ix(v.x), w.in), read_index(iy(v.y), h.in));
            return out;
        }
        const Halide::Func ix = index_func(name + "_ix", v.x, Halide::floor(sx));
        const Halide::Func iy = index_func(name + "_iy", v.y, Halide::floor(sy));
        const Halide::Expr x0 = ix(v.x), y0 = iy(v.y);
        const Halide::Expr fx = sx - Halide::cast<float>(x0), fy = sy - Halide::cast<float>(y0);
        auto at = [&](const Halide::Expr &cx, const Halide::Expr &cy) {
            return detail::dequantize(x(v.c, read_index(cx, w.in), read_index(cy, h.in)), in);
        };
        const Halide::Expr top = at(x0, y0) * (1.0f - fx) + at(x0 + 1, y0) * fx;
        const Halide::Expr bottom = at(x0, y0 + 1) * (1.0f - fx) + at(x0 + 1, y0 + 1) * fx;
        // Strict, as the reference is: a fused multiply-add would move a blend that cancels to
        // near zero by several fp16 ulps.
        const Halide::Expr y = Halide::strict_float(top * (1.0f - fy) + bottom * fy);
        out(v.c, v.x, v.y) =
            in.quantized ? detail::quantize(y, q, in.type) : Halide::cast(in.halide_type, y);
        return out;
    };
    return dsl::Layer::make("resize",
                            detail::output_desc(name, input, in.c, w.out, h.out, in.type, q),
                            {input}, algorithm);
}

} // namespace

void register_layer_resize(dsl::LayerRegistry &registry) {
    dsl::LayerDef def;
    def.op = "resize";
    def.doc = "nearest or bilinear resize over H and W of a 4-D tensor (SHAVE)";
    def.inputs = {"input"};
    dsl::AttrSpec scales{"scales", dsl::AttrType::Floats, std::nullopt,
                         "[h, w] output / input; when given, the coordinates map through them",
                         [](const dsl::AttrValue &a) -> std::string {
                             const auto &s = std::get<std::vector<double>>(a);
                             if (s.size() != 2) return "must have 2 entries [h, w]";
                             for (double v : s)
                                 if (!(v > 0 && v < 1e6)) return "must be positive and finite";
                             return "";
                         }};
    scales.optional = true;
    def.attrs = {
        {"sizes", dsl::AttrType::Ints, std::nullopt, "[h, w] of the output",
         [](const dsl::AttrValue &a) -> std::string {
             const auto &s = std::get<std::vector<int64_t>>(a);
             if (s.size() != 2) return "must have 2 entries [h, w]";
             for (int64_t v : s)
                 if (v < 1 || v > (int64_t(1) << 24)) return "must be in [1, 2^24]";
             return "";
         }},
        scales,
        {"mode", dsl::AttrType::String, std::string("nearest"), "nearest or linear",
         one_of(kModes)},
        {"coordinate_transformation_mode", dsl::AttrType::String, std::string("half_pixel"),
         "how an output coordinate maps onto the input (ONNX's)", one_of(kCoordinateModes)},
        {"nearest_mode", dsl::AttrType::String, std::string("round_prefer_floor"),
         "rounding of the mapped coordinate in nearest mode", one_of(kNearestModes)}};
    def.build = build_resize;
    def.example = [](dsl::ElemType type) {
        dsl::Attrs a;
        a.set("sizes", std::vector<int64_t>{11, 13});
        a.set("mode", std::string("linear"));
        return layer_registry().build("resize", "resize",
                                      {detail::example_input("in", 19, 7, 5, type)}, a);
    };
    registry.add(std::move(def));
}

} // namespace vpuc::algorithms
