// `vpuc conformance`: the ONNX backend test data (Debian's libonnx-testdata) compiled, run on
// the simulator and compared with their expected outputs (frontend/conformance.h).
#include <nlohmann/json.hpp>

#include <chrono>
#include <cstdio>
#include <stdexcept>
#include <string>
#include <vector>

#include "codegen/lower.h"
#include "command.h"
#include "frontend/conformance.h"
#include "options.h"

namespace vpuc::tools {

namespace {

const std::string kDefaultDataDir = "/usr/share/libonnx-testdata/data";

struct Request {
    std::string data_dir = kDefaultDataDir;
    frontend::ConformanceOptions options;
    std::vector<std::string> filters; // --filter: parts of test names
    int jobs = 1;
    double min_pass_rate = 0;
    bool json = false, quiet = false, verbose = false;
};

// The command line; throws std::runtime_error for a bad one.
Request read_request(const std::vector<std::string> &args) {
    const Options o = parse_options(
        args, {"--jobs", "--target", "--min-pass-rate", "--max-test-size", "--filter"},
        {"--json", "--quiet", "--verbose"});
    if (o.positional.size() > 1)
        throw std::runtime_error("conformance takes at most one data directory (see --help)");
    Request r;
    if (!o.positional.empty()) r.data_dir = o.positional[0];
    r.options.target = o.get("--target", "vpu27");
    r.options.compile = [](const dsl::Graph &graph, const target::Target &target) {
        return codegen::lower(graph, target);
    };
    if (!o.get("--max-test-size").empty())
        r.options.max_test_bytes = size_option("--max-test-size", o.get("--max-test-size"));
    if (!o.get("--jobs").empty()) r.jobs = int(integer_option("--jobs", o.get("--jobs"), 1, 256));
    if (!o.get("--min-pass-rate").empty())
        r.min_pass_rate = real_option("--min-pass-rate", o.get("--min-pass-rate"), 0, 1);
    r.filters = o.all("--filter");
    r.json = o.has("--json");
    r.quiet = o.has("--quiet");
    r.verbose = o.has("--verbose");
    if (r.quiet && r.verbose) throw std::runtime_error("--quiet and --verbose contradict");
    return r;
}

nlohmann::json counts_json(const frontend::OpCounts &c) {
    return {{"passed", c.passed},
            {"failed", c.failed},
            {"unsupported", c.unsupported},
            {"failure_causes", c.failure_causes}};
}

nlohmann::json results_json(const Request &r, const std::vector<frontend::ConformanceTest> &tests,
                            const std::vector<frontend::ConformanceResult> &results,
                            const frontend::ConformanceSummary &summary) {
    nlohmann::json doc = {
        {"data_dir", r.data_dir},
        {"target", r.options.target},
        {"tolerance", {{"atol", r.options.tolerance.atol}, {"rtol", r.options.tolerance.rtol}}},
        {"tests", nlohmann::json::array()},
        {"ops", nlohmann::json::object()},
        {"unlisted_ops", summary.unlisted},
    };
    for (size_t i = 0; i < results.size(); ++i) {
        const frontend::ConformanceResult &t = results[i];
        nlohmann::json test = {{"name", t.name},
                               {"ops", t.ops},
                               {"outcome", frontend::to_string(t.outcome)},
                               {"seconds", t.seconds}};
        if (t.outcome != frontend::Outcome::Passed) {
            test["stage"] = frontend::to_string(t.stage);
            test["reason"] = t.reason;
        }
        if (t.outcome == frontend::Outcome::Failed)
            test["cause"] = frontend::failure_cause(t, tests[i].directory);
        doc["tests"].push_back(test);
    }
    for (const auto &[op, counts] : summary.listed) doc["ops"][op] = counts_json(counts);
    doc["total"] = counts_json(summary.total);
    doc["total"]["pass_rate"] = summary.pass_rate();
    return doc;
}

int conformance_command(const std::vector<std::string> &args) {
    Request r;
    try {
        r = read_request(args);
    } catch (const std::exception &e) {
        std::fprintf(stderr, "vpuc conformance: %s\n", e.what());
        return 2;
    }
    std::vector<frontend::ConformanceTest> tests;
    for (const frontend::ConformanceTest &t : frontend::discover_conformance_tests(r.data_dir)) {
        bool wanted = r.filters.empty();
        for (const std::string &f : r.filters) wanted |= t.name.find(f) != std::string::npos;
        if (wanted) tests.push_back(t);
    }
    if (tests.empty())
        throw std::runtime_error("no test of '" + r.data_dir + "' matches the --filter given");

    const auto start = std::chrono::steady_clock::now();
    const auto progress = [&](size_t done, const frontend::ConformanceResult &t) {
        if (r.quiet) return;
        std::string what = frontend::to_string(t.outcome);
        if (t.outcome == frontend::Outcome::Failed)
            what += std::string(" (") + frontend::to_string(t.stage) + ")";
        std::fprintf(stderr, "[%zu/%zu] %s %s (%.1f s)\n", done, tests.size(), t.name.c_str(),
                     what.c_str(), t.seconds);
        if (r.verbose && t.outcome == frontend::Outcome::Failed)
            std::fprintf(stderr, "    %s\n", t.reason.c_str());
    };
    const std::vector<frontend::ConformanceResult> results =
        frontend::run_conformance_tests(tests, r.options, r.jobs, progress);
    const frontend::ConformanceSummary summary = frontend::summarize_conformance(results, tests);
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();

    if (r.json)
        std::printf("%s\n", results_json(r, tests, results, summary).dump(2).c_str());
    else
        std::fputs(frontend::conformance_markdown(summary).c_str(), stdout);
    if (!r.quiet)
        std::fprintf(stderr, "%zu tests in %.0f s on %d jobs\n", tests.size(), seconds, r.jobs);
    if (summary.pass_rate() < r.min_pass_rate) {
        std::fprintf(stderr, "vpuc conformance: pass rate %.4f is below --min-pass-rate %.4f\n",
                     summary.pass_rate(), r.min_pass_rate);
        return 1;
    }
    return 0;
}

const bool registered = register_command(
    {"conformance", "run the ONNX backend test data and report the pass rate per op",
     "usage: vpuc conformance [DATA_DIR] [options]\n\n"
     "Runs the ONNX backend tests under DATA_DIR (default " +
         kDefaultDataDir +
         ",\n"
         "from Debian's libonnx-testdata; a test is a directory holding model.onnx and\n"
         "test_data_set_N/). A test whose ops vpuc lists (docs/onnx.md) is imported with its\n"
         "inputs, compiled, run on the simulator and compared with its expected outputs:\n"
         "|ours - expected| <= 0.01 + 0.01 * |expected|, integers exact. It passes or fails;\n"
         "a test using an op not listed is unsupported. Prints a Markdown table per op, and the\n"
         "pass rate over the tests of listed ops (docs/conformance.md explains the counts).\n\n"
         "options:\n"
         "  --jobs N             run N tests at once (threads; default 1)\n"
         "  --filter TEXT        only tests whose name (as node/test_add) contains TEXT\n"
         "                       (repeat for several)\n"
         "  --target T|FILE      target (a bundled name or a target file; default vpu27)\n"
         "  --max-test-size SIZE a test whose files take more fails without running\n"
         "                       (bytes, or K, M, G; default 64M)\n"
         "  --json               print the results per test and per op as JSON instead\n"
         "  --min-pass-rate R    exit with status 1 when the pass rate is below R (0..1)\n"
         "  --quiet              no progress on stderr\n"
         "  --verbose            also print each failure's full reason on stderr\n\n"
         "exit status: 0 when the tests ran (whatever they gave, unless --min-pass-rate);\n"
         "1 on an error, or a pass rate below --min-pass-rate; 2 on bad usage",
     conformance_command});

} // namespace

} // namespace vpuc::tools
