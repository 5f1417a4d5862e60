#include "dsl/layer.h"

#include <algorithm>
#include <stdexcept>

#include "dsl/registry.h"

namespace vpuc::dsl {

const ActVars &act_vars() {
    static const ActVars vars;
    return vars;
}

struct Layer::Impl {
    std::string name, op;
    std::vector<TensorDesc> outputs;
    std::vector<Layer> inputs;
    Algorithm algorithm; // empty for graph inputs
    Schedule schedule;
    Attrs attrs;
    std::vector<TensorDesc> built_for;
};

namespace {

// A tensor's order must be a permutation of its own dimensions.
void check_order(const std::string &where, const TensorDesc &t) {
    if (t.order.rank() != t.shape.rank())
        throw LayerError(where + "tensor '" + t.name + "' is " + to_string(t.shape) +
                         " with the order " + t.order.name() + " of rank " +
                         std::to_string(t.order.rank()) + " (DimsOrder::identity(" +
                         std::to_string(t.shape.rank()) + ") is its logical order)");
}

} // namespace

Layer Layer::input(TensorDesc tensor) {
    if (tensor.name.empty()) throw LayerError("Layer::input: the tensor has no name");
    check_order("Layer::input: ", tensor);
    Layer layer;
    layer.impl_ = std::make_shared<Impl>();
    layer.impl_->name = tensor.name;
    layer.impl_->op = "input";
    layer.impl_->outputs = {std::move(tensor)};
    return layer;
}

std::string output_name(const std::string &layer, size_t index) {
    return index == 0 ? layer : layer + "#" + std::to_string(index);
}

std::string halide_name(const std::string &name) {
    std::string out = name;
    std::replace_if(
        out.begin(), out.end(), [](char c) { return c == '.' || c == '$'; }, '_');
    return out;
}

Layer Layer::make(std::string op, TensorDesc output, std::vector<Layer> inputs,
                  Algorithm algorithm) {
    std::vector<TensorDesc> outputs;
    outputs.push_back(std::move(output));
    return make(std::move(op), std::move(outputs), std::move(inputs), std::move(algorithm));
}

Layer Layer::make(std::string op, std::vector<TensorDesc> outputs, std::vector<Layer> inputs,
                  Algorithm algorithm) {
    const std::string name = outputs.empty() ? std::string() : outputs[0].name;
    std::string where = "Layer::make(" + op + " '" + name + "'): ";
    if (name.empty()) throw LayerError(where + "the output tensor has no name");
    for (size_t i = 1; i < outputs.size(); ++i) {
        if (outputs[i].shape != outputs[0].shape)
            throw LayerError(where + "output " + std::to_string(i) + " is " +
                             to_string(outputs[i].shape) + ", output 0 " +
                             to_string(outputs[0].shape) +
                             "; the outputs of one layer have one shape (one Halide Tuple)");
        outputs[i].name = output_name(name, i);
    }
    for (const TensorDesc &t : outputs) check_order(where, t);
    if (!algorithm) throw LayerError(where + "no algorithm");
    for (size_t i = 0; i < inputs.size(); ++i)
        if (!inputs[i].defined())
            throw LayerError(where + "input " + std::to_string(i) + " is undefined");
    Layer layer;
    layer.impl_ = std::make_shared<Impl>();
    layer.impl_->name = name;
    layer.impl_->op = std::move(op);
    layer.impl_->outputs = std::move(outputs);
    for (const Layer &in : inputs) layer.impl_->built_for.push_back(in.output());
    layer.impl_->inputs = std::move(inputs);
    layer.impl_->algorithm = std::move(algorithm);
    return layer;
}

Layer::Impl &Layer::impl() const {
    if (!impl_) throw std::logic_error("use of an undefined dsl::Layer");
    return *impl_;
}

bool Layer::is_input() const {
    return !impl().algorithm;
}
const std::string &Layer::name() const {
    return impl().name;
}
const std::string &Layer::op() const {
    return impl().op;
}
const TensorDesc &Layer::output() const {
    return impl().outputs.front();
}
const std::vector<TensorDesc> &Layer::outputs() const {
    return impl().outputs;
}
const std::vector<Layer> &Layer::inputs() const {
    return impl().inputs;
}
const Algorithm &Layer::algorithm() const {
    return impl().algorithm;
}
const Attrs &Layer::attrs() const {
    return impl().attrs;
}
const std::vector<TensorDesc> &Layer::built_for() const {
    return impl().built_for;
}
Layer Layer::copy() const {
    Layer layer;
    layer.impl_ = std::make_shared<Impl>(impl());
    return layer;
}

void Layer::set_input(size_t index, const Layer &producer) {
    impl().inputs.at(index) = producer;
}
void Layer::set_name(const std::string &name) {
    impl().name = name;
    for (size_t i = 0; i < impl().outputs.size(); ++i)
        impl().outputs[i].name = output_name(name, i);
}
void Layer::set_built_for(size_t input, TensorDesc tensor) {
    impl().built_for.at(input) = std::move(tensor);
}
void Layer::to_device_views() {
    // A constant computes nothing on the device, but may be a graph output or a layer's input
    // (gather_elements' indices, where's values), copied into DDR, which holds device views (a
    // scalar's too).
    for (TensorDesc &t : impl().outputs) t = device_view(t);
    for (TensorDesc &t : impl().built_for) t = device_view(t);
}
void Layer::set_attrs(Attrs attrs) {
    impl().attrs = std::move(attrs);
}
Schedule &Layer::schedule() {
    return impl().schedule;
}
const Schedule &Layer::schedule() const {
    return impl().schedule;
}

} // namespace vpuc::dsl
