// shape: a tensor's shape as an i64 constant of one dimension (ONNX's Shape), so the shape
// arithmetic an ONNX model computes folds at compile time.
#include "common.h"

namespace vpuc::algorithms {

void register_layer_shape(dsl::LayerRegistry &registry) {
    dsl::LayerDef def;
    def.op = "shape";
    def.doc = "the input's shape as i64 (folded at compile time)";
    def.inputs = {"data"};
    def.folds_from_shapes = true;
    def.fold = [](const std::string &, const std::vector<dsl::Layer> &inputs, const dsl::Attrs &) {
        dsl::ConstValues v;
        v.type = dsl::ElemType::I64;
        v.ints = inputs.at(0).output().shape.raw();
        v.shape = {int64_t(v.ints.size())};
        return dsl::const_buffer(v);
    };
    registry.add(std::move(def));
}

} // namespace vpuc::algorithms
