// Every layer of the registry, built-in or added in algorithms/layers/, through its example:
// compiled with its default schedule for every bundled target, run on the simulator and
// compared with the CPU reference byte for byte, in int8 and fp16.
#include <gtest/gtest.h>

#include "algorithms/registry.h"
#include "lowering_fixtures.h"

namespace vpuc {
namespace {

struct ExampleCase {
    std::string op;
    dsl::ElemType type;
    std::string target;
};

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
    test::compile_and_check(dsl::Graph(c.op + "_example", {layer}), c.target);
}

INSTANTIATE_TEST_SUITE_P(Registry, RegistryExample, ::testing::ValuesIn(cases()),
                         [](const ::testing::TestParamInfo<ExampleCase> &info) {
                             return info.param.op + "_" + dsl::to_string(info.param.type) + "_" +
                                    info.param.target;
                         });

TEST(RegistryExamples, TheLayerFilesAreRegistered) {
    // algorithms/layers/hard_sigmoid.cpp, registered by the generated list of layer files.
    const dsl::LayerDef *def = algorithms::layer_registry().find("hard_sigmoid");
    ASSERT_NE(def, nullptr);
    EXPECT_TRUE(def->example);
    for (const auto *d : algorithms::layer_registry().all())
        EXPECT_TRUE(d->example) << d->op << " has no example for its tests and benchmark";
}

} // namespace
} // namespace vpuc
