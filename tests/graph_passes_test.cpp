// The graph passes (frontend/graph_passes.h): each pass changes the graph as it says, keeps the
// layer names, and the compiled graph it leaves computes what the graph before it computes:
// the same bits for fusions the PPE computes alike, within fp16 rounding for folded batch
// norms and leaky ReLUs. Channel counts are odd (13, 21) so that channel padding shows.
#include <gtest/gtest.h>

#include <onnx/onnx_pb.h>

#include <cmath>
#include <random>
#include <sstream>

#include "algorithms/layers.h"
#include "algorithms/reference.h"
#include "algorithms/registry.h"
#include "codegen/check.h"
#include "dsl/constant_values.h"
#include "dsl/registry.h"
#include "frontend/compare.h"
#include "frontend/graph_passes.h"
#include "frontend/onnx_import.h"
#include "vpu_target/target.h"

using namespace vpuc;

namespace {

const target::Target &vpu27() {
    static const target::Target t = target::load_target("vpu27");
    return t;
}

dsl::Layer f16_input(const std::string &name, int64_t c, int64_t h, int64_t w,
                     dsl::DimsOrder order = dsl::DimsOrder::NHWC()) {
    dsl::TensorDesc t;
    t.name = name;
    t.shape = dsl::Shape{1, c, h, w};
    t.type = dsl::ElemType::F16;
    t.order = order;
    return dsl::Layer::input(t);
}

// A u8 graph input 1xCxHxW held NHWC, of quantization `quant`.
dsl::Layer u8_input(const std::string &name, int64_t c, int64_t h, int64_t w, dsl::Quant quant) {
    dsl::TensorDesc t;
    t.name = name;
    t.shape = dsl::Shape{1, c, h, w};
    t.type = dsl::ElemType::U8;
    t.order = dsl::DimsOrder::NHWC();
    t.quant = std::move(quant);
    return dsl::Layer::input(t);
}

std::vector<float> uniform(size_t count, float low, float high, uint32_t seed) {
    std::mt19937 gen(seed);
    std::uniform_real_distribution<float> dist(low, high);
    std::vector<float> v(count);
    for (float &x : v) x = dist(gen);
    return v;
}

algorithms::FloatWeights float_weights(const std::vector<int> &dims, uint32_t seed) {
    algorithms::FloatWeights w;
    w.weights = Halide::Buffer<Halide::float16_t>(dims);
    size_t count = 1;
    for (int d : dims) count *= size_t(d);
    const std::vector<float> values = uniform(count, -0.5f, 0.5f, seed);
    for (size_t i = 0; i < count; ++i) w.weights.data()[i] = Halide::float16_t(values[i]);
    const int channels = dims.back();
    w.bias = uniform(size_t(channels), -1.0f, 1.0f, seed + 1);
    return w;
}

Halide::Buffer<> f32_vector(const std::vector<float> &values) {
    Halide::Buffer<float> b(int(values.size()));
    for (size_t i = 0; i < values.size(); ++i) b(int(i)) = values[i];
    return b;
}

dsl::Layer batch_norm(const std::string &name, const dsl::Layer &in, uint32_t seed) {
    const size_t c = size_t(in.output().shape[dsl::dims::C]);
    dsl::Attrs a;
    a.set("scale", f32_vector(uniform(c, 0.5f, 2.0f, seed)));
    a.set("bias", f32_vector(uniform(c, -1.0f, 1.0f, seed + 1)));
    return algorithms::layer_registry().build("batch_norm", name, {in}, a);
}

std::vector<std::string> ops_of(const dsl::Graph &g) {
    std::vector<std::string> ops;
    for (const dsl::Layer &l : g.layers()) ops.push_back(l.op() + ":" + l.name());
    return ops;
}

std::vector<Halide::Buffer<>> random_inputs(const dsl::Graph &g, uint32_t seed) {
    std::vector<Halide::Buffer<>> inputs;
    for (const dsl::Layer &in : g.inputs())
        inputs.push_back(codegen::random_buffer(in.output(), seed++));
    return inputs;
}

// Compiles and simulates `passed` (checked against its own reference: the DPU's bits), then
// holds its outputs to the reference of `before`, the graph the passes started from, within
// `f16_ulp` ulps.
void expect_same_results(const dsl::Graph &before, const dsl::Graph &passed, int64_t f16_ulp,
                         std::vector<Halide::Buffer<>> inputs = {}) {
    if (inputs.empty()) inputs = random_inputs(before, 7);
    codegen::CheckOptions options;
    options.inputs = inputs;
    options.tolerance.f16_ulp = 1;
    const codegen::CheckResult result = codegen::check_against_reference(passed, vpu27(), options);
    ASSERT_TRUE(result.ok()) << result.report();
    const std::vector<Halide::Buffer<>> expected = algorithms::run_reference(before, inputs);
    ASSERT_EQ(expected.size(), result.run.outputs.size());
    for (size_t i = 0; i < expected.size(); ++i) {
        const dsl::TensorDesc &t = passed.outputs()[i].output();
        const codegen::OutputCheck check = codegen::compare_output(
            t, result.run.outputs[i], algorithms::to_memory_order(t, expected[i]), {f16_ulp, 0});
        EXPECT_EQ(check.mismatches, 0) << t.name << ": " << check.first_mismatch;
    }
}

// The same for a fold that rounds differently: every element within 1e-2 + 1e-2 * |expected|.
void expect_close_results(const dsl::Graph &before, const dsl::Graph &passed) {
    const std::vector<Halide::Buffer<>> inputs = random_inputs(before, 11);
    codegen::CheckOptions options;
    options.inputs = inputs;
    const codegen::CheckResult result = codegen::check_against_reference(passed, vpu27(), options);
    ASSERT_TRUE(result.ok()) << result.report();
    const std::vector<Halide::Buffer<>> expected = algorithms::run_reference(before, inputs);
    for (size_t i = 0; i < expected.size(); ++i) {
        const dsl::TensorDesc &t = passed.outputs()[i].output();
        const Halide::Buffer<> got = algorithms::from_memory_order(t, result.run.outputs[i]);
        const frontend::TensorComparison c = frontend::compare_tensors(got, expected[i]);
        EXPECT_TRUE(c.passed) << t.name << ": " << c.reason;
    }
}

frontend::GraphPassState run_one(const dsl::Graph &g, const std::string &pass) {
    frontend::GraphPassState state(g.clone());
    frontend::run_graph_pass(state, pass);
    return state;
}

// --- ONNX: Conv -> BatchNormalization -> Relu --------------------------------------------

void add_initializer(onnx::GraphProto &g, const std::string &name, std::vector<int64_t> dims,
                     const std::vector<float> &values) {
    onnx::TensorProto &t = *g.add_initializer();
    t.set_name(name);
    t.set_data_type(onnx::TensorProto::FLOAT);
    for (int64_t d : dims) t.add_dims(d);
    for (float v : values) t.add_float_data(v);
}

void add_value(google::protobuf::RepeatedPtrField<onnx::ValueInfoProto> &list,
               const std::string &name, std::vector<int64_t> dims) {
    onnx::ValueInfoProto &v = *list.Add();
    v.set_name(name);
    v.mutable_type()->mutable_tensor_type()->set_elem_type(onnx::TensorProto::FLOAT);
    for (int64_t d : dims)
        v.mutable_type()->mutable_tensor_type()->mutable_shape()->add_dim()->set_dim_value(d);
}

onnx::NodeProto &add_node(onnx::GraphProto &g, const std::string &name, const std::string &op,
                          std::vector<std::string> inputs, const std::string &output) {
    onnx::NodeProto &n = *g.add_node();
    n.set_name(name);
    n.set_op_type(op);
    for (const std::string &in : inputs) n.add_input(in);
    n.add_output(output);
    return n;
}

constexpr int kIn = 13, kOut = 21, kH = 9, kW = 7;
constexpr float kEpsilon = 1e-3f;

// The BatchNormalization's inputs: scale, B, mean, var.
struct NormValues {
    std::vector<float> scale = uniform(kOut, 0.5f, 1.5f, 21), bias = uniform(kOut, -1, 1, 22),
                       mean = uniform(kOut, -1, 1, 23), var = uniform(kOut, 0.25f, 2, 24);
};

std::vector<uint8_t> conv_bn_relu_model(const NormValues &n) {
    onnx::ModelProto m;
    m.set_ir_version(8);
    m.add_opset_import()->set_version(15);
    onnx::GraphProto &g = *m.mutable_graph();
    g.set_name("conv_bn_relu");
    add_value(*g.mutable_input(), "x", {1, kIn, kH, kW});
    add_initializer(g, "w", {kOut, kIn, 3, 3}, uniform(kOut * kIn * 9, -0.3f, 0.3f, 20));
    add_initializer(g, "b", {kOut}, uniform(kOut, -1, 1, 25));
    add_initializer(g, "bn_scale", {kOut}, n.scale);
    add_initializer(g, "bn_b", {kOut}, n.bias);
    add_initializer(g, "bn_mean", {kOut}, n.mean);
    add_initializer(g, "bn_var", {kOut}, n.var);
    onnx::NodeProto &conv = add_node(g, "conv1", "Conv", {"x", "w", "b"}, "c");
    onnx::AttributeProto &pads = *conv.add_attribute();
    pads.set_name("pads");
    pads.set_type(onnx::AttributeProto::INTS);
    for (int i = 0; i < 4; ++i) pads.add_ints(1);
    onnx::NodeProto &bn = add_node(g, "bn1", "BatchNormalization",
                                   {"c", "bn_scale", "bn_b", "bn_mean", "bn_var"}, "n");
    onnx::AttributeProto &eps = *bn.add_attribute();
    eps.set_name("epsilon");
    eps.set_type(onnx::AttributeProto::FLOAT);
    eps.set_f(kEpsilon);
    add_node(g, "relu1", "Relu", {"n"}, "y");
    add_value(*g.mutable_output(), "y", {1, kOut, kH, kW});
    const std::string s = m.SerializeAsString();
    return {s.begin(), s.end()};
}

TEST(GraphPasses, OnnxBatchNormImportsAsItsAffineAndFoldsIntoTheConv) {
    const NormValues n;
    const frontend::ImportedModel model =
        frontend::import_onnx_bytes(conv_bn_relu_model(n), "conv_bn_relu.onnx");
    const dsl::Graph &imported = model.graph;
    EXPECT_EQ(ops_of(imported),
              (std::vector<std::string>{"conv2d:conv1", "batch_norm:bn1", "relu:y"}));
    // The affine by hand: a = scale / sqrt(var + epsilon), b = B - mean * a.
    const dsl::Layer bn = imported.find("bn1");
    const Halide::Buffer<float> a(bn.attrs().get_tensor("scale"));
    const Halide::Buffer<float> b(bn.attrs().get_tensor("bias"));
    for (int c = 0; c < kOut; ++c) {
        const double factor = n.scale[size_t(c)] / std::sqrt(double(n.var[size_t(c)]) + kEpsilon);
        EXPECT_FLOAT_EQ(a(c), float(factor)) << c;
        EXPECT_FLOAT_EQ(b(c), float(n.bias[size_t(c)] - n.mean[size_t(c)] * factor)) << c;
    }

    const frontend::GraphPassState passed = frontend::run_graph_passes(imported);
    // The conv computes all three, under the name of the graph output 'y' the ReLU had.
    EXPECT_EQ(ops_of(passed.graph), std::vector<std::string>{"conv2d:y"});
    EXPECT_EQ(passed.graph.find("y").attrs().get_string("activation"), "relu");
    EXPECT_EQ(passed.merged_into,
              (std::map<std::string, std::string>{{"bn1", "y"}, {"conv1", "y"}}));
    // The caller's graph is left alone.
    EXPECT_EQ(imported.layers().size(), 3u);
    expect_close_results(imported, passed.graph);
}

TEST(GraphPasses, ABatchNormComputesItsAffineByHandAndRunsOnTheShaves) {
    const dsl::Layer x = f16_input("x", kIn, 5, 3);
    const dsl::Graph g("bn", {batch_norm("bn", x, 3)});
    const std::vector<Halide::Buffer<>> inputs = random_inputs(g, 5);
    const Halide::Buffer<Halide::float16_t> in(inputs[0]);
    const Halide::Buffer<Halide::float16_t> out(algorithms::run_reference(g, inputs)[0]);
    const Halide::Buffer<float> a(g.find("bn").attrs().get_tensor("scale"));
    const Halide::Buffer<float> b(g.find("bn").attrs().get_tensor("bias"));
    for (int y = 0; y < 5; ++y)
        for (int xx = 0; xx < 3; ++xx)
            for (int c = 0; c < kIn; ++c) {
                const float want = float(in(c, xx, y)) * a(c) + b(c);
                EXPECT_EQ(out(c, xx, y).to_bits(), Halide::float16_t(want).to_bits())
                    << c << ", " << xx << ", " << y;
            }
    // Nothing to fold into: it stays, with a note saying why.
    const frontend::GraphPassState passed = run_one(g, "fold_batch_norm");
    EXPECT_EQ(ops_of(passed.graph), std::vector<std::string>{"batch_norm:bn"});
    ASSERT_EQ(passed.notes.size(), 1u);
    EXPECT_NE(passed.notes[0].find("reads no convolution"), std::string::npos) << passed.notes[0];
    const codegen::CheckResult r = codegen::check_against_reference(g, vpu27());
    EXPECT_TRUE(r.ok()) << r.report();
}

TEST(GraphPasses, BatchNormFoldsIntoADepthwiseConvAndAMatmul) {
    algorithms::Conv2dParams p;
    p.pad_top = p.pad_left = p.pad_bottom = p.pad_right = 1;
    const dsl::Layer x = f16_input("x", kOut, 8, 6);
    const dsl::Layer dw =
        algorithms::depthwise_conv2d("dw", x, float_weights({1, 3, 3, kOut}, 31), p);
    const dsl::Graph conv_graph("dw_bn", {batch_norm("dw_bn", dw, 32)});
    const frontend::GraphPassState conv_passed = run_one(conv_graph, "fold_batch_norm");
    EXPECT_EQ(ops_of(conv_passed.graph), std::vector<std::string>{"depthwise_conv2d:dw_bn"});
    expect_close_results(conv_graph, conv_passed.graph);

    dsl::TensorDesc rows;
    rows.name = "rows";
    rows.shape = dsl::Shape{5, kIn};
    rows.type = dsl::ElemType::F16;
    rows.order = dsl::DimsOrder::identity(2);
    const dsl::Layer fc =
        algorithms::matmul("fc", dsl::Layer::input(rows), float_weights({kIn, kOut}, 33));
    const dsl::Graph fc_graph("fc_bn", {batch_norm("fc_bn", fc, 34)});
    const frontend::GraphPassState fc_passed = run_one(fc_graph, "fold_batch_norm");
    EXPECT_EQ(ops_of(fc_passed.graph), std::vector<std::string>{"matmul:fc_bn"});
    expect_close_results(fc_graph, fc_passed.graph);
}

TEST(GraphPasses, BatchNormStaysWhenTheConvHasAnotherReaderOrAnActivation) {
    const dsl::Layer x = f16_input("x", kIn, 6, 5);
    algorithms::Conv2dParams relu;
    relu.activation = algorithms::Activation::relu();
    const dsl::Layer conv = algorithms::conv2d("conv", x, float_weights({kIn, 1, 1, kOut}, 41));
    const dsl::Layer other = algorithms::relu("other", conv);
    const dsl::Graph shared("shared", {batch_norm("bn", conv, 42), other});
    EXPECT_EQ(run_one(shared, "fold_batch_norm").graph.layers().size(), 3u);
    const dsl::Layer activated =
        algorithms::conv2d("conv", x, float_weights({kIn, 1, 1, kOut}, 41), relu);
    const dsl::Graph after_relu("after_relu", {batch_norm("bn", activated, 42)});
    const frontend::GraphPassState passed = run_one(after_relu, "fold_batch_norm");
    EXPECT_EQ(passed.graph.layers().size(), 2u);
    ASSERT_EQ(passed.notes.size(), 1u);
    EXPECT_NE(passed.notes[0].find("activation"), std::string::npos) << passed.notes[0];
}

// --- fuse_swish --------------------------------------------------------------------------

// A SiLU as exported, conv -> Sigmoid -> Mul(conv, sigmoid), in either operand order, becomes
// one swish layer named after the multiply, reading the conv; its float32 result rounded once is
// within fp16 rounding of the pair's (the sigmoid rounded, then the product).
TEST(GraphPasses, ASigmoidTimesItsOwnInputBecomesOneSwish) {
    const dsl::Layer x = f16_input("x", kIn, 7, 5);
    const dsl::Layer conv = algorithms::conv2d("conv", x, float_weights({kIn, 1, 1, kOut}, 81));
    const dsl::Layer silu = algorithms::eltwise("silu", algorithms::EltwiseOp::Mul, conv,
                                                algorithms::sigmoid("sig", conv));
    const dsl::Layer dw =
        algorithms::depthwise_conv2d("dw", silu, float_weights({1, 1, 1, kOut}, 82));
    const dsl::Layer silu2 = algorithms::eltwise("silu2", algorithms::EltwiseOp::Mul,
                                                 algorithms::sigmoid("sig2", dw), dw);
    const dsl::Graph g("silu", {silu2});
    const frontend::GraphPassState passed = run_one(g, "fuse_swish");
    EXPECT_EQ(ops_of(passed.graph),
              (std::vector<std::string>{"conv2d:conv", "swish:silu", "depthwise_conv2d:dw",
                                        "swish:silu2"}));
    EXPECT_TRUE(passed.graph.find("silu").inputs().at(0).same_as(passed.graph.find("conv")));
    EXPECT_EQ(passed.merged_into.at("sig"), "silu");
    EXPECT_EQ(passed.merged_into.at("sig2"), "silu2");
    ASSERT_EQ(passed.notes.size(), 1u);
    EXPECT_NE(passed.notes[0].find("2 x * sigmoid(x) pair(s)"), std::string::npos);
    expect_close_results(g, passed.graph);
}

// The pair stays when the sigmoid has another reader or is an output, or multiplies another
// tensor than its input.
TEST(GraphPasses, ASigmoidReadElsewhereOrOfAnotherTensorStays) {
    const dsl::Layer x = f16_input("x", kIn, 5, 3);
    const dsl::Layer conv = algorithms::conv2d("conv", x, float_weights({kIn, 1, 1, kOut}, 83));
    const dsl::Layer other = algorithms::conv2d("other", x, float_weights({kIn, 1, 1, kOut}, 84));
    const dsl::Layer sig = algorithms::sigmoid("sig", conv);
    const dsl::Graph shared(
        "shared", {algorithms::eltwise("silu", algorithms::EltwiseOp::Mul, conv, sig), sig});
    EXPECT_EQ(ops_of(run_one(shared, "fuse_swish").graph),
              (std::vector<std::string>{"conv2d:conv", "sigmoid:sig", "mul:silu"}));
    const dsl::Graph gated("gated",
                           {algorithms::eltwise("gate", algorithms::EltwiseOp::Mul, other, sig)});
    EXPECT_EQ(ops_of(run_one(gated, "fuse_swish").graph),
              (std::vector<std::string>{"conv2d:other", "conv2d:conv", "sigmoid:sig", "mul:gate"}));
}

// --- fuse_pointwise ----------------------------------------------------------------------

dsl::Layer build(const std::string &op, const std::string &name,
                 const std::vector<dsl::Layer> &inputs, const dsl::Attrs &attrs = {}) {
    return algorithms::layer_registry().build(op, name, inputs, attrs);
}

// --- fp16_activations ---------------------------------------------------------------------

std::string arithmetic_of(const dsl::Graph &g, const std::string &name) {
    const dsl::Attrs &a = g.find(name).attrs();
    return a.has("arithmetic") ? a.get_string("arithmetic") : "";
}

// Asked for, the pass gives every elu, selu, swish, mish and sigmoid of an fp16 tensor attribute
// arithmetic fp16, and leaves f32 tensors and ops without an fp16 form alone; not asked for, it
// changes nothing. The result stays within the stated bound of the float32 graph's.
TEST(GraphPasses, Fp16ActivationsOnlyWhenAskedAndOnlyOnFp16Tensors) {
    const dsl::Layer x = f16_input("x", kIn, 7, 5);
    dsl::TensorDesc t32 = x.output();
    t32.name = "x32";
    t32.type = dsl::ElemType::F32;
    const dsl::Layer x32 = dsl::Layer::input(t32);
    const dsl::Layer elu = build("elu", "elu", {x});
    const dsl::Layer mish = build("mish", "mish", {build("swish", "swish", {elu})});
    const dsl::Layer tanh = build("tanh", "tanh", {build("selu", "selu", {mish})});
    const dsl::Graph g("acts", {build("sigmoid", "sigmoid", {tanh}), build("elu", "elu32", {x32})});
    const frontend::GraphPassState off = run_one(g, "fp16_activations");
    for (const char *name : {"elu", "swish", "mish", "selu", "sigmoid", "elu32"})
        EXPECT_EQ(arithmetic_of(off.graph, name), "float32") << name;
    EXPECT_TRUE(off.notes.empty());

    frontend::GraphPassState on(g.clone());
    on.fp16_activations = true;
    frontend::run_graph_pass(on, "fp16_activations");
    for (const char *name : {"elu", "swish", "mish", "selu", "sigmoid"})
        EXPECT_EQ(arithmetic_of(on.graph, name), "fp16") << name;
    EXPECT_EQ(arithmetic_of(on.graph, "elu32"), "float32");
    EXPECT_EQ(arithmetic_of(on.graph, "tanh"), "");
    ASSERT_EQ(on.notes.size(), 1u);
    EXPECT_NE(on.notes[0].find("5 layer(s)"), std::string::npos) << on.notes[0];
    expect_close_results(g, on.graph);
}

dsl::Attrs quantized_to(double scale, int64_t zero_point) {
    return dsl::Attrs()
        .set("output_type", std::string("u8"))
        .set("output_scale", scale)
        .set("output_zero_point", zero_point);
}

// A quantized SiLU as a QDQ model has it: dequantize, sigmoid, quantize, dequantize, multiply,
// quantize, on an 8-bit tensor (u8, or i8) of odd extents.
dsl::Graph quantized_silu(dsl::ElemType type = dsl::ElemType::U8, int64_t c = kIn, int64_t h = 7,
                          int64_t w = 5) {
    const bool u8 = type == dsl::ElemType::U8;
    dsl::Layer input = u8_input("x", c, h, w, dsl::Quant::per_tensor(0.043f, u8 ? 117 : -11));
    if (!u8) {
        dsl::TensorDesc t = input.output();
        t.type = type;
        input = dsl::Layer::input(t);
    }
    auto to = [&](double scale, int64_t zero_point) {
        return quantized_to(scale, zero_point).set("output_type", std::string(u8 ? "u8" : "i8"));
    };
    const dsl::Layer x = build("dequantize", "x_dq", {input});
    const dsl::Layer sig = build("sigmoid", "sig", {x});
    const dsl::Layer sig_q = build("quantize", "sig_q", {sig}, to(1.0 / 255, u8 ? 0 : -128));
    const dsl::Layer sig_dq = build("dequantize", "sig_dq", {sig_q});
    const dsl::Layer mul = build("mul", "mul", {x, sig_dq});
    return dsl::Graph("silu", {build("quantize", "silu_q", {mul}, to(0.031, u8 ? 9 : -119))});
}

// An input of `t` holding each of its type's 256 values in turn, from the lowest.
Halide::Buffer<> every_8bit_value(const dsl::TensorDesc &t) {
    Halide::Buffer<> b = algorithms::make_buffer(t);
    const bool u8 = t.type == dsl::ElemType::U8;
    int next = 0;
    auto *bytes = static_cast<uint8_t *>(b.data());
    for (size_t i = 0; i < b.size_in_bytes(); ++i, ++next)
        bytes[i] = u8 ? uint8_t(next % 256) : uint8_t(int8_t(next % 256 - 128));
    return b;
}

// The six layers of a SiLU on one 8-bit tensor become one SHAVE layer named after the last,
// which looks its result up in a table of 256 entries, a constant input: the same bytes as
// the six, on random inputs and on every value of the input's type.
TEST(GraphPasses, AQuantizedSiluBecomesOneTableLookupWithTheSameBytes) {
    for (dsl::ElemType type : {dsl::ElemType::U8, dsl::ElemType::I8}) {
        SCOPED_TRACE(dsl::to_string(type));
        const dsl::Graph g = quantized_silu(type, 16, 4, 4);
        const frontend::GraphPassState passed = run_one(g, "fuse_pointwise");
        EXPECT_EQ(ops_of(passed.graph),
                  (std::vector<std::string>{"constant:silu_q_table", "lookup:silu_q"}));
        const dsl::Layer lookup = passed.graph.find("silu_q");
        ASSERT_EQ(lookup.inputs().size(), 2u);
        EXPECT_TRUE(lookup.inputs()[0].is_input());
        EXPECT_TRUE(dsl::is_constant(lookup.inputs()[1]));
        EXPECT_EQ(lookup.inputs()[1].output().shape, dsl::Shape{256});
        EXPECT_EQ(lookup.inputs()[1].output().type, type);
        for (const char *member : {"x_dq", "sig", "sig_q", "sig_dq", "mul"})
            EXPECT_EQ(passed.merged_into.at(member), "silu_q") << member;
        ASSERT_EQ(passed.notes.size(), 1u);
        EXPECT_NE(passed.notes[0].find("computes 6 layers as a lookup in a 256-entry table"),
                  std::string::npos);
        expect_same_results(g, passed.graph, 0);
        // 16 x 4 x 4: each value once.
        expect_same_results(g, passed.graph, 0, {every_8bit_value(g.inputs()[0].output())});
    }
}

// A table replaces what depends on the input's value alone: a group that quantizes per channel
// depends on the channel too, and stays composed, as does one that only converts its 8-bit
// input to floats; a lone int8 sigmoid and a requantization become tables.
TEST(GraphPasses, OnlyAnEightBitTensorsValueMakesATable) {
    const dsl::Layer sig =
        build("sigmoid", "sig", {u8_input("x", kIn, 7, 5, dsl::Quant::per_tensor(0.05f, 121))});
    const dsl::Graph lone("lone", {sig});
    const frontend::GraphPassState tabulated = run_one(lone, "fuse_pointwise");
    EXPECT_EQ(ops_of(tabulated.graph),
              (std::vector<std::string>{"constant:sig_table", "lookup:sig"}));
    expect_same_results(lone, tabulated.graph, 0);

    const dsl::Layer x = u8_input("x", kIn, 7, 5, dsl::Quant::per_tensor(0.05f, 121));
    const dsl::Layer rq =
        build("quantize", "rq", {build("dequantize", "dq", {x})}, quantized_to(0.031, 9));
    const dsl::Graph requantize("requantize", {rq});
    const frontend::GraphPassState requantized = run_one(requantize, "fuse_pointwise");
    EXPECT_EQ(ops_of(requantized.graph),
              (std::vector<std::string>{"constant:rq_table", "lookup:rq"}));
    expect_same_results(requantize, requantized.graph, 0);
    const dsl::Graph to_floats("to_floats", {build("dequantize", "rq_dq", {rq})});
    const frontend::GraphPassState converted = run_one(to_floats, "fuse_pointwise");
    EXPECT_EQ(ops_of(converted.graph), std::vector<std::string>{"pointwise:rq_dq"});
    expect_same_results(to_floats, converted.graph, 0);

    std::vector<float> scales;
    std::vector<int32_t> zero_points;
    for (int c = 0; c < kIn; ++c) {
        scales.push_back(0.01f * float(c + 1));
        zero_points.push_back(100 + c);
    }
    const dsl::Layer per_channel =
        u8_input("x", kIn, 7, 5, dsl::Quant::per_channel(scales, zero_points, dsl::dims::C));
    const dsl::Graph channels(
        "channels", {build("quantize", "sig_q",
                           {build("sigmoid", "sig", {build("dequantize", "dq", {per_channel})})},
                           quantized_to(1.0 / 255, 0))});
    const frontend::GraphPassState composed = run_one(channels, "fuse_pointwise");
    EXPECT_EQ(ops_of(composed.graph), std::vector<std::string>{"pointwise:sig_q"});
    expect_same_results(channels, composed.graph, 0);
}

// GELU as an exported transformer has it, x * 0.5 * (1 + erf(x / sqrt(2))) of a linear layer's
// biased result: the constant operands, the erf and the multiply become one SHAVE layer, the same
// bytes.
TEST(GraphPasses, AnErfGeluOfConstantOperandsBecomesOnePointwiseLayerWithTheSameBytes) {
    auto with_constant = [](const std::string &name, const dsl::Layer &in, const std::string &op,
                            double value) {
        const dsl::ConstValues c{dsl::ElemType::F32, {1}, {}, {value}};
        return build("constant_eltwise", name, {in},
                     dsl::Attrs()
                         .set("op", op)
                         .set("constant", dsl::const_buffer(c))
                         .set("constant_first", int64_t(0)));
    };
    const dsl::Layer x = f16_input("x", kIn, 7, 5);
    const dsl::Layer conv = algorithms::conv2d("conv", x, float_weights({kIn, 1, 1, kOut}, 93));
    const dsl::Layer biased = with_constant("bias", conv, "add", 0.25);
    const dsl::Layer erf =
        build("erf", "erf", {with_constant("div", biased, "div", std::sqrt(2.0))});
    const dsl::Layer gate = with_constant("plus_one", erf, "add", 1.0);
    const dsl::Layer product = build("mul", "mul", {biased, gate});
    const dsl::Graph g("gelu", {with_constant("half", product, "mul", 0.5)});
    const frontend::GraphPassState passed = run_one(g, "fuse_pointwise");
    EXPECT_EQ(ops_of(passed.graph), (std::vector<std::string>{"conv2d:conv", "pointwise:half"}));
    expect_same_results(g, passed.graph, 0);
}

// A DPU add of two convolutions stays on the DPU, as does a lone SHAVE layer; a graph output
// ends a group of its own, and a layer read by two groups stays a layer.
TEST(GraphPasses, PointwiseGroupsKeepTheDpuLayersAndTheResultsReadElsewhere) {
    const dsl::Layer x = f16_input("x", kIn, 5, 3);
    const dsl::Layer a = algorithms::conv2d("a", x, float_weights({kIn, 1, 1, kOut}, 91));
    const dsl::Layer b = algorithms::conv2d("b", x, float_weights({kIn, 1, 1, kOut}, 92));
    const dsl::Layer sum = build("add", "sum", {a, b});
    const dsl::Graph lone("lone", {build("sigmoid", "sig", {sum})});
    EXPECT_EQ(ops_of(run_one(lone, "fuse_pointwise").graph),
              (std::vector<std::string>{"conv2d:a", "conv2d:b", "add:sum", "sigmoid:sig"}));
    const dsl::Graph silu = quantized_silu();
    const dsl::Layer sig_q = silu.find("sig_q");
    const dsl::Graph shared("shared", {silu.outputs()[0], sig_q});
    const frontend::GraphPassState passed = run_one(shared, "fuse_pointwise");
    // The sigmoid and its quantize are one group (the output's); the dequantized input, read
    // by both chains, stays, and the multiply reading it stays on the DPU.
    EXPECT_EQ(ops_of(passed.graph),
              (std::vector<std::string>{"dequantize:x_dq", "pointwise:sig_q", "dequantize:sig_dq",
                                        "mul:mul", "quantize:silu_q"}));
    expect_same_results(shared, passed.graph, 0);
}

// --- fuse_activations --------------------------------------------------------------------

TEST(GraphPasses, ActivationsFuseIntoTheirProducersWithTheSameResults) {
    algorithms::Conv2dParams p;
    p.pad_top = p.pad_left = p.pad_bottom = p.pad_right = 1;
    const dsl::Layer x = f16_input("x", kIn, 7, 5);
    const dsl::Layer conv = algorithms::conv2d("conv", x, float_weights({kIn, 3, 3, kOut}, 51), p);
    const dsl::Layer relu = algorithms::relu("relu", conv);
    const dsl::Layer dw =
        algorithms::depthwise_conv2d("dw", relu, float_weights({1, 3, 3, kOut}, 52), p);
    const dsl::Layer relu6 = algorithms::clamp("relu6", dw, 0.0f, 6.0f);
    algorithms::PoolParams pool;
    pool.kernel_w = pool.kernel_h = 2;
    const dsl::Layer pooled = algorithms::max_pool("pool", relu6, pool);
    const dsl::Layer clipped = algorithms::clamp("clip", pooled, -0.5f, 0.75f);
    const dsl::Layer sum = algorithms::eltwise("sum", algorithms::EltwiseOp::Add, clipped, clipped);
    const dsl::Graph g("acts", {algorithms::relu("sum_relu", sum)});

    const frontend::GraphPassState passed = run_one(g, "fuse_activations");
    EXPECT_EQ(ops_of(passed.graph), (std::vector<std::string>{"conv2d:conv", "depthwise_conv2d:dw",
                                                              "max_pool:pool", "add:sum_relu"}));
    const dsl::Attrs &dw_attrs = passed.graph.find("dw").attrs();
    EXPECT_EQ(dw_attrs.get_string("activation"), "none");
    EXPECT_EQ(dw_attrs.get_float("clamp_low"), 0.0);
    EXPECT_EQ(dw_attrs.get_float("clamp_high"), 6.0);
    EXPECT_EQ(passed.graph.find("sum_relu").attrs().get_string("activation"), "relu");
    EXPECT_EQ(passed.merged_into.at("sum"), "sum_relu");
    EXPECT_EQ(passed.merged_into.at("relu6"), "dw");
    // ReLU and clamps commute with rounding to fp16: the same bits.
    expect_same_results(g, passed.graph, 0);
}

TEST(GraphPasses, ALeakyReluFusesWithinOneUlpAndAReluAfterItStays) {
    const dsl::Layer x = f16_input("x", kIn, 5, 3);
    const dsl::Layer conv = algorithms::conv2d("conv", x, float_weights({kIn, 1, 1, kOut}, 61));
    const dsl::Layer leaky = algorithms::leaky_relu("leaky", conv, 0.1f);
    const dsl::Graph g("leaky", {algorithms::relu("relu", leaky)});
    const frontend::GraphPassState passed = run_one(g, "fuse_activations");
    // The conv takes the leaky ReLU; the ReLU cannot follow it in the same PPE.
    EXPECT_EQ(ops_of(passed.graph), (std::vector<std::string>{"conv2d:conv", "relu:relu"}));
    EXPECT_EQ(passed.graph.find("conv").attrs().get_string("activation"), "leaky_relu");
    ASSERT_EQ(passed.notes.size(), 2u);
    EXPECT_NE(passed.notes[1].find("has an activation already"), std::string::npos);
    // The standalone leaky ReLU rounds to fp16 before and after the slope, the PPE once.
    expect_same_results(g, passed.graph, 1);
}

TEST(GraphPasses, AnActivationStaysWhenItsProducerHasOtherReaders) {
    const dsl::Layer x = f16_input("x", kIn, 5, 3);
    const dsl::Layer conv = algorithms::conv2d("conv", x, float_weights({kIn, 1, 1, kOut}, 71));
    const dsl::Graph g("shared", {algorithms::relu("relu", conv), conv});
    EXPECT_EQ(run_one(g, "fuse_activations").graph.layers().size(), 2u);
}

TEST(GraphPasses, Int8ReluFusesBitExactlyAndInt8LeakyReluStays) {
    algorithms::QuantWeights w;
    w.weights = Halide::Buffer<int8_t>(kIn, 1, 1, kOut);
    for (int i = 0; i < int(w.weights.number_of_elements()); ++i)
        w.weights.data()[i] = int8_t((i * 37) % 201 - 100);
    w.requant = {algorithms::fixed_point(0.002)};
    w.output_quant = dsl::Quant::per_tensor(0.05f, 100);
    const dsl::Layer conv =
        algorithms::conv2d("conv", u8_input("x", kIn, 5, 3, dsl::Quant::per_tensor(0.05f, 120)), w);
    const dsl::Graph relu_graph("int8_relu", {algorithms::relu("relu", conv)});
    const frontend::GraphPassState passed = run_one(relu_graph, "fuse_activations");
    EXPECT_EQ(ops_of(passed.graph), std::vector<std::string>{"conv2d:relu"});
    expect_same_results(relu_graph, passed.graph, 0);

    const dsl::Graph leaky_graph("int8_leaky", {algorithms::leaky_relu("leaky", conv, 0.1f)});
    EXPECT_EQ(run_one(leaky_graph, "fuse_activations").graph.layers().size(), 2u);
}

// --- propagate_dequantize ----------------------------------------------------------------

// x (u8) -> dequantize -> max_pool -> quantize, then -> dequantize -> flatten -> quantize, the
// quantizes giving `scale` and x's zero point 120.
dsl::Graph qdq_pool_flatten(float scale) {
    const dsl::Layer x = u8_input("x", kIn, kH, kW, dsl::Quant::per_tensor(0.0371f, 120));
    const dsl::LayerRegistry &registry = algorithms::layer_registry();
    const dsl::Attrs quantize = quantized_to(scale, 120);
    algorithms::PoolParams p;
    p.kernel_w = p.kernel_h = 3;
    p.stride_w = p.stride_h = 2;
    p.pad_left = p.pad_right = p.pad_top = p.pad_bottom = 1;
    const dsl::Layer pool =
        algorithms::max_pool("pool", registry.build("dequantize", "pool_dq", {x}, {}), p);
    const dsl::Layer pool_q = registry.build("quantize", "pool_q", {pool}, quantize);
    const dsl::Layer flat =
        registry.build("flatten", "flat", {registry.build("dequantize", "flat_dq", {pool_q}, {})},
                       dsl::Attrs().set("axis", int64_t(1)));
    return dsl::Graph("qdq", {registry.build("quantize", "out", {flat}, quantize)});
}

TEST(GraphPasses, AMaxPoolAndAFlattenBetweenQdqRunOnTheInt8TensorWithTheSameBytes) {
    const dsl::Graph before = qdq_pool_flatten(0.0371f);
    const frontend::GraphPassState passed = run_one(before, "propagate_dequantize");
    // The flatten is the graph output, so it takes the output's name.
    EXPECT_EQ(ops_of(passed.graph), (std::vector<std::string>{"max_pool:pool", "flatten:out"}));
    EXPECT_EQ(passed.graph.find("pool").output().type, dsl::ElemType::U8);
    EXPECT_EQ(passed.merged_into.at("pool_q"), "pool");
    EXPECT_EQ(passed.merged_into.at("pool_dq"), "pool");
    EXPECT_EQ(passed.merged_into.at("flat"), "out");
    ASSERT_EQ(passed.notes.size(), 2u);
    EXPECT_NE(passed.notes[0].find("'pool' (max_pool) runs on the int8 'x'"), std::string::npos)
        << passed.notes[0];
    expect_same_results(before, passed.graph, 0);
}

TEST(GraphPasses, AQuantizeToAnotherScaleKeepsTheOpInFloat) {
    const frontend::GraphPassState passed =
        run_one(qdq_pool_flatten(0.05f), "propagate_dequantize");
    // The pool stays in float; the flatten's quantize gives its source's quantization (0.05).
    EXPECT_EQ(ops_of(passed.graph), (std::vector<std::string>{"dequantize:pool_dq", "max_pool:pool",
                                                              "quantize:pool_q", "flatten:out"}));
    ASSERT_FALSE(passed.notes.empty());
    EXPECT_NE(passed.notes[0].find("'pool' (max_pool) stays in float: 'pool_q' quantizes to"),
              std::string::npos)
        << passed.notes[0];
}

// x (u8) -> dequantize -> average pool -> quantize to another scale and type, as a QDQ model
// ends a classifier: an int8 average pool of x requantized to the quantize's i8, within one
// step of the float graph's results. With count_include_pad 0 and padding the divisor varies
// across windows, which an int8 pool's per-tensor requantization cannot take: it stays in float.
TEST(GraphPasses, AnAveragePoolBetweenQdqRunsInInt8RequantizedToTheQuantize) {
    const dsl::LayerRegistry &registry = algorithms::layer_registry();
    const dsl::Layer x = u8_input("x", kIn, kH, kW, dsl::Quant::per_tensor(0.0371f, 120));
    const dsl::Attrs to_i8 = quantized_to(0.0123, 3).set("output_type", std::string("i8"));
    auto qdq_average = [&](const algorithms::PoolParams &p) {
        const dsl::Layer pool =
            algorithms::avg_pool("pool", registry.build("dequantize", "pool_dq", {x}, {}), p);
        return dsl::Graph("qdq_average", {registry.build("quantize", "pool_q", {pool}, to_i8)});
    };
    algorithms::PoolParams global, padded;
    global.kernel_h = kH;
    global.kernel_w = kW;
    padded.kernel_h = padded.kernel_w = 3;
    padded.stride_h = padded.stride_w = 2;
    padded.pad_left = padded.pad_right = padded.pad_top = padded.pad_bottom = 1;
    for (const algorithms::PoolParams &p : {global, padded}) {
        SCOPED_TRACE(p.kernel_w);
        const dsl::Graph before = qdq_average(p);
        const frontend::GraphPassState passed = run_one(before, "propagate_dequantize");
        // The pool is the graph output, so it takes the quantize's name.
        EXPECT_EQ(ops_of(passed.graph), std::vector<std::string>{"avg_pool:pool_q"});
        const dsl::Layer int8_pool = passed.graph.find("pool_q");
        EXPECT_EQ(int8_pool.output().type, dsl::ElemType::I8);
        EXPECT_TRUE(int8_pool.inputs().at(0).same_as(x));
        EXPECT_EQ(int8_pool.output().quant.zero_point_at(0), 3);
        EXPECT_EQ(passed.merged_into.at("pool_dq"), "pool_q");
        ASSERT_FALSE(passed.notes.empty());
        EXPECT_NE(passed.notes[0].find("'pool' (avg_pool) runs on the int8 'x'"), std::string::npos)
            << passed.notes[0];

        // The device's int8 results against the float graph's: one step apart at most, and
        // few of them.
        const std::vector<Halide::Buffer<>> inputs = random_inputs(before, 5);
        codegen::CheckOptions options;
        options.inputs = inputs;
        const codegen::CheckResult result =
            codegen::check_against_reference(passed.graph, vpu27(), options);
        ASSERT_TRUE(result.ok()) << result.report();
        const Halide::Buffer<int8_t> expected = algorithms::run_reference(before, inputs)[0];
        const Halide::Buffer<int8_t> got =
            algorithms::from_memory_order(int8_pool.output(), result.run.outputs[0]);
        ASSERT_EQ(got.number_of_elements(), expected.number_of_elements());
        int64_t off_by_one = 0;
        for (size_t i = 0; i < got.number_of_elements(); ++i) {
            EXPECT_LE(std::abs(int(got.data()[i]) - int(expected.data()[i])), 1) << i;
            off_by_one += got.data()[i] != expected.data()[i];
        }
        EXPECT_LT(off_by_one * 10, int64_t(got.number_of_elements())) << off_by_one;
    }

    padded.count_include_pad = false;
    const frontend::GraphPassState passed = run_one(qdq_average(padded), "propagate_dequantize");
    EXPECT_EQ(ops_of(passed.graph),
              (std::vector<std::string>{"dequantize:pool_dq", "avg_pool:pool", "quantize:pool_q"}));
    ASSERT_FALSE(passed.notes.empty());
    EXPECT_NE(passed.notes[0].find("'pool' (avg_pool) stays in float: "), std::string::npos)
        << passed.notes[0];
}

// x (u8) -> dequantize -> resize to 2x (`mode`) -> quantize back to x's quantization, as a QDQ
// model upsamples: nearest copies values, so it runs on the int8 tensor with the same bytes;
// linear blends them, and stays in float.
TEST(GraphPasses, ANearestResizeBetweenQdqRunsOnTheInt8Tensor) {
    for (const char *mode : {"nearest", "linear"}) {
        SCOPED_TRACE(mode);
        const dsl::Layer x = u8_input("x", kIn, kH, kW, dsl::Quant::per_tensor(0.0336f, 8));
        const dsl::LayerRegistry &registry = algorithms::layer_registry();
        const dsl::Layer up =
            registry.build("resize", "up", {registry.build("dequantize", "up_dq", {x}, {})},
                           dsl::Attrs()
                               .set("sizes", std::vector<int64_t>{2 * kH, 2 * kW})
                               .set("mode", std::string(mode))
                               .set("coordinate_transformation_mode", std::string("asymmetric")));
        const dsl::Layer up_q = registry.build("quantize", "up_q", {up}, quantized_to(0.0336, 8));
        const dsl::Graph before("upsample", {registry.build("dequantize", "out", {up_q}, {})});
        const frontend::GraphPassState passed = run_one(before, "propagate_dequantize");
        if (std::string(mode) == "nearest") {
            EXPECT_EQ(ops_of(passed.graph),
                      (std::vector<std::string>{"resize:up", "dequantize:out"}));
            EXPECT_EQ(passed.graph.find("up").output().type, dsl::ElemType::U8);
            expect_same_results(before, passed.graph, 0);
        } else {
            EXPECT_EQ(ops_of(passed.graph),
                      (std::vector<std::string>{"dequantize:up_dq", "resize:up", "quantize:up_q",
                                                "dequantize:out"}));
            ASSERT_FALSE(passed.notes.empty());
            EXPECT_NE(passed.notes[0].find("'up' (resize) stays in float: it blends values"),
                      std::string::npos)
                << passed.notes[0];
        }
    }
}

// quantize(concat(dequantize(a), dequantize(b))), b of the quantize's own quantization and a
// of another, as a QDQ model joins two branches: a concat of a requantized and b itself, on
// int8 tensors, with the same bytes.
TEST(GraphPasses, AConcatQuantizedAsAWholeCopiesInt8Parts) {
    const dsl::LayerRegistry &registry = algorithms::layer_registry();
    const dsl::Layer a = u8_input("a", kIn, kH, kW, dsl::Quant::per_tensor(0.0211f, 13));
    const dsl::Layer b = u8_input("b", 5, kH, kW, dsl::Quant::per_tensor(0.0377f, 15));
    const dsl::Layer cat = registry.build("concat", "cat",
                                          {registry.build("dequantize", "a_dq", {a}, {}),
                                           registry.build("dequantize", "b_dq", {b}, {})},
                                          dsl::Attrs().set("axis", int64_t(1)));
    const dsl::Graph before("join",
                            {registry.build("quantize", "q", {cat}, quantized_to(0.0377, 15))});
    const frontend::GraphPassState passed = run_one(before, "propagate_dequantize");
    EXPECT_EQ(ops_of(passed.graph),
              (std::vector<std::string>{"dequantize:a_dq", "quantize:q.part0", "concat:q"}));
    const dsl::Layer joined = passed.graph.find("q");
    EXPECT_EQ(joined.output().type, dsl::ElemType::U8);
    EXPECT_TRUE(joined.inputs().at(1).same_as(b));
    EXPECT_EQ(passed.merged_into.at("cat"), "q");
    ASSERT_FALSE(passed.notes.empty());
    EXPECT_NE(passed.notes[0].find("'cat' (concat) copies int8 parts"), std::string::npos)
        << passed.notes[0];
    expect_same_results(before, passed.graph, 0);
}

// --- sink_views --------------------------------------------------------------------------

// x (rows [1, M, K], f16) as the importer gives a product by weights to the DPU: the rows
// relabelled as the matmul's NHWC input, its output relabelled as rows (linear_on_dpu).
dsl::Layer rows_times(const std::string &name, const dsl::Layer &rows, int64_t n, uint32_t seed) {
    const std::vector<int64_t> shape = rows.output().shape.raw();
    const int64_t m = shape[1], k = shape[2];
    auto swapped = [&](const std::string &suffix, const dsl::Layer &in, const char *order) {
        return build("transpose", name + suffix, {in},
                     dsl::Attrs()
                         .set("perm", std::vector<int64_t>{0, 3, 2, 1})
                         .set("order", std::string(order)));
    };
    const dsl::Layer as_rows = build("reshape", name + ".rows", {rows},
                                     dsl::Attrs().set("shape", std::vector<int64_t>{1, m, 1, k}));
    Halide::Buffer<Halide::float16_t> weights{int(k), int(n)};
    const std::vector<float> values = uniform(size_t(k * n), -0.5f, 0.5f, seed);
    for (size_t i = 0; i < values.size(); ++i) weights.data()[i] = Halide::float16_t(values[i]);
    const dsl::Layer product =
        build("matmul", name + ".matmul", {swapped(".features", as_rows, "NHWC")},
              dsl::Attrs().set("weights", Halide::Buffer<>(weights)));
    return build("reshape", name, {swapped(".out_rows", product, "NCHW")},
                 dsl::Attrs().set("shape", std::vector<int64_t>{1, m, n}));
}

// x op c, c a float32 constant of `shape` (outermost first) of random real values.
dsl::Layer with_constant(const std::string &name, const dsl::Layer &in, const std::string &op,
                         std::vector<int64_t> shape, uint32_t seed) {
    int64_t count = 1;
    for (int64_t e : shape) count *= e;
    const std::vector<float> values = uniform(size_t(count), 0.5f, 1.5f, seed);
    const dsl::ConstValues c{dsl::ElemType::F32,
                             std::move(shape),
                             {},
                             std::vector<double>(values.begin(), values.end())};
    return build("constant_eltwise", name, {in},
                 dsl::Attrs().set("op", op).set("constant", dsl::const_buffer(c)));
}

// A transformer's MLP on 13 rows of 24 features: a bias per feature, a scale per row and one per
// element, an erf GELU, a second product and a bias as the graph's output. Each element-wise
// layer but the output computes on the matmul's NHWC result, its constant moved with it (the
// bias per channel, the row scale per pixel), with the views after it; the output keeps its
// shape. The same bytes as before the pass.
TEST(GraphPasses, ElementWiseLayersComputeOnTheMatmulsOutputBeforeItsViews) {
    dsl::TensorDesc t;
    t.name = "x";
    t.shape = dsl::Shape{1, 13, 24};
    t.type = dsl::ElemType::F16;
    t.order = dsl::DimsOrder::identity(3);
    const dsl::Layer x = dsl::Layer::input(t);
    const dsl::Layer biased = with_constant("bias", rows_times("fc1", x, 40, 5), "add", {40}, 6);
    const dsl::Layer row_scaled = with_constant("row_scale", biased, "mul", {13, 1}, 7);
    const dsl::Layer scaled = with_constant("scale", row_scaled, "div", {1, 13, 40}, 8);
    const dsl::Layer erf = build("erf", "erf", {with_constant("div", scaled, "div", {1}, 9)});
    const dsl::Layer gate = with_constant("plus_one", erf, "add", {1}, 10);
    const dsl::Layer gelu = build("mul", "gelu", {scaled, gate});
    const dsl::Layer out = with_constant("out", rows_times("fc2", gelu, 16, 11), "sub", {16}, 12);
    const dsl::Graph before("mlp", {out});
    const frontend::GraphPassState passed = run_one(before, "sink_views");
    for (const char *name : {"bias", "row_scale", "scale", "div", "erf", "plus_one", "gelu"}) {
        SCOPED_TRACE(name);
        const dsl::Layer layer = passed.graph.find(name);
        EXPECT_EQ(layer.output().shape, (dsl::Shape{1, 40, 1, 13}));
        EXPECT_EQ(layer.output().order, dsl::DimsOrder::NHWC());
        for (const dsl::Layer &in : layer.inputs())
            EXPECT_EQ(in.output().order, dsl::DimsOrder::NHWC()) << in.name();
    }
    // The views of the layers before the last have no reader left; the last's lead to fc2.
    const std::vector<dsl::Layer> readers = passed.graph.consumers(passed.graph.find("gelu"));
    ASSERT_EQ(readers.size(), 1u);
    EXPECT_EQ(readers[0].name(), "gelu.view");
    EXPECT_THROW(passed.graph.find("bias.view"), dsl::GraphError);
    EXPECT_EQ(passed.graph.find("bias").inputs().at(0).name(), "fc1.matmul");
    // Constants shrink to the axes they vary along: channels, pixels, both.
    auto constant_shape = [&](const char *name) {
        const Halide::Buffer<> &c = passed.graph.find(name).attrs().get_tensor("constant");
        std::vector<int> extents;
        for (int d = c.dimensions(); d-- > 0;) extents.push_back(c.dim(d).extent());
        return extents;
    };
    EXPECT_EQ(constant_shape("bias"), (std::vector<int>{1, 40, 1, 1}));
    EXPECT_EQ(constant_shape("row_scale"), (std::vector<int>{1, 1, 1, 13}));
    EXPECT_EQ(constant_shape("scale"), (std::vector<int>{1, 40, 1, 13}));
    EXPECT_EQ(passed.graph.find("out").output().shape, (dsl::Shape{1, 13, 16}));
    ASSERT_FALSE(passed.notes.empty());
    EXPECT_NE(passed.notes[0].find("sink_views: 7 element-wise layer(s)"), std::string::npos)
        << passed.notes[0];
    expect_same_results(before, passed.graph, 0);
}

// A layer reading an NHWC tensor, or a view whose bytes NHWC would hold in the same order (one
// channel per pixel), has nothing to gain, and stays.
TEST(GraphPasses, AViewThatKeepsTheNhwcBytesStaysBeforeItsReader) {
    const dsl::Layer x = f16_input("x", kIn, 1, 1);
    const dsl::Layer flat = build(
        "flatten", "flat", {algorithms::conv2d("conv", x, float_weights({kIn, 1, 1, kOut}, 3))});
    const dsl::Layer direct = build(
        "tanh", "direct", {algorithms::conv2d("conv2", x, float_weights({kIn, 1, 1, kOut}, 4))});
    const dsl::Graph g("flat", {build("tanh", "flat_tanh", {build("exp", "exp", {flat})}), direct});
    const frontend::GraphPassState passed = run_one(g, "sink_views");
    EXPECT_EQ(ops_of(passed.graph), ops_of(g));
    EXPECT_TRUE(passed.notes.empty());
}

// --- remove_identity_layers --------------------------------------------------------------

TEST(GraphPasses, AReshapeToTheSameShapeIsRemovedAndNoLongerBlocksFusion) {
    const dsl::Layer x = f16_input("x", kIn, 5, 3);
    const dsl::Layer conv = algorithms::conv2d("conv", x, float_weights({kIn, 1, 1, kOut}, 81));
    dsl::Attrs same;
    same.set("shape", std::vector<int64_t>{1, kOut, 5, 3});
    const dsl::Layer reshape =
        algorithms::layer_registry().build("reshape", "reshape", {conv}, same);
    dsl::Attrs other;
    other.set("shape", std::vector<int64_t>{1, kOut, 3, 5});
    const dsl::Layer moved = algorithms::layer_registry().build("reshape", "moved", {conv}, other);
    const dsl::Graph g("identity", {algorithms::relu("relu", reshape)});

    const frontend::GraphPassState removed = run_one(g, "remove_identity_layers");
    EXPECT_EQ(ops_of(removed.graph), (std::vector<std::string>{"conv2d:conv", "relu:relu"}));
    EXPECT_EQ(removed.merged_into.at("reshape"), "conv");
    // A reshape that changes the shape, and an identity that is a graph output, stay.
    const dsl::Graph kept("kept", {algorithms::relu("relu", moved), reshape});
    EXPECT_EQ(run_one(kept, "remove_identity_layers").graph.layers().size(), 4u);

    const frontend::GraphPassState all = frontend::run_graph_passes(g);
    EXPECT_EQ(ops_of(all.graph), std::vector<std::string>{"conv2d:relu"});
    expect_same_results(g, all.graph, 0);
}

// --- fold_constants ----------------------------------------------------------------------

TEST(GraphPasses, LayersOfConstantsFoldToConstantsOfTheirValues) {
    Halide::Buffer<Halide::float16_t> value(3, 5, kIn, 1); // W, H, C, N: row-major 1xCx5x3
    const std::vector<float> v = uniform(size_t(value.number_of_elements()), -3, 3, 91);
    for (size_t i = 0; i < v.size(); ++i) value.data()[i] = Halide::float16_t(v[i]);
    const dsl::Layer c = dsl::LayerRegistry::constant("c", value);
    const dsl::Layer sig = algorithms::sigmoid("sig", c);
    const dsl::Layer relu = algorithms::relu("relu", sig);
    const dsl::Layer x = f16_input("x", kIn, 5, 3, dsl::DimsOrder::NCHW());
    const dsl::Layer sum = algorithms::eltwise("sum", algorithms::EltwiseOp::Add, x, relu);
    const dsl::Graph g("consts", {sum});

    const frontend::GraphPassState passed = run_one(g, "fold_constants");
    EXPECT_EQ(ops_of(passed.graph), (std::vector<std::string>{"constant:relu", "add:sum"}));
    const Halide::Buffer<Halide::float16_t> folded(dsl::constant_value(passed.graph.find("relu")));
    ASSERT_EQ(folded.number_of_elements(), value.number_of_elements());
    for (size_t i = 0; i < v.size(); ++i) {
        const float want = 1.0f / (1.0f + std::exp(-float(value.data()[i])));
        EXPECT_NEAR(float(folded.data()[i]), want, 1e-3f) << i; // fp16 rounding of (0, 1)
    }
    // The graph output stays a layer.
    EXPECT_TRUE(passed.graph.outputs()[0].same_as(passed.graph.find("sum")));
}

// --- the driver --------------------------------------------------------------------------

TEST(GraphPasses, TheListRunsInOrderAndAnUnknownPassIsAnError) {
    EXPECT_EQ(frontend::graph_pass_names(),
              (std::vector<std::string>{"fold_constants", "remove_identity_layers",
                                        "propagate_dequantize", "fold_batch_norm", "fuse_swish",
                                        "fuse_activations", "fp16_activations", "sink_views",
                                        "fuse_pointwise"}));
    const dsl::Layer x = f16_input("x", kIn, 5, 3);
    const dsl::Graph g("g", {algorithms::relu("relu", x)});
    frontend::GraphPassState state(g.clone());
    try {
        frontend::run_graph_pass(state, "fuse_everything");
        FAIL() << "no error";
    } catch (const dsl::GraphError &e) {
        EXPECT_NE(std::string(e.what()).find("passes: fold_constants, "), std::string::npos)
            << e.what();
    }
    std::ostringstream log;
    frontend::GraphPassOptions options;
    options.log = &log;
    options.dump_after = "fuse_activations";
    frontend::run_graph_passes(g, options);
    EXPECT_NE(log.str().find("graph pass fold_batch_norm done"), std::string::npos) << log.str();
    EXPECT_NE(log.str().find("graph after fuse_activations:"), std::string::npos) << log.str();
}

} // namespace
