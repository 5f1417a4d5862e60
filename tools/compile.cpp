// `vpuc compile`: an ONNX model to a blob.
#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <iostream>
#include <map>
#include <stdexcept>

#include "codegen/lower.h"
#include "command.h"
#include "dsl/graph_text.h"
#include "dsl/registry.h"
#include "frontend/graph_passes.h"
#include "frontend/onnx_import.h"
#include "options.h"
#include "vpu_target/blob_writer.h"

namespace vpuc::tools {

namespace {

const std::vector<files::FileKind> kCompileReads = {files::FileKind::Model, files::FileKind::Target,
                                                    files::FileKind::Schedule};

// A schedules file: a JSON object from layer names to schedules in Schedule's JSON form. A
// layer a graph pass merged into another (`merged_into`) is named in the error with that layer.
void apply_schedules(const dsl::Graph &graph, const std::string &path,
                     const std::map<std::string, std::string> &merged_into) {
    const std::vector<uint8_t> bytes = files::read_input_file(path, files::FileKind::Schedule);
    const nlohmann::json doc = nlohmann::json::parse(bytes.begin(), bytes.end(), nullptr, false);
    const std::string what = "schedules file '" + path + "'";
    if (doc.is_discarded() || !doc.is_object())
        throw std::runtime_error(what + ": not a JSON object of layer names to schedules");
    for (const auto &[layer_name, schedule] : doc.items()) {
        dsl::Layer layer;
        try {
            layer = graph.find(layer_name);
        } catch (const Error &) {
            const auto merged = merged_into.find(layer_name);
            if (merged != merged_into.end())
                throw std::runtime_error(what + ": layer '" + layer_name +
                                         "' is computed by layer '" + merged->second +
                                         "' after the graph passes (schedule that one, or "
                                         "compile with --no-graph-passes)");
            throw std::runtime_error(what + ": the model has no layer '" + layer_name + "'");
        }
        try {
            layer.schedule() = dsl::Schedule::from_json(schedule.dump());
        } catch (const Error &e) {
            throw std::runtime_error(what + ": layer '" + layer_name + "': " + e.what());
        }
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

int compile_command(const std::vector<std::string> &args) {
    const Options o = parse_options(
        args, {"-o", "--target", "--precision", "--input-shape", "--schedules", "--dump-after"},
        {"--time-passes", "--verbose", "--quiet", "--print-graph", "--no-graph-passes",
         "--list-passes", "--keep-all-layers"},
        kCompileReads);
    if (o.has("--list-passes")) {
        for (const std::string &pass : frontend::graph_pass_names())
            std::printf("%s (graph)\n", pass.c_str());
        for (const std::string &pass : codegen::pass_names()) std::printf("%s\n", pass.c_str());
        return 0;
    }
    if (o.positional.size() != 1)
        throw std::runtime_error("compile takes one model file (see vpuc compile --help)");
    const std::string out = o.get("-o");
    if (out.empty() && !o.has("--print-graph"))
        throw std::runtime_error("compile needs -o BLOB, the file to write");
    frontend::ImportOptions import;
    if (o.get("--precision", "fp16") != "fp16")
        throw std::runtime_error("--precision '" + o.get("--precision") +
                                 "': this version compiles fp16 only");
    for (const std::string &shape : o.all("--input-shape")) {
        const auto [name, extents] = input_shape_option(shape);
        if (!import.input_shapes.emplace(name, extents).second)
            throw std::runtime_error("--input-shape: '" + name + "' given twice");
    }
    const bool quiet = o.has("--quiet"), verbose = o.has("--verbose");
    // --dump-after names a graph pass or a lowering pass; lower() checks the latter.
    const std::string dump_after = o.get("--dump-after");
    const auto &graph_passes = frontend::graph_pass_names();
    const bool dump_graph =
        std::find(graph_passes.begin(), graph_passes.end(), dump_after) != graph_passes.end();
    const auto &lowering_passes = codegen::pass_names();
    if (!dump_after.empty() && !dump_graph &&
        std::find(lowering_passes.begin(), lowering_passes.end(), dump_after) ==
            lowering_passes.end())
        throw std::runtime_error("--dump-after " + dump_after +
                                 ": no such pass (vpuc compile --list-passes lists them)");
    if (dump_graph && o.has("--no-graph-passes"))
        throw std::runtime_error("--dump-after " + dump_after + ": graph passes are off");
    const auto start = std::chrono::steady_clock::now();
    const frontend::ImportedModel model = frontend::import_onnx(o.positional[0], import);
    if (!quiet)
        for (const std::string &note : model.notes) std::printf("note: %s\n", note.c_str());
    frontend::GraphPassOptions graph_options;
    graph_options.dump_after = dump_after;
    graph_options.time_passes = o.has("--time-passes");
    if (verbose || !dump_after.empty())
        graph_options.log = &std::cout;
    else if (!quiet)
        graph_options.notes = &std::cout;
    const frontend::GraphPassState passed =
        o.has("--no-graph-passes") ? frontend::GraphPassState(model.graph)
                                   : frontend::run_graph_passes(model.graph, graph_options);
    const dsl::Graph graph =
        o.has("--keep-all-layers") ? every_layer_an_output(passed.graph) : passed.graph;
    if (!o.get("--schedules").empty())
        apply_schedules(graph, o.get("--schedules"), passed.merged_into);
    if (o.has("--print-graph")) {
        std::fputs(dsl::print_graph(graph).c_str(), stdout);
        if (out.empty()) return 0;
    }
    const target::Target target = target::load_target(o.get("--target", "vpu27"));
    codegen::LowerOptions lower;
    if (!dump_graph) lower.dump_after = dump_after;
    lower.time_passes = o.has("--time-passes");
    if (verbose || !dump_after.empty())
        lower.log = &std::cout;
    else if (!quiet)
        lower.notes = &std::cout;
    const std::vector<uint8_t> blob = codegen::lower(graph, target, lower);
    blob::write_file(out, blob);
    const double ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    if (!quiet)
        std::printf("%s: %zu layers, %zu bytes for %s, compiled in %.0f ms\n", out.c_str(),
                    graph.layers().size(), blob.size(), target.name.c_str(), ms);
    return 0;
}

const bool registered = register_command(
    {"compile", "compile an ONNX model into a blob",
     "usage: vpuc compile MODEL -o BLOB [options]\n\n"
     "Imports the ONNX model MODEL (docs/onnx.md: the ops it maps, and how), rewrites the\n"
     "graph with the graph passes (docs/graph-passes.md), compiles it for the target and\n"
     "writes the blob to BLOB.\n\n"
     "options:\n"
     "  -o BLOB            the blob file to write\n"
     "  --target T|FILE    target (a bundled name, vpu27 or vpu20, or a target file;\n"
     "                     default vpu27)\n"
     "  --precision P      fp16 (the default, and the only one yet): float tensors are\n"
     "                     computed in fp16\n"
     "  --input-shape NAME=DIMS\n"
     "                     the shape of graph input NAME, as 1x3x224x224, fixing its\n"
     "                     dynamic dimensions (repeat for several inputs)\n"
     "  --schedules FILE   a JSON object from layer names (the ONNX node names) to schedules\n"
     "                     in their JSON form (dsl/schedule.h); other layers get default ones\n"
     "  --dump-after PASS  print the pass log and the IR after PASS: the graph after a graph\n"
     "                     pass, the lowering's IR after a lowering pass\n"
     "  --list-passes      list the graph passes (docs/graph-passes.md), then the lowering\n"
     "                     passes, in order\n"
     "  --no-graph-passes  compile the graph as imported: no batch-norm folding, activation\n"
     "                     fusion, constant folding or identity removal\n"
     "  --time-passes      print each graph and lowering pass's time to stderr\n"
     "  --keep-all-layers  make every layer's result an output of the blob too, for\n"
     "                     `vpuc run --dump-all` (a debugging blob: each result goes to DDR)\n"
     "  --print-graph      print the graph (one layer per line) after the graph passes, as it\n"
     "                     is compiled; without -o, only print it\n"
     "  --verbose          print the pass log\n"
     "  --quiet            print nothing but errors\n" +
         size_options_help(kCompileReads) +
         "\n\nexit status: 0 when the blob is written; 1 on an error, with a one-line reason "
         "that names\nthe file, and the node or layer concerned",
     compile_command});

} // namespace

} // namespace vpuc::tools
