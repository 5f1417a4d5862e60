// Graphs of layers, and the loop nest a schedule resolves to: loops, task regions, tiles, and
// the exact error every illegal schedule gets.
#include <gtest/gtest.h>

#include "codegen/loop_nest.h"
#include "codegen/lower.h"
#include "dsl/graph.h"
#include "vpu_target/target.h"

using namespace vpuc;
using codegen::LoopNest;
using dsl::Layer;
using dsl::Strategy;

namespace {

dsl::TensorDesc act(const std::string &name, int64_t c, int64_t h, int64_t w,
                    dsl::ElemType type = dsl::ElemType::U8) {
    dsl::TensorDesc t;
    t.name = name;
    t.shape = {1, c, h, w};
    t.type = type;
    return t;
}

Layer relu(const std::string &name, const Layer &in) {
    dsl::TensorDesc out = in.output();
    out.name = name;
    return Layer::make("relu", out, {in}, [](const std::vector<Halide::Func> &inputs) {
        const dsl::ActVars &v = dsl::act_vars();
        Halide::Func f;
        f(v.c, v.x, v.y) = Halide::max(inputs[0](v.c, v.x, v.y), 0);
        return f;
    });
}

// in (16 x 20 x 12, C x H x W) -> relu1 -> relu2: extents c 16, x 12, y 20.
class LoopNestTest : public ::testing::Test {
  protected:
    LoopNest resolve(const Layer &layer) {
        dsl::Graph graph("g", {relu2});
        return codegen::resolve_loop_nest(graph, layer, target);
    }
    LoopNest resolve() { return resolve(relu1); }

    // The ScheduleError message resolving relu1 gets.
    std::string error() { return error_of(relu1); }
    std::string error_of(const Layer &layer) { return error_of(layer, dsl::Graph("g", {relu2})); }
    std::string error_of(const Layer &layer, const dsl::Graph &graph, int64_t channel_granule = 1) {
        try {
            codegen::resolve_loop_nest(graph, layer, target, channel_granule);
        } catch (const dsl::ScheduleError &e) {
            return e.what();
        }
        return "no error";
    }
    // As on the DPU: tasks cover whole groups of 16 channels.
    std::string dpu_error_of(const Layer &layer, const dsl::Graph &graph) {
        return error_of(layer, graph, 16);
    }

    target::Target target = target::load_target("vpu27");
    Layer in = Layer::input(act("in", 16, 20, 12));
    Layer relu1 = relu("relu1", in);
    Layer relu2 = relu("relu2", relu1);
    dsl::Schedule &s1 = relu1.schedule();
};

std::vector<std::string> loop_names(const LoopNest &nest) {
    std::vector<std::string> names;
    for (const codegen::Loop &l : nest.loops) names.push_back(l.name);
    return names;
}

// "region @tile" per task, in execution order.
std::vector<std::string> tasks(const LoopNest &nest) {
    std::vector<std::string> out;
    for (const codegen::Task &t : nest.tasks())
        out.push_back(t.region.to_string() + " @" + std::to_string(t.tile));
    return out;
}

using Names = std::vector<std::string>;

} // namespace

// --- graphs ----------------------------------------------------------------------------------

TEST(Graph, CollectsProducersBeforeConsumers) {
    Layer a = Layer::input(act("a", 16, 4, 4)), b = Layer::input(act("b", 16, 4, 4));
    Layer ra = relu("ra", a), rb = relu("rb", b);
    Layer sum =
        Layer::make("add", act("sum", 16, 4, 4), {ra, rb}, [](const std::vector<Halide::Func> &in) {
            const dsl::ActVars &v = dsl::act_vars();
            Halide::Func f;
            f(v.c, v.x, v.y) = in[0](v.c, v.x, v.y) + in[1](v.c, v.x, v.y);
            return f;
        });
    Layer tail = relu("tail", ra);
    dsl::Graph g("g", {sum, tail});
    Names inputs, layers;
    for (const Layer &l : g.inputs()) inputs.push_back(l.name());
    for (const Layer &l : g.layers()) layers.push_back(l.name());
    EXPECT_EQ(inputs, (Names{"a", "b"}));
    EXPECT_EQ(layers, (Names{"ra", "rb", "sum", "tail"}));
    Names consumers;
    for (const Layer &l : g.consumers(ra)) consumers.push_back(l.name());
    EXPECT_EQ(consumers, (Names{"sum", "tail"}));
    EXPECT_TRUE(g.find("rb").same_as(rb));
    EXPECT_TRUE(g.find("a").is_input());
    EXPECT_EQ(g.find("sum").op(), "add");
}

TEST(Graph, FindListsKnownNames) {
    Layer a = Layer::input(act("a", 16, 4, 4));
    dsl::Graph g("g", {relu("r", a)});
    try {
        g.find("z");
        ADD_FAILURE() << "no error";
    } catch (const dsl::GraphError &e) {
        EXPECT_STREQ(e.what(), "graph 'g': no layer 'z' (layers: a, r)");
    }
}

TEST(Graph, RejectsDuplicateNames) {
    Layer a = Layer::input(act("a", 16, 4, 4));
    try {
        dsl::Graph g("g", {relu("r", a), relu("r", a)});
        ADD_FAILURE() << "no error";
    } catch (const dsl::GraphError &e) {
        EXPECT_STREQ(e.what(), "graph 'g': two layers are named 'r' (layer names must be unique)");
    }
}

TEST(Graph, LayerKeepsItsSchedule) {
    Layer a = Layer::input(act("a", 16, 4, 4));
    Layer r = relu("r", a);
    Layer copy = r;
    copy.schedule().spill();
    EXPECT_EQ(r.schedule(), dsl::Schedule().spill());
    EXPECT_EQ(a.name(), "a");
    EXPECT_EQ(a.op(), "input");
    EXPECT_THROW(Layer().name(), std::logic_error);
}

