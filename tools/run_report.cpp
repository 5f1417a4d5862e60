#include "run_report.h"

#include <cstdio>
#include <fstream>

#include "vpu_target/printable.h"
#include "vpu_target/timing_model.h"

namespace vpuc::tools {

void print_run_report(const sim::Simulator &simulator, const sim::RunResult &result) {
    const auto &target = simulator.target();
    std::printf("latency: %.0f DPU cycles = %.3f us on %s (DPU clock %.0f MHz, %s)\n",
                result.latency_dpu_cycles, result.latency_ns / 1000.0,
                printable(target.name).c_str(), target.dpu_clock_mhz,
                target::timing_model_label(target).c_str());
    std::printf("\n%-16s %8s %12s %7s\n", "engine", "tasks", "busy us", "busy %");
    for (const auto &e : result.engines) {
        double share = result.latency_ns > 0 ? 100.0 * e.busy_ns / result.latency_ns : 0.0;
        std::printf("%-16s %8llu %12.3f %6.1f%%\n", e.engine.c_str(),
                    static_cast<unsigned long long>(e.tasks), e.busy_ns / 1000.0, share);
    }
    std::printf("\n%s", sim::layer_table(result).c_str());
    const sim::SandboxStats &sandbox = result.sandbox;
    if (sandbox.tasks > 0)
        std::printf("\nSHAVE sandbox (host time): %llu tasks; the simulator waited %.2f ms on the "
                    "worker (%.2f ms of it for its start), the kernels ran %.2f ms\n",
                    static_cast<unsigned long long>(sandbox.tasks), sandbox.blocked_ns / 1e6,
                    sandbox.start_ns / 1e6, sandbox.kernel_ns / 1e6);
}

void write_trace(const sim::RunResult &result, const std::string &title, const std::string &path) {
    std::ofstream out(path);
    out << sim::chrome_trace_json(result, title);
    if (!out) throw std::runtime_error("cannot write trace '" + path + "'");
    std::printf("\ntrace: %s (open in https://ui.perfetto.dev or chrome://tracing)\n",
                path.c_str());
}

} // namespace vpuc::tools
