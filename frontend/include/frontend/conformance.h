// The ONNX backend test data as a conformance suite: `vpuc conformance` and conformance_test.
//
// A test is a directory holding model.onnx and test_data_set_N/ directories of TensorProtos
// (input_I.pb, output_I.pb), as Debian's libonnx-testdata ships them. A test whose ops are
// all listed by supported_onnx_ops() runs: the model is imported with the test's inputs as
// known values (ImportOptions::known_inputs), compiled for the target, run on the simulator
// and each output compared with the expected one. Its outcome is then Passed or Failed,
// whatever stopped it (the importer refusing an attribute included): no test of listed ops is
// skipped. A test using any op that is not listed is Unsupported and does not run.
// docs/conformance.md states the pass rule and holds the table of the suite's results.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "dsl/graph.h"
#include "frontend/compare.h"
#include "vpu_target/error.h"
#include "vpu_target/target.h"

namespace vpuc::frontend {

// A data directory that holds no test or cannot be listed.
class ConformanceError : public Error {
  public:
    using Error::Error;
};

struct ConformanceTest {
    std::string name;      // its directory relative to the data directory: "node/test_add"
    std::string directory; // its path
};

// The tests under `data_dir`, sorted by name: `data_dir` itself when it holds model.onnx,
// else its subdirectories that do, and those of its subdirectories' subdirectories (the
// suites node/, simple/, ... of libonnx-testdata). Symbolic links are not followed. Throws
// ConformanceError when there is none or the directory cannot be read.
std::vector<ConformanceTest> discover_conformance_tests(const std::string &data_dir);

// Compiles a graph into a blob for a target: codegen::lower, given by the caller because the
// frontend sits below the code generator.
using CompileFunction =
    std::function<std::vector<uint8_t>(const dsl::Graph &, const target::Target &)>;

struct ConformanceOptions {
    CompileFunction compile; // required
    std::string target = "vpu27";
    // numpy.isclose's rule alone: cosine similarity is not part of it (min_cosine -1, and a
    // cosine left undefined by infinities is ignored), a NaN close to a NaN as ONNX's runner has
    // it.
    Tolerance tolerance{1e-2, 1e-2, -1, true};
    // A test whose files (model and data sets) take more is Failed without running.
    uint64_t max_test_bytes = uint64_t(64) << 20;
};

enum class Outcome { Passed, Failed, Unsupported };
const char *to_string(Outcome outcome);

// Why a test failed or is unsupported, coarsely; the message says the rest.
enum class Stage {
    None,        // passed
    UnlistedOp,  // unsupported: an op supported_onnx_ops() does not list
    TooLarge,    // its files exceed ConformanceOptions::max_test_bytes
    TestData,    // its model or data files cannot be read or do not fit the model
    Unsupported, // the importer refused something of a listed op (an attribute, a shape)
    Import,      // any other import error
    Compile,     // lowering failed
    Run,         // the simulator refused the blob or a kernel failed
    Compare,     // an output is not within the tolerance, or of another shape
    Internal,    // an exception that is not vpuc's error for a bad input
};
const char *to_string(Stage stage);

struct ConformanceResult {
    std::string name;
    // The ops the test counts toward: its model's op types, sorted and without repeats, except
    // Constant when there are others (it only gives values). Ops of a domain other than the
    // default one are named "domain:op".
    std::vector<std::string> ops;
    Outcome outcome = Outcome::Failed;
    Stage stage = Stage::None;
    std::string reason; // the full message; empty when passed
    double seconds = 0;
};

// Runs one test. Never throws: whatever goes wrong is the result's reason.
ConformanceResult run_conformance_test(const ConformanceTest &test,
                                       const ConformanceOptions &options);

// Runs `tests` on `jobs` threads (each test independent), calling `progress` after each one,
// from one thread at a time, with the number done so far. Results are in the order of `tests`.
std::vector<ConformanceResult>
run_conformance_tests(const std::vector<ConformanceTest> &tests, const ConformanceOptions &options,
                      int jobs,
                      const std::function<void(size_t done, const ConformanceResult &)> &progress);

// The short form of a failure's reason that the summary counts: the stage, then the message
// without the test's paths, names of nodes and tensors or numbers, up to its first clause
// ("unsupported by the importer: MaxPool: attribute ceil_mode = N is not supported").
std::string failure_cause(const ConformanceResult &result, const std::string &test_directory);

struct OpCounts {
    int passed = 0, failed = 0, unsupported = 0;
    std::map<std::string, int> failure_causes; // failure_cause -> tests
};

struct ConformanceSummary {
    std::map<std::string, OpCounts> listed; // every listed op, tested or not
    std::map<std::string, int> unlisted;    // ops not listed -> tests using them
    OpCounts total;                         // each test once
    double pass_rate() const;               // passed / (passed + failed); 0 for no test
};

// Counts `results` per op (a test counts toward each of its ops) and in total; `tests` are the
// tests they are the results of, in the same order (for failure_cause; may be empty).
ConformanceSummary summarize_conformance(const std::vector<ConformanceResult> &results,
                                         const std::vector<ConformanceTest> &tests);

// The summary as docs/conformance.md shows it: a Markdown table with a row per listed op and
// a total row, then the ops that are not listed with their test counts.
std::string conformance_markdown(const ConformanceSummary &summary);

} // namespace vpuc::frontend
