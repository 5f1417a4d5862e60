// An ONNX model to a blob, as `vpuc compile` does it: import, graph passes, schedules from a
// file, lowering. `vpuc compile` writes the blob; `vpuc profile` runs it.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "dsl/graph.h"
#include "frontend/onnx_import.h"
#include "options.h"
#include "vpu_target/target.h"

namespace vpuc::tools {

struct ModelCompileOptions {
    frontend::ImportOptions import; // --precision, --input-shape
    std::string schedules_file;     // --schedules
    std::string dump_after;         // --dump-after: a graph pass or a lowering pass
    bool dump_after_graph_pass = false;
    bool graph_passes = true;      // not --no-graph-passes
    bool graph_scheduling = true;  // not --no-graph-scheduling
    bool keep_all_layers = false;  // --keep-all-layers
    bool time_passes = false;      // --time-passes
    bool fp16_activations = false; // --fp16-activations
    bool verbose = false;          // --verbose: the pass log on stdout
    bool quiet = false;            // --quiet: no notes
};

// The options of `vpuc compile` among `options`, checked (throws std::runtime_error naming
// the option); those the command does not take are read as absent.
ModelCompileOptions model_compile_options(const Options &options);

// The model at `path` imported, through the graph passes, with every layer an output when
// asked and the schedules file applied: the graph to lower. Prints the importer's and the
// graph passes' notes and logs on stdout as the options ask.
dsl::Graph model_graph(const std::string &path, const ModelCompileOptions &options);

// `graph` lowered for `target` into a blob, the lowering's notes and logs on stdout as the
// options ask.
std::vector<uint8_t> lower_model(const dsl::Graph &graph, const target::Target &target,
                                 const ModelCompileOptions &options);

} // namespace vpuc::tools
