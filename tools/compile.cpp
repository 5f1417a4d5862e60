// `vpuc compile`: an ONNX model to a blob.
#include <chrono>
#include <cstdio>
#include <stdexcept>

#include "codegen/lower.h"
#include "command.h"
#include "compile_model.h"
#include "dsl/graph_text.h"
#include "frontend/graph_passes.h"
#include "options.h"
#include "vpu_target/blob_writer.h"

namespace vpuc::tools {

namespace {

const std::vector<files::FileKind> kCompileReads = {files::FileKind::Model, files::FileKind::Target,
                                                    files::FileKind::Schedule};

int compile_command(const std::vector<std::string> &args) {
    const Options o = parse_options(
        args, {"-o", "--target", "--precision", "--input-shape", "--schedules", "--dump-after"},
        {"--time-passes", "--verbose", "--quiet", "--print-graph", "--no-graph-passes",
         "--no-graph-scheduling", "--list-passes", "--keep-all-layers", "--fp16-activations"},
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
    const ModelCompileOptions options = model_compile_options(o);
    const auto start = std::chrono::steady_clock::now();
    const dsl::Graph graph = model_graph(o.positional[0], options);
    if (o.has("--print-graph")) {
        std::fputs(dsl::print_graph(graph).c_str(), stdout);
        if (out.empty()) return 0;
    }
    const target::Target target = target::load_target(o.get("--target", "vpu27"));
    const std::vector<uint8_t> blob = lower_model(graph, target, options);
    blob::write_file(out, blob);
    const double ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    if (!options.quiet)
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
     "  --precision P      fp16 (the default): float tensors are computed in fp16;\n"
     "                     int8: a pre-quantized (QDQ) model's int8 layers, with no float\n"
     "                     layer left (calibration of fp32 models is not supported yet);\n"
     "                     a QDQ model's quantized layers are int8 under either\n"
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
     "  --no-graph-scheduling\n"
     "                     keep every unscheduled layer's default schedule: no SOK choice,\n"
     "                     no outputs kept in CMX, no weights loaded during the layer\n"
     "                     before (docs/graph-scheduling.md)\n"
     "  --fp16-activations elu, selu, swish, mish and sigmoid of fp16 tensors computed in fp16\n"
     "                     arithmetic, about twice as fast on the SHAVEs, within\n"
     "                     2^-8 + 2^-9 |y| of the exact function (default: float32, the exact\n"
     "                     function rounded once; docs/layers.md)\n"
     "  --time-passes      print each graph and lowering pass's time to stderr\n"
     "  --keep-all-layers  make every layer's result an output of the blob too, for\n"
     "                     `vpuc run --dump-all` (a debugging blob: each result goes to DDR)\n"
     "  --print-graph      print the graph (one layer per line) after the graph passes, as it\n"
     "                     is compiled; without -o, only print it\n"
     "  --verbose          print the pass log\n"
     "  --quiet            print nothing but errors\n" +
         size_options_help(kCompileReads) +
         "\n\nenvironment:\n"
         "  VPUC_KERNEL_CACHE_DIR=DIR\n"
         "                     keep compiled SHAVE kernels in DIR and reuse them in later\n"
         "                     compiles (docs/ARCHITECTURE.md, \"codegen: SHAVE kernels\");\n"
         "                     results are the same with or without it"
         "\n\nexit status: 0 when the blob is written; 1 on an error, with a one-line reason "
         "that names\nthe file, and the node or layer concerned",
     compile_command});

} // namespace

} // namespace vpuc::tools
