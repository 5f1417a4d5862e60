// The passes between the loop nests and allocation, one at a time: each verifier accepts what
// its pass makes and names the task or tensor when the promise is broken.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <set>
#include <sstream>

#include "examples/small_net.h"
#include "lowering_fixtures.h"
#include "pass_fixtures.h"

using namespace vpuc;
using namespace vpuc::test;

namespace {

// A 3x3 conv over both tiles by rows: both tiles wait for the same weights, whose copy is
// large enough to be split between the DMA engines.
struct TwoTileConv : ::testing::Test {
    const target::Target target = target::load_target("vpu27");
    dsl::Layer in = dsl::Layer::input(activation("in", 64, 16, 16));
    dsl::Layer conv = conv3x3("conv", in, 64, 3);
    dsl::Graph graph{"two_tiles", {conv}};
    codegen::LoweringState s{graph, target};

    void SetUp() override {
        conv.schedule()
            .distribute("y", 2, dsl::Strategy::SplitOverHeight)
            .split("y", "yo", "yi", 4);
        run_through_task_program(s);
    }

    codegen::TaskIR &task(const std::string &name) {
        for (codegen::TaskIR &t : s.program.tasks)
            if (t.name == name) return t;
        throw std::runtime_error("no task " + name);
    }
    codegen::DpuWork &first_dpu() {
        for (codegen::TaskIR &t : s.program.tasks)
            if (auto *dpu = std::get_if<codegen::DpuWork>(&t.work)) return *dpu;
        throw std::runtime_error("no DPU task");
    }

