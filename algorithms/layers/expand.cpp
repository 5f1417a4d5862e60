// expand: the input broadcast to a shape by numpy's rules (ONNX's Expand with a constant shape):
// the shape aligns with the input's last axes, and an extent of 1 takes the other one. The
// output keeps the input's rank (a longer shape is the importer's unsqueeze first). A SHAVE
// copy kernel; the batch (axis 0) is not broadcast.
#include "common.h"
#include "logical_index.h"

namespace vpuc::algorithms {

namespace {

dsl::Layer build_expand(const std::string &name, const std::vector<dsl::Layer> &inputs,
                        const dsl::Attrs &attrs) {
    const std::string what = "expand '" + name + "'";
    const dsl::Layer &input = inputs.at(0);
    detail::input_info(what, input, true);
    const dsl::TensorDesc t = detail::graph_tensor(input.output());
    const std::vector<int64_t> &extents = t.shape.raw();
    const std::vector<int64_t> to = attrs.get_ints("shape");
    if (to.size() > extents.size())
        detail::invalid(what, "a shape of rank " + std::to_string(to.size()) +
                                  " for an input of rank " + std::to_string(extents.size()) +
                                  "; give the input leading unit dimensions first");
    std::vector<int64_t> shape = extents;
    const size_t skip = extents.size() - to.size();
    for (size_t d = skip; d < extents.size(); ++d) {
        const int64_t want = to[d - skip];
        if (want != 1 && extents[d] != 1 && want != extents[d])
            detail::invalid(what, "an extent of " + std::to_string(extents[d]) +
                                      " does not broadcast to " + std::to_string(want) + " (axis " +
                                      std::to_string(d) + ")");
        if (extents[d] == 1) shape[d] = want;
        if (want < 1) detail::invalid(what, "extents must be at least 1");
    }
    dsl::TensorDesc out = input.output();
    out.name = name;
    out.shape = dsl::Shape(shape);
    detail::require_same_batch(what, t, out);
    dsl::Algorithm algorithm = [=](const std::vector<Halide::Func> &funcs) {
        const auto &v = dsl::act_vars();
        std::vector<Halide::Expr> at = detail::logical_coords(out, v.c, v.x, v.y);
        for (size_t d = size_t(detail::first_image_axis(t)); d < extents.size(); ++d)
            if (extents[d] == 1) at[d] = 0;
        Halide::Func f = detail::named_func(name);
        f(v.c, v.x, v.y) = detail::read_logical(funcs.at(0), t, at);
        return f;
    };
    return dsl::Layer::make("expand", out, {input}, algorithm);
}

} // namespace

void register_layer_expand(dsl::LayerRegistry &registry) {
    dsl::LayerDef def;
    def.op = "expand";
    def.doc = "the input broadcast to a shape by numpy's rules (SHAVE copy)";
    def.inputs = {"input"};
    def.attrs = {{"shape",
                  dsl::AttrType::Ints,
                  std::nullopt,
                  "aligned with the input's last axes; 1 keeps the input's extent",
                  {}}};
    def.build = build_expand;
    // 1x1x7x1 to 1x5x7x9: broadcast along C and W, H kept by a 1 in the shape.
    def.example = [](dsl::ElemType type) {
        dsl::Attrs a;
        a.set("shape", std::vector<int64_t>{5, 1, 9});
        return layer_registry().build("expand", "expand",
                                      {detail::example_input("in", 1, 1, 7, type)}, a);
    };
    registry.add(std::move(def));
}

} // namespace vpuc::algorithms
