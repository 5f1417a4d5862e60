// The layer registry: every layer kind as data. An entry names the op, its inputs, the schema
// of its attributes (names, types, defaults, checks), which logical dimensions a kernel may
// split, and the function that builds the layer's Halide algorithm from attributes.
//
// The compiler, the reference runner, the tests, `vpuc layers`, the graph printer and reader,
// and the ONNX importer all read it; the layer library only adds entries
// (algorithms::layer_registry() holds the built-in ones).
#pragma once

#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "dsl/attrs.h"
#include "dsl/layer.h"

namespace vpuc::dsl {

struct AttrSpec {
    std::string name;
    AttrType type = AttrType::Int;
    // Absent: the attribute is required, unless `optional`.
    std::optional<AttrValue> default_value;
    std::string doc;
    // Returns why `value` is not allowed ("" when it is); may be empty.
    std::function<std::string(const AttrValue &value)> check;
    bool optional = false; // may be left out, and then stays out (a conv without bias)
};

// A box of a tensor: its first index and extent along each logical dimension (N, C, H, W).
struct Box {
    std::vector<int64_t> start, extent;
};

// How the output of a layer that only rearranges data (concat, slice) lies in memory
// relative to its inputs, so the lowering can make it an alias that moves no data.
struct ViewDef {
    enum class Kind {
        Parts,  // input i fills `boxes[i]` of the output (concat)
        Window, // the output is `boxes[0]` of the tensor it reads of input 0 (slice)
        Alias,  // the output is input 0's bytes in another shape (a reshape or transpose that
                // keeps the memory order); no boxes
    };
    Kind kind = Kind::Parts;
    std::vector<Box> boxes;
};

struct LayerDef {
    std::string op;  // "conv2d"
    std::string doc; // one line for `vpuc layers`
    std::vector<std::string> inputs;
    // The last input repeats: the op takes inputs.size() or more (concat's parts).
    bool variadic = false;
    // Inputs after `inputs` that may be given as constant layers, each becoming the attribute
    // of its name (ONNX moved Reshape's shape from an attribute to an input). The layer built
    // reads only `inputs`.
    std::vector<std::string> attr_inputs;
    std::vector<AttrSpec> attrs;
    // The device dimensions (dsl::device_axis) of the layer's output a kernel may not split,
    // because each output element reads the whole input along them (softmax's axis, TopK's).
    // Empty: all may be split.
    std::function<std::vector<Dim>(const Layer &layer)> unsplittable_dims;
    // Builds the layer from complete, checked attributes (defaults filled in). Empty for an op
    // that runs at compile time only (`fold`).
    using BuildFn = std::function<Layer(const std::string &name, const std::vector<Layer> &inputs,
                                        const Attrs &attrs)>;
    BuildFn build;
    // A small instance of the op on graph inputs, for `type` U8 (int8) or F16; an undefined
    // Layer when the op does not take that type. The registry's tests compile, run and check
    // every example on every target, and `vpuc bench layers` measures them (bench/).
    std::function<Layer(ElemType type)> example;
    // For a layer that only rearranges data: where its output lies relative to its inputs;
    // nullopt for a layer of the op that must move data (a transpose changing the bytes'
    // order). Empty for an op that computes.
    std::function<std::optional<ViewDef>(const Layer &layer)> view;
    // The output's value at compile time, from inputs that are all constants (or, with
    // `folds_from_shapes`, from any inputs: ONNX's Shape reads only shapes). build() then
    // returns a constant instead of a layer: shape arithmetic never reaches the device.
    using FoldFn = std::function<Halide::Buffer<>(
        const std::string &name, const std::vector<Layer> &inputs, const Attrs &attrs)>;
    FoldFn fold;
    bool folds_from_shapes = false;
};

// A constant is a layer of op "constant" without inputs, its value in attribute "value": a
// dense buffer of any rank up to kMaxRank and any graph element type, the last logical dimension
// innermost (dim 0), as ONNX and numpy lay tensors out. It computes nothing on the device:
// its consumers fold it at compile time (LayerDef::fold) or take it as an attribute
// (LayerDef::attr_inputs).
bool is_constant(const Layer &layer);
// The value of a constant layer (throws LayerError naming it when it is not one).
const Halide::Buffer<> &constant_value(const Layer &layer);

// A tuple_element layer reads output "index" of a layer with several outputs (Layer::make): a
// view of that tensor, moving no data. It is the only reader such a layer may have
// (Graph::verify).
bool is_tuple_element(const Layer &layer);
// The tensor `consumer` reads as its input `index`: that input's output, or the output of it
// a tuple_element selects.
const TensorDesc &input_tensor(const Layer &consumer, size_t index);

// What a graph computing `layer` outputs: the layer itself, or, for a layer of several outputs,
// a tuple_element of each, named `<layer>_<i>` (a registry example as a graph, say).
std::vector<Layer> output_layers(const Layer &layer);

class LayerRegistry {
  public:
    // Throws AttrError when the op is already registered or the entry is incomplete.
    void add(LayerDef def);

    const LayerDef *find(const std::string &op) const;
    // Throws AttrError listing the known ops.
    const LayerDef &at(const std::string &op) const;
    std::vector<const LayerDef *> all() const; // sorted by op

    // `attrs` checked against `op`'s schema (an unknown attribute, a wrong type, a value its
    // check refuses, or a missing required one is an AttrError naming the layer and the
    // attribute), with the defaults filled in, in schema order. Ints read where Floats are
    // expected become Floats.
    Attrs complete(const std::string &op, const std::string &layer, const Attrs &attrs) const;

    // Builds a layer of `op` from its attributes; the layer carries the completed attributes.
    // Constants given for attr_inputs become attributes first; an op that folds, given
    // constants, returns a constant of its value.
    Layer build(const std::string &op, const std::string &name, const std::vector<Layer> &inputs,
                const Attrs &attrs) const;

    // A constant layer holding `value` (see is_constant). Throws LayerError on a value of a
    // rank above 5 or of a type graph tensors do not have.
    static Layer constant(const std::string &name, const Halide::Buffer<> &value);
    // A tuple_element layer reading output `index` of `layer` (see is_tuple_element). Throws
    // LayerError when `layer` has no such output.
    static Layer output_of(const std::string &name, const Layer &layer, int64_t index);

    // The device dimensions (dsl::device_axis) `layer` may not split: its entry's answer, none
    // for an op not registered.
    std::vector<Dim> unsplittable_dims(const Layer &layer) const;
    // How `layer` rearranges its inputs' data: its entry's answer, nothing for a layer that
    // computes or an op not registered.
    std::optional<ViewDef> view(const Layer &layer) const;

  private:
    std::map<std::string, LayerDef> defs_;
};

} // namespace vpuc::dsl
