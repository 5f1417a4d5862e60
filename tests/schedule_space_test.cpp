// The schedule space (codegen/schedule_space.h): every choice it offers, with any of its
// values, is accepted by the resolver; values the resolver refuses are not offered; the
// layer registry's unsplittable dims are never split; and random schedules drawn from it,
// compute_at, store_in and fuse included, give the CPU reference's bytes on the simulator.
#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "algorithms/registry.h"
#include "codegen/loop_nest.h"
#include "codegen/random_schedule.h"
#include "codegen/schedule_space.h"
#include "lowering_fixtures.h"

using namespace vpuc;
using codegen::Choice;
using codegen::ScheduleSpace;
using Kind = dsl::Directive::Kind;

namespace {

const char *const kTargets[] = {"vpu27", "vpu20"};

// One graph per layer kind, the layer under test last; chains for compute_at and store_in.
struct Fixture {
    std::string name;
    dsl::Graph graph;
    dsl::Layer layer;
};

std::vector<Fixture> fixtures() {
    using test::activation;
    std::vector<Fixture> all;
    auto add = [&](const std::string &name, const dsl::Layer &layer) {
        all.push_back({name, dsl::Graph(name, {layer}), layer});
    };
    const dsl::Layer in = dsl::Layer::input(activation("in", 24, 9, 7));
    add("conv3x3", test::conv3x3("conv", in, 40, 1));
    algorithms::PoolParams pool;
    pool.kernel_w = pool.kernel_h = 3;
    pool.pad_left = pool.pad_right = pool.pad_top = pool.pad_bottom = 1;
    add("max_pool", algorithms::max_pool("pool", in, pool));
    add("avg_pool", algorithms::avg_pool("pool", in, pool));
    add("depthwise", algorithms::depthwise_conv2d("dw", in, test::weights(1, 3, 24, 2)));
    const dsl::Layer b = dsl::Layer::input(activation("b", 24, 9, 7));
    const dsl::Quant q = in.output().quant;
    add("eltwise", algorithms::eltwise("add", algorithms::EltwiseOp::Add, in, b, {},
                                       algorithms::quant_eltwise(algorithms::EltwiseOp::Add, q, q,
                                                                 dsl::ElemType::U8, q)));
    algorithms::QuantWeights fc = test::weights(24, 1, 20, 3);
    fc.weights = Halide::Buffer<int8_t>(24, 20); // (K, N)
    fc.weights.fill(3);
    add("matmul", algorithms::matmul("fc", dsl::Layer::input(activation("m", 24, 6, 1)), fc));
    add("sigmoid", algorithms::sigmoid("sig", in));
    add("softmax_c", algorithms::softmax("sm", in, dsl::dims::C));
    add("softmax_h", algorithms::softmax("sm", in, dsl::dims::H));
    algorithms::FloatWeights fw;
    fw.weights = Halide::Buffer<Halide::float16_t>(16, 3, 3, 24);
    fw.weights.fill(Halide::float16_t(0.25f));
    const dsl::Layer in16 = dsl::Layer::input(activation("in16", 16, 8, 6, dsl::ElemType::F16));
    add("conv_f16", algorithms::conv2d("conv", in16, fw));
    // A producer with one consumer: compute_at and store_in(CMX) are legal for it.
    const dsl::Layer producer = test::conv3x3("c1", in, 32, 4);
    dsl::Layer consumer = algorithms::max_pool("p2", producer, pool);
    consumer.schedule().split("y", "yo", "yi", 3).split("c", "co", "ci", 16);
    all.push_back({"conv_into_pool", dsl::Graph("chain", {consumer}), producer});
    return all;
}

const target::Target &target_named(const std::string &name) {
    static const target::Target vpu27 = target::load_target("vpu27");
    static const target::Target vpu20 = target::load_target("vpu20");
    return name == "vpu27" ? vpu27 : vpu20;
}

// A value of each list: the first, the last or one between.
int64_t some(const std::vector<int64_t> &values, std::mt19937 &rng) {
    return values[rng() % values.size()];
}

// `c` made with random values and fresh names.
dsl::Directive make_some(const Choice &c, const ScheduleSpace &space, std::mt19937 &rng) {
    std::vector<std::string> names;
    for (int k = 0; k < c.new_loops; ++k)
        names.push_back(space.new_loop_name("n" + std::to_string(k) + "_"));
    if (c.kind == Kind::Reorder) {
        names = c.loops;
        std::reverse(names.begin(), names.end());
        return c.make({}, names);
    }
    if (c.kind == Kind::Split && c.uneven && rng() % 2) {
        const int64_t extent = space.nest.find(c.loops[0])->extent;
        std::vector<int64_t> extents;
        for (int64_t covered = 0; covered < extent && extents.size() < 3; covered += extents.back())
            extents.push_back(some(c.values[0], rng));
        return c.make(extents, names);
    }
    std::vector<int64_t> numbers;
    for (const std::vector<int64_t> &v : c.values) numbers.push_back(some(v, rng));
    return c.make(numbers, names);
}

// The schedule with `d`, and the space's engine named when it is not.
dsl::Schedule with(const dsl::Schedule &so_far, const dsl::Directive &d, dsl::Engine engine) {
    dsl::Schedule s = so_far;
    s.add(d);
    if (s.engine() != engine) {
        if (engine == dsl::Engine::SHAVE)
            s.on_shave();
        else
            s.on_dpu();
    }
    return s;
}

std::string resolve_error(const Fixture &f, const target::Target &target, const dsl::Schedule &s,
                          int64_t granule) {
    dsl::Layer layer = f.layer;
    const dsl::Schedule saved = layer.schedule();
    layer.schedule() = s;
    std::string error;
    try {
        codegen::resolve_loop_nest(f.graph, layer, target, granule);
    } catch (const dsl::ScheduleError &e) {
        error = e.what();
    }
    layer.schedule() = saved;
    return error;
}

TEST(ScheduleSpace, EveryChoiceOfferedIsAcceptedByTheResolver) {
    std::set<std::string> kinds_offered;
    for (const Fixture &f : fixtures())
        for (const char *target_name : kTargets) {
            const target::Target &target = target_named(target_name);
            const std::vector<dsl::Engine> engines =
                codegen::LayerScheduleSpace(f.graph, f.layer, target).after({}).engines;
            for (dsl::Engine engine : engines) {
                const codegen::LayerScheduleSpace spaces(f.graph, f.layer, target, engine);
                std::mt19937 rng(11);
                // Four directives deep, each drawn from the space after the ones before.
                dsl::Schedule so_far;
                for (int depth = 0; depth < 4; ++depth) {
                    const ScheduleSpace space = spaces.after(so_far);
                    ASSERT_FALSE(space.choices.empty()) << f.name;
                    for (const Choice &c : space.choices) {
                        kinds_offered.insert(dsl::to_string(c.kind));
                        for (int sample = 0; sample < 3; ++sample) {
                            const dsl::Schedule s =
                                with(so_far, make_some(c, space, rng), space.engine);
                            EXPECT_EQ(resolve_error(f, target, s, space.channel_granule), "")
                                << f.name << " on " << target_name << ": " << c.to_string()
                                << " after '" << so_far.to_string() << "'";
                        }
                    }
                    // Deeper: a split, tile, fuse or distribute when there is one.
                    std::vector<const Choice *> shaping;
                    for (const Choice &c : space.choices)
                        if (c.kind == Kind::Split || c.kind == Kind::Tile || c.kind == Kind::Fuse ||
                            c.kind == Kind::Distribute)
                            shaping.push_back(&c);
                    if (shaping.empty()) break;
                    so_far.add(make_some(*shaping[rng() % shaping.size()], space, rng));
                }
            }
        }
    for (const char *kind :
         {"split", "tile", "reorder", "fuse", "unroll", "vectorize", "compute_root", "compute_at",
          "store_in", "on_dpu", "on_shave", "workloads", "distribute", "prefetch", "spill"})
        EXPECT_TRUE(kinds_offered.count(kind)) << kind;
}

// Offered iff the resolver accepts them: the modes that take the layer's input type.
TEST(ScheduleSpace, MpeModesAreThoseThatTakeTheInputType) {
    for (const Fixture &f : fixtures()) {
        if (f.name != "conv3x3" && f.name != "conv_f16") continue;
        for (const char *target_name : kTargets) {
            const target::Target &target = target_named(target_name);
            const ScheduleSpace space = codegen::schedule_space(f.graph, f.layer, target);
            ASSERT_EQ(space.engine, dsl::Engine::DPU);
            std::vector<std::string> offered;
            for (const Choice *c : space.of_kind(Kind::OnDpu)) offered.push_back(c->name);
            EXPECT_TRUE(std::count(offered.begin(), offered.end(), "")) << "the compiler's choice";
            const bool fp16 = f.name == "conv_f16";
            for (const target::MpeMode &m : target.mpe_modes) {
                const bool takes = fp16 ? m.fp16 : m.int8;
                EXPECT_EQ(std::count(offered.begin(), offered.end(), m.name) > 0, takes)
                    << f.name << " on " << target_name << ": " << m.name;
                const dsl::Schedule s = dsl::Schedule().on_dpu(m.name);
                EXPECT_EQ(resolve_error(f, target, s, space.channel_granule).empty(), takes)
                    << m.name;
            }
        }
    }
    // vpu20 has an fp16-only mode and int8-only ones: both directions are exercised.
    const target::Target &vpu20 = target_named("vpu20");
    EXPECT_TRUE(std::any_of(vpu20.mpe_modes.begin(), vpu20.mpe_modes.end(),
                            [](const target::MpeMode &m) { return !m.int8; }));
    EXPECT_TRUE(std::any_of(vpu20.mpe_modes.begin(), vpu20.mpe_modes.end(),
                            [](const target::MpeMode &m) { return !m.fp16; }));
}

// On the DPU, channel task boundaries fall on groups of 16: a split of c by 8 and SOK over
// more tiles than groups are refused, and not offered; on SHAVE, the same split is offered.
TEST(ScheduleSpace, ChannelSplitsOnTheDpuKeepWholeGroups) {
    const Fixture conv = fixtures()[0]; // 40 output channels: groups of 16, 16 and 8
    ASSERT_EQ(conv.name, "conv3x3");
    for (const char *target_name : kTargets) {
        const target::Target &target = target_named(target_name);
        const ScheduleSpace dpu =
            codegen::schedule_space(conv.graph, conv.layer, target, dsl::Engine::DPU);
        ASSERT_EQ(dpu.channel_granule, 16);
        auto factors_of_c = [](const ScheduleSpace &space) {
            for (const Choice *c : space.of_kind(Kind::Split))
                if (c->loops[0] == "c") return c->values[0];
            return std::vector<int64_t>{};
        };
        EXPECT_EQ(factors_of_c(dpu), (std::vector<int64_t>{16, 32, 40, 41}));
        EXPECT_NE(
            resolve_error(conv, target, dsl::Schedule().split("c", "co", "ci", 8).on_dpu(), 16),
            "");
        for (const Choice *c : dpu.of_kind(Kind::Distribute)) {
            if (c->strategy != dsl::Strategy::SplitOverKernel) continue;
            EXPECT_EQ(c->loops[0], "c");
            const int64_t most = std::min<int64_t>(target.tiles, 3); // three channel groups
            EXPECT_EQ(c->values[0].back(), most) << target_name;
            for (int64_t tiles = most + 1; tiles <= target.tiles; ++tiles)
                EXPECT_NE(resolve_error(conv, target,
                                        dsl::Schedule()
                                            .distribute("c", tiles, dsl::Strategy::SplitOverKernel)
                                            .on_dpu(),
                                        16),
                          "");
        }
        const ScheduleSpace shave =
            codegen::schedule_space(conv.graph, conv.layer, target, dsl::Engine::SHAVE);
        const std::vector<int64_t> shave_factors = factors_of_c(shave);
        EXPECT_TRUE(std::count(shave_factors.begin(), shave_factors.end(), 8));
        EXPECT_EQ(shave.of_kind(Kind::Workloads).size(), 0u);
        EXPECT_EQ(dpu.of_kind(Kind::Vectorize).size(), 0u);
    }
}

// A layer the DPU does not run has SHAVE alone; asking for the DPU names the layer.
TEST(ScheduleSpace, EnginesFollowTheDpuMatcher) {
    for (const Fixture &f : fixtures()) {
        const target::Target &target = target_named("vpu27");
        const ScheduleSpace space = codegen::schedule_space(f.graph, f.layer, target);
        const bool shave_only = f.name == "sigmoid" || f.name.rfind("softmax", 0) == 0;
        EXPECT_EQ(space.engines.size(), shave_only ? 1u : 2u) << f.name;
        EXPECT_EQ(space.engines.back(), dsl::Engine::SHAVE);
        if (shave_only) {
            EXPECT_EQ(space.engine, dsl::Engine::SHAVE);
            try {
                codegen::schedule_space(f.graph, f.layer, target, dsl::Engine::DPU);
                ADD_FAILURE() << f.name << ": the DPU offered";
            } catch (const dsl::ScheduleError &e) {
                EXPECT_NE(std::string(e.what()).find("'" + f.layer.name() + "'"), std::string::npos)
                    << e.what();
            }
        }
    }
}

// Softmax reads its whole axis for every output: the space never cuts that axis into tasks
// (the registry's unsplittable dims), and still splits the others.
TEST(ScheduleSpace, SoftmaxAxisIsNeverSplit) {
    for (const Fixture &f : fixtures()) {
        if (f.name.rfind("softmax", 0) != 0) continue;
        const std::string axis = f.name == "softmax_c" ? "c" : "y";
        for (const char *target_name : kTargets) {
            const ScheduleSpace space =
                codegen::schedule_space(f.graph, f.layer, target_named(target_name));
            ASSERT_EQ(space.unsplittable_dims.size(), 1u);
            int splits = 0;
            for (const Choice &c : space.choices) {
                const bool names_axis = std::count(c.loops.begin(), c.loops.end(), axis) > 0;
                const bool cuts =
                    c.kind == Kind::Split || c.kind == Kind::Tile || c.kind == Kind::Workloads ||
                    (c.kind == Kind::Distribute && c.strategy != dsl::Strategy::Clustering);
                EXPECT_FALSE(names_axis && cuts) << f.name << ": " << c.to_string();
                splits += c.kind == Kind::Split;
            }
            EXPECT_EQ(splits, 2) << f.name; // the other two pure loops
        }
    }
}

// compute_at sites are the consumer's task loops; a network output has none, nor CMX.
TEST(ScheduleSpace, ComputeAtSitesAreTheConsumersTaskLoops) {
    const std::vector<Fixture> all = fixtures();
    const Fixture &chain = all.back();
    ASSERT_EQ(chain.name, "conv_into_pool");
    const target::Target &target = target_named("vpu27");
    const ScheduleSpace space = codegen::schedule_space(chain.graph, chain.layer, target);
    std::vector<std::string> sites;
    for (const Choice *c : space.of_kind(Kind::ComputeAt)) {
        EXPECT_EQ(c->name, "p2");
        sites.push_back(c->loops[0]);
    }
    std::sort(sites.begin(), sites.end());
    EXPECT_EQ(sites, (std::vector<std::string>{"co", "yo"}));
    EXPECT_EQ(space.of_kind(Kind::StoreIn).size(), 2u); // CMX and DDR
    // Once computed at the consumer: no distribution, no spill, no DDR, no prefetch ahead.
    const ScheduleSpace inside =
        codegen::schedule_space(chain.graph, chain.layer, target, dsl::Engine::Auto,
                                dsl::Schedule().compute_at("p2", "yo"));
    EXPECT_TRUE(inside.of_kind(Kind::Distribute).empty());
    EXPECT_TRUE(inside.of_kind(Kind::Spill).empty());
    ASSERT_EQ(inside.of_kind(Kind::StoreIn).size(), 1u);
    EXPECT_EQ(inside.of_kind(Kind::StoreIn)[0]->memory, dsl::MemoryLevel::CMX);
    ASSERT_EQ(inside.of_kind(Kind::Prefetch).size(), 1u);
    EXPECT_EQ(inside.of_kind(Kind::Prefetch)[0]->values[0], std::vector<int64_t>{0});
    // The consumer is the network output: it stays at root, in DDR.
    const dsl::Layer consumer = chain.graph.outputs()[0];
    const ScheduleSpace out = codegen::schedule_space(chain.graph, consumer, target,
                                                      dsl::Engine::Auto, consumer.schedule());
    EXPECT_TRUE(out.of_kind(Kind::ComputeAt).empty());
    ASSERT_EQ(out.of_kind(Kind::StoreIn).size(), 1u);
    EXPECT_EQ(out.of_kind(Kind::StoreIn)[0]->memory, dsl::MemoryLevel::DDR);
}

TEST(ScheduleSpace, MakeRefusesValuesNotOffered) {
    const Fixture conv = fixtures()[0];
    const ScheduleSpace space =
        codegen::schedule_space(conv.graph, conv.layer, target_named("vpu27"), dsl::Engine::DPU);
    const Choice *split_c = nullptr;
    for (const Choice *c : space.of_kind(Kind::Split))
        if (c->loops[0] == "c") split_c = c;
    ASSERT_NE(split_c, nullptr);
    EXPECT_THROW(split_c->make({8}, {"co", "ci"}), dsl::ScheduleError);
    EXPECT_THROW(split_c->make({16}, {"co"}), dsl::ScheduleError);
    EXPECT_EQ(split_c->make({16}, {"co", "ci"}).to_string(), "split(c, co, ci, 16)");
}

// Random schedules of two- and three-layer chains, with compute_at, store_in and fuse among
// them, compile, run and give the reference's bytes on both targets.
TEST(ScheduleSpace, RandomSchedulesWithComputeAtStoreInAndFuseMatchTheReference) {
    using test::activation;
    std::set<std::string> compiled_with;
    int compiled = 0;
    for (uint32_t seed = 0; seed < 200 && compiled < 6; ++seed) {
        std::mt19937 rng(seed);
        const dsl::Layer in = dsl::Layer::input(activation("in", 16 + 8 * (seed % 3), 9, 8));
        algorithms::PoolParams pool;
        pool.kernel_w = pool.kernel_h = 3;
        pool.pad_left = pool.pad_right = pool.pad_top = pool.pad_bottom = 1;
        const dsl::Layer c1 = test::conv3x3("c1", in, 24, seed);
        const dsl::Layer p2 = algorithms::max_pool("p2", c1, pool);
        const dsl::Layer s3 = algorithms::sigmoid("s3", p2);
        const std::vector<dsl::Layer> layers = {c1, p2, s3};
        const dsl::Graph graph("chain", {s3});
        const target::Target &target = target_named(kTargets[compiled % 2]);
        std::set<std::string> used;
        for (auto l = layers.rbegin(); l != layers.rend(); ++l) {
            dsl::Layer layer = *l;
            layer.schedule() = codegen::random_schedule(graph, layer, target, rng);
            for (const dsl::Directive &d : layer.schedule().directives())
                used.insert(dsl::to_string(d.kind));
        }
        // Only chains that use one of the three directives not yet compiled.
        bool new_directive = false;
        for (const char *d : {"compute_at", "store_in", "fuse"})
            new_directive |= used.count(d) && !compiled_with.count(d);
        if (!new_directive && compiled >= 3) continue;
        if (!used.count("compute_at") && !used.count("store_in") && !used.count("fuse")) continue;
        std::string schedules;
        for (const dsl::Layer &l : layers)
            schedules += "\n  " + l.name() + ": " + l.schedule().to_string();
        SCOPED_TRACE("seed " + std::to_string(seed) + " on " + target.name + schedules);
        test::compile_and_check(graph, target);
        compiled_with.insert(used.begin(), used.end());
        ++compiled;
    }
    for (const char *d : {"compute_at", "store_in", "fuse"})
        EXPECT_TRUE(compiled_with.count(d)) << d;
}

} // namespace