// --- loops and task regions --------------------------------------------------------------------

TEST_F(LoopNestTest, DefaultIsOneTaskOverEverything) {
    LoopNest nest = resolve();
    EXPECT_EQ(loop_names(nest), (Names{"c", "x", "y"}));
    EXPECT_EQ(tasks(nest), (Names{"c[0,16) x[0,12) y[0,20) @0"}));
    EXPECT_TRUE(nest.compute_root);
    EXPECT_EQ(nest.engine, dsl::Engine::Auto);
    EXPECT_TRUE(nest.task_loop_names().empty());
}

TEST_F(LoopNestTest, SplitWithANonDividingFactor) {
    s1.split("y", "yo", "yi", 8);
    LoopNest nest = resolve();
    EXPECT_EQ(loop_names(nest), (Names{"c", "x", "yi", "yo"}));
    EXPECT_EQ(nest.find("yo")->extent, 3);
    EXPECT_TRUE(nest.find("yo")->task_loop);
    EXPECT_EQ(nest.find("yi")->extent, 8);
    EXPECT_FALSE(nest.find("yi")->task_loop);
    EXPECT_EQ(tasks(nest), (Names{"c[0,16) x[0,12) y[0,8) @0", "c[0,16) x[0,12) y[8,16) @0",
                                  "c[0,16) x[0,12) y[16,20) @0"}));
}

TEST_F(LoopNestTest, SplitFactorLargerThanTheExtent) {
    s1.split("c", "co", "ci", 64);
    LoopNest nest = resolve();
    EXPECT_EQ(nest.find("ci")->extent, 16);
    EXPECT_EQ(nest.find("co")->extent, 1);
    EXPECT_EQ(tasks(nest), (Names{"c[0,16) x[0,12) y[0,20) @0"}));
}

// An uneven split: one task per listed extent, the last one repeating until y is covered.
TEST_F(LoopNestTest, UnevenSplit) {
    s1.split("y", "yo", "yi", {2, 8, 4});
    LoopNest nest = resolve();
    EXPECT_EQ(nest.find("yo")->extent, 5);
    EXPECT_EQ(nest.find("yi")->extent, 8); // the largest piece; smaller ones clamp it
    EXPECT_EQ(tasks(nest), (Names{"c[0,16) x[0,12) y[0,2) @0", "c[0,16) x[0,12) y[2,10) @0",
                                  "c[0,16) x[0,12) y[10,14) @0", "c[0,16) x[0,12) y[14,18) @0",
                                  "c[0,16) x[0,12) y[18,20) @0"}));
    // One extent is a split by that factor.
    s1 = dsl::Schedule().split("y", "yo", "yi", std::vector<int64_t>{8});
    EXPECT_EQ(tasks(resolve()), (Names{"c[0,16) x[0,12) y[0,8) @0", "c[0,16) x[0,12) y[8,16) @0",
                                       "c[0,16) x[0,12) y[16,20) @0"}));
}

// Inside each piece of an uneven split, a nested split starts afresh and clamps to the piece;
// distributing first makes the pieces per tile.
TEST_F(LoopNestTest, UnevenSplitNestedAndDistributed) {
    s1.split("y", "yo", "yi", {4, 12, 4}).split("yi", "yio", "yii", 8);
    EXPECT_EQ(tasks(resolve()),
              (Names{"c[0,16) x[0,12) y[0,4) @0", "c[0,16) x[0,12) y[4,12) @0",
                     "c[0,16) x[0,12) y[12,16) @0", "c[0,16) x[0,12) y[16,20) @0"}));
    s1 = dsl::Schedule()
             .distribute("y", 2, Strategy::SplitOverHeight)
             .split("y", "yo", "yi", {2, 6, 2});
    EXPECT_EQ(tasks(resolve()),
              (Names{"c[0,16) x[0,12) y[0,2) @0", "c[0,16) x[0,12) y[2,8) @0",
                     "c[0,16) x[0,12) y[8,10) @0", "c[0,16) x[0,12) y[10,12) @1",
                     "c[0,16) x[0,12) y[12,18) @1", "c[0,16) x[0,12) y[18,20) @1"}));
}

TEST_F(LoopNestTest, UnevenSplitWithMoreExtentsThanItNeeds) {
    s1.split("y", "yo", "yi", {8, 12, 4});
    EXPECT_EQ(error(), "layer 'relu1': split(y, yo, yi, {8, 12, 4}): the first 2 extents already "
                       "cover the 20 iterations of 'y' (legal: at most 2 extents)");
}

TEST_F(LoopNestTest, UnevenSplitWhoseFirstExtentCoversTheLoop) {
    s1.split("y", "yo", "yi", {20, 4});
    EXPECT_EQ(error(), "layer 'relu1': split(y, yo, yi, {20, 4}): the first extent already covers "
                       "the 20 iterations of 'y' (legal: at most 1 extent)");
}

TEST_F(LoopNestTest, UnevenSplitExtentNotPositive) {
    s1.split("y", "yo", "yi", {4, 0});
    EXPECT_EQ(error(),
              "layer 'relu1': split(y, yo, yi, {4, 0}): extent 0 is not positive (legal: >= 1)");
}

TEST_F(LoopNestTest, SplitMayReuseTheSplitName) {
    s1.split("y", "y", "yi", 10);
    EXPECT_EQ(resolve().task_loop_names(), (Names{"y"}));
}

// Splitting a task loop keeps both halves task loops; an iteration past the end is no task.
TEST_F(LoopNestTest, SplitOfATaskLoop) {
    s1.split("y", "yo", "yi", 8).split("yo", "yoo", "yoi", 2);
    LoopNest nest = resolve();
    EXPECT_EQ(nest.task_loop_names(), (Names{"yoo", "yoi"}));
    EXPECT_EQ(tasks(nest), (Names{"c[0,16) x[0,12) y[0,8) @0", "c[0,16) x[0,12) y[8,16) @0",
                                  "c[0,16) x[0,12) y[16,20) @0"}));
}

