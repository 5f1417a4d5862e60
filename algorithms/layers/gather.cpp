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
    int64_t outer = 1, inner = 1;
    for (int64_t d = 0; d < axis; ++d) outer *= data.shape[size_t(d)];
    for (int64_t d = axis + 1; d < rank; ++d) inner *= data.shape[size_t(d)];
    dsl::ConstValues out;
    out.type = data.type;
    out.shape.assign(data.shape.begin(), data.shape.begin() + axis);
    out.shape.insert(out.shape.end(), indices.shape.begin(), indices.shape.end());
    out.shape.insert(out.shape.end(), data.shape.begin() + axis + 1, data.shape.end());
    if (out.shape.size() > 5) detail::invalid(what, "the output would have a rank above 5");
    for (int64_t o = 0; o < outer; ++o)
        for (int64_t index : indices.ints) {
            if (index < -extent || index >= extent)
                detail::invalid(what, "index " + std::to_string(index) + " outside [" +
                                          std::to_string(-extent) + ", " + std::to_string(extent) +
                                          ")");
            const int64_t at = index < 0 ? index + extent : index;
            for (int64_t i = 0; i < inner; ++i) {
                const size_t from = size_t((o * extent + at) * inner + i);
                if (data.is_float())
                    out.reals.push_back(data.reals[from]);
                else
                    out.ints.push_back(data.ints[from]);
            }
        }
    return dsl::const_buffer(out);
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
