// `vpuc bench sandbox`: what running SHAVE kernels in a sandboxed worker costs.
#include <cstdio>
#include <nlohmann/json.hpp>
#include <stdexcept>

#include "bench/sandbox.h"
#include "command.h"
#include "options.h"
#include "vpu_target/printable.h"

namespace vpuc::tools {

namespace {

const char *kUsage = R"(usage: vpuc bench sandbox [--target T] [--runs N] [--json]

SHAVE kernels run in a sandboxed worker process (docs/RELIABILITY.md). This compiles layers
that are nearly all SHAVE work (softmax over 1000 channels in int8 and fp16; a sigmoid and a
softmax over 40x40x48 and over 112x112x64, fp16) with their default schedules, runs each
functionally N times (default 5) and prints medians of host wall-clock time:

  tasks         SHAVE tasks in the blob
  run ms        the whole functional run
  start ms      the simulator blocked spawning the worker and waiting for the kernels to load
                (the worker starts before the memory is loaded and loads them meanwhile)
  blocked ms    the simulator blocked on the worker in all, start and end included
  kernel ms     the kernels' own code, in the worker
  sandbox ms    what the sandbox adds: blocked - kernel (a kernel runs beside the simulator's
                other work, so this can be negative: a second core at work)
  task us       what the sandbox adds per SHAVE task, its start left out:
                (sandbox - start) / tasks
  share         sandbox ms / run ms

The first functional run in a process also starts the workers' fork server; the medians
leave it out, and the last line prints that first run's start.

options:
  --target T      a bundled target name or a target file (default vpu27)
  --runs N        functional runs per layer (default 5)
  --json          print the same as JSON)";

int bench_sandbox(const std::vector<std::string> &args) {
    const Options o =
        parse_options(args, {"--target", "--runs"}, {"--json"}, {files::FileKind::Target});
    if (!o.positional.empty())
        throw std::runtime_error("unexpected argument '" + printable(o.positional[0]) + "'");
    const target::Target target = target::load_target(o.get("--target", "vpu27"));
    const int runs = int(integer_option("--runs", o.get("--runs", "5"), 1, 1000));
    nlohmann::ordered_json rows = nlohmann::ordered_json::array();
    bool failed = false;
    std::string first_run_start_ms;
    if (!o.has("--json"))
        std::printf("%-22s %5s %6s %8s %8s %10s %9s %10s %8s %7s\n", "layer", "dtype", "tasks",
                    "run ms", "start ms", "blocked ms", "kernel ms", "sandbox ms", "task us",
                    "share");
    for (const bench::SandboxCase &c : bench::sandbox_cases()) {
        std::fprintf(stderr, "measuring %s %s...\n", c.spec.name.c_str(),
                     bench::to_string(c.precision));
        const bench::SandboxCost cost = bench::measure_sandbox(c, target, runs);
        failed = failed || !cost.error.empty();
        if (first_run_start_ms.empty() && cost.error.empty()) {
            char figure[32];
            std::snprintf(figure, sizeof figure, "%.2f", cost.first_start_ms);
            first_run_start_ms = figure;
        }
        if (o.has("--json")) {
            nlohmann::ordered_json row = {{"layer", c.spec.name},
                                          {"dtype", bench::to_string(c.precision)}};
            if (!cost.error.empty()) {
                row["error"] = printable(cost.error, 400);
            } else {
                row["shave_tasks"] = cost.shave_tasks;
                row["run_ms"] = cost.run_ms;
                row["start_ms"] = cost.start_ms;
                row["first_start_ms"] = cost.first_start_ms;
                row["blocked_ms"] = cost.blocked_ms;
                row["kernel_ms"] = cost.kernel_ms;
                row["sandbox_ms"] = cost.overhead_ms();
                row["task_us"] = cost.task_overhead_us();
                row["share"] = cost.overhead_share();
            }
            rows.push_back(row);
        } else if (!cost.error.empty()) {
            std::printf("%-22s %5s  error: %s\n", c.spec.name.c_str(),
                        bench::to_string(c.precision), printable(cost.error, 400).c_str());
        } else {
            std::printf("%-22s %5s %6llu %8.2f %8.2f %10.2f %9.2f %10.2f %8.1f %6.1f%%\n",
                        c.spec.name.c_str(), bench::to_string(c.precision),
                        static_cast<unsigned long long>(cost.shave_tasks), cost.run_ms,
                        cost.start_ms, cost.blocked_ms, cost.kernel_ms, cost.overhead_ms(),
                        cost.task_overhead_us(), 100 * cost.overhead_share());
        }
    }
    if (!o.has("--json") && !first_run_start_ms.empty())
        std::printf("the process's first run, which started the fork server: start %s ms\n",
                    first_run_start_ms.c_str());
    if (o.has("--json"))
        std::printf("%s\n", nlohmann::ordered_json{{"target", printable(target.name)},
                                                   {"runs", runs},
                                                   {"layers", rows}}
                                .dump(2)
                                .c_str());
    return failed ? 1 : 0;
}

const bool registered =
    register_command({"bench sandbox", "the cost of running SHAVE kernels in the sandboxed worker",
                      kUsage, bench_sandbox});

} // namespace

} // namespace vpuc::tools
