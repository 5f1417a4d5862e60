// The lowering end to end: graphs of DPU layers with various schedules compile to blobs that
// verify, run on the simulator and match the Halide CPU reference bit-exactly (int8).
#include <gtest/gtest.h>

#include <random>
#include <sstream>

#include "codegen/dpu_match.h"
#include "lowering_fixtures.h"
#include "pass_fixtures.h"

using namespace vpuc;
using namespace vpuc::test;

namespace {

// An fp16 3x3 conv (padding 1) of small weights, per-channel scale and bias.
dsl::Layer float_conv3x3(const std::string &name, const dsl::Layer &in, int oc, uint32_t seed) {
    const int ic = int(in.output().shape[dsl::dims::C]);
    std::mt19937 rng(seed);
    algorithms::FloatWeights fw;
    fw.weights = Halide::Buffer<Halide::float16_t>(ic, 3, 3, oc);
    fw.weights.for_each_value(
        [&](Halide::float16_t &v) { v = Halide::float16_t(float(int(rng() % 17) - 8) / 64); });
    for (int c = 0; c < oc; ++c) {
        fw.scale.push_back(float(1 + rng() % 8) / 8);
        fw.bias.push_back(float(int(rng() % 9) - 4) / 8);
    }
    algorithms::Conv2dParams p;
    p.pad_left = p.pad_right = p.pad_top = p.pad_bottom = 1;
    return algorithms::conv2d(name, in, fw, p);
}

// The task program before allocation.
codegen::Program built(const dsl::Graph &graph, const target::Target &target) {
    codegen::LoweringState s(graph, target);
    run_through_task_program(s);
    return std::move(s.program);
}

size_t tasks_named(const codegen::Program &p, const std::string &part) {
    return size_t(std::count_if(p.tasks.begin(), p.tasks.end(), [&](const codegen::TaskIR &t) {
        return t.name.find(part) != std::string::npos;
    }));
}

struct ScheduleCase {
    std::string name;
    std::function<void(dsl::Schedule &)> apply;
};

class LowerConv : public ::testing::TestWithParam<std::tuple<std::string, int>> {};

const std::vector<ScheduleCase> &schedules() {
    static const std::vector<ScheduleCase> all = {
        {"whole", [](dsl::Schedule &s) { s.on_dpu(); }},
        {"rows", [](dsl::Schedule &s) { s.split("y", "yo", "yi", 4).on_dpu().prefetch(1); }},
        {"soh",
         [](dsl::Schedule &s) {
             s.distribute("y", 2, dsl::Strategy::SplitOverHeight)
                 .split("y", "yo", "yi", 3)
                 .prefetch(2)
                 .workloads("c", 2)
                 .on_dpu();
         }},
        {"sok",
         [](dsl::Schedule &s) {
             s.distribute("c", 2, dsl::Strategy::SplitOverKernel)
                 .split("x", "xo", "xi", 6)
                 .on_dpu();
         }},
        {"ragged_tiles",
         [](dsl::Schedule &s) {
             s.tile("x", "y", "xo", "yo", "xi", "yi", 5, 7).prefetch(1).on_dpu();
         }},
    };
    return all;
}

TEST_P(LowerConv, MatchesTheReferenceBitExactly) {
    const auto &[target_name, index] = GetParam();
    const ScheduleCase &sc = schedules()[size_t(index)];
    dsl::Layer in = dsl::Layer::input(activation("in", 32, 14, 13));
    dsl::Layer conv = conv3x3("conv", in, 32, 1);
    sc.apply(conv.schedule());
    compile_and_check(dsl::Graph("conv_" + sc.name, {conv}), target_name);
}

INSTANTIATE_TEST_SUITE_P(Schedules, LowerConv,
                         ::testing::Combine(::testing::Values("vpu27", "vpu20"),
                                            ::testing::Range(0, 5)));

TEST(Lower, ChainOfLayersThroughDdr) {
    dsl::Layer in = dsl::Layer::input(activation("in", 16, 12, 12));
    dsl::Layer c1 = conv3x3("c1", in, 32, 2);
    c1.schedule().distribute("y", 2, dsl::Strategy::SplitOverHeight).on_dpu();
    algorithms::PoolParams pool;
    pool.kernel_w = pool.kernel_h = 2;
    pool.stride_w = pool.stride_h = 2;
    dsl::Layer p1 = algorithms::max_pool("p1", c1, pool);
    p1.schedule().split("y", "yo", "yi", 2).on_dpu();
    // 24 channels over two tiles: 16 and 8, the second padded to a group of 16.
    dsl::Layer c2 = conv3x3("c2", p1, 24, 3);
    c2.schedule().distribute("c", 2, dsl::Strategy::SplitOverKernel).on_dpu();
    compile_and_check(dsl::Graph("chain", {c2}), "vpu27");
}

TEST(Lower, DistributedTasksRunOnEveryTile) {
    dsl::Layer in = dsl::Layer::input(activation("in", 64, 28, 28));
    dsl::Layer conv = conv3x3("conv", in, 64, 4);
    conv.schedule().distribute("y", 2, dsl::Strategy::SplitOverHeight).prefetch(1).on_dpu();
    auto result = compile_and_check(dsl::Graph("two", {conv}), "vpu27").result;
    double busy[2] = {0, 0};
    for (const auto &e : result.engines)
        for (int tile = 0; tile < 2; ++tile)
            if (e.engine == "DPU tile " + std::to_string(tile)) busy[tile] = e.busy_ns;
    EXPECT_GT(busy[0], 0);
    EXPECT_DOUBLE_EQ(busy[0], busy[1]);
}

TEST(Lower, ErrorsNameTheLayer) {
    dsl::Layer in = dsl::Layer::input(activation("in", 16, 8, 8));
    dsl::Layer pool = algorithms::max_pool("pool", in, {});
    pool.schedule().on_dpu("CUBOID_3x3");
    target::Target t = target::load_target("vpu27");
    try {
        codegen::lower(dsl::Graph("g", {pool}), t);
        FAIL();
    } catch (const dsl::ScheduleError &e) {
        EXPECT_NE(std::string(e.what()).find("layer 'pool'"), std::string::npos) << e.what();
    }
    dsl::Layer big = conv3x3("big", dsl::Layer::input(activation("in", 512, 64, 64)), 512, 5);
    big.schedule().on_dpu(); // one task: 2 MB in, 2 MB out, 2.4 MB of weights
    try {
        codegen::lower(dsl::Graph("g", {big}), t);
        FAIL();
    } catch (const codegen::LoweringError &e) {
        EXPECT_NE(std::string(e.what()).find("does not fit in CMX of tile 0"), std::string::npos)
            << e.what();
    }
}

TEST(Lower, DumpAfterPrintsTheIr) {
    dsl::Layer in = dsl::Layer::input(activation("in", 16, 8, 8));
    dsl::Layer conv = conv3x3("conv", in, 16, 6);
    conv.schedule().split("y", "yo", "yi", 4).on_dpu();
    std::ostringstream log;
    codegen::LowerOptions options;
    options.dump_after = "allocate_cmx";
    options.log = &log;
    codegen::lower(dsl::Graph("g", {conv}), target::load_target("vpu27"), options);
    EXPECT_NE(log.str().find("IR after allocate_cmx"), std::string::npos);
    EXPECT_NE(log.str().find("conv.dpu.0.c[0,16) x[0,8) y[4,8)"), std::string::npos) << log.str();
    options.dump_after = "nonsense";
    EXPECT_THROW(codegen::lower(dsl::Graph("g", {conv}), target::load_target("vpu27"), options),
                 codegen::LoweringError);
}

} // namespace

