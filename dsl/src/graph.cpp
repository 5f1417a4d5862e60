#include "dsl/graph.h"

#include <map>
#include <set>

#include "dsl/graph_text.h"
#include "dsl/registry.h"

namespace vpuc::dsl {

namespace {

// Post-order DFS from the outputs, inputs in argument order: producers come before consumers
// and the order depends only on how the graph was built.
class Collector {
  public:
    Collector(const std::string &graph, std::vector<Layer> &inputs, std::vector<Layer> &layers)
        : graph_(graph), inputs_(inputs), layers_(layers) {}

    void visit(const Layer &layer) {
        auto it = seen_.find(layer.name());
        if (it != seen_.end()) {
            if (!it->second.same_as(layer))
                throw GraphError("graph '" + graph_ + "': two layers are named '" + layer.name() +
                                 "' (layer names must be unique)");
            if (on_path_.count(layer.name()))
                throw GraphError("graph '" + graph_ + "': layer '" + layer.name() +
                                 "' reads its own output through a cycle");
            return;
        }
        seen_.emplace(layer.name(), layer);
        on_path_.insert(layer.name());
        for (size_t i = 0; i < layer.inputs().size(); ++i) {
            if (!layer.inputs()[i].defined())
                throw GraphError("graph '" + graph_ + "': layer '" + layer.name() + "' input " +
                                 std::to_string(i) + " is undefined");
            visit(layer.inputs()[i]);
        }
        on_path_.erase(layer.name());
        (layer.is_input() ? inputs_ : layers_).push_back(layer);
    }

