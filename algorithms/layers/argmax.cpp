// argmax, argmin: the index of the largest (smallest) element along one axis, ONNX's ArgMax and
// ArgMin, the axis kept with extent 1; the first such index, or the last (select_last_index).
// Indices are i32, the device's integers (ONNX's int64 indices along an axis fit), as topk's.
// hardmax: ONNX's Hardmax, 1 at the first largest element along the axis and 0 elsewhere, in
// the input's type (int8: a probability's quantization, as softmax's). One SHAVE kernel each;
// int8 elements compare as stored, which orders them as their real values (a positive scale).
#include "common.h"

namespace vpuc::algorithms {

namespace {

// What the three layers share: the input checked and the Halide dimension of the axis.
struct Along {
    detail::InputInfo in;
    int dim = 0; // of Halide's (c, x, y)
    int64_t extent = 1;
};

Along along_axis(const std::string &what, const dsl::Layer &input, int64_t axis) {
    Along a;
    a.in = detail::input_info(what, input);
    a.dim = detail::halide_dim(detail::device_axis_of(what, input.output(), axis));
    a.extent = std::vector<int64_t>{a.in.c, a.in.w, a.in.h}[size_t(a.dim)];
    return a;
}

// The index along `a`'s axis of the largest (or smallest) element of the line through each
// point, the first or the last of equal ones; it does not depend on the position along the axis,
// so the line's reductions are computed once, at position 0.
Halide::Expr extreme_index(const std::string &name, const Halide::Func &input, const Along &a,
                           bool largest, bool last) {
    const auto &v = dsl::act_vars();
    const std::vector<Halide::Var> all = {v.c, v.x, v.y};
    auto along = [&](const Halide::Expr &i) {
        std::vector<Halide::Expr> args(all.begin(), all.end());
        args[size_t(a.dim)] = i;
        return args;
    };
    Halide::RDom r(0, int(a.extent), detail::rdom_name(name + "_r"));
    const Halide::Expr x = Halide::cast<float>(input(along(r.x))); // exact for every device type
    Halide::Func extreme = detail::named_func(name + "_extreme");
    extreme(all) = largest ? Halide::maximum(x) : Halide::minimum(x);
    const Halide::Expr hit = x == extreme(along(0));
    Halide::Func index = detail::named_func(name + "_index");
    index(all) = last ? Halide::maximum(Halide::select(hit, r.x, -1))
                      : Halide::minimum(Halide::select(hit, r.x, int(a.extent)));
    return index(along(0));
}

dsl::Layer build_arg(const std::string &op, const std::string &name,
                     const std::vector<dsl::Layer> &inputs, const dsl::Attrs &attrs) {
    const dsl::Layer &input = inputs.at(0);
    const Along a = along_axis(op + " '" + name + "'", input, attrs.get_int("axis"));
    const bool largest = op == "argmax", last = attrs.get_int("select_last_index") != 0;
    dsl::Algorithm algorithm = [=](const std::vector<Halide::Func> &funcs) {
        const auto &v = dsl::act_vars();
        Halide::Func out = detail::named_func(name);
        out(v.c, v.x, v.y) = extreme_index(name, funcs.at(0), a, largest, last);
        return out;
    };
    std::vector<int64_t> extent = {a.in.c, a.in.w, a.in.h};
    extent[size_t(a.dim)] = 1;
    return dsl::Layer::make(
        op,
        detail::output_desc(name, input, extent[0], extent[1], extent[2], dsl::ElemType::I32, {}),
        {input}, algorithm);
}

dsl::Layer build_hardmax(const std::string &name, const std::vector<dsl::Layer> &inputs,
                         const dsl::Attrs &attrs) {
    const dsl::Layer &input = inputs.at(0);
    const Along a = along_axis("hardmax '" + name + "'", input, attrs.get_int("axis"));
    const dsl::Quant q = a.in.quantized
                             ? detail::probability_quant(a.in, detail::probability_quant_of(attrs))
                             : dsl::Quant{};
    dsl::Algorithm algorithm = [=](const std::vector<Halide::Func> &funcs) {
        const auto &v = dsl::act_vars();
        const Halide::Expr k = std::vector<Halide::Expr>{v.c, v.x, v.y}[size_t(a.dim)];
        const Halide::Expr first = extreme_index(name, funcs.at(0), a, true, false);
        const Halide::Expr y = Halide::select(k == first, 1.0f, 0.0f);
        Halide::Func out = detail::named_func(name);
        out(v.c, v.x, v.y) =
            a.in.quantized ? detail::quantize(y, q, a.in.type) : Halide::cast(a.in.halide_type, y);
        return out;
    };
    return dsl::Layer::make("hardmax",
                            detail::output_desc(name, input, a.in.c, a.in.w, a.in.h, a.in.type, q),
                            {input}, algorithm);
}

dsl::AttrSpec axis_spec() {
    return {"axis",
            dsl::AttrType::Int,
            int64_t(1),
            "logical axis, not the batch; negative counts from the end",
            {}};
}

// Each output element reads the whole input along the axis.
std::vector<dsl::Dim> axis_of(const dsl::Layer &layer) {
    return {detail::device_axis_of(layer.op() + " '" + layer.name() + "'", layer.output(),
                                   layer.attrs().get_int("axis"))};
}

// Odd extents, along W: int8 values of 256 steps tie often, fp16 ones less.
dsl::Layer example(const std::string &op, dsl::ElemType type) {
    return layer_registry().build(op, op, {detail::example_input("in", 19, 11, 7, type)},
                                  dsl::Attrs().set("axis", int64_t(3)));
}

dsl::LayerDef arg_def(const std::string &op, const std::string &doc) {
    dsl::LayerDef def;
    def.op = op;
    def.doc = doc;
    def.inputs = {"input"};
    def.attrs = {axis_spec(),
                 {"select_last_index", dsl::AttrType::Int, int64_t(0),
                  "1: the last of equal elements, 0: the first",
                  [](const dsl::AttrValue &a) -> std::string {
                      const int64_t v = std::get<int64_t>(a);
                      return v == 0 || v == 1 ? "" : "must be 0 or 1";
                  }}};
    def.build = [op](const std::string &name, const std::vector<dsl::Layer> &inputs,
                     const dsl::Attrs &attrs) { return build_arg(op, name, inputs, attrs); };
    def.unsplittable_dims = axis_of;
    def.example = [op](dsl::ElemType type) { return example(op, type); };
    return def;
}

} // namespace

void register_layer_argmax(dsl::LayerRegistry &registry) {
    registry.add(arg_def("argmax", "the i32 index of the largest element along an axis, kept "
                                   "with extent 1 (SHAVE)"));
    registry.add(arg_def("argmin", "the i32 index of the smallest element along an axis, kept "
                                   "with extent 1 (SHAVE)"));
    dsl::LayerDef hardmax;
    hardmax.op = "hardmax";
    hardmax.doc = "1 at the first largest element along an axis, 0 elsewhere (SHAVE)";
    hardmax.inputs = {"input"};
    hardmax.attrs = {axis_spec()};
    for (auto &spec : detail::probability_specs()) hardmax.attrs.push_back(spec);
    hardmax.build = build_hardmax;
    hardmax.unsplittable_dims = axis_of;
    hardmax.example = [](dsl::ElemType type) { return example("hardmax", type); };
    registry.add(std::move(hardmax));
}

} // namespace vpuc::algorithms
