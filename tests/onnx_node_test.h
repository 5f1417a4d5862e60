// ONNX backend node tests (Debian's libonnx-testdata) run as `vpuc conformance` runs them:
// imported with their inputs as known values, compiled for vpu27, simulated and compared with
// the expected outputs within 1e-2 + 1e-2 * |expected| (frontend/conformance.h).
#pragma once

#include <gtest/gtest.h>

#include "codegen/lower.h"
#include "frontend/conformance.h"

namespace vpuc::testing {

// `test` of a set of the test data: "node", "pytorch-converted", "pytorch-operator".
inline void expect_backend_test_passes(const std::string &set, const std::string &test) {
    frontend::ConformanceOptions options;
    options.compile = [](const dsl::Graph &graph, const target::Target &target) {
        return codegen::lower(graph, target);
    };
    const std::string dir = "/usr/share/libonnx-testdata/data/" + set + "/" + test;
    const frontend::ConformanceResult result =
        frontend::run_conformance_test({set + "/" + test, dir}, options);
    EXPECT_EQ(result.outcome, frontend::Outcome::Passed)
        << frontend::to_string(result.stage) << ": " << result.reason;
}

inline void expect_node_test_passes(const std::string &test) {
    expect_backend_test_passes("node", test);
}

} // namespace vpuc::testing
