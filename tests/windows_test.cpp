// Windows over rank-3 inputs (1-D convs and pools) and the pool attributes ceil_mode,
// count_include_pad and max_pool's dilations: the ONNX backend test data (Debian's
// libonnx-testdata) match their expected outputs; the device computes what the CPU reference
// does on odd shapes, with random real values and exact small fractions; what the DPU cannot
// pool runs on the SHAVEs; bad attributes are errors naming the layer.
#include <gtest/gtest.h>
#include <onnx/onnx_pb.h>

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
    ::testing::Values(node("test_averagepool_1d_default"), node("test_maxpool_1d_default"),
                      node("test_averagepool_2d_ceil"), node("test_maxpool_2d_ceil"),
                      node("test_averagepool_2d_pads"), node("test_averagepool_2d_same_lower"),
                      node("test_averagepool_2d_precomputed_same_upper"),
                      node("test_maxpool_2d_dilations"), pytorch("test_Conv1d"),
                      pytorch("test_Conv1d_dilated"), pytorch("test_Conv1d_groups"),
                      pytorch("test_Conv1d_pad2size1"), pytorch("test_Conv1d_stride"),
                      pytorch("test_AvgPool1d_stride"), pytorch("test_MaxPool1d_stride"),
                      pytorch("test_MaxPool1d_stride_padding_dilation"),
                      pytorch("test_MaxPool2d_stride_padding_dilation")),
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

// A 3-D window has no device form: the error says so.
TEST(Windows, ThreeDimensionalWindowsAreRefusedWithTheReason) {
    for (const char *op : {"Conv", "MaxPool"}) {
        SCOPED_TRACE(op);
        const bool conv = std::string(op) == "Conv";
        try {
            import_model(
                window_model(op, {1, 3, 4, 5, 6},
                             conv ? std::vector<int64_t>{2, 3, 1, 1, 1} : std::vector<int64_t>{},
                             {1, conv ? 2 : 3, 4, 5, 6}, {{"kernel_shape", {1, 1, 1}}}));
            ADD_FAILURE() << "imported";
        } catch (const frontend::ModelError &e) {
            EXPECT_NE(std::string(e.what()).find("(" + std::string(op) +
                                                 "): a 3-D window (an input of rank 5) has no "
                                                 "device form, whose H holds D and H together"),
                      std::string::npos)
                << e.what();
        }
    }
}

} // namespace