// Splitting the inner part clamps to the outer iteration: the last row block stays [16, 20).
TEST_F(LoopNestTest, NestedNonDividingSplitsNeverRecompute) {
    s1.split("y", "yo", "yi", 8).split("yi", "yio", "yii", 3);
    LoopNest nest = resolve();
    EXPECT_EQ(loop_names(nest), (Names{"c", "x", "yii", "yio", "yo"}));
    EXPECT_EQ(tasks(nest), (Names{"c[0,16) x[0,12) y[0,3) @0", "c[0,16) x[0,12) y[3,6) @0",
                                  "c[0,16) x[0,12) y[6,8) @0", "c[0,16) x[0,12) y[8,11) @0",
                                  "c[0,16) x[0,12) y[11,14) @0", "c[0,16) x[0,12) y[14,16) @0",
                                  "c[0,16) x[0,12) y[16,19) @0", "c[0,16) x[0,12) y[19,20) @0"}));
}

// Task loops end up outside the loops that run inside a task, in Halide's nesting order.
TEST_F(LoopNestTest, TaskLoopsAreMovedOutside) {
    s1.split("c", "co", "ci", 8).split("y", "yo", "yi", 10);
    LoopNest nest = resolve();
    EXPECT_EQ(loop_names(nest), (Names{"ci", "x", "yi", "co", "yo"}));
    EXPECT_EQ(tasks(nest), (Names{"c[0,8) x[0,12) y[0,10) @0", "c[8,16) x[0,12) y[0,10) @0",
                                  "c[0,8) x[0,12) y[10,20) @0", "c[8,16) x[0,12) y[10,20) @0"}));
}

TEST_F(LoopNestTest, Tile) {
    s1.tile("x", "y", "xo", "yo", "xi", "yi", 8, 8);
    LoopNest nest = resolve();
    EXPECT_EQ(loop_names(nest), (Names{"c", "xi", "yi", "xo", "yo"}));
    EXPECT_EQ(tasks(nest), (Names{"c[0,16) x[0,8) y[0,8) @0", "c[0,16) x[8,12) y[0,8) @0",
                                  "c[0,16) x[0,8) y[8,16) @0", "c[0,16) x[8,12) y[8,16) @0",
                                  "c[0,16) x[0,8) y[16,20) @0", "c[0,16) x[8,12) y[16,20) @0"}));
}

// reorder permutes the named loops among the positions they hold; c stays innermost.
TEST_F(LoopNestTest, Reorder) {
    s1.tile("x", "y", "xo", "yo", "xi", "yi", 8, 8).reorder({"yo", "xo"});
    LoopNest nest = resolve();
    EXPECT_EQ(loop_names(nest), (Names{"c", "xi", "yi", "yo", "xo"}));
    EXPECT_EQ(tasks(nest), (Names{"c[0,16) x[0,8) y[0,8) @0", "c[0,16) x[0,8) y[8,16) @0",
                                  "c[0,16) x[0,8) y[16,20) @0", "c[0,16) x[8,12) y[0,8) @0",
                                  "c[0,16) x[8,12) y[8,16) @0", "c[0,16) x[8,12) y[16,20) @0"}));
}

TEST_F(LoopNestTest, ReorderOfPureLoops) {
    s1.reorder({"y", "c"});
    EXPECT_EQ(loop_names(resolve()), (Names{"y", "x", "c"}));
}

TEST_F(LoopNestTest, FuseTaskLoops) {
    s1.tile("x", "y", "xo", "yo", "xi", "yi", 8, 8).fuse("xo", "yo", "t");
    LoopNest nest = resolve();
    EXPECT_EQ(loop_names(nest), (Names{"c", "xi", "yi", "t"}));
    EXPECT_EQ(nest.find("t")->extent, 6);
    EXPECT_EQ(tasks(nest), (Names{"c[0,16) x[0,8) y[0,8) @0", "c[0,16) x[8,12) y[0,8) @0",
                                  "c[0,16) x[0,8) y[8,16) @0", "c[0,16) x[8,12) y[8,16) @0",
                                  "c[0,16) x[0,8) y[16,20) @0", "c[0,16) x[8,12) y[16,20) @0"}));
}

TEST_F(LoopNestTest, FuseLoopsInsideATask) {
    s1.split("y", "yo", "yi", 10).fuse("c", "x", "cx");
    LoopNest nest = resolve();
    EXPECT_EQ(loop_names(nest), (Names{"cx", "yi", "yo"}));
    EXPECT_EQ(nest.find("cx")->extent, 192);
    EXPECT_EQ(tasks(nest), (Names{"c[0,16) x[0,12) y[0,10) @0", "c[0,16) x[0,12) y[10,20) @0"}));
}

// A fused task loop can be split further; the fused index maps back to (xo, yo).
TEST_F(LoopNestTest, SplitOfAFusedTaskLoop) {
    s1.tile("x", "y", "xo", "yo", "xi", "yi", 8, 8).fuse("xo", "yo", "t").split("t", "to", "ti", 4);
    LoopNest nest = resolve();
    EXPECT_EQ(nest.task_loop_names(), (Names{"to", "ti"}));
    EXPECT_EQ(tasks(nest).size(), 6u);
    EXPECT_EQ(tasks(nest)[5], "c[0,16) x[8,12) y[16,20) @0");
}