namespace {

TEST(Lower, DefaultSchedulesCompileAndMatch) {
    for (const std::string target_name : {"vpu27", "vpu20"}) {
        dsl::Layer in = dsl::Layer::input(activation("in", 32, 20, 19));
        dsl::Layer c1 = conv3x3("c1", in, 48, 8);
        algorithms::PoolParams pool;
        pool.kernel_w = pool.kernel_h = 3;
        pool.stride_w = pool.stride_h = 2;
        pool.pad_left = pool.pad_right = pool.pad_top = pool.pad_bottom = 1;
        dsl::Layer p1 = algorithms::max_pool("p1", c1, pool);
        compile_and_check(dsl::Graph("defaults", {p1}), target_name);
    }
}

// lower() compiles unscheduled layers with their default schedules but leaves every layer's
// schedule as it was, and returns the schedules it compiled with: the same graph scheduled
// with them compiles to the same blob.
TEST(Lower, LeavesTheGraphsSchedulesAloneAndReturnsTheOnesUsed) {
    const target::Target target = target::load_target("vpu27");
    dsl::Layer in = dsl::Layer::input(activation("in", 32, 20, 19));
    dsl::Layer c1 = conv3x3("c1", in, 48, 8);
    dsl::Layer c2 = conv3x3("c2", c1, 16, 9);
    c2.schedule().split("y", "yo", "yi", 5).prefetch(1);
    const std::string c2_schedule = c2.schedule().to_string();
    const dsl::Graph graph("defaults", {c2});
    std::map<std::string, dsl::Schedule> schedules;
    codegen::LowerOptions options;
    options.schedules = &schedules;
    const std::vector<uint8_t> blob = codegen::lower(graph, target, options);
    EXPECT_TRUE(c1.schedule().empty());
    EXPECT_EQ(c2.schedule().to_string(), c2_schedule);
    ASSERT_EQ(schedules.size(), 2u);
    EXPECT_FALSE(schedules.at("c1").empty());
    EXPECT_EQ(schedules.at("c2").to_string(), c2_schedule);

    dsl::Layer d1 = conv3x3("c1", in, 48, 8);
    dsl::Layer d2 = conv3x3("c2", d1, 16, 9);
    d1.schedule() = schedules.at("c1");
    d2.schedule() = schedules.at("c2");
    EXPECT_EQ(codegen::lower(dsl::Graph("defaults", {d2}), target), blob);
}

} // namespace

