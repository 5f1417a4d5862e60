// Tensors of rank 0 to 8: each maps onto the device's 4-D tensors keeping its elements'
// row-major order (dsl::device_view). Networks of ranks 2, 3, 5, 6 and 8 with a batch compile
// and match the reference on both targets; the blob keeps their shapes; what the device cannot
// do with a rank is an error naming the layer.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>

#include "algorithms/layers.h"
#include "algorithms/reference.h"
#include "algorithms/registry.h"
#include "codegen/check.h"
#include "codegen/dpu_match.h"
#include "dsl/graph_text.h"
#include "lowering_fixtures.h"
#include "vpu_target/blob.h"

namespace vpuc {
namespace {

using dsl::ElemType;

dsl::LayerRegistry &registry() {
    return algorithms::layer_registry();
}

// A graph tensor of any rank, in its logical order: u8 quantized (0.05, 120), or `type`.
dsl::TensorDesc tensor(const std::string &name, std::vector<int64_t> shape,
                       ElemType type = ElemType::U8) {
    dsl::TensorDesc t;
    t.name = name;
    t.order = dsl::DimsOrder::identity(int(shape.size()));
    t.shape = dsl::Shape(std::move(shape));
    t.type = type;
    if (type == ElemType::U8) t.quant = dsl::Quant::per_tensor(0.05f, 120);
    return t;
}

std::string shape_of(const dsl::TensorDesc &t) {
    return dsl::to_string(t.shape);
}

// Real values in [-3, 3) rounded to fp16, for an f16 tensor of any rank.
Halide::Buffer<> real_input(const dsl::TensorDesc &t, uint32_t seed) {
    const Halide::Buffer<> shape = algorithms::make_buffer(t);
    std::vector<int> extents;
    for (int d = 0; d < shape.dimensions(); ++d) extents.push_back(shape.dim(d).extent());
    return test::real_halves(extents, -3, 3, seed);
}

// The elements of `t` (of 2-byte elements) in row-major order, from its reference buffer.
std::vector<uint16_t> row_major_halves(const dsl::TensorDesc &t, const Halide::Buffer<> &b) {
    const std::vector<uint8_t> bytes = algorithms::to_memory_order(t, b);
    std::vector<uint16_t> halves(bytes.size() / 2);
    std::memcpy(halves.data(), bytes.data(), halves.size() * 2);
    return halves;
}

// The row-major index in `shape` of the element at `index`.
int64_t flat_index(const std::vector<int64_t> &shape, const std::vector<int64_t> &index) {
    int64_t flat = 0;
    for (size_t d = 0; d < shape.size(); ++d) flat = flat * shape[d] + index[d];
    return flat;
}

// Checks out = transpose(in, perm) element by element on the reference: out at index i is in
// at the index whose axis perm[d] is i[d].
void expect_transposed(const dsl::TensorDesc &in, const Halide::Buffer<> &in_values,
                       const dsl::TensorDesc &out, const Halide::Buffer<> &out_values,
                       const std::vector<int64_t> &perm) {
    const std::vector<uint16_t> x = row_major_halves(in, in_values);
    const std::vector<uint16_t> y = row_major_halves(out, out_values);
    const std::vector<int64_t> &from = in.shape.raw(), &to = out.shape.raw();
    ASSERT_EQ(x.size(), y.size());
    std::vector<int64_t> index(to.size(), 0), source(to.size());
    for (size_t i = 0; i < y.size(); ++i) {
        for (size_t d = 0; d < to.size(); ++d) source[size_t(perm[d])] = index[d];
        ASSERT_EQ(y[i], x[size_t(flat_index(from, source))]) << "element " << i;
        for (size_t d = to.size(); d-- > 0 && ++index[d] == to[d];) index[d] = 0;
    }
}

// int8 weights of `dims` in [-100, 100] with per-channel bias and requantization to u8.
algorithms::QuantWeights quant_weights(const std::vector<int> &dims, int out_channels,
                                       uint32_t seed) {
    std::mt19937 rng(seed);
    algorithms::QuantWeights w;
    w.weights = Halide::Buffer<int8_t>(dims);
    w.weights.for_each_value([&](int8_t &v) { v = int8_t(int(rng() % 201) - 100); });
    for (int c = 0; c < out_channels; ++c) {
        w.bias.push_back(int32_t(rng() % 4001) - 2000);
        w.requant.push_back(algorithms::fixed_point(0.0005 + 0.00003 * c));
    }
    w.output_quant = dsl::Quant::per_tensor(0.05f, 10);
    return w;
}

TEST(Ranks, DeviceViewsKeepTheRowMajorOrder) {
    // A scalar is one element, and its view keeps its rank 0 (an empty graph shape, set).
    const dsl::TensorDesc scalar = dsl::device_view(tensor("s", {}));
    EXPECT_EQ(shape_of(scalar), "1x1x1x1");
    ASSERT_TRUE(scalar.graph_shape);
    EXPECT_EQ(scalar.logical_shape().rank(), 0);
    EXPECT_EQ(shape_of(dsl::device_view(scalar)), "1x1x1x1");
    EXPECT_EQ(shape_of(dsl::device_view(tensor("k", {7}))), "1x7x1x1");
    EXPECT_EQ(shape_of(dsl::device_view(tensor("nk", {2, 7}))), "2x7x1x1");
    EXPECT_EQ(shape_of(dsl::device_view(tensor("ncl", {2, 7, 5}))), "2x7x1x5");
    const dsl::TensorDesc five = dsl::device_view(tensor("ncdhw", {2, 3, 4, 5, 6}));
    EXPECT_EQ(shape_of(five), "2x3x20x6");
    EXPECT_EQ(five.order, dsl::DimsOrder::NCHW());
    EXPECT_EQ(dsl::to_string(five.logical_shape()), "2x3x4x5x6");
    // From rank 5 on, the axes between C and the last one share H.
    EXPECT_EQ(shape_of(dsl::device_view(tensor("six", {2, 3, 4, 5, 6, 7}))), "2x3x120x7");
    const dsl::TensorDesc eight = dsl::device_view(tensor("eight", {2, 3, 2, 3, 2, 5, 3, 7}));
    EXPECT_EQ(shape_of(eight), "2x3x180x7");
    EXPECT_EQ(dsl::to_string(eight.logical_shape()), "2x3x2x3x2x5x3x7");
    // A 4-D tensor is its own view, in its own order.
    const dsl::TensorDesc nhwc = test::activation("a", 19, 5, 3);
    EXPECT_EQ(dsl::device_view(nhwc).order, dsl::DimsOrder::NHWC());
    EXPECT_FALSE(dsl::device_view(nhwc).graph_shape);

    // Axes: each on its own device dimension, but D and H of a 5-D tensor.
    using namespace dsl::dims;
    EXPECT_EQ(dsl::device_axis(dsl::Shape{7}, 0), C);
    EXPECT_EQ(dsl::device_axis(dsl::Shape{2, 7, 5}, 2), W);
    EXPECT_EQ(dsl::device_axis(dsl::Shape{2, 3, 4, 5, 6}, 4), W);
    EXPECT_FALSE(dsl::device_axis(dsl::Shape{2, 3, 4, 5, 6}, 2));
    EXPECT_EQ(dsl::device_axis(dsl::Shape{2, 3, 1, 5, 6}, 3), H);
    EXPECT_EQ(dsl::device_axis(dsl::Shape{2, 3, 4, 1, 6}, 2), H);
    EXPECT_FALSE(dsl::device_axis(dsl::Shape{2, 7}, 2));
    EXPECT_EQ(dsl::device_axis(dsl::Shape{2, 3, 4, 5, 6, 7}, 1), C);
    EXPECT_EQ(dsl::device_axis(dsl::Shape{2, 3, 4, 5, 6, 7}, 5), W);
    EXPECT_FALSE(dsl::device_axis(dsl::Shape{2, 3, 4, 5, 6, 7}, 3));
    EXPECT_EQ(dsl::device_axis(dsl::Shape{2, 3, 1, 5, 1, 7}, 3), H);
    EXPECT_FALSE(dsl::device_axis(dsl::Shape{2, 3, 1, 5, 6, 7}, 3));

    // Back to the graph's rank, or nothing when that rank cannot hold the result.
    EXPECT_EQ(dsl::to_string(*dsl::logical_shape({2, 7, 5}, {2, 9, 1, 4})), "2x9x4");
    EXPECT_FALSE(dsl::logical_shape({2, 7, 5}, {2, 9, 3, 4}));
    EXPECT_EQ(dsl::to_string(*dsl::logical_shape({2, 3, 4, 5, 6}, {2, 8, 20, 1})), "2x8x4x5x1");
    EXPECT_EQ(dsl::to_string(*dsl::logical_shape({2, 3, 1, 5, 6}, {2, 3, 2, 6})), "2x3x1x2x6");
    EXPECT_FALSE(dsl::logical_shape({2, 3, 4, 5, 6}, {2, 3, 7, 6}));
    EXPECT_EQ(dsl::to_string(*dsl::logical_shape({2, 3, 4, 5, 6, 7}, {2, 9, 120, 1})),
              "2x9x4x5x6x1");
    EXPECT_EQ(dsl::to_string(*dsl::logical_shape({2, 3, 1, 5, 1, 7}, {2, 3, 11, 7})),
              "2x3x1x11x1x7");
    EXPECT_EQ(dsl::to_string(*dsl::logical_shape({2, 3, 1, 1, 1, 7}, {2, 3, 11, 7})),
              "2x3x1x1x11x7");
    EXPECT_FALSE(dsl::logical_shape({2, 3, 4, 1, 6, 7}, {2, 3, 11, 7}));
    EXPECT_EQ(dsl::logical_shape({}, {1, 1, 1, 1}), dsl::Shape{});
    EXPECT_FALSE(dsl::logical_shape({}, {1, 2, 1, 1}));
    EXPECT_FALSE(dsl::device_axis(dsl::Shape{}, 0));

    // Another order than the logical one is 4-D only; ranks stop at 8.
    dsl::TensorDesc permuted = tensor("p", {2, 7, 5});
    permuted.order = dsl::DimsOrder({dsl::Dim(0), dsl::Dim(2), dsl::Dim(1)});
    EXPECT_THROW(dsl::device_view(permuted), dsl::LayerError);
    try {
        dsl::device_view(tensor("nine", {1, 2, 3, 1, 2, 3, 1, 2, 3}));
        FAIL() << "expected a LayerError";
    } catch (const dsl::LayerError &e) {
        EXPECT_EQ(std::string(e.what()), "tensor 'nine' is 1x2x3x1x2x3x1x2x3: the device "
                                         "computes tensors of rank 0 to 8");
    }
    // A tensor's order has its rank.
    dsl::TensorDesc wrong = tensor("w", {2, 7});
    wrong.order = dsl::DimsOrder::NCHW();
    try {
        dsl::Layer::input(wrong);
        FAIL() << "expected a LayerError";
    } catch (const dsl::LayerError &e) {
        EXPECT_NE(std::string(e.what()).find("tensor 'w' is 2x7 with the order"), std::string::npos)
            << e.what();
    }
}

// The bytes of a blob's sections: a tensor's device view in its order, row-major for ranks
// other than 4.
TEST(Ranks, MemoryOrderIsRowMajorForOtherRanksAndTheOrderFor4D) {
    const dsl::TensorDesc t = tensor("ncl", {2, 3, 4});
    Halide::Buffer<uint8_t> b(algorithms::make_buffer(t));
    ASSERT_EQ(b.dimensions(), 4); // (c, x, y, n) = (3, 4, 1, 2)
    b.for_each_element(
        [&](int c, int x, int y, int n) { b(c, x, y, n) = uint8_t(n * 12 + c * 4 + x + y); });
    const std::vector<uint8_t> bytes = algorithms::to_memory_order(t, b);
    for (size_t i = 0; i < bytes.size(); ++i) EXPECT_EQ(bytes[i], i) << i;
    const Halide::Buffer<uint8_t> back(algorithms::from_memory_order(t, bytes));
    EXPECT_EQ(test::bytes_of(back), test::bytes_of(b));
    EXPECT_THROW(algorithms::from_memory_order(t, {1, 2}), algorithms::ReferenceError);
}

class RankNetworks : public ::testing::TestWithParam<std::string> {};

// A classifier head with a batch of 2: conv on an NHWC image, flattened to [2, K] (a SHAVE
// kernel: NHWC bytes are not in logical order), a matmul on the DPU and a softmax along axis 1,
// both of rank 2.
TEST_P(RankNetworks, ClassifierHeadOfRank2) {
    const target::Target target = target::load_target(GetParam());
    dsl::TensorDesc image = test::activation("image", 19, 5, 3);
    image.shape = dsl::Shape{2, 19, 3, 5};
    const dsl::Layer in = dsl::Layer::input(image);
    const dsl::Layer conv = test::conv3x3("conv", in, 21, 3);
    const dsl::Layer flat = registry().build("flatten", "flat", {conv}, {});
    ASSERT_EQ(shape_of(flat.output()), "2x315");
    const dsl::Layer fc = algorithms::matmul("fc", flat, quant_weights({315, 37}, 37, 9));
    EXPECT_EQ(shape_of(fc.output()), "2x37");
    EXPECT_TRUE(codegen::try_match_dpu(fc, target)) << "a rank-2 matmul runs on the DPU";
    const dsl::Layer prob = algorithms::softmax("prob", fc, dsl::Dim(1));
    EXPECT_EQ(shape_of(prob.output()), "2x37");
    const test::Checked checked = test::compile_and_check(dsl::Graph("head", {prob, fc}), target);
    // The blob keeps the graph's shapes, row-major.
    const auto *outputs = blob::GetBlob(checked.blob.data())->header()->outputs();
    ASSERT_EQ(outputs->size(), 2u);
    for (const auto *io : *outputs) {
        EXPECT_EQ(io->layout(), blob::Layout::ND);
        ASSERT_EQ(io->shape()->size(), 2u);
        EXPECT_EQ(io->shape()->Get(0), 2u);
        EXPECT_EQ(io->shape()->Get(1), 37u);
    }
}

// A 1-D convolution on [N, C, L] (rank 3: a window over W), its output transposed to
// [N, L, C], and a max pool along L; a batch of 2 and odd extents.
TEST_P(RankNetworks, Conv1dOfRank3) {
    const target::Target target = target::load_target(GetParam());
    const dsl::Layer in = dsl::Layer::input(tensor("signal", {2, 19, 37}));
    algorithms::Conv2dParams p;
    p.pad_left = p.pad_right = 1;
    p.activation = algorithms::Activation::relu();
    const dsl::Layer conv = algorithms::conv2d("conv", in, quant_weights({19, 3, 1, 21}, 21, 4), p);
    EXPECT_EQ(shape_of(conv.output()), "2x21x37");
    algorithms::PoolParams pool;
    pool.kernel_w = pool.stride_w = 2;
    const dsl::Layer pooled = algorithms::max_pool("pool", conv, pool);
    EXPECT_EQ(shape_of(pooled.output()), "2x21x18");
    dsl::Attrs perm;
    perm.set("perm", std::vector<int64_t>{0, 2, 1});
    const dsl::Layer moved = registry().build("transpose", "moved", {conv}, perm);
    EXPECT_EQ(shape_of(moved.output()), "2x37x21");
    const dsl::Graph graph("conv1d", {pooled, moved});
    test::compile_and_check(graph, target);
    // The graph text keeps the ranks and reads back.
    const std::string text = dsl::print_graph(graph, {true, true});
    EXPECT_NE(text.find("2x19x37 u8 ND3"), std::string::npos) << text;
    EXPECT_EQ(dsl::print_graph(dsl::read_graph(text, registry()), {true, true}), text);

    // The transpose against index arithmetic: moved[n][l][c] = conv[n][c][l].
    const Halide::Buffer<> x = test::random_input(in.output(), 3);
    const std::vector<Halide::Buffer<>> r =
        algorithms::run_reference(dsl::Graph("check", {conv, moved}), {x});
    const std::vector<uint8_t> c = algorithms::to_memory_order(conv.output(), r[0]);
    const std::vector<uint8_t> m = algorithms::to_memory_order(moved.output(), r[1]);
    for (int n = 0; n < 2; ++n)
        for (int ch = 0; ch < 21; ++ch)
            for (int l = 0; l < 37; ++l)
                ASSERT_EQ(m[size_t((n * 37 + l) * 21 + ch)], c[size_t((n * 21 + ch) * 37 + l)]);
}

// fp16 [N, C, D, H, W]: an add, a mul broadcasting over D and H, a softmax along C and a
// slice of one D (H whole, so a view); a batch of 2.
TEST_P(RankNetworks, PointwiseSoftmaxAndSliceOfRank5) {
    const target::Target target = target::load_target(GetParam());
    const dsl::Layer a = dsl::Layer::input(tensor("a", {2, 6, 2, 3, 5}, ElemType::F16));
    const dsl::Layer b = dsl::Layer::input(tensor("b", {2, 6, 2, 3, 5}, ElemType::F16));
    const dsl::Layer g = dsl::Layer::input(tensor("g", {2, 6, 1, 1, 5}, ElemType::F16));
    const dsl::Layer sum = algorithms::eltwise("sum", algorithms::EltwiseOp::Add, a, b);
    const dsl::Layer gated = algorithms::eltwise("gated", algorithms::EltwiseOp::Mul, sum, g);
    EXPECT_EQ(shape_of(gated.output()), "2x6x2x3x5");
    const dsl::Layer prob = algorithms::softmax("prob", gated, dsl::dims::C);
    dsl::Attrs s;
    s.set("starts", std::vector<int64_t>{1}).set("ends", std::vector<int64_t>{2});
    s.set("axes", std::vector<int64_t>{2});
    const dsl::Layer second = registry().build("slice", "second", {prob}, s);
    EXPECT_EQ(shape_of(second.output()), "2x6x1x3x5");
    test::compile_and_check(dsl::Graph("five", {second, gated}), target, {}, real_input, 1);
}

// Rank 6: PixelShuffle as PyTorch exports it, [N, C*r*r, H, W] -> [N, C, r, r, H, W] (a view),
// transposed (0, 1, 4, 2, 5, 3) to [N, C, H, r, W, r] (axes sharing the device's H move: a
// kernel on logical coordinates) and back to [N, C, H*r, W*r]; a sigmoid and a softmax along
// the last axis of the rank-6 tensor, and a transpose moving every axis but the batch of one
// of odd extents, back to rank 6 by an unsqueeze. fp16 real values, a batch of 2.
TEST_P(RankNetworks, PixelShuffleAndTransposesOfRank6) {
    const target::Target target = target::load_target(GetParam());
    const dsl::Layer x = dsl::Layer::input(tensor("x", {2, 18, 5, 7}, ElemType::F16));
    dsl::Attrs split;
    split.set("shape", std::vector<int64_t>{2, 2, 3, 3, 5, 7});
    const dsl::Layer six = registry().build("reshape", "six", {x}, split);
    dsl::Attrs shuffle;
    const std::vector<int64_t> shuffle_perm{0, 1, 4, 2, 5, 3};
    shuffle.set("perm", shuffle_perm);
    const dsl::Layer shuffled = registry().build("transpose", "shuffled", {six}, shuffle);
    EXPECT_EQ(shape_of(shuffled.output()), "2x2x5x3x7x3");
    dsl::Attrs merge;
    merge.set("shape", std::vector<int64_t>{2, 2, 15, 21});
    const dsl::Layer image = registry().build("reshape", "image", {shuffled}, merge);

    const dsl::Layer y = dsl::Layer::input(tensor("y", {2, 3, 5, 2, 3, 7}, ElemType::F16));
    const dsl::Layer gate = algorithms::sigmoid("gate", y);
    const dsl::Layer prob = algorithms::softmax("prob", gate, dsl::Dim(5));
    EXPECT_EQ(shape_of(prob.output()), "2x3x5x2x3x7");
    dsl::Attrs every;
    const std::vector<int64_t> every_perm{0, 3, 5, 1, 4, 2};
    every.set("perm", every_perm);
    const dsl::Layer moved = registry().build("transpose", "moved", {prob}, every);
    EXPECT_EQ(shape_of(moved.output()), "2x2x7x3x3x5");
    dsl::Attrs squeeze;
    squeeze.set("axes", std::vector<int64_t>{1});
    const dsl::Layer narrow = registry().build("slice", "narrow", {moved}, [] {
        dsl::Attrs s;
        s.set("starts", std::vector<int64_t>{1}).set("ends", std::vector<int64_t>{2});
        s.set("axes", std::vector<int64_t>{1});
        return s;
    }());
    const dsl::Layer five = registry().build("squeeze", "five", {narrow}, squeeze);
    EXPECT_EQ(shape_of(five.output()), "2x7x3x3x5");
    dsl::Attrs unit;
    unit.set("axes", std::vector<int64_t>{4});
    const dsl::Layer back = registry().build("unsqueeze", "back", {five}, unit);
    EXPECT_EQ(shape_of(back.output()), "2x7x3x3x1x5");

    const dsl::Graph graph("six", {image, moved, back});
    const test::Checked checked = test::compile_and_check(graph, target, {}, real_input, 1);
    // The blob keeps the graph's shapes, row-major, rank 6 too.
    const auto *outputs = blob::GetBlob(checked.blob.data())->header()->outputs();
    ASSERT_EQ(outputs->size(), 3u);
    EXPECT_EQ(outputs->Get(1)->layout(), blob::Layout::ND);
    ASSERT_EQ(outputs->Get(1)->shape()->size(), 6u);
    EXPECT_EQ(outputs->Get(1)->shape()->Get(2), 7u);
    ASSERT_EQ(outputs->Get(2)->shape()->size(), 6u);
    EXPECT_EQ(outputs->Get(2)->shape()->Get(4), 1u);

    // The transposes against index arithmetic on the reference.
    const std::vector<Halide::Buffer<>> inputs{real_input(x.output(), 3),
                                               real_input(y.output(), 4)};
    const std::vector<Halide::Buffer<>> r =
        algorithms::run_reference(dsl::Graph("check", {six, shuffled, image, prob, moved}), inputs);
    expect_transposed(six.output(), r[0], shuffled.output(), r[1], shuffle_perm);
    expect_transposed(prob.output(), r[3], moved.output(), r[4], every_perm);
    // PixelShuffle: image[n][c][h * 3 + i][w * 3 + j] = x[n][c * 9 + i * 3 + j][h][w].
    const std::vector<uint16_t> in = row_major_halves(x.output(), inputs[0]);
    const std::vector<uint16_t> out = row_major_halves(image.output(), r[2]);
    for (int64_t n = 0; n < 2; ++n)
        for (int64_t c = 0; c < 2; ++c)
            for (int64_t i = 0; i < 3; ++i)
                for (int64_t j = 0; j < 3; ++j)
                    for (int64_t h = 0; h < 5; ++h)
                        for (int64_t w = 0; w < 7; ++w)
                            ASSERT_EQ(out[size_t(flat_index({2, 2, 15, 21},
                                                            {n, c, h * 3 + i, w * 3 + j}))],
                                      in[size_t(flat_index({2, 18, 5, 7},
                                                           {n, c * 9 + i * 3 + j, h, w}))]);
}

// Rank 8, the highest: an add broadcasting along the axes sharing the device's H, a transpose
// of odd extents moving them and C and W, and a reshape to rank 2.
TEST_P(RankNetworks, TransposeAndReshapeOfRank8) {
    const target::Target target = target::load_target(GetParam());
    const dsl::Layer a = dsl::Layer::input(tensor("a", {2, 3, 2, 3, 1, 5, 3, 7}, ElemType::F16));
    const dsl::Layer b = dsl::Layer::input(tensor("b", {2, 3, 1, 1, 1, 1, 1, 7}, ElemType::F16));
    const dsl::Layer sum = algorithms::eltwise("sum", algorithms::EltwiseOp::Add, a, b);
    dsl::Attrs t;
    const std::vector<int64_t> perm{0, 5, 7, 2, 4, 1, 6, 3};
    t.set("perm", perm);
    const dsl::Layer moved = registry().build("transpose", "moved", {sum}, t);
    EXPECT_EQ(shape_of(moved.output()), "2x5x7x2x1x3x3x3");
    const dsl::Layer flat = registry().build("flatten", "flat", {moved}, {});
    EXPECT_EQ(shape_of(flat.output()), "2x1890");
    test::compile_and_check(dsl::Graph("eight", {flat, moved}), target, {}, real_input, 1);
    const std::vector<Halide::Buffer<>> inputs{real_input(a.output(), 5),
                                               real_input(b.output(), 6)};
    const std::vector<Halide::Buffer<>> r =
        algorithms::run_reference(dsl::Graph("check", {sum, moved}), inputs);
    expect_transposed(sum.output(), r[0], moved.output(), r[1], perm);
}

// A reshape changing the batch moves whole images (a view of the bytes), so images computed
// one at a time on either side of it meet: a sigmoid per row of [4, 7], a softmax over all 28
// values of the [1, 28] they flatten to (axis 0), and back to 4 rows as [2, 2, 7].
TEST_P(RankNetworks, ImagesMeetAcrossAReshapeChangingTheBatch) {
    const target::Target target = target::load_target(GetParam());
    const dsl::Layer x = dsl::Layer::input(tensor("x", {4, 7}, ElemType::F16));
    const dsl::Layer rows = algorithms::sigmoid("rows", x);
    dsl::Attrs axis0;
    axis0.set("axis", int64_t(0));
    const dsl::Layer flat = registry().build("flatten", "flat", {rows}, axis0);
    EXPECT_EQ(shape_of(flat.output()), "1x28");
    const dsl::Layer prob = algorithms::softmax("prob", flat, dsl::dims::C);
    dsl::Attrs shape;
    shape.set("shape", std::vector<int64_t>{2, 2, 7});
    const dsl::Layer back = registry().build("reshape", "back", {prob}, shape);
    const dsl::Graph graph("images", {back, flat});
    const Halide::Buffer<Halide::float16_t> in = test::real_halves({7, 1, 1, 4}, -3, 3, 5);
    // Index arithmetic: element i of the output (row-major) is the softmax of all 28 sigmoids.
    std::vector<double> sigmoids, s;
    double sum = 0;
    for (int n = 0; n < 4; ++n)
        for (int k = 0; k < 7; ++k) {
            const double v = 1 / (1 + std::exp(-double(in(k, 0, 0, n))));
            sigmoids.push_back(v);
            s.push_back(std::exp(float(Halide::float16_t(float(v)))));
            sum += s.back();
        }
    const std::vector<Halide::Buffer<>> out = algorithms::run_reference(graph, {in});
    const Halide::Buffer<Halide::float16_t> got(out[0]);
    ASSERT_EQ(got.dimensions(), 4); // (c, x, y, n) of [2, 2, 1, 7]
    for (int n = 0; n < 2; ++n)
        for (int c = 0; c < 2; ++c)
            for (int w = 0; w < 7; ++w)
                EXPECT_NEAR(float(got(c, w, 0, n)), s[size_t((n * 2 + c) * 7 + w)] / sum, 2e-4)
                    << n << " " << c << " " << w;
    const Halide::Buffer<Halide::float16_t> flat_out(out[1]);
    for (int i = 0; i < 28; ++i)
        EXPECT_NEAR(float(flat_out(i, 0, 0)), sigmoids[size_t(i)], 1e-3) << i;
    codegen::CheckOptions check;
    check.inputs = {in};
    const codegen::CheckResult r = codegen::check_against_reference(graph, target, check);
    EXPECT_TRUE(r.ok()) << r.report();
}

INSTANTIATE_TEST_SUITE_P(Targets, RankNetworks, ::testing::Values("vpu27", "vpu20"));

// What the device cannot do with a rank is an error naming the layer and the axis or tensor.
TEST(Ranks, WhatTheDeviceCannotDoIsAnErrorNamingTheLayer) {
    auto expect_error = [](const std::function<void()> &build, const std::string &words) {
        try {
            build();
            ADD_FAILURE() << "no error; expected: " << words;
        } catch (const dsl::LayerError &e) {
            EXPECT_NE(std::string(e.what()).find(words), std::string::npos) << e.what();
        }
    };
    const dsl::Layer five = dsl::Layer::input(tensor("five", {1, 4, 2, 3, 5}));
    expect_error([&] { test::conv3x3("c", five, 16, 1); },
                 "conv2d 'c': input 'five' is 1x4x2x3x5; a window slides over H and W");
    const dsl::Layer three = dsl::Layer::input(tensor("three", {1, 4, 5}));
    const dsl::Layer two = dsl::Layer::input(tensor("two", {4, 5}));
    expect_error([&] { algorithms::eltwise("add", algorithms::EltwiseOp::Add, three, two); },
                 "add 'add': input 'three' is 1x4x5 and 'two' 4x5; give them one rank");
    expect_error([&] { algorithms::softmax("s", five, dsl::Dim(2)); },
                 "softmax 's': axis 2 of 'five' (1x4x2x3x5) shares the device's H");
    expect_error([&] { algorithms::softmax("s", three, dsl::Dim(0)); },
                 "softmax 's': axis 0 of 'three' (1x4x5) is the batch");
    const dsl::Layer d = dsl::Layer::input(tensor("d", {1, 4, 2, 1, 5}));
    const dsl::Layer h = dsl::Layer::input(tensor("h", {1, 4, 1, 2, 5}));
    expect_error([&] { algorithms::eltwise("m", algorithms::EltwiseOp::Max, d, h); },
                 "max 'm': broadcasting 1x4x2x1x5 with 1x4x1x2x5 along axes that share the "
                 "device's H");
    dsl::Attrs s;
    s.set("starts", std::vector<int64_t>{1}).set("ends", std::vector<int64_t>{2});
    s.set("axes", std::vector<int64_t>{3});
    expect_error([&] { registry().build("slice", "cut", {five}, s); },
                 "slice 'cut': cuts 1x4x2x3x5 along an axis sharing the device's H while an "
                 "axis inside it is not whole");
    const dsl::Layer six = dsl::Layer::input(tensor("six", {1, 4, 2, 3, 2, 5}));
    expect_error([&] { algorithms::softmax("s", six, dsl::Dim(3)); },
                 "softmax 's': axis 3 of 'six' (1x4x2x3x2x5) shares the device's H");
    expect_error([&] { registry().build("slice", "cut", {six}, s); },
                 "slice 'cut': cuts 1x4x2x3x2x5 along an axis sharing the device's H");
    dsl::Attrs nine;
    nine.set("axes", std::vector<int64_t>{0, 2, 4});
    expect_error([&] { registry().build("unsqueeze", "u", {six}, nine); },
                 "unsqueeze 'u': the output 1x1x1x4x1x2x3x2x5 has rank 9; the device computes "
                 "tensors of rank 0 to 8");
    algorithms::PoolParams tall;
    tall.kernel_h = 2;
    expect_error([&] { algorithms::max_pool("p", three, tall); }, "the window");
}

// An NCHW input's section holds NCHW bytes: check_against_reference gives the simulator the
// input in the blob's order and reads each output back from its own.
TEST(Ranks, CheckAgainstReferenceFeedsEachSectionInItsOrder) {
    const target::Target target = target::load_target("vpu27");
    dsl::TensorDesc image = test::activation("image", 19, 13, 11);
    image.order = dsl::DimsOrder::NCHW();
    const dsl::Layer in = dsl::Layer::input(image);
    test::compile_and_check(dsl::Graph("nchw", {test::conv3x3("conv", in, 21, 3)}), target);
}

} // namespace
} // namespace vpuc
