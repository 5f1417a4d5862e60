// `vpuc bench simulator`: how fast the simulator computes DPU tasks on this host.
#include <cstdio>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>
#include <vector>

#include "bench/emulation.h"
#include "command.h"
#include "options.h"
#include "vpu_target/printable.h"
#include "vpu_target/timing_model.h"

namespace vpuc::tools {

namespace {

const char *kUsage = R"(usage: vpuc bench simulator [--target T] [--runs N] [--layer NAME] [--json]

How fast functional simulation computes DPU tasks on this host. Each layer (int8 3x3 conv
56x56x64->64, 1x1 conv 28x28x256->512, 7x7/2 conv 224x224x3->64; the 3x3 conv in fp16; 3x3
depthwise 112x112x32 in int8 and fp16; 3x3/2 max pool 112x112x64 and a residual add
56x56x256, int8) is compiled with its default schedule and run functionally N times
(default 3) on random inputs, on one host thread. Medians of host wall-clock time:

  tasks         DPU tasks in the blob
  G work        what those tasks compute, in billions: multiply-accumulates (window
                elements for pools, elements for eltwise), channel padding included
  run ms        the whole functional run (DMAs, the event loop and the DPU)
  DPU ms        the DPU emulation's share of it (the Halide pipelines and their calls)
  G/s           G work / DPU ms: GMAC/s for convolutions

The header names the target and the timing model's version (the simulated times the
same runs produce; docs/timing-model.md). A layer that fails prints its error instead,
and the exit status is then 1. Progress goes to stderr.

options:
  --target T      a bundled target name or a target file (default vpu27)
  --runs N        functional runs per layer (default 3)
  --layer NAME    only the layers whose name starts with NAME (conv3x3, conv1x1,
                  conv7x7/2, dwconv3x3, maxpool3x3/2, add)
  --json          print the same as JSON
  -h, --help      this text)";

struct Row {
    const bench::EmulationCase *c;
    bench::EmulationSpeed speed;
};

// The cases whose name starts with `prefix`; an error lists the names.
std::vector<bench::EmulationCase> select_cases(const std::string &prefix) {
    std::vector<bench::EmulationCase> selected;
    std::string names;
    for (const auto &c : bench::emulation_cases()) {
        if (c.name.rfind(prefix, 0) == 0) selected.push_back(c);
        if (names.find(c.name) == std::string::npos) names += (names.empty() ? "" : ", ") + c.name;
    }
    if (selected.empty())
        throw std::runtime_error("no layer's name starts with '" + printable(prefix) +
                                 "' (layers: " + names + ")");
    return selected;
}

void print_table(const target::Target &t, const std::vector<Row> &rows) {
    std::printf("vpuc bench simulator: functional DPU emulation on this host, one thread; %s, "
                "%s\n\n",
                printable(t.name).c_str(), target::timing_model_label(t).c_str());
    std::printf("%-24s %-5s %6s %8s %9s %9s %7s\n", "layer", "dtype", "tasks", "G work", "run ms",
                "DPU ms", "G/s");
    for (const Row &r : rows) {
        std::printf("%-24s %-5s ", r.c->name.c_str(), bench::to_string(r.c->precision));
        const bench::EmulationSpeed &s = r.speed;
        if (!s.error.empty()) {
            std::printf("error: %s\n", printable(s.error, 400).c_str());
            continue;
        }
        std::printf("%6llu %8.3f %9.2f %9.2f %7.2f\n", static_cast<unsigned long long>(s.dpu_tasks),
                    double(s.work) / 1e9, s.run_ms, s.dpu_ms, s.giga_per_second());
    }
}

void print_json(const target::Target &t, int runs, const std::vector<Row> &rows) {
    nlohmann::ordered_json list = nlohmann::ordered_json::array();
    for (const Row &r : rows) {
        nlohmann::ordered_json row = {{"layer", r.c->name},
                                      {"dtype", bench::to_string(r.c->precision)}};
        const bench::EmulationSpeed &s = r.speed;
        if (!s.error.empty()) {
            row["error"] = printable(s.error, 400);
        } else {
            row["dpu_tasks"] = s.dpu_tasks;
            row["work"] = s.work;
            row["run_ms"] = s.run_ms;
            row["dpu_ms"] = s.dpu_ms;
            row["giga_per_second"] = s.giga_per_second();
        }
        list.push_back(std::move(row));
    }
    std::printf("%s\n", nlohmann::ordered_json{{"target", printable(t.name)},
                                               {"timing_model", target::timing_model_label(t)},
                                               {"runs", runs},
                                               {"layers", std::move(list)}}
                            .dump(2)
                            .c_str());
}

int bench_simulator(const std::vector<std::string> &args) {
    const Options o = parse_options(args, {"--target", "--runs", "--layer"}, {"--json"},
                                    {files::FileKind::Target});
    if (!o.positional.empty())
        throw std::runtime_error("unexpected argument '" + printable(o.positional[0]) +
                                 "' (see --help)");
    const target::Target target = target::load_target(o.get("--target", "vpu27"));
    const int runs = int(integer_option("--runs", o.get("--runs", "3"), 1, 1000));
    const std::vector<bench::EmulationCase> cases = select_cases(o.get("--layer"));
    std::vector<Row> rows;
    bool failed = false;
    for (const auto &c : cases) {
        std::fprintf(stderr, "measuring %s %s...\n", c.name.c_str(), bench::to_string(c.precision));
        rows.push_back({&c, bench::measure_emulation(c, target, runs)});
        failed = failed || !rows.back().speed.error.empty();
    }
    if (o.has("--json"))
        print_json(target, runs, rows);
    else
        print_table(target, rows);
    return failed ? 1 : 0;
}

const bool registered = register_command(
    {"bench simulator", "how fast functional simulation computes DPU tasks on this host", kUsage,
     bench_simulator});

} // namespace

} // namespace vpuc::tools
