// ONNX's BatchNormalization in training mode (training_mode 1): Y normalized by the batch's own
// mean and population variance over every axis but the channel, and the running mean and
// variance (input * momentum + batch * (1 - momentum)), from registry layers in float32
// (frontend/src/onnx_ops_norm.cpp). Against loops in double precision on random data of odd
// shapes of ranks 2 to 5, and ONNX's backend tests.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include <onnx/onnx_pb.h>

#include "codegen/check.h"
#include "codegen/lower.h"
#include "dsl/constant_values.h"
#include "frontend/blob_io.h"
#include "frontend/onnx_import.h"
#include "onnx_node_test.h"
#include "vpu_target/simulator.h"
#include "vpu_target/target.h"

using namespace vpuc;

namespace {

void declare(onnx::ValueInfoProto &v, const std::string &name, const std::vector<int64_t> &shape) {
    v.set_name(name);
    v.mutable_type()->mutable_tensor_type()->set_elem_type(onnx::TensorProto::FLOAT);
    for (int64_t d : shape)
        v.mutable_type()->mutable_tensor_type()->mutable_shape()->add_dim()->set_dim_value(d);
}

void set_attr(onnx::NodeProto &node, const std::string &name, float value) {
    onnx::AttributeProto &a = *node.add_attribute();
    a.set_name(name);
    a.set_type(onnx::AttributeProto::FLOAT);
    a.set_f(value);
}

// x, scale, B, input_mean, input_var -> BatchNormalization (training_mode 1) -> y, and
// running_mean and running_var when `statistics` (else those outputs are left unnamed).
onnx::ModelProto training_model(const std::vector<int64_t> &shape, float epsilon, float momentum,
                                bool statistics) {
    onnx::ModelProto m;
    m.set_ir_version(8);
    m.add_opset_import()->set_version(15);
    onnx::GraphProto &g = *m.mutable_graph();
    g.set_name("batch_norm");
    onnx::NodeProto &node = *g.add_node();
    node.set_name("bn");
    node.set_op_type("BatchNormalization");
    declare(*g.add_input(), "x", shape);
    node.add_input("x");
    for (const char *name : {"scale", "B", "input_mean", "input_var"}) {
        declare(*g.add_input(), name, {shape[1]});
        node.add_input(name);
    }
    node.add_output("y");
    declare(*g.add_output(), "y", shape);
    for (const char *name : {"running_mean", "running_var"}) {
        node.add_output(statistics ? name : "");
        if (statistics) declare(*g.add_output(), name, {shape[1]});
    }
    onnx::AttributeProto &mode = *node.add_attribute();
    mode.set_name("training_mode");
    mode.set_type(onnx::AttributeProto::INT);
    mode.set_i(1);
    set_attr(node, "epsilon", epsilon);
    set_attr(node, "momentum", momentum);
    return m;
}

std::vector<uint8_t> bytes_of(const onnx::ModelProto &m) {
    const std::string s = m.SerializeAsString();
    return {s.begin(), s.end()};
}

std::vector<double> random_reals(size_t count, double low, double high, uint32_t seed) {
    std::mt19937 random(seed);
    std::uniform_real_distribution<double> uniform(low, high);
    std::vector<double> v;
    for (size_t i = 0; i < count; ++i) v.push_back(uniform(random));
    return v;
}

Halide::Buffer<> buffer(const std::vector<int64_t> &shape, const std::vector<double> &values) {
    return dsl::const_buffer({dsl::ElemType::F32, shape, {}, values});
}

struct Case {
    std::vector<int64_t> shape;
    float epsilon, momentum;
};

// The layers compute what the loops do: per channel c, over n and the rest,
// mean = sum(x) / count, var = sum((x - mean)^2) / count,
// y = (x - mean) / sqrt(var + epsilon) * scale + B, running = input * momentum + batch * (1 -
// momentum).
TEST(BatchNormTraining, NormalizesByTheBatchStatisticsAndUpdatesTheRunningOnes) {
    uint32_t seed = 1;
    for (const Case &c : {Case{{2, 3, 4, 5}, 1e-5f, 0.9f}, Case{{3, 5, 7}, 1e-2f, 0.7f},
                          Case{{5, 6}, 1e-5f, 0.9f}, Case{{2, 3, 2, 3, 5}, 1e-3f, 0.5f},
                          Case{{1, 7, 3, 5}, 1e-5f, 0.9f}, Case{{3, 17, 5, 9}, 1e-5f, 0.99f}}) {
        SCOPED_TRACE(dsl::to_string(dsl::Shape(c.shape)));
        const int64_t n = c.shape[0], channels = c.shape[1];
        int64_t rest = 1;
        for (size_t d = 2; d < c.shape.size(); ++d) rest *= c.shape[d];
        const std::vector<double> scale = random_reals(size_t(channels), 0.5, 1.5, seed++);
        const std::vector<double> bias = random_reals(size_t(channels), -1, 1, seed++);
        const std::vector<double> input_mean = random_reals(size_t(channels), -1, 1, seed++);
        const std::vector<double> input_var = random_reals(size_t(channels), 0.1, 2, seed++);
        // Per channel its own offset and spread; x as fp16 holds it.
        std::vector<double> x = random_reals(size_t(n * channels * rest), -2, 2, seed++);
        for (size_t i = 0; i < x.size(); ++i) {
            const int64_t ch = int64_t(i) / rest % channels;
            x[i] = double(Halide::float16_t(x[i] * double(1 + ch % 3) + double(ch % 5) - 2));
        }

        frontend::ImportOptions options;
        options.known_inputs["scale"] = buffer({channels}, scale);
        options.known_inputs["B"] = buffer({channels}, bias);
        options.known_inputs["input_mean"] = buffer({channels}, input_mean);
        options.known_inputs["input_var"] = buffer({channels}, input_var);
        const frontend::ImportedModel model = frontend::import_onnx_bytes(
            bytes_of(training_model(c.shape, c.epsilon, c.momentum, true)), "bn.onnx", options);
        ASSERT_EQ(model.graph.outputs().size(), 3u);
        EXPECT_EQ(model.graph.outputs()[0].output().shape, dsl::Shape(c.shape));
        for (size_t i = 1; i < 3; ++i)
            EXPECT_EQ(model.graph.outputs()[i].output().shape, dsl::Shape({channels}));

        const target::Target target = target::load_target("vpu27");
        sim::Simulator simulator(target, codegen::lower(model.graph, target));
        const sim::RunResult run =
            simulator.run(frontend::blob_inputs(simulator.blob(), {{"x", buffer(c.shape, x)}}));
        const std::vector<frontend::NamedTensor> outputs =
            frontend::blob_outputs(simulator.blob(), run.outputs);
        ASSERT_EQ(outputs.size(), 3u);

        std::vector<double> mean(size_t(channels), 0), var(size_t(channels), 0);
        for (size_t i = 0; i < x.size(); ++i) mean[size_t(int64_t(i) / rest % channels)] += x[i];
        for (double &m : mean) m /= double(n * rest);
        for (size_t i = 0; i < x.size(); ++i) {
            const size_t ch = size_t(int64_t(i) / rest % channels);
            var[ch] += (x[i] - mean[ch]) * (x[i] - mean[ch]);
        }
        for (double &v : var) v /= double(n * rest);
        // fp16 results: within a few of its steps.
        const auto close = [](double got, double want) {
            return std::abs(got - want) <= 2e-3 + 2e-3 * std::abs(want);
        };
        const std::vector<double> y = dsl::const_values(outputs[0].value, "y").reals;
        ASSERT_EQ(y.size(), x.size());
        for (size_t i = 0; i < x.size(); ++i) {
            const size_t ch = size_t(int64_t(i) / rest % channels);
            const double want =
                (x[i] - mean[ch]) / std::sqrt(var[ch] + double(c.epsilon)) * scale[ch] + bias[ch];
            EXPECT_PRED2(close, y[i], want) << "y " << i;
        }
        const std::vector<double> running_mean =
            dsl::const_values(outputs[1].value, "running_mean").reals;
        const std::vector<double> running_var =
            dsl::const_values(outputs[2].value, "running_var").reals;
        ASSERT_EQ(running_mean.size(), size_t(channels));
        ASSERT_EQ(running_var.size(), size_t(channels));
        const double m = c.momentum;
        for (size_t ch = 0; ch < size_t(channels); ++ch) {
            EXPECT_PRED2(close, running_mean[ch], input_mean[ch] * m + mean[ch] * (1 - m)) << ch;
            EXPECT_PRED2(close, running_var[ch], input_var[ch] * m + var[ch] * (1 - m)) << ch;
        }
    }
}

// Y alone (the statistics' outputs unnamed), and the simulator's results are the CPU
// reference's.
TEST(BatchNormTraining, YAloneMatchesTheReference) {
    const std::vector<int64_t> shape = {3, 5, 7, 9};
    frontend::ImportOptions options;
    for (const char *name : {"scale", "B", "input_mean", "input_var"})
        options.known_inputs[name] = buffer({5}, random_reals(5, 0.5, 1.5, 7));
    const frontend::ImportedModel model = frontend::import_onnx_bytes(
        bytes_of(training_model(shape, 1e-5f, 0.9f, false)), "bn.onnx", options);
    ASSERT_EQ(model.graph.outputs().size(), 1u);
    EXPECT_EQ(model.graph.outputs()[0].op(), "batch_norm");
    // The batch as one image: each image's channels as rows, then all images as one.
    EXPECT_EQ(model.graph.find("bn.images").output().shape, dsl::Shape({3, 5, 63}));
    EXPECT_EQ(model.graph.find("bn.rows").output().shape, dsl::Shape({1, 3, 5, 63}));
    EXPECT_EQ(model.graph.find("bn.f32").output().type, dsl::ElemType::F32);
    EXPECT_EQ(model.graph.outputs()[0].output().type, dsl::ElemType::F16);
    const codegen::CheckResult r =
        codegen::check_against_reference(model.graph, target::load_target("vpu27"));
    EXPECT_TRUE(r.ok()) << r.report();
}

// The statistics' inputs are constants: a computed one is an error naming the node.
TEST(BatchNormTraining, AComputedInputMeanIsAnErrorNamingTheNode) {
    frontend::ImportOptions options;
    for (const char *name : {"scale", "B", "input_var"})
        options.known_inputs[name] = buffer({3}, {1, 2, 3});
    try {
        frontend::import_onnx_bytes(bytes_of(training_model({2, 3, 5}, 1e-5f, 0.9f, true)),
                                    "bn.onnx", options);
        FAIL() << "imported";
    } catch (const frontend::ModelError &e) {
        EXPECT_NE(std::string(e.what()).find("bn.onnx: node 'bn' (BatchNormalization): input 3 "
                                             "(input_mean, 'input_mean') must be a constant"),
                  std::string::npos)
            << e.what();
    }
}

class BatchNormNodeTest : public ::testing::TestWithParam<std::string> {};

TEST_P(BatchNormNodeTest, MatchesTheExpectedOutputs) {
    vpuc::testing::expect_node_test_passes(GetParam());
}

INSTANTIATE_TEST_SUITE_P(Onnx, BatchNormNodeTest,
                         ::testing::Values("test_batchnorm_example", "test_batchnorm_epsilon",
                                           "test_batchnorm_example_training_mode",
                                           "test_batchnorm_epsilon_training_mode"),
                         [](const ::testing::TestParamInfo<std::string> &info) {
                             return info.param.substr(5);
                         });

} // namespace
