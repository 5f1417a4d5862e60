// gather: entries of a constant along an axis, picked by constant indices (ONNX's Gather), at
// compile time: what shape arithmetic does with a Shape's output.
#include "common.h"

namespace vpuc::algorithms {

namespace {

Halide::Buffer<> fold_gather(const std::string &name, const std::vector<dsl::Layer> &inputs,
                             const dsl::Attrs &attrs) {
    const std::string what = "gather '" + name + "'";
    const dsl::ConstValues data = dsl::const_values(inputs.at(0));
    const dsl::ConstValues indices = dsl::const_values(inputs.at(1));
    const int64_t rank = int64_t(data.shape.size());
    int64_t axis = attrs.get_int("axis");
    if (axis < -rank || axis >= rank)
        detail::invalid(what, "axis " + std::to_string(axis) + " of a tensor of rank " +
                                  std::to_string(rank));
    if (axis < 0) axis += rank;
    if (indices.is_float()) detail::invalid(what, "indices must be integers");
    const int64_t extent = data.shape[size_t(axis)];
    int64_t inner = 1;
    for (int64_t d = axis + 1; d < rank; ++d) inner *= data.shape[size_t(d)];
    std::vector<int64_t> shape(data.shape.begin(), data.shape.begin() + axis);
    shape.insert(shape.end(), indices.shape.begin(), indices.shape.end());
    shape.insert(shape.end(), data.shape.begin() + axis + 1, data.shape.end());
    if (shape.size() > 5) detail::invalid(what, "the output would have a rank above 5");
    for (int64_t index : indices.ints)
        if (index < -extent || index >= extent)
            detail::invalid(what, "index " + std::to_string(index) + " outside [" +
                                      std::to_string(-extent) + ", " + std::to_string(extent) +
                                      ")");
    // An output index is (outer..., the position in indices..., inner...).
    const size_t picked = indices.shape.size();
    return dsl::const_buffer(
        dsl::pick_elements(data, shape, [&](const std::vector<int64_t> &index) {
            int64_t o = 0, k = 0, i = 0;
            for (size_t d = 0; d < size_t(axis); ++d) o = o * data.shape[d] + index[d];
            for (size_t d = 0; d < picked; ++d) k = k * indices.shape[d] + index[size_t(axis) + d];
            for (size_t d = size_t(axis) + 1; d < data.shape.size(); ++d)
                i = i * data.shape[d] + index[picked + d - 1];
            const int64_t at = indices.ints[size_t(k)];
            return (o * extent + (at < 0 ? at + extent : at)) * inner + i;
        }));
}

} // namespace

void register_layer_gather(dsl::LayerRegistry &registry) {
    dsl::LayerDef def;
    def.op = "gather";
    def.doc = "entries of a constant picked along an axis (at compile time only)";
    def.inputs = {"data", "indices"};
    def.attrs = {{"axis", dsl::AttrType::Int, int64_t(0), "negative counts from the end", {}}};
    def.fold = fold_gather;
    registry.add(std::move(def));
}

} // namespace vpuc::algorithms
