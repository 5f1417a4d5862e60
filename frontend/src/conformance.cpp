#include "frontend/conformance.h"

#include <algorithm>
#include <chrono>
#include <climits>
#include <cstdio>
#include <filesystem>
#include <mutex>
#include <regex>
#include <set>

#include "frontend/blob_io.h"
#include "frontend/onnx_import.h"
#include "onnx_internal.h"
#include "vpu_target/input_file.h"
#include "vpu_target/parallel.h"
#include "vpu_target/simulator.h"

namespace vpuc::frontend {

namespace fs = std::filesystem;

const char *to_string(Outcome outcome) {
    switch (outcome) {
    case Outcome::Passed:
        return "passed";
    case Outcome::Failed:
        return "failed";
    case Outcome::Unsupported:
        return "unsupported";
    }
    return "?";
}

const char *to_string(Stage stage) {
    switch (stage) {
    case Stage::None:
        return "none";
    case Stage::UnlistedOp:
        return "unlisted op";
    case Stage::TooLarge:
        return "too large";
    case Stage::TestData:
        return "test data";
    case Stage::Unsupported:
        return "unsupported by the importer";
    case Stage::Import:
        return "import";
    case Stage::Compile:
        return "compile";
    case Stage::Run:
        return "run";
    case Stage::Compare:
        return "compare";
    case Stage::Internal:
        return "internal error";
    }
    return "?";
}

namespace {

bool is_test_directory(const fs::path &dir) {
    std::error_code error;
    return fs::is_regular_file(fs::symlink_status(dir / "model.onnx", error));
}

// The subdirectories of `dir` (not symbolic links to them), sorted.
std::vector<fs::path> subdirectories(const fs::path &dir) {
    std::vector<fs::path> found;
    std::error_code error;
    for (fs::directory_iterator it(dir, error), end; !error && it != end; it.increment(error))
        if (it->is_directory(error) && !it->is_symlink(error)) found.push_back(it->path());
    if (error)
        throw ConformanceError("cannot list test directory '" + dir.string() +
                               "': " + error.message());
    std::sort(found.begin(), found.end());
    return found;
}

// A failure at `stage`, which thrown errors carry out of the steps of a test.
struct TestFailure {
    Stage stage;
    std::string reason;
};

// The bytes of the test's regular files (model and data sets, two levels deep).
uint64_t test_bytes(const fs::path &dir) {
    uint64_t bytes = 0;
    std::error_code error;
    fs::recursive_directory_iterator it(dir, error), end;
    for (; !error && it != end; it.increment(error)) {
        if (it.depth() >= 1) it.disable_recursion_pending();
        if (it->is_regular_file(error) && !it->is_symlink(error)) bytes += it->file_size(error);
    }
    if (error)
        throw TestFailure{Stage::TestData, "cannot list the test's files: " + error.message()};
    return bytes;
}

// The op types of the model, as ConformanceResult::ops lists them.
std::vector<std::string> model_ops(const onnx::ModelProto &model) {
    std::set<std::string> ops;
    for (const onnx::NodeProto &node : model.graph().node()) {
        const bool default_domain = node.domain().empty() || node.domain() == "ai.onnx";
        ops.insert(default_domain ? node.op_type() : node.domain() + ":" + node.op_type());
    }
    if (ops.size() > 1) ops.erase("Constant");
    return {ops.begin(), ops.end()};
}

// Whether the importer's message says it refused something a listed op may have (an attribute
// value, an output, an element type, a dynamic shape) rather than something wrong.
bool importer_unsupported(const std::string &message) {
    return message.find("not supported") != std::string::npos ||
           message.find("not a fixed extent") != std::string::npos ||
           message.find("no shape") != std::string::npos;
}

// The declared element type of a graph input or output (0 when it declares none).
int32_t declared_type(const onnx::ValueInfoProto &value) {
    return value.type().has_tensor_type() ? value.type().tensor_type().elem_type() : 0;
}

// A TensorProto file of a data set, as a tensor in the numpy convention. A bfloat16 tensor
// (`declared` by the model) may be stored as UINT16, its bits, as ONNX's test data store them
// (numpy has no bfloat16).
Halide::Buffer<> read_tensor(const fs::path &file, int32_t declared, uint64_t max_bytes) {
    const std::string what = file.string();
    try {
        const std::vector<uint8_t> bytes =
            files::read_input_file(what, files::FileKind::Npy, max_bytes);
        onnx::TensorProto tensor;
        if (bytes.size() > size_t(INT_MAX) ||
            !tensor.ParseFromArray(bytes.data(), int(bytes.size())))
            throw TestFailure{Stage::TestData, what + ": not a TensorProto"};
        if (declared == onnx::TensorProto::BFLOAT16 &&
            tensor.data_type() == onnx::TensorProto::UINT16)
            tensor.set_data_type(onnx::TensorProto::BFLOAT16);
        return detail::tensor_value(tensor, what);
    } catch (const Error &e) {
        // An element type the importer does not support is its limit, not the data's fault.
        throw TestFailure{importer_unsupported(e.what()) ? Stage::Unsupported : Stage::TestData,
                          e.what()};
    }
}

// "input_0.pb", "input_1.pb", ... up to the first missing one.
std::vector<fs::path> numbered_files(const fs::path &dir, const std::string &prefix) {
    std::vector<fs::path> files;
    for (int i = 0;; ++i) {
        const fs::path file = dir / (prefix + std::to_string(i) + ".pb");
        std::error_code error;
        if (!fs::exists(fs::symlink_status(file, error))) return files;
        files.push_back(file);
    }
}

// Runs `step`, turning what it throws into a TestFailure at `stage` (vpuc's errors) or
// Stage::Internal (anything else).
template <typename Step> auto at_stage(Stage stage, const std::string &doing, Step &&step) {
    try {
        return step();
    } catch (const TestFailure &) {
        throw;
    } catch (const Error &e) {
        throw TestFailure{stage, e.what()};
    } catch (const std::exception &e) {
        throw TestFailure{Stage::Internal, doing + ": " + e.what()};
    }
}

// One data set of the test: compiles the model with the set's inputs, runs it and compares.
void run_data_set(const std::vector<uint8_t> &model_bytes, const onnx::ModelProto &model,
                  const std::string &model_path, const fs::path &data_set,
                  const ConformanceOptions &options, const target::Target &target) {
    const std::vector<fs::path> input_files = numbered_files(data_set, "input_");
    const std::vector<fs::path> output_files = numbered_files(data_set, "output_");
    if (input_files.size() > size_t(model.graph().input_size()))
        throw TestFailure{Stage::TestData, data_set.string() + ": " +
                                               std::to_string(input_files.size()) +
                                               " inputs for a graph of " +
                                               std::to_string(model.graph().input_size())};
    // Input i is the graph's input i, as ONNX's backend test runner has it.
    ImportOptions import;
    std::vector<NamedTensor> inputs;
    for (size_t i = 0; i < input_files.size(); ++i) {
        const onnx::ValueInfoProto &input = model.graph().input(int(i));
        inputs.push_back({input.name(), read_tensor(input_files[i], declared_type(input),
                                                    options.max_test_bytes)});
        import.known_inputs[input.name()] = inputs.back().value;
    }
    std::vector<Halide::Buffer<>> expected;
    for (size_t i = 0; i < output_files.size(); ++i)
        expected.push_back(read_tensor(
            output_files[i],
            int(i) < model.graph().output_size() ? declared_type(model.graph().output(int(i))) : 0,
            options.max_test_bytes));

    const ImportedModel imported = at_stage(Stage::Import, "importing", [&] {
        try {
            return import_onnx_bytes(model_bytes, model_path, import);
        } catch (const ModelError &e) {
            throw TestFailure{importer_unsupported(e.what()) ? Stage::Unsupported : Stage::Import,
                              e.what()};
        }
    });
    const std::vector<uint8_t> blob = at_stage(
        Stage::Compile, "compiling", [&] { return options.compile(imported.graph, target); });
    const std::vector<NamedTensor> outputs = at_stage(Stage::Run, "running", [&] {
        sim::Simulator simulator(target, blob);
        // The blob's inputs are the graph inputs that stayed inputs; the others became
        // constants.
        std::vector<NamedTensor> blob_input_values;
        const auto *ios = simulator.blob().header()->inputs();
        for (const NamedTensor &t : inputs)
            for (uint32_t i = 0; ios && i < ios->size(); ++i)
                if (ios->Get(i)->name()->str() == t.name) blob_input_values.push_back(t);
        const sim::RunResult run = simulator.run(blob_inputs(simulator.blob(), blob_input_values));
        // In the model's types: a u32 result the device's i32 holds as negative is an error.
        std::vector<NamedTensor> outputs = blob_outputs(simulator.blob(), run.outputs);
        for (size_t i = 0; i < outputs.size() && i < imported.output_types.size(); ++i)
            outputs[i].value = output_in_type(outputs[i], imported.output_types[i]);
        return outputs;
    });

    if (outputs.size() != expected.size())
        throw TestFailure{Stage::Compare, "output count: " + std::to_string(outputs.size()) +
                                              " outputs, " + std::to_string(expected.size()) +
                                              " expected in " + data_set.string()};
    // Blob outputs are named after layers; the model's names are in the same order.
    for (size_t i = 0; i < outputs.size(); ++i) {
        const std::string name =
            i < imported.output_names.size() ? imported.output_names[i] : outputs[i].name;
        const TensorComparison c = at_stage(Stage::Compare, "comparing", [&] {
            return compare_tensors(outputs[i].value, expected[i], options.tolerance);
        });
        if (!c.shapes_match)
            throw TestFailure{Stage::Compare, "shape differs: output '" + name +
                                                  "': " + shape_text(outputs[i].value) +
                                                  ", expected " + shape_text(expected[i])};
        // Only closeness decides: a cosine left undefined by matching infinities does not.
        if (c.mismatches)
            throw TestFailure{Stage::Compare,
                              std::string(c.exact ? "values differ" : "not within the tolerance") +
                                  ": output '" + name + "': " + c.reason};
    }
}

void run_test(const ConformanceTest &test, const ConformanceOptions &options,
              ConformanceResult &result) {
    const fs::path dir = test.directory;
    const std::string model_path = (dir / "model.onnx").string();
    std::error_code error;
    const uint64_t model_size = fs::file_size(model_path, error);
    if (!error && model_size > options.max_test_bytes)
        throw TestFailure{Stage::TooLarge, "model.onnx takes " + files::size_text(model_size) +
                                               ", more than the limit of " +
                                               files::size_text(options.max_test_bytes)};
    const std::vector<uint8_t> model_bytes = at_stage(Stage::TestData, "reading the model", [&] {
        return files::read_input_file(model_path, files::FileKind::Model, options.max_test_bytes);
    });
    onnx::ModelProto model;
    if (model_bytes.size() > size_t(INT_MAX) ||
        !model.ParseFromArray(model_bytes.data(), int(model_bytes.size())))
        throw TestFailure{Stage::TestData, model_path + ": not an ONNX model (does not parse)"};
    result.ops = model_ops(model);

    const std::vector<std::string> listed = supported_onnx_ops();
    std::string unlisted;
    for (const std::string &op : result.ops)
        if (!std::binary_search(listed.begin(), listed.end(), op))
            unlisted += (unlisted.empty() ? "" : ", ") + op;
    if (!unlisted.empty()) throw TestFailure{Stage::UnlistedOp, "ops not listed: " + unlisted};

    const uint64_t bytes = test_bytes(dir);
    if (bytes > options.max_test_bytes)
        throw TestFailure{Stage::TooLarge, "its files take " + files::size_text(bytes) +
                                               ", more than the limit of " +
                                               files::size_text(options.max_test_bytes)};
    std::vector<fs::path> data_sets;
    for (const fs::path &sub :
         at_stage(Stage::TestData, "listing the data sets", [&] { return subdirectories(dir); }))
        if (sub.filename().string().rfind("test_data_set_", 0) == 0) data_sets.push_back(sub);
    if (data_sets.empty())
        throw TestFailure{Stage::TestData, dir.string() + ": no test_data_set_N directory"};
    if (!options.compile) throw TestFailure{Stage::Internal, "no compile function given"};
    const target::Target target = at_stage(Stage::Internal, "loading the target",
                                           [&] { return target::load_target(options.target); });
    for (const fs::path &data_set : data_sets)
        run_data_set(model_bytes, model, model_path, data_set, options, target);
    result.outcome = Outcome::Passed;
}

} // namespace

std::vector<ConformanceTest> discover_conformance_tests(const std::string &data_dir) {
    const fs::path root = data_dir;
    std::error_code error;
    if (!fs::is_directory(root, error))
        throw ConformanceError("test data directory '" + data_dir + "' is not a directory");
    std::vector<ConformanceTest> tests;
    if (is_test_directory(root)) return {{root.filename().string(), root.string()}};
    for (const fs::path &sub : subdirectories(root)) {
        if (is_test_directory(sub)) {
            tests.push_back({sub.filename().string(), sub.string()});
            continue;
        }
        for (const fs::path &test : subdirectories(sub))
            if (is_test_directory(test))
                tests.push_back(
                    {sub.filename().string() + "/" + test.filename().string(), test.string()});
    }
    if (tests.empty())
        throw ConformanceError("test data directory '" + data_dir +
                               "' holds no test (a directory with model.onnx), neither in it nor "
                               "one or two levels below");
    std::sort(tests.begin(), tests.end(),
              [](const ConformanceTest &a, const ConformanceTest &b) { return a.name < b.name; });
    return tests;
}

ConformanceResult run_conformance_test(const ConformanceTest &test,
                                       const ConformanceOptions &options) {
    ConformanceResult result;
    result.name = test.name;
    const auto start = std::chrono::steady_clock::now();
    try {
        run_test(test, options, result);
    } catch (const TestFailure &failure) {
        result.outcome =
            failure.stage == Stage::UnlistedOp ? Outcome::Unsupported : Outcome::Failed;
        result.stage = failure.stage;
        result.reason = failure.reason;
    } catch (const std::exception &e) {
        result.outcome = Outcome::Failed;
        result.stage = Stage::Internal;
        result.reason = e.what();
    }
    result.seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    return result;
}

std::vector<ConformanceResult>
run_conformance_tests(const std::vector<ConformanceTest> &tests, const ConformanceOptions &options,
                      int jobs,
                      const std::function<void(size_t done, const ConformanceResult &)> &progress) {
    std::vector<ConformanceResult> results(tests.size());
    std::mutex progress_mutex;
    size_t done = 0;
    run_in_parallel(
        tests.size(),
        [&](size_t i) {
            results[i] = run_conformance_test(tests[i], options);
            const std::lock_guard<std::mutex> lock(progress_mutex);
            ++done;
            if (progress) progress(done, results[i]);
        },
        unsigned(std::max(jobs, 1)));
    return results;
}

std::string failure_cause(const ConformanceResult &result, const std::string &test_directory) {
    std::string message = result.reason;
    // The test's own paths, then the names its model gives nodes and tensors.
    for (size_t at;
         !test_directory.empty() && (at = message.find(test_directory)) != std::string::npos;)
        message.replace(at, test_directory.size(), "");
    static const std::regex path("^/?model\\.onnx: |^/?test_data_set_\\d+/\\w+\\.pb: ");
    static const std::regex node("node '[^']*' \\(([^)]*)\\): ");
    // A quoted name before a colon names what the rest is about ("add 'sum': ..."); so does
    // one after these words.
    static const std::regex subject("(\\w+) '[^']*': ");
    static const std::regex named("(graph input|graph output|input|output|initializer|layer|"
                                  "task|kernel|tensor) '[^']*'");
    static const std::regex number("-?\\d+(\\.\\d+)?([eE][-+]?\\d+)?");
    message = std::regex_replace(message, path, "");
    message = std::regex_replace(message, node, "$1: ");
    message = std::regex_replace(message, subject, "$1 '...': ");
    message = std::regex_replace(message, named, "$1 '...'");
    static const std::regex quoted("\"[^\"]*\"");
    message = std::regex_replace(message, quoted, "\"...\"");
    message = std::regex_replace(message, number, "N");
    static const std::regex shape("N(xN)+");
    message = std::regex_replace(message, shape, "N");
    // The first clause after the op (or "compiling: Error: ") and the names it concerns:
    // "Conv: input '...': ...".
    static const std::regex prefix("^(\\w+: ){0,3}((\\w+ )+'\\.\\.\\.': )*");
    std::smatch m;
    std::regex_search(message, m, prefix);
    const size_t skip = size_t(m.length(0));
    for (const char *end : {": ", "; ", ". ", ", and ", ", which "})
        message = message.substr(0, message.find(end, skip));
    if (message.size() > 100) message = message.substr(0, 97) + "...";
    return std::string(to_string(result.stage)) + ": " + message;
}

double ConformanceSummary::pass_rate() const {
    const int ran = total.passed + total.failed;
    return ran ? double(total.passed) / ran : 0;
}

ConformanceSummary summarize_conformance(const std::vector<ConformanceResult> &results,
                                         const std::vector<ConformanceTest> &tests) {
    ConformanceSummary summary;
    for (const std::string &op : supported_onnx_ops()) summary.listed[op];
    const auto count = [](OpCounts &counts, const ConformanceResult &r, const std::string &cause) {
        switch (r.outcome) {
        case Outcome::Passed:
            ++counts.passed;
            break;
        case Outcome::Failed:
            ++counts.failed;
            ++counts.failure_causes[cause];
            break;
        case Outcome::Unsupported:
            ++counts.unsupported;
            break;
        }
    };
    for (size_t i = 0; i < results.size(); ++i) {
        const ConformanceResult &r = results[i];
        const std::string cause = r.outcome == Outcome::Failed
                                      ? failure_cause(r, i < tests.size() ? tests[i].directory : "")
                                      : "";
        count(summary.total, r, cause);
        for (const std::string &op : r.ops) {
            const auto listed = summary.listed.find(op);
            if (listed == summary.listed.end())
                ++summary.unlisted[op];
            else
                count(listed->second, r, cause);
        }
    }
    return summary;
}

namespace {

// The causes, most frequent first, as "cause (tests)"; Markdown's table separator escaped.
std::string causes_text(const std::map<std::string, int> &causes) {
    std::vector<std::pair<std::string, int>> sorted(causes.begin(), causes.end());
    std::stable_sort(sorted.begin(), sorted.end(),
                     [](const auto &a, const auto &b) { return a.second > b.second; });
    std::string text;
    for (const auto &[cause, tests] : sorted) {
        std::string escaped;
        for (char c : cause) escaped += c == '|' ? std::string("\\|") : std::string(1, c);
        text += (text.empty() ? "" : "; ") + escaped + " (" + std::to_string(tests) + ")";
    }
    return text;
}

std::string row(const std::string &op, const OpCounts &c) {
    return "| " + op + " | " + std::to_string(c.passed + c.failed + c.unsupported) + " | " +
           std::to_string(c.passed) + " | " + std::to_string(c.failed) + " | " +
           std::to_string(c.unsupported) + " | " + causes_text(c.failure_causes) + " |\n";
}

} // namespace

std::string conformance_markdown(const ConformanceSummary &summary) {
    std::string text = "| op | tests | passed | failed | unsupported | failures (tests) |\n"
                       "|---|---:|---:|---:|---:|---|\n";
    for (const auto &[op, counts] : summary.listed) text += row(op, counts);
    OpCounts total = summary.total;
    total.failure_causes.clear();
    text += row("**total**", total);
    char rate[160];
    std::snprintf(rate, sizeof rate,
                  "\nPass rate over the tests of listed ops: %d of %d, %.1f%%.\n", total.passed,
                  total.passed + total.failed, 100 * summary.pass_rate());
    text += rate;
    text += "\nOps not listed (tests using them):";
    for (const auto &[op, tests] : summary.unlisted)
        text += " " + op + " (" + std::to_string(tests) + "),";
    if (summary.unlisted.empty())
        text += " none.";
    else
        text.back() = '.';
    return text + "\n";
}

} // namespace vpuc::frontend
