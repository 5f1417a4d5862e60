#include "common.h"

namespace vpuc::algorithms::detail {

using Halide::Expr;

InputInfo input_info(const std::string &what, const dsl::Layer &input) {
    const dsl::TensorDesc &t = input.output();
    if (t.shape.rank() != 4 || t.shape[dsl::dims::N] != 1)
        invalid(what, "input '" + t.name + "' is " + dsl::to_string(t.shape) +
                          "; layers take 4-D tensors with batch 1");
    if (t.quant.per_channel())
        invalid(what, "input '" + t.name +
                          "' is quantized per channel; activations are "
                          "quantized per tensor");
    InputInfo info;
    info.c = t.shape[dsl::dims::C];
    info.w = t.shape[dsl::dims::W];
    info.h = t.shape[dsl::dims::H];
    info.type = t.type;
    info.halide_type = dsl::halide_type(t.type);
    info.quantized = dsl::is_quantized_int(t.type);
    if (!t.quant.empty()) {
        info.scale = t.quant.scale_at(0);
        info.zero_point = t.quant.zero_point_at(0);
    }
    if (!info.quantized && t.type != dsl::ElemType::F16 && t.type != dsl::ElemType::F32)
        invalid(what, std::string("input '") + t.name + "' is " + dsl::to_string(t.type) +
                          "; layers take u8, i8, f16 or f32");
    return info;
}

Halide::Func named_func(const std::string &name) {
    return Halide::Func(Halide::Internal::unique_name(name));
}

Expr mac_operand(const Expr &stored, const InputInfo &in) {
    if (in.quantized) return Halide::cast<int32_t>(stored) - in.zero_point;
    return Halide::cast<float>(stored);
}

Halide::Func padded_input(const std::string &name, const Halide::Func &in, const InputInfo &info,
                          const Expr &outside) {
    const auto &v = dsl::act_vars();
    Halide::Func padded = named_func(name + "_padded");
    Expr inside = v.x >= 0 && v.x < int(info.w) && v.y >= 0 && v.y < int(info.h);
    // The clamp keeps the read inside the image; the select discards it outside.
    Expr stored =
        in(v.c, Halide::clamp(v.x, 0, int(info.w - 1)), Halide::clamp(v.y, 0, int(info.h - 1)));
    padded(v.c, v.x, v.y) = Halide::select(inside, mac_operand(stored, info), outside);
    return padded;
}

Expr window_coord(const Expr &v, int stride, const Expr &k, int dilation, int pad) {
    Expr e = (stride == 1 ? v : v * stride) + (dilation == 1 ? k : k * dilation);
    return pad == 0 ? e : e - pad;
}

int64_t window_extent(const std::string &what, int64_t in, int pad_a, int pad_b, int kernel,
                      int stride, int dilation) {
    if (kernel < 1 || stride < 1 || dilation < 1 || pad_a < 0 || pad_b < 0)
        invalid(what, "kernel, stride and dilation must be >= 1 and pads >= 0");
    int64_t span = int64_t(kernel - 1) * dilation + 1;
    int64_t padded = in + pad_a + pad_b;
    if (padded < span)
        invalid(what, "the window (" + std::to_string(span) +
                          ") is larger than the padded input (" + std::to_string(padded) + ")");
    return (padded - span) / stride + 1;
}

dsl::TensorDesc output_desc(const std::string &name, const dsl::Layer &like, int64_t c, int64_t w,
                            int64_t h, dsl::ElemType type, dsl::Quant quant) {
    dsl::TensorDesc t;
    t.name = name;
    t.shape = dsl::Shape{1, c, h, w};
    t.type = type;
    t.quant = std::move(quant);
    t.order = like.output().order;
    return t;
}

} // namespace vpuc::algorithms::detail
