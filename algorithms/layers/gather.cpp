// gather: entries of the data along an axis, picked by constant indices (ONNX's Gather;
// negative indices count from the end). Of a constant it folds at compile time (what shape
// arithmetic does with a Shape's output); of a computed tensor it is a SHAVE copy kernel that
// carries the indices, along any axis but the batch.
#include "common.h"

namespace vpuc::algorithms {

namespace {

// The checked parts of a gather of data of shape `data_shape`: the axis counted from the
// front, the indices made non-negative, and the output's shape.
struct GatherPlan {
    int64_t axis = 0;
    std::vector<int64_t> indices_shape;
    std::vector<int64_t> indices; // in [0, extent)
    std::vector<int64_t> shape;
};

GatherPlan gather_plan(const std::string &what, const std::vector<int64_t> &data_shape,
                       const dsl::Attrs &attrs) {
    const int64_t rank = int64_t(data_shape.size());
    GatherPlan plan;
    plan.axis = attrs.get_int("axis");
    if (plan.axis < -rank || plan.axis >= rank)
        detail::invalid(what, "axis " + std::to_string(plan.axis) + " of a tensor of rank " +
                                  std::to_string(rank));
    if (plan.axis < 0) plan.axis += rank;
    const dsl::ConstValues indices = dsl::const_values(attrs.get_tensor("indices"), what);
    if (indices.is_float()) detail::invalid(what, "indices must be integers");
    if (indices.elements() == 0) detail::invalid(what, "no indices: the output would be empty");
    const int64_t extent = data_shape[size_t(plan.axis)];
    for (int64_t index : indices.ints) {
        if (index < -extent || index >= extent)
            detail::invalid(what, "index " + std::to_string(index) + " outside [" +
                                      std::to_string(-extent) + ", " + std::to_string(extent) +
                                      ")");
        plan.indices.push_back(index < 0 ? index + extent : index);
    }
    plan.indices_shape = indices.shape;
    plan.shape.assign(data_shape.begin(), data_shape.begin() + plan.axis);
    plan.shape.insert(plan.shape.end(), indices.shape.begin(), indices.shape.end());
    plan.shape.insert(plan.shape.end(), data_shape.begin() + plan.axis + 1, data_shape.end());
    if (plan.shape.size() > size_t(dsl::kMaxRank))
        detail::invalid(what,
                        "the output would have a rank above " + std::to_string(dsl::kMaxRank));
    return plan;
}

// The product of `shape`'s extents in [from, to).
int64_t extents(const std::vector<int64_t> &shape, size_t from, size_t to) {
    int64_t product = 1;
    for (size_t d = from; d < to; ++d) product *= shape[d];
    return product;
}

Halide::Buffer<> fold_gather(const std::string &name, const std::vector<dsl::Layer> &inputs,
                             const dsl::Attrs &attrs) {
    const dsl::ConstValues data = dsl::const_values(inputs.at(0));
    const GatherPlan plan = gather_plan("gather '" + name + "'", data.shape, attrs);
    const size_t axis = size_t(plan.axis);
    const int64_t extent = data.shape[axis];
    const int64_t inner = extents(data.shape, axis + 1, data.shape.size());
    const int64_t picked = int64_t(plan.indices.size());
    // An output element's flat index is ((outer * picked) + k) * inner + i: it reads
    // ((outer * extent) + indices[k]) * inner + i.
    return dsl::const_buffer(dsl::pick_elements(data, plan.shape, [&](const auto &index) {
        int64_t flat = 0;
        for (size_t d = 0; d < index.size(); ++d) flat = flat * plan.shape[d] + index[d];
        const int64_t i = flat % inner, k = flat / inner % picked, outer = flat / inner / picked;
        return (outer * extent + plan.indices[size_t(k)]) * inner + i;
    }));
}

dsl::Layer build_gather(const std::string &name, const std::vector<dsl::Layer> &inputs,
                        const dsl::Attrs &attrs) {
    const std::string what = "gather '" + name + "'";
    const dsl::Layer &input = inputs.at(0);
    const detail::InputInfo in = detail::input_info(what, input, true);
    const dsl::TensorDesc &t = input.output();
    const std::vector<int64_t> &data_shape = t.shape.raw();
    const GatherPlan plan = gather_plan(what, data_shape, attrs);
    if (data_shape.size() > 1 && plan.axis == 0)
        detail::invalid(what, "picks along axis 0, the batch; on the device images are "
                              "computed one at a time");
    dsl::TensorDesc result = t;
    result.name = name;
    result.shape = dsl::Shape(plan.shape);
    if (result.shape.rank() != t.shape.rank())
        result.order = result.shape.rank() == 4 ? dsl::DimsOrder::NCHW()
                                                : dsl::DimsOrder::identity(result.shape.rank());
    const dsl::Shape device = dsl::device_view(result).shape;
    if (device[dsl::dims::N] != in.n)
        detail::invalid(what, "the output " + dsl::to_string(result.shape) +
                                  " has another batch (first extent) than the data " +
                                  dsl::to_string(t.shape) +
                                  "; on the device images are computed one at a time");
    // Within one image (the batch excluded) the data is [outer, extent, inner].
    const size_t axis = size_t(plan.axis);
    const int64_t extent = data_shape[axis];
    const int64_t inner = extents(data_shape, axis + 1, data_shape.size());
    const int64_t picked = int64_t(plan.indices.size());
    Halide::Buffer<int32_t> indices(static_cast<int>(picked));
    for (int64_t k = 0; k < picked; ++k) indices(int(k)) = int32_t(plan.indices[size_t(k)]);
    const int64_t oh = device[dsl::dims::H], ow = device[dsl::dims::W];
    dsl::Algorithm algorithm = [=](const std::vector<Halide::Func> &funcs) {
        const auto &v = dsl::act_vars();
        // The element's index in the logical order of one image, then where the data has it.
        const Halide::Expr index = (v.c * int(oh) + v.y) * int(ow) + v.x;
        const Halide::Expr i = index % int(inner), rest = index / int(inner);
        const Halide::Expr k = Halide::clamp(rest % int(picked), 0, int(picked - 1));
        const Halide::Expr outer = rest / int(picked);
        const Halide::Expr from = (outer * int(extent) + indices(k)) * int(inner) + i;
        Halide::Func f = detail::named_func(name);
        f(v.c, v.x, v.y) = detail::any_image_element(funcs.at(0), in, from);
        return f;
    };
    return dsl::Layer::make("gather", result, {input}, algorithm);
}

} // namespace

void register_layer_gather(dsl::LayerRegistry &registry) {
    dsl::LayerDef def;
    def.op = "gather";
    def.doc = "entries picked along an axis by constant indices (a SHAVE copy; folded for "
              "constants)";
    def.inputs = {"data"};
    def.attr_inputs = {"indices"};
    def.attrs = {{"indices",
                  dsl::AttrType::Tensor,
                  std::nullopt,
                  "integers of any shape, in [-extent, extent); negative count from the end",
                  {}},
                 {"axis", dsl::AttrType::Int, int64_t(0), "negative counts from the end", {}}};
    def.build = build_gather;
    def.fold = fold_gather;
    // Channels picked out of order, repeated and from the end, on an input of odd extents.
    def.example = [](dsl::ElemType type) {
        dsl::Attrs a;
        a.set("indices", detail::vector_tensor(std::vector<int64_t>{4, 0, -1, 4, 7, 2}));
        a.set("axis", int64_t(1));
        return layer_registry().build("gather", "gather",
                                      {detail::example_input("in", 9, 11, 7, type)}, a);
    };
    registry.add(std::move(def));
}

} // namespace vpuc::algorithms