namespace {

// SHAVE layers: kernels generated by Halide, run per task on the tile's SHAVEs.
TEST(Lower, ShaveLayersAfterDpuLayers) {
    for (const std::string target_name : {"vpu27", "vpu20"}) {
        dsl::Layer in = dsl::Layer::input(activation("in", 32, 9, 10));
        dsl::Layer conv = conv3x3("conv", in, 32, 11);
        dsl::Layer sig = algorithms::sigmoid("sig", conv, dsl::Quant::per_tensor(1.0f / 256, 0));
        dsl::Layer soft =
            algorithms::softmax("soft", sig, dsl::dims::C, dsl::Quant::per_tensor(1.0f / 256, 0));
        soft.schedule()
            .distribute("y", 2, dsl::Strategy::SplitOverHeight)
            .split("x", "xo", "xi", 4);
        compile_and_check(dsl::Graph("shave", {soft}), target_name);
    }
}

} // namespace

namespace {

// fp16 results as the simulator gives them, each within `ulps` of the CPU reference's.
void expect_fp16_within(const dsl::Graph &graph, const std::string &target_name, int ulps) {
    const target::Target target = target::load_target(target_name);
    const Halide::Buffer<> input = random_input(graph.inputs().at(0).output(), 7);
    const std::vector<uint8_t> want = bytes_of(algorithms::run_reference(graph, {input}).at(0));
    const std::vector<uint8_t> got =
        sim::Simulator(target, codegen::lower(graph, target)).run({bytes_of(input)}).outputs.at(0);
    ASSERT_EQ(got.size(), want.size());
    int worst = 0;
    for (size_t i = 0; i + 1 < got.size(); i += 2) {
        const int a = got[i] | got[i + 1] << 8, b = want[i] | want[i + 1] << 8;
        worst = std::max(worst, (a ^ b) & 0x8000 ? 0x10000 : std::abs(a - b));
    }
    EXPECT_LE(worst, ulps) << graph.name() << " on " << target_name;
}

// A softmax's max runs in vectors along its reduction (rfactor): exact in any order, also
// when the lanes do not divide the extent, along C or W. int8 is bit-exact; fp16 within one
// ulp (the SHAVE's float code and the CPU reference's may round exp's polynomial differently).
TEST(Lower, SoftmaxMaxInVectors) {
    for (const int64_t extent : {9, 37, 1001}) {
        dsl::Layer in = dsl::Layer::input(activation("in", extent, 3, 2));
        compile_and_check(dsl::Graph("soft_c", {algorithms::softmax("soft_c", in, dsl::dims::C)}),
                          "vpu27");
        dsl::Layer wide = dsl::Layer::input(activation("wide", 5, extent, 2));
        compile_and_check(dsl::Graph("soft_w", {algorithms::softmax("soft_w", wide, dsl::dims::W)}),
                          "vpu20");
        dsl::Layer in16 = dsl::Layer::input(activation("in", extent, 3, 2, dsl::ElemType::F16));
        expect_fp16_within(
            dsl::Graph("soft_c16", {algorithms::softmax("soft_c16", in16, dsl::dims::C)}), "vpu27",
            1);
        dsl::Layer wide16 = dsl::Layer::input(activation("wide", 5, extent, 2, dsl::ElemType::F16));
        expect_fp16_within(
            dsl::Graph("soft_w16", {algorithms::softmax("soft_w16", wide16, dsl::dims::W)}),
            "vpu20", 1);
    }
}

TEST(Lower, ShaveScheduleVectorizesAndUnrolls) {
    dsl::Layer in = dsl::Layer::input(activation("in", 32, 9, 10));
    dsl::Layer sig = algorithms::sigmoid("sig", in, dsl::Quant::per_tensor(1.0f / 256, 0));
    sig.schedule().on_shave().vectorize("c", 32).unroll("x");
    compile_and_check(dsl::Graph("vectorized", {sig}), "vpu27");
    dsl::Layer split = algorithms::sigmoid("split", in, dsl::Quant::per_tensor(1.0f / 256, 0));
    split.schedule()
        .on_shave()
        .split("c", "co", "ci", 16)
        .split("ci", "cio", "cii", 8)
        .vectorize("cii", 8);
    compile_and_check(dsl::Graph("split", {split}), "vpu27");
}

} // namespace