    template <typename F> std::string error_of(F verify) {
        try {
            verify(s);
        } catch (const codegen::LoweringError &e) {
            return e.what();
        }
        return "";
    }
};

TEST_F(TwoTileConv, EveryVerifierAcceptsThePassesOutput) {
    EXPECT_EQ(error_of(codegen::verify_tensors), "");
    EXPECT_EQ(error_of(codegen::verify_tasks), "");
    EXPECT_EQ(error_of(codegen::verify_channel_padding), "");
    EXPECT_EQ(error_of(codegen::verify_prefetch), "");
    EXPECT_EQ(error_of(codegen::verify_weights), "");
    EXPECT_EQ(error_of(codegen::verify_workloads), "");
    EXPECT_EQ(error_of(codegen::verify_weight_copies), "");
}

// prefetch(1): on each tile the inputs of task r load once task r - 2 has computed, one task
// ahead of the computation, no further.
TEST(OrderPrefetch, LoadsWaitForTheTaskPrefetchAheadOfThem) {
    const target::Target target = target::load_target("vpu27");
    const dsl::Layer in = dsl::Layer::input(activation("in", 32, 12, 16));
    dsl::Layer conv = conv3x3("conv", in, 32, 5);
    conv.schedule().split("y", "yo", "yi", 2).prefetch(1);
    const dsl::Graph graph("prefetch", {conv});
    codegen::LoweringState s{graph, target};
    run_through_task_program(s);
    ASSERT_EQ(s.prefetch_chains.size(), 1u);
    const auto &steps = s.prefetch_chains[0].tiles.at(0);
    ASSERT_GE(steps.size(), 4u);
    auto waits_for = [&](int load, int compute) {
        const auto &deps = s.program.tasks.at(size_t(load)).deps;
        return std::find(deps.begin(), deps.end(), compute) != deps.end();
    };
    for (size_t r = 0; r < steps.size(); ++r)
        for (int load : steps[r].input_loads) {
            EXPECT_EQ(waits_for(load, r >= 2 ? steps[r - 2].compute : -1), r >= 2) << r;
            if (r >= 1) {
                EXPECT_FALSE(waits_for(load, steps[r - 1].compute)) << r;
            }
        }
    // The verifier names the load that runs too far ahead.
    auto &deps = s.program.tasks.at(size_t(steps[3].input_loads.at(0))).deps;
    deps.erase(std::find(deps.begin(), deps.end(), steps[1].compute));
    try {
        codegen::verify_prefetch(s);
        FAIL() << "expected a LoweringError";
    } catch (const codegen::LoweringError &e) {
        EXPECT_NE(std::string(e.what()).find("layer 'conv': load 'conv.load0."), std::string::npos)
            << e.what();
        EXPECT_NE(std::string(e.what()).find("runs more than prefetch(1) tasks ahead"),
                  std::string::npos)
            << e.what();
    }
}

TEST_F(TwoTileConv, DeclareTensorsGivesEveryDdrTensorABuffer) {
    s.tensor_views.erase("conv");
    EXPECT_EQ(error_of(codegen::verify_tensors), "tensor 'conv': no DDR buffer");
}

TEST_F(TwoTileConv, ChannelPaddingKeepsDpuTensorsInWholeGroups) {
    codegen::DpuWork &dpu = first_dpu();
    dpu.output.dims[0] = blob::Dim(8, 1);
    EXPECT_NE(
        error_of(codegen::verify_channel_padding)
            .find("its output holds 8 channels at 64 lanes per pixel, not whole groups of 16"),
        std::string::npos);
}

TEST_F(TwoTileConv, PackWeightsPointsEveryTableEntryAtItsChannel) {
    const codegen::DpuWork &dpu = first_dpu();
    const codegen::TaskIR &copy = task("conv.weights.c[0,64).0");
    const codegen::BufferDecl &constant =
        s.program.buffers[size_t(std::get<codegen::DmaWork>(copy.work).src.buffer)];
    const int32_t wrong = 0;
    std::memcpy(s.program.constants.data() + constant.offset + dpu.weight_table.offset + 16, &wrong,
                sizeof(wrong));
    EXPECT_NE(error_of(codegen::verify_weights)
                  .find("weight table entry 1 points at byte 0, not at the channel's weights"),
              std::string::npos);
}

TEST_F(TwoTileConv, ChooseWorkloadsCoversEveryDpuOutput) {
    first_dpu().invariant.variants.pop_back();
    EXPECT_NE(error_of(codegen::verify_workloads).find("no variants"), std::string::npos);
}

TEST_F(TwoTileConv, SplitWeightCopiesMovesTheWholeConstant) {
    // Two parts on the two DMA engines.
    EXPECT_EQ(task("conv.weights.c[0,64).0").index, 0u);
    EXPECT_EQ(task("conv.weights.c[0,64).1").index, 1u);
    auto &first = std::get<codegen::DmaWork>(task("conv.weights.c[0,64).0").work);
    first.src.dims[0] = blob::Dim(first.src.dims[0].extent() - 64, 1);
    for (codegen::View &d : first.dsts) d.dims = first.src.dims;
    EXPECT_NE(error_of(codegen::verify_weight_copies)
                  .find("layer 'conv': weight copy 'conv.weights.c[0,64).1': starts at byte "),
              std::string::npos);
}

// The rest of the lowering of `moved` (after prefetch_weights) and of `unmoved` (before it): the
// same outputs on random data for graph input `in`, and the moves shorten the run.
void expect_same_outputs_sooner(codegen::LoweringState moved, codegen::LoweringState unmoved,
                                const dsl::Layer &in, uint32_t seed) {
    codegen::run_passes(moved, "allocate_cmx", "assemble");
    codegen::run_passes(unmoved, "allocate_cmx", "assemble");
    const std::vector<std::vector<uint8_t>> inputs{bytes_of(random_input(in.output(), seed))};
    const sim::RunResult moved_run = sim::Simulator(moved.target, moved.blob).run(inputs);
    const sim::RunResult unmoved_run = sim::Simulator(unmoved.target, unmoved.blob).run(inputs);
    EXPECT_EQ(moved_run.outputs, unmoved_run.outputs);
    EXPECT_LT(moved_run.latency_ns, unmoved_run.latency_ns);
}

// Two 3x3 convs of odd sizes in a row: b's first weights wait behind every DMA of a unless
// prefetch_weights queues them before a computes. a holds more CMX than b (its weights are
// six times b's), so where the program's CMX is tightest, during a, b's weights cannot join.
struct TwoConvChain : ::testing::Test {
    target::Target target = target::load_target("vpu27");
    dsl::Layer in = dsl::Layer::input(activation("in", 96, 13, 11));
    dsl::Layer a = conv3x3("a", in, 96, 1);
    dsl::Layer b = conv3x3("b", a, 16, 2);
    dsl::Graph graph{"chain", {b}};

