#include "dsl/registry.h"

#include <algorithm>

#include "dsl/constant_values.h"

namespace vpuc::dsl {

void LayerRegistry::add(LayerDef def) {
    if (def.op.empty()) throw AttrError("layer registry: an entry without an op name");
    if (!def.build && !def.fold)
        throw AttrError("layer registry: op '" + def.op + "' has neither build nor fold");
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

namespace {

// A constant given for attribute `spec` as that attribute's value: Ints and Floats from a
// tensor of one dimension (or none), Int and Float from one element.
AttrValue attr_from_constant(const std::string &where, const AttrSpec &spec,
                             const Halide::Buffer<> &value) {
    const std::string what = where + ": input '" + spec.name + "'";
    if (spec.type == AttrType::Tensor) return value;
    if (value.dimensions() > 1)
        throw AttrError(what + " has " + std::to_string(value.dimensions()) +
                        " dimensions; it gives " + to_string(spec.type) + ", a list");
    const ConstValues v = const_values(value, what);
    const bool one = v.elements() == 1;
    switch (spec.type) {
    case AttrType::Ints:
        if (!v.is_float()) return v.ints;
        break;
    case AttrType::Floats:
        if (v.is_float()) return v.reals;
        return std::vector<double>(v.ints.begin(), v.ints.end());
    case AttrType::Int:
        if (!v.is_float() && one) return v.ints[0];
        break;
    case AttrType::Float:
        if (one) return v.is_float() ? v.reals[0] : double(v.ints[0]);
        break;
    default:
        break;
    }
    throw AttrError(what + " (" + type_name(value.type()) + ", " + std::to_string(v.elements()) +
                    " elements) does not give " + to_string(spec.type));
}

} // namespace

bool is_constant(const Layer &layer) {
    return layer.op() == "constant" && layer.attrs().has("value");
}

const Halide::Buffer<> &constant_value(const Layer &layer) {
    if (!is_constant(layer))
        throw LayerError("layer '" + layer.name() + "' (" + layer.op() + ") is not a constant");
    return layer.attrs().get_tensor("value");
}

Layer LayerRegistry::constant(const std::string &name, const Halide::Buffer<> &value) {
    const std::string what = "constant '" + name + "'";
    if (!value.defined() || value.dimensions() > kMaxRank)
        throw LayerError(what + ": a value of rank 0 to " + std::to_string(kMaxRank) +
                         " is needed");
    TensorDesc t;
    t.name = name;
    t.type = elem_type(value.type(), what);
    std::vector<int64_t> shape;
    for (int d = value.dimensions() - 1; d >= 0; --d) shape.push_back(value.dim(d).extent());
    t.shape = Shape(shape);
    t.order = DimsOrder::identity(value.dimensions());
    Algorithm nothing = [what](const std::vector<Halide::Func> &) -> Halide::Func {
        throw LayerError(what + " computes nothing on the device: its consumers fold it at "
                                "compile time or take it as an attribute");
    };
    Layer layer = Layer::make("constant", std::move(t), {}, std::move(nothing));
    Attrs attrs;
    attrs.set("value", value);
    layer.set_attrs(std::move(attrs));
    return layer;
}

bool is_tuple_element(const Layer &layer) {
    return layer.op() == "tuple_element" && layer.attrs().has("index") &&
           layer.inputs().size() == 1;
}

const TensorDesc &input_tensor(const Layer &consumer, size_t index) {
    const Layer &input = consumer.inputs().at(index);
    if (!is_tuple_element(consumer)) return input.output();
    const int64_t output = consumer.attrs().get_int("index");
    if (output < 0 || size_t(output) >= input.outputs().size())
        throw LayerError("tuple_element '" + consumer.name() + "' reads output " +
                         std::to_string(output) + " of '" + input.name() + "', which has " +
                         std::to_string(input.outputs().size()));
    return input.outputs()[size_t(output)];
}

std::vector<Layer> output_layers(const Layer &layer) {
    if (layer.outputs().size() == 1) return {layer};
    std::vector<Layer> elements;
    for (size_t i = 0; i < layer.outputs().size(); ++i)
        elements.push_back(
            LayerRegistry::output_of(layer.name() + "_" + std::to_string(i), layer, int64_t(i)));
    return elements;
}

Layer LayerRegistry::output_of(const std::string &name, const Layer &layer, int64_t index) {
    if (index < 0 || size_t(index) >= layer.outputs().size())
        throw LayerError("tuple_element '" + name + "': '" + layer.name() + "' has no output " +
                         std::to_string(index) + " (it has " +
                         std::to_string(layer.outputs().size()) + ")");
    TensorDesc t = layer.outputs()[size_t(index)];
    t.name = name;
    // Given the tuple's Func, value `index`; given a Func of that one tensor (an input of a
    // kernel, or of bounds inference), the tensor.
    Algorithm select = [index](const std::vector<Halide::Func> &inputs) {
        const auto &v = act_vars();
        const Halide::Func &in = inputs.at(0);
        Halide::Func out(Halide::Internal::unique_name("tuple_element"));
        if (in.outputs() > 1)
            out(v.c, v.x, v.y) = in(v.c, v.x, v.y)[int(index)];
        else
            out(v.c, v.x, v.y) = in(v.c, v.x, v.y);
        return out;
    };
    Layer element = Layer::make("tuple_element", std::move(t), {layer}, std::move(select));
    element.set_built_for(0, layer.outputs()[size_t(index)]);
    Attrs attrs;
    attrs.set("index", index);
    element.set_attrs(std::move(attrs));
    return element;
}

Layer LayerRegistry::build(const std::string &op, const std::string &name,
                           const std::vector<Layer> &inputs, const Attrs &attrs) const {
    const LayerDef &def = at(op);
    const std::string where = op + " '" + name + "'";
    const size_t most = def.inputs.size() + def.attr_inputs.size();
    if (def.variadic ? inputs.size() < def.inputs.size()
                     : inputs.size() < def.inputs.size() || inputs.size() > most)
        throw AttrError(
            where + ": " + std::to_string(inputs.size()) + " inputs given, " + op + " takes " +
            (def.variadic ? "at least " : "") + std::to_string(def.inputs.size()) +
            (!def.variadic && most > def.inputs.size() ? " to " + std::to_string(most) : ""));
    std::vector<Layer> data_inputs = inputs;
    Attrs given = attrs;
    if (!def.variadic && inputs.size() > def.inputs.size()) {
        data_inputs.resize(def.inputs.size());
        for (size_t i = def.inputs.size(); i < inputs.size(); ++i) {
            const std::string &attr = def.attr_inputs[i - def.inputs.size()];
            if (!is_constant(inputs[i]))
                throw AttrError(where + ": input '" + attr + "' is layer '" + inputs[i].name() +
                                "' (" + inputs[i].op() +
                                "); it must be a constant, known at "
                                "compile time");
            if (given.has(attr))
                throw AttrError(where + ": '" + attr +
                                "' given both as an input and as an "
                                "attribute");
            const auto spec = std::find_if(def.attrs.begin(), def.attrs.end(),
                                           [&](const AttrSpec &s) { return s.name == attr; });
            if (spec == def.attrs.end())
                throw AttrError("layer registry: op '" + op + "' has input '" + attr +
                                "' for an attribute it does not declare");
            given.set(attr, attr_from_constant(where, *spec, constant_value(inputs[i])));
        }
    }
    Attrs complete_attrs = complete(op, name, given);
    const bool constant_inputs =
        !data_inputs.empty() && std::all_of(data_inputs.begin(), data_inputs.end(),
                                            [](const Layer &in) { return is_constant(in); });
    if (def.fold && (def.folds_from_shapes || constant_inputs))
        return constant(name, def.fold(name, data_inputs, complete_attrs));
    if (!def.build) {
        std::string computed;
        for (const Layer &in : data_inputs)
            if (!is_constant(in)) computed += (computed.empty() ? "'" : ", '") + in.name() + "'";
        throw AttrError(where + ": " + op + " runs at compile time only, on constant inputs; " +
                        computed + " " + (computed.find(',') != std::string::npos ? "are" : "is") +
                        " computed");
    }
    Layer layer = def.build(name, data_inputs, complete_attrs);
    layer.set_attrs(std::move(complete_attrs));
    return layer;
}

std::vector<Dim> LayerRegistry::unsplittable_dims(const Layer &layer) const {
    const LayerDef *def = find(layer.op());
    if (!def || !def->unsplittable_dims) return {};
    return def->unsplittable_dims(layer);
}

std::optional<ViewDef> LayerRegistry::view(const Layer &layer) const {
    const LayerDef *def = find(layer.op());
    if (!def || !def->view) return std::nullopt;
    return def->view(layer);
}

} // namespace vpuc::dsl
