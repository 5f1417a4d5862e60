// Every layer of the registry, built-in or added in algorithms/layers/, through its example in
// every element type it takes (algorithms/examples.h): compiled with its default schedule, run on
// the simulator and compared with the CPU reference on real-valued random inputs, bit for bit.
// `make test` runs each type on one bundled target, alternating, so that an op of several types
// runs on both; `make test-long` (VPUC_FULL_MATRIX=1) runs every type on both.
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

#include "algorithms/examples.h"
#include "algorithms/registry.h"
#include "codegen/check.h"
#include "dsl/graph_text.h"

namespace vpuc {
namespace {

struct ExampleCase {
    std::string op;
    dsl::ElemType type;
    std::string target;
};

// How ctest and failure messages name a case.
void PrintTo(const ExampleCase &c, std::ostream *os) {
    *os << c.op << " " << dsl::to_string(c.type) << " on " << c.target;
}

std::vector<ExampleCase> cases() {
    const char *full = std::getenv("VPUC_FULL_MATRIX");
    const bool both_targets = full && std::string(full) == "1";
    std::vector<ExampleCase> list;
    size_t index = 0;
    for (const auto *def : algorithms::layer_registry().all())
        for (dsl::ElemType type : algorithms::accepted_types(*def)) {
            if (both_targets) {
                for (const char *target : {"vpu27", "vpu20"})
                    list.push_back({def->op, type, target});
                continue;
            }
            list.push_back({def->op, type, index++ % 2 ? "vpu20" : "vpu27"});
        }
    return list;
}

class RegistryExample : public ::testing::TestWithParam<ExampleCase> {};

TEST_P(RegistryExample, CompilesRunsAndMatchesTheReference) {
    const ExampleCase &c = GetParam();
    const dsl::Layer layer =
        algorithms::example_in_type(algorithms::layer_registry().at(c.op), c.type);
    ASSERT_TRUE(layer.defined());
    EXPECT_EQ(layer.op(), c.op);
    const target::Target target = target::load_target(c.target);
    // Real-valued inputs, every result bit for bit: the DPU emulation sums in the reference's
    // order, and SHAVE kernels, like the reference, keep their float operations' order
    // (strict_float).
    codegen::CheckOptions options;
    options.tolerance.f16_ulp = 0;
    const codegen::CheckResult r = codegen::check_against_reference(
        dsl::Graph(c.op + "_example", dsl::output_layers(layer)), target, options);
    EXPECT_TRUE(r.ok()) << r.report();
}

INSTANTIATE_TEST_SUITE_P(Registry, RegistryExample, ::testing::ValuesIn(cases()),
                         [](const ::testing::TestParamInfo<ExampleCase> &info) {
                             return info.param.op + "_" + dsl::to_string(info.param.type) + "_" +
                                    info.param.target;
                         });

// Every example rebuilds from its attributes and reads back from the graph text.
TEST(RegistryExamples, RebuildFromTheirAttributesAndText) {
    for (const auto *def : algorithms::layer_registry().all())
        for (auto type : {dsl::ElemType::U8, dsl::ElemType::F16}) {
            if (!def->example) continue; // runs at compile time only
            const dsl::Layer layer = def->example(type);
            if (!layer.defined()) continue;
            const dsl::Layer again = algorithms::layer_registry().build(
                def->op, layer.name(), layer.inputs(), layer.attrs());
            EXPECT_EQ(again.attrs(), layer.attrs()) << def->op;
            const std::string text =
                dsl::print_graph(dsl::Graph(def->op, dsl::output_layers(layer)), {true, true});
            EXPECT_EQ(
                dsl::print_graph(dsl::read_graph(text, algorithms::layer_registry()), {true, true}),
                text)
                << def->op;
        }
}

TEST(RegistryExamples, TheLayerFilesAreRegistered) {
    // algorithms/layers/hard_sigmoid.cpp, registered by the generated list of layer files.
    const dsl::LayerDef *def = algorithms::layer_registry().find("hard_sigmoid");
    ASSERT_NE(def, nullptr);
    EXPECT_TRUE(def->example);
    // An op that runs at compile time only (no build: constant_folding_test) needs none.
    for (const auto *d : algorithms::layer_registry().all())
        EXPECT_TRUE(d->example || !d->build || d->op == "constant")
            << d->op << " has no example for its tests and benchmark";
}

} // namespace
} // namespace vpuc
