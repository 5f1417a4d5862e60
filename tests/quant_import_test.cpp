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
#include <random>

#include "../frontend/src/onnx_internal.h"
#include "algorithms/registry.h"
#include "codegen/check.h"
#include "codegen/lower.h"
#include "dsl/constant_values.h"
#include "frontend/blob_io.h"
#include "frontend/onnx_import.h"
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

TEST(QuantImport, QLinearMatMulOfRank3IsAnErrorNamingTheNode) {
    try {
        node_test_difference("test_qlinearmatmul_3D");
        FAIL() << "imported";
    } catch (const frontend::ModelError &e) {
        EXPECT_NE(std::string(e.what()).find("(QLinearMatMul): "), std::string::npos) << e.what();
    }
}

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
onnx::ModelProto qdq_conv_model() {
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
int64_t onnx_output(int oc, int y, int x) {
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

    // Within one step of ONNX's rounding, on inputs that are steps of the input's
    // quantization (fp16 holds them closer than a tenth of a step).
    dsl::ConstValues x{dsl::ElemType::F32, {1, kChannels, kSize, kSize}, {}, {}};
    for (int c = 0; c < kChannels; ++c)
        for (int y = 0; y < kSize; ++y)
            for (int xx = 0; xx < kSize; ++xx)
                x.reals.push_back((double(input_value(c, y, xx)) - kInZero) * kInScale);
    const auto outputs = simulate(m.graph, {{"x", dsl::const_buffer(x)}});
    ASSERT_EQ(outputs.size(), 1u);
    const std::vector<double> got = reals_of(outputs[0].value);
    ASSERT_EQ(got.size(), x.reals.size());
    double largest = 0;
    size_t i = 0;
    for (int c = 0; c < kChannels; ++c)
        for (int y = 0; y < kSize; ++y)
            for (int xx = 0; xx < kSize; ++xx, ++i) {
                const double want = double(onnx_output(c, y, xx) - kOutZero) * kOutScale;
                largest = std::max(largest, std::abs(got[i] - want));
            }
    // One step, and fp16's rounding of values below 10.
    EXPECT_LE(largest, kOutScale + 0.005);
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

} // namespace