namespace {

// compute_at: producers computed per consumer task into its CMX, halos recomputed, nothing
// of them in DDR.
TEST(Lower, ComputeAtChainMatchesAndStaysInCmx) {
    for (const std::string target_name : {"vpu27", "vpu20"}) {
        dsl::Layer in = dsl::Layer::input(activation("in", 16, 10, 9));
        dsl::Layer c1 = conv3x3("c1", in, 32, 12, false);
        dsl::Layer relu = algorithms::relu("relu", c1);
        dsl::Layer c2 = conv3x3("c2", relu, 16, 13, false);
        dsl::Layer soft =
            algorithms::softmax("soft", c2, dsl::dims::C, dsl::Quant::per_tensor(1.0f / 256, 0));
        soft.schedule()
            .distribute("y", 2, dsl::Strategy::SplitOverHeight)
            .split("y", "yo", "yi", 2)
            .prefetch(1);
        // Per softmax row pair, c2 in two column blocks; per c2 block, relu row by row (each
        // row's c1 with it), so c1 and relu rows at block edges are computed twice.
        c2.schedule().split("x", "xo", "xi", 6).compute_at("soft", "yo");
        relu.schedule().split("y", "yo", "yi", 1).compute_at("c2", "xo");
        c1.schedule().compute_at("relu", "yo");
        std::ostringstream log;
        codegen::LowerOptions options;
        options.dump_after = "build_tasks";
        options.log = &log;
        codegen::lower(dsl::Graph("fused", {soft}), target::load_target(target_name), options);
        // Only the network's input and output touch DDR.
        EXPECT_EQ(log.str().find("c2.store"), std::string::npos) << log.str();
        EXPECT_EQ(log.str().find("c1.store"), std::string::npos);
        EXPECT_NE(log.str().find("relu.at.c2"), std::string::npos);
        compile_and_check(dsl::Graph("fused", {soft}), target_name);
    }
}

// Output broadcast: a layer stored in CMX (HKSwitch, or store_in(CMX) with SOK) computes
// into its own tile's copy of the whole output and broadcasts each result to the other tiles
// its consumers run on; the consumers read it there, and the tensor never touches DDR.
TEST(Lower, BroadcastOutputsStayInCmx) {
    for (const std::string target_name : {"vpu27", "vpu20"}) {
        const target::Target target = target::load_target(target_name);
        dsl::Layer in = dsl::Layer::input(activation("in", 32, 12, 16));
        dsl::Layer c1 = conv3x3("c1", in, 32, 21);
        dsl::Layer c2 = conv3x3("c2", c1, 32, 22);
        dsl::Layer sig = algorithms::sigmoid("sig", c2);
        dsl::Layer c3 = conv3x3("c3", sig, 16, 23);
        // c1 over rows, broadcast; c2 over output channels, reading all rows of c1, and
        // broadcast too; the sigmoid on the SHAVEs of tile 0 reads c2; c3 over rows.
        c1.schedule().distribute("y", 2, dsl::Strategy::HKSwitch).split("y", "yo", "yi", 4);
        c2.schedule()
            .distribute("c", 2, dsl::Strategy::SplitOverKernel)
            .store_in(dsl::MemoryLevel::CMX);
        sig.schedule().store_in(dsl::MemoryLevel::CMX);
        c3.schedule().distribute("y", target.tiles, dsl::Strategy::SplitOverHeight);
        const dsl::Graph graph("broadcast", {c3});
        std::ostringstream log;
        codegen::LowerOptions options;
        options.dump_after = "broadcast_outputs";
        options.log = &log;
        codegen::lower(graph, target, options);
        const std::string ir = log.str();
        for (const std::string layer : {"c1", "c2", "sig"}) {
            EXPECT_EQ(ir.find(layer + ".store"), std::string::npos) << ir;
            EXPECT_EQ(ir.find(layer + ": Scratch"), std::string::npos) << ir;
            EXPECT_NE(ir.find(layer + ".broadcast"), std::string::npos) << ir;
        }
        EXPECT_EQ(ir.find("c2.load"), std::string::npos) << ir; // reads c1 in CMX
        compile_and_check(graph, target);
    }
}

// A replicated layer (Clustering) kept in CMX computes its whole output on each of its tiles,
// so it copies results only to the tiles it does not run on (two writers of the same bytes
// would race).
TEST(Lower, ReplicatedOutputsKeptInCmx) {
    const target::Target target = target::load_target("vpu20");
    dsl::Layer in = dsl::Layer::input(activation("in", 16, 10, 12));
    dsl::Layer c1 = conv3x3("c1", in, 16, 24);
    dsl::Layer c2 = conv3x3("c2", c1, 16, 25);
    c1.schedule().distribute("y", 2, dsl::Strategy::Clustering).store_in(dsl::MemoryLevel::CMX);
    c2.schedule().distribute("y", 4, dsl::Strategy::SplitOverHeight);
    compile_and_check(dsl::Graph("replicated", {c2}), target);
}

// A replicated network output (Clustering) is computed whole on each of its tiles, but each
// tile stores only its own rows: two stores of the same DDR bytes would race. lower() checks
// the blob for races, so a store of the whole region from both tiles fails to compile.
TEST(Lower, ReplicatedNetworkOutputStoresEachRowOnce) {
    for (const std::string target_name : {"vpu27", "vpu20"}) {
        const target::Target target = target::load_target(target_name);
        dsl::Layer in = dsl::Layer::input(activation("in", 16, 10, 12));
        dsl::Layer whole = conv3x3("whole", in, 16, 26);
        whole.schedule().distribute("y", 2, dsl::Strategy::Clustering);
        dsl::Layer tasks = conv3x3("tasks", in, 32, 27);
        tasks.schedule().split("y", "yo", "yi", 5).distribute("yo", 2, dsl::Strategy::Clustering);
        for (const dsl::Layer &layer : {whole, tasks}) {
            const dsl::Graph graph("replicated_output", {layer});
            // Every output row is stored exactly once.
            std::vector<int> stores_per_row(12, 0);
            for (const codegen::TaskIR &t : built(graph, target).tasks) {
                if (t.name.find(".store.") == std::string::npos) continue;
                const auto &copy = std::get<codegen::DmaWork>(t.work);
                const uint64_t row_bytes = uint64_t(copy.dsts[0].dims[2].stride());
                const uint64_t first = copy.dsts[0].offset / row_bytes;
                for (uint64_t y = first; y < first + copy.dsts[0].dims[2].extent(); ++y)
                    ++stores_per_row.at(y);
            }
            EXPECT_EQ(stores_per_row, std::vector<int>(12, 1)) << layer.name();
            compile_and_check(graph, target);
        }
    }
}

} // namespace

