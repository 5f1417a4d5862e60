#include "dsl/registry.h"

namespace vpuc::dsl {

void LayerRegistry::add(LayerDef def) {
    if (def.op.empty()) throw AttrError("layer registry: an entry without an op name");
    if (!def.build) throw AttrError("layer registry: op '" + def.op + "' has no build function");
    if (defs_.count(def.op))
        throw AttrError("layer registry: op '" + def.op + "' is already registered");
    for (size_t i = 0; i < def.attrs.size(); ++i) {
        const AttrSpec &a = def.attrs[i];
        for (size_t j = 0; j < i; ++j)
            if (def.attrs[j].name == a.name)
                throw AttrError("layer registry: op '" + def.op + "' declares attribute '" +
                                a.name + "' twice");
        if (a.default_value && type_of(*a.default_value) != a.type)
            throw AttrError("layer registry: op '" + def.op + "' attribute '" + a.name +
                            "': the default is " + to_string(type_of(*a.default_value)) +
                            ", the attribute " + to_string(a.type));
    }
    std::string op = def.op;
    defs_.emplace(std::move(op), std::move(def));
}

const LayerDef *LayerRegistry::find(const std::string &op) const {
    auto it = defs_.find(op);
    return it == defs_.end() ? nullptr : &it->second;
}

const LayerDef &LayerRegistry::at(const std::string &op) const {
    if (const LayerDef *def = find(op)) return *def;
    std::string known;
    for (const auto &[name, def] : defs_) known += (known.empty() ? "" : ", ") + name;
    throw AttrError("no layer op '" + op + "' (registered: " + known + ")");
}

std::vector<const LayerDef *> LayerRegistry::all() const {
    std::vector<const LayerDef *> list;
    for (const auto &[name, def] : defs_) list.push_back(&def);
    return list;
}

namespace {

// `v` as `want`, where the printed form may have read a float list of whole numbers as Ints.
std::optional<AttrValue> as_type(const AttrValue &v, AttrType want) {
    if (type_of(v) == want) return v;
    if (want == AttrType::Float)
        if (const auto *i = std::get_if<int64_t>(&v)) return double(*i);
    if (want == AttrType::Floats)
        if (const auto *l = std::get_if<std::vector<int64_t>>(&v))
            return std::vector<double>(l->begin(), l->end());
    return std::nullopt;
}

} // namespace

Attrs LayerRegistry::complete(const std::string &op, const std::string &layer,
                              const Attrs &attrs) const {
    const LayerDef &def = at(op);
    const std::string where = op + " '" + layer + "'";
    for (const auto &[name, value] : attrs.entries()) {
        bool known = false;
        for (const AttrSpec &spec : def.attrs) known |= spec.name == name;
        if (!known) {
            std::string names;
            for (const AttrSpec &spec : def.attrs) names += (names.empty() ? "" : ", ") + spec.name;
            throw AttrError(where + ": unknown attribute '" + name + "' (" + op +
                            " has: " + (names.empty() ? "none" : names) + ")");
        }
    }
    Attrs out;
    for (const AttrSpec &spec : def.attrs) {
        if (!attrs.has(spec.name)) {
            if (spec.optional) continue;
            if (!spec.default_value)
                throw AttrError(where + ": missing required attribute '" + spec.name + "' (" +
                                to_string(spec.type) + ")");
            out.set(spec.name, *spec.default_value);
            continue;
        }
        const AttrValue &given = attrs.at(spec.name);
        std::optional<AttrValue> value = as_type(given, spec.type);
        if (!value)
            throw AttrError(where + ": attribute '" + spec.name + "' is " +
                            to_string(type_of(given)) + ", expected " + to_string(spec.type));
        if (spec.check) {
            const std::string why = spec.check(*value);
            if (!why.empty())
                throw AttrError(where + ": attribute '" + spec.name + "' = " + to_string(*value) +
                                ": " + why);
        }
        out.set(spec.name, std::move(*value));
    }
    return out;
}

Layer LayerRegistry::build(const std::string &op, const std::string &name,
                           const std::vector<Layer> &inputs, const Attrs &attrs) const {
    const LayerDef &def = at(op);
    if (def.variadic ? inputs.size() < def.inputs.size() : inputs.size() != def.inputs.size())
        throw AttrError(op + " '" + name + "': " + std::to_string(inputs.size()) +
                        " inputs given, " + op + " takes " + (def.variadic ? "at least " : "") +
                        std::to_string(def.inputs.size()));
    Attrs complete_attrs = complete(op, name, attrs);
    Layer layer = def.build(name, inputs, complete_attrs);
    layer.set_attrs(std::move(complete_attrs));
    return layer;
}

std::vector<Dim> LayerRegistry::unsplittable_dims(const Layer &layer) const {
    const LayerDef *def = find(layer.op());
    if (!def || !def->unsplittable_dims) return {};
    return def->unsplittable_dims(layer.attrs());
}

std::optional<ViewDef> LayerRegistry::view(const Layer &layer) const {
    const LayerDef *def = find(layer.op());
    if (!def || !def->view) return std::nullopt;
    return def->view(layer);
}

} // namespace vpuc::dsl
