#include "dsl/graph.h"

#include <map>
#include <stdexcept>

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
                throw std::invalid_argument("graph '" + graph_ + "': two layers are named '" +
                                            layer.name() + "' (layer names must be unique)");
            return;
        }
        seen_.emplace(layer.name(), layer);
        for (const Layer &in : layer.inputs()) visit(in);
        (layer.is_input() ? inputs_ : layers_).push_back(layer);
    }

  private:
    const std::string &graph_;
    std::vector<Layer> &inputs_, &layers_;
    std::map<std::string, Layer> seen_;
};

} // namespace

Graph::Graph(std::string name, std::vector<Layer> outputs)
    : name_(std::move(name)), outputs_(std::move(outputs)) {
    if (outputs_.empty()) throw std::invalid_argument("graph '" + name_ + "': no outputs");
    Collector collector(name_, inputs_, layers_);
    for (size_t i = 0; i < outputs_.size(); ++i) {
        if (!outputs_[i].defined())
            throw std::invalid_argument("graph '" + name_ + "': output " + std::to_string(i) +
                                        " is undefined");
        collector.visit(outputs_[i]);
    }
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
    throw std::invalid_argument("graph '" + name_ + "': no layer '" + name + "' (layers: " + known +
                                ")");
}

} // namespace vpuc::dsl
