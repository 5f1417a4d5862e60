// The layer matrix: every layer of the registry, in every element type it takes
// (algorithms/examples.h), on both targets, under random legal schedules drawn from the
// schedule space (codegen/random_schedule.h), gives the default schedule's bytes: a schedule
// changes speed, never results. That the default schedule gives the CPU reference's result,
// within the fp16 and f32 contracts, is registry_examples_test's part of the matrix.
//
// `make test` runs kDefaultSchedules random schedules per op and type, the same on every run
// (the target alternating with the schedule's index); `make test-long` searches by time
// (property_budget.h), splitting it evenly across the cases:
//
//   VPUC_PROPERTY_SCHEDULES=20 ./build/tests/layer_matrix_test --gtest_filter='*softmax*'
//   VPUC_PROPERTY_MINUTES=30 ./build/tests/layer_matrix_test
//
// Inputs are real-valued random data (codegen::random_buffer). A failure prints the op, type,
// target, seed and the schedule as a chain and as JSON.
#include <gtest/gtest.h>

#include <iterator>
#include <random>
#include <string>
#include <vector>

#include "algorithms/examples.h"
#include "algorithms/registry.h"
#include "codegen/check.h"
#include "codegen/random_schedule.h"
#include "property_budget.h"
#include "schedule_property_support.h"

namespace vpuc {
namespace {

constexpr int kDefaultSchedules = 1;
const char *const kTargets[] = {"vpu27", "vpu20"};

struct MatrixCase {
    std::string op;
    dsl::ElemType type;
    std::string name() const { return op + "_" + dsl::to_string(type); }
};

void PrintTo(const MatrixCase &c, std::ostream *os) {
    *os << c.op << " " << to_string(c.type);
}

const std::vector<MatrixCase> &cases() {
    static const std::vector<MatrixCase> all = [] {
        std::vector<MatrixCase> list;
        for (const dsl::LayerDef *def : algorithms::layer_registry().all())
            for (dsl::ElemType type : algorithms::accepted_types(*def))
                list.push_back({def->op, type});
        return list;
    }();
    return all;
}

class LayerMatrix : public ::testing::TestWithParam<MatrixCase> {};

TEST_P(LayerMatrix, RandomSchedulesGiveTheDefaultScheduleResult) {
    const MatrixCase &c = GetParam();
    const test::PropertyBudget budget(kDefaultSchedules, cases().size());
    dsl::Layer layer = algorithms::example_in_type(algorithms::layer_registry().at(c.op), c.type);
    ASSERT_TRUE(layer.defined());
    const dsl::Graph graph(c.op + "_example", dsl::output_layers(layer));
    std::vector<std::vector<uint8_t>> inputs;
    uint32_t input_seed = test::seed_of(c.name(), "input", 0);
    for (const dsl::Layer &in : graph.inputs())
        inputs.push_back(test::bytes_of(codegen::random_buffer(in.output(), input_seed++)));

    std::vector<uint8_t> baseline[std::size(kTargets)];
    auto baseline_of = [&](size_t t) -> const std::vector<uint8_t> & {
        if (baseline[t].empty()) {
            layer.schedule() = dsl::Schedule(); // the lowering's default schedule
            const std::string error =
                test::compile_and_run(graph, test::target_named(kTargets[t]), inputs, baseline[t]);
            EXPECT_EQ(error, "") << c.name() << " on " << kTargets[t] << ", default schedule";
        }
        return baseline[t];
    };

    int run = 0, failures = 0;
    for (int i = 0; budget.runs(i); ++i, ++run) {
        const size_t t = size_t(i) % std::size(kTargets);
        const std::vector<uint8_t> &want = baseline_of(t);
        if (want.empty()) break; // the default schedule failed: reported above
        const target::Target &target = test::target_named(kTargets[t]);
        const uint32_t seed = test::seed_of(c.name(), "schedule", i);
        std::mt19937 rng(seed);
        layer.schedule() = codegen::random_schedule(graph, layer, target, rng);
        std::vector<uint8_t> got;
        std::string error = test::compile_and_run(graph, target, inputs, got);
        if (error.empty()) error = test::difference(got, want);
        if (!error.empty() && ++failures <= 5)
            ADD_FAILURE() << c.name() << " on " << kTargets[t] << ", schedule " << i << " (seed "
                          << seed << "; " << budget.reproduce(i) << "): " << error << "\n  "
                          << layer.schedule().to_string() << "\n"
                          << layer.schedule().to_json();
    }
    test::PropertyBudget::report(c.name(), run, "schedules", failures);
    EXPECT_EQ(failures, 0) << c.name() << ": " << failures << " of " << run << " schedules failed";
}

INSTANTIATE_TEST_SUITE_P(Registry, LayerMatrix, ::testing::ValuesIn(cases()),
                         [](const ::testing::TestParamInfo<MatrixCase> &info) {
                             return info.param.name();
                         });

// Schedules longer searches found failing, kept as they were found.
TEST(LayerMatrixRegressions, FoundSchedulesGiveTheDefaultScheduleResult) {
    struct Found {
        MatrixCase c;
        const char *target, *schedule, *what;
    };
    const Found found[] = {
        {{"avg_pool3d", dsl::ElemType::F16},
         "vpu20",
         "on_shave().prefetch(1).vectorize(y, 8)",
         "a vector wider than a task's rows: Halide proves the cost count's region at mins 0 "
         "unreachable"},
        {{"batch_norm", dsl::ElemType::U8},
         "vpu20",
         "on_shave().unroll(x)",
         "13 channels vectorized by default under an unrolled guard: a one-lane masked load "
         "LLVM refused"},
    };
    for (const Found &f : found) {
        dsl::Layer layer =
            algorithms::example_in_type(algorithms::layer_registry().at(f.c.op), f.c.type);
        const dsl::Graph graph(f.c.op + "_example", dsl::output_layers(layer));
        std::vector<std::vector<uint8_t>> inputs;
        uint32_t seed = 1;
        for (const dsl::Layer &in : graph.inputs())
            inputs.push_back(test::bytes_of(codegen::random_buffer(in.output(), seed++)));
        const target::Target &target = test::target_named(f.target);
        std::vector<uint8_t> want, got;
        ASSERT_EQ(test::compile_and_run(graph, target, inputs, want), "") << f.c.name();
        layer.schedule() = dsl::Schedule::parse(f.schedule);
        EXPECT_EQ(test::compile_and_run(graph, target, inputs, got), "")
            << f.c.name() << " " << f.schedule << " (" << f.what << ")";
        EXPECT_EQ(test::difference(got, want), "") << f.c.name() << " " << f.schedule;
    }
}

} // namespace
} // namespace vpuc