namespace {

// A layer moving images (a reshape changing the batch) is a view of dense DDR memory, and so
// is its input: neither is offered a place in CMX, and random schedules of every layer around
// it give the reference's values.
TEST(ScheduleSpace, ALayerMovingImagesAndItsInputStayInDdr) {
    dsl::TensorDesc t;
    t.name = "x";
    t.shape = dsl::Shape({4, 7});
    t.order = dsl::DimsOrder::identity(2);
    t.type = dsl::ElemType::F16;
    const dsl::Layer rows = algorithms::sigmoid("rows", dsl::Layer::input(t));
    dsl::Attrs axis0;
    axis0.set("axis", int64_t(0));
    const dsl::Layer flat = algorithms::layer_registry().build("flatten", "flat", {rows}, axis0);
    const dsl::Layer prob = algorithms::softmax("prob", flat, dsl::dims::C);
    const dsl::Graph graph("images", {prob});
    for (const char *target_name : kTargets) {
        const target::Target &target = target_named(target_name);
        for (const dsl::Layer &layer : {rows, flat}) {
            const ScheduleSpace space = codegen::schedule_space(graph, layer, target);
            EXPECT_TRUE(space.of_kind(Kind::ComputeAt).empty()) << layer.name();
            for (const Choice *c : space.of_kind(Kind::StoreIn))
                EXPECT_EQ(c->memory, dsl::MemoryLevel::DDR) << layer.name();
            for (const Choice *c : space.of_kind(Kind::Distribute))
                EXPECT_NE(c->strategy, dsl::Strategy::HKSwitch) << layer.name();
        }
        std::mt19937 rng(11);
        for (int i = 0; i < 4; ++i) {
            const dsl::Graph g = graph.clone();
            for (const dsl::Layer &layer : g.layers()) {
                dsl::Layer handle = layer;
                handle.schedule() = codegen::random_schedule(g, layer, target, rng);
            }
            codegen::CheckOptions check;
            check.inputs = {test::real_halves({7, 1, 1, 4}, -3, 3, uint32_t(i))};
            const codegen::CheckResult r = codegen::check_against_reference(g, target, check);
            EXPECT_TRUE(r.ok()) << target_name << " " << i << "\n" << r.report();
        }
    }
}

} // namespace
