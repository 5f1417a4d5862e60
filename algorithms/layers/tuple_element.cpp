// tuple_element: output `index` of a layer with several outputs (TopK's values and indices), as
// a tensor of its own. A view of that output's memory: it moves no data, and it is the only
// way to read a layer of several outputs (dsl/registry.h).
#include "common.h"

namespace vpuc::algorithms {

void register_layer_tuple_element(dsl::LayerRegistry &registry) {
    dsl::LayerDef def;
    def.op = "tuple_element";
    def.doc = "one output of a layer with several (a view)";
    def.inputs = {"layer"};
    def.attrs = {{"index", dsl::AttrType::Int, std::nullopt, "which output",
                  [](const dsl::AttrValue &a) -> std::string {
                      return std::get<int64_t>(a) >= 0 ? "" : "must be at least 0";
                  }}};
    def.build = [](const std::string &name, const std::vector<dsl::Layer> &inputs,
                   const dsl::Attrs &attrs) {
        return dsl::LayerRegistry::output_of(name, inputs.at(0), attrs.get_int("index"));
    };
    def.view = [](const dsl::Layer &layer) {
        const dsl::TensorDesc &t = dsl::input_tensor(layer, 0);
        return dsl::ViewDef{
            dsl::ViewDef::Kind::Window,
            {dsl::Box{std::vector<int64_t>(t.shape.raw().size(), 0), t.shape.raw()}}};
    };
    // The indices of a TopK, which depend on every value's order.
    def.example = [](dsl::ElemType type) {
        const dsl::Layer topk = layer_registry().at("topk").example(type);
        return layer_registry().build("tuple_element", "indices", {topk},
                                      dsl::Attrs().set("index", int64_t(1)));
    };
    registry.add(std::move(def));
}

} // namespace vpuc::algorithms