TEST_F(LoopNestTest, DistributeSplitOverHeight) {
    s1.distribute("y", 2, Strategy::SplitOverHeight);
    LoopNest nest = resolve();
    EXPECT_EQ(loop_names(nest), (Names{"c", "x", "y", "y.tile"}));
    const codegen::Loop *tile = nest.find("y.tile");
    EXPECT_TRUE(tile->task_loop);
    EXPECT_EQ(tile->tiles, 2);
    EXPECT_EQ(tile->strategy, Strategy::SplitOverHeight);
    EXPECT_EQ(nest.find("y")->extent, 10);
    EXPECT_FALSE(nest.find("y")->task_loop);
    EXPECT_EQ(tasks(nest), (Names{"c[0,16) x[0,12) y[0,10) @0", "c[0,16) x[0,12) y[10,20) @1"}));
}

// Chunks differ by at most one, larger first.
TEST_F(LoopNestTest, DistributeNonDividing) {
    in = Layer::input(act("in", 16, 5, 12));
    relu1 = relu("relu1", in);
    relu2 = relu("relu2", relu1);
    relu1.schedule().distribute("y", 2, Strategy::SplitOverHeight);
    EXPECT_EQ(tasks(resolve()), (Names{"c[0,16) x[0,12) y[0,3) @0", "c[0,16) x[0,12) y[3,5) @1"}));
}

// Row blocks of 8 (three of them) over two tiles: tile 0 gets two blocks, tile 1 one.
TEST_F(LoopNestTest, DistributeATaskLoop) {
    s1.split("y", "yo", "yi", 8).distribute("yo", 2, Strategy::SplitOverHeight);
    LoopNest nest = resolve();
    EXPECT_EQ(nest.task_loop_names(), (Names{"yo.tile", "yo"}));
    EXPECT_EQ(tasks(nest), (Names{"c[0,16) x[0,12) y[0,8) @0", "c[0,16) x[0,12) y[8,16) @0",
                                  "c[0,16) x[0,12) y[16,20) @1"}));
}

// Each tile's rows are split into tasks of 4 rows within the tile's chunk.
TEST_F(LoopNestTest, SplitAfterDistribute) {
    s1.distribute("y", 2, Strategy::SplitOverHeight).split("y", "yo", "yi", 4);
    EXPECT_EQ(tasks(resolve()),
              (Names{"c[0,16) x[0,12) y[0,4) @0", "c[0,16) x[0,12) y[4,8) @0",
                     "c[0,16) x[0,12) y[8,10) @0", "c[0,16) x[0,12) y[10,14) @1",
                     "c[0,16) x[0,12) y[14,18) @1", "c[0,16) x[0,12) y[18,20) @1"}));
}

TEST_F(LoopNestTest, DistributeSplitOverKernel) {
    s1.distribute("c", 2, Strategy::SplitOverKernel);
    EXPECT_EQ(tasks(resolve()), (Names{"c[0,8) x[0,12) y[0,20) @0", "c[8,16) x[0,12) y[0,20) @1"}));
}

// On the DPU (channel granule 16), tasks start and end on whole groups of 16 channels.
TEST_F(LoopNestTest, ChannelsOnTheDpuSplitInWholeGroups) {
    Layer wide = relu("wide", Layer::input(act("in", 40, 4, 4)));
    const dsl::Graph graph("g", {wide});
    wide.schedule().split("c", "co", "ci", 16);
    EXPECT_EQ(tasks(codegen::resolve_loop_nest(graph, wide, target, 16)),
              (Names{"c[0,16) x[0,4) y[0,4) @0", "c[16,32) x[0,4) y[0,4) @0",
                     "c[32,40) x[0,4) y[0,4) @0"}));
    // An outer loop's iterations are whole groups already: any factor keeps them whole.
    wide.schedule() = dsl::Schedule().split("c", "co", "ci", 16).split("co", "a", "b", 2);
    EXPECT_EQ(tasks(codegen::resolve_loop_nest(graph, wide, target, 16)).size(), 3u);
    // SOK cuts whole groups: 3 groups over 2 tiles are 2 and 1.
    wide.schedule() = dsl::Schedule().distribute("c", 2, Strategy::SplitOverKernel);
    EXPECT_EQ(tasks(codegen::resolve_loop_nest(graph, wide, target, 16)),
              (Names{"c[0,32) x[0,4) y[0,4) @0", "c[32,40) x[0,4) y[0,4) @1"}));
}

TEST_F(LoopNestTest, ChannelSplitOnTheDpuThatCutsAGroup) {
    Layer wide = relu("wide", Layer::input(act("in", 40, 4, 4)));
    const dsl::Graph graph("g", {wide});
    wide.schedule().split("c", "co", "ci", 8);
    EXPECT_EQ(
        dpu_error_of(wide, graph),
        "layer 'wide': split(c, co, ci, 8): the DPU computes output channels in groups of 16, "
        "so tasks must start and end on them: factor 8 of 'c' (1 channel(s) per iteration) "
        "puts a task boundary at 8 (legal: multiples of 16, or 40 and more; or on_shave())");
    // An uneven split is checked piece by piece.
    wide.schedule() = dsl::Schedule().split("c", "co", "ci", {16, 8, 16});
    EXPECT_EQ(
        dpu_error_of(wide, graph),
        "layer 'wide': split(c, co, ci, {16, 8, 16}): the DPU computes output channels in groups "
        "of 16, so tasks must start and end on them: a split of 'c' (1 channel(s) per "
        "iteration) puts a task boundary at 24 (legal: multiples of 16, or 40 and more; or "
        "on_shave())");
    wide.schedule() = dsl::Schedule().split("c", "co", "ci", {32, 8});
    EXPECT_EQ(dpu_error_of(wide, graph), "no error");
    // The inner part of a split keeps one channel per iteration.
    wide.schedule() = dsl::Schedule().split("c", "co", "ci", 32).split("ci", "a", "b", 24);
    EXPECT_NE(dpu_error_of(wide, graph).find("factor 24 of 'ci'"), std::string::npos);
    // Without the DPU's granule, any factor.
    wide.schedule() = dsl::Schedule().split("c", "co", "ci", 8);
    EXPECT_EQ(error_of(wide, graph), "no error");
}

