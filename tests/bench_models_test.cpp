// bench/models.h: the roofline of a whole graph, computed from the graph alone, and what a
// compiled blob moves between DDR and CMX.
#include <gtest/gtest.h>

#include "bench/models.h"
#include "lowering_fixtures.h"

namespace vpuc {
namespace {

// A 3x3 conv 16 -> 32 channels over 12x10, then a 3x3 max pool of stride 1 and padding 1.
dsl::Graph conv_and_pool() {
    const dsl::Layer in = dsl::Layer::input(test::activation("in", 16, 12, 10));
    const dsl::Layer conv = test::conv3x3("conv", in, 32, 3);
    algorithms::PoolParams p;
    p.kernel_w = p.kernel_h = 3;
    p.pad_left = p.pad_right = p.pad_top = p.pad_bottom = 1;
    return dsl::Graph("net", {algorithms::max_pool("pool", conv, p)});
}

TEST(ModelRoofline, CountsEachDpuLayerAtThePeakOfItsKind) {
    const target::Target vpu27 = target::load_target("vpu27");
    const bench::ModelRoofline r = bench::model_roofline(conv_and_pool(), vpu27);
    // vpu27: 2048 int8 MACs per DPU cycle, one DPU on each of 2 tiles, 1300 MHz; a pool at a
    // sixteenth of that rate.
    const double conv_macs = 32.0 * 12 * 10 * 9 * 16, pool_ops = 32.0 * 12 * 10 * 9;
    const double cycles = conv_macs / 4096 + pool_ops / (4096.0 / 16);
    EXPECT_NEAR(r.compute_ns, cycles * 1e3 / 1300, 1e-6);
    // Input and output once, the conv's weights and its per-channel tables.
    const int64_t activations = 16 * 12 * 10 + 32 * 12 * 10, weights = 16 * 9 * 32;
    EXPECT_GE(r.ddr_bytes, activations + weights);
    EXPECT_LE(r.ddr_bytes, activations + weights + 32 * (4 + 2 + 1));
    EXPECT_NEAR(r.ddr_ns, double(r.ddr_bytes) / 31.2, 1e-9);
    EXPECT_EQ(r.bound_ns(), std::max(r.compute_ns, r.ddr_ns));
}

TEST(ModelMeasurement, ReadsTheBlobsTrafficAndCmxUse) {
    for (const char *name : {"vpu27", "vpu20"}) {
        const target::Target target = target::load_target(name);
        const dsl::Graph graph = conv_and_pool();
        const bench::ModelMeasurement m = bench::measure_model(graph, target);
        ASSERT_EQ(m.error, "") << name;
        EXPECT_EQ(m.layers, 2);
        EXPECT_GT(m.latency_ns, bench::model_roofline(graph, target).bound_ns()) << name;
        // The input comes in once at least (halos of split rows come twice), the output goes
        // out once; the conv's weights are constants, the conv's output an activation that is
        // stored and loaded unless it stays in CMX.
        EXPECT_GE(m.ddr.network_inputs, 16 * 12 * 10) << name;
        EXPECT_EQ(m.ddr.network_outputs, 32 * 12 * 10) << name;
        EXPECT_GE(m.ddr.constants, 16 * 9 * 32) << name;
        EXPECT_EQ(m.ddr.activation_loads > 0, m.ddr.activation_stores > 0) << name;
        EXPECT_GT(m.cmx_high_water_bytes, 0) << name;
        EXPECT_LE(m.cmx_high_water_bytes, int64_t(target.cmx_bytes_per_tile)) << name;
        for (double busy : {m.dpu_busy, m.dma_busy})
            EXPECT_TRUE(busy > 0 && busy <= 1) << name << " " << busy;
        EXPECT_EQ(m.shave_busy, 0) << name;
        EXPECT_GT(m.simulate_functional_ms, 0) << name;
    }
}

} // namespace
} // namespace vpuc
