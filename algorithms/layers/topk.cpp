// topk: the k largest (or smallest) elements along one axis and their indices, ONNX's TopK.
// One SHAVE kernel computes both outputs, values (the input's type and quantization) and
// indices (i32: the device's integers; ONNX's int64 indices along an axis fit). Sorted, ties in
// index order, as ONNX asks; int8 values compare as stored, which orders them as their real
// values (a positive scale).
#include "common.h"

namespace vpuc::algorithms {

namespace {

dsl::Layer build_topk(const std::string &name, const std::vector<dsl::Layer> &inputs,
                      const dsl::Attrs &attrs) {
    const std::string what = "topk '" + name + "'";
    const dsl::Layer &input = inputs.at(0);
    const detail::InputInfo in = detail::input_info(what, input);
    const bool largest = attrs.get_int("largest") != 0;
    const dsl::Dim axis = detail::device_axis_of(what, input.output(), attrs.get_int("axis"));
    const int dim = detail::halide_dim(axis);
    std::vector<int64_t> extent = {in.c, in.w, in.h}; // Halide's (c, x, y)
    const int64_t along = extent[size_t(dim)];
    const int64_t k = attrs.get_int("k");
    if (k > along)
        detail::invalid(what, "k = " + std::to_string(k) + " is more than the " +
                                  std::to_string(along) + " elements along axis " +
                                  std::to_string(attrs.get_int("axis")));
    dsl::Algorithm algorithm = [=](const std::vector<Halide::Func> &funcs) {
        const auto &v = dsl::act_vars();
        const Halide::Func &x = funcs.at(0);
        const std::vector<Halide::Expr> here = {v.c, v.x, v.y};
        auto at = [&](const Halide::Expr &i) {
            std::vector<Halide::Expr> args = here;
            args[size_t(dim)] = i;
            return args;
        };
        // An element's rank along the axis: how many elements come before it, the better ones
        // and the equal ones of lower index. Ranks are a permutation of [0, along).
        Halide::RDom r(0, int(along), detail::rdom_name(name + "_r"));
        const Halide::Expr other = x(at(r.x)), mine = x(here);
        const Halide::Expr better = largest ? other > mine : other < mine;
        Halide::Func rank = detail::named_func(name + "_rank");
        rank(v.c, v.x, v.y) =
            Halide::sum(Halide::select(better || (other == mine && r.x < here[size_t(dim)]), 1, 0));
        // Output position p takes the element of rank p.
        Halide::RDom s(0, int(along), detail::rdom_name(name + "_s"));
        Halide::Func index = detail::named_func(name + "_index");
        index(v.c, v.x, v.y) =
            Halide::sum(Halide::select(rank(at(s.x)) == here[size_t(dim)], s.x, 0));
        Halide::Func out = detail::named_func(name);
        const Halide::Expr i = index(v.c, v.x, v.y);
        out(v.c, v.x, v.y) = Halide::Tuple(x(at(Halide::clamp(i, 0, int(along) - 1))), i);
        return out;
    };
    extent[size_t(dim)] = k;
    dsl::TensorDesc values = detail::output_desc(name, input, extent[0], extent[1], extent[2],
                                                 in.type, input.output().quant);
    dsl::TensorDesc indices = values;
    indices.type = dsl::ElemType::I32;
    indices.quant = {};
    return dsl::Layer::make("topk", {values, indices}, {input}, algorithm);
}

} // namespace

void register_layer_topk(dsl::LayerRegistry &registry) {
    dsl::LayerDef def;
    def.op = "topk";
    def.doc = "the k largest or smallest along an axis: values and i32 indices (SHAVE)";
    def.inputs = {"input"};
    auto flag = [](const dsl::AttrValue &a) -> std::string {
        const int64_t v = std::get<int64_t>(a);
        return v == 0 || v == 1 ? "" : "must be 0 or 1";
    };
    def.attrs = {
        {"k", dsl::AttrType::Int, std::nullopt, "elements kept",
         [](const dsl::AttrValue &a) -> std::string {
             return std::get<int64_t>(a) >= 1 ? "" : "must be at least 1";
         }},
        {"axis",
         dsl::AttrType::Int,
         int64_t(1),
         "logical axis, not the batch; negative counts from the end",
         {}},
        {"largest", dsl::AttrType::Int, int64_t(1), "1: the largest, 0: the smallest", flag},
        // Results are always sorted, which ONNX allows for sorted = 0 too.
        {"sorted", dsl::AttrType::Int, int64_t(1), "1 or 0: the results come sorted", flag}};
    def.build = build_topk;
    // Each output reads the whole input along the axis.
    def.unsplittable_dims = [](const dsl::Layer &layer) {
        return std::vector<dsl::Dim>{detail::device_axis_of(
            "topk '" + layer.name() + "'", layer.output(), layer.attrs().get_int("axis"))};
    };
    def.example = [](dsl::ElemType type) {
        dsl::Attrs a;
        a.set("k", int64_t(5));
        return layer_registry().build("topk", "topk", {detail::example_input("in", 21, 9, 6, type)},
                                      a);
    };
    registry.add(std::move(def));
}

} // namespace vpuc::algorithms
