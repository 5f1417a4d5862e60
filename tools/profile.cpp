// `vpuc profile`: where the time of a model or a blob goes: a timing-only run, with latency,
// engine busy time and the per-layer table. A model is compiled in memory as `vpuc compile`
// compiles it.
#include <cstdio>
#include <stdexcept>

#include "command.h"
#include "compile_model.h"
#include "options.h"
#include "run_report.h"
#include "timeline.h"
#include "vpu_target/verifier.h"

namespace vpuc::tools {

namespace {

const std::vector<files::FileKind> kProfileReads = {files::FileKind::Model, files::FileKind::Blob,
                                                    files::FileKind::Target,
                                                    files::FileKind::Schedule};
// The options of `vpuc compile` that `vpuc profile` takes, for a model only.
const std::vector<std::string> kCompileValues = {"--precision", "--input-shape", "--schedules"};
const std::vector<std::string> kCompileFlags = {"--no-graph-passes",  "--no-graph-scheduling",
                                                "--fp16-activations", "--time-passes",
                                                "--verbose",          "--quiet"};

bool is_model(const std::string &path) {
    const std::string suffix = ".onnx";
    return path.size() > suffix.size() &&
           path.compare(path.size() - suffix.size(), suffix.size(), suffix) == 0;
}

int profile_command(const std::vector<std::string> &args) {
    std::vector<std::string> with_value = {"--target", "--trace", "--timeline", "--sort"};
    with_value.insert(with_value.end(), kCompileValues.begin(), kCompileValues.end());
    std::vector<std::string> flags = {"--json"};
    flags.insert(flags.end(), kCompileFlags.begin(), kCompileFlags.end());
    const Options o = parse_options(args, with_value, flags, kProfileReads);
    if (o.positional.size() != 1)
        throw std::runtime_error("profile takes one model or blob file (see vpuc profile --help)");
    const std::string &path = o.positional[0];
    const LayerOrder order = layer_order_option(o.get("--sort", "start"));
    const bool json = o.has("--json");
    std::vector<uint8_t> bytes;
    target::Target target;
    if (is_model(path)) {
        ModelCompileOptions options = model_compile_options(o);
        if (json && options.verbose)
            throw std::runtime_error("--verbose prints the pass log, which has no place in "
                                     "--json output");
        options.quiet = options.quiet || json;
        target = target::load_target(o.get("--target", "vpu27"));
        const dsl::Graph graph = model_graph(path, options);
        bytes = lower_model(graph, target, options);
        if (!options.quiet)
            std::printf("%s: %zu layers, %zu bytes for %s\n\n", path.c_str(), graph.layers().size(),
                        bytes.size(), target.name.c_str());
    } else {
        for (const std::vector<std::string> *model_options : {&kCompileValues, &kCompileFlags})
            for (const std::string &option : *model_options)
                if (o.has(option) || !o.all(option).empty())
                    throw std::runtime_error(option + " applies to a model (MODEL.onnx); '" + path +
                                             "' is read as a blob");
        bytes = blob::read_file(path);
        target = blob_target(blob::verify_structure(bytes), o.get("--target"));
    }
    sim::Simulator simulator(std::move(target), std::move(bytes));
    const sim::RunResult result = simulator.run({}, sim::Mode::TimingOnly);
    if (json)
        std::fputs(run_report_json(simulator, result, order).c_str(), stdout);
    else
        print_run_report(simulator, result, order);
    if (!o.get("--trace").empty())
        write_trace(result, path, o.get("--trace"), json ? stderr : stdout);
    if (!o.get("--timeline").empty()) {
        write_timeline_png(result, path + " on " + simulator.target().name, o.get("--timeline"));
        std::fprintf(json ? stderr : stdout, "\ntimeline: %s\n", o.get("--timeline").c_str());
    }
    return 0;
}

const bool registered = register_command(
    {"profile", "time a model or a blob: latency, engine busy time, per-layer table",
     "usage: vpuc profile MODEL.onnx|BLOB [options]\n\n"
     "Runs a blob on the simulator, timing only (no data is computed), and prints the\n"
     "latency, each engine's busy time and a table of the layers (their ONNX node names):\n"
     "tasks, first start, span, and DMA, DPU and SHAVE busy time. A file whose name ends in\n"
     ".onnx is compiled first, in memory, as `vpuc compile` compiles it; any other file is\n"
     "read as a blob.\n\n"
     "options:\n"
     "  --target T|FILE    a model: the target to compile for (a bundled name, vpu27 or\n"
     "                     vpu20, or a target file; default vpu27); a blob: check that it\n"
     "                     was compiled for this target\n"
     "  --sort ORDER       the table's order: start (first start, the default), time (longest\n"
     "                     span first) or busy (most engine time first)\n"
     "  --json             print the same data as one JSON document (times in us)\n"
     "  --trace FILE       write a Chrome trace-event JSON (Perfetto) to FILE\n"
     "  --timeline FILE.png\n"
     "                     draw the engines' tasks over time into a PNG picture\n\n"
     "options of `vpuc compile`, for a model (see vpuc compile --help):\n"
     "  --precision P, --input-shape NAME=DIMS, --schedules FILE, --no-graph-passes,\n"
     "  --no-graph-scheduling, --fp16-activations, --time-passes, --verbose, --quiet (no\n"
     "  compiler notes; implied by --json)\n" +
         size_options_help(kProfileReads) +
         "\n\nexit status: 0 when the run completes; 1 on an error (a model that does not "
         "compile,\nan invalid blob), with a one-line reason",
     profile_command});

} // namespace

} // namespace vpuc::tools