TEST_F(LoopNestTest, SplitOverKernelOnTheDpuNeedsAGroupPerTile) {
    relu1.schedule().distribute("c", 2, Strategy::SplitOverKernel);
    EXPECT_EQ(dpu_error_of(relu1, dsl::Graph("g", {relu2})),
              "layer 'relu1': distribute(c, 2, SOK): 2 tiles is outside 1..1 (vpu27 has 2 "
              "NCE tiles, 'c' has extent 16, cut in groups of 16 for the DPU's channel "
              "alignment)");
}

TEST_F(LoopNestTest, WorkloadsOnTheDpuCoverWholeChannelGroups) {
    relu1.schedule().on_dpu().workloads("c", 2);
    EXPECT_EQ(dpu_error_of(relu1, dsl::Graph("g", {relu2})),
              "layer 'relu1': workloads(c, 2): count 2 is outside 1..1 (the extent of 'c', in "
              "groups of 16 channels)");
}

TEST_F(LoopNestTest, DistributeClusteringReplicates) {
    s1.split("y", "yo", "yi", 32).distribute("yo", 2, Strategy::Clustering);
    LoopNest nest = resolve();
    EXPECT_EQ(nest.find("yo")->extent, 1);
    EXPECT_EQ(tasks(nest), (Names{"c[0,16) x[0,12) y[0,20) @0", "c[0,16) x[0,12) y[0,20) @1"}));
}

TEST_F(LoopNestTest, DistributeHKSwitchSplitsLikeSOHAndKeepsTheOutputInCmx) {
    s1.distribute("y", 2, Strategy::HKSwitch);
    LoopNest nest = resolve();
    EXPECT_EQ(nest.find("y.tile")->strategy, Strategy::HKSwitch);
    EXPECT_EQ(tasks(nest), (Names{"c[0,16) x[0,12) y[0,10) @0", "c[0,16) x[0,12) y[10,20) @1"}));
    EXPECT_TRUE(nest.broadcast);
    relu1.schedule() = dsl::Schedule().distribute("y", 2, Strategy::SplitOverHeight);
    EXPECT_FALSE(resolve().broadcast);
}

TEST_F(LoopNestTest, PlacementEngineAndDataMovement) {
    relu2.schedule().split("y", "yo", "yi", 4);
    s1.compute_at("relu2", "yo")
        .store_in(dsl::MemoryLevel::CMX)
        .on_dpu("CUBOID_8x16")
        .workloads("c", 2)
        .prefetch(0);
    LoopNest nest = resolve();
    EXPECT_FALSE(nest.compute_root);
    EXPECT_EQ(nest.compute_at_layer, "relu2");
    EXPECT_EQ(nest.compute_at_loop, "yo");
    EXPECT_EQ(nest.store, dsl::MemoryLevel::CMX);
    EXPECT_EQ(nest.engine, dsl::Engine::DPU);
    EXPECT_EQ(nest.mpe_mode, "CUBOID_8x16");
    EXPECT_EQ(nest.workload_loop, "c");
    EXPECT_EQ(nest.workloads, 2);
    EXPECT_EQ(nest.prefetch, 0);
    relu1.schedule() = dsl::Schedule().store_in(dsl::MemoryLevel::DDR).spill();
    nest = resolve();
    EXPECT_TRUE(nest.compute_root);
    EXPECT_EQ(nest.store, dsl::MemoryLevel::DDR);
    EXPECT_TRUE(nest.spill);
}

TEST_F(LoopNestTest, LaterComputeRootWins) {
    relu2.schedule().split("y", "yo", "yi", 4);
    s1.compute_at("relu2", "yo").prefetch(2).compute_root();
    LoopNest nest = resolve();
    EXPECT_TRUE(nest.compute_root);
    EXPECT_EQ(nest.compute_at_layer, "");
    EXPECT_EQ(nest.prefetch, 2);
}

// The engine is the schedule's last engine directive, wherever unroll/vectorize stand.
TEST_F(LoopNestTest, ShaveKernelLoops) {
    s1.vectorize("c", 16).unroll("x").on_dpu().on_shave();
    LoopNest nest = resolve();
    EXPECT_EQ(nest.engine, dsl::Engine::SHAVE);
    EXPECT_EQ(nest.mpe_mode, "");
    EXPECT_EQ(nest.find("c")->vector_width, 16);
    EXPECT_TRUE(nest.find("x")->unrolled);
}

TEST_F(LoopNestTest, RegionPrints) {
    codegen::Region r{{{{0, 64}, {0, 56}, {8, 16}}}};
    EXPECT_EQ(r.to_string(), "c[0,64) x[0,56) y[8,16)");
    EXPECT_EQ(r.elements(), 64 * 56 * 8);
}

TEST_F(LoopNestTest, RejectsOutputsThatAreNotActivations) {
    dsl::TensorDesc t = act("big", 16, 4, 4);
    t.shape = {2, 16, 0, 4};
    Layer empty = Layer::input(t);
    dsl::Graph g("g", {empty});
    try {
        codegen::resolve_loop_nest(g, empty, target);
        ADD_FAILURE() << "no error";
    } catch (const codegen::LoweringError &e) {
        EXPECT_STREQ(e.what(),
                     "layer 'big': a loop nest needs an NxCxHxW output with N, C, H, W > 0 "
                     "(got 2x16x0x4)");
    }
}

// --- errors: one test per rule, exact messages -------------------------------------------------

TEST_F(LoopNestTest, SplitOfAMissingLoop) {
    s1.split("z", "zo", "zi", 8);
    EXPECT_EQ(error(), "layer 'relu1': split(z, zo, zi, 8): no loop 'z' (loops: c, x, y)");
}

TEST_F(LoopNestTest, SplitFactorNotPositive) {
    s1.split("y", "yo", "yi", 0);
    EXPECT_EQ(error(),
              "layer 'relu1': split(y, yo, yi, 0): factor 0 is not positive (legal: >= 1)");
}