    static std::vector<int> tasks_named(const codegen::LoweringState &s,
                                        const std::string &prefix) {
        std::vector<int> found;
        for (size_t t = 0; t < s.program.tasks.size(); ++t)
            if (s.program.tasks[t].name.rfind(prefix, 0) == 0) found.push_back(int(t));
        return found;
    }
    static int first_compute_of(const codegen::LoweringState &s, const std::string &layer) {
        for (size_t t = 0; t < s.program.tasks.size(); ++t)
            if (s.program.tasks[t].layer == layer &&
                s.program.tasks[t].engine != blob::EngineKind::Dma)
                return int(t);
        return -1;
    }
    // b's weight copies all come before a's first compute.
    static bool prefetched(const codegen::LoweringState &s) {
        const std::vector<int> copies = tasks_named(s, "b.weights");
        EXPECT_FALSE(copies.empty());
        return !copies.empty() &&
               *std::max_element(copies.begin(), copies.end()) < first_compute_of(s, "a");
    }
};

// With a stored to DDR, each load of b waits for the stores of a that write bytes it reads,
// and for no other: b's first rows can load while a's last ones are still computed. The
// program then runs, and verifies (no race), with the same result as one where every load
// waits for every store of a.
TEST_F(TwoConvChain, ALoadWaitsForTheStoresOfTheBytesItReads) {
    a.schedule().distribute("y", 2, dsl::Strategy::SplitOverHeight).split("y", "yo", "yi", 2);
    b.schedule().distribute("y", 2, dsl::Strategy::SplitOverHeight).split("y", "yo", "yi", 2);
    codegen::LoweringState s{graph, target};
    run_through_task_program(s);
    const std::vector<int> stores = tasks_named(s, "a.store");
    const std::vector<int> loads = tasks_named(s, "b.load0");
    ASSERT_GT(stores.size(), 2u);
    ASSERT_FALSE(loads.empty());
    size_t skipped = 0;
    for (int load : loads) {
        const codegen::TaskIR &t = s.program.tasks[size_t(load)];
        const codegen::View &read = std::get<codegen::DmaWork>(t.work).src;
        for (int store : stores) {
            const bool waits = std::count(t.deps.begin(), t.deps.end(), store) > 0;
            EXPECT_EQ(waits, codegen::writes_within(s.program.tasks[size_t(store)], read))
                << t.name << " and " << s.program.tasks[size_t(store)].name;
            skipped += waits ? 0 : 1;
        }
    }
    EXPECT_GT(skipped, 0u);
    // Every load waiting for every store: the same bytes.
    codegen::LoweringState all = s;
    for (int load : loads) {
        std::vector<int> &deps = all.program.tasks[size_t(load)].deps;
        for (int store : stores)
            if (!std::count(deps.begin(), deps.end(), store)) deps.push_back(store);
        std::sort(deps.begin(), deps.end());
    }
    codegen::run_passes(s, "prefetch_weights", "assemble");
    codegen::run_passes(all, "prefetch_weights", "assemble");
    const std::vector<std::vector<uint8_t>> inputs{bytes_of(random_input(in.output(), 6))};
    EXPECT_EQ(sim::Simulator(target, s.blob).run(inputs).outputs,
              sim::Simulator(target, all.blob).run(inputs).outputs);
}

TEST_F(TwoConvChain, PrefetchWeightsQueuesTheNextLayersWeightsBeforeTheLayerBeforeComputes) {
    codegen::LoweringState s{graph, target};
    run_through_task_program(s);
    EXPECT_FALSE(prefetched(s));
    const codegen::LoweringState unmoved = s;
    codegen::prefetch_weights(s);
    codegen::verify_tasks(s);
    codegen::verify_prefetch(s); // the prefetch chains follow the tasks they name
    codegen::verify_weight_copies(s);
    EXPECT_TRUE(prefetched(s));
    ASSERT_FALSE(s.notes.empty());
    EXPECT_EQ(s.notes.back().rfind("prefetch_weights: the first weights of 1 layer(s) (", 0), 0u)
        << s.notes.back();
    // The same tasks, the copies moved and nothing else.
    ASSERT_EQ(s.program.tasks.size(), unmoved.program.tasks.size());
    std::multiset<std::string> names, unmoved_names;
    for (const auto &t : s.program.tasks) names.insert(t.name);
    for (const auto &t : unmoved.program.tasks) unmoved_names.insert(t.name);
    EXPECT_EQ(names, unmoved_names);

    expect_same_outputs_sooner(s, unmoved, in, 5);
}

TEST_F(TwoConvChain, PrefetchWeightsNeverMakesCmxAllocationEvict) {
    codegen::LoweringState s{graph, target};
    run_through_task_program(s);
    const uint64_t full = target.cmx_usable_bytes;
    // The least CMX the program fits in without prefetching (the state holds a reference to
    // `target`, so the allocation sees the smaller CMX).
    auto fits = [&] {
        try {
            return codegen::cmx_evictions(s).empty();
        } catch (const codegen::LoweringError &) { // a buffer fits nowhere
            return false;
        }
    };
    uint64_t low = 0, high = full;
    while (high - low > 64) {
        target.cmx_usable_bytes = (low + high) / 2;
        (fits() ? high : low) = target.cmx_usable_bytes;
    }
    bool moved_at_least = false;
    for (uint64_t bytes : {high, high + 4096, high + 16384, high + 65536, full}) {
        SCOPED_TRACE(bytes);
        target.cmx_usable_bytes = bytes;
        codegen::LoweringState trial = s;
        codegen::prefetch_weights(trial);
        EXPECT_TRUE(codegen::cmx_evictions(trial).empty());
        if (bytes == high) {
            EXPECT_FALSE(prefetched(trial)) << "the copies fit where the program is tightest";
        }
        moved_at_least |= prefetched(trial);
    }
    EXPECT_TRUE(moved_at_least);
    target.cmx_usable_bytes = full;
}

// a, a max pool p of a's output (kept in CMX, so p loads nothing) and b. On vpu27, of two DMA
// engines, b's weights load while a computes, not only during the short pool; on vpu20, of
// one, while the pool computes, behind a's stores.
TEST(PrefetchWeights, PassesALayerThatLoadsNothingOnTargetsOfSeveralDmaEngines) {
    for (const std::string name : {"vpu27", "vpu20"}) {
        SCOPED_TRACE(name);
        const target::Target target = target::load_target(name);
        dsl::Layer in = dsl::Layer::input(activation("in", 96, 13, 11));
        dsl::Layer a = conv3x3("a", in, 96, 1);
        dsl::Layer p = max_pool3x3("p", a);
        dsl::Layer b = conv3x3("b", p, 16, 2);
        const dsl::Graph graph("chain", {b});
        codegen::LoweringState s{graph, target};
        run_through_task_program(s);
        ASSERT_EQ(s.prefetch_chains.size(), 3u);
        for (const auto &steps : s.prefetch_chains[1].tiles) // p's
            for (const codegen::PrefetchChain::Step &step : steps)
                ASSERT_TRUE(step.input_loads.empty()) << "p loads its input";
        const codegen::LoweringState unmoved = s;
        codegen::prefetch_weights(s);
        codegen::verify_tasks(s);
        auto first_compute = [&](const std::string &layer) {
            for (size_t t = 0; t < s.program.tasks.size(); ++t)
                if (s.program.tasks[t].layer == layer &&
                    s.program.tasks[t].engine != blob::EngineKind::Dma)
                    return int(t);
            return -1;
        };
        int last_copy = -1, first_copy = int(s.program.tasks.size());
        for (size_t t = 0; t < s.program.tasks.size(); ++t)
            if (s.program.tasks[t].name.rfind("b.weights", 0) == 0) {
                last_copy = std::max(last_copy, int(t));
                first_copy = std::min(first_copy, int(t));
            }
        ASSERT_GE(last_copy, 0);
        if (target.dma_engines > 1) {
            EXPECT_LT(last_copy, first_compute("a"));
        } else {
            EXPECT_GT(first_copy, first_compute("a"));
            EXPECT_LT(last_copy, first_compute("p"));
        }
        expect_same_outputs_sooner(s, unmoved, in, 7);
    }
}

// Three 3x3 convs on vpu27, their weights prefetched. Weight-heavy ones (128 -> 256 -> 256 -> 128
// channels, 14x14: 1.2 MB of weights) run sooner with the DMA engines split, which the
// simulator's trials show: by direction, every transfer reading DDR then runs on engine 0 and
// every one reading CMX on engine 1; with weights apart, every copy of a constant on engine 0
// and every other transfer on engine 1. The bytes are the same. Small ones (96 -> 96 -> 16 ->
// 16, 13x11) run sooner by tile, and keep the engines build_tasks gave them.
TEST(AssignDmaEngines, KeepsTheFastestOfTheEngineMappings) {
    const target::Target target = target::load_target("vpu27");
    for (const bool heavy : {true, false}) {
        SCOPED_TRACE(heavy ? "heavy" : "small");
        dsl::Layer in =
            dsl::Layer::input(activation("in", heavy ? 128 : 96, heavy ? 14 : 13, heavy ? 14 : 11));
        dsl::Layer a = conv3x3("a", in, heavy ? 256 : 96, 1);
        dsl::Layer b = conv3x3("b", a, heavy ? 256 : 16, 2);
        const dsl::Graph graph("chain", {conv3x3("c", b, heavy ? 128 : 16, 3)});
        codegen::LoweringState s{graph, target};
        codegen::run_passes(s, "check_element_types", "allocate_ddr");
        ASSERT_TRUE(s.weights_prefetched);
        codegen::LoweringState by_tile = s;
        codegen::assign_dma_engines(s);
        codegen::verify_tasks(s);
        ASSERT_FALSE(s.notes.empty());
        const std::string &note = s.notes.back();
        EXPECT_EQ(note.rfind("assign_dma_engines: ", 0), 0u) << note;
        const bool by_direction = note.find("moved: engines read DDR or CMX") != std::string::npos;
        const bool weights_apart =
            note.find("moved: weights on engines of their own") != std::string::npos;
        EXPECT_EQ(by_direction || weights_apart, heavy) << note;
        EXPECT_EQ(note.find("the DMA engines stay by tile") != std::string::npos, !heavy) << note;
        size_t moved = 0;
        for (size_t i = 0; i < s.program.tasks.size(); ++i) {
            const codegen::TaskIR &t = s.program.tasks[i];
            moved += t.index != by_tile.program.tasks[i].index ? 1 : 0;
            const auto *copy = std::get_if<codegen::DmaWork>(&t.work);
            if (!copy || !heavy) continue;
            const blob::MemSpace read = s.program.buffers[size_t(copy->src.buffer)].space;
            const bool first_engine =
                by_direction ? read != blob::MemSpace::Cmx : read == blob::MemSpace::Constant;
            EXPECT_EQ(t.index, first_engine ? 0u : 1u) << t.name;
        }
        EXPECT_EQ(moved > 0, heavy);
        if (!heavy) continue;
        codegen::run_passes(s, "reduce_dependencies", "assemble");
        codegen::run_passes(by_tile, "reduce_dependencies", "assemble");
        const std::vector<std::vector<uint8_t>> inputs{bytes_of(random_input(in.output(), 9))};
        const sim::RunResult run = sim::Simulator(target, s.blob).run(inputs);
        const sim::RunResult tile_run = sim::Simulator(target, by_tile.blob).run(inputs);
        EXPECT_EQ(run.outputs, tile_run.outputs);
        EXPECT_LT(run.latency_ns, tile_run.latency_ns);
    }
}

// A chain of convolutions and a pool on CMX cut in steps from the least the program fits in to
// all of it: whatever the allocation evicts with the moved copies, it evicts without them too.
TEST(PrefetchWeights, NeverEvictsABufferTheProgramKeepsWithoutIt) {
    target::Target target = target::load_target("vpu27");
    const uint64_t full = target.cmx_usable_bytes;
    dsl::Layer in = dsl::Layer::input(activation("in", 64, 29, 23));
    dsl::Layer a = conv3x3("a", in, 160, 1);
    dsl::Layer b = conv3x3("b", a, 48, 2);
    dsl::Layer p = max_pool3x3("p", b);
    dsl::Layer c = conv3x3("c", p, 208, 3);
    dsl::Layer d = conv3x3("d", c, 32, 4);
    const dsl::Graph graph("chain", {d});
    codegen::LoweringState s{graph, target};
    run_through_task_program(s);
    // The evicted buffers; nullopt where some buffer fits nowhere.
    auto evicted = [](codegen::LoweringState &state) -> std::optional<std::set<int>> {
        try {
            std::set<int> buffers;
            for (const codegen::Eviction &e : codegen::cmx_evictions(state))
                buffers.insert(e.buffer);
            return buffers;
        } catch (const codegen::LoweringError &) {
            return std::nullopt;
        }
    };
    uint64_t low = 0, high = full;
    while (high - low > 64) {
        target.cmx_usable_bytes = (low + high) / 2;
        (evicted(s) ? high : low) = target.cmx_usable_bytes;
    }
    int tried = 0, moved = 0;
    for (uint64_t bytes = high; bytes <= full; bytes += (full - high) / 40 + 1) {
        SCOPED_TRACE(bytes);
        target.cmx_usable_bytes = bytes;
        const std::optional<std::set<int>> without = evicted(s);
        if (!without) continue; // fitting is not monotone in the bytes
        codegen::LoweringState trial = s;
        codegen::prefetch_weights(trial);
        const std::optional<std::set<int>> with = evicted(trial);
        ASSERT_TRUE(with);
        EXPECT_TRUE(std::includes(without->begin(), without->end(), with->begin(), with->end()));
        ++tried;
        moved += trial.notes.empty() ? 0 : 1;
    }
    EXPECT_GT(tried, 30);
    EXPECT_GT(moved, 0);
    target.cmx_usable_bytes = full;
}

// A layer kept in CMX over two tiles (HKSwitch): build_tasks computes each task into its own
// tile's copy and copies nothing; broadcast_outputs adds one copy after each task, into the
// other tile's copy, and makes the consumer wait for it.
TEST(BroadcastOutputs, CopiesEachTasksResultToTheOtherTiles) {
    const target::Target target = target::load_target("vpu27");
    dsl::Layer in = dsl::Layer::input(activation("in", 32, 12, 16));
    dsl::Layer c1 = conv3x3("c1", in, 32, 21);
    dsl::Layer c2 = conv3x3("c2", c1, 16, 22);
    c1.schedule().distribute("y", 2, dsl::Strategy::HKSwitch).split("y", "yo", "yi", 4);
    c2.schedule().distribute("y", 2, dsl::Strategy::SplitOverHeight);
    const dsl::Graph graph("broadcast", {c2});
    codegen::LoweringState s{graph, target};
    codegen::run_passes(s, "check_element_types", "build_tasks");
    ASSERT_EQ(s.resident_copies.size(), 1u);
    EXPECT_EQ(s.resident_copies[0].layer, "c1");
    EXPECT_EQ(s.resident_copies[0].buffers.size(), 2u);
    auto named = [&](const std::string &part) {
        std::vector<int> found;
        for (size_t i = 0; i < s.program.tasks.size(); ++i)
            if (s.program.tasks[i].name.find(part) != std::string::npos) found.push_back(int(i));
        return found;
    };
    EXPECT_TRUE(named("c1.broadcast.").empty());
    const size_t computations = named("c1.dpu.").size();
    ASSERT_EQ(computations, 4u); // 12 rows in tasks of 4 rows, 2 on one tile

    codegen::run_passes(s, "broadcast_outputs", "broadcast_outputs");
    const std::vector<int> copies = named("c1.broadcast.");
    ASSERT_EQ(copies.size(), computations);
    for (int copy : copies) {
        const codegen::TaskIR &t = s.program.tasks[size_t(copy)];
        const codegen::TaskIR &computed = s.program.tasks[size_t(copy - 1)];
        EXPECT_EQ(t.deps, std::vector<int>{copy - 1});
        EXPECT_EQ(t.name, "c1.broadcast" + computed.name.substr(std::string("c1.dpu").size()));
        const auto &dma = std::get<codegen::DmaWork>(t.work);
        ASSERT_EQ(dma.dsts.size(), 1u);
        EXPECT_EQ(dma.src.buffer, std::get<codegen::DpuWork>(computed.work).output.buffer);
        EXPECT_NE(dma.dsts[0].buffer, dma.src.buffer);
        EXPECT_EQ(dma.dsts[0].offset, dma.src.offset);
        EXPECT_EQ(dma.dsts[0].dims, dma.src.dims);
    }
    const codegen::TaskIR &consumer = s.program.tasks.at(size_t(named("c2.dpu.").at(0)));
    for (int copy : copies)
        EXPECT_EQ(std::count(consumer.deps.begin(), consumer.deps.end(), copy), 1);

    auto error = [&] {
        try {
            codegen::verify_broadcasts(s);
        } catch (const codegen::LoweringError &e) {
            return std::string(e.what());
        }
        return std::string();
    };
    EXPECT_EQ(error(), "");
    // A consumer that does not wait for a copy into its tile's copy.
    codegen::TaskIR &reader = s.program.tasks.at(size_t(named("c2.dpu.").at(0)));
    const int read = std::get<codegen::DpuWork>(reader.work).input.buffer;
    const int copy_in = *std::find_if(copies.begin(), copies.end(), [&](int copy) {
        return std::get<codegen::DmaWork>(s.program.tasks[size_t(copy)].work).dsts[0].buffer ==
               read;
    });
    const std::vector<int> kept = reader.deps;
    reader.deps.erase(std::find(reader.deps.begin(), reader.deps.end(), copy_in));
    EXPECT_NE(error().find("layer 'c2': task '" + reader.name +
                           "': reads the copy of 'c1' in "
                           "'c1.cmx' without waiting for '" +
                           s.program.tasks[size_t(copy_in)].name + "', which writes it"),
              std::string::npos)
        << error();
    reader.deps = kept;
    // A copy that lands one row off.
    auto &dst = std::get<codegen::DmaWork>(s.program.tasks[size_t(copies[1])].work).dsts[0];
    dst.offset += uint64_t(dst.dims[2].stride());
    EXPECT_NE(error().find("layer 'c1': task '" + s.program.tasks[size_t(copies[1] - 1)].name +
                           "': what it computes into its copy of the output on tile "),
              std::string::npos)
        << error();
}

// The passes from allocate_cmx to assemble.
void run_after_task_program(codegen::LoweringState &s) {
    codegen::run_passes(s, "allocate_cmx", "assemble");
}

// The task program prints as text that reads back as the same program, and the passes after
// it, run on the program read back, make the blob they make in memory. The demo network has
// DPU layers with weights, one without, and a SHAVE kernel.
TEST(TaskProgramText, PassesRunOnTheProgramReadBackGiveTheSameBlob) {
    for (const std::string target_name : {"vpu27", "vpu20"}) {
        const target::Target target = target::load_target(target_name);
        const examples::SmallNet net = examples::small_net(1);
        codegen::LoweringState in_memory(net.graph, target);
        run_through_task_program(in_memory);
        const std::string text = codegen::print(in_memory.program);
        codegen::Program parsed = codegen::parse_program(text);
        EXPECT_EQ(codegen::print(parsed), text);
        ASSERT_EQ(parsed.kernels.size(), 1u);

        codegen::LoweringState from_text(net.graph, target, std::move(parsed));
        run_after_task_program(in_memory);
        run_after_task_program(from_text);
        EXPECT_FALSE(in_memory.blob.empty());
        EXPECT_EQ(from_text.blob, in_memory.blob) << target_name;

        // After the barrier passes too, addresses and barriers included.
        const std::string done = codegen::print(in_memory.program);
        EXPECT_NE(done.find("  barrier 0 (physical "), std::string::npos);
        EXPECT_EQ(codegen::print(codegen::parse_program(done)), done);
    }
}

// A line the parser cannot read is an error naming it and what was expected.
TEST(TaskProgramText, ErrorsNameTheLine) {
    const std::string text = "program p: 1 buffers, 1 tasks, 0 barriers, scratch 0 bytes\n"
                             "  buffer 0 x: Cmx 0, 64 bytes\n"
                             "  task 0 t [XPU tile 0 #0]\n";
    try {
        codegen::parse_program(text);
        FAIL() << "parsed";
    } catch (const codegen::ProgramTextError &e) {
        EXPECT_NE(std::string(e.what()).find("task program, line 3: unknown name 'XPU'"),
                  std::string::npos)
            << e.what();
    }
    try {
        codegen::parse_program("program p: 2 buffers, 0 tasks, 0 barriers, scratch 0 bytes\n"
                               "  buffer 0 x: Cmx 0, 64 bytes\n");
        FAIL() << "parsed";
    } catch (const codegen::ProgramTextError &e) {
        EXPECT_STREQ(e.what(), "task program: ends where a buffer was expected (line 3)");
    }
    try {
        codegen::parse_program("program p: 1 buffers, 1 tasks, 0 barriers, scratch 0 bytes\n"
                               "  buffer 0 x: Cmx 0, 64 bytes\n"
                               "  task 0 t [DMA tile 0 #0]\n"
                               "    layer l\n"
                               "    copy [1]x@0+0 U8 (64:1) -> [0]x@0+0 U8 (64:1)\n");
        FAIL() << "parsed";
    } catch (const codegen::ProgramTextError &e) {
        EXPECT_NE(std::string(e.what()).find("task program, line 5: expected an integer"),
                  std::string::npos)
            << e.what();
    }
    try {
        codegen::parse_program("program p: 1 buffers, 1 tasks, 0 barriers, scratch 0 bytes\n"
                               "  buffer 0 x: Cmx 0, 64 bytes\n"
                               "  task 0 t [SHAVE tile 0 #0]\n"
                               "    layer l\n"
                               "    kernel 2 on 4 SHAVEs\n"
                               "    arg [0]x@0+0 U8 (64:1) at 0\n"
                               "  constants 0 bytes\n");
        FAIL() << "parsed";
    } catch (const codegen::ProgramTextError &e) {
        EXPECT_STREQ(e.what(), "task program: task 't' runs kernel 2, and there are 0");
    }
}

// After the schedule passes, each layer's loop nest prints as Halide's print_loop_nest shows
// one: outermost first, task loops and loops inside a task told apart.
TEST(LoopNestText, DumpShowsEachLayersLoopNest) {
    dsl::Layer in = dsl::Layer::input(activation("in", 16, 10, 12));
    dsl::Layer conv = conv3x3("conv", in, 16, 5);
    conv.schedule().split("y", "yo", "yi", 4).on_dpu();
    std::ostringstream log;
    codegen::LowerOptions options;
    options.dump_after = "resolve_schedules";
    options.log = &log;
    codegen::lower(dsl::Graph("nest", {conv}), target::load_target("vpu27"), options);
    EXPECT_NE(log.str().find("conv: split(y, yo, yi, 4).on_dpu()\n"
                             "  produce conv:\n"
                             "    task yo in [0, 3):\n"
                             "      for yi in [0, 4):\n"
                             "        for x in [0, 10):\n"
                             "          for c in [0, 16):\n"
                             "            conv(c, x, y) = ...\n"),
              std::string::npos)
        << log.str();
}

} // namespace
