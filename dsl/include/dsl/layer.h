// A layer: a pure algorithm (a Halide pipeline) with the tensors it produces.
//
// The algorithm is a function from the layer's input Funcs to its output Func, so the same
// definition serves every use: chained to its producers for the CPU reference, fed with
// ImageParams for a SHAVE kernel, and inspected by the DPU matcher. Activations are Funcs of
// (c, x, y) in Halide order, batch 1; logical shape (N=1, C, H, W).
#pragma once

#include <Halide.h>

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "dsl/attrs.h"
#include "dsl/schedule.h"
#include "dsl/tensor.h"

namespace vpuc::dsl {

// The pure variables of every activation Func, shared so definitions and schedules agree.
struct ActVars {
    Halide::Var c{"c"}, x{"x"}, y{"y"};
};
const ActVars &act_vars();

using Algorithm = std::function<Halide::Func(const std::vector<Halide::Func> &inputs)>;

class Layer {
  public:
    Layer() = default;

    // A graph input: no algorithm, only a tensor.
    static Layer input(TensorDesc tensor);
    // `op` names the kind for people ("conv2d", "softmax"); matching never reads it.
    static Layer make(std::string op, TensorDesc output, std::vector<Layer> inputs,
                      Algorithm algorithm);
    // A layer computing several outputs together (TopK's values and indices): its algorithm
    // returns a Func of a Tuple, value i being output i, so all outputs have one shape. Output
    // 0 is named after the layer, output i > 0 output_name(layer, i). A consumer reads output i
    // through a tuple_element layer (dsl/registry.h), a view that moves no data.
    static Layer make(std::string op, std::vector<TensorDesc> outputs, std::vector<Layer> inputs,
                      Algorithm algorithm);

    bool defined() const { return impl_ != nullptr; }
    bool is_input() const;
    const std::string &name() const;
    const std::string &op() const;
    const TensorDesc &output() const; // output 0
    const std::vector<TensorDesc> &outputs() const;
    const std::vector<Layer> &inputs() const;
    const Algorithm &algorithm() const;
    // The layer's attributes as data (op kind's values and constants), filled in by the layer
    // registry (dsl/registry.h); empty for a layer made directly with make().
    const Attrs &attrs() const;
    // The tensors the algorithm was built for, one per input (the one it reads of a layer with
    // several outputs, dsl::input_tensor): a graph edit that rewires an
    // input must keep its shape, type, quantization and order (Graph::verify checks).
    const std::vector<TensorDesc> &built_for() const;

    // The schedule is per layer and mutable, like a Halide Func's.
    Schedule &schedule();
    const Schedule &schedule() const;

    bool same_as(const Layer &other) const { return impl_ == other.impl_; }

  private:
    friend class Graph;         // rewires inputs and renames
    friend class LayerRegistry; // attaches the attributes it built the layer from
    void set_input(size_t index, const Layer &producer);
    Layer copy() const;                     // a new handle on a copy of this layer's state
    void set_name(const std::string &name); // the layer's and its output tensors'
    void set_attrs(Attrs attrs);
    void set_built_for(size_t input, TensorDesc tensor); // a tuple_element's: the output it reads
    void to_device_views(); // every tensor it produces or reads as dsl::device_view
    struct Impl;
    Impl &impl() const; // throws std::logic_error on an undefined Layer
    std::shared_ptr<Impl> impl_;
};

// The name of output `index` of layer `layer`: the layer's own for output 0, `layer#index` for
// the others ('#' keeps them apart from ONNX's names, which use '.', ':' and '/').
std::string output_name(const std::string &layer, size_t index);

// `name` (a layer's or tensor's, "/layer1/layer1.0/conv1/Conv" as PyTorch names ONNX nodes) as
// the name of a Halide Func or parameter: Halide reserves '.' and, in its unique names, '$', so
// each becomes '_'.
std::string halide_name(const std::string &name);

} // namespace vpuc::dsl
