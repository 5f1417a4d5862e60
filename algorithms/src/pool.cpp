// Max and average pooling over a kernel window, with the DPU's per-tensor output stage.
#include <cmath>
#include <limits>

#include "algorithms/layers.h"
#include "common.h"

namespace vpuc::algorithms {

using Halide::Expr;
using Halide::Func;
using namespace detail;

namespace {

dsl::Layer pool(bool is_max, const std::string &name, const dsl::Layer &input, const PoolParams &p,
                const std::optional<QuantOutput> &quant_out) {
    const char *op = is_max ? "max_pool" : "avg_pool";
    const std::string what = std::string(op) + " '" + name + "'";
    const InputInfo in = input_info(what, input);
    const int64_t ow =
        window_extent(what, in.w, p.pad_left, p.pad_right, p.kernel_w, p.stride_w, 1);
    const int64_t oh =
        window_extent(what, in.h, p.pad_top, p.pad_bottom, p.kernel_h, p.stride_h, 1);
    // A window entirely in the padding would have nothing to pool.
    if (p.pad_left >= p.kernel_w || p.pad_right >= p.kernel_w || p.pad_top >= p.kernel_h ||
        p.pad_bottom >= p.kernel_h)
        invalid(what, "every pad must be smaller than the kernel");
    const bool padded = p.pad_left || p.pad_right || p.pad_top || p.pad_bottom;
    const float area = float(p.kernel_w * p.kernel_h);

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

    // Padding contributes nothing: 0 to a sum, the lowest value to a max.
    const Expr lowest =
        in.quantized ? Halide::Int(32).min() : Expr(-std::numeric_limits<float>::infinity());
    const Expr zero = in.quantized ? Expr(0) : Expr(0.0f);
    const Expr identity = is_max ? lowest : zero;

    dsl::Algorithm algorithm = [=](const std::vector<Func> &inputs) {
        const auto &v = dsl::act_vars();
        Halide::RDom r({{0, p.kernel_w}, {0, p.kernel_h}},
                       Halide::Internal::unique_name(name + "_r"));
        std::vector<Expr> at = {v.c, window_coord(v.x, p.stride_w, r.x, 1, p.pad_left),
                                window_coord(v.y, p.stride_h, r.y, 1, p.pad_top)};
        Expr operand = padded ? padded_input(name, inputs.at(0), in, identity)(at)
                              : mac_operand(inputs.at(0)(at), in);
        Func acc = named_func(name + "_acc");
        acc(v.c, v.x, v.y) = identity;
        if (is_max)
            acc(v.c, v.x, v.y) = Halide::max(acc(v.c, v.x, v.y), operand);
        else
            acc(v.c, v.x, v.y) += operand;
        Func out = named_func(name);
        if (in.quantized)
            out(v.c, v.x, v.y) = requantize(acc(v.c, v.x, v.y), Expr(q.requant.mult),
                                            Expr(q.requant.shift), int_stage, out_type);
        else
            out(v.c, v.x, v.y) = apply_float_ppe(acc(v.c, v.x, v.y) * (is_max ? 1.0f : 1.0f / area),
                                                 float_stage, out_type);
        return out;
    };
    return dsl::Layer::make(op, output_desc(name, input, in.c, ow, oh, q.type, q.quant), {input},
                            algorithm);
}

} // namespace

dsl::Layer max_pool(const std::string &name, const dsl::Layer &input, const PoolParams &p,
                    const std::optional<QuantOutput> &out) {
    return pool(true, name, input, p, out);
}

dsl::Layer avg_pool(const std::string &name, const dsl::Layer &input, const PoolParams &p,
                    const std::optional<QuantOutput> &out) {
    return pool(false, name, input, p, out);
}

} // namespace vpuc::algorithms
