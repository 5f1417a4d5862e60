// `vpuc reference`: an ONNX model run on the CPU through the layers' own algorithms (the Halide
// JIT), the expectation a compiled model's results are compared with.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <stdexcept>

#include "algorithms/reference.h"
#include "command.h"
#include "compile_model.h"
#include "dsl/registry.h"
#include "examples/zoo/opencv_reference.h"
#include "frontend/blob_io.h"
#include "frontend/graph_passes.h"
#include "frontend/onnx_import.h"
#include "options.h"
#include "tensor_inputs.h"
#include "vpu_target/printable.h"

namespace vpuc::tools {

namespace {

const std::vector<files::FileKind> kReferenceReads = {files::FileKind::Model, files::FileKind::Npy,
                                                      files::FileKind::Image};

// The result of `layer` in the numpy convention, from the reference's buffer.
Halide::Buffer<> as_tensor(const dsl::Layer &layer, const Halide::Buffer<> &buffer) {
    const dsl::TensorDesc &t = layer.output();
    return frontend::output_tensor(frontend::io_layout(t), algorithms::to_memory_order(t, buffer));
}

// Every layer's result, computed whole, as a tensor directory (frontend::write_tensor_dir) in
// the order computed.
void dump_all(const dsl::Graph &graph, const std::vector<Halide::Buffer<>> &inputs,
              const std::string &dir) {
    std::vector<dsl::Layer> layers;
    for (const dsl::Layer &layer : graph.layers())
        if (!dsl::is_constant(layer) && layer.outputs().size() == 1) layers.push_back(layer);
    const dsl::Graph all(graph.name(), layers);
    const std::vector<Halide::Buffer<>> results = algorithms::run_reference(all, inputs);
    std::vector<frontend::NamedTensor> tensors;
    for (size_t i = 0; i < layers.size(); ++i)
        tensors.push_back({layers[i].name(), as_tensor(layers[i], results[i])});
    frontend::write_tensor_dir(dir, tensors);
    std::printf("%zu tensors: %s/\n", tensors.size(), dir.c_str());
}

// The model run by OpenCV's DNN module in fp32, on the inputs as given (converted to float32).
int opencv_reference(const Options &o, const frontend::ImportedModel &model,
                     const std::vector<frontend::IoLayout> &layouts,
                     const std::vector<frontend::NamedTensor> &given) {
    if (!o.get("--dump-all").empty() || o.get("-o").empty())
        throw std::runtime_error("--opencv needs -o FILE.npz: OpenCV gives the model's outputs "
                                 "only");
    std::vector<frontend::NamedTensor> inputs;
    for (const frontend::NamedTensor &t : given) {
        frontend::IoLayout f32 = *std::find_if(layouts.begin(), layouts.end(),
                                               [&](const auto &l) { return l.name == t.name; });
        f32.type = Halide::Float(32);
        f32.layout = blob::Layout::ND;
        inputs.push_back(
            {t.name, frontend::output_tensor(f32, frontend::input_bytes(f32, t.value))});
    }
    const auto start = std::chrono::steady_clock::now();
    frontend::write_npz(o.get("-o"), zoo::run_opencv(o.positional[0], inputs, model.output_names));
    const double ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    std::printf("outputs: %s (OpenCV DNN, fp32, in %.0f ms)\n", o.get("-o").c_str(), ms);
    return 0;
}

int reference_command(const std::vector<std::string> &args) {
    std::vector<std::string> with_value = {"--input", "-o", "--dump-all", "--input-shape"};
    with_value.insert(with_value.end(), kImageOptions.begin(), kImageOptions.end());
    const Options o = parse_options(
        args, with_value, {kImageFlags[0], "--opencv", "--no-graph-passes", "--fp16-activations"},
        kReferenceReads);
    if (o.positional.size() != 1)
        throw std::runtime_error("reference takes one model file (see vpuc reference --help)");
    if (o.get("-o").empty() && o.get("--dump-all").empty())
        throw std::runtime_error("reference needs -o FILE.npz or --dump-all DIR");
    const ModelCompileOptions compile = model_compile_options(o);
    const frontend::ImportedModel model = frontend::import_onnx(o.positional[0], compile.import);
    // The graph vpuc compile lowers, so that its layers and theirs are the same.
    frontend::GraphPassOptions passes;
    passes.fp16_activations = compile.fp16_activations;
    const dsl::Graph graph = !compile.graph_passes || o.has("--opencv")
                                 ? model.graph
                                 : frontend::run_graph_passes(model.graph, passes).graph;
    std::vector<frontend::IoLayout> layouts;
    for (const dsl::Layer &in : graph.inputs()) layouts.push_back(frontend::io_layout(in.output()));
    const std::vector<frontend::NamedTensor> given = read_tensor_inputs(o, layouts);
    if (o.has("--opencv")) return opencv_reference(o, model, layouts, given);
    std::vector<Halide::Buffer<>> inputs;
    for (size_t i = 0; i < layouts.size(); ++i)
        for (const frontend::NamedTensor &t : given)
            if (t.name == layouts[i].name)
                inputs.push_back(algorithms::from_memory_order(
                    graph.inputs()[i].output(), frontend::input_bytes(layouts[i], t.value)));
    const auto start = std::chrono::steady_clock::now();
    if (!o.get("-o").empty()) {
        const std::vector<Halide::Buffer<>> results = algorithms::run_reference(graph, inputs);
        std::vector<frontend::NamedTensor> outputs;
        for (size_t i = 0; i < results.size(); ++i) {
            outputs.push_back(
                {graph.outputs()[i].name(), as_tensor(graph.outputs()[i], results[i])});
            outputs.back().value = frontend::output_in_type(outputs.back(), model.output_types[i]);
        }
        frontend::write_npz(o.get("-o"), outputs);
        std::printf("outputs: %s\n", o.get("-o").c_str());
    }
    if (!o.get("--dump-all").empty()) dump_all(graph, inputs, o.get("--dump-all"));
    const double ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    std::printf("reference computed in %.0f ms\n", ms);
    return 0;
}

const bool registered = register_command(
    {"reference", "run an ONNX model on the CPU reference (Halide JIT) and write its results",
     "usage: vpuc reference MODEL --input ... (-o FILE.npz | --dump-all DIR) [options]\n\n"
     "Imports MODEL and runs the graph passes as vpuc compile does, then runs the graph on\n"
     "the CPU with the layers' own algorithms, in the device's element types (float inputs\n"
     "become fp16), every layer computed whole. Its results are what the compiled blob's\n"
     "should be (bit for bit on the DPU, within an ulp on the SHAVEs): compare them with\n"
     "`vpuc compare`.\n\n"
     "options:\n" +
         std::string(kTensorInputHelp) +
         "  -o FILE.npz        write the outputs, named as the blob names them\n"
         "  --opencv           run the model with OpenCV's DNN module (fp32) instead: an\n"
         "                     independent implementation of every op (docs/zoo.md says which\n"
         "                     models it runs)\n"
         "  --dump-all DIR     write every layer's result as DIR/NAME.npy, NAME the layer's (the\n"
         "                     ONNX node's) name, and DIR/index.txt listing them in order\n"
         "  --input-shape NAME=DIMS\n"
         "                     the shape of graph input NAME, as for vpuc compile\n"
         "  --no-graph-passes  run the graph as imported (as vpuc compile --no-graph-passes)\n"
         "  --fp16-activations compute elu, selu, swish, mish and sigmoid in fp16, as\n"
         "                     vpuc compile --fp16-activations does\n" +
         size_options_help(kReferenceReads) +
         "\n\nexit status: 0 when the results are written; 1 on an error, with a one-line "
         "reason",
     reference_command});

} // namespace

} // namespace vpuc::tools
