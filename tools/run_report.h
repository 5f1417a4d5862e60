// The report `vpuc run`, `vpuc demo` and `vpuc profile` print after a simulation: latency,
// engine busy time and a per-layer table, as text or as JSON.
#pragma once

#include <cstddef>
#include <cstdio>
#include <string>
#include <vector>

#include "vpu_target/simulator.h"

namespace vpuc::tools {

// A layer's tasks in a run: when the first starts, when the last ends, and each engine kind's
// busy time.
struct LayerRow {
    std::string layer; // "(no layer)" for tasks without one
    size_t tasks = 0;
    double start_ns = 0, end_ns = 0;
    double dma_ns = 0, dpu_ns = 0, shave_ns = 0;

    double span_ns() const { return end_ns - start_ns; }
    double busy_ns() const { return dma_ns + dpu_ns + shave_ns; }
};

enum class LayerOrder {
    Start, // by first start
    Span,  // longest span first
    Busy,  // most engine time first
};

// The order --sort names ("start", "time" for span, "busy"); throws std::runtime_error otherwise.
LayerOrder layer_order_option(const std::string &text);

std::vector<LayerRow> layer_rows(const sim::RunResult &result, LayerOrder order);

void print_run_report(const sim::Simulator &simulator, const sim::RunResult &result,
                      LayerOrder order = LayerOrder::Start);

// The same data as one JSON document (times in µs).
std::string run_report_json(const sim::Simulator &simulator, const sim::RunResult &result,
                            LayerOrder order);

// Writes the Chrome trace of `result` to `path` and says so on `said_on` (stderr when stdout
// carries JSON).
void write_trace(const sim::RunResult &result, const std::string &title, const std::string &path,
                 std::FILE *said_on = stdout);

} // namespace vpuc::tools
