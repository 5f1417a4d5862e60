// Pre-quantized ONNX models compile to int8 layers: QLinearConv and QLinearMatMul of the ONNX
// backend test data, and a QuantizeLinear / DequantizeLinear (QDQ) conv, match ONNX's results
// within one step of the output's quantization; a QuantizeLinear or DequantizeLinear that
// folds into no int8 layer is a quantize or dequantize layer (docs/onnx.md, "Quantized
// models").
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <functional>
#include <iterator>
#include <numeric>
#include <random>

#include "../frontend/src/onnx_internal.h"
#include "algorithms/registry.h"
#include "codegen/check.h"
#include "codegen/lower.h"
#include "dsl/constant_values.h"
#include "frontend/blob_io.h"
#include "frontend/onnx_import.h"
#include "lowering_fixtures.h"
#include "onnx_node_test.h"
#include "vpu_target/blob.h"
#include "vpu_target/simulator.h"
#include "vpu_target/target.h"

using namespace vpuc;

namespace {

const std::string kNodeTests = "/usr/share/libonnx-testdata/data/node/";

std::vector<uint8_t> file_bytes(const std::string &path) {
    std::ifstream in(path, std::ios::binary);
    return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

Halide::Buffer<> read_pb_tensor(const std::string &path) {
    const std::vector<uint8_t> bytes = file_bytes(path);
    onnx::TensorProto t;
    EXPECT_TRUE(t.ParseFromArray(bytes.data(), int(bytes.size()))) << path;
    return frontend::detail::tensor_value(t, path);
}

// The graph's outputs for `inputs`, compiled for vpu27 and run on the simulator.
std::vector<frontend::NamedTensor> simulate(const dsl::Graph &graph,
                                            const std::vector<frontend::NamedTensor> &inputs) {
    const target::Target target = target::load_target("vpu27");
    const std::vector<uint8_t> blob = codegen::lower(graph, target);
    sim::Simulator simulator(target, blob);
    const sim::RunResult run = simulator.run(frontend::blob_inputs(simulator.blob(), inputs));
    return frontend::blob_outputs(simulator.blob(), run.outputs);
}

// The largest difference between two integer tensors of the same elements.
int64_t max_difference(const Halide::Buffer<> &got, const Halide::Buffer<> &want) {
    const dsl::ConstValues a = dsl::const_values(got, "got"), b = dsl::const_values(want, "want");
    EXPECT_EQ(a.shape, b.shape);
    EXPECT_EQ(a.type, b.type);
    int64_t largest = 0;
    for (size_t i = 0; i < a.ints.size() && i < b.ints.size(); ++i)
        largest = std::max(largest, std::abs(a.ints[i] - b.ints[i]));
    return largest;
}

// A backend node test, every input known (the scales and weights become constants; the data
// input stays an input), within one step of the expected integers.
int64_t node_test_difference(const std::string &test) {
    const std::string dir = kNodeTests + test;
    const std::vector<uint8_t> model = file_bytes(dir + "/model.onnx");
    onnx::ModelProto proto;
    EXPECT_TRUE(proto.ParseFromArray(model.data(), int(model.size())));
    frontend::ImportOptions options;
    std::vector<frontend::NamedTensor> inputs;
    for (int i = 0; i < proto.graph().input_size(); ++i) {
        const std::string &name = proto.graph().input(i).name();
        inputs.push_back(
            {name, read_pb_tensor(dir + "/test_data_set_0/input_" + std::to_string(i) + ".pb")});
        options.known_inputs[name] = inputs.back().value;
    }
    const frontend::ImportedModel imported =
        frontend::import_onnx_bytes(model, dir + "/model.onnx", options);
    std::vector<frontend::NamedTensor> blob_inputs;
    for (const dsl::Layer &in : imported.graph.inputs())
        for (const frontend::NamedTensor &t : inputs)
            if (t.name == in.name()) blob_inputs.push_back(t);
    const std::vector<frontend::NamedTensor> outputs = simulate(imported.graph, blob_inputs);
    EXPECT_EQ(outputs.size(), 1u);
    return max_difference(outputs.at(0).value,
                          read_pb_tensor(dir + "/test_data_set_0/output_0.pb"));
}

TEST(QuantImport, QLinearConvIsWithinOneStep) {
    EXPECT_LE(node_test_difference("test_qlinearconv"), 1);
}

TEST(QuantImport, QLinearMatMulIsWithinOneStep) {
    EXPECT_LE(node_test_difference("test_qlinearmatmul_2D"), 1);
}

// Rank 3: the rows of A through the 2-D int8 matmul, and the product back in rank 3.
TEST(QuantImport, QLinearMatMulOfRank3IsWithinOneStep) {
    EXPECT_LE(node_test_difference("test_qlinearmatmul_3D"), 1);
}

// ONNX's backend tests of per-axis QuantizeLinear and DequantizeLinear of activations and of
// QLinearMatMul of rank 3, as `vpuc conformance` runs them: integers exact.
class QuantNodeTest : public ::testing::TestWithParam<std::string> {};

TEST_P(QuantNodeTest, MatchesTheExpectedOutputs) {
    vpuc::testing::expect_node_test_passes(GetParam());
}

INSTANTIATE_TEST_SUITE_P(Onnx, QuantNodeTest,
                         ::testing::Values("test_quantizelinear", "test_dequantizelinear",
                                           "test_quantizelinear_axis", "test_dequantizelinear_axis",
                                           "test_qlinearmatmul_2D", "test_qlinearmatmul_3D"),
                         [](const ::testing::TestParamInfo<std::string> &info) {
                             return info.param.substr(5);
                         });

// The QDQ conv below: 8 channels in and out, 6x6, pads 1, relu.
constexpr int kChannels = 8, kSize = 6;
constexpr float kInScale = 0.05f, kOutScale = 0.04f;
constexpr int kInZero = 128, kOutZero = 10;

float weight_scale(int oc) {
    return 0.01f + 0.002f * float(oc);
}

int8_t weight(int oc, int ic, int ky, int kx) {
    return int8_t((oc * 37 + ic * 11 + ky * 5 + kx * 3) % 255 - 127);
}

using WeightFn = std::function<int8_t(int oc, int ic, int ky, int kx)>;

int32_t bias(int oc) {
    return (oc - 4) * 300;
}

void add_tensor_input(onnx::ValueInfoProto &v, const std::string &name,
                      const std::vector<int64_t> &shape) {
    v.set_name(name);
    v.mutable_type()->mutable_tensor_type()->set_elem_type(onnx::TensorProto::FLOAT);
    for (int64_t d : shape)
        v.mutable_type()->mutable_tensor_type()->mutable_shape()->add_dim()->set_dim_value(d);
}

onnx::TensorProto &scalar(onnx::GraphProto &g, const std::string &name, int type) {
    onnx::TensorProto &t = *g.add_initializer();
    t.set_name(name);
    t.set_data_type(type);
    return t;
}

onnx::NodeProto &node(onnx::GraphProto &g, const std::string &op, std::vector<std::string> in,
                      const std::string &out) {
    onnx::NodeProto &n = *g.add_node();
    n.set_name(out);
    n.set_op_type(op);
    for (const std::string &i : in) n.add_input(i);
    n.add_output(out);
    return n;
}

// x -> QuantizeLinear -> DequantizeLinear -> Conv (DequantizeLinear'd i8 weights per channel,
// int32 bias) -> Relu -> QuantizeLinear -> DequantizeLinear -> y.
onnx::ModelProto qdq_conv_model(const WeightFn &weight = ::weight) {
    onnx::ModelProto m;
    m.set_ir_version(8);
    m.add_opset_import()->set_version(13);
    onnx::GraphProto &g = *m.mutable_graph();
    g.set_name("qdq_conv");
    add_tensor_input(*g.add_input(), "x", {1, kChannels, kSize, kSize});
    add_tensor_input(*g.add_output(), "y", {1, kChannels, kSize, kSize});
    scalar(g, "x_scale", onnx::TensorProto::FLOAT).add_float_data(kInScale);
    scalar(g, "x_zero", onnx::TensorProto::UINT8).add_int32_data(kInZero);
    scalar(g, "y_scale", onnx::TensorProto::FLOAT).add_float_data(kOutScale);
    scalar(g, "y_zero", onnx::TensorProto::UINT8).add_int32_data(kOutZero);
    onnx::TensorProto &w = scalar(g, "w", onnx::TensorProto::INT8);
    onnx::TensorProto &w_scale = scalar(g, "w_scale", onnx::TensorProto::FLOAT);
    onnx::TensorProto &w_zero = scalar(g, "w_zero", onnx::TensorProto::INT8);
    onnx::TensorProto &b = scalar(g, "b", onnx::TensorProto::INT32);
    onnx::TensorProto &b_scale = scalar(g, "b_scale", onnx::TensorProto::FLOAT);
    for (int64_t d : {kChannels, kChannels, 3, 3}) w.add_dims(d);
    for (auto *t : {&w_scale, &w_zero, &b, &b_scale}) t->add_dims(kChannels);
    for (int oc = 0; oc < kChannels; ++oc) {
        for (int ic = 0; ic < kChannels; ++ic)
            for (int ky = 0; ky < 3; ++ky)
                for (int kx = 0; kx < 3; ++kx) w.add_int32_data(weight(oc, ic, ky, kx));
        w_scale.add_float_data(weight_scale(oc));
        w_zero.add_int32_data(0);
        b.add_int32_data(bias(oc));
        b_scale.add_float_data(kInScale * weight_scale(oc));
    }
    node(g, "QuantizeLinear", {"x", "x_scale", "x_zero"}, "xq");
    node(g, "DequantizeLinear", {"xq", "x_scale", "x_zero"}, "xd");
    node(g, "DequantizeLinear", {"w", "w_scale", "w_zero"}, "wd").add_attribute()->CopyFrom([] {
        onnx::AttributeProto a;
        a.set_name("axis");
        a.set_type(onnx::AttributeProto::INT);
        a.set_i(0);
        return a;
    }());
    node(g, "DequantizeLinear", {"b", "b_scale"}, "bd").add_attribute()->CopyFrom([] {
        onnx::AttributeProto a;
        a.set_name("axis");
        a.set_type(onnx::AttributeProto::INT);
        a.set_i(0);
        return a;
    }());
    onnx::NodeProto &conv = node(g, "Conv", {"xd", "wd", "bd"}, "conv");
    onnx::AttributeProto &pads = *conv.add_attribute();
    pads.set_name("pads");
    pads.set_type(onnx::AttributeProto::INTS);
    for (int i = 0; i < 4; ++i) pads.add_ints(1);
    node(g, "Relu", {"conv"}, "relu");
    node(g, "QuantizeLinear", {"relu", "y_scale", "y_zero"}, "yq");
    node(g, "DequantizeLinear", {"yq", "y_scale", "y_zero"}, "y");
    return m;
}

std::vector<uint8_t> bytes_of(const onnx::ModelProto &m) {
    const std::string s = m.SerializeAsString();
    return {s.begin(), s.end()};
}

uint8_t input_value(int c, int y, int x) {
    return uint8_t((c * 29 + y * 13 + x * 7) % 256);
}

// ONNX's result: the conv in reals, then QuantizeLinear rounding half to even.
int64_t onnx_output(int oc, int y, int x, const WeightFn &weight = ::weight) {
    double acc = double(bias(oc)) * double(kInScale * weight_scale(oc));
    for (int ic = 0; ic < kChannels; ++ic)
        for (int ky = 0; ky < 3; ++ky)
            for (int kx = 0; kx < 3; ++kx) {
                const int iy = y + ky - 1, ix = x + kx - 1;
                if (iy < 0 || iy >= kSize || ix < 0 || ix >= kSize) continue;
                const double in = (double(input_value(ic, iy, ix)) - kInZero) * kInScale;
                acc += in * double(weight(oc, ic, ky, kx)) * weight_scale(oc);
            }
    const double q = std::nearbyint(std::max(acc, 0.0) / kOutScale) + kOutZero;
    return int64_t(std::clamp(q, 0.0, 255.0));
}

// The real values of a float tensor of the simulator's or a model's.
std::vector<double> reals_of(const Halide::Buffer<> &t) {
    return dsl::const_values(t, "result").reals;
}

// The ops of the graph's layers, in the graph's order.
std::vector<std::string> ops_of(const dsl::Graph &graph) {
    std::vector<std::string> ops;
    for (const dsl::Layer &l : graph.layers()) ops.push_back(l.op());
    return ops;
}

// Bit-exact against the CPU reference on random inputs, fp16 results by the SHAVEs' contract.
void expect_matches_reference(const dsl::Graph &graph) {
    codegen::CheckOptions options;
    options.tolerance.f16_ulp = 1;
    const codegen::CheckResult check =
        codegen::check_against_reference(graph, target::load_target("vpu27"), options);
    EXPECT_TRUE(check.ok()) << check.report();
}

// The imported qdq_conv_model(weight) run on the simulator is within one step of ONNX's
// rounding, on inputs that are steps of the input's quantization (fp16 holds them closer than
// a tenth of a step).
void expect_within_one_step_of_onnx(const dsl::Graph &graph, const WeightFn &weight) {
    dsl::ConstValues x{dsl::ElemType::F32, {1, kChannels, kSize, kSize}, {}, {}};
    for (int c = 0; c < kChannels; ++c)
        for (int y = 0; y < kSize; ++y)
            for (int xx = 0; xx < kSize; ++xx)
                x.reals.push_back((double(input_value(c, y, xx)) - kInZero) * kInScale);
    const auto outputs = simulate(graph, {{"x", dsl::const_buffer(x)}});
    ASSERT_EQ(outputs.size(), 1u);
    const std::vector<double> got = reals_of(outputs[0].value);
    ASSERT_EQ(got.size(), x.reals.size());
    double largest = 0;
    size_t i = 0;
    for (int c = 0; c < kChannels; ++c)
        for (int y = 0; y < kSize; ++y)
            for (int xx = 0; xx < kSize; ++xx, ++i) {
                const double want = double(onnx_output(c, y, xx, weight) - kOutZero) * kOutScale;
                largest = std::max(largest, std::abs(got[i] - want));
            }
    // One step, and fp16's rounding of values below 10.
    EXPECT_LE(largest, kOutScale + 0.005);
}

TEST(QuantImport, AQdqConvBecomesAnInt8ConvWithinOneStepOfOnnx) {
    const frontend::ImportedModel m =
        frontend::import_onnx_bytes(bytes_of(qdq_conv_model()), "qdq_conv.onnx");
    // Float in, float out: the input's QuantizeLinear and the output's DequantizeLinear are
    // layers; the ones around the conv fold into it.
    ASSERT_EQ(m.graph.inputs().size(), 1u);
    EXPECT_EQ(m.graph.inputs()[0].output().type, dsl::ElemType::F16);
    EXPECT_EQ(ops_of(m.graph), (std::vector<std::string>{"quantize", "conv2d", "dequantize"}));
    const dsl::Layer &conv = m.graph.layers()[1];
    EXPECT_EQ(conv.attrs().get_tensor("weights").type(), Halide::Int(8));
    EXPECT_EQ(conv.inputs().at(0).output().type, dsl::ElemType::U8);
    EXPECT_EQ(conv.inputs().at(0).output().quant.zero_point_at(0), kInZero);
    EXPECT_EQ(conv.output().type, dsl::ElemType::U8);
    EXPECT_EQ(conv.output().quant.zero_point_at(0), kOutZero);
    EXPECT_EQ(m.graph.outputs().at(0).output().type, dsl::ElemType::F16);

    expect_matches_reference(m.graph);

    expect_within_one_step_of_onnx(m.graph, weight);
}

// Small weights, |q| <= 3 per output channel: a scale of a finer grid (q * 42 by w_scale / 42)
// gives the same reals, and the importer must keep the DequantizeLinear's own integers and
// scales rather than guess a grid from the reals. The conv stays within one step of ONNX.
TEST(QuantImport, AQdqConvKeepsTheDequantizeLinearsIntegers) {
    const WeightFn small = [](int oc, int ic, int ky, int kx) {
        return int8_t((oc * 5 + ic * 3 + ky * 2 + kx) % 7 - 3);
    };
    const frontend::ImportedModel m =
        frontend::import_onnx_bytes(bytes_of(qdq_conv_model(small)), "qdq_conv_small.onnx");
    ASSERT_EQ(ops_of(m.graph), (std::vector<std::string>{"quantize", "conv2d", "dequantize"}));
    const dsl::Layer &conv = m.graph.layers()[1];
    EXPECT_EQ(conv.attrs().get_int("weight_zero_point"), 0);
    const Halide::Buffer<int8_t> w = conv.attrs().get_tensor("weights");
    // Logical [oc, ky, kx, ic], innermost first.
    ASSERT_EQ(w.dimensions(), 4);
    for (int oc = 0; oc < kChannels; ++oc)
        for (int ic = 0; ic < kChannels; ++ic)
            for (int ky = 0; ky < 3; ++ky)
                for (int kx = 0; kx < 3; ++kx)
                    ASSERT_EQ(w(ic, kx, ky, oc), small(oc, ic, ky, kx))
                        << "oc " << oc << " ic " << ic << " ky " << ky << " kx " << kx;
    expect_matches_reference(m.graph);

    expect_within_one_step_of_onnx(m.graph, small);
}

// x -> QuantizeLinear(scale, zero point of `zero_type`) -> y, or with `dequantize` also
// DequantizeLinear -> y; or (`input_type` an int type) x -> DequantizeLinear -> y.
onnx::ModelProto quantize_model(float scale, int zero_type, int zero_point, int input_type,
                                const std::vector<std::string> &ops, int64_t count) {
    onnx::ModelProto m;
    m.set_ir_version(8);
    m.add_opset_import()->set_version(13);
    onnx::GraphProto &g = *m.mutable_graph();
    g.set_name("quantize");
    add_tensor_input(*g.add_input(), "x", {1, count});
    g.mutable_input(0)->mutable_type()->mutable_tensor_type()->set_elem_type(input_type);
    scalar(g, "scale", onnx::TensorProto::FLOAT).add_float_data(scale);
    scalar(g, "zero", zero_type).add_int32_data(zero_point);
    std::string tensor = "x";
    for (size_t i = 0; i < ops.size(); ++i) {
        const std::string out = i + 1 == ops.size() ? "y" : "t" + std::to_string(i);
        if (ops[i] == "Sigmoid")
            node(g, ops[i], {tensor}, out);
        else
            node(g, ops[i], {tensor, "scale", "zero"}, out);
        tensor = out;
    }
    add_tensor_input(*g.add_output(), "y", {1, count});
    g.mutable_output(0)->mutable_type()->mutable_tensor_type()->set_elem_type(
        ops.back() == "QuantizeLinear" ? zero_type : onnx::TensorProto::FLOAT);
    return m;
}

// The stored integers of a QuantizeLinear of exact fractions: round half to even, saturate.
void expect_quantizes(int zero_type, int zero_point, const std::vector<double> &x,
                      const std::vector<int64_t> &want) {
    const frontend::ImportedModel m = frontend::import_onnx_bytes(
        bytes_of(quantize_model(0.5f, zero_type, zero_point, onnx::TensorProto::FLOAT,
                                {"QuantizeLinear"}, int64_t(x.size()))),
        "quantize.onnx");
    EXPECT_EQ(ops_of(m.graph), std::vector<std::string>{"quantize"});
    EXPECT_EQ(m.graph.inputs().at(0).output().type, dsl::ElemType::F16);
    expect_matches_reference(m.graph);
    const dsl::ConstValues input{dsl::ElemType::F32, {1, int64_t(x.size())}, {}, x};
    const auto outputs = simulate(m.graph, {{"x", dsl::const_buffer(input)}});
    ASSERT_EQ(outputs.size(), 1u);
    EXPECT_EQ(dsl::const_values(outputs[0].value, "y").ints, want);
}

TEST(QuantImport, QuantizeLinearOfAFloatInputRoundsHalfToEvenAndSaturates) {
    // x / 0.5: 0.5, 1.5, 2.5, -0.5, -1.5, 3.25, 400, -400, 7.
    const std::vector<double> x = {0.25, 0.75, 1.25, -0.25, -0.75, 1.625, 200, -200, 3.5};
    expect_quantizes(onnx::TensorProto::UINT8, 10, x, {10, 12, 12, 10, 8, 13, 255, 0, 17});
    expect_quantizes(onnx::TensorProto::INT8, -3, x, {-3, -1, -1, -3, -5, 0, 127, -128, 4});
}

// A DequantizeLinear of a constant with one scale ignores its axis, as ONNX does, whatever its
// value (it once read the shape at the axis given).
TEST(QuantImport, DequantizeLinearOfAConstantPerTensorIgnoresItsAxis) {
    for (const int64_t axis : {int64_t(-7), int64_t(1), int64_t(5)}) {
        SCOPED_TRACE("axis " + std::to_string(axis));
        onnx::ModelProto m;
        m.set_ir_version(8);
        m.add_opset_import()->set_version(13);
        onnx::GraphProto &g = *m.mutable_graph();
        g.set_name("dequantize_constant");
        add_tensor_input(*g.add_input(), "x", {2, 3});
        add_tensor_input(*g.add_output(), "y", {2, 3});
        onnx::TensorProto &w = scalar(g, "w", onnx::TensorProto::INT8);
        w.add_dims(2);
        w.add_dims(3);
        for (int v : {-128, -3, 0, 1, 7, 127}) w.add_int32_data(v);
        scalar(g, "scale", onnx::TensorProto::FLOAT).add_float_data(0.5f);
        scalar(g, "zero", onnx::TensorProto::INT8).add_int32_data(1);
        onnx::AttributeProto a;
        a.set_name("axis");
        a.set_type(onnx::AttributeProto::INT);
        a.set_i(axis);
        node(g, "DequantizeLinear", {"w", "scale", "zero"}, "wd").add_attribute()->CopyFrom(a);
        node(g, "Add", {"x", "wd"}, "y");
        const frontend::ImportedModel imported =
            frontend::import_onnx_bytes(bytes_of(m), "dequantize_constant.onnx");
        const dsl::ConstValues zeros{dsl::ElemType::F32, {2, 3}, {}, std::vector<double>(6, 0)};
        const auto outputs = simulate(imported.graph, {{"x", dsl::const_buffer(zeros)}});
        ASSERT_EQ(outputs.size(), 1u);
        EXPECT_EQ(reals_of(outputs[0].value), (std::vector<double>{-64.5, -2, -0.5, 0, 3, 63}));
    }
}

TEST(QuantImport, DequantizeLinearOfAnInt8InputGivesFloats) {
    const std::vector<int64_t> q = {0, 1, 7, 100, 255, 130, 3};
    const frontend::ImportedModel m = frontend::import_onnx_bytes(
        bytes_of(quantize_model(0.25f, onnx::TensorProto::UINT8, 100, onnx::TensorProto::UINT8,
                                {"DequantizeLinear"}, int64_t(q.size()))),
        "dequantize.onnx");
    EXPECT_EQ(ops_of(m.graph), std::vector<std::string>{"dequantize"});
    EXPECT_EQ(m.graph.outputs().at(0).output().type, dsl::ElemType::F16);
    expect_matches_reference(m.graph);
    const dsl::ConstValues input{dsl::ElemType::U8, {1, int64_t(q.size())}, q, {}};
    const auto outputs = simulate(m.graph, {{"x", dsl::const_buffer(input)}});
    ASSERT_EQ(outputs.size(), 1u);
    EXPECT_EQ(reals_of(outputs[0].value),
              (std::vector<double>{-25, -24.75, -23.25, 0, 38.75, 7.5, -24.25}));
}

// The layers refuse what they cannot compute, naming the layer.
TEST(QuantImport, QuantizeAndDequantizeLayersRefuseWrongInputs) {
    const auto input = [](dsl::ElemType type) {
        dsl::TensorDesc t;
        t.name = "in";
        t.shape = dsl::Shape({1, 3, 5, 7});
        t.type = type;
        if (dsl::is_quantized_int(type)) t.quant = dsl::Quant::per_tensor(0.5f, 3);
        return dsl::Layer::input(t);
    };
    const auto error = [](const std::function<void()> &build) {
        try {
            build();
        } catch (const dsl::LayerError &e) {
            return std::string(e.what());
        }
        return std::string("no error");
    };
    const dsl::Attrs u8 = dsl::Attrs()
                              .set("output_type", std::string("u8"))
                              .set("output_scale", 0.5)
                              .set("output_zero_point", int64_t(-3));
    EXPECT_NE(error([&] {
                  algorithms::layer_registry().build("quantize", "q", {input(dsl::ElemType::F16)},
                                                     u8);
              }).find("quantize 'q': zero point -3 is outside u8"),
              std::string::npos);
    EXPECT_NE(error([&] {
                  algorithms::layer_registry().build(
                      "quantize", "q", {input(dsl::ElemType::U8)},
                      dsl::Attrs(u8).set("output_zero_point", int64_t(3)));
              }).find("quantize 'q': input 'in' is u8; quantize takes f16 or f32"),
              std::string::npos);
    EXPECT_NE(error([&] {
                  algorithms::layer_registry().build("dequantize", "d", {input(dsl::ElemType::F16)},
                                                     {});
              }).find("dequantize 'd': input 'in' is f16"),
              std::string::npos);
}

// QuantizeLinear of the same quantization right after a DequantizeLinear is its int8 tensor.
TEST(QuantImport, AQuantizeLinearUndoingADequantizeLinearIsNoLayer) {
    const frontend::ImportedModel m = frontend::import_onnx_bytes(
        bytes_of(quantize_model(
            0.5f, onnx::TensorProto::INT8, 3, onnx::TensorProto::FLOAT,
            {"QuantizeLinear", "DequantizeLinear", "QuantizeLinear", "DequantizeLinear"}, 5)),
        "qdqdq.onnx");
    EXPECT_EQ(ops_of(m.graph), (std::vector<std::string>{"quantize", "dequantize"}));
}

// An op without an int8 form between a DequantizeLinear and a QuantizeLinear runs in fp16.
TEST(QuantImport, AnOpWithoutAnInt8FormRunsInFp16BetweenDequantizeAndQuantize) {
    constexpr int64_t kCount = 37;
    const frontend::ImportedModel m = frontend::import_onnx_bytes(
        bytes_of(quantize_model(
            1.0f / 64, onnx::TensorProto::UINT8, 128, onnx::TensorProto::FLOAT,
            {"QuantizeLinear", "DequantizeLinear", "Sigmoid", "QuantizeLinear", "DequantizeLinear"},
            kCount)),
        "sigmoid.onnx");
    EXPECT_EQ(ops_of(m.graph), (std::vector<std::string>{"quantize", "dequantize", "sigmoid",
                                                         "quantize", "dequantize"}));
    EXPECT_EQ(m.graph.layers()[2].output().type, dsl::ElemType::F16);
    expect_matches_reference(m.graph);
    // Random reals in [-2, 2); ONNX's result, the sigmoid of the dequantized input quantized
    // again, within one step.
    std::mt19937 random(5);
    std::uniform_real_distribution<float> uniform(-2.0f, 2.0f);
    dsl::ConstValues x{dsl::ElemType::F32, {1, kCount}, {}, {}};
    for (int64_t i = 0; i < kCount; ++i) x.reals.push_back(double(uniform(random)));
    const auto outputs = simulate(m.graph, {{"x", dsl::const_buffer(x)}});
    ASSERT_EQ(outputs.size(), 1u);
    const std::vector<double> got = reals_of(outputs[0].value);
    ASSERT_EQ(got.size(), size_t(kCount));
    for (int64_t i = 0; i < kCount; ++i) {
        const double step = 1.0 / 64;
        const double in =
            std::clamp(std::nearbyint(float(x.reals[size_t(i)]) / step), -128.0, 127.0) * step;
        const double want =
            std::clamp(std::nearbyint(1 / (1 + std::exp(-in)) / step), -128.0, 127.0) * step;
        EXPECT_NEAR(got[size_t(i)], want, step * 1.01) << i;
    }
}

TEST(QuantImport, Int8PrecisionWithoutQdqAsksForAPreQuantizedModel) {
    onnx::ModelProto m = qdq_conv_model();
    onnx::GraphProto &g = *m.mutable_graph();
    // The float conv alone: x -> Conv (float weights) -> y.
    g.clear_node();
    g.clear_initializer();
    onnx::TensorProto &w = scalar(g, "w", onnx::TensorProto::FLOAT);
    for (int64_t d : {kChannels, kChannels, 3, 3}) w.add_dims(d);
    for (int i = 0; i < kChannels * kChannels * 9; ++i) w.add_float_data(0.01f * float(i % 7));
    node(g, "Conv", {"x", "w"}, "y").add_attribute()->CopyFrom([] {
        onnx::AttributeProto a;
        a.set_name("pads");
        a.set_type(onnx::AttributeProto::INTS);
        for (int i = 0; i < 4; ++i) a.add_ints(1);
        return a;
    }());
    frontend::ImportOptions options;
    options.precision = frontend::Precision::INT8;
    try {
        frontend::import_onnx_bytes(bytes_of(m), "float.onnx", options);
        FAIL() << "imported";
    } catch (const frontend::ModelError &e) {
        EXPECT_EQ(std::string(e.what()),
                  "float.onnx: node 'y' (Conv): calibration is not supported yet; give a "
                  "pre-quantized (QDQ) model");
    }
}

TEST(QuantImport, AnInt8ConvWithoutQuantizeLinearIsAnErrorNamingTheNode) {
    onnx::ModelProto m = qdq_conv_model();
    onnx::GraphProto &g = *m.mutable_graph();
    // Drop Relu, QuantizeLinear and DequantizeLinear: the conv's float result is the output.
    g.mutable_node()->DeleteSubrange(g.node_size() - 3, 3);
    g.mutable_node(g.node_size() - 1)->set_output(0, "y");
    g.mutable_node(g.node_size() - 1)->set_name("conv");
    const frontend::ImportedModel imported =
        frontend::import_onnx_bytes(bytes_of(m), "qdq_conv.onnx");
    try {
        codegen::lower(imported.graph, target::load_target("vpu27"));
        FAIL() << "lowered";
    } catch (const Error &e) {
        EXPECT_NE(std::string(e.what()).find(
                      "qdq_conv.onnx: node 'conv' (Conv): its float result needs a QuantizeLinear"),
                  std::string::npos)
            << e.what();
    }
}

// --- Per-axis QuantizeLinear and DequantizeLinear of activations -----------------------------

// x (`shape`) -> `op` (QuantizeLinear or DequantizeLinear) along `axis`, one scale and zero point
// (of `zero_type`) per index of the axis -> y. QuantizeLinear takes floats and gives
// `zero_type`; DequantizeLinear the reverse.
onnx::ModelProto per_axis_model(const std::string &op, const std::vector<int64_t> &shape,
                                int64_t axis, const std::vector<float> &scales, int zero_type,
                                const std::vector<int> &zero_points) {
    onnx::ModelProto m;
    m.set_ir_version(8);
    m.add_opset_import()->set_version(13);
    onnx::GraphProto &g = *m.mutable_graph();
    g.set_name("per_axis");
    const bool quantize = op == "QuantizeLinear";
    add_tensor_input(*g.add_input(), "x", shape);
    g.mutable_input(0)->mutable_type()->mutable_tensor_type()->set_elem_type(
        quantize ? onnx::TensorProto::FLOAT : zero_type);
    onnx::TensorProto &scale = scalar(g, "scale", onnx::TensorProto::FLOAT);
    scale.add_dims(int64_t(scales.size()));
    for (float v : scales) scale.add_float_data(v);
    onnx::TensorProto &zero = scalar(g, "zero", zero_type);
    zero.add_dims(int64_t(zero_points.size()));
    for (int v : zero_points) zero.add_int32_data(v);
    onnx::AttributeProto &a = *node(g, op, {"x", "scale", "zero"}, "y").add_attribute();
    a.set_name("axis");
    a.set_type(onnx::AttributeProto::INT);
    a.set_i(axis);
    add_tensor_input(*g.add_output(), "y", shape);
    g.mutable_output(0)->mutable_type()->mutable_tensor_type()->set_elem_type(
        quantize ? zero_type : onnx::TensorProto::FLOAT);
    return m;
}

struct PerAxisCase {
    std::vector<int64_t> shape;
    int64_t axis;
    int zero_type;
};

// Odd shapes of ranks 2 to 5, the axis along the device's C, H or W; u8 and i8.
const PerAxisCase kPerAxisCases[] = {
    {{2, 5, 3, 7}, 1, onnx::TensorProto::UINT8}, {{3, 4, 6}, -1, onnx::TensorProto::INT8},
    {{2, 3, 5, 7}, 3, onnx::TensorProto::UINT8}, {{1, 3, 5, 17}, 2, onnx::TensorProto::INT8},
    {{5, 9}, 1, onnx::TensorProto::INT8},        {{2, 3, 1, 4, 5}, 1, onnx::TensorProto::UINT8}};

// The index along `axis` (normalized) of each element of `shape`, in row-major order.
std::vector<size_t> axis_indices(const std::vector<int64_t> &shape, int64_t axis) {
    const size_t a = size_t(axis < 0 ? axis + int64_t(shape.size()) : axis);
    int64_t inner = 1, count = 1;
    for (size_t d = 0; d < shape.size(); ++d) {
        count *= shape[d];
        if (d > a) inner *= shape[d];
    }
    std::vector<size_t> at;
    for (int64_t i = 0; i < count; ++i) at.push_back(size_t((i / inner) % shape[a]));
    return at;
}

// Scales (some powers of two, whose halves are exact) and zero points of the type.
void per_axis_params(int64_t count, int zero_type, std::vector<float> &scales,
                     std::vector<int> &zero_points) {
    const float choices[] = {0.5f, 0.037f, 2.0f, 0.25f, 0.1f, 1.0f, 0.0078125f};
    const bool u8 = zero_type == onnx::TensorProto::UINT8;
    for (int64_t i = 0; i < count; ++i) {
        scales.push_back(choices[i % 7]);
        zero_points.push_back(u8 ? int((i * 53 + 7) % 256) : int((i * 37) % 256) - 128);
    }
}

TEST(QuantImport, PerAxisQuantizeLinearRoundsHalfToEvenAndSaturatesPerIndex) {
    std::mt19937 random(11);
    for (const PerAxisCase &c : kPerAxisCases) {
        SCOPED_TRACE(dsl::to_string(dsl::Shape(c.shape)) + " axis " + std::to_string(c.axis));
        const std::vector<size_t> at = axis_indices(c.shape, c.axis);
        const int64_t extent =
            c.shape[size_t(c.axis < 0 ? c.axis + int64_t(c.shape.size()) : c.axis)];
        std::vector<float> scales;
        std::vector<int> zeros;
        per_axis_params(extent, c.zero_type, scales, zeros);
        const frontend::ImportedModel m = frontend::import_onnx_bytes(
            bytes_of(per_axis_model("QuantizeLinear", c.shape, c.axis, scales, c.zero_type, zeros)),
            "quantize.onnx");
        EXPECT_EQ(ops_of(m.graph), std::vector<std::string>{"quantize"});
        const dsl::TensorDesc &y = m.graph.outputs().at(0).output();
        EXPECT_TRUE(y.quant.per_channel());
        EXPECT_EQ(y.quant.scale, scales);
        expect_matches_reference(m.graph);
        // Random reals over the range and past it, and halves of a step (ties), as fp16 holds
        // them; ONNX's result in float32 from those.
        std::uniform_real_distribution<float> uniform(-300, 300);
        dsl::ConstValues x{dsl::ElemType::F32, c.shape, {}, {}};
        std::vector<int64_t> want;
        const bool u8 = c.zero_type == onnx::TensorProto::UINT8;
        for (size_t i = 0; i < at.size(); ++i) {
            const float s = scales[at[i]];
            const float steps = i % 2 ? std::round(uniform(random)) / 2 : uniform(random);
            const float held = float(Halide::float16_t(steps * s));
            x.reals.push_back(held);
            const float q = std::nearbyint(held / s) + float(zeros[at[i]]);
            want.push_back(int64_t(std::clamp(q, u8 ? 0.0f : -128.0f, u8 ? 255.0f : 127.0f)));
        }
        const auto outputs = simulate(m.graph, {{"x", dsl::const_buffer(x)}});
        ASSERT_EQ(outputs.size(), 1u);
        EXPECT_EQ(dsl::const_values(outputs[0].value, "y").ints, want);
    }
}

TEST(QuantImport, PerAxisDequantizeLinearOfAnInt8InputGivesFloatsPerIndex) {
    std::mt19937 random(12);
    for (const PerAxisCase &c : kPerAxisCases) {
        SCOPED_TRACE(dsl::to_string(dsl::Shape(c.shape)) + " axis " + std::to_string(c.axis));
        const std::vector<size_t> at = axis_indices(c.shape, c.axis);
        const int64_t extent =
            c.shape[size_t(c.axis < 0 ? c.axis + int64_t(c.shape.size()) : c.axis)];
        std::vector<float> scales;
        std::vector<int> zeros;
        per_axis_params(extent, c.zero_type, scales, zeros);
        const frontend::ImportedModel m =
            frontend::import_onnx_bytes(bytes_of(per_axis_model("DequantizeLinear", c.shape, c.axis,
                                                                scales, c.zero_type, zeros)),
                                        "dequantize.onnx");
        EXPECT_EQ(ops_of(m.graph), std::vector<std::string>{"dequantize"});
        // The u8/i8 graph input carries the per-axis quantization.
        EXPECT_EQ(m.graph.inputs().at(0).output().quant.zero_point,
                  std::vector<int32_t>(zeros.begin(), zeros.end()));
        expect_matches_reference(m.graph);
        const bool u8 = c.zero_type == onnx::TensorProto::UINT8;
        dsl::ConstValues q{u8 ? dsl::ElemType::U8 : dsl::ElemType::I8, c.shape, {}, {}};
        std::vector<double> want;
        for (size_t i = 0; i < at.size(); ++i) {
            const int64_t v = int64_t(random() % 256) - (u8 ? 0 : 128);
            q.ints.push_back(v);
            // (q - zero point) * scale in float32, stored as fp16.
            want.push_back(double(Halide::float16_t(float(v - zeros[at[i]]) * scales[at[i]])));
        }
        const auto outputs = simulate(m.graph, {{"x", dsl::const_buffer(q)}});
        ASSERT_EQ(outputs.size(), 1u);
        EXPECT_EQ(reals_of(outputs[0].value), want);
    }
}

// A per-axis QuantizeLinear of a constant folds, rounding half to even per index.
TEST(QuantImport, PerAxisQuantizeLinearOfAConstantFolds) {
    onnx::ModelProto m = per_axis_model("QuantizeLinear", {2, 3}, 1, {0.5f, 2.0f, 0.25f},
                                        onnx::TensorProto::INT8, {1, -2, 3});
    // x an initializer.
    onnx::GraphProto &g = *m.mutable_graph();
    g.clear_input();
    onnx::TensorProto &x = scalar(g, "x", onnx::TensorProto::FLOAT);
    x.add_dims(2);
    x.add_dims(3);
    for (float v : {0.25f, 3.0f, -0.125f, 0.75f, -300.0f, 40.0f}) x.add_float_data(v);
    const frontend::ImportedModel imported =
        frontend::import_onnx_bytes(bytes_of(m), "quantize.onnx");
    ASSERT_EQ(imported.graph.outputs().size(), 1u);
    ASSERT_TRUE(dsl::is_constant(imported.graph.outputs()[0]));
    // 0.5 -> 0 + 1, 1.5 -> 2 - 2, -0.5 -> -0 + 3, 1.5 -> 2 + 1, -150 -> -152 saturated,
    // 160 + 3 saturated.
    EXPECT_EQ(dsl::const_values(imported.graph.outputs()[0]).ints,
              (std::vector<int64_t>{1, 0, 3, 3, -128, 127}));
}

// A QuantizeLinear of the same per-axis quantization after a DequantizeLinear is its int8
// tensor; per-axis tensors are refused where they cannot be computed, naming the node.
TEST(QuantImport, PerAxisQuantizationsFoldOrAreErrorsNamingTheNode) {
    onnx::ModelProto m = per_axis_model("QuantizeLinear", {2, 3, 5}, 1, {0.5f, 2.0f, 0.25f},
                                        onnx::TensorProto::UINT8, {1, 2, 3});
    onnx::GraphProto &g = *m.mutable_graph();
    node(g, "DequantizeLinear", {"y", "scale", "zero"}, "d")
        .add_attribute()
        ->CopyFrom(g.node(0).attribute(0));
    node(g, "QuantizeLinear", {"d", "scale", "zero"}, "q")
        .add_attribute()
        ->CopyFrom(g.node(0).attribute(0));
    g.mutable_output(0)->set_name("q");
    EXPECT_EQ(ops_of(frontend::import_onnx_bytes(bytes_of(m), "qdq.onnx").graph),
              (std::vector<std::string>{"quantize"}));

    const auto error = [](const onnx::ModelProto &model) {
        try {
            frontend::import_onnx_bytes(bytes_of(model), "bad.onnx");
        } catch (const frontend::ModelError &e) {
            return std::string(e.what());
        }
        return std::string("no error");
    };
    // Along the batch: each image is computed alone.
    EXPECT_NE(error(per_axis_model("QuantizeLinear", {2, 3}, 0, {0.5f, 2.0f},
                                   onnx::TensorProto::UINT8, {1, 2}))
                  .find("bad.onnx: node 'y' (QuantizeLinear): quantize 'y': axis 0 of 'x' "
                        "(2x3) is the batch"),
              std::string::npos);
    EXPECT_NE(error(per_axis_model("DequantizeLinear", {3, 4}, 1, {0.5f, 2.0f, 1.0f},
                                   onnx::TensorProto::UINT8, {1, 2, 3}))
                  .find("bad.onnx: node 'y' (DequantizeLinear): the scale must be one float or a "
                        "1-D tensor of one per index of axis 1 (4)"),
              std::string::npos);
    EXPECT_NE(error(per_axis_model("QuantizeLinear", {3, 4}, 1, {0.5f, 2.0f, 1.0f, 1.0f},
                                   onnx::TensorProto::UINT8, {1, 2, 3}))
                  .find("the zero point and the scale differ in count"),
              std::string::npos);
    // x (u8 [3, 4]) -> DequantizeLinear along axis 1 (`per_axis_input`, or per tensor) ->
    // MatMul by DequantizeLinear'd weights [4, 2] -> QuantizeLinear along axis 1 (or none).
    const auto matmul_model = [](bool per_axis_input, bool per_axis_output) {
        onnx::ModelProto m =
            per_axis_model("DequantizeLinear", {3, 4}, 1, {0.5f, 2.0f, 1.0f, 0.25f},
                           onnx::TensorProto::UINT8, {1, 2, 3, 4});
        onnx::GraphProto &g = *m.mutable_graph();
        if (!per_axis_input) g.mutable_node(0)->set_input(1, "one");
        g.mutable_node(0)->set_input(2, "");
        scalar(g, "one", onnx::TensorProto::FLOAT).add_float_data(0.5f);
        onnx::TensorProto &w = scalar(g, "w", onnx::TensorProto::FLOAT);
        w.add_dims(4);
        w.add_dims(2);
        for (int i = 0; i < 8; ++i) w.add_float_data(0.25f * float(i - 3));
        node(g, "MatMul", {"y", "w"}, "prod");
        onnx::TensorProto &scales = scalar(g, "out_scales", onnx::TensorProto::FLOAT);
        scales.add_dims(2);
        scales.add_float_data(0.5f);
        scales.add_float_data(0.25f);
        onnx::ValueInfoProto &out = *g.mutable_output(0);
        out.set_name("prod");
        out.mutable_type()->mutable_tensor_type()->mutable_shape()->mutable_dim(1)->set_dim_value(
            2);
        if (per_axis_output) {
            node(g, "QuantizeLinear", {"prod", "out_scales"}, "q")
                .add_attribute()
                ->CopyFrom(g.node(0).attribute(0));
            out.set_name("q");
            out.mutable_type()->mutable_tensor_type()->set_elem_type(onnx::TensorProto::UINT8);
        }
        return m;
    };
    // An int8 layer reading a per-axis tensor: int8 layers take one quantization per tensor.
    const std::string reading = error(matmul_model(true, false));
    EXPECT_NE(reading.find("bad.onnx: node 'prod' (MatMul): matmul 'prod': input 'x' is "
                           "quantized per channel; activations are quantized per tensor"),
              std::string::npos)
        << reading;
    // An int8 layer's result requantized per axis.
    const std::string requantized = error(matmul_model(false, true));
    EXPECT_NE(requantized.find("bad.onnx: node 'q' (QuantizeLinear): input 'prod.unquantized' is "
                               "an int8 layer's result, which is requantized per tensor only"),
              std::string::npos)
        << requantized;
}

// The quantize layer takes a scale per tensor or per axis, not both, and the tables' sizes.
TEST(QuantImport, APerAxisQuantizeLayerChecksItsTables) {
    dsl::TensorDesc t;
    t.name = "in";
    t.shape = dsl::Shape({1, 3, 5, 7});
    t.type = dsl::ElemType::F16;
    const dsl::Layer in = dsl::Layer::input(t);
    const auto error = [&](const dsl::Attrs &attrs) {
        try {
            algorithms::layer_registry().build("quantize", "q", {in}, attrs);
        } catch (const dsl::LayerError &e) {
            return std::string(e.what());
        }
        return std::string("no error");
    };
    const dsl::ConstValues three{dsl::ElemType::F32, {3}, {}, {0.5, 1, 2}};
    const dsl::Attrs per_axis = dsl::Attrs()
                                    .set("output_type", std::string("i8"))
                                    .set("output_scales", dsl::const_buffer(three));
    EXPECT_EQ(error(per_axis), "no error");
    EXPECT_EQ(error(dsl::Attrs(per_axis).set("output_scale", 0.5)),
              "quantize 'q': give output_scale or output_scales, not both");
    EXPECT_EQ(error(dsl::Attrs(per_axis).set("axis", int64_t(2))),
              "quantize 'q': output_scales and output_zero_points must hold one value per index "
              "of axis 2 (5)");
    EXPECT_EQ(
        error(dsl::Attrs(per_axis).set(
            "output_zero_points", dsl::const_buffer({dsl::ElemType::I32, {3}, {0, 200, 0}, {}}))),
        "quantize 'q': zero point 200 is outside i8");
    EXPECT_EQ(error(dsl::Attrs().set("output_type", std::string("u8"))),
              "quantize 'q': give output_scale (per tensor) or output_scales (per axis)");
}

// Every fp16 value through a quantize layer on the device, against ONNX's definition computed
// here: round(x / scale) half to even, plus the zero point, saturated (NaN left out: its
// integer is the CPU reference's, which check_against_reference compares). A scale whose
// reciprocal rounds every fp16 value alike runs as a multiply, with no special-function
// instruction in the SHAVE kernel, and with its rounding and saturation in bits (21
// instructions per 16 values) where that too gives every value's integer: not at scale 1e6,
// where only the infinities saturate (x is clamped to them), and the clamped product is no
// longer below 2^22. 0.017125 (torchvision's blue channel, 1 / 58.395) has an fp16 value that
// rounds the other way, and keeps the division.
TEST(QuantImport, AQuantizeOfFp16GivesOnnxsDivisionForEveryFp16Value) {
    const dsl::TensorDesc t = test::activation("x", 16, 64, 64, dsl::ElemType::F16);
    const dsl::Layer in = dsl::Layer::input(t);
    std::vector<double> values(65536);
    for (uint32_t bits = 0; bits < 65536; ++bits)
        values[bits] = double(Halide::float16_t::make_from_bits(uint16_t(bits)));
    const Halide::Buffer<> input =
        dsl::const_buffer(dsl::ConstValues{dsl::ElemType::F16, t.shape.raw(), {}, values});
    enum class Form { Bits, Multiply, Divide };
    struct Case {
        float scale;
        int32_t zero_point;
        dsl::ElemType type;
        Form form;
    };
    for (const Case &c : {Case{0.0186f, 128, dsl::ElemType::U8, Form::Bits},
                          Case{0.0473219f, -7, dsl::ElemType::I8, Form::Bits},
                          Case{3.0f, 0, dsl::ElemType::I8, Form::Bits},
                          Case{0.0078125f, 255, dsl::ElemType::U8, Form::Bits},
                          Case{0.25f, -128, dsl::ElemType::I8, Form::Bits},
                          Case{1e6f, 128, dsl::ElemType::U8, Form::Multiply},
                          Case{0.017125f, 128, dsl::ElemType::U8, Form::Divide},
                          Case{0.017125f, 0, dsl::ElemType::I8, Form::Divide}}) {
        SCOPED_TRACE("scale " + std::to_string(c.scale) + ", zero point " +
                     std::to_string(c.zero_point));
        const dsl::Layer q = algorithms::layer_registry().build(
            "quantize", "q", {in},
            dsl::Attrs()
                .set("output_type", std::string(c.type == dsl::ElemType::U8 ? "u8" : "i8"))
                .set("output_scale", double(c.scale))
                .set("output_zero_point", int64_t(c.zero_point)));
        const dsl::Graph graph("quantize", {q});
        const target::Target target = target::load_target("vpu27");
        const std::vector<uint8_t> blob = codegen::lower(graph, target);
        const auto *kernels = blob::GetBlob(blob.data())->kernels();
        ASSERT_EQ(kernels->size(), 1u);
        const float arith_ops = kernels->Get(0)->arith_ops_per_vector();
        EXPECT_EQ(kernels->Get(0)->special_ops_per_vector() > 0, c.form == Form::Divide);
        if (c.form == Form::Bits) {
            EXPECT_LE(arith_ops, 21);
        } else if (c.form == Form::Multiply) {
            EXPECT_GE(arith_ops, 28);
        }
        sim::Simulator simulator(target, blob);
        const sim::RunResult run =
            simulator.run(frontend::blob_inputs(simulator.blob(), {{"x", input}}));
        const std::vector<int64_t> got =
            dsl::const_values(frontend::blob_outputs(simulator.blob(), run.outputs).at(0).value,
                              "q")
                .ints;
        ASSERT_EQ(got.size(), values.size());
        const float lo = c.type == dsl::ElemType::U8 ? 0 : -128;
        const float hi = c.type == dsl::ElemType::U8 ? 255 : 127;
        int mismatches = 0;
        for (size_t i = 0; i < values.size(); ++i) {
            const float x = float(values[i]);
            if (std::isnan(x)) continue;
            const float want =
                std::clamp(std::nearbyint(x / c.scale) + float(c.zero_point), lo, hi);
            if (float(got[i]) != want && ++mismatches <= 3)
                ADD_FAILURE() << "x = " << x << ": " << got[i] << ", ONNX gives " << want;
        }
        EXPECT_EQ(mismatches, 0);
    }
    // Why 0.017125 keeps the division.
    const float x = 1.0703125f, scale = 0.017125f;
    EXPECT_EQ(std::nearbyint(x / scale), 63.0f);
    EXPECT_EQ(std::nearbyint(x * (1.0f / scale)), 62.0f);
}

// Every u8 and i8 value through a dequantize layer on the device: (q - zero point) * scale in
// float32, rounded once to fp16. The difference is taken in 16 bits (8-bit values and zero
// points), which holds it exactly: 8 SHAVE instructions per 8 values, where int32 took about 9.
TEST(QuantImport, ADequantizeOfEvery8BitValueIsTheFloat32ProductRounded) {
    const target::Target target = target::load_target("vpu27");
    for (const auto &[type, zero_point] :
         std::vector<std::pair<dsl::ElemType, int32_t>>{{dsl::ElemType::U8, 255},
                                                        {dsl::ElemType::U8, 3},
                                                        {dsl::ElemType::I8, -128},
                                                        {dsl::ElemType::I8, 127}}) {
        SCOPED_TRACE(std::string(dsl::to_string(type)) + " zero point " +
                     std::to_string(zero_point));
        const float scale = 0.0371f;
        dsl::TensorDesc t = test::activation("q", 16, 4, 4, type);
        t.quant = dsl::Quant::per_tensor(scale, zero_point);
        const dsl::Layer d =
            algorithms::layer_registry().build("dequantize", "d", {dsl::Layer::input(t)}, {});
        std::vector<int64_t> ints(256);
        for (int i = 0; i < 256; ++i) ints[size_t(i)] = type == dsl::ElemType::U8 ? i : i - 128;
        const Halide::Buffer<> input =
            dsl::const_buffer(dsl::ConstValues{type, t.shape.raw(), ints, {}});
        const dsl::Graph graph("dequantize", {d});
        const std::vector<uint8_t> blob = codegen::lower(graph, target);
        ASSERT_EQ(blob::GetBlob(blob.data())->kernels()->size(), 1u);
        EXPECT_LE(blob::GetBlob(blob.data())->kernels()->Get(0)->arith_ops_per_vector(), 8.5);
        sim::Simulator simulator(target, blob);
        const sim::RunResult run =
            simulator.run(frontend::blob_inputs(simulator.blob(), {{"q", input}}));
        const std::vector<double> got =
            reals_of(frontend::blob_outputs(simulator.blob(), run.outputs).at(0).value);
        ASSERT_EQ(got.size(), ints.size());
        for (size_t i = 0; i < ints.size(); ++i)
            ASSERT_EQ(got[i], double(Halide::float16_t(float(ints[i] - zero_point) * scale)))
                << "q = " << ints[i];
    }
}

// QLinearMatMul of rank 3 and 4 inputs by weights of rank 2, or of rank 3 repeating one matrix:
// within one step of ONNX's result (rint((A - za)(B - zb) * sa * sb / sy) + zy, saturated).
TEST(QuantImport, QLinearMatMulOfRank3And4IsWithinOneStep) {
    struct Case {
        std::vector<int64_t> a, b;
    };
    std::mt19937 random(13);
    for (const Case &c :
         {Case{{3, 5, 7}, {7, 6}}, Case{{2, 5, 9}, {2, 9, 3}}, Case{{2, 3, 5, 7}, {1, 7, 17}}}) {
        SCOPED_TRACE(dsl::to_string(dsl::Shape(c.a)) + " x " + dsl::to_string(dsl::Shape(c.b)));
        const int64_t k = c.a.back(), n = c.b.back();
        int64_t rows = 1;
        for (size_t d = 0; d + 1 < c.a.size(); ++d) rows *= c.a[d];
        std::vector<int64_t> out = c.a;
        out.back() = n;
        constexpr float kA = 0.02f, kB = 0.013f, kY = 0.05f;
        constexpr int kZa = 113, kZb = 114, kZy = 118;
        onnx::ModelProto m;
        m.set_ir_version(8);
        m.add_opset_import()->set_version(13);
        onnx::GraphProto &g = *m.mutable_graph();
        g.set_name("qlinear_matmul");
        add_tensor_input(*g.add_input(), "a", c.a);
        g.mutable_input(0)->mutable_type()->mutable_tensor_type()->set_elem_type(
            onnx::TensorProto::UINT8);
        scalar(g, "a_scale", onnx::TensorProto::FLOAT).add_float_data(kA);
        scalar(g, "a_zero", onnx::TensorProto::UINT8).add_int32_data(kZa);
        onnx::TensorProto &b = scalar(g, "b", onnx::TensorProto::UINT8);
        for (int64_t d : c.b) b.add_dims(d);
        std::vector<int> matrix;
        for (int64_t i = 0; i < k * n; ++i) matrix.push_back(int(random() % 256));
        for (size_t i = 0;
             i < size_t(std::accumulate(c.b.begin(), c.b.end(), int64_t(1), std::multiplies<>()));
             ++i)
            b.add_int32_data(matrix[i % matrix.size()]);
        scalar(g, "b_scale", onnx::TensorProto::FLOAT).add_float_data(kB);
        scalar(g, "b_zero", onnx::TensorProto::UINT8).add_int32_data(kZb);
        scalar(g, "y_scale", onnx::TensorProto::FLOAT).add_float_data(kY);
        scalar(g, "y_zero", onnx::TensorProto::UINT8).add_int32_data(kZy);
        node(g, "QLinearMatMul",
             {"a", "a_scale", "a_zero", "b", "b_scale", "b_zero", "y_scale", "y_zero"}, "y");
        add_tensor_input(*g.add_output(), "y", out);
        g.mutable_output(0)->mutable_type()->mutable_tensor_type()->set_elem_type(
            onnx::TensorProto::UINT8);
        const frontend::ImportedModel imported =
            frontend::import_onnx_bytes(bytes_of(m), "qlinear_matmul.onnx");
        EXPECT_EQ(imported.graph.outputs().at(0).output().shape, dsl::Shape(out));
        EXPECT_EQ(imported.graph.find("y.product").op(), "matmul");
        expect_matches_reference(imported.graph);

        dsl::ConstValues a{dsl::ElemType::U8, c.a, {}, {}};
        for (int64_t i = 0; i < rows * k; ++i) a.ints.push_back(int64_t(random() % 256));
        const auto outputs = simulate(imported.graph, {{"a", dsl::const_buffer(a)}});
        ASSERT_EQ(outputs.size(), 1u);
        const std::vector<int64_t> got = dsl::const_values(outputs[0].value, "y").ints;
        ASSERT_EQ(got.size(), size_t(rows * n));
        int64_t largest = 0;
        for (int64_t r = 0; r < rows; ++r)
            for (int64_t j = 0; j < n; ++j) {
                int64_t acc = 0;
                for (int64_t i = 0; i < k; ++i)
                    acc += (a.ints[size_t(r * k + i)] - kZa) * (matrix[size_t(i * n + j)] - kZb);
                const double want = std::clamp(
                    std::nearbyint(double(acc) * (double(kA) * kB / kY)) + kZy, 0.0, 255.0);
                largest = std::max(largest, std::abs(got[size_t(r * n + j)] - int64_t(want)));
            }
        EXPECT_LE(largest, 1);
    }
}

// Weights of rank 3 with a different matrix per batch are refused, naming the node.
TEST(QuantImport, QLinearMatMulOfDifferentMatricesPerBatchIsAnErrorNamingTheNode) {
    const std::string dir = kNodeTests + "test_qlinearmatmul_3D";
    const std::vector<uint8_t> model = file_bytes(dir + "/model.onnx");
    onnx::ModelProto proto;
    ASSERT_TRUE(proto.ParseFromArray(model.data(), int(model.size())));
    frontend::ImportOptions options;
    for (int i = 0; i < proto.graph().input_size(); ++i)
        options.known_inputs[proto.graph().input(i).name()] =
            read_pb_tensor(dir + "/test_data_set_0/input_" + std::to_string(i) + ".pb");
    // b (input 3): [2, 4, 3]; change one element of the second matrix.
    Halide::Buffer<uint8_t> b(options.known_inputs.at(proto.graph().input(3).name()).copy());
    b(0, 0, 1) = uint8_t(b(0, 0, 1) + 1);
    options.known_inputs[proto.graph().input(3).name()] = b;
    // Input a stays a graph input.
    options.known_inputs.erase(proto.graph().input(0).name());
    try {
        frontend::import_onnx_bytes(model, "qlinearmatmul_3D.onnx", options);
        FAIL() << "imported";
    } catch (const frontend::ModelError &e) {
        EXPECT_NE(std::string(e.what()).find("(QLinearMatMul): weights of rank 3 with different "
                                             "matrices per batch are not supported"),
                  std::string::npos)
            << e.what();
    }
}

} // namespace
