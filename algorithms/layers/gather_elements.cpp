// gather_elements: each element picked along an axis by an index of its own (ONNX's
// GatherElements): out[..., i, ...] = data[..., indices[..., i, ...], ...] along `axis`, the
// output of the indices' shape (of the data's rank, no larger than it along the other axes where
// the data's extent is not 1); negative indices count from the end. The indices are a tensor
// (i32, or u8 or i8 without a quantization), computed or constant, read as the data is: a SHAVE
// copy kernel. An index outside [-extent, extent) is clamped into the extent, so that no read
// leaves the data. The device computes one image at a time: data and indices have one batch
// (their first extent, for a rank of 2 or more; data of one image serves every image), and the
// axis is not the batch unless that is 1; the importer gives the tensors a leading unit dimension
// otherwise.
#include "common.h"
#include "logical_index.h"

namespace vpuc::algorithms {

namespace {

bool integer_indices(const detail::InputInfo &in, const dsl::Layer &indices) {
    return (in.type == dsl::ElemType::I32 || in.quantized) && indices.output().quant.empty();
}

dsl::Layer build_gather_elements(const std::string &name, const std::vector<dsl::Layer> &inputs,
                                 const dsl::Attrs &attrs) {
    const std::string what = "gather_elements '" + name + "'";
    const dsl::Layer &input = inputs.at(0), &indices = inputs.at(1);
    detail::input_info(what, input, true);
    if (!integer_indices(detail::input_info(what, indices, true), indices))
        detail::invalid(what, "the indices '" + indices.name() + "' are " +
                                  indices.output().describe() +
                                  "; they must be i32, or u8 or i8 without a quantization");
    const dsl::TensorDesc t = detail::graph_tensor(input.output());
    const dsl::TensorDesc ti = detail::graph_tensor(indices.output());
    const std::vector<int64_t> &data_shape = t.shape.raw(), &index_shape = ti.shape.raw();
    const int64_t rank = t.shape.rank();
    int64_t axis = attrs.get_int("axis");
    if (axis < -rank || axis >= rank)
        detail::invalid(what, "axis " + std::to_string(axis) + " of a tensor of rank " +
                                  std::to_string(rank));
    if (axis < 0) axis += rank;
    if (ti.shape.rank() != rank)
        detail::invalid(what, "indices of rank " + std::to_string(ti.shape.rank()) +
                                  " for data of rank " + std::to_string(rank));
    // Along the other axes the data has the indices' extent at least, or 1: it serves every
    // index there (numpy's take_along_axis broadcasts it so; a lookup table of Gather).
    for (int64_t d = 0; d < rank; ++d)
        if (d != axis && index_shape[size_t(d)] > data_shape[size_t(d)] &&
            data_shape[size_t(d)] != 1)
            detail::invalid(what, "indices of shape " + dsl::to_string(ti.shape) + " for data " +
                                      dsl::to_string(t.shape) + " (axis " + std::to_string(d) +
                                      ")");
    if (rank > 1 && data_shape[0] != index_shape[0] && data_shape[0] != 1)
        detail::invalid(what, "data " + dsl::to_string(t.shape) + " and indices " +
                                  dsl::to_string(ti.shape) +
                                  " of other batches (first extents); the device computes one "
                                  "image of both at a time");
    if (rank > 1 && axis == 0 && data_shape[0] != 1)
        detail::invalid(what, "picks along axis 0, the batch, of " + dsl::to_string(t.shape) +
                                  "; on the device images are computed one at a time");
    dsl::TensorDesc out = input.output();
    out.name = name;
    out.shape = ti.shape;
    const int extent = int(data_shape[size_t(axis)]);
    dsl::Algorithm algorithm = [=](const std::vector<Halide::Func> &funcs) {
        const auto &v = dsl::act_vars();
        std::vector<Halide::Expr> at = detail::logical_coords(out, v.c, v.x, v.y);
        const Halide::Expr index = Halide::cast<int32_t>(detail::read_logical(funcs.at(1), ti, at));
        at[size_t(axis)] =
            Halide::clamp(Halide::select(index < 0, index + extent, index), 0, extent - 1);
        Halide::Func f = detail::named_func(name);
        f(v.c, v.x, v.y) = detail::read_logical(funcs.at(0), t, at);
        return f;
    };
    return dsl::Layer::make("gather_elements", out, {input, indices}, algorithm);
}

} // namespace

void register_layer_gather_elements(dsl::LayerRegistry &registry) {
    dsl::LayerDef def;
    def.op = "gather_elements";
    def.doc = "each element picked along an axis by its own index, a tensor (SHAVE copy)";
    def.inputs = {"data", "indices"};
    def.attrs = {{"axis", dsl::AttrType::Int, int64_t(0), "negative counts from the end", {}}};
    def.build = build_gather_elements;
    // Along H of odd extents, i32 indices of any value (those outside the extent clamped), fewer
    // columns than the data.
    def.example = [](dsl::ElemType type) {
        dsl::TensorDesc indices = detail::example_input("indices", 3, 5, 4, type).output();
        indices.type = dsl::ElemType::I32;
        indices.quant = {};
        dsl::Attrs a;
        a.set("axis", int64_t(2));
        return layer_registry().build(
            "gather_elements", "gather_elements",
            {detail::example_input("in", 3, 7, 9, type), dsl::Layer::input(indices)}, a);
    };
    registry.add(std::move(def));
}

} // namespace vpuc::algorithms