TEST_F(LoopNestTest, SplitNameTaken) {
    s1.split("y", "x", "yi", 8);
    EXPECT_EQ(error(),
              "layer 'relu1': split(y, x, yi, 8): new loop name 'x' is taken (taken: c, x)");
}

TEST_F(LoopNestTest, SplitNamesMustDiffer) {
    s1.split("y", "a", "a", 8);
    EXPECT_EQ(error(), "layer 'relu1': split(y, a, a, 8): new loop name 'a' is given twice");
}

TEST_F(LoopNestTest, SplitNameNotAnIdentifier) {
    s1.split("y", "y.o", "yi", 8);
    EXPECT_EQ(error(), "layer 'relu1': split(y, y.o, yi, 8): new loop name 'y.o' is not an "
                       "identifier (legal: letters, digits and '_')");
}

TEST_F(LoopNestTest, SplitOfAFusedLoopInsideATask) {
    s1.fuse("c", "x", "cx").split("cx", "o", "i", 4);
    EXPECT_EQ(error(), "layer 'relu1': split(cx, o, i, 4): 'cx' is a fused loop inside a task; its "
                       "parts would not be boxes (split before fusing)");
}

TEST_F(LoopNestTest, SplitOfTheTileLoop) {
    s1.distribute("y", 2, Strategy::SplitOverHeight).split("y.tile", "a", "b", 1);
    EXPECT_EQ(error(), "layer 'relu1': split(y.tile, a, b, 1): loop 'y.tile' spreads tasks over "
                       "NCE tiles; it cannot be split, fused or distributed");
}

TEST_F(LoopNestTest, SplitOfAVectorizedLoop) {
    s1.on_shave().vectorize("x", 4).split("x", "xo", "xi", 4);
    EXPECT_EQ(error(), "layer 'relu1': split(x, xo, xi, 4): loop 'x' is vectorized (split, fuse "
                       "and distribute come before unroll and vectorize)");
}

TEST_F(LoopNestTest, FuseOfAnUnrolledLoop) {
    s1.on_shave().unroll("c").fuse("c", "x", "cx");
    EXPECT_EQ(error(), "layer 'relu1': fuse(c, x, cx): loop 'c' is unrolled (split, fuse and "
                       "distribute come before unroll and vectorize)");
}

TEST_F(LoopNestTest, TileOfOneLoopTwice) {
    s1.tile("x", "x", "xo", "yo", "xi", "yi", 8, 8);
    EXPECT_EQ(error(), "layer 'relu1': tile(x, x, xo, yo, xi, yi, 8, 8): tile needs two different "
                       "loops (got 'x' twice)");
}

TEST_F(LoopNestTest, TileOfAMissingLoop) {
    s1.tile("x", "z", "xo", "zo", "xi", "zi", 8, 8);
    EXPECT_EQ(error(), "layer 'relu1': tile(x, z, xo, zo, xi, zi, 8, 8): no loop 'z' (loops: c, "
                       "xi, xo, y)");
}

TEST_F(LoopNestTest, ReorderOfAMissingLoop) {
    s1.reorder({"x", "z"});
    EXPECT_EQ(error(), "layer 'relu1': reorder(x, z): no loop 'z' (loops: c, x, y)");
}

TEST_F(LoopNestTest, ReorderNamesALoopTwice) {
    s1.reorder({"x", "y", "x"});
    EXPECT_EQ(error(), "layer 'relu1': reorder(x, y, x): loop 'x' is named twice (each loop at "
                       "most once; loops: c, x, y)");
}

TEST_F(LoopNestTest, FuseOfLoopsThatAreNotAdjacent) {
    s1.fuse("c", "y", "cy");
    EXPECT_EQ(error(), "layer 'relu1': fuse(c, y, cy): 'c' is not directly inside 'y' (loops, "
                       "innermost first: c, x, y)");
}

TEST_F(LoopNestTest, FuseOfATaskLoopAndAnotherLoop) {
    s1.split("y", "yo", "yi", 8).fuse("yi", "yo", "t");
    EXPECT_EQ(error(), "layer 'relu1': fuse(yi, yo, t): 'yo' is a task loop but 'yi' is not (fuse "
                       "two task loops or two loops inside a task)");
}

TEST_F(LoopNestTest, FuseNameTaken) {
    s1.fuse("c", "x", "y");
    EXPECT_EQ(error(), "layer 'relu1': fuse(c, x, y): new loop name 'y' is taken (taken: y)");
}

TEST_F(LoopNestTest, UnrollWithoutOnShave) {
    s1.on_dpu().unroll("x");
    EXPECT_EQ(error(), "layer 'relu1': unroll(x): unroll and vectorize schedule SHAVE kernels "
                       "(legal only with on_shave())");
}

TEST_F(LoopNestTest, UnrollOfATaskLoop) {
    s1.on_shave().split("y", "yo", "yi", 8).unroll("yo");
    EXPECT_EQ(error(), "layer 'relu1': unroll(yo): 'yo' is a task loop (loops inside a task: c, x, "
                       "yi)");
}

TEST_F(LoopNestTest, VectorizeWidthNotAPowerOfTwo) {
    s1.on_shave().vectorize("c", 3);
    EXPECT_EQ(error(),
              "layer 'relu1': vectorize(c, 3): width 3 is not a power of two (legal: 2, 4, "
              "8, 16, ...)");
    relu1.schedule() = dsl::Schedule().on_shave().vectorize("c", 1);
    EXPECT_EQ(error(),
              "layer 'relu1': vectorize(c, 1): width 1 is not a power of two (legal: 2, 4, "
              "8, 16, ...)");
}

