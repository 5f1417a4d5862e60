// `vpuc bench models`: the model zoo compiled with default schedules and simulated, against the
// roofline of each network (bench/models.h).
#include <chrono>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>
#include <vector>

#include "bench/layers.h"
#include "bench/models.h"
#include "command.h"
#include "examples/zoo/zoo.h"
#include "frontend/graph_passes.h"
#include "frontend/onnx_import.h"
#include "options.h"
#include "vpu_target/printable.h"
#include "vpu_target/timing_model.h"

namespace vpuc::tools {

namespace {

using Json = nlohmann::ordered_json;

const char *const kUsage =
    R"(usage: vpuc bench models [--model NAME] [--target T] [--no-graph-scheduling] [--json]

Compiles every network of the model zoo (docs/zoo.md) for vpu27 and vpu20, int8 (the zoo's
pre-quantized QDQ form) and fp16, with default schedules and the graph scheduling passes
(docs/graph-scheduling.md), and simulates each. Per run it prints:
  - the simulated latency (us) and its FPS (1 / latency, batch 1);
  - the A/B: the latency without graph scheduling (no gs us), and the speedup it gives;
  - the roofline: the larger of the DPU's compute at its peak for each layer's op kind and
    the minimal DDR traffic (inputs, outputs and constants once) at the DDR bandwidth,
    computed from the graph alone (bench/include/bench/models.h), and which bounds it;
    "share" is roofline / latency;
  - the mean busy share of the DPU, DMA and SHAVE engines, and the highest CMX byte any task
    addresses (cmx KB);
  - the DDR bytes the DMAs move (MB), by what they carry: constants (weights and their
    tables), network inputs, activations loaded and stored (intermediate tensors, spills
    included), network outputs;
  - the compile time (import and graph passes; lowering with verification and the race
    check) and the simulator's wall time, timing only and functional.
Progress goes to stderr. Timings vary with the machine's load; simulated figures do not.

options:
  --model NAME   one network of the zoo (vpuc zoo --list names them); default all
  --target T     one target (a bundled name or a target file); default vpu27 and vpu20
  --no-graph-scheduling
                 measure without the graph scheduling passes; the A/B column then gives
                 the latency with them
  --json         print the same data as one JSON document (times in us and ms, bytes)

exit status: 0 when every run compiles and simulates; 1 otherwise (the row says why))";

struct Run {
    std::string model, precision, target;
    std::string error;
    bench::ModelRoofline roofline;
    bench::ModelMeasurement m;
    double import_ms = 0;
    double other_latency_ns = 0; // with graph scheduling the other way: the A/B
};

Run run_one(const std::string &model, bool int8, const target::Target &target,
            bool graph_scheduling) {
    Run r{model, int8 ? "int8" : "fp16", target.name, {}, {}, {}, 0, 0};
    try {
        frontend::ImportOptions options;
        if (int8) options.precision = frontend::Precision::INT8;
        // Writing the model (and calibrating its QDQ form) is the zoo's work, not compiling.
        const std::vector<uint8_t> bytes =
            int8 ? zoo::qdq_model_bytes(model) : zoo::model_bytes(model);
        const auto start = std::chrono::steady_clock::now();
        const std::string name = model + (int8 ? "_qdq.onnx" : ".onnx");
        const frontend::ImportedModel imported = frontend::import_onnx_bytes(bytes, name, options);
        const dsl::Graph graph = frontend::run_graph_passes(imported.graph).graph;
        r.import_ms = bench::ms_since(start);
        r.roofline = bench::model_roofline(graph, target);
        r.m = bench::measure_model(graph, target, graph_scheduling);
        r.error = r.m.error;
        if (r.error.empty())
            r.other_latency_ns = bench::simulated_latency_ns(graph, target, !graph_scheduling);
    } catch (const std::exception &e) {
        r.error = e.what();
    }
    return r;
}

double mb(int64_t bytes) {
    return double(bytes) / 1e6;
}

void print_table(const std::vector<Run> &runs, bool graph_scheduling) {
    std::printf("vpuc bench models: default schedules, %s, %s\n\n",
                graph_scheduling ? "graph scheduling on (no gs: off)"
                                 : "graph scheduling off (gs us: on)",
                target::timing_model_label(target::load_target("vpu27")).c_str());
    std::printf("%-20s %-6s %-5s %10s %8s %10s %6s %10s %-7s %6s %5s %5s %5s %7s %7s %7s %7s %7s "
                "%8s %8s %8s %8s\n",
                "model", "target", "dtype", "latency us", "FPS",
                graph_scheduling ? "no gs us" : "gs us", "gain", "roofline", "bound", "share",
                "DPU", "DMA", "SHAVE", "cmx KB", "const", "in", "act ld", "act st", "compile",
                "lower", "sim t", "sim f");
    for (const Run &r : runs) {
        std::printf("%-20s %-6s %-5s ", r.model.c_str(), r.target.c_str(), r.precision.c_str());
        if (!r.error.empty()) {
            std::printf("error: %s\n", printable(r.error).c_str());
            continue;
        }
        const bench::ModelMeasurement &m = r.m;
        const double on = graph_scheduling ? m.latency_ns : r.other_latency_ns;
        const double off = graph_scheduling ? r.other_latency_ns : m.latency_ns;
        std::printf("%10.1f %8.1f %10.1f %5.2fx %10.1f %-7s %5.0f%% %4.0f%% %4.0f%% %4.0f%% %7.0f "
                    "%7.2f %7.2f %7.2f %7.2f %6.0fms %6.0fms %6.0fms %6.0fms\n",
                    m.latency_ns / 1e3, 1e9 / m.latency_ns, r.other_latency_ns / 1e3, off / on,
                    r.roofline.bound_ns() / 1e3, r.roofline.bound_by(),
                    100 * r.roofline.bound_ns() / m.latency_ns, 100 * m.dpu_busy, 100 * m.dma_busy,
                    100 * m.shave_busy, double(m.cmx_high_water_bytes) / 1024, mb(m.ddr.constants),
                    mb(m.ddr.network_inputs), mb(m.ddr.activation_loads),
                    mb(m.ddr.activation_stores), r.import_ms, m.lower_ms, m.simulate_timing_ms,
                    m.simulate_functional_ms);
    }
    std::printf("\ngain: the latency without graph scheduling over the latency with it.\nDDR MB by "
                "kind: const (constants: weights, tables), in (network inputs), act ld and act "
                "st\n(intermediate tensors loaded and stored, spills included); network outputs "
                "are in the JSON.\ncompile: import and graph passes; lower: lowering with "
                "verification; sim t / sim f: simulator wall\ntime, timing only / functional.\n");
}

void print_json(const std::vector<Run> &runs, bool graph_scheduling) {
    Json out;
    out["timing_model_version"] = target::kTimingModelVersion;
    Json list = Json::array();
    for (const Run &r : runs) {
        Json row;
        row["model"] = r.model;
        row["target"] = r.target;
        row["dtype"] = r.precision;
        if (!r.error.empty()) {
            row["error"] = r.error;
            list.push_back(std::move(row));
            continue;
        }
        const bench::ModelMeasurement &m = r.m;
        row["layers"] = m.layers;
        row["latency_us"] = m.latency_ns / 1e3;
        row["fps"] = 1e9 / m.latency_ns;
        row["graph_scheduling"] = graph_scheduling;
        row[graph_scheduling ? "latency_us_without_graph_scheduling"
                             : "latency_us_with_graph_scheduling"] = r.other_latency_ns / 1e3;
        row["roofline_us"] = r.roofline.bound_ns() / 1e3;
        row["roofline_compute_us"] = r.roofline.compute_ns / 1e3;
        row["roofline_ddr_us"] = r.roofline.ddr_ns / 1e3;
        row["roofline_ddr_bytes"] = r.roofline.ddr_bytes;
        row["bound_by"] = r.roofline.bound_by();
        row["roofline_share"] = r.roofline.bound_ns() / m.latency_ns;
        row["dpu_busy"] = m.dpu_busy;
        row["dma_busy"] = m.dma_busy;
        row["shave_busy"] = m.shave_busy;
        row["cmx_high_water_bytes"] = m.cmx_high_water_bytes;
        row["ddr_bytes"] = {{"constants", m.ddr.constants},
                            {"network_inputs", m.ddr.network_inputs},
                            {"activation_loads", m.ddr.activation_loads},
                            {"activation_stores", m.ddr.activation_stores},
                            {"network_outputs", m.ddr.network_outputs},
                            {"total", m.ddr.total()}};
        row["import_ms"] = r.import_ms;
        row["lower_ms"] = m.lower_ms;
        row["simulate_timing_ms"] = m.simulate_timing_ms;
        row["simulate_functional_ms"] = m.simulate_functional_ms;
        list.push_back(std::move(row));
    }
    out["runs"] = std::move(list);
    std::printf("%s\n", out.dump(2).c_str());
}

int run(const std::vector<std::string> &args) {
    const Options o = parse_options(args, {"--model", "--target"},
                                    {"--json", "--no-graph-scheduling"}, {files::FileKind::Target});
    const bool graph_scheduling = !o.has("--no-graph-scheduling");
    if (!o.positional.empty())
        throw std::runtime_error("unexpected argument '" + o.positional[0] + "' (see --help)");
    std::vector<std::string> models;
    if (!o.get("--model").empty())
        models.push_back(zoo::model_info(o.get("--model")).name);
    else
        for (const zoo::ModelInfo &m : zoo::models()) models.push_back(m.name);
    std::vector<target::Target> targets;
    if (!o.get("--target").empty())
        targets.push_back(target::load_target(o.get("--target")));
    else
        for (const char *name : {"vpu27", "vpu20"}) targets.push_back(target::load_target(name));

    std::vector<Run> runs;
    for (const std::string &model : models)
        for (const target::Target &t : targets)
            for (bool int8 : {true, false}) {
                if (int8 && !zoo::model_info(model).has_qdq_form) continue;
                std::fprintf(stderr, "[%zu] %s %s %s ... ", runs.size() + 1, model.c_str(),
                             t.name.c_str(), int8 ? "int8" : "fp16");
                std::fflush(stderr);
                runs.push_back(run_one(model, int8, t, graph_scheduling));
                std::fprintf(stderr, "%s\n", runs.back().error.empty() ? "done" : "failed");
            }
    if (o.has("--json"))
        print_json(runs, graph_scheduling);
    else
        print_table(runs, graph_scheduling);
    for (const Run &r : runs)
        if (!r.error.empty()) return 1;
    return 0;
}

const bool registered = register_command(
    {"bench models", "the model zoo's simulated latency against each network's roofline",
     kUsage + size_options_help({files::FileKind::Target}), run});

} // namespace

} // namespace vpuc::tools
