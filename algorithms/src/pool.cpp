// Max and average pooling over a kernel window, with the DPU's per-tensor output stage.
#include <cmath>
#include <limits>
#include <tuple>

#include "algorithms/layers.h"
#include "algorithms/registry.h"
#include "common.h"

namespace vpuc::algorithms {

using Halide::Expr;
using Halide::Func;
using namespace detail;

namespace {

// The output extent of a pool along one axis; with ceil_mode rounded up, less a last window
// that would start in the padding after the input.
int64_t pool_extent(const std::string &what, int64_t in, int pad_a, int pad_b, int kernel,
                    int stride, int dilation, bool ceil_mode) {
    const int64_t floor_out = window_extent(what, in, pad_a, pad_b, kernel, stride, dilation);
    if (!ceil_mode) return floor_out;
    const int64_t span = int64_t(kernel - 1) * dilation + 1;
    int64_t out = (in + pad_a + pad_b - span + stride - 1) / stride + 1;
    if ((out - 1) * stride >= in + pad_a) --out;
    return out;
}

// How far the last of `out` windows reaches past the padding after the input.
int64_t overhang(int64_t in, int pad_a, int pad_b, int kernel, int stride, int dilation,
                 int64_t out) {
    const int64_t span = int64_t(kernel - 1) * dilation + 1;
    return std::max<int64_t>(0, (out - 1) * stride - pad_a + span - (in + pad_b));
}

// The elements of the window of output `v` in [lo, hi) along one axis (dilation 1).
Expr window_count(const Expr &v, int stride, int kernel, int pad_a, int64_t lo, int64_t hi) {
    const Expr start = v * stride - pad_a;
    return Halide::min(start + kernel, int(hi)) - Halide::max(start, int(lo));
}

dsl::Layer pool(bool is_max, const std::string &name, const dsl::Layer &input, const PoolParams &p,
                const std::optional<QuantOutput> &quant_out) {
    const char *op = is_max ? "max_pool" : "avg_pool";
    const std::string what = std::string(op) + " '" + name + "'";
    const InputInfo in = spatial_input_info(what, input);
    if (!is_max && (p.dilation_w != 1 || p.dilation_h != 1))
        invalid(what, "an average pool takes no dilations");
    const int64_t ow = pool_extent(what, in.w, p.pad_left, p.pad_right, p.kernel_w, p.stride_w,
                                   p.dilation_w, p.ceil_mode);
    const int64_t oh = pool_extent(what, in.h, p.pad_top, p.pad_bottom, p.kernel_h, p.stride_h,
                                   p.dilation_h, p.ceil_mode);
    // A window entirely in the padding would have nothing to pool.
    if (p.pad_left >= p.kernel_w || p.pad_right >= p.kernel_w || p.pad_top >= p.kernel_h ||
        p.pad_bottom >= p.kernel_h)
        invalid(what, "every pad must be smaller than the kernel");
    const int64_t over_w =
        overhang(in.w, p.pad_left, p.pad_right, p.kernel_w, p.stride_w, p.dilation_w, ow);
    const int64_t over_h =
        overhang(in.h, p.pad_top, p.pad_bottom, p.kernel_h, p.stride_h, p.dilation_h, oh);
    const bool padded = p.pad_left || p.pad_right || p.pad_top || p.pad_bottom || over_w || over_h;
    const float area = float(p.kernel_w * p.kernel_h);
    // The average's divisor is the whole window unless part of some window is not counted:
    // past the padding (ceil_mode), or the padding itself without count_include_pad.
    const bool counts_pads =
        p.count_include_pad || !(p.pad_left || p.pad_right || p.pad_top || p.pad_bottom);
    const bool whole_window = is_max || (counts_pads && !over_w && !over_h);
    if (!whole_window && in.quantized)
        invalid(what, "an int8 average divides by the whole window (its requantization is per "
                      "tensor); count_include_pad 0 with padding, or a ceil_mode window past "
                      "the padding, needs an fp16 input");

    QuantOutput q;
    if (in.quantized) {
        if (quant_out) {
            q = *quant_out;
        } else {
            q.type = in.type;
            q.quant = input.output().quant;
            q.requant = is_max ? FixedPoint{1, 0} : fixed_point(1.0 / area);
        }
    } else {
        q.type = in.type;
    }
    const dpu::IntPpe int_stage =
        in.quantized ? int_ppe(p.activation, q.type, q.quant) : dpu::IntPpe{};
    const dpu::FloatPpe float_stage = float_ppe(p.activation);
    const Halide::Type out_type = dsl::halide_type(q.type);

    // Padding contributes nothing: 0 to a sum, to a max the lowest value an input holds (every
    // window holds an input element; a larger constant such as INT32_MIN overflows Halide's
    // folding of the requantization).
    const Expr lowest = in.quantized
                            ? Expr((in.type == dsl::ElemType::U8 ? 0 : -128) - in.zero_point)
                            : Expr(-std::numeric_limits<float>::infinity());
    const Expr zero = in.quantized ? Expr(0) : Expr(0.0f);
    const Expr identity = is_max ? lowest : zero;

    dsl::Algorithm algorithm = [=](const std::vector<Func> &inputs) {
        const auto &v = dsl::act_vars();
        Halide::RDom r({{0, p.kernel_w}, {0, p.kernel_h}}, detail::rdom_name(name + "_r"));
        std::vector<Expr> at = {v.c, window_coord(v.x, p.stride_w, r.x, p.dilation_w, p.pad_left),
                                window_coord(v.y, p.stride_h, r.y, p.dilation_h, p.pad_top)};
        Expr operand = padded ? padded_input(name, inputs.at(0), in, identity)(at)
                              : mac_operand(inputs.at(0)(at), in);
        Func acc = named_func(name + "_acc");
        acc(v.c, v.x, v.y) = identity;
        if (is_max)
            acc(v.c, v.x, v.y) = Halide::max(acc(v.c, v.x, v.y), operand);
        else
            acc(v.c, v.x, v.y) += operand;
        Func out = named_func(name);
        if (in.quantized) {
            out(v.c, v.x, v.y) = requantize(acc(v.c, v.x, v.y), Expr(q.requant.mult),
                                            Expr(q.requant.shift), int_stage, out_type);
        } else if (whole_window) {
            out(v.c, v.x, v.y) = apply_float_ppe(acc(v.c, v.x, v.y) * (is_max ? 1.0f : 1.0f / area),
                                                 float_stage, out_type);
        } else {
            const int64_t left = p.count_include_pad ? -p.pad_left : 0,
                          top = p.count_include_pad ? -p.pad_top : 0;
            const int64_t right = in.w + (p.count_include_pad ? p.pad_right : 0),
                          bottom = in.h + (p.count_include_pad ? p.pad_bottom : 0);
            const Expr count = window_count(v.x, p.stride_w, p.kernel_w, p.pad_left, left, right) *
                               window_count(v.y, p.stride_h, p.kernel_h, p.pad_top, top, bottom);
            out(v.c, v.x, v.y) = apply_float_ppe(acc(v.c, v.x, v.y) / Halide::cast<float>(count),
                                                 float_stage, out_type);
        }
        return out;
    };
    return dsl::Layer::make(op, output_desc(name, input, in.c, ow, oh, q.type, q.quant), {input},
                            algorithm);
}

dsl::Attrs pool_attrs(bool is_max, const PoolParams &p, const std::optional<QuantOutput> &out) {
    dsl::Attrs a;
    a.set("kernel_shape", std::vector<int64_t>{p.kernel_h, p.kernel_w});
    a.set("strides", std::vector<int64_t>{p.stride_h, p.stride_w});
    a.set("pads", std::vector<int64_t>{p.pad_top, p.pad_left, p.pad_bottom, p.pad_right});
    a.set("ceil_mode", int64_t(p.ceil_mode));
    a.set("dilations", std::vector<int64_t>{p.dilation_h, p.dilation_w});
    if (!is_max) a.set("count_include_pad", int64_t(p.count_include_pad));
    set_activation(a, p.activation);
    if (out) {
        set_output_quant(a, out->type, out->quant);
        a.set("requant_mult", int64_t(out->requant.mult));
        a.set("requant_shift", int64_t(out->requant.shift));
    }
    return a;
}

dsl::Layer build_pool(bool is_max, const std::string &name, const dsl::Layer &input,
                      const dsl::Attrs &a) {
    PoolParams p;
    std::tie(p.kernel_h, p.kernel_w) = pair_of(a, "kernel_shape");
    std::tie(p.stride_h, p.stride_w) = pair_of(a, "strides");
    std::tie(p.dilation_h, p.dilation_w) = pair_of(a, "dilations");
    std::tie(p.pad_top, p.pad_left, p.pad_bottom, p.pad_right) = pads_of(a);
    p.ceil_mode = a.get_int("ceil_mode") != 0;
    if (!is_max) p.count_include_pad = a.get_int("count_include_pad") != 0;
    p.activation = activation_of(a);
    std::optional<QuantOutput> out;
    QuantOutput q;
    if (output_quant_of(a, q.type, q.quant)) {
        if (!a.has("requant_mult") || !a.has("requant_shift"))
            invalid(std::string(is_max ? "max_pool" : "avg_pool") + " '" + name + "'",
                    "an output_type needs requant_mult and requant_shift");
        q.requant = {uint16_t(a.get_int("requant_mult")), uint8_t(a.get_int("requant_shift"))};
        out = q;
    }
    return pool(is_max, name, input, p, out);
}

dsl::AttrSpec flag_spec(const std::string &name, int64_t default_value, const std::string &doc) {
    return {name, dsl::AttrType::Int, default_value, doc, [](const dsl::AttrValue &v) {
                const int64_t f = std::get<int64_t>(v);
                return f == 0 || f == 1 ? "" : "must be 0 or 1";
            }};
}

dsl::LayerDef pool_def(bool is_max) {
    dsl::LayerDef def;
    def.op = is_max ? "max_pool" : "avg_pool";
    def.doc =
        is_max ? "max pooling over a window, optionally dilated" : "average pooling over a window";
    def.inputs = {"input"};
    dsl::AttrSpec kernel = pair_spec("kernel_shape", 1, "[h, w]");
    kernel.default_value.reset();
    def.attrs = {kernel, pair_spec("strides", 1, "[h, w]"), pads_spec()};
    for (auto &spec : activation_specs()) def.attrs.push_back(spec);
    for (auto &spec : output_quant_specs()) def.attrs.push_back(spec);
    dsl::AttrSpec mult{"requant_mult", dsl::AttrType::Int, std::nullopt, "int8 output: u16",
                       [](const dsl::AttrValue &v) -> std::string {
                           const int64_t m = std::get<int64_t>(v);
                           return m >= 0 && m <= 65535 ? "" : "must be in [0, 65535]";
                       }};
    mult.optional = true;
    dsl::AttrSpec shift{"requant_shift", dsl::AttrType::Int, std::nullopt, "int8 output: 0..63",
                        [](const dsl::AttrValue &v) -> std::string {
                            const int64_t s = std::get<int64_t>(v);
                            return s >= 0 && s <= 63 ? "" : "must be in [0, 63]";
                        }};
    shift.optional = true;
    def.attrs.push_back(mult);
    def.attrs.push_back(shift);
    def.attrs.push_back(flag_spec(
        "ceil_mode", 0, "1: output extents rounded up, the last window reaching past the padding"));
    def.attrs.push_back(
        pair_spec("dilations", 1, is_max ? "[h, w]" : "[h, w]: [1, 1], averages are not dilated"));
    if (!is_max)
        def.attrs.push_back(flag_spec("count_include_pad", 1,
                                      "1: divide by the window's elements in the padded input; "
                                      "0: by those in the input"));
    def.example = [is_max](dsl::ElemType type) {
        PoolParams p;
        p.kernel_w = p.kernel_h = is_max ? 3 : 2;
        p.stride_w = p.stride_h = 2;
        if (is_max) p.pad_left = p.pad_right = p.pad_top = p.pad_bottom = 1;
        dsl::Layer in = example_input("in", 21, 13, 11, type);
        return is_max ? max_pool("max_pool", in, p) : avg_pool("avg_pool", in, p);
    };
    def.build = [is_max](const std::string &name, const std::vector<dsl::Layer> &inputs,
                         const dsl::Attrs &attrs) {
        return build_pool(is_max, name, inputs.at(0), attrs);
    };
    return def;
}

} // namespace

void detail::register_pool_layers(dsl::LayerRegistry &r) {
    r.add(pool_def(true));
    r.add(pool_def(false));
}

dsl::Layer max_pool(const std::string &name, const dsl::Layer &input, const PoolParams &p,
                    const std::optional<QuantOutput> &out) {
    return layer_registry().build("max_pool", name, {input}, pool_attrs(true, p, out));
}

dsl::Layer avg_pool(const std::string &name, const dsl::Layer &input, const PoolParams &p,
                    const std::optional<QuantOutput> &out) {
    return layer_registry().build("avg_pool", name, {input}, pool_attrs(false, p, out));
}

dsl::Attrs int8_pool_attrs(const dsl::Layer &pool, double in_scale, dsl::ElemType out_type,
                           const dsl::Quant &out) {
    dsl::Attrs a = pool.attrs();
    const std::vector<int64_t> k = a.get_ints("kernel_shape");
    const double area = pool.op() == "avg_pool" ? double(k.at(0) * k.at(1)) : 1.0;
    const FixedPoint f = fixed_point(in_scale / out.scale_at(0) / area);
    a.set("requant_mult", int64_t(f.mult));
    a.set("requant_shift", int64_t(f.shift));
    set_output_quant(a, out_type, out);
    return a;
}

} // namespace vpuc::algorithms