TEST_F(LoopNestTest, ComputeAtALayerThatIsNotAConsumer) {
    s1.compute_at("in", "y");
    EXPECT_EQ(error(), "layer 'relu1': compute_at(in, y): 'in' does not consume this layer "
                       "(consumers: relu2)");
    relu2.schedule().compute_at("relu1", "y");
    EXPECT_EQ(error_of(relu2), "layer 'relu2': compute_at(relu1, y): 'relu1' does not consume this "
                               "layer (consumers: none)");
}

TEST_F(LoopNestTest, ComputeAtALoopThatIsNotATaskLoop) {
    relu2.schedule().split("y", "yo", "yi", 8);
    s1.compute_at("relu2", "yi");
    EXPECT_EQ(error(), "layer 'relu1': compute_at(relu2, yi): 'yi' is not a task loop of 'relu2' "
                       "(task loops: yo; or compute_root())");
}

TEST_F(LoopNestTest, ComputeAtAConsumerWithoutTaskLoops) {
    s1.compute_at("relu2", "y");
    EXPECT_EQ(error(), "layer 'relu1': compute_at(relu2, y): 'y' is not a task loop of 'relu2' "
                       "(task loops: none; or compute_root())");
}

TEST_F(LoopNestTest, ComputeAtReportsTheConsumersOwnError) {
    relu2.schedule().split("z", "zo", "zi", 8);
    s1.compute_at("relu2", "zo");
    EXPECT_EQ(error(), "layer 'relu2': split(z, zo, zi, 8): no loop 'z' (loops: c, x, y)");
}

TEST_F(LoopNestTest, ComputeAtWithDistribute) {
    relu2.schedule().split("y", "yo", "yi", 4);
    s1.distribute("y", 2, dsl::Strategy::SplitOverHeight).compute_at("relu2", "yo");
    EXPECT_EQ(error(), "layer 'relu1': distribute(y, 2, SOH): a layer computed at 'relu2' runs on "
                       "that layer's tiles (legal: distribute the consumer, or compute_root())");
}

TEST_F(LoopNestTest, ComputeAtWithPrefetch) {
    relu2.schedule().split("y", "yo", "yi", 4);
    s1.compute_at("relu2", "yo").prefetch(1);
    EXPECT_EQ(error(), "layer 'relu1': prefetch(1): a layer computed at 'relu2' is computed when "
                       "its consumer loads its inputs, so the consumer's prefetch covers it "
                       "(legal: prefetch(0), or compute_root())");
}

TEST_F(LoopNestTest, StoreInCmxAtRootKeepsTheOutputInCmx) {
    s1.distribute("c", 2, Strategy::SplitOverKernel).store_in(dsl::MemoryLevel::CMX);
    EXPECT_TRUE(resolve().broadcast);
    relu2.schedule().split("y", "yo", "yi", 4);
    relu1.schedule() = dsl::Schedule().store_in(dsl::MemoryLevel::CMX).compute_at("relu2", "yo");
    EXPECT_FALSE(resolve().broadcast); // computed at its consumer: in that consumer's CMX
}

TEST_F(LoopNestTest, ANetworkOutputCannotStayInCmx) {
    relu2.schedule().store_in(dsl::MemoryLevel::CMX);
    EXPECT_EQ(error_of(relu2), "layer 'relu2': store_in(CMX): 'relu2' is a network output, which "
                               "goes to DDR, and this keeps it in CMX (legal: store_in(DDR))");
    relu2.schedule() = dsl::Schedule().distribute("y", 2, Strategy::HKSwitch);
    EXPECT_EQ(error_of(relu2),
              "layer 'relu2': distribute(y, 2, HKSwitch): 'relu2' is a network output, which "
              "goes to DDR, and this keeps it in CMX (legal: SOH)");
}

TEST_F(LoopNestTest, HKSwitchContradictedByStoreInDdrOrSpill) {
    s1.distribute("y", 2, Strategy::HKSwitch).store_in(dsl::MemoryLevel::DDR);
    EXPECT_EQ(error(), "layer 'relu1': store_in(DDR): HKSwitch broadcasts the output into the "
                       "CMX of every tile (legal: store_in(CMX), or distribute with SOH to store "
                       "it to DDR)");
    relu1.schedule() = dsl::Schedule().spill().distribute("y", 2, Strategy::HKSwitch);
    EXPECT_EQ(error(), "layer 'relu1': spill(): the output stays in CMX (store_in(CMX) or "
                       "HKSwitch), and spill() sends it to DDR (legal: store_in(DDR) with SOH, "
                       "SOK or Clustering)");
}

TEST_F(LoopNestTest, StoreInDdrOrSpillOfAComputedAtLayer) {
    relu2.schedule().split("y", "yo", "yi", 4);
    s1.compute_at("relu2", "yo").store_in(dsl::MemoryLevel::DDR);
    EXPECT_EQ(error(), "layer 'relu1': store_in(DDR): a layer computed at 'relu2' lives in that "
                       "layer's CMX (legal: store_in(CMX), or compute_root())");
    relu1.schedule() = dsl::Schedule().compute_at("relu2", "yo").spill();
    EXPECT_EQ(error(), "layer 'relu1': spill(): a layer computed at 'relu2' lives in that layer's "
                       "CMX; going through DDR is what compute_root() does (legal: "
                       "compute_root())");
}

TEST_F(LoopNestTest, ComputeAtOfALayerWithTwoConsumers) {
    Layer other = relu("other", relu1);
    relu2.schedule().split("y", "yo", "yi", 4);
    s1.compute_at("relu2", "yo");
    EXPECT_EQ(error_of(relu1, dsl::Graph("g", {relu2, other})),
              "layer 'relu1': compute_at(relu2, yo): compute_at keeps the result in the CMX of "
              "one consumer, and 'relu1' has 2 (relu2, other); legal: compute_root()");
}

