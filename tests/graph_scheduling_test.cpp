// The graph scheduling passes (docs/graph-scheduling.md): choose_strategies splits a layer
// whose weights dominate over output channels, keep_in_cmx keeps small tensors in CMX, and
// neither changes a result, touches a schedule an author wrote, or keeps a graph output in CMX.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <random>
#include <set>
#include <sstream>
#include <string>

#include "algorithms/layers.h"
#include "algorithms/registry.h"
#include "codegen/check.h"
#include "codegen/lower.h"
#include "pass_fixtures.h"
#include "vpu_target/target.h"

namespace vpuc {
namespace {

algorithms::QuantWeights int8_weights(int in, int kernel, int out, uint32_t seed) {
    std::mt19937 gen(seed);
    std::uniform_int_distribution<int> value(-100, 100);
    algorithms::QuantWeights w;
    w.weights = Halide::Buffer<int8_t>(in, kernel, kernel, out);
    for (int i = 0; i < int(w.weights.number_of_elements()); ++i)
        w.weights.data()[i] = int8_t(value(gen));
    w.bias.resize(size_t(out));
    for (int32_t &b : w.bias) b = value(gen) * 50;
    w.requant = {algorithms::fixed_point(0.0004)};
    w.output_quant = dsl::Quant::per_tensor(0.05f, 7);
    return w;
}

// The graph input x, u8 1 x c x h x w held NHWC.
dsl::Layer u8_input(int64_t c, int64_t h, int64_t w) {
    dsl::TensorDesc t;
    t.name = "x";
    t.shape = dsl::Shape{1, c, h, w};
    t.type = dsl::ElemType::U8;
    t.order = dsl::DimsOrder::NHWC();
    t.quant = dsl::Quant::per_tensor(0.05f, 120);
    return dsl::Layer::input(t);
}

// u8 x (1 x 256 x 7 x 5) -> 3x3 conv to 512 channels (1.2 MB of weights: they dominate) ->
// 1x1 conv back to 96 channels, and the same x through a 1x1 conv to 96 -> their sum.
dsl::Graph weight_heavy_block() {
    const dsl::Layer x = u8_input(256, 7, 5);
    algorithms::Conv2dParams same;
    same.pad_left = same.pad_right = same.pad_top = same.pad_bottom = 1;
    const dsl::Layer wide = algorithms::conv2d("wide", x, int8_weights(256, 3, 512, 1), same);
    const dsl::Layer narrow = algorithms::conv2d("narrow", wide, int8_weights(512, 1, 96, 2));
    const dsl::Layer shortcut = algorithms::conv2d("shortcut", x, int8_weights(256, 1, 96, 3));
    const algorithms::QuantEltwise sum = algorithms::quant_eltwise(
        algorithms::EltwiseOp::Add, narrow.output().quant, shortcut.output().quant,
        dsl::ElemType::U8, dsl::Quant::per_tensor(0.1f, 3));
    return dsl::Graph("block", {algorithms::eltwise("sum", algorithms::EltwiseOp::Add, narrow,
                                                    shortcut, {}, sum)});
}

bool keeps_in_cmx(const dsl::Schedule &s) {
    for (const dsl::Directive &d : s.directives())
        if (d.kind == dsl::Directive::Kind::StoreIn && d.memory == dsl::MemoryLevel::CMX)
            return true;
    return false;
}

bool splits_over_channels(const dsl::Schedule &s) {
    for (const dsl::Directive &d : s.directives())
        if (d.kind == dsl::Directive::Kind::Distribute &&
            d.strategy == dsl::Strategy::SplitOverKernel)
            return true;
    return false;
}

struct Scheduled {
    std::map<std::string, dsl::Schedule> schedules; // what each layer got
    size_t blob_bytes = 0, unscheduled_blob_bytes = 0;
    sim::RunResult run, unscheduled_run;
};

// The graph checked against its reference with graph scheduling on and off: both bit exact,
// the same bytes.
Scheduled expect_same_results(const dsl::Graph &graph, const char *target_name) {
    const target::Target target = target::load_target(target_name);
    std::map<std::string, dsl::Schedule> scheduled;
    codegen::CheckOptions on;
    on.lower.schedules = &scheduled;
    codegen::CheckOptions off;
    off.lower.graph_scheduling = false;
    const codegen::CheckResult with = codegen::check_against_reference(graph, target, on);
    const codegen::CheckResult without = codegen::check_against_reference(graph, target, off);
    EXPECT_TRUE(with.ok()) << target_name << ": " << with.report();
    EXPECT_TRUE(without.ok()) << target_name << ": " << without.report();
    EXPECT_TRUE(with.run.outputs == without.run.outputs) << target_name;
    EXPECT_NE(with.blob, without.blob) << target_name << ": graph scheduling changed nothing";
    return {scheduled, with.blob.size(), without.blob.size(), with.run, without.run};
}

TEST(GraphScheduling, SplitsWeightHeavyLayersOverChannelsAndKeepsSmallTensorsInCmx) {
    const dsl::Graph graph = weight_heavy_block();
    for (const char *target : {"vpu27", "vpu20"}) {
        SCOPED_TRACE(target);
        const Scheduled scheduled = expect_same_results(graph, target);
        const std::map<std::string, dsl::Schedule> &s = scheduled.schedules;
        // Each tile streams half (a quarter) of wide's weights instead of all of them, and the
        // blob holds them once instead of once per tile.
        EXPECT_TRUE(splits_over_channels(s.at("wide"))) << s.at("wide").to_string();
        const size_t wide_weights = 256 * 3 * 3 * 512;
        const size_t tiles = size_t(target::load_target(target).tiles);
        EXPECT_LE(scheduled.blob_bytes + (tiles - 1) * wide_weights,
                  scheduled.unscheduled_blob_bytes);
        // On vpu27 the shortcut's 25 KB of weights are not worth both tiles reading all of x;
        // on vpu20, four tiles over 7 rows leave one with a single row, and SOK wins there.
        if (std::string(target) == "vpu27") {
            EXPECT_FALSE(splits_over_channels(s.at("shortcut"))) << s.at("shortcut").to_string();
        }
        // vpu27 copies a tensor between its two tiles' CMX for a quarter of what a DDR round
        // trip costs; vpu20's one DMA engine would copy each tile's part to three others, so it
        // keeps wide's output (split over channels) in DDR, and narrow's (split over rows, and
        // read on the tiles computing it) by rows.
        EXPECT_EQ(keeps_in_cmx(s.at("wide")), std::string(target) == "vpu27")
            << s.at("wide").to_string();
        EXPECT_TRUE(keeps_in_cmx(s.at("narrow"))) << s.at("narrow").to_string();
        // A graph output goes to DDR.
        EXPECT_FALSE(keeps_in_cmx(s.at("sum"))) << s.at("sum").to_string();
    }
}

// An fp16 tensor of one row: [1, rows, features] is C rows, H 1, W features on the device.
dsl::Layer one_row_input(const std::string &name, int64_t rows, int64_t features) {
    dsl::TensorDesc t;
    t.name = name;
    t.shape = dsl::Shape{1, rows, features};
    t.type = dsl::ElemType::F16;
    t.order = dsl::DimsOrder::identity(3);
    return dsl::Layer::input(t);
}

// A SHAVE layer of one row, which the default schedule (splitting rows) leaves on one tile, is
// spread over the tiles by channels; one too small to gain is not, nor a softmax along the
// channels. The results are the same either way.
TEST(GraphScheduling, SpreadsAShaveLayerOfOneRowOverTheTilesByChannels) {
    const dsl::Layer x = one_row_input("x", 64, 200);
    const dsl::Layer big = algorithms::sigmoid("big", x);
    const dsl::Layer small = algorithms::sigmoid("small", one_row_input("y", 7, 9));
    const dsl::Layer along_c = algorithms::softmax("along_c", x, dsl::Dim(1));
    const dsl::Graph graph("one_row", {big, small, along_c});
    for (const char *target : {"vpu27", "vpu20"}) {
        SCOPED_TRACE(target);
        const std::map<std::string, dsl::Schedule> s = expect_same_results(graph, target).schedules;
        if (std::string(target) == "vpu27") {
            EXPECT_TRUE(splits_over_channels(s.at("big"))) << s.at("big").to_string();
        }
        EXPECT_FALSE(splits_over_channels(s.at("small"))) << s.at("small").to_string();
        EXPECT_FALSE(splits_over_channels(s.at("along_c"))) << s.at("along_c").to_string();
    }
}

// A classifier: u8 x (1 x 1024 x 1 x 1) through a 1x1 conv to 1000 channels (1 MB of weights),
// and a second one to 24 channels, too few for every tile to get a group of 16. The default
// schedule leaves a layer of one row on one tile; choose_strategies splits the first over
// output channels on every tile, whichever way its estimates lean, and leaves the second. The
// same bytes either way.
TEST(GraphScheduling, SplitsADpuLayerOfOneRowOverTheTilesByChannels) {
    const dsl::Layer x = u8_input(1024, 1, 1);
    const dsl::Layer fc = algorithms::conv2d("fc", x, int8_weights(1024, 1, 1000, 4));
    const dsl::Layer narrow = algorithms::conv2d("narrow", x, int8_weights(1024, 1, 24, 5));
    const dsl::Graph graph("classifier", {fc, narrow});
    for (const char *target : {"vpu27", "vpu20"}) {
        SCOPED_TRACE(target);
        const Scheduled scheduled = expect_same_results(graph, target);
        EXPECT_TRUE(splits_over_channels(scheduled.schedules.at("fc")))
            << scheduled.schedules.at("fc").to_string();
        EXPECT_FALSE(splits_over_channels(scheduled.schedules.at("narrow")))
            << scheduled.schedules.at("narrow").to_string();
        std::set<int> tiles; // of engines "DPU tile 3" or "DPU tile 3 dpu 1"
        for (const sim::TaskRecord &t : scheduled.run.tasks)
            if (t.layer == "fc" && t.kind == blob::EngineKind::Dpu)
                tiles.insert(std::stoi(t.engine.substr(std::string("DPU tile ").size())));
        EXPECT_EQ(tiles.size(), size_t(target::load_target(target).tiles));
    }
}

// The DMA tasks of `layer` whose name holds `what` (".store", ".broadcast").
size_t dma_tasks(const sim::RunResult &run, const std::string &layer, const std::string &what) {
    return size_t(std::count_if(run.tasks.begin(), run.tasks.end(), [&](const sim::TaskRecord &t) {
        return t.kind == blob::EngineKind::Dma && t.layer == layer &&
               t.name.find(what) != std::string::npos;
    }));
}

// u8 x (1 x 16 x 57 x 57) through two 1x1 convs to 256 channels (831 KB each, above a third of
// a vpu27 tile's CMX), their sum, and a convolution of it with stride 2 (`kernel` 1, or 3 with
// a padding of 1) as the graph's output.
dsl::Graph wide_residual_block(int kernel) {
    const dsl::Layer x = u8_input(16, 57, 57);
    const dsl::Layer a = algorithms::conv2d("a", x, int8_weights(16, 1, 256, 4));
    const dsl::Layer b = algorithms::conv2d("b", x, int8_weights(16, 1, 256, 5));
    const algorithms::QuantEltwise add =
        algorithms::quant_eltwise(algorithms::EltwiseOp::Add, a.output().quant, b.output().quant,
                                  dsl::ElemType::U8, dsl::Quant::per_tensor(0.1f, 3));
    const dsl::Layer sum = algorithms::eltwise("sum", algorithms::EltwiseOp::Add, a, b, {}, add);
    algorithms::Conv2dParams down;
    down.stride_w = down.stride_h = 2;
    down.pad_left = down.pad_right = down.pad_top = down.pad_bottom = kernel / 2;
    return dsl::Graph("wide",
                      {algorithms::conv2d("down", sum, int8_weights(256, kernel, 24, 6), down)});
}

// Too large for a copy on each tile, a tensor split over rows stays in CMX, each tile holding
// the rows it computes and those its readers there read: the two convolutions' outputs (read by
// the add, row for row), and the sum, read by a 1x1 convolution with stride 2 (rows 2y of the
// tile's own 29 or 28) or by a 3x3 one, whose first tile's last output row also reads the
// other tile's first row: that row is copied to it after the task computing it, the sum's one
// copy between the tiles. The same bytes either way. vpu20 keeps tensors by rows too: the two
// convolutions' outputs, over its four tiles, where the sum's band no longer fits the live share
// of its smaller CMX beside them.
TEST(GraphScheduling, KeepsTheRowsEachTileComputesOrReads) {
    for (int kernel : {1, 3}) {
        for (const char *target_name : {"vpu27", "vpu20"}) {
            SCOPED_TRACE(std::string(target_name) + ", kernel " + std::to_string(kernel));
            const dsl::Graph graph = wide_residual_block(kernel);
            const target::Target target = target::load_target(target_name);
            std::map<std::string, dsl::Schedule> s;
            std::ostringstream notes;
            codegen::CheckOptions on;
            on.lower.schedules = &s;
            on.lower.notes = &notes;
            codegen::CheckOptions off;
            off.lower.graph_scheduling = false;
            const codegen::CheckResult with = codegen::check_against_reference(graph, target, on);
            const codegen::CheckResult without =
                codegen::check_against_reference(graph, target, off);
            EXPECT_TRUE(with.ok()) << with.report();
            EXPECT_TRUE(without.ok()) << without.report();
            EXPECT_TRUE(with.run.outputs == without.run.outputs);
            const bool vpu27 = std::string(target_name) == "vpu27";
            EXPECT_TRUE(keeps_in_cmx(s.at("a"))) << s.at("a").to_string();
            EXPECT_TRUE(keeps_in_cmx(s.at("b"))) << s.at("b").to_string();
            EXPECT_EQ(keeps_in_cmx(s.at("sum")), vpu27) << s.at("sum").to_string();
            EXPECT_NE(notes.str().find(vpu27 ? "(3 by rows" : "(2 by rows"), std::string::npos)
                << notes.str();
            // A tensor kept by rows is not stored to DDR; rows go between tiles only as a halo.
            for (const char *layer : {"a", "b", "sum"}) {
                const bool kept = vpu27 || std::string(layer) != "sum";
                EXPECT_EQ(dma_tasks(with.run, layer, ".store") == 0, kept) << layer;
                EXPECT_GT(dma_tasks(without.run, layer, ".store"), 0u) << layer;
            }
            EXPECT_EQ(dma_tasks(with.run, "a", ".broadcast"), 0u);
            EXPECT_EQ(dma_tasks(with.run, "b", ".broadcast"), 0u);
            EXPECT_EQ(dma_tasks(with.run, "sum", ".broadcast"), vpu27 && kernel == 3 ? 1u : 0u);
        }
    }
}

// A band kept by rows lives from its producer to its last reader: allocate_cmx places it from
// the top of CMX down, the first on each tile ending at the top, and the tasks' own buffers
// below it (docs/graph-scheduling.md).
TEST(GraphScheduling, BandsKeptByRowsArePlacedFromTheTopOfCmx) {
    for (const char *target_name : {"vpu27", "vpu20"}) {
        SCOPED_TRACE(target_name);
        const dsl::Graph graph = wide_residual_block(3).device_clone();
        const target::Target target = target::load_target(target_name);
        codegen::LoweringState s(graph, target);
        test::run_through_allocate_cmx(s);
        std::map<uint32_t, uint64_t> top_end; // per tile, the highest end of a band
        size_t bands = 0;
        for (const codegen::BufferDecl &b : s.program.buffers) {
            if (b.space != blob::MemSpace::Cmx || b.offset == codegen::kUnallocated) continue;
            const bool band = b.name == "a.cmx" || b.name == "b.cmx" || b.name == "sum.cmx";
            EXPECT_EQ(b.from_top, band) << b.name;
            if (!band) continue;
            ++bands;
            uint64_t &end = top_end[b.index];
            end = std::max(end, b.offset + (b.bytes + 63) / 64 * 64);
        }
        EXPECT_GE(bands, size_t(2 * target.tiles));
        for (const auto &[tile, end] : top_end)
            EXPECT_EQ(end, target.cmx_usable_bytes / 64 * 64) << "tile " << tile;
    }
}

// The bytes of ResNet-50's first stage in fp16, in u8 with twice the channels: x (1 x 128 x 56 x
// 56) through two bottleneck blocks (a 1x1 and a 3x3 conv of 128 channels, a 1x1 conv to 512
// channels, added to the block's input or, in the first, to x through a 1x1 conv to 512). The
// 512-channel tensors take 800 KB of each vpu27 tile's CMX by rows, 41% of it.
dsl::Graph wide_bottlenecks() {
    algorithms::Conv2dParams same;
    same.pad_left = same.pad_right = same.pad_top = same.pad_bottom = 1;
    dsl::Layer x = u8_input(128, 56, 56);
    dsl::Layer shortcut = algorithms::conv2d("shortcut", x, int8_weights(128, 1, 512, 5));
    for (const std::string block : {"1", "2"}) {
        const int in = block == "1" ? 128 : 512;
        const uint32_t seed = block == "1" ? 10 : 20;
        const dsl::Layer squeeze =
            algorithms::conv2d("squeeze" + block, x, int8_weights(in, 1, 128, seed));
        const dsl::Layer spatial = algorithms::conv2d("spatial" + block, squeeze,
                                                      int8_weights(128, 3, 128, seed + 1), same);
        const dsl::Layer expand =
            algorithms::conv2d("expand" + block, spatial, int8_weights(128, 1, 512, seed + 2));
        const algorithms::QuantEltwise add = algorithms::quant_eltwise(
            algorithms::EltwiseOp::Add, expand.output().quant, shortcut.output().quant,
            dsl::ElemType::U8, dsl::Quant::per_tensor(0.1f, 3));
        x = shortcut = algorithms::eltwise("sum" + block, algorithms::EltwiseOp::Add, expand,
                                           shortcut, {}, add);
    }
    return dsl::Graph("bottlenecks", {x});
}

// The 512-channel tensors are kept by rows, 800 KB on each tile: keep_in_cmx takes tensors of
// up to 45% of a tile's CMX. The same bytes as without graph scheduling. (ResNet-50 fp16 itself,
// whose bands also need the allocator to leave them room at the top of CMX, is in
// ZooEndToEnd.ResNet50MatchesOpenCv.)
TEST(GraphScheduling, KeepsTensorsOfUpTo45PercentOfCmxByRows) {
    const Scheduled scheduled = expect_same_results(wide_bottlenecks(), "vpu27");
    for (const char *wide : {"expand1", "expand2"}) {
        EXPECT_TRUE(keeps_in_cmx(scheduled.schedules.at(wide)))
            << scheduled.schedules.at(wide).to_string();
        EXPECT_EQ(dma_tasks(scheduled.run, wide, ".store"), 0u) << wide;
        EXPECT_GT(dma_tasks(scheduled.unscheduled_run, wide, ".store"), 0u) << wide;
    }
}

bool computed_at(const dsl::Schedule &s, const std::string &consumer) {
    for (const dsl::Directive &d : s.directives())
        if (d.kind == dsl::Directive::Kind::ComputeAt && d.name == consumer) return true;
    return false;
}

// u8 x (1 x 16 x 112 x 112) through a 1x1 conv to 192 channels (2.4 MB: 1.2 MB of each vpu27
// tile's CMX by rows, past the 45% keep_in_cmx keeps) and a 3x3 conv with stride 2 to 24
// channels, the output, as MobileNet-V2's first expansion and its depthwise conv.
// With `twice`, a second 1x1 conv of 192 channels between them ("mid").
dsl::Graph expansion_too_large_to_keep(bool twice = false) {
    const dsl::Layer x = u8_input(16, 112, 112);
    dsl::Layer expand = algorithms::conv2d("expand", x, int8_weights(16, 1, 192, 11));
    if (twice) expand = algorithms::conv2d("mid", expand, int8_weights(192, 1, 192, 13));
    algorithms::Conv2dParams down;
    down.stride_w = down.stride_h = 2;
    down.pad_left = down.pad_right = down.pad_top = down.pad_bottom = 1;
    return dsl::Graph("expansion",
                      {algorithms::conv2d("down", expand, int8_weights(192, 3, 24, 12), down)});
}

// On vpu27, group_layers computes the expansion at the strided conv's tasks, each task the rows
// it reads (a row of halo computed again), and it never touches DDR. On vpu20, whose tiles have
// five DPUs each, it stays a layer of its own. The same bytes either way.
TEST(GraphScheduling, ComputesATensorTooLargeToKeepAtItsReadersTasks) {
    for (const char *target : {"vpu27", "vpu20"}) {
        SCOPED_TRACE(target);
        const Scheduled scheduled = expect_same_results(expansion_too_large_to_keep(), target);
        const dsl::Schedule &expand = scheduled.schedules.at("expand");
        const bool vpu27 = std::string(target) == "vpu27";
        EXPECT_EQ(computed_at(expand, "down"), vpu27) << expand.to_string();
        EXPECT_FALSE(keeps_in_cmx(expand)) << expand.to_string();
        EXPECT_EQ(dma_tasks(scheduled.run, "expand", ".store") == 0, vpu27);
        EXPECT_GT(dma_tasks(scheduled.unscheduled_run, "expand", ".store"), 0u);
    }
    // A layer another is computed at keeps its task loops: the first of a chain is grouped.
    const Scheduled chain = expect_same_results(expansion_too_large_to_keep(true), "vpu27");
    EXPECT_TRUE(computed_at(chain.schedules.at("expand"), "mid"));
    EXPECT_FALSE(computed_at(chain.schedules.at("mid"), "down"));
}

// The start of a QDQ network: an fp16 image x (1 x 3 x 160 x 160) quantized to u8 on the SHAVEs,
// then a 3x3 conv with stride 2 to 32 channels. On vpu27 group_layers computes the quantize at
// the conv's tasks, each the rows it reads (a row of halo computed again), so that the DPUs start
// after the first band instead of after the whole image, and the run is shorter. On vpu20 it
// stays a layer of its own. The same bytes either way.
TEST(GraphScheduling, ComputesAShaveLayerStartingTheNetworkAtItsReadersTasks) {
    dsl::TensorDesc image;
    image.name = "image";
    image.shape = dsl::Shape{1, 3, 160, 160};
    image.type = dsl::ElemType::F16;
    image.order = dsl::DimsOrder::NHWC();
    const dsl::Layer quantized =
        algorithms::layer_registry().build("quantize", "quantized", {dsl::Layer::input(image)},
                                           dsl::Attrs()
                                               .set("output_type", std::string("u8"))
                                               .set("output_scale", 0.05)
                                               .set("output_zero_point", int64_t(120)));
    algorithms::Conv2dParams down;
    down.stride_w = down.stride_h = 2;
    down.pad_left = down.pad_right = down.pad_top = down.pad_bottom = 1;
    const dsl::Graph graph(
        "stem", {algorithms::conv2d("stem", quantized, int8_weights(3, 3, 32, 17), down)});
    for (const char *target : {"vpu27", "vpu20"}) {
        SCOPED_TRACE(target);
        const Scheduled scheduled = expect_same_results(graph, target);
        const dsl::Schedule &quantize = scheduled.schedules.at("quantized");
        const bool vpu27 = std::string(target) == "vpu27";
        EXPECT_EQ(computed_at(quantize, "stem"), vpu27) << quantize.to_string();
        if (vpu27) {
            EXPECT_LT(scheduled.run.latency_ns, scheduled.unscheduled_run.latency_ns);
        }
    }
}

TEST(GraphScheduling, ATensorOfSeveralImagesStaysInDdr) {
    // A CMX copy holds one image: a batch of two goes through DDR, and the graph compiles.
    dsl::TensorDesc t;
    t.name = "x";
    t.shape = dsl::Shape{2, 16, 5, 3};
    t.type = dsl::ElemType::F16;
    t.order = dsl::DimsOrder::NHWC();
    const dsl::Layer first = algorithms::relu("first", dsl::Layer::input(t));
    const dsl::Graph graph("batch", {algorithms::clamp("second", first, -1, 1)});
    std::map<std::string, dsl::Schedule> s;
    codegen::CheckOptions options;
    options.lower.schedules = &s;
    const codegen::CheckResult result =
        codegen::check_against_reference(graph, target::load_target("vpu27"), options);
    EXPECT_TRUE(result.ok()) << result.report();
    EXPECT_FALSE(keeps_in_cmx(s.at("first"))) << s.at("first").to_string();
}

TEST(GraphScheduling, LeavesAnAuthorsScheduleAlone) {
    dsl::Graph graph = weight_heavy_block();
    dsl::Layer wide = graph.find("wide");
    wide.schedule().split("y", "yo", "yi", 4);
    const std::map<std::string, dsl::Schedule> s = expect_same_results(graph, "vpu27").schedules;
    EXPECT_EQ(s.at("wide").to_string(), "split(y, yo, yi, 4)");
    // Its readers still may keep their outputs in CMX; its own output stays where it says.
    EXPECT_TRUE(keeps_in_cmx(s.at("narrow"))) << s.at("narrow").to_string();
}

TEST(GraphScheduling, OffGivesEveryLayerItsDefaultSchedule) {
    const dsl::Graph graph = weight_heavy_block();
    const target::Target target = target::load_target("vpu27");
    std::map<std::string, dsl::Schedule> s;
    codegen::LowerOptions options;
    options.graph_scheduling = false;
    options.schedules = &s;
    codegen::lower(graph, target, options);
    for (const auto &[layer, schedule] : s) {
        EXPECT_FALSE(keeps_in_cmx(schedule)) << layer << ": " << schedule.to_string();
        EXPECT_FALSE(splits_over_channels(schedule)) << layer << ": " << schedule.to_string();
    }
}

} // namespace
} // namespace vpuc
