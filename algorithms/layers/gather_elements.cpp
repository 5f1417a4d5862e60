// gather_elements: each element picked along an axis by an index of its own (ONNX's
// GatherElements): out[..., i, ...] = data[..., indices[..., i, ...], ...] along `axis`, the
// output of the indices' shape (of the data's rank, no larger than it along the other axes);
// negative indices count from the end. The indices are constant: a SHAVE copy kernel carries
// them. One image (a batch of 1, rank 2 or more), as the indices differ per image; the importer
// gives the tensors a leading unit dimension.
#include "common.h"
#include "logical_index.h"

namespace vpuc::algorithms {

namespace {

dsl::Layer build_gather_elements(const std::string &name, const std::vector<dsl::Layer> &inputs,
                                 const dsl::Attrs &attrs) {
    const std::string what = "gather_elements '" + name + "'";
    const dsl::Layer &input = inputs.at(0);
    detail::input_info(what, input, true);
    const dsl::TensorDesc t = detail::graph_tensor(input.output());
    const std::vector<int64_t> &data_shape = t.shape.raw();
    const int64_t rank = t.shape.rank();
    int64_t axis = attrs.get_int("axis");
    if (axis < -rank || axis >= rank)
        detail::invalid(what, "axis " + std::to_string(axis) + " of a tensor of rank " +
                                  std::to_string(rank));
    if (axis < 0) axis += rank;
    const dsl::ConstValues indices = dsl::const_values(attrs.get_tensor("indices"), what);
    if (indices.is_float()) detail::invalid(what, "indices must be integers");
    if (int64_t(indices.shape.size()) != rank)
        detail::invalid(what, "indices of rank " + std::to_string(indices.shape.size()) +
                                  " for data of rank " + std::to_string(rank));
    for (int64_t d = 0; d < rank; ++d)
        if (indices.shape[size_t(d)] < 1 ||
            (d != axis && indices.shape[size_t(d)] > data_shape[size_t(d)]))
            detail::invalid(what, "indices of shape " + dsl::to_string(dsl::Shape(indices.shape)) +
                                      " for data " + dsl::to_string(t.shape) + " (axis " +
                                      std::to_string(d) + ")");
    if (rank > 1 && (data_shape[0] != 1 || indices.shape[0] != 1))
        detail::invalid(what, "data " + dsl::to_string(t.shape) + " and indices " +
                                  dsl::to_string(dsl::Shape(indices.shape)) +
                                  " of a batch above 1; the device computes one image at a "
                                  "time, and these indices are for one image");
    const int64_t extent = data_shape[size_t(axis)];
    Halide::Buffer<int32_t> table(static_cast<int>(indices.elements()));
    for (int64_t e = 0; e < indices.elements(); ++e) {
        const int64_t index = indices.ints[size_t(e)];
        if (index < -extent || index >= extent)
            detail::invalid(what, "index " + std::to_string(index) + " outside [" +
                                      std::to_string(-extent) + ", " + std::to_string(extent) +
                                      ")");
        table(int(e)) = int32_t(index < 0 ? index + extent : index);
    }
    dsl::TensorDesc out = input.output();
    out.name = name;
    out.shape = dsl::Shape(indices.shape);
    const int first = detail::first_image_axis(t);
    dsl::Algorithm algorithm = [=](const std::vector<Halide::Func> &funcs) {
        const auto &v = dsl::act_vars();
        std::vector<Halide::Expr> at = detail::logical_coords(out, v.c, v.x, v.y);
        // The element's index in the output's logical order (of its one image).
        Halide::Expr flat = 0;
        for (int64_t d = first; d < rank; ++d)
            flat = flat * int(indices.shape[size_t(d)]) + at[size_t(d)];
        at[size_t(axis)] = table(Halide::clamp(flat, 0, int(table.number_of_elements() - 1)));
        Halide::Func f = detail::named_func(name);
        f(v.c, v.x, v.y) = detail::read_logical(funcs.at(0), t, at);
        return f;
    };
    return dsl::Layer::make("gather_elements", out, {input}, algorithm);
}

} // namespace

void register_layer_gather_elements(dsl::LayerRegistry &registry) {
    dsl::LayerDef def;
    def.op = "gather_elements";
    def.doc = "each element picked along an axis by its own constant index (SHAVE copy)";
    def.inputs = {"data"};
    def.attr_inputs = {"indices"};
    def.attrs = {{"indices",
                  dsl::AttrType::Tensor,
                  std::nullopt,
                  "integers of the output's shape, in [-extent, extent); negative count from the "
                  "end",
                  {}},
                 {"axis", dsl::AttrType::Int, int64_t(0), "negative counts from the end", {}}};
    def.build = build_gather_elements;
    // Along H of odd extents, indices of every sign, fewer columns than the data.
    def.example = [](dsl::ElemType type) {
        dsl::ConstValues indices{dsl::ElemType::I64, {1, 3, 4, 5}, {}, {}};
        for (int64_t k = 0; k < indices.elements(); ++k) indices.ints.push_back(k * 5 % 17 - 8);
        dsl::Attrs a;
        a.set("indices", dsl::const_buffer(indices));
        a.set("axis", int64_t(2));
        return layer_registry().build("gather_elements", "gather_elements",
                                      {detail::example_input("in", 3, 7, 9, type)}, a);
    };
    registry.add(std::move(def));
}

} // namespace vpuc::algorithms
