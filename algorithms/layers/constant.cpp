// constant: a value known at compile time, of any rank up to dsl::kMaxRank and any graph element
// type. It computes nothing on the device: its consumers fold it (shape arithmetic) or take it as
// an attribute (reshape's shape).
#include "common.h"

namespace vpuc::algorithms {

void register_layer_constant(dsl::LayerRegistry &registry) {
    dsl::LayerDef def;
    def.op = "constant";
    def.doc = "a value known at compile time, folded into its consumers";
    def.attrs = {{"value",
                  dsl::AttrType::Tensor,
                  std::nullopt,
                  "the value: dim 0 is the last logical dimension (row-major, as ONNX)",
                  {}}};
    def.build = [](const std::string &name, const std::vector<dsl::Layer> &,
                   const dsl::Attrs &attrs) {
        return dsl::LayerRegistry::constant(name, attrs.get_tensor("value"));
    };
    registry.add(std::move(def));
}

} // namespace vpuc::algorithms
