// Networks of several branches joined and cut again: a channel concat of three branches (one
// at an offset that is not a whole channel group) and a slice, compiled for both targets and
// checked against the reference.
#include <gtest/gtest.h>

#include "algorithms/registry.h"
#include "codegen/check.h"
#include "lowering_fixtures.h"

namespace vpuc {
namespace {

dsl::Graph branches_joined() {
    const dsl::Layer in = dsl::Layer::input(test::activation("in", 16, 12, 10));
    algorithms::Conv2dParams pointwise;
    pointwise.activation = algorithms::Activation::relu();
    const dsl::Layer a = test::conv3x3("a", in, 16, 1);
    const dsl::Layer b = algorithms::conv2d("b", in, test::weights(16, 1, 5, 2), pointwise);
    const dsl::Layer c = test::conv3x3("c", in, 19, 3);
    // a at channel 0, b at 16, c at 21.
    const dsl::Layer joined = algorithms::layer_registry().build("concat", "joined", {a, b, c}, {});
    dsl::Attrs cut;
    cut.set("starts", std::vector<int64_t>{8, 2}).set("ends", std::vector<int64_t>{30, 9});
    cut.set("axes", std::vector<int64_t>{1, 3});
    const dsl::Layer sliced = algorithms::layer_registry().build("slice", "sliced", {joined}, cut);
    const dsl::Layer head =
        algorithms::conv2d("head", sliced, test::weights(22, 1, 16, 4), pointwise);
    return dsl::Graph("branches_joined", {head, joined});
}

TEST(Network, ChannelConcatOfThreeBranchesAndASlice) {
    const dsl::Graph g = branches_joined();
    EXPECT_EQ(dsl::to_string(g.find("joined").output().shape), "1x40x10x12");
    EXPECT_EQ(dsl::to_string(g.find("sliced").output().shape), "1x22x10x7");
    for (const char *target : {"vpu27", "vpu20"}) {
        const codegen::CheckResult r =
            codegen::check_against_reference(g, target::load_target(target));
        EXPECT_TRUE(r.ok()) << target << "\n" << r.report();
        EXPECT_EQ(r.outputs.size(), 2u);
    }
}

TEST(Network, ConcatAndSliceRefuseWhatTheyCannotDo) {
    const dsl::Layer in = dsl::Layer::input(test::activation("in", 16, 12, 10));
    const dsl::Layer other = dsl::Layer::input(test::activation("other", 16, 11, 10));
    auto &registry = algorithms::layer_registry();
    EXPECT_THROW(registry.build("concat", "j", {in, other}, {}), dsl::LayerError)
        << "widths differ off the axis";
    const dsl::Layer f16 = dsl::Layer::input(test::activation("h", 16, 12, 10, dsl::ElemType::F16));
    EXPECT_THROW(registry.build("concat", "j", {in, f16}, {}), dsl::LayerError);
    EXPECT_THROW(registry.build("concat", "j", {}, {}), dsl::AttrError) << "no inputs";
    dsl::Attrs empty;
    empty.set("starts", std::vector<int64_t>{5}).set("ends", std::vector<int64_t>{5});
    EXPECT_THROW(registry.build("slice", "s", {in}, empty), dsl::LayerError);
    dsl::Attrs batch = empty;
    batch.set("axes", std::vector<int64_t>{0});
    EXPECT_THROW(registry.build("slice", "s", {in}, batch), dsl::AttrError);
}

} // namespace
} // namespace vpuc
