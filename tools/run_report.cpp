#include "run_report.h"

#include <algorithm>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <stdexcept>

#include "vpu_target/printable.h"
#include "vpu_target/timing_model.h"

namespace vpuc::tools {

namespace {

// The layer column fits PyTorch-style names ("/features/features.3/conv/conv.0/Conv") up to
// this width; longer ones lose their beginning, since their end tells layers apart.
constexpr size_t kMaxLayerColumn = 56;

std::string cut_from_left(const std::string &text, size_t width) {
    if (text.size() <= width) return text;
    return "..." + text.substr(text.size() - (width - 3));
}

double busy_share(const sim::EngineStats &engine, const sim::RunResult &result) {
    return result.latency_ns > 0 ? 100.0 * engine.busy_ns / result.latency_ns : 0.0;
}

} // namespace

LayerOrder layer_order_option(const std::string &text) {
    if (text == "start") return LayerOrder::Start;
    if (text == "time") return LayerOrder::Span;
    if (text == "busy") return LayerOrder::Busy;
    throw std::runtime_error("--sort '" + printable(text) + "': expected start, time or busy");
}

std::vector<LayerRow> layer_rows(const sim::RunResult &result, LayerOrder order) {
    std::vector<LayerRow> rows;
    std::map<std::string, size_t> row_of;
    for (const sim::TaskRecord &t : result.tasks) {
        const std::string layer = t.layer.empty() ? "(no layer)" : t.layer;
        const auto [it, fresh] = row_of.try_emplace(layer, rows.size());
        if (fresh) {
            rows.emplace_back();
            rows.back().layer = layer;
            rows.back().start_ns = t.start_ns;
        }
        LayerRow &row = rows[it->second];
        row.start_ns = std::min(row.start_ns, t.start_ns);
        row.end_ns = std::max(row.end_ns, t.end_ns);
        const double busy = t.end_ns - t.start_ns;
        (t.kind == blob::EngineKind::Dma   ? row.dma_ns
         : t.kind == blob::EngineKind::Dpu ? row.dpu_ns
                                           : row.shave_ns) += busy;
        ++row.tasks;
    }
    if (order == LayerOrder::Span)
        std::stable_sort(rows.begin(), rows.end(), [](const LayerRow &a, const LayerRow &b) {
            return a.span_ns() > b.span_ns();
        });
    else if (order == LayerOrder::Busy)
        std::stable_sort(rows.begin(), rows.end(), [](const LayerRow &a, const LayerRow &b) {
            return a.busy_ns() > b.busy_ns();
        });
    return rows;
}

void print_run_report(const sim::Simulator &simulator, const sim::RunResult &result,
                      LayerOrder order) {
    const auto &target = simulator.target();
    std::printf("latency: %.0f DPU cycles = %.3f us on %s (DPU clock %.0f MHz, %s)\n",
                result.latency_dpu_cycles, result.latency_ns / 1000.0,
                printable(target.name).c_str(), target.dpu_clock_mhz,
                target::timing_model_label(target).c_str());
    std::printf("\n%-16s %8s %12s %7s\n", "engine", "tasks", "busy us", "busy %");
    for (const auto &e : result.engines)
        std::printf("%-16s %8llu %12.3f %6.1f%%\n", e.engine.c_str(),
                    static_cast<unsigned long long>(e.tasks), e.busy_ns / 1000.0,
                    busy_share(e, result));
    const std::vector<LayerRow> rows = layer_rows(result, order);
    std::vector<std::string> names;
    size_t width = 5; // "layer"
    for (const LayerRow &row : rows) {
        names.push_back(printable(row.layer, kWholeText));
        width = std::min(kMaxLayerColumn, std::max(width, names.back().size()));
    }
    const int w = int(width);
    std::printf("\n%-*s %6s %11s %11s %11s %11s %11s\n", w, "layer", "tasks", "start us", "span us",
                "DMA us", "DPU us", "SHAVE us");
    for (size_t i = 0; i < rows.size(); ++i) {
        const LayerRow &r = rows[i];
        std::printf("%-*s %6zu %11.3f %11.3f %11.3f %11.3f %11.3f\n", w,
                    cut_from_left(names[i], width).c_str(), r.tasks, r.start_ns / 1000.0,
                    r.span_ns() / 1000.0, r.dma_ns / 1000.0, r.dpu_ns / 1000.0,
                    r.shave_ns / 1000.0);
    }
    const sim::SandboxStats &sandbox = result.sandbox;
    if (sandbox.tasks > 0)
        std::printf("\nSHAVE sandbox (host time): %llu tasks; the simulator waited %.2f ms on the "
                    "worker (%.2f ms of it for its start), the kernels ran %.2f ms\n",
                    static_cast<unsigned long long>(sandbox.tasks), sandbox.blocked_ns / 1e6,
                    sandbox.start_ns / 1e6, sandbox.kernel_ns / 1e6);
}

std::string run_report_json(const sim::Simulator &simulator, const sim::RunResult &result,
                            LayerOrder order) {
    using nlohmann::json;
    const auto &target = simulator.target();
    json engines = json::array(), layers = json::array();
    for (const auto &e : result.engines)
        engines.push_back({{"engine", e.engine},
                           {"tasks", e.tasks},
                           {"busy_us", e.busy_ns / 1000.0},
                           {"busy_percent", busy_share(e, result)}});
    for (const LayerRow &r : layer_rows(result, order))
        layers.push_back({{"layer", r.layer},
                          {"tasks", r.tasks},
                          {"start_us", r.start_ns / 1000.0},
                          {"span_us", r.span_ns() / 1000.0},
                          {"dma_us", r.dma_ns / 1000.0},
                          {"dpu_us", r.dpu_ns / 1000.0},
                          {"shave_us", r.shave_ns / 1000.0}});
    const json doc = {{"target", target.name},
                      {"timing_model", target::timing_model_label(target)},
                      {"dpu_clock_mhz", target.dpu_clock_mhz},
                      {"latency_us", result.latency_ns / 1000.0},
                      {"latency_dpu_cycles", result.latency_dpu_cycles},
                      {"engines", engines},
                      {"layers", layers}};
    // Names come from the blob: invalid UTF-8 is replaced rather than thrown on.
    return doc.dump(1, ' ', false, json::error_handler_t::replace) + "\n";
}

void write_trace(const sim::RunResult &result, const std::string &title, const std::string &path,
                 std::FILE *said_on) {
    std::ofstream out(path);
    out << sim::chrome_trace_json(result, title);
    if (!out) throw std::runtime_error("cannot write trace '" + path + "'");
    std::fprintf(said_on, "\ntrace: %s (open in https://ui.perfetto.dev or chrome://tracing)\n",
                 path.c_str());
}

} // namespace vpuc::tools
