#include "compile_model.h"

#include <algorithm>
#include <cstdio>
#include <iostream>
#include <map>
#include <stdexcept>

#include "codegen/lower.h"
#include "dsl/registry.h"
#include "dsl/schedules_file.h"
#include "frontend/graph_passes.h"
#include "vpu_target/printable.h"

namespace vpuc::tools {

namespace {

// A schedules file: a JSON object from layer names to schedules in Schedule's JSON form. A
// layer a graph pass merged into another (`merged_into`) is named in the error with that layer.
void apply_schedules(const dsl::Graph &graph, const std::string &path,
                     const std::map<std::string, std::string> &merged_into) {
    const std::string what = "schedules file '" + path + "'";
    for (const auto &[layer_name, schedule] :
         dsl::parse_schedules_file(files::read_input_file(path, files::FileKind::Schedule), path)) {
        dsl::Layer layer;
        try {
            layer = graph.find(layer_name);
        } catch (const Error &) {
            const auto merged = merged_into.find(layer_name);
            if (merged != merged_into.end())
                throw std::runtime_error(what + ": layer '" + printable(layer_name) +
                                         "' is computed by layer '" + printable(merged->second) +
                                         "' after the graph passes (schedule that one, or "
                                         "compile with --no-graph-passes)");
            throw std::runtime_error(what + ": the model has no layer '" + printable(layer_name) +
                                     "'");
        }
        layer.schedule() = schedule;
    }
}

// `graph` with every layer's result among its outputs (after its own outputs), so that
// `vpuc run --dump-all` sees them. A multi-output layer's results are its tuple elements'.
dsl::Graph every_layer_an_output(const dsl::Graph &graph) {
    std::vector<dsl::Layer> outputs = graph.outputs();
    for (const dsl::Layer &layer : graph.layers())
        if (!dsl::is_constant(layer) && layer.outputs().size() == 1 &&
            std::none_of(outputs.begin(), outputs.end(),
                         [&](const dsl::Layer &o) { return o.same_as(layer); }))
            outputs.push_back(layer);
    return dsl::Graph(graph.name(), outputs);
}

} // namespace

ModelCompileOptions model_compile_options(const Options &o) {
    ModelCompileOptions options;
    const std::string precision = o.get("--precision", "fp16");
    if (precision == "int8")
        options.import.precision = frontend::Precision::INT8;
    else if (precision != "fp16")
        throw std::runtime_error("--precision '" + precision + "': fp16 or int8");
    for (const std::string &shape : o.all("--input-shape")) {
        const auto [name, extents] = input_shape_option(shape);
        if (!options.import.input_shapes.emplace(name, extents).second)
            throw std::runtime_error("--input-shape: '" + name + "' given twice");
    }
    options.quiet = o.has("--quiet");
    options.verbose = o.has("--verbose");
    options.graph_passes = !o.has("--no-graph-passes");
    options.graph_scheduling = !o.has("--no-graph-scheduling");
    options.keep_all_layers = o.has("--keep-all-layers");
    options.time_passes = o.has("--time-passes");
    options.fp16_activations = o.has("--fp16-activations");
    if (options.fp16_activations && !options.graph_passes)
        throw std::runtime_error("--fp16-activations is a graph pass; graph passes are off");
    options.schedules_file = o.get("--schedules");
    // --dump-after names a graph pass or a lowering pass; lower() checks the latter.
    options.dump_after = o.get("--dump-after");
    const std::string &dump_after = options.dump_after;
    const auto &graph_passes = frontend::graph_pass_names();
    options.dump_after_graph_pass =
        std::find(graph_passes.begin(), graph_passes.end(), dump_after) != graph_passes.end();
    const auto &lowering_passes = codegen::pass_names();
    if (!dump_after.empty() && !options.dump_after_graph_pass &&
        std::find(lowering_passes.begin(), lowering_passes.end(), dump_after) ==
            lowering_passes.end())
        throw std::runtime_error("--dump-after " + dump_after +
                                 ": no such pass (vpuc compile --list-passes lists them)");
    if (options.dump_after_graph_pass && !options.graph_passes)
        throw std::runtime_error("--dump-after " + dump_after + ": graph passes are off");
    return options;
}

dsl::Graph model_graph(const std::string &path, const ModelCompileOptions &options) {
    const frontend::ImportedModel model = frontend::import_onnx(path, options.import);
    if (!options.quiet)
        for (const std::string &note : model.notes) std::printf("note: %s\n", note.c_str());
    frontend::GraphPassOptions graph_options;
    graph_options.dump_after = options.dump_after;
    graph_options.time_passes = options.time_passes;
    graph_options.fp16_activations = options.fp16_activations;
    if (options.verbose || !options.dump_after.empty())
        graph_options.log = &std::cout;
    else if (!options.quiet)
        graph_options.notes = &std::cout;
    const frontend::GraphPassState passed =
        options.graph_passes ? frontend::run_graph_passes(model.graph, graph_options)
                             : frontend::GraphPassState(model.graph);
    const dsl::Graph graph =
        options.keep_all_layers ? every_layer_an_output(passed.graph) : passed.graph;
    if (!options.schedules_file.empty())
        apply_schedules(graph, options.schedules_file, passed.merged_into);
    return graph;
}

std::vector<uint8_t> lower_model(const dsl::Graph &graph, const target::Target &target,
                                 const ModelCompileOptions &options) {
    codegen::LowerOptions lower;
    if (!options.dump_after_graph_pass) lower.dump_after = options.dump_after;
    lower.time_passes = options.time_passes;
    lower.graph_scheduling = options.graph_scheduling;
    if (options.verbose || !options.dump_after.empty())
        lower.log = &std::cout;
    else if (!options.quiet)
        lower.notes = &std::cout;
    return codegen::lower(graph, target, lower);
}

} // namespace vpuc::tools
