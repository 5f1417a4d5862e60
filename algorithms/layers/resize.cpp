// resize: ONNX's Resize over H and W of a 4-D tensor, nearest, bilinear or bicubic, on the
// SHAVEs. Each output coordinate maps back onto the input by the coordinate transformation mode;
// nearest rounds it by the nearest mode, linear blends the two neighbours, cubic the four by
// Keys' kernel, in float32. Coordinates past the border take the edge (ONNX's reference pads
// with the edge), or, for cubic with exclude_outside, leave those taps out; tf_crop_and_resize
// maps the output onto a crop of the input and gives extrapolation_value outside the input.
// int8 keeps the input's quantization: nearest copies stored values, linear and cubic blend real
// values and round back.
#include <algorithm>
#include <cmath>

#include "common.h"

namespace vpuc::algorithms {

namespace {

const std::vector<std::string> kModes = {"nearest", "linear", "cubic"};
const std::vector<std::string> kCoordinateModes = {"half_pixel",           "asymmetric",
                                                   "align_corners",        "pytorch_half_pixel",
                                                   "tf_half_pixel_for_nn", "tf_crop_and_resize"};
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

// How one axis maps: the input extent, the output extent, ONNX's scale (output / input), the
// resized length the reference divides by (the input's times the scale, not rounded down; the
// output extent when sizes are given) and tf_crop_and_resize's crop [start, end] (fractions of
// the input's last index).
struct Axis {
    int64_t in = 1, out = 1;
    double scale = 1, resized = 1;
    double crop_start = 0, crop_end = 1;
};

// The input coordinate, in float32, that output coordinate `o` maps back onto, as ONNX's
// reference maps it. Strict, as the reference is: a fused multiply-add moves a coordinate that
// lands on a half (nearest's ties) or an integer by a rounding step, to the other side of it.
Halide::Expr source_coord(const Halide::Expr &o, const Axis &axis, const std::string &mode) {
    const Halide::Expr at = Halide::cast<float>(o);
    const float scale = float(axis.scale);
    if (mode == "asymmetric") return Halide::strict_float(at / scale);
    if (mode == "align_corners")
        return axis.resized == 1
                   ? Halide::Expr(0.0f)
                   : Halide::strict_float(at * float(double(axis.in - 1) / (axis.resized - 1)));
    if (mode == "tf_half_pixel_for_nn") return Halide::strict_float((at + 0.5f) / scale);
    if (mode == "tf_crop_and_resize") {
        const double last = double(axis.in - 1), span = (axis.crop_end - axis.crop_start) * last;
        const float start = float(axis.crop_start * last);
        return axis.resized == 1
                   ? Halide::Expr(float(span / 2) + start)
                   : Halide::strict_float(at * float(span / (axis.resized - 1)) + start);
    }
    if (mode == "pytorch_half_pixel" && axis.resized == 1) return Halide::Expr(-0.5f);
    return Halide::strict_float((at + 0.5f) / scale - 0.5f); // half_pixel, pytorch_half_pixel
}

Halide::Expr nearest_index(const Halide::Expr &coord, const std::string &mode) {
    if (mode == "floor") return Halide::floor(coord);
    if (mode == "ceil") return Halide::ceil(coord);
    if (mode == "round_prefer_ceil") return Halide::floor(coord + 0.5f);
    return Halide::ceil(coord - 0.5f); // round_prefer_floor: halves go down
}

// The input coordinate clamped to the axis: ONNX's edge padding for nearest and linear, and
// every index derived from it (floor, ceil, rounding: monotonic, integers fixed) stays inside.
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

// An index clamped to the axis: ONNX's edge padding.
Halide::Expr read_index(const Halide::Expr &index, int64_t extent) {
    return Halide::clamp(index, 0, int(extent - 1));
}

// Cubic's four taps along one axis: input indices first - 1 to first + 2 (first = floor of the
// coordinate) and their weights, Keys' cubic of parameter a at the coordinate's fraction t. With
// exclude_outside, taps outside the input weigh 0 and the others are scaled to sum to 1; else
// they read the edge. (The reference takes t = 1 from first - 2 on an integer coordinate: the
// same single tap of weight 1.)
struct CubicTaps {
    std::vector<Halide::Expr> index, weight;
};

CubicTaps cubic_taps(const Halide::Expr &first, const Halide::Expr &t, float a, int64_t extent,
                     bool exclude_outside) {
    auto near = [a](const Halide::Expr &d) { // |distance| <= 1
        return ((a + 2) * d - (a + 3)) * d * d + 1;
    };
    auto far = [a](const Halide::Expr &d) { // 1 < |distance| < 2
        return ((a * d - 5 * a) * d + 8 * a) * d - 4 * a;
    };
    CubicTaps taps;
    taps.weight = {far(t + 1), near(t), near(1 - t), far((1 - t) + 1)};
    for (int k = 0; k < 4; ++k) taps.index.push_back(first + (k - 1));
    if (!exclude_outside) return taps;
    Halide::Expr total = 0.0f;
    for (size_t k = 0; k < 4; ++k) {
        const Halide::Expr index = taps.index[k];
        taps.weight[k] = Halide::select(index >= 0 && index < int(extent), taps.weight[k], 0.0f);
        total = total + taps.weight[k];
    }
    for (Halide::Expr &w : taps.weight) w = w / total;
    return taps;
}

// tf_crop_and_resize's coordinates outside the input take extrapolation_value.
Halide::Expr outside(const Halide::Expr &coord, int64_t extent) {
    return coord < 0.0f || coord > float(extent - 1);
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
    const bool crops = coordinates == "tf_crop_and_resize";
    if (crops != attrs.has("roi"))
        detail::invalid(what, crops ? "tf_crop_and_resize needs attribute 'roi'"
                                    : "attribute 'roi' is for tf_crop_and_resize only");
    if (crops) {
        if (attrs.has("scales"))
            detail::invalid(what, "tf_crop_and_resize by scales is not supported; give sizes");
        const std::vector<double> roi = attrs.get_floats("roi");
        h.crop_start = roi.at(0);
        w.crop_start = roi.at(1);
        h.crop_end = roi.at(2);
        w.crop_end = roi.at(3);
    }
    const bool exclude_outside = attrs.get_int("exclude_outside") != 0;
    if (exclude_outside && mode == "nearest")
        detail::invalid(what,
                        "exclude_outside = 1 is not supported with mode nearest (linear, cubic)");
    const float cubic_a = float(attrs.get_float("cubic_coeff_a"));
    const float extrapolation = float(attrs.get_float("extrapolation_value"));
    const dsl::Quant q = input.output().quant;
    dsl::Algorithm algorithm = [=](const std::vector<Halide::Func> &funcs) {
        const auto &v = dsl::act_vars();
        const Halide::Func &x = funcs.at(0);
        const Halide::Expr cx = source_coord(v.x, w, coordinates);
        const Halide::Expr cy = source_coord(v.y, h, coordinates);
        auto at = [&](const Halide::Expr &ix, const Halide::Expr &iy) {
            return detail::dequantize(x(v.c, read_index(ix, w.in), read_index(iy, h.in)), in);
        };
        Halide::Expr y;
        if (mode == "nearest") {
            const Halide::Func ix =
                index_func(name + "_ix", v.x, nearest_index(inside(cx, w.in), nearest));
            const Halide::Func iy =
                index_func(name + "_iy", v.y, nearest_index(inside(cy, h.in), nearest));
            if (!crops) {
                // Stored values, copied.
                Halide::Func out = detail::named_func(name);
                out(v.c, v.x, v.y) = x(v.c, read_index(ix(v.x), w.in), read_index(iy(v.y), h.in));
                return out;
            }
            y = at(ix(v.x), iy(v.y));
        } else if (mode == "linear") {
            // Linear's edge padding is the coordinate clamped: both taps read the edge.
            const Halide::Expr sx = inside(cx, w.in), sy = inside(cy, h.in);
            const Halide::Func ix = index_func(name + "_ix", v.x, Halide::floor(sx));
            const Halide::Func iy = index_func(name + "_iy", v.y, Halide::floor(sy));
            const Halide::Expr x0 = ix(v.x), y0 = iy(v.y);
            const Halide::Expr fx = sx - Halide::cast<float>(x0), fy = sy - Halide::cast<float>(y0);
            const Halide::Expr top = at(x0, y0) * (1.0f - fx) + at(x0 + 1, y0) * fx;
            const Halide::Expr bottom = at(x0, y0 + 1) * (1.0f - fx) + at(x0 + 1, y0 + 1) * fx;
            // Strict, as the reference is: a fused multiply-add would move a blend that cancels
            // to near zero by several fp16 ulps.
            y = Halide::strict_float(top * (1.0f - fy) + bottom * fy);
        } else {
            const Halide::Func ix = index_func(name + "_ix", v.x, Halide::floor(cx));
            const Halide::Func iy = index_func(name + "_iy", v.y, Halide::floor(cy));
            const CubicTaps tx = cubic_taps(ix(v.x), cx - Halide::cast<float>(ix(v.x)), cubic_a,
                                            w.in, exclude_outside);
            const CubicTaps ty = cubic_taps(iy(v.y), cy - Halide::cast<float>(iy(v.y)), cubic_a,
                                            h.in, exclude_outside);
            // Row by row, as the reference interpolates W before H.
            Halide::Expr sum = 0.0f;
            for (size_t r = 0; r < 4; ++r) {
                Halide::Expr row = 0.0f;
                for (size_t k = 0; k < 4; ++k)
                    row = row + tx.weight[k] * at(tx.index[k], ty.index[r]);
                sum = sum + ty.weight[r] * row;
            }
            y = Halide::strict_float(sum);
        }
        if (crops) y = Halide::select(outside(cx, w.in) || outside(cy, h.in), extrapolation, y);
        Halide::Func out = detail::named_func(name);
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
    def.doc = "nearest, bilinear or bicubic resize over H and W of a 4-D tensor (SHAVE)";
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
    dsl::AttrSpec roi{"roi", dsl::AttrType::Floats, std::nullopt,
                      "tf_crop_and_resize's crop [h_start, w_start, h_end, w_end], fractions of "
                      "the input's last index",
                      [](const dsl::AttrValue &a) -> std::string {
                          const auto &r = std::get<std::vector<double>>(a);
                          if (r.size() != 4) return "must have 4 entries";
                          for (double v : r)
                              if (!(std::abs(v) < 1e6)) return "must be finite";
                          return "";
                      }};
    roi.optional = true;
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
        {"mode", dsl::AttrType::String, std::string("nearest"), "nearest, linear or cubic",
         one_of(kModes)},
        {"coordinate_transformation_mode", dsl::AttrType::String, std::string("half_pixel"),
         "how an output coordinate maps onto the input (ONNX's)", one_of(kCoordinateModes)},
        {"nearest_mode", dsl::AttrType::String, std::string("round_prefer_floor"),
         "rounding of the mapped coordinate in nearest mode", one_of(kNearestModes)},
        {"cubic_coeff_a", dsl::AttrType::Float, -0.75, "the parameter of cubic's kernel",
         [](const dsl::AttrValue &a) -> std::string {
             return std::abs(std::get<double>(a)) < 1e6 ? "" : "must be finite";
         }},
        {"exclude_outside", dsl::AttrType::Int, int64_t(0),
         "1: taps outside the input weigh 0, the others scaled to sum to 1; 0: they read the edge",
         [](const dsl::AttrValue &a) -> std::string {
             const int64_t v = std::get<int64_t>(a);
             return v == 0 || v == 1 ? "" : "must be 0 or 1";
         }},
        roi,
        {"extrapolation_value", dsl::AttrType::Float, 0.0,
         "tf_crop_and_resize's value outside the input",
         [](const dsl::AttrValue &a) -> std::string {
             return std::abs(std::get<double>(a)) < 1e30 ? "" : "must be finite";
         }}};
    def.build = build_resize;
    // Cubic, taps outside weighing 0, up H and down W: every output reads taps beyond the edge.
    def.example = [](dsl::ElemType type) {
        dsl::Attrs a;
        a.set("sizes", std::vector<int64_t>{11, 4});
        a.set("mode", std::string("cubic"));
        a.set("cubic_coeff_a", -0.5);
        a.set("exclude_outside", int64_t(1));
        return layer_registry().build("resize", "resize",
                                      {detail::example_input("in", 19, 7, 5, type)}, a);
    };
    registry.add(std::move(def));
}

} // namespace vpuc::algorithms