namespace {

// The DPU has neither: a dilated kernel runs as its span with zero weights between the taps, a
// grouped convolution as plain ones over whole channel groups with zero weights across
// convolution groups.
TEST(Lower, DilatedAndGroupedConvolutionsOnTheDpu) {
    for (const std::string target_name : {"vpu27", "vpu20"}) {
        dsl::Layer in = dsl::Layer::input(activation("in", 32, 13, 11));
        algorithms::Conv2dParams dilated;
        dilated.dilation_w = 2;
        dilated.dilation_h = 3;
        dilated.pad_left = dilated.pad_right = 2;
        dilated.pad_top = dilated.pad_bottom = 3;
        algorithms::QuantWeights w = weights(32, 3, 16, 14);
        w.zero_point = 3;
        dsl::Layer d = algorithms::conv2d("dilated", in, w, dilated);
        d.schedule().split("y", "yo", "yi", 4).on_dpu();
        EXPECT_EQ(codegen::match_dpu(d).dilation_h, 3);
        compile_and_check(dsl::Graph("dilated", {d}), target_name);

        algorithms::Conv2dParams grouped;
        grouped.groups = 4;
        grouped.pad_left = grouped.pad_right = grouped.pad_top = grouped.pad_bottom = 1;
        grouped.activation = algorithms::Activation::relu();
        dsl::Layer g = algorithms::conv2d("grouped", in, weights(8, 3, 48, 15), grouped);
        // Tasks of 16 channels straddle the groups of 12 (8 input channels each): each runs
        // as one convolution over the input channels of the groups it touches, in whole
        // channel groups ([16, 32) touches groups 1 and 2: inputs [8, 24), read as [0, 32)).
        g.schedule().split("c", "co", "ci", 16).distribute("y", 2, dsl::Strategy::SplitOverHeight);
        const dsl::Graph graph("grouped", {g});
        std::vector<uint32_t> inputs;
        for (const codegen::TaskIR &t : built(graph, target::load_target(target_name)).tasks)
            if (const auto *dpu = std::get_if<codegen::DpuWork>(&t.work))
                inputs.push_back(dpu->input.dims[0].extent());
        EXPECT_EQ(inputs, (std::vector<uint32_t>{16, 16, 32, 32, 16, 16}));
        compile_and_check(graph, target_name);

        // Groups of 16 channels run one task each, on their own input channels.
        grouped.groups = 2;
        dsl::Layer halves = algorithms::conv2d("halves", in, weights(16, 3, 32, 16), grouped);
        halves.schedule().split("y", "yo", "yi", 6);
        const dsl::Graph two("halves", {halves});
        inputs.clear();
        for (const codegen::TaskIR &t : built(two, target::load_target(target_name)).tasks)
            if (const auto *dpu = std::get_if<codegen::DpuWork>(&t.work))
                inputs.push_back(dpu->input.dims[0].extent());
        EXPECT_EQ(inputs, (std::vector<uint32_t>{16, 16, 16, 16}));
        compile_and_check(two, target_name);
    }
}

} // namespace

