// Barriers: implied dependencies are dropped, dependencies become virtual barriers, and the
// virtual barriers fit the target's physical barriers however many are needed at once, by
// serializing work rather than failing. Checked on hand-built task programs against an
// independent reachability oracle, and end to end against the Halide CPU reference.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <random>
#include <sstream>
#include <tuple>

#include "lowering_fixtures.h"
#include "pass_fixtures.h"

using namespace vpuc;
using namespace vpuc::test;
using codegen::BarrierIR;
using codegen::LoweringState;
using codegen::Program;
using codegen::TaskIR;

namespace {

target::Target with_barriers(const std::string &name, int barriers) {
    target::Target t = target::load_target(name);
    t.barriers = barriers;
    return t;
}

// ---- An independent oracle -----------------------------------------------------------------

using Queue = std::tuple<int, uint32_t, uint32_t>;

Queue queue_of(const TaskIR &t) {
    return {int(t.engine), t.tile, t.index};
}

// reach[a][b]: a finishes before b starts, over queue order plus the edges `edges` (producer,
// consumer), by plain closure: fine for the few hundred tasks of these tests.
std::vector<std::vector<bool>> closure(const Program &p,
                                       const std::vector<std::pair<int, int>> &edges) {
    const size_t n = p.tasks.size();
    std::vector<std::vector<int>> preds(n);
    std::map<Queue, int> last;
    for (size_t t = 0; t < n; ++t) {
        auto it = last.find(queue_of(p.tasks[t]));
        if (it != last.end()) preds[t].push_back(it->second);
        last[queue_of(p.tasks[t])] = int(t);
    }
    for (auto [a, b] : edges) preds[size_t(b)].push_back(a);
    std::vector<std::vector<bool>> reach(n, std::vector<bool>(n, false));
    for (size_t t = 0; t < n; ++t)
        for (int d : preds[t]) {
            EXPECT_LT(size_t(d), t) << "an edge goes backwards in program order";
            if (size_t(d) >= t) continue;
            reach[size_t(d)][t] = true;
            for (size_t i = 0; i < n; ++i)
                if (reach[i][size_t(d)]) reach[i][t] = true;
        }
    return reach;
}

std::vector<std::pair<int, int>> dependency_edges(const Program &p) {
    std::vector<std::pair<int, int>> edges;
    for (int t = 0; t < int(p.tasks.size()); ++t)
        for (int d : p.tasks[size_t(t)].deps) edges.emplace_back(d, t);
    return edges;
}

std::vector<std::pair<int, int>> barrier_edges(const Program &p) {
    std::vector<std::pair<int, int>> edges;
    for (const BarrierIR &b : p.barriers)
        for (int t : b.producers)
            for (int c : b.consumers) edges.emplace_back(t, c);
    return edges;
}

// The barriers of `p` keep every dependency of `original`, and follow the blob rules: ids in
// range, producers before consumers in program order, and a physical barrier passes to its
// next virtual barrier only once every consumer of the previous one is ordered before every
// producer of the next.
void expect_valid_barriers(const Program &original, const Program &p, int physical) {
    const auto reach = closure(p, barrier_edges(p));
    for (auto [d, t] : dependency_edges(original))
        EXPECT_TRUE(reach[size_t(d)][size_t(t)])
            << "lost the dependency of '" << p.tasks[size_t(t)].name << "' on '"
            << p.tasks[size_t(d)].name << "'";
    std::map<int, size_t> last_on;
    for (size_t b = 0; b < p.barriers.size(); ++b) {
        const BarrierIR &bar = p.barriers[b];
        ASSERT_GE(bar.physical, 0);
        ASSERT_LT(bar.physical, physical);
        ASSERT_FALSE(bar.producers.empty());
        ASSERT_FALSE(bar.consumers.empty());
        for (int t : bar.producers)
            for (int c : bar.consumers) EXPECT_LT(t, c) << "barrier " << b;
        auto it = last_on.find(bar.physical);
        if (it != last_on.end()) {
            for (int c : p.barriers[it->second].consumers)
                for (int t : bar.producers)
                    EXPECT_TRUE(c == t || reach[size_t(c)][size_t(t)])
                        << "barrier " << b << " reuses physical " << bar.physical
                        << " before consumer " << c << " of barrier " << it->second << " ran";
        }
        last_on[bar.physical] = b;
    }
}

// ---- Hand-built programs -------------------------------------------------------------------

struct Builder {
    Program program;

