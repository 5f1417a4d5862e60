#include "algorithms/examples.h"

#include "algorithms/registry.h"

namespace vpuc::algorithms {

using dsl::ElemType;

const std::vector<ElemType> &example_types() {
    static const std::vector<ElemType> types = {ElemType::U8, ElemType::I8, ElemType::F16,
                                                ElemType::F32, ElemType::I32};
    return types;
}

namespace {

bool is_float(ElemType t) {
    return t == ElemType::F16 || t == ElemType::F32;
}

dsl::Quant quant_for(ElemType type, const dsl::Quant &given) {
    if (!dsl::is_quantized_int(type)) return dsl::Quant::none();
    const float scale = given.empty() ? 0.05f : given.scale_at(0);
    return dsl::Quant::per_tensor(scale, type == ElemType::U8 ? 120 : -7);
}

} // namespace

dsl::Layer example_in_type(const dsl::LayerDef &def, ElemType type) {
    if (!def.example) return {};
    const ElemType base_type = is_float(type) ? ElemType::F16 : ElemType::U8;
    const dsl::Layer base = def.example(base_type);
    if (!base.defined()) return {};
    if (type == base_type) return base;
    std::vector<dsl::Layer> inputs;
    for (const dsl::Layer &in : base.inputs()) {
        dsl::TensorDesc t = in.output();
        if (in.op() != "input" || t.type != base_type) {
            inputs.push_back(in);
            continue;
        }
        t.quant = quant_for(type, t.quant);
        t.type = type;
        inputs.push_back(dsl::Layer::input(t));
    }
    try {
        return layer_registry().build(def.op, base.name(), inputs, base.attrs());
    } catch (const std::exception &) {
        return {}; // the op's build refuses the type: it does not take it
    }
}

std::vector<ElemType> accepted_types(const dsl::LayerDef &def) {
    std::vector<ElemType> types;
    for (ElemType t : example_types())
        if (example_in_type(def, t).defined()) types.push_back(t);
    return types;
}

} // namespace vpuc::algorithms
