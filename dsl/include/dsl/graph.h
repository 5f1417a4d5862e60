// A graph of layers: built in C++ here, from ONNX by the front end.
#pragma once

#include <string>
#include <vector>

#include "dsl/layer.h"

namespace vpuc::dsl {

class Graph {
  public:
    Graph(std::string name, std::vector<Layer> outputs);

    const std::string &name() const { return name_; }
    const std::vector<Layer> &outputs() const { return outputs_; }
    const std::vector<Layer> &inputs() const { return inputs_; }
    // Every non-input layer, producers before consumers (a stable topological order).
    const std::vector<Layer> &layers() const { return layers_; }
    // Layers that read `layer`'s output.
    std::vector<Layer> consumers(const Layer &layer) const;
    // Throws std::invalid_argument listing the known names when absent.
    Layer find(const std::string &name) const;

  private:
    std::string name_;
    std::vector<Layer> outputs_, inputs_, layers_;
};

} // namespace vpuc::dsl
