#include "algorithms/reference.h"

#include <algorithm>
#include <map>
#include <stdexcept>
#include <string>

#include "algorithms/views.h"
#include "dsl/registry.h"

namespace vpuc::algorithms {

using Halide::Func;

namespace {

void check_buffer(const std::string &what, const dsl::TensorDesc &t, const Halide::Buffer<> &b) {
    const Halide::Buffer<> want = make_buffer(t);
    bool shape_ok = b.defined() && b.dimensions() == want.dimensions();
    for (int d = 0; shape_ok && d < b.dimensions(); ++d)
        shape_ok = b.dim(d).min() == 0 && b.dim(d).extent() == want.dim(d).extent();
    if (!shape_ok || b.type() != want.type()) {
        std::string extents;
        for (int d = 0; d < want.dimensions(); ++d)
            extents += (d ? ", " : "") + std::to_string(want.dim(d).extent());
        throw ReferenceError(what + ": the buffer for '" + t.name + "' must be " +
                             (want.dimensions() == 3 ? "(c, x, y)" : "(c, x, y, n)") + " = (" +
                             extents + ") of " + dsl::to_string(t.type));
    }
}

// A graph input as a Func reading its buffer: image `image` of a batch; a tensor without
// batch is the same for every image.
Func input_func(const dsl::TensorDesc &t, const Halide::Buffer<> &b,
                const Halide::Param<int> &image) {
    const auto &v = dsl::act_vars();
    Func f(Halide::Internal::unique_name(dsl::halide_name(t.name)));
    if (b.dimensions() == 4)
        f(v.c, v.x, v.y) = b(v.c, v.x, v.y, image);
    else
        f(v.c, v.x, v.y) = b(v.c, v.x, v.y);
    return f;
}

// The layer's output Func, computed whole, after checking it is the tensor the layer declares.
Func layer_func(const dsl::Layer &layer, const std::vector<Func> &inputs) {
    Func out = layer.algorithm()(inputs);
    bool declared = out.dimensions() == 3 && out.outputs() == int(layer.outputs().size());
    std::string types;
    for (size_t i = 0; i < layer.outputs().size(); ++i) {
        const dsl::ElemType t = layer.outputs()[i].type;
        declared = declared && out.output_types()[i] == dsl::halide_type(t);
        types += std::string(i ? ", " : "") + dsl::to_string(t);
    }
    if (!declared)
        throw std::logic_error("layer '" + layer.name() +
                               "': the algorithm must return a 3-D Func of one value per output "
                               "tensor, of its type (" +
                               types + ")");
    out.compute_root();
    // Halide computes a reduction (a Func with an update, such as a softmax's sum) inside the
    // loop of the stage that calls it, once per element of that stage; at root it is computed
    // once. Where a Func is computed changes no value (the order of every reduction is its
    // RDom's), only the time: a softmax over 1000 elements would take seconds.
    for (const auto &[name, f] : Halide::Internal::find_transitive_calls(out.function()))
        if (f.has_update_definition()) Func(f).compute_root();
    return out;
}

// Layers compute one image at a time: a pipeline runs once per image of its outputs' batch,
// each time into that image of every output. A tensor of one image does not depend on the
// image (only a layer moving images changes a batch, and its input is realized first), so
// outputs are realized per batch, in one pipeline each.
std::vector<Halide::Buffer<>> realize(const std::vector<Func> &outputs,
                                      const std::vector<dsl::TensorDesc> &tensors,
                                      Halide::Param<int> &image) {
    std::vector<Halide::Buffer<>> buffers;
    std::map<int64_t, std::vector<size_t>> by_batch;
    for (size_t i = 0; i < tensors.size(); ++i) {
        buffers.push_back(make_buffer(tensors[i]));
        by_batch[dsl::device_view(tensors[i]).shape[dsl::dims::N]].push_back(i);
    }
    for (const auto &[images, members] : by_batch) {
        std::vector<Func> funcs;
        for (size_t i : members) funcs.push_back(outputs[i]);
        Halide::Pipeline pipeline(funcs);
        for (int64_t n = 0; n < images; ++n) {
            image.set(int(n));
            std::vector<Halide::Buffer<>> parts;
            for (size_t i : members)
                parts.push_back(images > 1 ? buffers[i].sliced(3, int(n)) : buffers[i]);
            Halide::Realization realization(parts);
            pipeline.realize(realization, reference_target());
        }
    }
    return buffers;
}

// A layer moving whole images (moves_images): its input's bytes as its output's.
Halide::Buffer<> moved_images(const dsl::Layer &layer, const Halide::Buffer<> &input) {
    const dsl::TensorDesc &in = dsl::input_tensor(layer, 0);
    return from_memory_order(layer.output(), to_memory_order(in, input));
}

} // namespace

const Halide::Target &reference_target() {
    static const Halide::Target target("x86-64-linux-sse41-strict_float");
    return target;
}

Halide::Buffer<> make_buffer(const dsl::TensorDesc &tensor) {
    dsl::Shape s;
    try {
        s = dsl::device_view(tensor).shape;
    } catch (const dsl::LayerError &e) {
        throw ReferenceError(std::string("make_buffer: ") + e.what());
    }
    std::vector<int> extents = {int(s[dsl::dims::C]), int(s[dsl::dims::W]), int(s[dsl::dims::H])};
    if (s[dsl::dims::N] > 1) extents.push_back(int(s[dsl::dims::N]));
    return Halide::Buffer<>(dsl::halide_type(tensor.type), extents);
}

namespace {

// A buffer of make_buffer's dims over `memory`, the tensor's bytes in memory order.
Halide::Buffer<> memory_buffer(const dsl::TensorDesc &tensor, uint8_t *memory) {
    const dsl::TensorDesc view = dsl::device_view(tensor);
    const std::vector<int64_t> strides = view.order.logical_strides(view.shape);
    using namespace dsl::dims;
    std::vector<halide_dimension_t> dims;
    for (dsl::Dim d : {C, W, H, N})
        if (d != N || view.shape[N] > 1)
            dims.push_back({0, int32_t(view.shape[d]), int32_t(strides[size_t(d.index())]), 0});
    return Halide::Buffer<>(dsl::halide_type(tensor.type), memory, int(dims.size()), dims.data());
}

} // namespace

std::vector<uint8_t> to_memory_order(const dsl::TensorDesc &tensor,
                                     const Halide::Buffer<> &buffer) {
    std::vector<uint8_t> bytes(size_t(dsl::device_view(tensor).bytes()));
    Halide::Buffer<> memory = memory_buffer(tensor, bytes.data());
    memory.copy_from(buffer);
    return bytes;
}

Halide::Buffer<> from_memory_order(const dsl::TensorDesc &tensor,
                                   const std::vector<uint8_t> &bytes) {
    const int64_t want = dsl::device_view(tensor).bytes();
    if (int64_t(bytes.size()) != want)
        throw ReferenceError("tensor '" + tensor.name + "': " + std::to_string(bytes.size()) +
                             " bytes, expected " + std::to_string(want));
    std::vector<uint8_t> copy = bytes;
    Halide::Buffer<> out = make_buffer(tensor);
    out.copy_from(memory_buffer(tensor, copy.data()));
    return out;
}

std::vector<Halide::Buffer<>> run_reference(const dsl::Graph &graph,
                                            const std::vector<Halide::Buffer<>> &inputs) {
    const std::string what = "run_reference(" + graph.name() + ")";
    if (inputs.size() != graph.inputs().size())
        throw ReferenceError(what + ": " + std::to_string(inputs.size()) + " buffers for " +
                             std::to_string(graph.inputs().size()) + " inputs");
    std::map<std::string, Func> funcs; // by layer name: names are unique in a graph
    Halide::Param<int> image;
    for (size_t i = 0; i < inputs.size(); ++i) {
        const dsl::TensorDesc &t = graph.inputs()[i].output();
        check_buffer(what, t, inputs[i]);
        funcs[graph.inputs()[i].name()] = input_func(t, inputs[i], image);
    }
    // A constant's value is row-major, the memory order of its tensor (a constant's order is the
    // identity): a buffer as a graph input's, read by its consumers and, as an output, its result.
    std::map<std::string, Halide::Buffer<>> constants;
    for (const dsl::Layer &layer : graph.layers()) {
        if (dsl::is_constant(layer)) {
            const Halide::Buffer<> value = dsl::constant_value(layer).copy();
            const auto *bytes = static_cast<const uint8_t *>(value.data());
            const Halide::Buffer<> &b = constants[layer.name()] = from_memory_order(
                layer.output(), std::vector<uint8_t>(bytes, bytes + value.size_in_bytes()));
            funcs[layer.name()] = input_func(layer.output(), b, image);
            continue;
        }
        std::vector<Func> ins;
        for (const dsl::Layer &in : layer.inputs()) ins.push_back(funcs.at(in.name()));
        if (moves_images(layer)) {
            // Every image of the input first, then its bytes as the output, read image by
            // image like a graph input.
            const dsl::TensorDesc &in = dsl::input_tensor(layer, 0);
            const Halide::Buffer<> whole = realize({ins.at(0)}, {in}, image).at(0);
            funcs[layer.name()] = input_func(layer.output(), moved_images(layer, whole), image);
            continue;
        }
        funcs[layer.name()] = layer_func(layer, ins);
    }
    std::vector<Func> outputs;
    std::vector<dsl::TensorDesc> tensors;
    for (const dsl::Layer &out : graph.outputs()) {
        if (out.is_input())
            throw ReferenceError(what + ": output '" + out.name() + "' is a graph input");
        if (constants.count(out.name())) continue;
        outputs.push_back(funcs.at(out.name()));
        tensors.push_back(out.output());
    }
    const std::vector<Halide::Buffer<>> computed =
        outputs.empty() ? std::vector<Halide::Buffer<>>{} : realize(outputs, tensors, image);
    std::vector<Halide::Buffer<>> results;
    size_t next = 0;
    for (const dsl::Layer &out : graph.outputs()) {
        const auto constant = constants.find(out.name());
        results.push_back(constant != constants.end() ? constant->second : computed.at(next++));
    }
    return results;
}

Halide::Buffer<> run_reference(const dsl::Layer &layer,
                               const std::vector<Halide::Buffer<>> &inputs) {
    const std::string what = "run_reference(" + layer.name() + ")";
    if (layer.is_input()) throw ReferenceError(what + ": a graph input has no algorithm");
    if (inputs.size() != layer.inputs().size())
        throw ReferenceError(what + ": " + std::to_string(inputs.size()) + " buffers for " +
                             std::to_string(layer.inputs().size()) + " inputs");
    if (layer.outputs().size() > 1)
        throw ReferenceError(what + ": the layer has " + std::to_string(layer.outputs().size()) +
                             " outputs; run a graph of its tuple_element layers");
    std::vector<Func> ins;
    Halide::Param<int> image;
    for (size_t i = 0; i < inputs.size(); ++i) {
        const dsl::TensorDesc &t = dsl::input_tensor(layer, i);
        check_buffer(what, t, inputs[i]);
        ins.push_back(input_func(t, inputs[i], image));
    }
    if (moves_images(layer)) return moved_images(layer, inputs[0]);
    return realize({layer_func(layer, ins)}, {layer.output()}, image)[0];
}

} // namespace vpuc::algorithms
