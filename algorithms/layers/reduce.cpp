// reduce: ONNX's ReduceSum, ReduceMean, ReduceMax, ReduceMin, ReduceProd, ReduceL1, ReduceL2,
// ReduceLogSum, ReduceLogSumExp and ReduceSumSquare over a set of logical axes, in float32 on
// the SHAVEs. The reduced axes stay with extent 1 (ONNX's keepdims 1; a reshape drops them).
// int8 tensors: max and min keep the input's quantization (a maximum stays in the input's
// range, and compares as stored: a positive scale keeps the order); the other kinds leave the
// input's range, and take f16 or f32.
#include <algorithm>
#include <limits>

#include "common.h"

namespace vpuc::algorithms {

namespace {

const std::vector<std::string> &kinds() {
    static const std::vector<std::string> names = {
        "sum", "mean", "max", "min", "prod", "l1", "l2", "log_sum", "log_sum_exp", "sum_square"};
    return names;
}

// The Halide dimensions (of (c, x, y)) of the reduced axes, each once, in increasing order.
std::vector<int> reduced_dims(const std::string &what, const dsl::TensorDesc &t,
                              const std::vector<int64_t> &axes) {
    std::vector<int> dims;
    for (int64_t axis : axes) {
        const int dim = detail::halide_dim(detail::device_axis_of(what, t, axis));
        if (std::find(dims.begin(), dims.end(), dim) != dims.end())
            detail::invalid(what, "axis " + std::to_string(axis) + " is given twice");
        dims.push_back(dim);
    }
    std::sort(dims.begin(), dims.end());
    return dims;
}

dsl::Layer build_reduce(const std::string &name, const std::vector<dsl::Layer> &inputs,
                        const dsl::Attrs &attrs) {
    const std::string what = "reduce '" + name + "'";
    const dsl::Layer &input = inputs.at(0);
    const detail::InputInfo in = detail::input_info(what, input);
    const std::string kind = attrs.get_string("kind");
    const bool extremum = kind == "max" || kind == "min";
    if (in.quantized && !extremum)
        detail::invalid(what, "input '" + input.output().name + "' is " + dsl::to_string(in.type) +
                                  "; reduce " + kind +
                                  " takes f16 or f32 (max and min take int8 too)");
    const std::vector<int> dims = reduced_dims(what, input.output(), attrs.get_ints("axes"));
    std::vector<int64_t> extent = {in.c, in.w, in.h}; // Halide's (c, x, y)
    int64_t count = 1;
    for (int d : dims) count *= extent[size_t(d)];
    dsl::Algorithm algorithm = [=](const std::vector<Halide::Func> &funcs) {
        const auto &v = dsl::act_vars();
        const std::vector<Halide::Var> all = {v.c, v.x, v.y};
        Halide::Region region;
        for (int d : dims) region.push_back({0, int(extent[size_t(d)])});
        Halide::RDom r(region, detail::rdom_name(name + "_r"));
        std::vector<Halide::Expr> at(all.begin(), all.end());
        for (size_t k = 0; k < dims.size(); ++k) at[size_t(dims[k])] = r[int(k)];
        // Extrema compare the stored values, exact in float32 for every device type.
        const Halide::Expr x = extremum ? Halide::cast<float>(funcs.at(0)(at))
                                        : detail::dequantize(funcs.at(0)(at), in);
        Halide::Expr y;
        if (kind == "max") {
            y = Halide::maximum(x);
        } else if (kind == "min") {
            y = Halide::minimum(x);
        } else if (kind == "prod") {
            y = Halide::product(x);
        } else if (kind == "log_sum_exp") {
            // Subtracting the largest finite maximum keeps exp from overflowing; an infinite
            // one gives log(sum(exp(x))) itself: +inf, or -inf for a row of -inf.
            Halide::Func top = detail::named_func(name + "_max");
            top(all) = Halide::maximum(x);
            const Halide::Expr m = top(all);
            const Halide::Expr shift = Halide::select(Halide::is_finite(m), m, 0.0f);
            y = shift + Halide::log(Halide::sum(Halide::exp(x - shift)));
        } else {
            const Halide::Expr term = kind == "l1"                           ? Halide::abs(x)
                                      : kind == "l2" || kind == "sum_square" ? x * x
                                                                             : x;
            const Halide::Expr total = Halide::sum(term);
            y = kind == "mean"      ? total / float(count)
                : kind == "l2"      ? Halide::sqrt(total)
                : kind == "log_sum" ? Halide::log(total)
                                    : total;
        }
        Halide::Func out = detail::named_func(name);
        out(v.c, v.x, v.y) = Halide::cast(in.halide_type, y);
        return out;
    };
    for (int d : dims) extent[size_t(d)] = 1;
    const dsl::Quant q = extremum ? input.output().quant : dsl::Quant{};
    return dsl::Layer::make(
        "reduce", detail::output_desc(name, input, extent[0], extent[1], extent[2], in.type, q),
        {input}, algorithm);
}

} // namespace

void register_layer_reduce(dsl::LayerRegistry &registry) {
    dsl::LayerDef def;
    def.op = "reduce";
    def.doc = "sum, mean, max, min, prod, l1, l2, log_sum, log_sum_exp or sum_square over "
              "axes, kept with extent 1, in float32, on the SHAVEs";
    def.inputs = {"input"};
    def.attrs = {{"kind", dsl::AttrType::String, std::nullopt,
                  "sum, mean, max, min, prod, l1, l2, log_sum, log_sum_exp or sum_square",
                  [](const dsl::AttrValue &a) -> std::string {
                      const std::string &kind = std::get<std::string>(a);
                      return std::find(kinds().begin(), kinds().end(), kind) != kinds().end()
                                 ? ""
                                 : "must be one of sum, mean, max, min, prod, l1, l2, log_sum, "
                                   "log_sum_exp, sum_square";
                  }},
                 {"axes", dsl::AttrType::Ints, std::nullopt,
                  "logical axes, not the batch; negative count from the end",
                  [](const dsl::AttrValue &a) -> std::string {
                      return std::get<std::vector<int64_t>>(a).empty()
                                 ? "must name at least one axis"
                                 : "";
                  }}};
    def.build = build_reduce;
    // Every output element reads the whole input along the reduced axes.
    def.unsplittable_dims = [](const dsl::Layer &layer) {
        std::vector<dsl::Dim> dims;
        for (int64_t axis : layer.attrs().get_ints("axes"))
            dims.push_back(
                detail::device_axis_of("reduce '" + layer.name() + "'", layer.output(), axis));
        return dims;
    };
    // int8: the maximum over C and W; f16: the log-sum-exp over H and W.
    def.example = [](dsl::ElemType type) {
        const bool int8 = dsl::is_quantized_int(type);
        dsl::Attrs a;
        a.set("kind", std::string(int8 ? "max" : "log_sum_exp"));
        a.set("axes", int8 ? std::vector<int64_t>{1, 3} : std::vector<int64_t>{2, 3});
        return layer_registry().build("reduce", "reduce",
                                      {detail::example_input("in", 19, 11, 7, type)}, a);
    };
    registry.add(std::move(def));
}

} // namespace vpuc::algorithms
