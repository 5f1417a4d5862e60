// `vpuc compile`: an ONNX model to a blob.
#include <nlohmann/json.hpp>

#include <chrono>
#include <cstdio>
#include <iostream>
#include <stdexcept>

#include "codegen/lower.h"
#include "command.h"
#include "dsl/graph_text.h"
#include "frontend/onnx_import.h"
#include "options.h"
#include "vpu_target/blob_writer.h"

namespace vpuc::tools {

namespace {

const std::vector<files::FileKind> kCompileReads = {files::FileKind::Model, files::FileKind::Target,
                                                    files::FileKind::Schedule};

// "data=1x3x224x224" as a name and its extents.
std::pair<std::string, std::vector<int64_t>> input_shape(const std::string &text) {
    const size_t eq = text.rfind('=');
    const std::string bad = "--input-shape '" + text + "': expected NAME=1x3x224x224";
    if (eq == std::string::npos || eq == 0 || eq + 1 == text.size()) throw std::runtime_error(bad);
    std::vector<int64_t> extents;
    size_t at = eq + 1;
    while (at <= text.size()) {
        const size_t x = std::min(text.find('x', at), text.size());
        extents.push_back(integer_option("--input-shape", text.substr(at, x - at), 1, 1 << 30));
        at = x + 1;
    }
    return {text.substr(0, eq), extents};
}

// A schedules file: a JSON object from layer names to schedules in Schedule's JSON form.
void apply_schedules(const dsl::Graph &graph, const std::string &path) {
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
            throw std::runtime_error(what + ": the model has no layer '" + layer_name + "'");
        }
        try {
            layer.schedule() = dsl::Schedule::from_json(schedule.dump());
        } catch (const Error &e) {
            throw std::runtime_error(what + ": layer '" + layer_name + "': " + e.what());
        }
    }
}

int compile_command(const std::vector<std::string> &args) {
    const Options o = parse_options(
        args, {"-o", "--target", "--precision", "--input-shape", "--schedules", "--dump-after"},
        {"--time-passes", "--verbose", "--quiet", "--print-graph"}, kCompileReads);
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
        const auto [name, extents] = input_shape(shape);
        if (!import.input_shapes.emplace(name, extents).second)
            throw std::runtime_error("--input-shape: '" + name + "' given twice");
    }
    const bool quiet = o.has("--quiet"), verbose = o.has("--verbose");
    const auto start = std::chrono::steady_clock::now();
    const frontend::ImportedModel model = frontend::import_onnx(o.positional[0], import);
    if (!quiet)
        for (const std::string &note : model.notes) std::printf("note: %s\n", note.c_str());
    if (!o.get("--schedules").empty()) apply_schedules(model.graph, o.get("--schedules"));
    if (o.has("--print-graph")) {
        std::fputs(dsl::print_graph(model.graph).c_str(), stdout);
        if (out.empty()) return 0;
    }
    const target::Target target = target::load_target(o.get("--target", "vpu27"));
    codegen::LowerOptions lower;
    lower.dump_after = o.get("--dump-after");
    lower.time_passes = o.has("--time-passes");
    if (verbose || !lower.dump_after.empty())
        lower.log = &std::cout;
    else if (!quiet)
        lower.notes = &std::cout;
    const std::vector<uint8_t> blob = codegen::lower(model.graph, target, lower);
    blob::write_file(out, blob);
    const double ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    if (!quiet)
        std::printf("%s: %zu layers, %zu bytes for %s, compiled in %.0f ms\n", out.c_str(),
                    model.graph.layers().size(), blob.size(), target.name.c_str(), ms);
    return 0;
}

const bool registered = register_command(
    {"compile", "compile an ONNX model into a blob",
     "usage: vpuc compile MODEL -o BLOB [options]\n\n"
     "Imports the ONNX model MODEL (docs/onnx.md: the ops it maps, and how), compiles it\n"
     "for the target and writes the blob to BLOB.\n\n"
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
     "  --dump-after PASS  print the lowering's pass log and the IR after PASS\n"
     "                     (vpuc demo --list-passes lists them)\n"
     "  --time-passes      print each lowering pass's time to stderr\n"
     "  --print-graph      print the imported graph (one layer per line) before compiling;\n"
     "                     without -o, only print it\n"
     "  --verbose          print the pass log\n"
     "  --quiet            print nothing but errors\n" +
         size_options_help(kCompileReads) +
         "\n\nexit status: 0 when the blob is written; 1 on an error, with a one-line reason "
         "that names\nthe file, and the node or layer concerned",
     compile_command});

} // namespace

} // namespace vpuc::tools