    int dma(int engine, std::vector<int> deps = {}) {
        return add(blob::EngineKind::Dma, 0, uint32_t(engine), std::move(deps));
    }
    int dpu(int tile, int index, std::vector<int> deps = {}) {
        return add(blob::EngineKind::Dpu, uint32_t(tile), uint32_t(index), std::move(deps));
    }
    int add(blob::EngineKind engine, uint32_t tile, uint32_t index, std::vector<int> deps) {
        TaskIR t;
        t.name = "t" + std::to_string(program.tasks.size());
        t.engine = engine;
        t.tile = tile;
        t.index = index;
        t.deps = std::move(deps);
        return program.add_task(std::move(t));
    }
};

const dsl::Graph &some_graph() {
    static const dsl::Graph g(
        "g", {conv3x3("conv", dsl::Layer::input(activation("in", 16, 8, 8)), 16, 1)});
    return g;
}

// Runs the barrier passes on `program` for a target with `physical` barriers and checks the
// result with the oracle; returns the program with its barriers.
Program map_barriers(const Program &program, int physical, bool reduce = true) {
    target::Target target = with_barriers("vpu20", physical);
    LoweringState s(some_graph(), target, program);
    if (reduce) codegen::reduce_dependencies(s);
    codegen::assign_barriers(s);
    codegen::map_physical_barriers(s);
    codegen::verify_barriers(s);
    expect_valid_barriers(program, s.program, physical);
    return s.program;
}

TEST(Barriers, ImpliedDependenciesAreRemoved) {
    Builder b;
    int load = b.dma(0);
    int weights = b.dma(1);
    int conv = b.dpu(0, 0, {load, weights});
    int store = b.dma(0, {conv, load});           // load: the queue orders it
    int other = b.dpu(0, 1, {load, conv, store}); // load and conv: store waits for them
    int next = b.dpu(0, 0, {weights, load, load});
    const target::Target narrow = with_barriers("vpu20", 32);
    LoweringState s(some_graph(), narrow, b.program);
    codegen::reduce_dependencies(s);
    const auto &t = s.program.tasks;
    EXPECT_EQ(t[size_t(conv)].deps, (std::vector<int>{load, weights}));
    EXPECT_EQ(t[size_t(store)].deps, (std::vector<int>{conv}));
    EXPECT_EQ(t[size_t(other)].deps, (std::vector<int>{store}));
    EXPECT_TRUE(t[size_t(next)].deps.empty()); // conv, before it on its DPU, waited for both
    // Nothing that was ordered is lost.
    const auto before = closure(b.program, dependency_edges(b.program));
    const auto after = closure(s.program, dependency_edges(s.program));
    EXPECT_EQ(before, after);
}

TEST(Barriers, ReductionKeepsOrderAndLeavesNoImpliedDependency) {
    std::mt19937 rng(3);
    for (int round = 0; round < 20; ++round) {
        Builder b;
        for (int t = 0; t < 120; ++t) {
            std::vector<int> deps;
            for (int k = 0; t > 0 && k < int(rng() % 5); ++k) deps.push_back(int(rng() % t));
            if (rng() % 3 == 0)
                b.dma(int(rng() % 2), deps);
            else
                b.dpu(int(rng() % 2), int(rng() % 3), deps);
        }
        const target::Target narrow = with_barriers("vpu20", 32);
        LoweringState s(some_graph(), narrow, b.program);
        codegen::reduce_dependencies(s);
        const auto before = closure(b.program, dependency_edges(b.program));
        ASSERT_EQ(before, closure(s.program, dependency_edges(s.program)));
        // No dependency left is implied by the rest and queue order.
        for (int t = 0; t < int(s.program.tasks.size()); ++t) {
            const auto &deps = s.program.tasks[size_t(t)].deps;
            for (int d : deps) {
                Program without = s.program;
                auto &w = without.tasks[size_t(t)].deps;
                w.erase(std::find(w.begin(), w.end(), d));
                EXPECT_FALSE(closure(without, dependency_edges(without))[size_t(d)][size_t(t)])
                    << "round " << round << ": task " << t << " keeps the implied " << d;
            }
        }
    }
}

TEST(Barriers, DependenciesWithTheSameWaitersShareABarrier) {
    Builder b;
    int in = b.dma(0), w = b.dma(1);
    int conv0 = b.dpu(0, 0, {in, w});
    int conv1 = b.dpu(1, 0, {in, w});
    Program p = map_barriers(b.program, 32);
    ASSERT_EQ(p.barriers.size(), 1u);
    EXPECT_EQ(p.barriers[0].producers, (std::vector<int>{in, w}));
    EXPECT_EQ(p.barriers[0].consumers, (std::vector<int>{conv0, conv1}));
}

// Given when the tasks ran (order_as_run), the DPU tasks of a layer that a tile's DPUs ran at
// once share one barrier: consecutive, as many as the tile has DPUs, finishing within a tenth
// of their time of each other. One that finishes later keeps its own.
TEST(Barriers, TasksATileRanAtOnceShareABarrier) {
    for (double third_end : {105.0, 150.0}) {
        SCOPED_TRACE("the third task ends at " + std::to_string(third_end));
        Builder b;
        const int p0 = b.dpu(0, 0), p1 = b.dpu(0, 1), p2 = b.dpu(0, 2), p3 = b.dpu(0, 0);
        const int c0 = b.dpu(1, 0, {p0}), c1 = b.dpu(1, 1, {p1}), c2 = b.dpu(1, 2, {p2});
        const int c3 = b.dpu(1, 3, {p3});
        const target::Target narrow = with_barriers("vpu20", 32);
        LoweringState s(some_graph(), narrow, b.program);
        codegen::assign_barriers(s);
        EXPECT_EQ(s.program.barriers.size(), 4u) << "without run times, one per producer";
        s.run_times = codegen::RunTimes{{0, 0, 0, 100, 300, 300, 300, 300},
                                        {100, 102, third_end, 300, 400, 400, 400, 400}};
        codegen::assign_barriers(s);
        const bool together = third_end < 110;
        ASSERT_EQ(s.program.barriers.size(), together ? 2u : 3u);
        const BarrierIR &wave = s.program.barriers[0];
        EXPECT_EQ(wave.producers,
                  together ? (std::vector<int>{p0, p1, p2}) : (std::vector<int>{p0, p1}));
        EXPECT_EQ(wave.consumers,
                  together ? (std::vector<int>{c0, c1, c2}) : (std::vector<int>{c0, c1}));
        for (const BarrierIR &bar : s.program.barriers) {
            if (bar.producers == std::vector<int>{p3}) {
                EXPECT_EQ(bar.consumers, std::vector<int>{c3});
            }
        }
        codegen::map_physical_barriers(s);
        expect_valid_barriers(b.program, s.program, 32);
    }
}

// Many more barriers in use at once than the target has, in the three ways it happens: loads
// issued long before their consumers, a DMA queue running ahead of the DPUs it feeds, and
// loads broadcast to every DPU of a tile.
TEST(Barriers, ManyMoreBarriersInUseThanPhysicalOnes) {
    constexpr int kLoads = 150;
    {
        Builder b;
        std::vector<int> loads;
        for (int i = 0; i < kLoads; ++i) loads.push_back(b.dma(i % 2));
        for (int i = 0; i < kLoads; ++i) b.dpu(i % 4, (i / 4) % 5, {loads[size_t(i)]});
        Program p = map_barriers(b.program, 32);
        EXPECT_GE(p.barriers.size(), size_t(kLoads));
    }
    {
        Builder b;
        for (int i = 0; i < kLoads; ++i) b.dpu(i % 4, (i / 4) % 5, {b.dma(0)});
        map_barriers(b.program, 32);
    }
    {
        Builder b;
        for (int i = 0; i < kLoads; ++i) {
            int load = b.dma(i % 2);
            for (int d = 0; d < 5; ++d) b.dpu(i % 4, d, {load});
        }
        map_barriers(b.program, 32);
        map_barriers(b.program, 3);
    }
}

// Random programs on few physical barriers, down to one: the mapping serializes as much as
// it must and never loses a dependency.
TEST(Barriers, RandomProgramsFitFewPhysicalBarriers) {
    std::mt19937 rng(11);
    for (int round = 0; round < 60; ++round) {
        Builder b;
        const int n = 40 + int(rng() % 120);
        for (int t = 0; t < n; ++t) {
            std::vector<int> deps;
            for (int k = 0; t > 0 && k < int(rng() % 4); ++k)
                deps.push_back(std::max(0, t - 1 - int(rng() % 30)));
            switch (rng() % 4) {
            case 0:
                b.dma(int(rng() % 2), deps);
                break;
            case 1:
                b.add(blob::EngineKind::Shave, uint32_t(rng() % 2), 0, deps);
                break;
            default:
                b.dpu(int(rng() % 4), int(rng() % 5), deps);
            }
        }
        for (int physical : {1, 2, 3, 8})
            for (bool reduce : {true, false}) {
                SCOPED_TRACE("round " + std::to_string(round) + ", " + std::to_string(physical) +
                             " physical barriers" + (reduce ? "" : ", dependencies as given"));
                map_barriers(b.program, physical, reduce);
            }
    }
}

// ---- End to end ----------------------------------------------------------------------------

// Weight loads per group of 16 output channels are each waited for by every xo round, so
// without dropping the implied waits 32+ barriers are in use at once.
dsl::Layer per_channel_conv() {
    dsl::Layer in = dsl::Layer::input(activation("in", 16, 8, 8));
    dsl::Layer conv = conv3x3("conv", in, 512, 1);
    conv.schedule().split("c", "co", "ci", 16).split("x", "xo", "xi", 4);
    return conv;
}

TEST(Barriers, PerChannelWeightLoadsRunBitExact) {
    for (const char *name : {"vpu27", "vpu20"}) {
        SCOPED_TRACE(name);
        compile_and_check(dsl::Graph("per_channel", {per_channel_conv()}),
                          target::load_target(name));
    }
}

// The passes of lower() with or without reduce_dependencies, then the blob and its run.
struct Lowered {
    Program program;
    sim::RunResult result;
};

Lowered lower_by_hand(const dsl::Graph &graph, const target::Target &target, bool reduce) {
    LoweringState s(graph, target);
    run_through_allocate_cmx(s);
    codegen::allocate_ddr(s);
    if (reduce) codegen::reduce_dependencies(s);
    codegen::assign_barriers(s);
    codegen::map_physical_barriers(s);
    codegen::verify_barriers(s);
    codegen::assemble(s);
    codegen::verify_blob(s);
    std::vector<std::vector<uint8_t>> inputs;
    for (const auto &in : graph.inputs()) inputs.push_back(bytes_of(random_input(in.output(), 7)));
    return {s.program, sim::Simulator(target, s.blob).run(inputs)};
}

TEST(Barriers, DroppingImpliedDependenciesNeedsFewerBarriersAndIsNoSlower) {
    const dsl::Graph graph("per_channel", {per_channel_conv()});
    const target::Target target = target::load_target("vpu27");
    Lowered all = lower_by_hand(graph, target, false);
    Lowered reduced = lower_by_hand(graph, target, true);
    EXPECT_EQ(reduced.result.outputs, all.result.outputs);
    EXPECT_LT(reduced.program.barriers.size(), all.program.barriers.size());
    size_t waits_all = 0, waits_reduced = 0;
    for (const BarrierIR &bar : all.program.barriers) waits_all += bar.consumers.size();
    for (const BarrierIR &bar : reduced.program.barriers) waits_reduced += bar.consumers.size();
    EXPECT_LT(waits_reduced, waits_all);
    EXPECT_LE(reduced.result.latency_ns, all.result.latency_ns);
}

// Far fewer physical barriers than the schedules need: the lowering serializes work and the
// results stay bit-exact.
TEST(Barriers, FewPhysicalBarriersStayBitExact) {
    dsl::Layer in = dsl::Layer::input(activation("in", 32, 14, 13));
    dsl::Layer soh = conv3x3("soh", in, 32, 2);
    soh.schedule()
        .distribute("y", 2, dsl::Strategy::SplitOverHeight)
        .split("y", "yo", "yi", 3)
        .prefetch(2)
        .workloads("c", 2)
        .on_dpu();
    dsl::Layer sok = conv3x3("sok", soh, 32, 3);
    sok.schedule()
        .distribute("c", 2, dsl::Strategy::SplitOverKernel)
        .split("x", "xo", "xi", 6)
        .on_dpu();
    for (const char *name : {"vpu27", "vpu20"})
        for (int physical : {1, 2, 5}) {
            SCOPED_TRACE(std::string(name) + " with " + std::to_string(physical) + " barriers");
            compile_and_check(dsl::Graph("few", {sok}), with_barriers(name, physical));
            compile_and_check(dsl::Graph("per_channel", {per_channel_conv()}),
                              with_barriers(name, physical));
        }
}

// Barriers that run out in program order: order_as_run puts the program in the order its tasks
// run (each queue's order kept, starts in order), the mapping in that order needs to order
// fewer tasks, the run is no slower, and the results are the reference's, bit for bit.
TEST(Barriers, OrderAsRunKeepsEachQueuesOrderAndRunsBitExact) {
    // Each lowering by hand gets its own graph: default_schedules gives its layers schedules.
    auto chain = [] {
        dsl::Layer in = dsl::Layer::input(activation("in", 32, 14, 13));
        dsl::Layer first = conv3x3("first", in, 32, 2);
        return dsl::Graph("chain", {conv3x3("second", first, 32, 3)});
    };
    const target::Target target = with_barriers("vpu20", 6);
    auto lower_through_reduction = [&](LoweringState &s) {
        run_through_allocate_cmx(s);
        codegen::allocate_ddr(s);
        codegen::reduce_dependencies(s);
    };
    auto finish = [&](LoweringState &s) {
        codegen::assign_barriers(s);
        codegen::map_physical_barriers(s);
        codegen::verify_barriers(s);
        codegen::assemble(s);
        codegen::verify_blob(s);
        return sim::Simulator(target, s.blob).run({}, sim::Mode::TimingOnly).latency_ns;
    };
    const dsl::Graph plain_graph = chain();
    LoweringState plain(plain_graph, target);
    lower_through_reduction(plain);
    const Program before = plain.program;
    const double plain_ns = finish(plain);

    const dsl::Graph graph = chain();
    LoweringState s(graph, target);
    lower_through_reduction(s);
    codegen::order_as_run(s);
    codegen::verify_tasks(s);
    ASSERT_TRUE(s.run_times.has_value()) << "the 6 barriers did not run out";
    ASSERT_EQ(s.program.tasks.size(), before.tasks.size());
    std::map<Queue, std::vector<std::string>> queues_before, queues_after;
    for (const TaskIR &t : before.tasks) queues_before[queue_of(t)].push_back(t.name);
    for (const TaskIR &t : s.program.tasks) queues_after[queue_of(t)].push_back(t.name);
    EXPECT_EQ(queues_after, queues_before);
    EXPECT_TRUE(std::is_sorted(s.run_times->start_ns.begin(), s.run_times->start_ns.end()));
    EXPECT_NE(s.program.tasks[0].name, std::string()); // the tasks keep their own names
    EXPECT_LE(finish(s), plain_ns);

    std::ostringstream notes;
    codegen::LowerOptions options;
    options.notes = &notes;
    compile_and_check(chain(), target, options);
    EXPECT_NE(notes.str().find("order_as_run: the 6 physical barriers ran out"), std::string::npos)
        << notes.str();
}

} // namespace

