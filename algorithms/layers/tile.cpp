// tile: the input repeated along each axis (ONNX's Tile with constant repeats). A SHAVE copy
// kernel; the batch (axis 0) is not repeated.
#include "common.h"
#include "logical_index.h"

namespace vpuc::algorithms {

namespace {

dsl::Layer build_tile(const std::string &name, const std::vector<dsl::Layer> &inputs,
                      const dsl::Attrs &attrs) {
    const std::string what = "tile '" + name + "'";
    const dsl::Layer &input = inputs.at(0);
    detail::input_info(what, input, true);
    const dsl::TensorDesc t = detail::graph_tensor(input.output());
    const std::vector<int64_t> &extents = t.shape.raw();
    const std::vector<int64_t> repeats = attrs.get_ints("repeats");
    if (repeats.size() != extents.size())
        detail::invalid(what, std::to_string(repeats.size()) + " repeats for a tensor of rank " +
                                  std::to_string(extents.size()));
    std::vector<int64_t> shape;
    for (size_t d = 0; d < extents.size(); ++d) {
        if (repeats[d] < 1)
            detail::invalid(what, "repeats of axis " + std::to_string(d) + " must be at least 1");
        shape.push_back(extents[d] * repeats[d]);
    }
    dsl::TensorDesc out = input.output();
    out.name = name;
    out.shape = dsl::Shape(shape);
    detail::require_same_batch(what, t, out);
    dsl::Algorithm algorithm = [=](const std::vector<Halide::Func> &funcs) {
        const auto &v = dsl::act_vars();
        std::vector<Halide::Expr> at = detail::logical_coords(out, v.c, v.x, v.y);
        for (size_t d = size_t(detail::first_image_axis(t)); d < extents.size(); ++d)
            at[d] = at[d] % int(extents[d]);
        Halide::Func f = detail::named_func(name);
        f(v.c, v.x, v.y) = detail::read_logical(funcs.at(0), t, at);
        return f;
    };
    return dsl::Layer::make("tile", out, {input}, algorithm);
}

} // namespace

void register_layer_tile(dsl::LayerRegistry &registry) {
    dsl::LayerDef def;
    def.op = "tile";
    def.doc = "the input repeated along each axis (SHAVE copy)";
    def.inputs = {"input"};
    def.attrs = {{"repeats",
                  dsl::AttrType::Ints,
                  std::nullopt,
                  "times along each axis (1 along the batch)",
                  {}}};
    def.build = build_tile;
    def.example = [](dsl::ElemType type) {
        dsl::Attrs a;
        a.set("repeats", std::vector<int64_t>{1, 2, 3, 1});
        return layer_registry().build("tile", "tile", {detail::example_input("in", 5, 11, 7, type)},
                                      a);
    };
    registry.add(std::move(def));
}

} // namespace vpuc::algorithms