TEST_F(LoopNestTest, ComputeAtOfANetworkOutput) {
    relu2.schedule().split("y", "yo", "yi", 4);
    s1.compute_at("relu2", "yo");
    EXPECT_EQ(error_of(relu1, dsl::Graph("g", {relu2, relu1})),
              "layer 'relu1': compute_at(relu2, yo): 'relu1' is a network output, which lives "
              "in DDR; legal: compute_root()");
}

TEST_F(LoopNestTest, OnDpuWithAnUnknownMode) {
    s1.on_dpu("VECTOR");
    EXPECT_EQ(error(), "layer 'relu1': on_dpu(VECTOR): no MPE mode 'VECTOR' on vpu27 (legal: "
                       "CUBOID_16x16, CUBOID_8x16, CUBOID_4x16, or on_dpu() to let the compiler "
                       "choose)");
}

TEST_F(LoopNestTest, OnDpuWithAModeThatDoesNotTakeTheInputType) {
    target = target::load_target("vpu20");
    in = Layer::input(act("in", 16, 20, 12, dsl::ElemType::F16));
    relu1 = relu("relu1", in);
    relu2 = relu("relu2", relu1);
    relu1.schedule().on_dpu("MATRIX");
    EXPECT_EQ(error(), "layer 'relu1': on_dpu(MATRIX): MPE mode 'MATRIX' does not take f16 inputs "
                       "(legal for f16: VECTOR_FP16)");
}

TEST_F(LoopNestTest, WorkloadsWithoutOnDpu) {
    s1.workloads("c", 2);
    EXPECT_EQ(error(), "layer 'relu1': workloads(c, 2): workloads split DPU tasks (legal only with "
                       "on_dpu())");
}

TEST_F(LoopNestTest, WorkloadsOnATaskLoop) {
    s1.on_dpu().split("y", "yo", "yi", 8).workloads("yo", 2);
    EXPECT_EQ(error(), "layer 'relu1': workloads(yo, 2): 'yo' is a task loop (legal: c, x, yi)");
}

TEST_F(LoopNestTest, WorkloadsOnAFusedLoop) {
    s1.on_dpu().fuse("c", "x", "cx").workloads("cx", 2);
    EXPECT_EQ(error(), "layer 'relu1': workloads(cx, 2): 'cx' is fused; workloads must be boxes "
                       "(legal: y)");
}

TEST_F(LoopNestTest, WorkloadsCountOutOfRange) {
    s1.on_dpu().workloads("c", 17);
    EXPECT_EQ(error(), "layer 'relu1': workloads(c, 17): count 17 is outside 1..16 (the extent of "
                       "'c')");
    relu1.schedule() = dsl::Schedule().on_dpu().workloads("c", 0);
    EXPECT_EQ(error(), "layer 'relu1': workloads(c, 0): count 0 is outside 1..16 (the extent of "
                       "'c')");
}

TEST_F(LoopNestTest, WorkloadsOnAMissingLoop) {
    s1.on_dpu().workloads("z", 2);
    EXPECT_EQ(error(), "layer 'relu1': workloads(z, 2): no loop 'z' (loops: c, x, y)");
}

TEST_F(LoopNestTest, DistributeOverMoreTilesThanTheTarget) {
    s1.distribute("y", 3, Strategy::SplitOverHeight);
    EXPECT_EQ(error(), "layer 'relu1': distribute(y, 3, SOH): 3 tiles is outside 1..2 (vpu27 has 2 "
                       "NCE tiles, 'y' has extent 20)");
    relu1.schedule() = dsl::Schedule().distribute("y", 0, Strategy::SplitOverHeight);
    EXPECT_EQ(error(), "layer 'relu1': distribute(y, 0, SOH): 0 tiles is outside 1..2 (vpu27 has 2 "
                       "NCE tiles, 'y' has extent 20)");
}

TEST_F(LoopNestTest, DistributeOverMoreTilesThanIterations) {
    s1.split("y", "yo", "yi", 32).distribute("yo", 2, Strategy::SplitOverHeight);
    EXPECT_EQ(error(), "layer 'relu1': distribute(yo, 2, SOH): 2 tiles is outside 1..1 (vpu27 has "
                       "2 NCE tiles, 'yo' has extent 1)");
}

TEST_F(LoopNestTest, DistributeSOHNeedsAHeightLoop) {
    s1.split("y", "yo", "yi", 8).distribute("c", 2, Strategy::SplitOverHeight);
    EXPECT_EQ(error(), "layer 'relu1': distribute(c, 2, SOH): SOH needs y or a loop split from it "
                       "(legal: yi, yo)");
}

TEST_F(LoopNestTest, DistributeSOKNeedsAChannelLoop) {
    s1.distribute("y", 2, Strategy::SplitOverKernel);
    EXPECT_EQ(error(), "layer 'relu1': distribute(y, 2, SOK): SOK needs c or a loop split from it "
                       "(legal: c)");
}

TEST_F(LoopNestTest, DistributeClusteringNeedsAHeightLoop) {
    s1.distribute("x", 2, Strategy::Clustering);
    EXPECT_EQ(error(), "layer 'relu1': distribute(x, 2, Clustering): Clustering needs y or a loop "
                       "split from it (legal: y)");
}

TEST_F(LoopNestTest, DistributeTwice) {
    s1.distribute("y", 2, Strategy::SplitOverHeight).distribute("c", 2, Strategy::SplitOverKernel);
    EXPECT_EQ(error(), "layer 'relu1': distribute(c, 2, SOK): the layer is already distributed (at "
                       "most one distribute per layer)");
}

TEST_F(LoopNestTest, PrefetchDepthOutOfRange) {
    s1.prefetch(9);
    EXPECT_EQ(error(), "layer 'relu1': prefetch(9): depth 9 is outside 0..8");
    relu1.schedule() = dsl::Schedule().prefetch(-1);
    EXPECT_EQ(error(), "layer 'relu1': prefetch(-1): depth -1 is outside 0..8");
}
