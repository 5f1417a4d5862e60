// Windows over rank-3 inputs (1-D convs and pools), the pool attributes ceil_mode,
// count_include_pad and max_pool's dilations, 3-D windows (conv3d, max_pool3d, avg_pool3d),
// MaxPool's Indices (max_pool_indices) and ConvTranspose (conv_transpose): the ONNX backend test
// data (Debian's libonnx-testdata) match their expected outputs; the SHAVE layers compute what
// a direct loop here does, and the device what the CPU reference does, on odd shapes, with
// random real values and exact small fractions; what the DPU cannot pool runs on the SHAVEs;
// bad attributes are errors naming the layer.
#include <gtest/gtest.h>
#include <onnx/onnx_pb.h>

#include <array>
#include <cmath>
#include <random>
#include <utility>

#include "algorithms/reference.h"
#include "algorithms/registry.h"
#include "codegen/check.h"
#include "codegen/dpu_match.h"
#include "dsl/constant_values.h"
#include "frontend/onnx_import.h"
#include "onnx_node_test.h"
#include "vpu_target/simulator.h"

using namespace vpuc;

namespace {

class BackendTest : public ::testing::TestWithParam<std::pair<std::string, std::string>> {};

TEST_P(BackendTest, MatchesTheExpectedOutputs) {
    vpuc::testing::expect_backend_test_passes(GetParam().first, GetParam().second);
}

std::pair<std::string, std::string> node(const std::string &test) {
    return {"node", test};
}
std::pair<std::string, std::string> pytorch(const std::string &test) {
    return {"pytorch-converted", test};
}

INSTANTIATE_TEST_SUITE_P(
    Onnx, BackendTest,
    ::testing::Values(
        node("test_averagepool_1d_default"), node("test_maxpool_1d_default"),
        node("test_averagepool_2d_ceil"), node("test_maxpool_2d_ceil"),
        node("test_averagepool_2d_pads"), node("test_averagepool_2d_same_lower"),
        node("test_averagepool_2d_precomputed_same_upper"), node("test_maxpool_2d_dilations"),
        pytorch("test_Conv1d"), pytorch("test_Conv1d_dilated"), pytorch("test_Conv1d_groups"),
        pytorch("test_Conv1d_pad2size1"), pytorch("test_Conv1d_stride"),
        pytorch("test_AvgPool1d_stride"), pytorch("test_MaxPool1d_stride"),
        pytorch("test_MaxPool1d_stride_padding_dilation"),
        pytorch("test_MaxPool2d_stride_padding_dilation"), node("test_averagepool_3d_default"),
        node("test_maxpool_3d_default"), node("test_maxpool_with_argmax_2d_precomputed_pads"),
        node("test_maxpool_with_argmax_2d_precomputed_strides"),
        pytorch("test_Conv3d_dilated_strided"), pytorch("test_Conv3d_groups"),
        pytorch("test_Conv3d_stride_padding"), pytorch("test_AvgPool3d_stride"),
        pytorch("test_MaxPool3d_stride_padding"), node("test_convtranspose"),
        node("test_convtranspose_1d"), node("test_convtranspose_3d"),
        node("test_convtranspose_autopad_same"), node("test_convtranspose_dilations"),
        node("test_convtranspose_kernel_shape"), node("test_convtranspose_output_shape"),
        node("test_convtranspose_pads"), pytorch("test_ConvTranspose2d")),
    [](const ::testing::TestParamInfo<std::pair<std::string, std::string>> &info) {
        std::string name = info.param.first + "_" + info.param.second.substr(5);
        for (char &c : name)
            if (c == '-') c = '_';
        return name;
    });

const dsl::LayerRegistry &registry() {
    return algorithms::layer_registry();
}

// A graph input of `shape` (NCHW for rank 4, row-major otherwise), fp16 or u8 (0.05, 120).
dsl::Layer input(const std::vector<int64_t> &shape, dsl::ElemType type = dsl::ElemType::F16) {
    dsl::TensorDesc t;
    t.name = "in";
    t.shape = dsl::Shape(shape);
    t.type = type;
    if (dsl::is_quantized_int(type)) t.quant = dsl::Quant::per_tensor(0.05f, 120);
    t.order =
        shape.size() == 4 ? dsl::DimsOrder::NCHW() : dsl::DimsOrder::identity(int(shape.size()));
    return dsl::Layer::input(t);
}

dsl::Attrs window(std::vector<int64_t> kernel, std::vector<int64_t> strides,
                  std::vector<int64_t> pads, int64_t ceil_mode) {
    dsl::Attrs a;
    a.set("kernel_shape", std::move(kernel));
    a.set("strides", std::move(strides));
    a.set("pads", std::move(pads));
    a.set("ceil_mode", ceil_mode);
    return a;
}

// Compiles `output` for vpu27 and vpu20 and runs it on the simulator with random real inputs
// (or `inputs`), expecting the CPU reference's results.
void expect_matches_reference(const dsl::Layer &output,
                              const std::vector<Halide::Buffer<>> &inputs = {}) {
    for (const char *name : {"vpu27", "vpu20"}) {
        codegen::CheckOptions options;
        options.inputs = inputs;
        const codegen::CheckResult r = codegen::check_against_reference(
            dsl::Graph(output.name(), {output}), target::load_target(name), options);
        EXPECT_TRUE(r.ok()) << name << ": " << r.report();
    }
}

// Whether the layer runs on the DPU (else on the SHAVEs).
bool on_dpu(const dsl::Layer &layer) {
    return codegen::try_match_dpu(layer).has_value();
}

// Averages whose divisor varies (count_include_pad 0 with padding, ceil_mode windows past the
// padding) and dilated max pools run on the SHAVEs; max pools in ceil_mode and averages whose
// windows all count whole stay on the DPU; each computes what the reference does.
TEST(Windows, PoolsOnOddShapesMatchTheReference) {
    struct Case {
        std::string op;
        std::vector<int64_t> shape;
        dsl::ElemType type;
        dsl::Attrs attrs;
        bool dpu;
    };
    const dsl::ElemType f16 = dsl::ElemType::F16, u8 = dsl::ElemType::U8;
    dsl::Attrs exclude_pad = window({3, 3}, {2, 2}, {1, 1, 1, 1}, 1);
    exclude_pad.set("count_include_pad", int64_t(0));
    dsl::Attrs past_pad_1d = window({1, 4}, {1, 3}, {0, 2, 0, 1}, 1);
    dsl::Attrs exclude_pad_1d = window({1, 5}, {1, 2}, {0, 2, 0, 1}, 0);
    exclude_pad_1d.set("count_include_pad", int64_t(0));
    dsl::Attrs dilated = window({3, 2}, {1, 2}, {1, 1, 1, 1}, 0);
    dilated.set("dilations", std::vector<int64_t>{2, 3});
    dsl::Attrs dilated_1d = window({1, 3}, {1, 2}, {0, 2, 0, 1}, 1);
    dilated_1d.set("dilations", std::vector<int64_t>{1, 2});
    const std::vector<Case> cases = {
        {"avg_pool", {1, 19, 13, 11}, f16, exclude_pad, false},
        {"avg_pool", {2, 17, 23}, f16, past_pad_1d, false},
        {"avg_pool", {1, 21, 31}, f16, exclude_pad_1d, false},
        {"max_pool", {1, 21, 17, 13}, f16, dilated, false},
        {"max_pool", {1, 21, 17, 13}, u8, dilated, false},
        {"max_pool", {1, 18, 29}, f16, dilated_1d, false},
        // 12 + 2 pads: the last of 7 windows reaches 1 past the padding.
        {"max_pool", {1, 21, 12, 12}, u8, window({3, 3}, {2, 2}, {1, 1, 1, 1}, 1), true},
        {"max_pool", {1, 19, 12, 37}, f16, window({2, 3}, {2, 2}, {0, 1, 0, 1}, 1), true},
        // 13 - 3 is a multiple of the stride: ceil_mode changes nothing.
        {"avg_pool", {1, 23, 13, 13}, u8, window({3, 3}, {2, 2}, {0, 0, 0, 0}, 1), true},
        {"avg_pool", {1, 17, 10}, f16, window({1, 3}, {1, 3}, {0, 0, 0, 0}, 1), false},
    };
    for (const Case &c : cases) {
        SCOPED_TRACE(c.op + " " + dsl::to_string(dsl::Shape(c.shape)) + " " +
                     dsl::to_string(c.type));
        const dsl::Layer pool = registry().build(c.op, "pool", {input(c.shape, c.type)}, c.attrs);
        std::string why;
        EXPECT_EQ(codegen::try_match_dpu(pool, &why).has_value(), c.dpu) << why;
        expect_matches_reference(pool);
    }
}

// x = 0.25, 0.5, 0.75, 1, 1.25; a window of 3, stride 2, pads [1, 0], ceil_mode: 3 windows,
// from -1, 1 and 3, the last reaching past the input.
TEST(Windows, CeilModeAndCountIncludePadGiveExactAverages) {
    const dsl::Layer in = input({1, 1, 5});
    Halide::Buffer<Halide::float16_t> x(1, 5, 1);
    for (int i = 0; i < 5; ++i) x(0, i, 0) = Halide::float16_t(0.25 * (i + 1));
    struct Case {
        std::string op;
        int64_t count_include_pad;
        std::vector<double> want;
    };
    for (const Case &c :
         {Case{"avg_pool", 0, {0.375, 0.75, 1.125}}, Case{"avg_pool", 1, {0.25, 0.75, 1.125}},
          Case{"max_pool", -1, {0.5, 1, 1.25}}}) {
        SCOPED_TRACE(c.op + " count_include_pad " + std::to_string(c.count_include_pad));
        dsl::Attrs a = window({1, 3}, {1, 2}, {0, 1, 0, 0}, 1);
        if (c.count_include_pad >= 0) a.set("count_include_pad", c.count_include_pad);
        const dsl::Layer pool = registry().build(c.op, "pool", {in}, a);
        EXPECT_EQ(pool.output().shape, dsl::Shape({1, 1, 3}));
        const Halide::Buffer<Halide::float16_t> y = algorithms::run_reference(pool, {x});
        for (int i = 0; i < 3; ++i) EXPECT_EQ(double(y(0, i, 0)), c.want[size_t(i)]) << i;
        expect_matches_reference(pool, {x});
    }
}

// Without ceil_mode the last window is left out; with it, a window that would start in the
// padding after the input is not counted.
TEST(Windows, CeilModeRoundsUpToWindowsStartingBeforeTheEndPadding) {
    auto width = [](int64_t w, std::vector<int64_t> pads, int64_t ceil_mode) {
        return registry()
            .build("max_pool", "pool", {input({1, 16, w})},
                   window({1, 2}, {1, 2}, std::move(pads), ceil_mode))
            .output()
            .shape[dsl::Dim(2)];
    };
    EXPECT_EQ(width(9, {0, 0, 0, 0}, 0), 4);
    EXPECT_EQ(width(9, {0, 0, 0, 0}, 1), 5);
    // 8 + 1: windows from -1, 1, 3, 5, 7; one from 9 would start in the padding.
    EXPECT_EQ(width(8, {0, 1, 0, 1}, 0), 5);
    EXPECT_EQ(width(8, {0, 1, 0, 1}, 1), 5);
}

TEST(Windows, BadPoolAttributesAreErrorsNamingTheLayer) {
    auto error = [](const std::string &op, dsl::ElemType type, const dsl::Attrs &a) {
        try {
            registry().build(op, "p1", {input({1, 16, 9, 9}, type)}, a);
        } catch (const Error &e) {
            return std::string(e.what());
        }
        return std::string();
    };
    const dsl::ElemType f16 = dsl::ElemType::F16;
    EXPECT_NE(error("max_pool", f16, window({2, 2}, {1, 1}, {0, 0, 0, 0}, 2)).find("ceil_mode"),
              std::string::npos);
    EXPECT_NE(error("max_pool", f16, window({2, 2}, {1, 1}, {0, 0, 0, 0}, 2)).find("p1"),
              std::string::npos);
    dsl::Attrs count = window({2, 2}, {1, 1}, {1, 1, 1, 1}, 0);
    count.set("count_include_pad", int64_t(3));
    EXPECT_NE(error("avg_pool", f16, count).find("count_include_pad"), std::string::npos);
    count.set("count_include_pad", int64_t(0));
    EXPECT_EQ(error("avg_pool", f16, count), "");
    EXPECT_NE(error("avg_pool", dsl::ElemType::U8, count)
                  .find("avg_pool 'p1': an int8 average divides by the whole window"),
              std::string::npos)
        << error("avg_pool", dsl::ElemType::U8, count);
    dsl::Attrs dilated = window({2, 2}, {1, 1}, {0, 0, 0, 0}, 0);
    dilated.set("dilations", std::vector<int64_t>{1, 0});
    EXPECT_NE(error("max_pool", f16, dilated).find("dilations"), std::string::npos);
    dilated.set("dilations", std::vector<int64_t>{2, 2});
    EXPECT_NE(error("avg_pool", f16, dilated).find("dilations"), std::string::npos);
}

// A model of one node `op` on a float input x of `shape` and a weights initializer w, its
// output y of `out`.
onnx::ModelProto
window_model(const std::string &op, const std::vector<int64_t> &shape,
             const std::vector<int64_t> &weights, const std::vector<int64_t> &out,
             const std::vector<std::pair<std::string, std::vector<int64_t>>> &attrs) {
    onnx::ModelProto m;
    m.set_ir_version(8);
    m.add_opset_import()->set_version(17);
    onnx::GraphProto &g = *m.mutable_graph();
    g.set_name(op);
    onnx::NodeProto &node = *g.add_node();
    node.set_name("node");
    node.set_op_type(op);
    onnx::ValueInfoProto &x = *g.add_input();
    x.set_name("x");
    x.mutable_type()->mutable_tensor_type()->set_elem_type(onnx::TensorProto::FLOAT);
    for (int64_t d : shape)
        x.mutable_type()->mutable_tensor_type()->mutable_shape()->add_dim()->set_dim_value(d);
    node.add_input("x");
    if (!weights.empty()) {
        onnx::TensorProto &w = *g.add_initializer();
        w.set_name("w");
        w.set_data_type(onnx::TensorProto::FLOAT);
        int64_t count = 1;
        for (int64_t d : weights) {
            w.add_dims(d);
            count *= d;
        }
        for (int64_t i = 0; i < count; ++i) w.add_float_data(float((i * 7) % 11 - 5) / 16);
        node.add_input("w");
    }
    for (const auto &[name, values] : attrs) {
        onnx::AttributeProto &a = *node.add_attribute();
        a.set_name(name);
        a.set_type(onnx::AttributeProto::INTS);
        for (int64_t v : values) a.add_ints(v);
    }
    node.add_output("y");
    onnx::ValueInfoProto &y = *g.add_output();
    y.set_name("y");
    y.mutable_type()->mutable_tensor_type()->set_elem_type(onnx::TensorProto::FLOAT);
    for (int64_t d : out)
        y.mutable_type()->mutable_tensor_type()->mutable_shape()->add_dim()->set_dim_value(d);
    return m;
}

frontend::ImportedModel import_model(const onnx::ModelProto &m) {
    const std::string s = m.SerializeAsString();
    return frontend::import_onnx_bytes({s.begin(), s.end()}, "model.onnx");
}

// A 1-D Conv is a conv2d over (N, C, W) on the DPU: strided, dilated, padded unevenly.
TEST(Windows, OneDimensionalConvsAndPoolsImportOnOddShapes) {
    const frontend::ImportedModel conv =
        import_model(window_model("Conv", {1, 19, 37}, {23, 19, 5}, {1, 23, 16},
                                  {{"strides", {2}}, {"dilations", {2}}, {"pads", {2, 1}}}));
    const dsl::Layer out = conv.graph.outputs().at(0);
    EXPECT_EQ(out.op(), "conv2d");
    EXPECT_EQ(out.output().shape, dsl::Shape({1, 23, 16}));
    EXPECT_TRUE(on_dpu(out));
    expect_matches_reference(out);

    const frontend::ImportedModel pool = import_model(window_model(
        "AveragePool", {1, 21, 29}, {}, {1, 21, 29}, {{"kernel_shape", {4}}, {"pads", {1, 2}}}));
    const dsl::Layer avg = pool.graph.outputs().at(0);
    EXPECT_EQ(avg.op(), "avg_pool");
    EXPECT_EQ(avg.output().shape, dsl::Shape({1, 21, 29}));
    expect_matches_reference(avg);
}

// One image [1, C, D, H, W] in logical order; a tensor of rank 3 or 4 lacks D (and H), of
// extent 1.
struct Volume {
    int64_t c = 1, d = 1, h = 1, w = 1;
    std::vector<double> v;
    double at(int64_t ci, int64_t di, int64_t hi, int64_t wi) const {
        return v[size_t(((ci * d + di) * h + hi) * w + wi)];
    }
};

// fp16 values: random reals in [-2, 2), or multiples of 1/8 in [-1, 1] (`fractions`), exact
// in sums of a few products.
std::vector<double> fp16_values(int64_t count, uint32_t seed, bool fractions = false) {
    std::mt19937 rng(seed);
    std::uniform_real_distribution<float> real(-2.0f, 2.0f);
    std::vector<double> v(static_cast<size_t>(count));
    for (double &x : v)
        x = fractions ? double(int(rng() % 17) - 8) / 8 : double(Halide::float16_t(real(rng)));
    return v;
}

// The buffer of graph input `t` (a single image) holding `x`: dims (c, w, d * h + h).
Halide::Buffer<> image_buffer(const Volume &x) {
    Halide::Buffer<Halide::float16_t> b(int(x.c), int(x.w), int(x.d * x.h));
    for (int64_t c = 0; c < x.c; ++c)
        for (int64_t d = 0; d < x.d; ++d)
            for (int64_t h = 0; h < x.h; ++h)
                for (int64_t w = 0; w < x.w; ++w)
                    b(int(c), int(w), int(d * x.h + h)) = Halide::float16_t(x.at(c, d, h, w));
    return b;
}

// A graph input [1, C, spatial...] of `rank` for `x`.
dsl::Layer volume_input(const Volume &x, int rank) {
    std::vector<int64_t> shape = {1, x.c, x.d, x.h, x.w};
    shape.erase(shape.begin() + 2, shape.begin() + 2 + (5 - rank));
    return input(shape);
}

// A constant in ONNX's layout: `shape` outermost first, fp16 (as the importer rounds weights).
Halide::Buffer<> onnx_tensor(const std::vector<int64_t> &shape, const std::vector<double> &v) {
    return dsl::const_buffer({dsl::ElemType::F16, shape, {}, v});
}

// Per-axis geometry as (D, H, W).
using Axes = std::array<int64_t, 3>;

// The last `rank - 2` entries of `axes` (begins then ends for pads).
std::vector<int64_t> spatial(const Axes &axes, int rank) {
    return std::vector<int64_t>(axes.begin() + (5 - rank), axes.end());
}
std::vector<int64_t> spatial_pads(const Axes &begin, const Axes &end, int rank) {
    std::vector<int64_t> p = spatial(begin, rank);
    const std::vector<int64_t> e = spatial(end, rank);
    p.insert(p.end(), e.begin(), e.end());
    return p;
}

// Layer `layer`'s CPU reference on image `x` against `want` (laid out as a Volume), within
// fp16's rounding of a float32 result (exactly when `exact`); then the device against the
// reference on the simulator.
void expect_layer_computes(const dsl::Layer &layer, const Volume &x, const Volume &want,
                           bool exact) {
    const Halide::Buffer<Halide::float16_t> got =
        algorithms::run_reference(layer, {image_buffer(x)});
    ASSERT_EQ(got.dim(0).extent(), want.c);
    ASSERT_EQ(got.dim(1).extent(), want.w);
    ASSERT_EQ(got.dim(2).extent(), want.d * want.h);
    int64_t wrong = 0;
    for (int64_t c = 0; c < want.c; ++c)
        for (int64_t d = 0; d < want.d; ++d)
            for (int64_t h = 0; h < want.h; ++h)
                for (int64_t w = 0; w < want.w; ++w) {
                    const double g = double(got(int(c), int(w), int(d * want.h + h)));
                    const double e = want.at(c, d, h, w);
                    const double tol = exact ? 0 : 1e-3 * std::abs(e) + 1e-3;
                    if (!(std::abs(g - e) <= tol) && wrong++ < 5)
                        ADD_FAILURE() << "c " << c << " d " << d << " h " << h << " w " << w << ": "
                                      << g << ", expected " << e;
                }
    EXPECT_EQ(wrong, 0);
    expect_matches_reference(layer, {image_buffer(x)});
}

struct ConvCase {
    Volume x;
    int64_t oc = 1, groups = 1;
    Axes kernel, strides, dilations, begin, end;
    bool bias = true;
};

// ONNX's Conv (3-D), by its definition.
Volume direct_conv(const ConvCase &k, const std::vector<double> &w, const std::vector<double> &b) {
    const Volume &x = k.x;
    const Axes in = {x.d, x.h, x.w};
    Axes out;
    for (size_t a = 0; a < 3; ++a)
        out[a] = (in[a] + k.begin[a] + k.end[a] - (k.kernel[a] - 1) * k.dilations[a] - 1) /
                     k.strides[a] +
                 1;
    Volume y{k.oc, out[0], out[1], out[2], {}};
    const int64_t icg = x.c / k.groups, ocg = k.oc / k.groups;
    for (int64_t o = 0; o < k.oc; ++o)
        for (int64_t od = 0; od < out[0]; ++od)
            for (int64_t oh = 0; oh < out[1]; ++oh)
                for (int64_t ow = 0; ow < out[2]; ++ow) {
                    double sum = b.empty() ? 0 : b[size_t(o)];
                    for (int64_t i = 0; i < icg; ++i)
                        for (int64_t kd = 0; kd < k.kernel[0]; ++kd)
                            for (int64_t kh = 0; kh < k.kernel[1]; ++kh)
                                for (int64_t kw = 0; kw < k.kernel[2]; ++kw) {
                                    const int64_t id = od * k.strides[0] + kd * k.dilations[0] -
                                                       k.begin[0],
                                                  ih = oh * k.strides[1] + kh * k.dilations[1] -
                                                       k.begin[1],
                                                  iw = ow * k.strides[2] + kw * k.dilations[2] -
                                                       k.begin[2];
                                    if (id < 0 || id >= x.d || ih < 0 || ih >= x.h || iw < 0 ||
                                        iw >= x.w)
                                        continue;
                                    const int64_t wi =
                                        (((o * icg + i) * k.kernel[0] + kd) * k.kernel[1] + kh) *
                                            k.kernel[2] +
                                        kw;
                                    sum += x.at(o / ocg * icg + i, id, ih, iw) * w[size_t(wi)];
                                }
                    y.v.push_back(sum);
                }
    return y;
}

// conv3d computes ONNX's 3-D Conv: groups, strides, dilations, uneven pads, odd shapes, with
// and without a bias; exact small fractions give exact results.
TEST(Windows3d, ConvsMatchADirectLoop) {
    std::vector<ConvCase> cases(3);
    cases[0].x = {6, 5, 7, 9, {}};
    cases[0].oc = 4;
    cases[0].groups = 2;
    cases[0].kernel = {2, 3, 3};
    cases[0].strides = {1, 2, 1};
    cases[0].dilations = {2, 1, 1};
    cases[0].begin = {1, 0, 2};
    cases[0].end = {0, 1, 1};
    cases[1].x = {3, 4, 5, 11, {}};
    cases[1].oc = 5;
    cases[1].kernel = {3, 1, 2};
    cases[1].strides = {1, 1, 3};
    cases[1].dilations = {1, 1, 2};
    cases[1].begin = {0, 0, 0};
    cases[1].end = {0, 0, 0};
    cases[1].bias = false;
    cases[2] = cases[0];
    for (size_t i = 0; i < cases.size(); ++i) {
        ConvCase &k = cases[i];
        const bool fractions = i == 2;
        SCOPED_TRACE("case " + std::to_string(i));
        k.x.v = fp16_values(k.x.c * k.x.d * k.x.h * k.x.w, uint32_t(10 + i), fractions);
        const std::vector<int64_t> w_shape = {k.oc, k.x.c / k.groups, k.kernel[0], k.kernel[1],
                                              k.kernel[2]};
        const std::vector<double> w =
            fp16_values(w_shape[0] * w_shape[1] * w_shape[2] * w_shape[3] * w_shape[4],
                        uint32_t(20 + i), fractions);
        const std::vector<double> b =
            k.bias ? fp16_values(k.oc, uint32_t(30 + i), fractions) : std::vector<double>{};
        dsl::Attrs a;
        a.set("weights", onnx_tensor(w_shape, w));
        if (k.bias) a.set("bias", dsl::const_buffer({dsl::ElemType::F32, {k.oc}, {}, b}));
        a.set("strides", spatial(k.strides, 5));
        a.set("dilations", spatial(k.dilations, 5));
        a.set("pads", spatial_pads(k.begin, k.end, 5));
        a.set("groups", k.groups);
        const dsl::Layer conv = registry().build("conv3d", "conv", {volume_input(k.x, 5)}, a);
        const Volume want = direct_conv(k, w, b);
        EXPECT_EQ(conv.output().shape, dsl::Shape({1, want.c, want.d, want.h, want.w}));
        expect_layer_computes(conv, k.x, want, fractions);
    }
}

struct PoolCase {
    std::string op;
    Volume x;
    Axes kernel, strides, dilations, begin, end;
    bool ceil_mode = false, count_include_pad = false;
};

// ONNX's MaxPool and AveragePool (3-D), by their definition; the average's divisor counts the
// window's elements in the input, or in the padded input (count_include_pad), and never past
// its end padding (ceil_mode).
Volume direct_pool(const PoolCase &k) {
    const Volume &x = k.x;
    const Axes in = {x.d, x.h, x.w};
    Axes out;
    for (size_t a = 0; a < 3; ++a) {
        const int64_t span = (k.kernel[a] - 1) * k.dilations[a] + 1;
        const int64_t room = in[a] + k.begin[a] + k.end[a] - span;
        out[a] = (k.ceil_mode ? (room + k.strides[a] - 1) : room) / k.strides[a] + 1;
        if (k.ceil_mode && (out[a] - 1) * k.strides[a] >= in[a] + k.begin[a]) --out[a];
    }
    Volume y{x.c, out[0], out[1], out[2], {}};
    const bool is_max = k.op == "max_pool3d";
    for (int64_t c = 0; c < x.c; ++c)
        for (int64_t od = 0; od < out[0]; ++od)
            for (int64_t oh = 0; oh < out[1]; ++oh)
                for (int64_t ow = 0; ow < out[2]; ++ow) {
                    double acc = is_max ? -INFINITY : 0;
                    int64_t count = 0;
                    const int64_t o[3] = {od, oh, ow};
                    for (int64_t kd = 0; kd < k.kernel[0]; ++kd)
                        for (int64_t kh = 0; kh < k.kernel[1]; ++kh)
                            for (int64_t kw = 0; kw < k.kernel[2]; ++kw) {
                                const int64_t t[3] = {kd, kh, kw};
                                int64_t i[3];
                                bool inside = true, padded = true;
                                for (size_t a = 0; a < 3; ++a) {
                                    i[a] = o[a] * k.strides[a] + t[a] * k.dilations[a] - k.begin[a];
                                    inside = inside && i[a] >= 0 && i[a] < in[a];
                                    padded =
                                        padded && i[a] >= -k.begin[a] && i[a] < in[a] + k.end[a];
                                }
                                if (k.count_include_pad ? padded : inside) ++count;
                                if (!inside) continue;
                                const double v = x.at(c, i[0], i[1], i[2]);
                                acc = is_max ? std::max(acc, v) : acc + v;
                            }
                    y.v.push_back(is_max ? acc : acc / double(count));
                }
    return y;
}

// max_pool3d and avg_pool3d compute ONNX's 3-D pools: strides, uneven pads, ceil_mode windows
// past the padding, dilations, count_include_pad 0 and 1, odd shapes.
TEST(Windows3d, PoolsMatchADirectLoop) {
    std::vector<PoolCase> cases(4);
    cases[0] = {"max_pool3d", {5, 5, 7, 9, {}}, {2, 3, 2}, {2, 2, 1}, {1, 1, 2},
                {1, 1, 0},    {0, 1, 1},        true,      false};
    cases[1] = {"avg_pool3d", {4, 6, 5, 7, {}}, {3, 2, 3}, {2, 2, 2}, {1, 1, 1},
                {1, 0, 1},    {1, 1, 1},        true,      false};
    cases[2] = cases[1];
    cases[2].count_include_pad = true;
    cases[3] = {"avg_pool3d", {3, 4, 9, 5, {}}, {2, 3, 2}, {1, 2, 3}, {1, 1, 1},
                {0, 0, 0},    {0, 0, 0},        false,     false};
    for (size_t i = 0; i < cases.size(); ++i) {
        PoolCase &k = cases[i];
        SCOPED_TRACE("case " + std::to_string(i) + " " + k.op);
        k.x.v = fp16_values(k.x.c * k.x.d * k.x.h * k.x.w, uint32_t(40 + i));
        dsl::Attrs a;
        a.set("kernel_shape", spatial(k.kernel, 5));
        a.set("strides", spatial(k.strides, 5));
        a.set("pads", spatial_pads(k.begin, k.end, 5));
        a.set("ceil_mode", int64_t(k.ceil_mode));
        if (k.op == "max_pool3d")
            a.set("dilations", spatial(k.dilations, 5));
        else
            a.set("count_include_pad", int64_t(k.count_include_pad));
        const dsl::Layer pool = registry().build(k.op, "pool", {volume_input(k.x, 5)}, a);
        const Volume want = direct_pool(k);
        EXPECT_EQ(pool.output().shape, dsl::Shape({1, want.c, want.d, want.h, want.w}));
        expect_layer_computes(pool, k.x, want, k.op == "max_pool3d");
    }
}

struct TransposeCase {
    int rank = 5;
    Volume x;
    int64_t oc = 1, groups = 1;
    Axes kernel, strides, dilations, begin, end, extra;
};

// ONNX's ConvTranspose by its definition, scattering: input i through tap k adds to output
// i * stride + k * dilation - pad_begin.
Volume direct_transpose(const TransposeCase &k, const std::vector<double> &w,
                        const std::vector<double> &b) {
    const Volume &x = k.x;
    const Axes in = {x.d, x.h, x.w};
    Axes out;
    for (size_t a = 0; a < 3; ++a)
        out[a] = k.strides[a] * (in[a] - 1) + k.extra[a] + (k.kernel[a] - 1) * k.dilations[a] + 1 -
                 k.begin[a] - k.end[a];
    Volume y{k.oc, out[0], out[1], out[2], {}};
    y.v.assign(size_t(k.oc * out[0] * out[1] * out[2]), 0);
    const int64_t icg = x.c / k.groups, ocg = k.oc / k.groups;
    for (int64_t o = 0; o < k.oc; ++o)
        for (int64_t j = 0; j < out[0] * out[1] * out[2]; ++j)
            y.v[size_t(o * out[0] * out[1] * out[2] + j)] = b[size_t(o)];
    for (int64_t ic = 0; ic < x.c; ++ic)
        for (int64_t id = 0; id < x.d; ++id)
            for (int64_t ih = 0; ih < x.h; ++ih)
                for (int64_t iw = 0; iw < x.w; ++iw)
                    for (int64_t og = 0; og < ocg; ++og)
                        for (int64_t kd = 0; kd < k.kernel[0]; ++kd)
                            for (int64_t kh = 0; kh < k.kernel[1]; ++kh)
                                for (int64_t kw = 0; kw < k.kernel[2]; ++kw) {
                                    const int64_t od = id * k.strides[0] + kd * k.dilations[0] -
                                                       k.begin[0],
                                                  oh = ih * k.strides[1] + kh * k.dilations[1] -
                                                       k.begin[1],
                                                  ow = iw * k.strides[2] + kw * k.dilations[2] -
                                                       k.begin[2];
                                    if (od < 0 || od >= out[0] || oh < 0 || oh >= out[1] ||
                                        ow < 0 || ow >= out[2])
                                        continue;
                                    const int64_t o = ic / icg * ocg + og;
                                    const int64_t wi =
                                        (((ic * ocg + og) * k.kernel[0] + kd) * k.kernel[1] + kh) *
                                            k.kernel[2] +
                                        kw;
                                    y.v[size_t(((o * out[0] + od) * out[1] + oh) * out[2] + ow)] +=
                                        x.at(ic, id, ih, iw) * w[size_t(wi)];
                                }
    return y;
}

// conv_transpose computes ONNX's ConvTranspose in 1-D, 2-D and 3-D: strides, dilations,
// uneven pads, output_padding, groups, odd shapes; exact small fractions give exact results.
TEST(Windows3d, ConvTransposeMatchesADirectLoop) {
    std::vector<TransposeCase> cases(4);
    cases[0] = {3,         {4, 1, 1, 13, {}}, 6,         2,         {1, 1, 3},
                {1, 1, 2}, {1, 1, 2},         {0, 0, 1}, {0, 0, 2}, {0, 0, 1}};
    cases[1] = {4,         {5, 1, 7, 9, {}}, 3,         1,         {1, 3, 2},
                {1, 2, 3}, {1, 1, 1},        {0, 1, 0}, {0, 2, 1}, {0, 1, 2}};
    cases[2] = {5,         {4, 3, 5, 4, {}}, 4,         2,         {2, 3, 2},
                {2, 1, 2}, {1, 2, 1},        {0, 1, 1}, {1, 0, 0}, {1, 0, 0}};
    cases[3] = cases[1];
    for (size_t i = 0; i < cases.size(); ++i) {
        TransposeCase &k = cases[i];
        const bool fractions = i == 3;
        SCOPED_TRACE("case " + std::to_string(i) + ", rank " + std::to_string(k.rank));
        k.x.v = fp16_values(k.x.c * k.x.d * k.x.h * k.x.w, uint32_t(50 + i), fractions);
        std::vector<int64_t> w_shape = {k.x.c, k.oc / k.groups, k.kernel[0], k.kernel[1],
                                        k.kernel[2]};
        const std::vector<double> w =
            fp16_values(w_shape[0] * w_shape[1] * w_shape[2] * w_shape[3] * w_shape[4],
                        uint32_t(60 + i), fractions);
        const std::vector<double> b = fp16_values(k.oc, uint32_t(70 + i), fractions);
        w_shape.erase(w_shape.begin() + 2, w_shape.begin() + 2 + (5 - k.rank));
        dsl::Attrs a;
        a.set("weights", onnx_tensor(w_shape, w));
        a.set("bias", dsl::const_buffer({dsl::ElemType::F32, {k.oc}, {}, b}));
        a.set("strides", spatial(k.strides, k.rank));
        a.set("dilations", spatial(k.dilations, k.rank));
        a.set("pads", spatial_pads(k.begin, k.end, k.rank));
        a.set("output_padding", spatial(k.extra, k.rank));
        a.set("groups", k.groups);
        const dsl::Layer deconv =
            registry().build("conv_transpose", "deconv", {volume_input(k.x, k.rank)}, a);
        const Volume want = direct_transpose(k, w, b);
        expect_layer_computes(deconv, k.x, want, fractions);
    }
}

// max_pool_indices: the maxima and their flat NCHW indices, spatial axes row-major
// (storage_order 0) or column-major (1), in 2-D and 3-D; with values repeated in windows the
// first maximum in the window's row-major order is taken.
TEST(Windows3d, MaxPoolIndicesAreFlatIndicesOfTheFirstMaximum) {
    struct Case {
        int rank;
        Volume x;
        Axes kernel, strides, begin, end;
        int64_t storage_order;
    };
    const std::vector<Case> cases = {
        {4, {3, 1, 7, 9, {}}, {1, 3, 2}, {1, 2, 2}, {0, 1, 0}, {0, 1, 1}, 0},
        {4, {3, 1, 7, 9, {}}, {1, 3, 2}, {1, 2, 2}, {0, 1, 0}, {0, 1, 1}, 1},
        {5, {2, 5, 4, 7, {}}, {2, 2, 3}, {2, 1, 2}, {1, 0, 1}, {0, 1, 1}, 0},
        {5, {2, 5, 4, 7, {}}, {2, 2, 3}, {2, 1, 2}, {1, 0, 1}, {0, 1, 1}, 1},
    };
    for (size_t i = 0; i < cases.size(); ++i) {
        Case k = cases[i];
        SCOPED_TRACE("case " + std::to_string(i));
        // Eighths in [-1, 1]: windows hold equal values.
        k.x.v = fp16_values(k.x.c * k.x.d * k.x.h * k.x.w, uint32_t(80 + i), true);
        dsl::Attrs a;
        a.set("kernel_shape", spatial(k.kernel, k.rank));
        a.set("strides", spatial(k.strides, k.rank));
        a.set("pads", spatial_pads(k.begin, k.end, k.rank));
        a.set("storage_order", k.storage_order);
        const dsl::Layer both =
            registry().build("max_pool_indices", "pool", {volume_input(k.x, k.rank)}, a);
        const dsl::Layer values = dsl::LayerRegistry::output_of("values", both, 0);
        const dsl::Layer indices = dsl::LayerRegistry::output_of("indices", both, 1);
        EXPECT_EQ(indices.output().type, dsl::ElemType::I32);
        const dsl::Graph graph("pool", {values, indices});
        const std::vector<Halide::Buffer<>> got =
            algorithms::run_reference(graph, {image_buffer(k.x)});
        const Halide::Buffer<Halide::float16_t> v = got.at(0);
        const Halide::Buffer<int32_t> ix = got.at(1);
        const Axes in = {k.x.d, k.x.h, k.x.w};
        Axes out;
        for (size_t ax = 0; ax < 3; ++ax)
            out[ax] = (in[ax] + k.begin[ax] + k.end[ax] - k.kernel[ax]) / k.strides[ax] + 1;
        ASSERT_EQ(v.dim(1).extent(), out[2]);
        ASSERT_EQ(v.dim(2).extent(), out[0] * out[1]);
        int64_t wrong = 0;
        for (int64_t c = 0; c < k.x.c; ++c)
            for (int64_t od = 0; od < out[0]; ++od)
                for (int64_t oh = 0; oh < out[1]; ++oh)
                    for (int64_t ow = 0; ow < out[2]; ++ow) {
                        double best = -INFINITY;
                        int64_t where = -1;
                        for (int64_t kd = 0; kd < k.kernel[0]; ++kd)
                            for (int64_t kh = 0; kh < k.kernel[1]; ++kh)
                                for (int64_t kw = 0; kw < k.kernel[2]; ++kw) {
                                    const int64_t id = od * k.strides[0] + kd - k.begin[0],
                                                  ih = oh * k.strides[1] + kh - k.begin[1],
                                                  iw = ow * k.strides[2] + kw - k.begin[2];
                                    if (id < 0 || id >= in[0] || ih < 0 || ih >= in[1] || iw < 0 ||
                                        iw >= in[2] || !(k.x.at(c, id, ih, iw) > best))
                                        continue;
                                    best = k.x.at(c, id, ih, iw);
                                    where = k.storage_order == 0 ? (id * in[1] + ih) * in[2] + iw
                                                                 : (iw * in[1] + ih) * in[0] + id;
                                }
                        where += c * in[0] * in[1] * in[2];
                        const int y = int(od * out[1] + oh);
                        if ((double(v(int(c), int(ow), y)) != best ||
                             ix(int(c), int(ow), y) != where) &&
                            wrong++ < 5)
                            ADD_FAILURE()
                                << "c " << c << " d " << od << " h " << oh << " w " << ow << ": "
                                << double(v(int(c), int(ow), y)) << " at " << ix(int(c), int(ow), y)
                                << ", expected " << best << " at " << where;
                    }
        EXPECT_EQ(wrong, 0);
        for (const char *name : {"vpu27", "vpu20"}) {
            codegen::CheckOptions options;
            options.inputs = {image_buffer(k.x)};
            const codegen::CheckResult r =
                codegen::check_against_reference(graph, target::load_target(name), options);
            EXPECT_TRUE(r.ok()) << name << ": " << r.report();
        }
    }
}

// A Conv and a MaxPool of rank 5 import as conv3d and max_pool3d; a MaxPool with Indices of a
// batch of two is an error saying why.
TEST(Windows3d, ThreeDimensionalWindowsImportOnOddShapes) {
    const frontend::ImportedModel conv =
        import_model(window_model("Conv", {1, 3, 4, 5, 6}, {2, 3, 1, 2, 3}, {1, 2, 2, 4, 6},
                                  {{"strides", {2, 1, 1}}, {"pads", {0, 0, 1, 0, 0, 1}}}));
    const dsl::Layer c = conv.graph.outputs().at(0);
    EXPECT_EQ(c.op(), "conv3d");
    EXPECT_EQ(c.output().shape, dsl::Shape({1, 2, 2, 4, 6}));
    expect_matches_reference(c);
    const frontend::ImportedModel pool =
        import_model(window_model("MaxPool", {1, 3, 5, 5, 7}, {}, {1, 3, 5, 4, 3},
                                  {{"kernel_shape", {1, 2, 2}}, {"strides", {1, 1, 2}}}));
    EXPECT_EQ(pool.graph.outputs().at(0).op(), "max_pool3d");
    expect_matches_reference(pool.graph.outputs().at(0));

    onnx::ModelProto indices =
        window_model("MaxPool", {2, 3, 5, 5}, {}, {2, 3, 4, 4}, {{"kernel_shape", {2, 2}}});
    indices.mutable_graph()->mutable_node(0)->add_output("i");
    onnx::ValueInfoProto &i = *indices.mutable_graph()->add_output();
    i.set_name("i");
    i.mutable_type()->mutable_tensor_type()->set_elem_type(onnx::TensorProto::INT64);
    for (int64_t d : {2, 3, 4, 4})
        i.mutable_type()->mutable_tensor_type()->mutable_shape()->add_dim()->set_dim_value(d);
    try {
        import_model(indices);
        ADD_FAILURE() << "imported";
    } catch (const frontend::ModelError &e) {
        const std::string what = e.what();
        EXPECT_NE(what.find("(MaxPool)"), std::string::npos) << what;
        EXPECT_NE(what.find("flat indices count whole images"), std::string::npos) << what;
    }
}

// What the 3-D and transposed windows do not take is an error naming the layer and why.
TEST(Windows3d, BadWindowsAreErrorsNamingTheLayer) {
    auto error = [](const std::string &op, const std::vector<int64_t> &shape, const dsl::Attrs &a,
                    dsl::ElemType type = dsl::ElemType::F16) {
        try {
            registry().build(op, "w1", {input(shape, type)}, a);
        } catch (const Error &e) {
            return std::string(e.what());
        }
        return std::string();
    };
    const std::vector<double> ones(2 * 3 * 2 * 2 * 2, 1.0);
    dsl::Attrs conv;
    conv.set("weights", onnx_tensor({2, 3, 2, 2, 2}, ones));
    EXPECT_EQ(error("conv3d", {1, 3, 4, 5, 6}, conv), "");
    EXPECT_NE(error("conv3d", {1, 3, 5, 6}, conv)
                  .find("conv3d 'w1': the input is 1x3x5x6; conv3d takes rank 5"),
              std::string::npos)
        << error("conv3d", {1, 3, 5, 6}, conv);
    EXPECT_NE(error("conv3d", {1, 4, 4, 5, 6}, conv).find("do not fit an input of 4 channels"),
              std::string::npos);
    EXPECT_NE(error("conv3d", {1, 3, 4, 5, 6}, conv, dsl::ElemType::U8).find("takes f16 or f32"),
              std::string::npos);
    conv.set("pads", std::vector<int64_t>{1, 1, 1, 1});
    EXPECT_NE(error("conv3d", {1, 3, 4, 5, 6}, conv).find("pads has 4 values"), std::string::npos);

    dsl::Attrs pool;
    pool.set("kernel_shape", std::vector<int64_t>{2, 2, 2});
    pool.set("pads", std::vector<int64_t>{0, 2, 0, 0, 0, 0});
    EXPECT_NE(error("max_pool3d", {1, 3, 4, 5, 6}, pool).find("max_pool3d 'w1': every pad"),
              std::string::npos);
    pool.set("pads", std::vector<int64_t>{0, 0, 0, 1, 1, 1});
    EXPECT_EQ(error("avg_pool3d", {1, 3, 4, 5, 6}, pool), "");
    EXPECT_NE(error("avg_pool3d", {1, 3, 4, 5, 6}, pool, dsl::ElemType::U8)
                  .find("avg_pool3d 'w1': input 'in' is u8"),
              std::string::npos);

    dsl::Attrs deconv;
    deconv.set("weights", onnx_tensor({3, 2, 2, 2}, std::vector<double>(24, 1.0)));
    EXPECT_EQ(error("conv_transpose", {1, 3, 5, 6}, deconv), "");
    EXPECT_NE(error("conv_transpose", {1, 3, 4, 5, 6}, deconv)
                  .find("conv_transpose 'w1': weights must be f16 or f32 of rank 5"),
              std::string::npos);
    deconv.set("pads", std::vector<int64_t>{3, 3, 3, 3});
    EXPECT_NE(error("conv_transpose", {1, 3, 2, 2}, deconv).find("the pads leave no output"),
              std::string::npos);
}

// ConvTranspose's output_shape sets the pads: the total split with the odd one at the
// beginning, and an output larger than the natural one ends in output padding.
TEST(Windows3d, ConvTransposeOutputShapeGivesThePads) {
    // 5 inputs, stride 2, kernel 3: 11 outputs; 10 takes 1 off the beginning, 13 adds 2 at the
    // end.
    for (const int64_t wanted : {10, 13}) {
        SCOPED_TRACE(wanted);
        const frontend::ImportedModel m =
            import_model(window_model("ConvTranspose", {1, 3, 5}, {3, 2, 3}, {1, 2, wanted},
                                      {{"strides", {2}}, {"output_shape", {wanted}}}));
        const dsl::Layer out = m.graph.outputs().at(0);
        EXPECT_EQ(out.op(), "conv_transpose");
        EXPECT_EQ(out.output().shape, dsl::Shape({1, 2, wanted}));
        EXPECT_EQ(out.attrs().get_ints("pads"),
                  (wanted == 10 ? std::vector<int64_t>{1, 0} : std::vector<int64_t>{0, 0}));
        EXPECT_EQ(out.attrs().get_ints("output_padding"),
                  std::vector<int64_t>{wanted == 10 ? 0 : 2});
        expect_matches_reference(out);
    }
}

} // namespace
