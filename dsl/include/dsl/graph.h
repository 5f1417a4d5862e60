// A graph of layers: built in C++ here, from ONNX by the front end, and edited by graph passes.
#pragma once

#include <string>
#include <vector>

#include "dsl/layer.h"
#include "vpu_target/error.h"

namespace vpuc::dsl {

class LayerRegistry;

// A malformed graph or a graph edit that would make one. The message names the graph and the
// layer or tensor concerned.
class GraphError : public Error {
  public:
    using Error::Error;
};

class Graph {
  public:
    // The graph of every layer `outputs` read, verified (verify() without a registry).
    Graph(std::string name, std::vector<Layer> outputs);

    const std::string &name() const { return name_; }
    const std::vector<Layer> &outputs() const { return outputs_; }
    const std::vector<Layer> &inputs() const { return inputs_; }
    // Every non-input layer, producers before consumers (a stable topological order).
    const std::vector<Layer> &layers() const { return layers_; }
    // Layers that read `layer`'s output.
    std::vector<Layer> consumers(const Layer &layer) const;
    // Throws GraphError listing the known names when absent.
    Layer find(const std::string &name) const;

    // Edits. Layers are shared handles, as Halide Funcs are: an edit rewires the layers
    // themselves, so every graph holding them sees it. After each edit the graph re-derives its
    // layer order and verifies itself; an edit that would leave it invalid throws GraphError
    // and changes nothing.
    //
    // Every reader of layer `name` (and the graph's outputs) reads `replacement` instead.
    void replace(const std::string &name, const Layer &replacement);
    // `layer` reads `producer`; every other reader of `producer` now reads `layer`.
    void insert_after(const std::string &producer, const Layer &layer);
    // The readers of layer `name` read its first input instead (which must be the same tensor).
    void remove(const std::string &name);
    // Renames a layer and the tensor it produces.
    void rename(const std::string &from, const std::string &to);

    // A graph of new layer handles (graph inputs excepted) with the same ops, attributes,
    // tensors and algorithms and copies of the schedules: edits and schedules of the copy leave
    // this graph's layers alone.
    Graph clone() const;
    // A clone (graph inputs copied too) whose every tensor is its dsl::device_view: the 4-D
    // graph the lowering compiles. The algorithms are the same, as they compute device views.
    Graph device_clone() const;

    // Throws GraphError when the graph is not well formed: layer names unique, no cycle, every
    // layer's inputs the tensors (shape, type, quantization, order) its algorithm was built
    // for, and, with `registry`, the attributes of every registered op complete and valid.
    void verify(const LayerRegistry *registry = nullptr) const;

  private:
    void collect();                      // inputs_ and layers_ from outputs_
    Graph copy(bool device_views) const; // clone() and device_clone()
    // Readers of `from` (but `skip`) and outputs that are `from` now read `to`; then collects
    // and verifies, undoing the rewiring if that fails.
    void rewire_readers(const Layer &from, const Layer &to, const Layer *skip);
    std::string name_;
    std::vector<Layer> outputs_, inputs_, layers_;
};

} // namespace vpuc::dsl