namespace {

// DDR scratch is reused once a tensor's readers are done. In a chain of four convolutions,
// each loads both halves of its input (prefetch 1) before storing the first half of its
// output, so every intermediate tensor can take the previous one's place: one tensor's worth
// of scratch instead of three, the stores waiting for the loads.
TEST(Lower, ScratchTensorsShareDdr) {
    dsl::Layer in = dsl::Layer::input(activation("in", 16, 12, 12));
    dsl::Layer c1 = conv3x3("c1", in, 16, 21);
    dsl::Layer c2 = conv3x3("c2", c1, 16, 22);
    dsl::Layer c3 = conv3x3("c3", c2, 16, 23);
    dsl::Layer c4 = conv3x3("c4", c3, 16, 24);
    for (dsl::Layer *l : {&c1, &c2, &c3, &c4})
        l->schedule().split("y", "yo", "yi", 6).prefetch(1).on_dpu();
    const dsl::Graph graph("four", {c4});
    compile_and_check(graph, "vpu27");
    const target::Target target = target::load_target("vpu27");
    sim::Simulator simulator(target, codegen::lower(graph, target));
    const uint64_t one_tensor = 16 * 12 * 12;
    EXPECT_EQ(simulator.blob().header()->ddr_scratch_bytes(), one_tensor);
}

} // namespace

