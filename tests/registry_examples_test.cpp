// Every layer of the registry, built-in or added in algorithms/layers/, through its example:
// compiled with its default schedule for every bundled target, run on the simulator and
// compared with the CPU reference on real-valued random inputs, in int8 (byte for byte) and
// fp16 (the fp16 contract).
#include <gtest/gtest.h>

#include "algorithms/registry.h"
#include "codegen/check.h"
#include "codegen/dpu_match.h"
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
    std::vector<ExampleCase> list;
    for (const auto *def : algorithms::layer_registry().all())
        if (def->example)
            for (auto type : {dsl::ElemType::U8, dsl::ElemType::F16})
                for (const char *target : {"vpu27", "vpu20"})
                    list.push_back({def->op, type, target});
    return list;
}

class RegistryExample : public ::testing::TestWithParam<ExampleCase> {};

TEST_P(RegistryExample, CompilesRunsAndMatchesTheReference) {
    const ExampleCase &c = GetParam();
    const dsl::Layer layer = algorithms::layer_registry().at(c.op).example(c.type);
    if (!layer.defined()) GTEST_SKIP() << c.op << " takes no " << dsl::to_string(c.type);
    EXPECT_EQ(layer.op(), c.op);
    const target::Target target = target::load_target(c.target);
    // Real-valued inputs; the fp16 contract: a DPU operation's bits, a SHAVE kernel's within
    // 1 ulp.
    codegen::CheckOptions options;
    options.tolerance.f16_ulp = codegen::try_match_dpu(layer, target) ? 0 : 1;
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
