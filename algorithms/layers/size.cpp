// size: the number of a tensor's elements as an i64 scalar (ONNX's Size), folded at compile time
// as shape arithmetic.
#include "common.h"

namespace vpuc::algorithms {

void register_layer_size(dsl::LayerRegistry &registry) {
    dsl::LayerDef def;
    def.op = "size";
    def.doc = "the input's number of elements as an i64 scalar (folded at compile time)";
    def.inputs = {"data"};
    def.folds_from_shapes = true;
    def.fold = [](const std::string &, const std::vector<dsl::Layer> &inputs, const dsl::Attrs &) {
        return dsl::const_buffer(
            {dsl::ElemType::I64, {}, {inputs.at(0).output().shape.elements()}, {}});
    };
    registry.add(std::move(def));
}

} // namespace vpuc::algorithms