namespace {

// Weights larger than CMX: the default schedule computes the output channels in groups whose
// weights fit, one group at a time.
TEST(Lower, DefaultSchedulesSplitWeightsThatDoNotFit) {
    dsl::Layer in = dsl::Layer::input(activation("in", 512, 7, 6));
    dsl::Layer big = conv3x3("big", in, 512, 25); // 2.4 MB of weights
    EXPECT_GT(codegen::dpu_weight_bytes(big, target::load_target("vpu27")), 2300000);
    compile_and_check(dsl::Graph("big", {big}), "vpu27");
    std::map<std::string, dsl::Schedule> schedules;
    codegen::LowerOptions options;
    options.schedules = &schedules;
    codegen::lower(dsl::Graph("big", {big}), target::load_target("vpu27"), options);
    EXPECT_NE(schedules.at("big").to_string().find("split(c, co, ci, "), std::string::npos)
        << schedules.at("big").to_string();

    // A schedule that needs every group's weights for each row: groups are loaded afresh
    // whenever a tile's tasks move to them.
    dsl::Layer rows = conv3x3("rows", in, 512, 25);
    rows.schedule().split("c", "co", "ci", 64).split("y", "yo", "yi", 2).on_dpu();
    compile_and_check(dsl::Graph("rows", {rows}), "vpu27");

    dsl::Layer half = dsl::Layer::input(activation("half", 256, 8, 9, dsl::ElemType::F16));
    algorithms::FloatWeights fw;
    fw.weights = Halide::Buffer<Halide::float16_t>(256, 3, 3, 256); // 1.2 MB
    std::mt19937 rng(26);
    fw.weights.for_each_value(
        [&](Halide::float16_t &v) { v = Halide::float16_t(float(int(rng() % 17) - 8) / 64); });
    algorithms::Conv2dParams same;
    same.pad_left = same.pad_right = same.pad_top = same.pad_bottom = 1;
    dsl::Layer wide = algorithms::conv2d("wide", half, fw, same);
    compile_and_check(dsl::Graph("wide", {wide}), "vpu20");
}

} // namespace

