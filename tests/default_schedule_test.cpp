// The default schedule's choices for a few layers whose shape decides them: an uneven split
// (small first and last tasks) where the layer is bound by compute and a tile runs one task at
// a time, even tasks elsewhere. lower_test.cpp checks that default schedules give the
// reference's bytes; tutorial lesson 5 runs the uneven split of the first case.
#include <gtest/gtest.h>

#include "algorithms/registry.h"
#include "codegen/dpu_match.h"
#include "lowering_fixtures.h"
#include "schedules/default_schedule.h"

using namespace vpuc;
using test::activation;
using test::conv3x3;

namespace {

std::string default_for(const dsl::Layer &layer, const std::string &target_name, int tiles = 0) {
    const target::Target target = target::load_target(target_name);
    return schedules::default_schedule(layer, target, tiles,
                                       codegen::dpu_weight_bytes(layer, target))
        .to_string();
}

dsl::Layer conv1x1(const std::string &name, const dsl::Layer &in, int oc, uint32_t seed) {
    return algorithms::conv2d(name, in,
                              test::weights(int(in.output().shape[dsl::dims::C]), 1, oc, seed),
                              algorithms::Conv2dParams{});
}

// vpu27's 3x3 conv 56x56x64->64 (bound by compute): per tile, a 4-row task first and last, so
// that the first input arrives and the last output leaves soon, and the middle in whole
// 4-row blocks, larger first.
TEST(DefaultSchedule, ComputeBoundLayersRampTheirTasks) {
    dsl::Layer in = dsl::Layer::input(activation("in", 64, 56, 56));
    dsl::Layer conv = conv3x3("conv", in, 64, 1);
    EXPECT_EQ(default_for(conv, "vpu27"),
              "distribute(y, 2, SOH).split(y, yo, yi, {4, 12, 8, 4}).prefetch(1)");
    EXPECT_EQ(default_for(conv, "vpu27", 1), "split(y, yo, yi, {4, 24, 24, 4}).prefetch(1)");
}

// A layer bound by DDR gains nothing from small tasks but their DMA latencies.
TEST(DefaultSchedule, DdrBoundLayersSplitEvenly) {
    dsl::Layer in = dsl::Layer::input(activation("in", 256, 28, 28));
    EXPECT_EQ(default_for(conv1x1("conv", in, 512, 2), "vpu27"),
              "distribute(y, 2, SOH).split(y, yo, yi, 4).prefetch(1)");
}

// vpu20 runs five tasks at once per tile: no single first or last task to shorten.
TEST(DefaultSchedule, SeveralDpusPerTileSplitEvenly) {
    dsl::Layer in = dsl::Layer::input(activation("in", 64, 56, 56));
    EXPECT_EQ(default_for(conv3x3("conv", in, 64, 3), "vpu20"),
              "distribute(y, 4, SOH).split(y, yo, yi, 3).prefetch(5)");
}

// Rows that are not whole blocks: the rows left over are the last task, the smallest. With
// 57 rows over 2 tiles (29 and 28), the extents fit the tile with fewer rows, and the other
// repeats the last extent for its extra row.
TEST(DefaultSchedule, LeftoverRowsAreTheLastTask) {
    dsl::Layer in = dsl::Layer::input(activation("in", 64, 56, 36));
    EXPECT_EQ(default_for(conv3x3("conv", in, 64, 4), "vpu27"),
              "distribute(y, 2, SOH).split(y, yo, yi, {4, 12, 2}).prefetch(1)");
    dsl::Layer odd = dsl::Layer::input(activation("odd", 64, 56, 57));
    EXPECT_EQ(default_for(conv3x3("conv", odd, 64, 5), "vpu27"),
              "distribute(y, 2, SOH).split(y, yo, yi, {4, 12, 8, 4}).prefetch(1)");
}

// A SHAVE layer's task pays a 2.7 us launch on vpu27: 1x48x40x40 fp16 moves 307 KB, 9.8 us of
// DMA, so sqrt(9.8 / 2.7) rounds to 2 tasks per tile, where the DMA rule gives 4 (the same layer
// as a DPU one). vpu20's tasks take its 16 pooled SHAVEs and its one DMA engine bounds them:
// its DMA rule stays.
TEST(DefaultSchedule, ShaveLayersBalanceLaunchesAgainstDma) {
    const dsl::Layer in = dsl::Layer::input(activation("in", 48, 40, 40, dsl::ElemType::F16));
    const dsl::Layer exp = algorithms::layer_registry().build("exp", "exp", {in}, {});
    auto shave_default = [&](const std::string &target_name, int tiles, bool on_shave) {
        return schedules::default_schedule(exp, target::load_target(target_name), tiles, 0, {},
                                           on_shave)
            .to_string();
    };
    EXPECT_EQ(shave_default("vpu27", 1, true), "split(y, yo, yi, 20).prefetch(1)");
    EXPECT_EQ(shave_default("vpu27", 1, false), "split(y, yo, yi, 12).prefetch(1)");
    // 20 rows per tile in two tasks, in whole 4-row blocks as a DPU layer's (a 10-row split
    // made YOLO-tiny int8 2.6 us slower).
    EXPECT_EQ(shave_default("vpu27", 0, true),
              "distribute(y, 2, SOH).split(y, yo, yi, 12).prefetch(1)");
    EXPECT_EQ(shave_default("vpu20", 0, true), shave_default("vpu20", 0, false));
}

} // namespace