namespace {

// Tens of thousands of tasks: the passes keep to memory and time linear in the tasks (times
// the queues). Per round, each of 20 DPUs gets a load, which waits for the DPU task two
// rounds back (its buffer), and a store; every DPU task also waits for the weights of its
// channel, loaded at the start.
TEST(Barriers, LargeProgramsMap) {
    constexpr int kRounds = 800, kDpus = 20, kChannels = 48;
    Builder b;
    std::vector<int> weights;
    for (int c = 0; c < kChannels; ++c) weights.push_back(b.dma(0));
    std::vector<std::vector<int>> dpu(kRounds, std::vector<int>(kDpus));
    for (int r = 0; r < kRounds; ++r)
        for (int d = 0; d < kDpus; ++d) {
            int load = b.dma(0, r >= 2 ? std::vector<int>{dpu[size_t(r - 2)][size_t(d)]}
                                       : std::vector<int>{});
            dpu[size_t(r)][size_t(d)] = b.dpu(d / 5, d % 5, {load, weights[size_t(r % kChannels)]});
            b.dma(0, {dpu[size_t(r)][size_t(d)]});
        }
    ASSERT_GT(b.program.tasks.size(), 48000u);
    for (bool reduce : {true, false}) {
        const target::Target narrow = with_barriers("vpu20", 32);
        LoweringState s(some_graph(), narrow, b.program);
        if (reduce) codegen::reduce_dependencies(s);
        codegen::assign_barriers(s);
        codegen::map_physical_barriers(s);
        codegen::verify_barriers(s);
    }
}

} // namespace