namespace {

// The DPU reads and writes whole groups of 16 channels: 24 channels are held in CMX with 32
// lanes per pixel, the pad lanes meet zero weights, the pad output channels are computed and
// never stored, and fp16 pad lanes that a DMA leaves alone are zeroed first (the simulator's
// CMX starts as fp16 NaNs, so a missed one shows). Over SOK, 40 output channels are 32 + 8.
TEST(Lower, ChannelsArePaddedToWholeGroups) {
    for (const std::string target_name : {"vpu27", "vpu20"})
        for (const dsl::ElemType type : {dsl::ElemType::U8, dsl::ElemType::F16}) {
            SCOPED_TRACE(target_name + (type == dsl::ElemType::F16 ? " fp16" : " u8"));
            const target::Target target = target::load_target(target_name);
            dsl::Layer in = dsl::Layer::input(activation("in", 24, 9, 10, type));
            dsl::Layer conv = type == dsl::ElemType::F16 ? float_conv3x3("conv", in, 40, 31)
                                                         : conv3x3("conv", in, 40, 31);
            conv.schedule()
                .distribute("c", 2, dsl::Strategy::SplitOverKernel)
                .split("y", "yo", "yi", 4);
            algorithms::PoolParams pool;
            pool.kernel_w = pool.kernel_h = 2;
            pool.stride_w = pool.stride_h = 2;
            dsl::Layer p = algorithms::max_pool("pool", conv, pool);
            const dsl::Graph graph("padded", {p});

            const codegen::Program program = built(graph, target);
            for (const codegen::TaskIR &t : program.tasks)
                if (const auto *dpu = std::get_if<codegen::DpuWork>(&t.work)) {
                    EXPECT_EQ(dpu->input.dims[0].extent() % 16, 0u) << t.name;
                    EXPECT_EQ(dpu->output.dims[0].extent() % 16, 0u) << t.name;
                    // 48 lanes per pixel of the conv's output in the pool's CMX: whole groups.
                    EXPECT_EQ(dpu->output.dims[1].stride() % 16, 0) << t.name;
                }
            EXPECT_EQ(tasks_named(program, ".zero_pad.") > 0, type == dsl::ElemType::F16);
            compile_and_check(graph, target);
        }
}

// A convolution of fewer input channels than a group runs channel-major on them, unpadded,
// also when they are read in the CMX of a producer that writes whole groups.
TEST(Lower, ChannelMajorConvolutionsReadTheirInputUnpadded) {
    const target::Target target = target::load_target("vpu27");
    dsl::Layer in = dsl::Layer::input(activation("in", 8, 12, 10));
    algorithms::PoolParams pool;
    pool.kernel_w = pool.kernel_h = 3;
    pool.pad_left = pool.pad_right = pool.pad_top = pool.pad_bottom = 1;
    dsl::Layer p = algorithms::max_pool("pool", in, pool);
    dsl::Layer conv = conv3x3("conv", p, 16, 32);
    conv.schedule().split("y", "yo", "yi", 5);
    p.schedule().compute_at("conv", "yo");
    const dsl::Graph graph("channel_major", {conv});
    size_t convs = 0;
    for (const codegen::TaskIR &t : built(graph, target).tasks)
        if (const auto *dpu = std::get_if<codegen::DpuWork>(&t.work); dpu && t.layer == "conv") {
            ++convs;
            EXPECT_EQ(dpu->input.dims[0].extent(), 8u) << t.name; // the real channels
            EXPECT_EQ(dpu->input.dims[1].stride(), 16) << t.name; // of the pool's 16 lanes
            EXPECT_EQ(dpu->weights.dims[0].extent(), 8u) << t.name;
        }
    EXPECT_EQ(convs, 2u);
    compile_and_check(graph, target);
}

// fp16 pad lanes stay finite along a chain in CMX: a max pool computed at a convolution
// (its loads zeroed, its pad output lanes the max of zeros), that convolution broadcast in
// CMX over rows (HKSwitch, its pad channels computed as 0), and a convolution reading it.
TEST(Lower, Fp16PadLanesStayFiniteThroughCmx) {
    for (const std::string target_name : {"vpu27", "vpu20"}) {
        SCOPED_TRACE(target_name);
        dsl::Layer in = dsl::Layer::input(activation("in", 24, 11, 9, dsl::ElemType::F16));
        dsl::Layer p = max_pool3x3("pool", in);
        dsl::Layer c1 = float_conv3x3("c1", p, 24, 34);
        dsl::Layer c2 = float_conv3x3("c2", c1, 40, 35);
        c1.schedule().distribute("y", 2, dsl::Strategy::HKSwitch).split("y", "yo", "yi", 3);
        p.schedule().compute_at("c1", "yo");
        c2.schedule().distribute("c", 2, dsl::Strategy::SplitOverKernel);
        compile_and_check(dsl::Graph("fp16_chain", {c2}), target_name);
    }
}

// fp16 pad lanes a SHAVE kernel leaves alone (it writes only the real channels) are zeroed
// before a DPU reads them, computed at the DPU layer or kept in CMX.
TEST(Lower, PadLanesOfShaveResultsAreZeroedForTheDpu) {
    for (const bool fused : {true, false}) {
        SCOPED_TRACE(fused ? "compute_at" : "store_in(CMX)");
        dsl::Layer in = dsl::Layer::input(activation("in", 24, 10, 8, dsl::ElemType::F16));
        dsl::Layer sig = algorithms::sigmoid("sig", in);
        dsl::Layer conv = float_conv3x3("conv", sig, 16, 33);
        conv.schedule().split("y", "yo", "yi", 4);
        if (fused)
            sig.schedule().compute_at("conv", "yo");
        else
            sig.schedule().store_in(dsl::MemoryLevel::CMX);
        const dsl::Graph graph("shave_pad", {conv});
        const target::Target target = target::load_target("vpu27");
        EXPECT_GT(tasks_named(built(graph, target), ".zero_pad."), 0u);
        compile_and_check(graph, target);
    }
}

} // namespace