  private:
    const std::string &graph_;
    std::vector<Layer> &inputs_, &layers_;
    std::map<std::string, Layer> seen_;
    std::set<std::string> on_path_;
};

// The tensor a reader was built for, and what it reads now, compared without their names.
bool same_tensor(const TensorDesc &a, const TensorDesc &b) {
    return a.shape == b.shape && a.type == b.type && a.order == b.order &&
           a.quant.scale == b.quant.scale && a.quant.zero_point == b.quant.zero_point &&
           (a.quant.empty() || a.quant.axis == b.quant.axis);
}

} // namespace

Graph::Graph(std::string name, std::vector<Layer> outputs)
    : name_(std::move(name)), outputs_(std::move(outputs)) {
    if (outputs_.empty()) throw GraphError("graph '" + name_ + "': no outputs");
    for (size_t i = 0; i < outputs_.size(); ++i)
        if (!outputs_[i].defined())
            throw GraphError("graph '" + name_ + "': output " + std::to_string(i) +
                             " is undefined");
    collect();
    verify();
}

void Graph::collect() {
    std::vector<Layer> inputs, layers;
    Collector collector(name_, inputs, layers);
    for (const Layer &out : outputs_) collector.visit(out);
    inputs_ = std::move(inputs);
    layers_ = std::move(layers);
}

std::vector<Layer> Graph::consumers(const Layer &layer) const {
    std::vector<Layer> result;
    for (const Layer &l : layers_)
        for (const Layer &in : l.inputs())
            if (in.same_as(layer)) {
                result.push_back(l);
                break;
            }
    return result;
}

Layer Graph::find(const std::string &name) const {
    std::string known;
    for (const auto *list : {&inputs_, &layers_})
        for (const Layer &l : *list) {
            if (l.name() == name) return l;
            known += (known.empty() ? "" : ", ") + l.name();
        }
    throw GraphError("graph '" + name_ + "': no layer '" + name + "' (layers: " + known + ")");
}

Graph Graph::clone() const {
    return copy(false);
}

Graph Graph::device_clone() const {
    return copy(true);
}

Graph Graph::copy(bool device_views) const {
    std::map<std::string, Layer> copies; // layers_ lists producers first
    auto copy_of = [&](const Layer &layer) {
        auto it = copies.find(layer.name());
        return it == copies.end() ? layer : it->second; // graph inputs stay shared
    };
    if (device_views)
        for (const Layer &input : inputs_) {
            Layer own = input.copy();
            own.to_device_views();
            copies.emplace(input.name(), own);
        }
    for (const Layer &layer : layers_) {
        Layer own = layer.copy();
        for (size_t i = 0; i < layer.inputs().size(); ++i)
            own.set_input(i, copy_of(layer.inputs()[i]));
        if (device_views) own.to_device_views();
        copies.emplace(layer.name(), own);
    }
    std::vector<Layer> outputs;
    for (const Layer &out : outputs_) outputs.push_back(copy_of(out));
    return Graph(name_, outputs);
}

void Graph::verify(const LayerRegistry *registry) const {
    // Re-collecting checks names, cycles and undefined inputs as construction does.
    std::vector<Layer> inputs, layers;
    Collector collector(name_, inputs, layers);
    for (const Layer &out : outputs_) collector.visit(out);
    std::set<std::string> names;
    for (const auto *list : {&inputs, &layers})
        for (const Layer &l : *list) names.insert(l.name());
    for (const Layer &out : outputs_)
        if (out.outputs().size() > 1)
            throw GraphError("graph '" + name_ + "': output '" + out.name() + "' has " +
                             std::to_string(out.outputs().size()) +
                             " outputs; the graph's outputs are its tuple_element layers");
    for (const Layer &layer : layers) {
        const std::string where =
            "graph '" + name_ + "': layer '" + layer.name() + "' (" + layer.op() + ")";
        for (size_t i = 1; i < layer.outputs().size(); ++i)
            if (names.count(layer.outputs()[i].name))
                throw GraphError(where + ": its output " + std::to_string(i) + " '" +
                                 layer.outputs()[i].name + "' has the name of a layer");
        const auto &built_for = layer.built_for();
        if (built_for.size() != layer.inputs().size())
            throw GraphError(where + " has " + std::to_string(layer.inputs().size()) +
                             " inputs; its algorithm takes " + std::to_string(built_for.size()));
        for (size_t i = 0; i < built_for.size(); ++i) {
            const Layer &input = layer.inputs()[i];
            if (input.outputs().size() > 1 && !is_tuple_element(layer))
                throw GraphError(where + ": reads '" + input.name() + "', which has " +
                                 std::to_string(input.outputs().size()) +
                                 " outputs: read one through a tuple_element layer");
            TensorDesc now;
            try {
                now = input_tensor(layer, i);
            } catch (const LayerError &e) {
                throw GraphError("graph '" + name_ + "': " + e.what());
            }
            if (!same_tensor(now, built_for[i]))
                throw GraphError(where + ": input " + std::to_string(i) + " '" + now.name +
                                 "' is " + tensor_text(now) + "; the algorithm was built for " +
                                 tensor_text(built_for[i]) +
                                 " (rebuild the layer through the registry)");
        }
        if (!registry || !registry->find(layer.op())) continue;
        try {
            if (registry->complete(layer.op(), layer.name(), layer.attrs()) != layer.attrs())
                throw GraphError(where + ": attributes not in the registry's complete form");
        } catch (const AttrError &e) {
            throw GraphError("graph '" + name_ + "': " + e.what());
        }
    }
}

void Graph::rewire_readers(const Layer &from, const Layer &to, const Layer *skip) {
    struct Change {
        Layer reader;
        size_t input;
    };
    std::vector<Change> changes;
    const std::vector<Layer> outputs_before = outputs_;
    for (const Layer &l : layers_) {
        if (skip && l.same_as(*skip)) continue;
        for (size_t i = 0; i < l.inputs().size(); ++i)
            if (l.inputs()[i].same_as(from)) {
                changes.push_back({l, i});
                changes.back().reader.set_input(i, to);
            }
    }
    for (Layer &out : outputs_)
        if (out.same_as(from)) out = to;
    try {
        collect();
        verify();
    } catch (const GraphError &) {
        for (auto &c : changes) c.reader.set_input(c.input, from);
        outputs_ = outputs_before;
        collect();
        throw;
    }
}

void Graph::replace(const std::string &name, const Layer &replacement) {
    if (!replacement.defined())
        throw GraphError("graph '" + name_ + "': replace '" + name + "' with an undefined layer");
    rewire_readers(find(name), replacement, &replacement);
}

void Graph::insert_after(const std::string &producer, const Layer &layer) {
    const Layer p = find(producer);
    if (!layer.defined())
        throw GraphError("graph '" + name_ + "': insert an undefined layer after '" + producer +
                         "'");
    bool reads = false;
    for (const Layer &in : layer.inputs()) reads |= in.same_as(p);
    if (!reads)
        throw GraphError("graph '" + name_ + "': layer '" + layer.name() + "' inserted after '" +
                         producer + "' does not read it");
    rewire_readers(p, layer, &layer);
}

void Graph::remove(const std::string &name) {
    const Layer layer = find(name);
    if (layer.is_input() || layer.inputs().empty())
        throw GraphError("graph '" + name_ + "': layer '" + name +
                         "' has no input to stand in for it");
    rewire_readers(layer, layer.inputs()[0], nullptr);
}

void Graph::rename(const std::string &from, const std::string &to) {
    Layer layer = find(from);
    if (to.empty())
        throw GraphError("graph '" + name_ + "': rename '" + from + "' to an empty name");
    for (const auto *list : {&inputs_, &layers_})
        for (const Layer &l : *list)
            if (l.name() == to && !l.same_as(layer))
                throw GraphError("graph '" + name_ + "': rename '" + from + "' to '" + to +
                                 "': a layer has that name");
    layer.set_name(to);
    // Readers were built for the tensor under its old name; only the name changed.
}

} // namespace vpuc::dsl
