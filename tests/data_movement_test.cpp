// The layers that move elements between logical positions: pad, tile, expand, depth_to_space,
// space_to_depth, trilu, cumsum, gather_elements and slice with steps other than 1. Each runs on
// both targets against the CPU reference, and the reference against index arithmetic written out
// here (the reference shares the algorithm); then ONNX's backend tests of their ops.
#include <gtest/gtest.h>

#include <onnx/onnx_pb.h>

#include <cmath>
#include <map>
#include <random>

#include "algorithms/reference.h"
#include "algorithms/registry.h"
#include "dsl/constant_values.h"
#include "frontend/onnx_import.h"
#include "lowering_fixtures.h"
#include "onnx_node_test.h"

namespace vpuc {
namespace {

dsl::LayerRegistry &registry() {
    return algorithms::layer_registry();
}

// The layer's output on the CPU reference, checked first to be what both targets compute from
// its graph inputs' values, by name.
Halide::Buffer<> run_checked(const dsl::Layer &layer,
                             const std::map<std::string, Halide::Buffer<>> &values) {
    const dsl::Graph g(layer.name(), {layer});
    std::vector<Halide::Buffer<>> inputs;
    for (const dsl::Layer &in : g.inputs()) inputs.push_back(values.at(in.name()));
    for (const char *target : {"vpu27", "vpu20"}) {
        codegen::CheckOptions options;
        options.inputs = inputs;
        const codegen::CheckResult r =
            codegen::check_against_reference(g, target::load_target(target), options);
        EXPECT_TRUE(r.ok()) << layer.name() << " on " << target << "\n" << r.report();
    }
    return algorithms::run_reference(g, inputs)[0];
}

Halide::Buffer<> run_checked(const dsl::Layer &layer, const Halide::Buffer<> &x) {
    return run_checked(layer, {{dsl::Graph(layer.name(), {layer}).inputs().at(0).name(), x}});
}

// Real values in [-4, 4) rounded to fp16, on the Halide (c, x, y) = (C, W, H) of `t`.
Halide::Buffer<> real_input(const dsl::TensorDesc &t, uint32_t seed) {
    const dsl::TensorDesc d = dsl::device_view(t);
    using namespace dsl::dims;
    return test::real_halves({int(d.shape[C]), int(d.shape[W]), int(d.shape[H])}, -4, 4, seed);
}

// A 1xCxHxW fp16 input held NHWC.
dsl::Layer f16_input(const std::string &name, int64_t c, int64_t w, int64_t h) {
    return dsl::Layer::input(test::activation(name, c, w, h, dsl::ElemType::F16));
}

// numpy.pad's source index of output index `i` (the input `before` padded) along an axis of
// `n`, or -1 outside the input for mode constant.
int64_t padded_source(const std::string &mode, int64_t i, int64_t before, int64_t n) {
    int64_t at = i - before;
    if (mode == "constant") return at >= 0 && at < n ? at : -1;
    if (mode == "edge" || n == 1) return std::clamp<int64_t>(at, 0, n - 1);
    while (at < 0 || at >= n) at = at < 0 ? -at : 2 * (n - 1) - at; // reflect about the ends
    return at;
}

// Constant (a value in real units, stored quantized for u8), edge and reflect, with pads past
// the extent and negative ones, on odd extents, u8 and fp16.
TEST(DataMovement, PadFillsEachModeAsNumpyDoes) {
    const dsl::Layer bytes = dsl::Layer::input(test::activation("in", 5, 7, 3));
    const dsl::Layer halves = f16_input("h", 5, 7, 3);
    const std::vector<int64_t> pads = {0, 2, 4, -1, 0, -1, 1, 9}; // C, H, W before; then after
    for (const std::string mode : {"constant", "edge", "reflect"}) {
        for (const dsl::Layer &in : {bytes, halves}) {
            const bool f16 = in.output().type == dsl::ElemType::F16;
            dsl::Attrs a;
            a.set("pads", pads).set("mode", mode).set("value", 1.5);
            const dsl::Layer p = registry().build("pad", "p_" + mode, {in}, a);
            EXPECT_EQ(p.output().shape.raw(), (std::vector<int64_t>{1, 6, 8, 15}));
            const Halide::Buffer<> x =
                f16 ? real_input(in.output(), 3) : test::random_input(in.output(), 3);
            const Halide::Buffer<> out = run_checked(p, x);
            // Buffers are (c, x, y) = (C, W, H); u8 1.5 is 1.5 / 0.05 + 120 stored.
            const double filler = f16 ? 1.5 : 150;
            auto value = [&](const Halide::Buffer<> &b, int c, int w, int h) {
                return f16 ? double(Halide::Buffer<Halide::float16_t>(b)(c, w, h))
                           : double(Halide::Buffer<uint8_t>(b)(c, w, h));
            };
            for (int c = 0; c < 6; ++c)
                for (int h = 0; h < 8; ++h)
                    for (int w = 0; w < 15; ++w) {
                        const int64_t fc = padded_source(mode, c, pads[1], 5),
                                      fh = padded_source(mode, h, pads[2], 3),
                                      fw = padded_source(mode, w, pads[3], 7);
                        const double want = fc < 0 || fh < 0 || fw < 0
                                                ? filler
                                                : value(x, int(fc), int(fw), int(fh));
                        ASSERT_EQ(value(out, c, w, h), want)
                            << mode << " c " << c << " h " << h << " w " << w;
                    }
        }
    }
    dsl::Attrs batch;
    batch.set("pads", std::vector<int64_t>{1, 0, 0, 0, 0, 0, 0, 0});
    EXPECT_THROW(registry().build("pad", "p", {bytes}, batch), dsl::LayerError);
    dsl::Attrs empty;
    empty.set("pads", std::vector<int64_t>{0, 0, -2, 0, 0, 0, -1, 0});
    EXPECT_THROW(registry().build("pad", "p", {bytes}, empty), dsl::LayerError);
}

// Tile repeats, expand broadcasts (numpy's rules, a 1 keeping the extent), on odd extents.
TEST(DataMovement, TileRepeatsAndExpandBroadcasts) {
    const dsl::Layer in = f16_input("in", 3, 5, 1);
    const Halide::Buffer<Halide::float16_t> x(real_input(in.output(), 5));
    dsl::Attrs repeats;
    repeats.set("repeats", std::vector<int64_t>{1, 2, 3, 3});
    const dsl::Layer t = registry().build("tile", "t", {in}, repeats);
    EXPECT_EQ(t.output().shape.raw(), (std::vector<int64_t>{1, 6, 3, 15}));
    const Halide::Buffer<Halide::float16_t> tiled(run_checked(t, x));
    tiled.for_each_element([&](int c, int w, int h) {
        (void)h;
        ASSERT_EQ(float(tiled(c, w, h)), float(x(c % 3, w % 5, 0)));
    });
    dsl::Attrs shape;
    shape.set("shape", std::vector<int64_t>{1, 9, 1});
    const dsl::Layer e = registry().build("expand", "e", {in}, shape);
    EXPECT_EQ(e.output().shape.raw(), (std::vector<int64_t>{1, 3, 9, 5}));
    const Halide::Buffer<Halide::float16_t> expanded(run_checked(e, x));
    expanded.for_each_element(
        [&](int c, int w, int h) { ASSERT_EQ(float(expanded(c, w, h)), float(x(c, w, 0))); });
    dsl::Attrs clash;
    clash.set("shape", std::vector<int64_t>{4, 1, 1});
    EXPECT_THROW(registry().build("expand", "e", {in}, clash), dsl::LayerError);
    dsl::Attrs batch;
    batch.set("repeats", std::vector<int64_t>{2, 1, 1, 1});
    EXPECT_THROW(registry().build("tile", "t", {in}, batch), dsl::LayerError);
}

// DepthToSpace in both modes and SpaceToDepth, against ONNX's reshape-transpose-reshape
// definitions written as index arithmetic; SpaceToDepth undoes DCR.
TEST(DataMovement, DepthToSpaceAndSpaceToDepthMoveBlocksAsOnnxDefines) {
    const int64_t b = 2, c = 3, h = 5, w = 7;
    const dsl::Layer in = dsl::Layer::input(test::activation("in", c * b * b, w, h));
    const Halide::Buffer<uint8_t> x(test::random_input(in.output(), 11));
    for (const std::string mode : {"DCR", "CRD"}) {
        dsl::Attrs a;
        a.set("blocksize", b).set("mode", mode);
        const dsl::Layer d = registry().build("depth_to_space", "d_" + mode, {in}, a);
        EXPECT_EQ(d.output().shape.raw(), (std::vector<int64_t>{1, c, h * b, w * b}));
        const Halide::Buffer<uint8_t> out(run_checked(d, x));
        // DCR: [b, b, c, h, w] transposed to [c, h, b, w, b]; CRD: [c, b, b, h, w] likewise.
        for (int oc = 0; oc < c; ++oc)
            for (int i = 0; i < b; ++i)
                for (int j = 0; j < b; ++j)
                    for (int y = 0; y < h; ++y)
                        for (int xx = 0; xx < w; ++xx) {
                            const int from = mode == "DCR" ? (i * int(b) + j) * int(c) + oc
                                                           : oc * int(b * b) + i * int(b) + j;
                            ASSERT_EQ(out(oc, xx * int(b) + j, y * int(b) + i), x(from, xx, y))
                                << mode;
                        }
    }
    dsl::Attrs dcr;
    dcr.set("blocksize", b);
    const dsl::Layer d = registry().build("depth_to_space", "d", {in}, dcr);
    dsl::Attrs block;
    block.set("blocksize", b);
    const dsl::Layer s = registry().build("space_to_depth", "s", {d}, block);
    EXPECT_EQ(s.output().shape, in.output().shape);
    const Halide::Buffer<uint8_t> round_trip(run_checked(s, x));
    round_trip.for_each_element(
        [&](int cc, int xx, int y) { ASSERT_EQ(round_trip(cc, xx, y), x(cc, xx, y)); });
    dsl::Attrs three;
    three.set("blocksize", int64_t(3));
    EXPECT_THROW(registry().build("depth_to_space", "d", {in}, three), dsl::LayerError);
    EXPECT_THROW(registry().build("space_to_depth", "s", {in}, three), dsl::LayerError);
}

// An image's space_to_depth (a network's input of 3 channels: 12 after it, fewer than a
// vector's lanes) computes each output row from its b input rows alone, and its SHAVE kernel
// vectorizes along W with the 12 channels unrolled: each output channel's pixel in the block is
// then a constant, and its loads vector loads of every 2nd column. Along the channels, each
// lane's source was a load of its own: 187 instructions per vector of 16 u8 on a 224x224 image,
// where a few remain here, for the guarded last vector of each row.
TEST(DataMovement, SpaceToDepthOfAnImageReadsItsRowsAndVectorizesAlongW) {
    for (const dsl::ElemType type : {dsl::ElemType::U8, dsl::ElemType::F16}) {
        SCOPED_TRACE(dsl::to_string(type));
        const dsl::Layer in = dsl::Layer::input(test::activation("in", 3, 46, 38, type));
        const dsl::Layer s = registry().build("space_to_depth", "s", {in},
                                              dsl::Attrs().set("blocksize", int64_t(2)));
        const Halide::Buffer<> x = type == dsl::ElemType::U8
                                       ? test::random_input(in.output(), 21)
                                       : Halide::Buffer<>(real_input(in.output(), 21));
        const Halide::Buffer<> out = run_checked(s, x);
        for (int c = 0; c < 12; ++c)
            for (int y = 0; y < 19; ++y)
                for (int xx = 0; xx < 23; ++xx) {
                    const int block = c / 3, i = block / 2, j = block % 2;
                    const int sx = 2 * xx + j, sy = 2 * y + i;
                    if (type == dsl::ElemType::U8)
                        ASSERT_EQ(Halide::Buffer<uint8_t>(out)(c, xx, y),
                                  Halide::Buffer<uint8_t>(x)(c % 3, sx, sy));
                    else
                        ASSERT_EQ(Halide::Buffer<Halide::float16_t>(out)(c, xx, y).to_bits(),
                                  Halide::Buffer<Halide::float16_t>(x)(c % 3, sx, sy).to_bits());
                }
        const std::vector<uint8_t> blob =
            codegen::lower(dsl::Graph("s", {s}), target::load_target("vpu27"));
        const blob::Blob &b = *blob::GetBlob(blob.data());
        ASSERT_EQ(b.kernels()->size(), 1u);
        EXPECT_LT(b.kernels()->Get(0)->arith_ops_per_vector(), 8);
        int tasks = 0;
        for (const auto *queue : *b.queues())
            for (const auto *task : *queue->tasks())
                if (const auto *shave = task->kind_as_ShaveTask()) {
                    ++tasks;
                    // (C, W, H) of the input and of the output: twice the output's rows.
                    const auto *read = shave->args()->Get(0)->tensor()->dims();
                    const auto *written = shave->args()->Get(1)->tensor()->dims();
                    EXPECT_EQ(read->Get(2)->extent(), 2 * written->Get(2)->extent());
                }
        EXPECT_GT(tasks, 1);
    }
}

// Trilu keeps a triangle of each H x W matrix; the others are 0 (the zero point for u8).
TEST(DataMovement, TriluKeepsATriangleOfTheLastTwoAxes) {
    const dsl::Layer in = dsl::Layer::input(test::activation("in", 3, 7, 5));
    const Halide::Buffer<uint8_t> x(test::random_input(in.output(), 13));
    for (int64_t upper : {0, 1})
        for (int64_t k : {-2, 0, 3, 9}) {
            dsl::Attrs a;
            a.set("upper", upper).set("k", k);
            const dsl::Layer t = registry().build("trilu", "t", {in}, a);
            const Halide::Buffer<uint8_t> out(run_checked(t, x));
            out.for_each_element([&](int c, int w, int h) {
                const bool keep = upper ? w - h >= k : w - h <= k;
                ASSERT_EQ(out(c, w, h), keep ? x(c, w, h) : 120) << "upper " << upper << " k " << k;
            });
        }
    const dsl::Layer rows = dsl::Layer::input(dsl::TensorDesc{
        "rows", dsl::Shape({4, 5}), dsl::ElemType::F16, {}, dsl::DimsOrder::identity(2), {}});
    EXPECT_THROW(registry().build("trilu", "t", {rows}, {}), dsl::LayerError);
}

// CumSum of real fp16 values along C, H and W, forwards and reversed, inclusive and exclusive:
// float32 sums in numpy's order (from the first element on, or reversed from the last one down,
// as ONNX's reference computes them), each rounded once to fp16, bit for bit; of i32 values,
// exact.
TEST(DataMovement, CumSumAddsAlongAnAxisInFloat32) {
    const dsl::Layer in = f16_input("in", 5, 7, 3);
    // Random real values, and values of far apart magnitudes, whose float32 sums round
    // differently in another order.
    Halide::Buffer<Halide::float16_t> mixed(real_input(in.output(), 17));
    const float magnitudes[] = {2048.0f, -2048.0f, 0.0001235f, 1.5f, -0.000977f, 3.0e-5f};
    std::mt19937 pick(3);
    mixed.for_each_value([&](Halide::float16_t &v) {
        v = Halide::float16_t(magnitudes[pick() % std::size(magnitudes)]);
    });
    for (const Halide::Buffer<Halide::float16_t> &x :
         {Halide::Buffer<Halide::float16_t>(real_input(in.output(), 17)), mixed})
        for (int64_t axis : {1, 2, -1})
            for (int64_t exclusive : {0, 1})
                for (int64_t reverse : {0, 1}) {
                    dsl::Attrs a;
                    a.set("axis", axis).set("exclusive", exclusive).set("reverse", reverse);
                    const dsl::Layer s = registry().build("cumsum", "s", {in}, a);
                    const Halide::Buffer<Halide::float16_t> out(run_checked(s, x));
                    out.for_each_element([&](int c, int w, int h) {
                        // The coordinates of each element along the axis.
                        int at[3] = {c, w, h};
                        const int along = axis == 1 ? 0 : axis == 2 ? 2 : 1;
                        const int n = along == 0 ? 5 : along == 2 ? 3 : 7, here = at[along];
                        const int first = reverse ? n - 1 : 0, step = reverse ? -1 : 1;
                        const int last = exclusive ? here - step : here;
                        float sum = 0;
                        for (int i = first; reverse ? i >= last : i <= last; i += step) {
                            at[along] = i;
                            const float value = float(x(at[0], at[1], at[2]));
                            sum = i == first ? value : sum + value;
                        }
                        ASSERT_EQ(out(c, w, h).to_bits(), Halide::float16_t(sum).to_bits())
                            << "axis " << axis << " exclusive " << exclusive << " reverse "
                            << reverse << " at " << c << ", " << w << ", " << h << ": "
                            << float(out(c, w, h)) << " for " << sum;
                    });
                }
    // i32 sums exactly, wrapping around as numpy's int32 sums do (random 32-bit values).
    const dsl::Layer ints = dsl::Layer::input(test::activation("i", 5, 7, 3, dsl::ElemType::I32));
    const Halide::Buffer<int32_t> xi(test::random_input(ints.output(), 29));
    dsl::Attrs along_w;
    along_w.set("axis", int64_t(3));
    const Halide::Buffer<int32_t> sums(
        run_checked(registry().build("cumsum", "si", {ints}, along_w), xi));
    sums.for_each_element([&](int c, int w, int h) {
        uint32_t sum = 0;
        for (int i = 0; i <= w; ++i) sum += uint32_t(xi(c, i, h));
        ASSERT_EQ(sums(c, w, h), int32_t(sum));
    });
    dsl::Attrs batch;
    batch.set("axis", int64_t(0));
    EXPECT_THROW(registry().build("cumsum", "s", {in}, batch), dsl::LayerError);
    dsl::Attrs along_c;
    along_c.set("axis", int64_t(1));
    EXPECT_THROW(registry().build("cumsum", "s",
                                  {dsl::Layer::input(test::activation("q", 5, 7, 3))}, along_c),
                 dsl::LayerError);
}

// An i32 tensor of `shape` (held as the device holds it) for indices.
dsl::TensorDesc i32_tensor(const std::string &name, const std::vector<int64_t> &shape) {
    dsl::TensorDesc t;
    t.name = name;
    t.shape = dsl::Shape(shape);
    t.order = dsl::DimsOrder::identity(int(shape.size()));
    t.type = dsl::ElemType::I32;
    return t;
}

// The index gather_elements takes along an axis of `extent` for `index`: negative ones count
// from the end, and one outside [-extent, extent) is clamped into the extent.
int64_t clamped_index(int64_t index, int64_t extent) {
    return std::clamp<int64_t>(index < 0 ? index + extent : index, 0, extent - 1);
}

// GatherElements picks each element's own index, a tensor of i32 (negative ones from the end,
// ones outside the extent clamped), along each axis but the batch, the indices smaller than the
// data along the other axes.
TEST(DataMovement, GatherElementsPicksEachElementsIndexFromATensor) {
    const dsl::Layer in = dsl::Layer::input(test::activation("in", 5, 7, 3));
    const Halide::Buffer<uint8_t> x(test::random_input(in.output(), 19));
    dsl::TensorDesc t = test::activation("indices", 4, 6, 2);
    t.type = dsl::ElemType::I32;
    t.quant = {};
    const dsl::Layer indices = dsl::Layer::input(t);
    const int64_t extents[4] = {1, 5, 3, 7}; // N, C, H, W
    std::mt19937 rng(41);
    for (int64_t axis : {1, 2, 3}) {
        const int64_t n = extents[axis];
        Halide::Buffer<int32_t> k(algorithms::make_buffer(t));
        k.for_each_value([&](int32_t &v) { v = int32_t(int64_t(rng() % (4 * n)) - 2 * n); });
        const dsl::Layer g =
            registry().build("gather_elements", "g", {in, indices}, dsl::Attrs().set("axis", axis));
        EXPECT_EQ(g.output().shape.raw(), (std::vector<int64_t>{1, 4, 2, 6}));
        const Halide::Buffer<uint8_t> out(run_checked(g, {{"in", x}, {"indices", k}}));
        out.for_each_element([&](int c, int w, int h) {
            const int index = int(clamped_index(k(c, w, h), n));
            const int fc = axis == 1 ? index : c, fh = axis == 2 ? index : h,
                      fw = axis == 3 ? index : w;
            ASSERT_EQ(out(c, w, h), x(fc, fw, fh)) << "axis " << axis;
        });
    }
    // Float indices, indices of another rank, and picking along the batch are refused.
    dsl::TensorDesc reals = t;
    reals.type = dsl::ElemType::F16;
    EXPECT_THROW(registry().build("gather_elements", "g", {in, dsl::Layer::input(reals)},
                                  dsl::Attrs().set("axis", int64_t(1))),
                 dsl::LayerError);
    EXPECT_THROW(registry().build("gather_elements", "g",
                                  {in, dsl::Layer::input(i32_tensor("i", {1, 4, 2}))},
                                  dsl::Attrs().set("axis", int64_t(1))),
                 dsl::LayerError);
    const dsl::Layer batch = dsl::Layer::input(i32_tensor("b", {3, 5, 6}));
    EXPECT_THROW(registry().build("gather_elements", "g", {batch, batch},
                                  dsl::Attrs().set("axis", int64_t(0))),
                 dsl::LayerError);
}

// A batch of 3 images, each picking from its own image of the data with indices of its own
// (beyond fp16's integers, 4097 and 70000, clamped; negative ones from the end); and a lookup
// table, data of extent 1 along every axis but the last, which serves every index and image.
TEST(DataMovement, GatherElementsOfABatchAndOfALookupTable) {
    dsl::TensorDesc t;
    t.name = "data";
    t.shape = dsl::Shape{3, 5, 6};
    t.order = dsl::DimsOrder::identity(3);
    t.type = dsl::ElemType::F16;
    const dsl::Layer data = dsl::Layer::input(t);
    const dsl::Layer indices = dsl::Layer::input(i32_tensor("indices", {3, 2, 6}));
    std::mt19937 rng(43);
    std::uniform_real_distribution<float> reals(-4, 4);
    Halide::Buffer<Halide::float16_t> x(algorithms::make_buffer(t));
    x.for_each_value([&](Halide::float16_t &v) { v = Halide::float16_t(reals(rng)); });
    Halide::Buffer<int32_t> k(algorithms::make_buffer(indices.output()));
    k.for_each_value([&](int32_t &v) { v = int32_t(rng() % 11) - 5; });
    k(0, 1, 0, 1) = 4097;
    k(1, 2, 0, 2) = 70000;
    k(1, 3, 0, 0) = -70000;
    ASSERT_EQ(x.dimensions(), 4); // (c, x, y, n) = (C, L, 1, N)
    const Halide::Buffer<Halide::float16_t> picked(
        run_checked(registry().build("gather_elements", "g", {data, indices},
                                     dsl::Attrs().set("axis", int64_t(1))),
                    {{"data", x}, {"indices", k}}));
    ASSERT_EQ(picked.dim(0).extent(), 2);
    picked.for_each_element([&](int c, int l, int y, int n) {
        ASSERT_EQ(float(picked(c, l, y, n)),
                  float(x(int(clamped_index(k(c, l, y, n), 5)), l, y, n)))
            << "image " << n << " at " << c << ", " << l;
    });

    dsl::TensorDesc lookup = t;
    lookup.name = "table";
    lookup.shape = dsl::Shape{1, 1, 9};
    const dsl::Layer table = dsl::Layer::input(lookup);
    const Halide::Buffer<Halide::float16_t> w(real_input(lookup, 31));
    const Halide::Buffer<Halide::float16_t> looked_up(
        run_checked(registry().build("gather_elements", "l", {table, indices},
                                     dsl::Attrs().set("axis", int64_t(-1))),
                    {{"table", w}, {"indices", k}}));
    looked_up.for_each_element([&](int c, int l, int y, int n) {
        ASSERT_EQ(float(looked_up(c, l, y, n)),
                  float(w(0, int(clamped_index(k(c, l, y, n), 9)), 0)))
            << "image " << n << " at " << c << ", " << l;
    });
}

// Slice with steps of 2, -1 and -3 (from the end, clamped as ONNX clamps), a gather kernel.
TEST(DataMovement, SliceTakesEveryStepthElementBothWays) {
    const dsl::Layer in = f16_input("in", 9, 11, 5);
    const Halide::Buffer<Halide::float16_t> x(real_input(in.output(), 23));
    dsl::Attrs a;
    a.set("starts", std::vector<int64_t>{1, 100, -2})
        .set("ends", std::vector<int64_t>{9, -100, 0})
        .set("axes", std::vector<int64_t>{1, 2, 3})
        .set("steps", std::vector<int64_t>{2, -1, -3});
    const dsl::Layer s = registry().build("slice", "s", {in}, a);
    // C: 1, 3, 5, 7; H: 4 down to 0; W: 9, 6, 3 (0 excluded).
    EXPECT_EQ(s.output().shape.raw(), (std::vector<int64_t>{1, 4, 5, 3}));
    const Halide::Buffer<Halide::float16_t> out(run_checked(s, x));
    out.for_each_element([&](int c, int w, int h) {
        ASSERT_EQ(float(out(c, w, h)), float(x(1 + 2 * c, 9 - 3 * w, 4 - h)));
    });
    dsl::Attrs zero = a;
    zero.set("steps", std::vector<int64_t>{2, 0, 1});
    EXPECT_THROW(registry().build("slice", "s", {in}, zero), dsl::LayerError);
}

// Shape arithmetic takes empty parts of a shape (LayerNormalization's expanded form slices the
// prefix before axis 0): a slice of a constant may be empty, and an empty constant joins others.
// A computed tensor of an extent 0 has no device form: an empty slice of one stays an error.
TEST(DataMovement, EmptySlicesFoldForConstantsOnly) {
    const dsl::Layer shape = dsl::LayerRegistry::constant(
        "shape", dsl::const_buffer({dsl::ElemType::I64, {3}, {2, 7, 5}, {}}));
    auto slice = [&](const dsl::Layer &in, int64_t start, int64_t end, int64_t step) {
        return registry().build("slice", "s", {in},
                                dsl::Attrs()
                                    .set("starts", std::vector<int64_t>{start})
                                    .set("ends", std::vector<int64_t>{end})
                                    .set("axes", std::vector<int64_t>{0})
                                    .set("steps", std::vector<int64_t>{step}));
    };
    for (const auto &[start, end, step] : std::vector<std::tuple<int64_t, int64_t, int64_t>>{
             {0, 0, 1}, {2, 1, 1}, {1000, 1000, 1}, {0, 3, -1}, {-1, 5, -2}}) {
        SCOPED_TRACE(std::to_string(start) + ":" + std::to_string(end) + ":" +
                     std::to_string(step));
        const dsl::ConstValues empty = dsl::const_values(slice(shape, start, end, step));
        EXPECT_EQ(empty.shape, std::vector<int64_t>{0});
        EXPECT_TRUE(empty.ints.empty());
    }
    const dsl::Layer prefix = slice(shape, 0, 0, 1);
    const dsl::ConstValues tail = dsl::const_values(slice(shape, -1, -4, -2)); // 5, 2
    EXPECT_EQ(tail.ints, (std::vector<int64_t>{5, 2}));
    const dsl::Layer minus_one = dsl::LayerRegistry::constant(
        "minus_one", dsl::const_buffer({dsl::ElemType::I64, {1}, {-1}, {}}));
    const dsl::ConstValues joined = dsl::const_values(registry().build(
        "concat", "c", {prefix, minus_one, prefix}, dsl::Attrs().set("axis", int64_t(0))));
    EXPECT_EQ(joined.shape, std::vector<int64_t>{1});
    EXPECT_EQ(joined.ints, std::vector<int64_t>{-1});
    // Of rank 2, an empty part along axis 1 and rows of 3 halves and odd fractions.
    const dsl::Layer rows = dsl::LayerRegistry::constant(
        "rows",
        dsl::const_buffer({dsl::ElemType::F32, {2, 3}, {}, {0.5, -1.5, 2.5, 0.125, 3, -7}}));
    const dsl::Layer no_columns = registry().build("slice", "none", {rows},
                                                   dsl::Attrs()
                                                       .set("starts", std::vector<int64_t>{3})
                                                       .set("ends", std::vector<int64_t>{9})
                                                       .set("axes", std::vector<int64_t>{1}));
    EXPECT_EQ(dsl::const_values(no_columns).shape, (std::vector<int64_t>{2, 0}));
    const dsl::ConstValues both = dsl::const_values(registry().build(
        "concat", "both", {no_columns, rows, no_columns}, dsl::Attrs().set("axis", int64_t(-1))));
    EXPECT_EQ(both.shape, (std::vector<int64_t>{2, 3}));
    EXPECT_EQ(both.reals, (std::vector<double>{0.5, -1.5, 2.5, 0.125, 3, -7}));

    const dsl::Layer in = f16_input("in", 5, 7, 3);
    try {
        registry().build("slice", "s", {in},
                         dsl::Attrs()
                             .set("starts", std::vector<int64_t>{4})
                             .set("ends", std::vector<int64_t>{2})
                             .set("axes", std::vector<int64_t>{1}));
        FAIL() << "expected a LayerError";
    } catch (const dsl::LayerError &e) {
        EXPECT_STREQ(e.what(), "slice 's': axis 1: [4, 2) in steps of 1 of 5 is empty");
    }
}

// Size folds to the number of elements, an i64 scalar, from the shape alone.
TEST(DataMovement, SizeFoldsToTheNumberOfElements) {
    const dsl::Layer in = f16_input("in", 5, 7, 3);
    const dsl::ConstValues size = dsl::const_values(registry().build("size", "n", {in}, {}));
    EXPECT_EQ(size.type, dsl::ElemType::I64);
    EXPECT_TRUE(size.shape.empty());
    EXPECT_EQ(size.ints, std::vector<int64_t>{105});
}

// A model of one node `op` on a float input x of `shape`, its other inputs int64 initializers,
// computing y of `out_shape`.
onnx::ModelProto
one_node_model(const std::string &op, const std::vector<int64_t> &shape,
               const std::vector<int64_t> &out_shape,
               const std::vector<std::pair<std::string, std::vector<int64_t>>> &constants) {
    onnx::ModelProto m;
    m.set_ir_version(8);
    m.add_opset_import()->set_version(14);
    onnx::GraphProto &g = *m.mutable_graph();
    g.set_name(op);
    onnx::ValueInfoProto &x = *g.add_input();
    x.set_name("x");
    x.mutable_type()->mutable_tensor_type()->set_elem_type(onnx::TensorProto::FLOAT);
    for (int64_t d : shape)
        x.mutable_type()->mutable_tensor_type()->mutable_shape()->add_dim()->set_dim_value(d);
    onnx::NodeProto &node = *g.add_node();
    node.set_name("y");
    node.set_op_type(op);
    node.add_input("x");
    for (const auto &[name, values] : constants) {
        onnx::TensorProto &t = *g.add_initializer();
        t.set_name(name);
        t.set_data_type(onnx::TensorProto::INT64);
        if (values.size() != 1) t.add_dims(int64_t(values.size()));
        for (int64_t v : values) t.add_int64_data(v);
        node.add_input(name);
    }
    node.add_output("y");
    g.add_output()->set_name("y");
    g.mutable_output(0)->mutable_type()->mutable_tensor_type()->set_elem_type(
        onnx::TensorProto::FLOAT);
    for (int64_t d : out_shape)
        g.mutable_output(0)
            ->mutable_type()
            ->mutable_tensor_type()
            ->mutable_shape()
            ->add_dim()
            ->set_dim_value(d);
    return m;
}

// The imported model's layers as "op name shape", and its output for an input of the values
// 0, 1, 2, ... (in fp16, row-major; a rank-2 buffer holds its elements in that order), checked
// first to be what vpu27 computes.
std::pair<std::vector<std::string>, std::vector<float>> import_and_run(const onnx::ModelProto &m) {
    const std::string bytes = m.SerializeAsString();
    const frontend::ImportedModel model =
        frontend::import_onnx_bytes({bytes.begin(), bytes.end()}, "model.onnx");
    std::vector<std::string> layers;
    for (const dsl::Layer &layer : model.graph.layers())
        if (!layer.is_input())
            layers.push_back(layer.op() + " " + layer.name() + " " +
                             dsl::to_string(layer.output().shape));
    Halide::Buffer<Halide::float16_t> x(
        algorithms::make_buffer(model.graph.inputs().at(0).output()));
    float next = 0;
    for (Halide::float16_t *p = x.begin(); p != x.end(); ++p) *p = Halide::float16_t(next++);
    codegen::CheckOptions options;
    options.inputs = {x};
    const codegen::CheckResult r =
        codegen::check_against_reference(model.graph, target::load_target("vpu27"), options);
    EXPECT_TRUE(r.ok()) << r.report();
    const Halide::Buffer<Halide::float16_t> y(algorithms::run_reference(model.graph, {x})[0]);
    std::vector<float> values;
    for (const Halide::float16_t *p = y.begin(); p != y.end(); ++p) values.push_back(float(*p));
    return {layers, values};
}

// Trilu of a rank-2 tensor (its rows the device's batch) and Pad along axis 0 run on a leading
// unit dimension, named after the node, and compute what ONNX defines.
TEST(DataMovement, TriluOfRank2AndPadAlongAxis0RunOnALeadingUnitDimension) {
    const auto [trilu_layers, lower] =
        import_and_run(one_node_model("Trilu", {4, 5}, {4, 5}, {{"k", {1}}}));
    EXPECT_EQ(trilu_layers, (std::vector<std::string>{"unsqueeze y.x_unbatched 1x4x5",
                                                      "trilu y.unbatched 1x4x5", "squeeze y 4x5"}));
    ASSERT_EQ(lower.size(), 20u);
    for (int i = 0; i < 4; ++i)
        for (int j = 0; j < 5; ++j)
            EXPECT_EQ(lower[size_t(i * 5 + j)], j - i >= 1 ? float(i * 5 + j) : 0.0f)
                << i << ", " << j; // upper (the default) above the main diagonal
    const auto [pad_layers, padded] =
        import_and_run(one_node_model("Pad", {3, 2}, {6, 3}, {{"pads", {1, 0, 2, 1}}}));
    EXPECT_EQ(pad_layers, (std::vector<std::string>{"unsqueeze y.x_unbatched 1x3x2",
                                                    "pad y.unbatched 1x6x3", "squeeze y 6x3"}));
    // One row of zeros before, two after, a column of zeros after.
    EXPECT_EQ(padded, (std::vector<float>{0, 0, 0, 0, 1, 0, 2, 3, 0, 4, 5, 0, 0, 0, 0, 0, 0, 0}));
}

// GatherElements by constant indices (an int64 initializer, negative ones from the end): an i32
// constant the kernel reads as it reads computed ones.
TEST(DataMovementImport, GatherElementsByConstantIndices) {
    const auto [layers, picked] =
        import_and_run(one_node_model("GatherElements", {5}, {4}, {{"indices", {-1, 0, 3, -2}}}));
    EXPECT_EQ(layers, (std::vector<std::string>{"constant y.indices 4", "gather_elements y 4"}));
    EXPECT_EQ(picked, (std::vector<float>{4, 0, 3, 3}));
}

// Gather from a table x [5] by computed indices, an int64 graph input [2, 3] (i32 on the device;
// negative ones from the end, one outside the table clamped): gather_elements along the indices'
// last axis of the table as [1, 5].
TEST(DataMovementImport, GatherByComputedIndicesFromALookupTable) {
    onnx::ModelProto m = one_node_model("Gather", {5}, {2, 3}, {{"indices", {0}}});
    onnx::GraphProto &g = *m.mutable_graph();
    g.clear_initializer();
    onnx::ValueInfoProto &indices = *g.add_input();
    indices.set_name("indices");
    indices.mutable_type()->mutable_tensor_type()->set_elem_type(onnx::TensorProto::INT64);
    for (int64_t d : {2, 3})
        indices.mutable_type()->mutable_tensor_type()->mutable_shape()->add_dim()->set_dim_value(d);
    const std::string bytes = m.SerializeAsString();
    const frontend::ImportedModel model =
        frontend::import_onnx_bytes({bytes.begin(), bytes.end()}, "gather.onnx");
    std::vector<std::string> layers;
    for (const dsl::Layer &layer : model.graph.layers())
        if (!layer.is_input())
            layers.push_back(layer.op() + " " + layer.name() + " " +
                             dsl::to_string(layer.output().shape));
    EXPECT_EQ(layers, (std::vector<std::string>{"reshape y.table 1x5", "gather_elements y 2x3"}));
    std::map<std::string, Halide::Buffer<>> values;
    Halide::Buffer<Halide::float16_t> table(
        algorithms::make_buffer(model.graph.inputs().at(0).output()));
    for (int i = 0; i < 5; ++i) table(i, 0, 0) = Halide::float16_t(10 + i);
    // [2, 3]: a batch of 2 rows of 3, buffer (c, x, y, n) = (3, 1, 1, 2).
    Halide::Buffer<int32_t> k(algorithms::make_buffer(model.graph.inputs().at(1).output()));
    const int32_t picks[6] = {4, -1, 0, -5, 70000, 2};
    for (int i = 0; i < 6; ++i) k(i % 3, 0, 0, i / 3) = picks[i];
    codegen::CheckOptions options;
    options.inputs = {table, k};
    const codegen::CheckResult r =
        codegen::check_against_reference(model.graph, target::load_target("vpu27"), options);
    EXPECT_TRUE(r.ok()) << r.report();
    const Halide::Buffer<Halide::float16_t> y(
        algorithms::run_reference(model.graph, {table, k})[0]);
    const float want[6] = {14, 14, 10, 10, 14, 12};
    for (int i = 0; i < 6; ++i) EXPECT_EQ(float(y(i % 3, 0, 0, i / 3)), want[i]) << i;
}

class DataMovementNodeTest : public ::testing::TestWithParam<std::string> {};

TEST_P(DataMovementNodeTest, MatchesTheExpectedOutputs) {
    vpuc::testing::expect_node_test_passes(GetParam());
}

INSTANTIATE_TEST_SUITE_P(
    Onnx, DataMovementNodeTest,
    ::testing::Values("test_constant_pad", "test_edge_pad", "test_reflect_pad",
                      "test_tile_precomputed", "test_expand_dim_changed",
                      "test_expand_dim_unchanged", "test_depthtospace_crd_mode",
                      "test_depthtospace_dcr_mode", "test_spacetodepth",
                      "test_spacetodepth_example", "test_castlike_FLOAT_to_FLOAT16",
                      "test_castlike_DOUBLE_to_FLOAT", "test_cumsum_1d", "test_cumsum_2d_axis_0",
                      "test_cumsum_1d_reverse_exclusive", "test_gather_elements_0",
                      "test_gather_elements_1", "test_gather_elements_negative_indices",
                      "test_slice_neg_steps", "test_nllloss_NC_expanded",
                      "test_nllloss_NCd1d2_expanded", "test_nllloss_NCd1d2_with_weight_expanded",
                      "test_nllloss_NCd1d2d3_none_no_weight_negative_ii_expanded"),
    [](const ::testing::TestParamInfo<std::string> &info) { return info.param.substr(5); });

} // namespace
} // namespace vpuc
