// The SHAVE layers resize, layer_norm, layer_norm_stats, gelu, erf, batch_matmul and
// global_pool: each against its CPU reference on both bundled targets, with random real data and
// odd shapes, and the reference against values worked out by hand; bad attributes are errors
// naming the layer and the attribute; and the ONNX backend test data of the ops they import
// (Debian's libonnx-testdata) match their expected outputs. Also the ONNX ops the importer builds
// from other ops: InstanceNormalization, Einsum, and those ONNX defines by a function.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>

#include "../frontend/src/onnx_internal.h"
#include "algorithms/reference.h"
#include "algorithms/registry.h"
#include "codegen/check.h"
#include "codegen/lower.h"
#include "dsl/constant_values.h"
#include "frontend/onnx_import.h"
#include "onnx_node_test.h"
#include "vpu_target/simulator.h"

using namespace vpuc;
namespace fs = std::filesystem;

namespace {

const dsl::LayerRegistry &registry() {
    return algorithms::layer_registry();
}

// A graph input of `shape` (NCHW for rank 4, row-major otherwise), fp16 or u8 (0.05, 120).
dsl::Layer input(const std::string &name, const std::vector<int64_t> &shape,
                 dsl::ElemType type = dsl::ElemType::F16) {
    dsl::TensorDesc t;
    t.name = name;
    t.shape = dsl::Shape(shape);
    t.type = type;
    if (dsl::is_quantized_int(type)) t.quant = dsl::Quant::per_tensor(0.05f, 120);
    t.order =
        shape.size() == 4 ? dsl::DimsOrder::NCHW() : dsl::DimsOrder::identity(int(shape.size()));
    return dsl::Layer::input(t);
}

// Compiles `output` for vpu27 and vpu20, runs it on the simulator with random inputs and
// expects the CPU reference's results (fp16 within the SHAVEs' 1 ulp, int8 bit for bit).
void expect_matches_reference(const std::vector<dsl::Layer> &outputs) {
    for (const char *name : {"vpu27", "vpu20"}) {
        const codegen::CheckResult r = codegen::check_against_reference(
            dsl::Graph(outputs.at(0).name(), outputs), target::load_target(name));
        EXPECT_TRUE(r.ok()) << name << ": " << r.report();
    }
}

void expect_matches_reference(const dsl::Layer &output) {
    expect_matches_reference(std::vector<dsl::Layer>{output});
}

// The CPU reference's output `index` of `outputs` for one f32 input whose elements, in its
// buffer's order (c innermost, then x, then y), are `values`.
std::vector<float> reference_values(const dsl::Layer &in, const std::vector<float> &values,
                                    const std::vector<dsl::Layer> &outputs, size_t index) {
    Halide::Buffer<> buffer = algorithms::make_buffer(in.output());
    EXPECT_EQ(buffer.number_of_elements(), values.size());
    std::copy(values.begin(), values.end(), static_cast<float *>(buffer.data()));
    const Halide::Buffer<float> out(
        algorithms::run_reference(dsl::Graph("g", outputs), {buffer}).at(index));
    return std::vector<float>(out.data(), out.data() + out.number_of_elements());
}

std::string build_error(const std::string &op, const std::vector<dsl::Layer> &inputs,
                        const dsl::Attrs &attrs) {
    try {
        registry().build(op, op + "_bad", inputs, attrs);
    } catch (const Error &e) {
        return e.what();
    }
    return "";
}

TEST(GlobalPool, AverageAndMaxBeyondTheDpuWindow) {
    for (const char *mode : {"average", "max"}) {
        dsl::Attrs a;
        a.set("mode", std::string(mode));
        expect_matches_reference(
            registry().build("global_pool", "gp", {input("in", {1, 21, 14, 13})}, a));
        expect_matches_reference(registry().build(
            "global_pool", "gp_int8", {input("in", {2, 19, 17, 23}, dsl::ElemType::U8)}, a));
    }
}

TEST(Resize, NearestInEveryCoordinateAndRoundingMode) {
    const dsl::Layer in = input("in", {1, 19, 5, 7});
    for (const char *coordinates :
         {"half_pixel", "asymmetric", "align_corners", "pytorch_half_pixel"})
        for (const char *rounding : {"round_prefer_floor", "round_prefer_ceil", "floor", "ceil"}) {
            dsl::Attrs a;
            a.set("sizes", std::vector<int64_t>{11, 3});
            a.set("coordinate_transformation_mode", std::string(coordinates));
            a.set("nearest_mode", std::string(rounding));
            SCOPED_TRACE(std::string(coordinates) + ", " + rounding);
            expect_matches_reference(registry().build("resize", "nearest", {in}, a));
        }
}

TEST(Resize, BilinearUpAndDownByScalesOrSizes) {
    for (const char *coordinates :
         {"half_pixel", "asymmetric", "align_corners", "pytorch_half_pixel"}) {
        SCOPED_TRACE(coordinates);
        dsl::Attrs up;
        up.set("sizes", std::vector<int64_t>{13, 17});
        up.set("mode", std::string("linear"));
        up.set("coordinate_transformation_mode", std::string(coordinates));
        expect_matches_reference(
            registry().build("resize", "up", {input("in", {1, 21, 5, 7})}, up));
        dsl::Attrs down = up;
        down.set("sizes", std::vector<int64_t>{4, 1});
        down.set("scales", std::vector<double>{0.6, 0.3});
        expect_matches_reference(registry().build(
            "resize", "down", {input("in", {2, 3, 7, 5}, dsl::ElemType::U8)}, down));
    }
}

// Each coordinate mode, exclude_outside alternating between them (a = -0.5 with it).
TEST(Resize, CubicInEveryCoordinateModeWithAndWithoutTheOutside) {
    int64_t exclude = 0;
    for (const char *coordinates : {"half_pixel", "asymmetric", "align_corners",
                                    "pytorch_half_pixel", "tf_half_pixel_for_nn"}) {
        exclude = 1 - exclude;
        SCOPED_TRACE(std::string(coordinates) + ", exclude_outside " + std::to_string(exclude));
        dsl::Attrs a;
        a.set("sizes", std::vector<int64_t>{13, 4});
        a.set("mode", std::string("cubic"));
        a.set("coordinate_transformation_mode", std::string(coordinates));
        a.set("exclude_outside", exclude);
        if (exclude) a.set("cubic_coeff_a", -0.5);
        const dsl::Layer in = input("in", {1, 21, 5, 7});
        expect_matches_reference(registry().build("resize", "cubic", {in}, a));
        // Down by scales, int8: cubic overshoots the input's range and saturates.
        a.set("sizes", std::vector<int64_t>{4, 1});
        a.set("scales", std::vector<double>{0.6, 0.3});
        expect_matches_reference(registry().build(
            "resize", "cubic_int8", {input("in", {2, 3, 7, 5}, dsl::ElemType::U8)}, a));
    }
}

// On a ramp along W, cubic reproduces the ramp inside the input (Keys' kernel keeps linear
// functions); at the border, edge padding and exclude_outside differ as the reference has it:
// at 0.5, taps -1 (the edge, 0), 0, 1, 2 weigh -3/32, 19/32, 19/32, -3/32; without tap -1 the
// others are divided by 35/32. Linear's blends are the edge's either way.
TEST(Resize, CubicValuesOfARamp) {
    const dsl::Layer in = input("ramp", {1, 1, 1, 8}, dsl::ElemType::F32);
    const std::vector<float> ramp = {0, 1, 2, 3, 4, 5, 6, 7};
    for (int64_t exclude : {0, 1}) {
        dsl::Attrs a;
        a.set("sizes", std::vector<int64_t>{1, 16});
        a.set("mode", std::string("cubic"));
        a.set("coordinate_transformation_mode", std::string("asymmetric"));
        a.set("exclude_outside", exclude);
        const std::vector<float> out =
            reference_values(in, ramp, {registry().build("resize", "cubic", {in}, a)}, 0);
        ASSERT_EQ(out.size(), 16u);
        for (int x = 2; x <= 10; ++x) EXPECT_FLOAT_EQ(out[size_t(x)], 0.5f * float(x)) << x;
        EXPECT_FLOAT_EQ(out[0], 0.0f);
        EXPECT_FLOAT_EQ(out[1], exclude ? 13.0f / 35.0f : 13.0f / 32.0f);
        // Linear: the tap outside left out is the edge's weight moved onto the edge.
        a.set("mode", std::string("linear"));
        a.set("coordinate_transformation_mode", std::string("half_pixel"));
        const std::vector<float> linear =
            reference_values(in, ramp, {registry().build("resize", "linear", {in}, a)}, 0);
        ASSERT_EQ(linear.size(), 16u);
        EXPECT_FLOAT_EQ(linear[0], 0.0f);  // at -0.25
        EXPECT_FLOAT_EQ(linear[1], 0.25f); // at 0.25
        EXPECT_FLOAT_EQ(linear[15], 7.0f); // at 7.25
    }
}

// tf_crop_and_resize maps the output onto a crop of the input; coordinates outside the input
// take extrapolation_value. Linear on a plane v = 3y + x: H over [-0.5, 1] of the last index
// (coordinates -1, 0.5, 2: the first row outside), W over [0.25, 0.75] (0.5, 1.5).
TEST(Resize, TfCropAndResizeExtrapolatesOutsideTheInput) {
    const dsl::Layer plane = input("plane", {1, 1, 3, 3}, dsl::ElemType::F32);
    dsl::Attrs a;
    a.set("sizes", std::vector<int64_t>{3, 2});
    a.set("mode", std::string("linear"));
    a.set("coordinate_transformation_mode", std::string("tf_crop_and_resize"));
    a.set("roi", std::vector<double>{-0.5, 0.25, 1.0, 0.75});
    a.set("extrapolation_value", -2.5);
    EXPECT_EQ(reference_values(plane, {0, 1, 2, 3, 4, 5, 6, 7, 8},
                               {registry().build("resize", "crop", {plane}, a)}, 0),
              (std::vector<float>{-2.5f, -2.5f, 2, 3, 6.5f, 7.5f}));
    // Every mode on the device, crops reaching past either side, fp16 and int8.
    a.set("sizes", std::vector<int64_t>{9, 6});
    a.set("roi", std::vector<double>{-0.3, 0.15, 1.2, 0.8});
    for (const char *mode : {"nearest", "linear", "cubic"}) {
        SCOPED_TRACE(mode);
        a.set("mode", std::string(mode));
        expect_matches_reference(
            registry().build("resize", "crop", {input("in", {1, 19, 5, 7})}, a));
        expect_matches_reference(registry().build(
            "resize", "crop_int8", {input("in", {1, 3, 5, 7}, dsl::ElemType::U8)}, a));
    }
}

TEST(Resize, BadAttributesAreNamed) {
    const dsl::Layer in = input("in", {1, 3, 4, 4});
    dsl::Attrs lanczos;
    lanczos.set("sizes", std::vector<int64_t>{8, 8});
    lanczos.set("mode", std::string("lanczos"));
    EXPECT_NE(build_error("resize", {in}, lanczos).find("mode"), std::string::npos)
        << build_error("resize", {in}, lanczos);
    dsl::Attrs no_roi;
    no_roi.set("sizes", std::vector<int64_t>{8, 8});
    no_roi.set("coordinate_transformation_mode", std::string("tf_crop_and_resize"));
    EXPECT_NE(build_error("resize", {in}, no_roi).find("needs attribute 'roi'"), std::string::npos);
    dsl::Attrs stray_roi;
    stray_roi.set("sizes", std::vector<int64_t>{8, 8});
    stray_roi.set("roi", std::vector<double>{0, 0, 1, 1});
    EXPECT_NE(build_error("resize", {in}, stray_roi).find("for tf_crop_and_resize only"),
              std::string::npos);
    dsl::Attrs by_scales = no_roi;
    by_scales.set("roi", std::vector<double>{0, 0, 1, 1});
    by_scales.set("scales", std::vector<double>{2.0, 2.0});
    EXPECT_NE(build_error("resize", {in}, by_scales).find("by scales is not supported"),
              std::string::npos)
        << build_error("resize", {in}, by_scales);
    dsl::Attrs exclude;
    exclude.set("sizes", std::vector<int64_t>{8, 8});
    exclude.set("exclude_outside", int64_t(1));
    EXPECT_NE(build_error("resize", {in}, exclude)
                  .find("exclude_outside = 1 is not supported with mode nearest"),
              std::string::npos);
    dsl::Attrs mismatch;
    mismatch.set("sizes", std::vector<int64_t>{8, 8});
    mismatch.set("scales", std::vector<double>{2.0, 3.0});
    EXPECT_NE(build_error("resize", {in}, mismatch).find("resize 'resize_bad'"), std::string::npos)
        << build_error("resize", {in}, mismatch);
    dsl::Attrs one;
    one.set("sizes", std::vector<int64_t>{8});
    EXPECT_NE(build_error("resize", {in}, one).find("sizes"), std::string::npos);
    dsl::Attrs sizes;
    sizes.set("sizes", std::vector<int64_t>{8, 8});
    EXPECT_NE(build_error("resize", {input("in3", {1, 3, 4})}, sizes).find("4-D"),
              std::string::npos);
}

Halide::Buffer<> floats(const std::vector<float> &values) {
    Halide::Buffer<float> b(int(values.size()));
    std::copy(values.begin(), values.end(), b.data());
    return b;
}

TEST(LayerNorm, OverTheLastAxisOfRanks2To4) {
    for (const std::vector<int64_t> &shape :
         std::vector<std::vector<int64_t>>{{5, 37}, {2, 7, 29}, {1, 3, 5, 19}}) {
        const int64_t last = shape.back();
        std::vector<float> scale, bias;
        for (int64_t i = 0; i < last; ++i) {
            scale.push_back(0.5f + 0.03f * float(i));
            bias.push_back(0.1f * float(i % 7) - 0.3f);
        }
        dsl::Attrs a;
        a.set("epsilon", 1e-3);
        a.set("scale", floats(scale));
        a.set("bias", floats(bias));
        SCOPED_TRACE(dsl::to_string(dsl::Shape(shape)));
        expect_matches_reference(registry().build("layer_norm", "ln", {input("in", shape)}, a));
    }
}

TEST(LayerNorm, StatisticsOverTheLastAxisOfRanks2To4) {
    for (const std::vector<int64_t> &shape :
         std::vector<std::vector<int64_t>>{{5, 37}, {2, 7, 29}, {1, 3, 5, 19}}) {
        SCOPED_TRACE(dsl::to_string(dsl::Shape(shape)));
        const dsl::Layer stats = registry().build("layer_norm_stats", "stats", {input("in", shape)},
                                                  dsl::Attrs().set("epsilon", 1e-3));
        std::vector<int64_t> kept = shape;
        kept.back() = 1;
        EXPECT_EQ(stats.outputs().at(0).shape, dsl::Shape(kept));
        EXPECT_EQ(stats.outputs().at(1).shape, dsl::Shape(kept));
        expect_matches_reference({dsl::LayerRegistry::output_of("mean", stats, 0),
                                  dsl::LayerRegistry::output_of("inv_std_dev", stats, 1)});
    }
}

// Rows 1, 2, 3, 4 (mean 2.5, variance 1.25) and four 0.5 (variance 0), epsilon 0.25.
TEST(LayerNorm, StatisticsAsOnnxDefinesThem) {
    const dsl::Layer in = input("in", {2, 4}, dsl::ElemType::F32);
    const dsl::Layer stats =
        registry().build("layer_norm_stats", "stats", {in}, dsl::Attrs().set("epsilon", 0.25));
    const std::vector<dsl::Layer> outputs = {dsl::LayerRegistry::output_of("mean", stats, 0),
                                             dsl::LayerRegistry::output_of("inv", stats, 1)};
    const std::vector<float> rows = {1, 2, 3, 4, 0.5f, 0.5f, 0.5f, 0.5f};
    EXPECT_EQ(reference_values(in, rows, outputs, 0), (std::vector<float>{2.5f, 0.5f}));
    const std::vector<float> inv = reference_values(in, rows, outputs, 1);
    ASSERT_EQ(inv.size(), 2u);
    EXPECT_FLOAT_EQ(inv[0], 1.0f / std::sqrt(1.5f));
    EXPECT_FLOAT_EQ(inv[1], 2.0f);
    // Y of the same rows: (x - mean) * inv.
    const std::vector<float> y = reference_values(
        in, rows, {registry().build("layer_norm", "ln", {in}, dsl::Attrs().set("epsilon", 0.25))},
        0);
    ASSERT_EQ(y.size(), 8u);
    for (size_t i = 0; i < 4; ++i) {
        EXPECT_FLOAT_EQ(y[i], (rows[i] - 2.5f) / std::sqrt(1.5f));
        EXPECT_FLOAT_EQ(y[4 + i], 0.0f);
    }
}

TEST(LayerNorm, BadAttributesAreNamed) {
    const dsl::Layer in = input("in", {2, 7, 29});
    dsl::Attrs axis;
    axis.set("axis", int64_t(1));
    EXPECT_NE(build_error("layer_norm", {in}, axis).find("axis 1 is not the last axis"),
              std::string::npos);
    dsl::Attrs scale;
    scale.set("scale", floats({1, 2, 3}));
    EXPECT_NE(build_error("layer_norm", {in}, scale).find("'scale' holds 3 values"),
              std::string::npos)
        << build_error("layer_norm", {in}, scale);
    dsl::Attrs epsilon;
    epsilon.set("epsilon", -1.0);
    EXPECT_NE(build_error("layer_norm", {in}, epsilon).find("epsilon"), std::string::npos);
    EXPECT_NE(build_error("layer_norm_stats", {in}, axis).find("axis 1 is not the last axis"),
              std::string::npos);
    EXPECT_NE(build_error("layer_norm_stats", {input("q", {2, 7, 29}, dsl::ElemType::U8)}, {})
                  .find("is u8; layer_norm_stats takes f16 or f32"),
              std::string::npos);
}

TEST(Gelu, ErfAndTanhForms) {
    for (const char *form : {"none", "tanh"}) {
        dsl::Attrs a;
        a.set("approximate", std::string(form));
        expect_matches_reference(registry().build("gelu", "gelu", {input("in", {1, 19, 5, 7})}, a));
        expect_matches_reference(registry().build(
            "gelu", "gelu_int8", {input("in", {1, 19, 5, 7}, dsl::ElemType::U8)}, a));
    }
    dsl::Attrs bad;
    bad.set("approximate", std::string("sigmoid"));
    EXPECT_NE(build_error("gelu", {input("in", {1, 3, 2, 2})}, bad).find("approximate"),
              std::string::npos);
}

TEST(Erf, Fp16) {
    expect_matches_reference(registry().build("erf", "erf", {input("in", {3, 19, 11})}, {}));
}

TEST(BatchMatmul, Rank3AndRank4WithBroadcast) {
    expect_matches_reference(registry().build(
        "batch_matmul", "bmm3", {input("a", {3, 7, 19}), input("b", {3, 19, 5})}, {}));
    expect_matches_reference(registry().build(
        "batch_matmul", "bmm4", {input("a", {2, 3, 7, 9}), input("b", {2, 3, 9, 11})}, {}));
    // The second batch dimension of one side, and the first, broadcast.
    expect_matches_reference(registry().build(
        "batch_matmul", "bmm4_bc", {input("a", {2, 3, 7, 9}), input("b", {1, 1, 9, 11})}, {}));
}

TEST(BatchMatmul, MismatchesAreNamed) {
    EXPECT_NE(build_error("batch_matmul", {input("a", {3, 7, 19}), input("b", {3, 18, 5})}, {})
                  .find("19 columns times 18 rows"),
              std::string::npos);
    EXPECT_NE(
        build_error("batch_matmul", {input("a", {7, 19}), input("b", {19, 5})}, {}).find("rank 3"),
        std::string::npos);
    EXPECT_NE(build_error("batch_matmul", {input("a", {2, 7, 9}), input("b", {3, 9, 5})}, {})
                  .find("do not broadcast"),
              std::string::npos);
}

// A model of one node `op` of float inputs and float outputs of the given shapes: y, then
// y1, y2, ... of `more_outputs`.
onnx::ModelProto one_node_model(const std::string &op,
                                const std::vector<std::vector<int64_t>> &input_shapes,
                                const std::vector<int64_t> &output_shape,
                                const std::vector<std::vector<int64_t>> &more_outputs = {}) {
    onnx::ModelProto m;
    m.set_ir_version(8);
    m.add_opset_import()->set_version(17);
    onnx::GraphProto &g = *m.mutable_graph();
    g.set_name(op);
    onnx::NodeProto &node = *g.add_node();
    node.set_name("node");
    node.set_op_type(op);
    auto declare = [](onnx::ValueInfoProto &v, const std::string &name,
                      const std::vector<int64_t> &shape) {
        v.set_name(name);
        v.mutable_type()->mutable_tensor_type()->set_elem_type(onnx::TensorProto::FLOAT);
        v.mutable_type()->mutable_tensor_type()->mutable_shape(); // a scalar's is empty
        for (int64_t d : shape)
            v.mutable_type()->mutable_tensor_type()->mutable_shape()->add_dim()->set_dim_value(d);
    };
    for (size_t i = 0; i < input_shapes.size(); ++i) {
        declare(*g.add_input(), "x" + std::to_string(i), input_shapes[i]);
        node.add_input("x" + std::to_string(i));
    }
    node.add_output("y");
    declare(*g.add_output(), "y", output_shape);
    for (size_t i = 0; i < more_outputs.size(); ++i) {
        node.add_output("y" + std::to_string(i + 1));
        declare(*g.add_output(), "y" + std::to_string(i + 1), more_outputs[i]);
    }
    return m;
}

frontend::ImportedModel import_model(const onnx::ModelProto &m,
                                     const frontend::ImportOptions &options = {}) {
    const std::string s = m.SerializeAsString();
    return frontend::import_onnx_bytes({s.begin(), s.end()}, "model.onnx", options);
}

// LayerNormalization with Y alone, scale and bias known: layer_norm, as the reference computes
// it.
TEST(OnnxNn, LayerNormalizationOverTheLastAxis) {
    onnx::ModelProto m = one_node_model("LayerNormalization", {{2, 5, 23}, {23}, {23}}, {2, 5, 23});
    frontend::ImportOptions options;
    // Scale (x1) and bias (x2) values, known at compile time.
    for (int input = 1; input <= 2; ++input) {
        Halide::Buffer<float> values(23);
        for (int i = 0; i < 23; ++i) values(i) = 0.25f * float(i % 9) - 0.5f * float(input);
        options.known_inputs["x" + std::to_string(input)] = values;
    }
    const frontend::ImportedModel model = import_model(m, options);
    EXPECT_EQ(model.graph.outputs()[0].op(), "layer_norm");
    const codegen::CheckResult r =
        codegen::check_against_reference(model.graph, target::load_target("vpu27"));
    EXPECT_TRUE(r.ok()) << r.report();
}

// LayerNormalization over several axes, with Mean and InvStdDev: the input reshaped to rows of
// the normalized axes, layer_norm and layer_norm_stats, and the results back in ONNX's shapes.
TEST(OnnxNn, LayerNormalizationOverSeveralAxesWithMeanAndInvStdDev) {
    struct Case {
        std::vector<int64_t> shape;
        int64_t axis;
        std::vector<int64_t> stats;
    };
    for (const Case &c : {Case{{2, 5, 3, 7}, 1, {2, 1, 1, 1}}, Case{{3, 4, 9}, -2, {3, 1, 1}},
                          Case{{1, 6, 5}, 0, {1, 1, 1}}, Case{{2, 3, 11}, 2, {2, 3, 1}},
                          Case{{3, 5, 7}, 0, {1, 1, 1}}, Case{{2, 3, 4, 5}, -4, {1, 1, 1, 1}},
                          Case{{2, 3, 2, 3, 5}, 0, {1, 1, 1, 1, 1}}}) {
        SCOPED_TRACE(dsl::to_string(dsl::Shape(c.shape)) + ", axis " + std::to_string(c.axis));
        const int64_t first = c.axis < 0 ? c.axis + int64_t(c.shape.size()) : c.axis;
        const std::vector<int64_t> normalized(c.shape.begin() + first, c.shape.end());
        onnx::ModelProto m = one_node_model("LayerNormalization", {c.shape, normalized}, c.shape,
                                            {c.stats, c.stats});
        onnx::AttributeProto &axis = *m.mutable_graph()->mutable_node(0)->add_attribute();
        axis.set_name("axis");
        axis.set_type(onnx::AttributeProto::INT);
        axis.set_i(c.axis);
        frontend::ImportOptions options;
        Halide::Buffer<float> scale(std::vector<int>(normalized.rbegin(), normalized.rend()));
        float value = 0.5f;
        scale.for_each_value([&](float &s) { s = value += 0.125f; });
        options.known_inputs["x1"] = scale;
        const frontend::ImportedModel model = import_model(m, options);
        ASSERT_EQ(model.graph.outputs().size(), 3u);
        for (size_t i = 1; i < 3; ++i)
            EXPECT_EQ(model.graph.outputs()[i].output().shape, dsl::Shape(c.stats));
        const codegen::CheckResult r =
            codegen::check_against_reference(model.graph, target::load_target("vpu27"));
        EXPECT_TRUE(r.ok()) << r.report();
    }
}

// LayerNormalization over axis 0 normalizes the whole batch as one row: each image as a row
// [N, 1, rest] (a SHAVE kernel for a 4-D input held NHWC), the images as one [1, 1, all], and
// the results back in ONNX's shapes.
TEST(OnnxNn, LayerNormalizationOverAxis0NormalizesTheBatchAsOneRow) {
    onnx::ModelProto m =
        one_node_model("LayerNormalization", {{2, 3, 4, 5}, {2, 3, 4, 5}, {2, 3, 4, 5}},
                       {2, 3, 4, 5}, {{1, 1, 1, 1}, {1, 1, 1, 1}});
    onnx::AttributeProto &axis = *m.mutable_graph()->mutable_node(0)->add_attribute();
    axis.set_name("axis");
    axis.set_type(onnx::AttributeProto::INT);
    axis.set_i(0);
    frontend::ImportOptions options;
    for (int input = 1; input <= 2; ++input) {
        Halide::Buffer<float> values(5, 4, 3, 2);
        int i = 0;
        values.for_each_value([&](float &v) { v = 0.375f * float(i++ % 7) - 0.5f * float(input); });
        options.known_inputs["x" + std::to_string(input)] = values;
    }
    const frontend::ImportedModel model = import_model(m, options);
    std::vector<std::string> layers;
    for (const dsl::Layer &layer : model.graph.layers())
        layers.push_back(layer.op() + " " + layer.name() + " " +
                         dsl::to_string(layer.output().shape));
    EXPECT_EQ(layers,
              (std::vector<std::string>{"reshape node.images 2x1x60", "reshape node.rows 1x1x120",
                                        "layer_norm node.normalized 1x1x120", "reshape y 2x3x4x5",
                                        "layer_norm_stats node.statistics 1x1x1",
                                        "tuple_element y1.rows 1x1x1", "reshape y1 1x1x1x1",
                                        "tuple_element y2.rows 1x1x1", "reshape y2 1x1x1x1"}));
    const codegen::CheckResult r =
        codegen::check_against_reference(model.graph, target::load_target("vpu27"));
    EXPECT_TRUE(r.ok()) << r.report();
}

// tf_crop_and_resize crops H and W only: a roi cutting C is refused, naming it.
TEST(OnnxNn, ResizeCropsOnlyHAndW) {
    onnx::ModelProto m = one_node_model("Resize", {{1, 2, 4, 4}, {8}}, {1, 2, 3, 3});
    onnx::NodeProto &node = *m.mutable_graph()->mutable_node(0);
    node.add_input(""); // no scales
    node.add_input("sizes");
    onnx::ValueInfoProto &sizes = *m.mutable_graph()->add_input();
    sizes.set_name("sizes");
    sizes.mutable_type()->mutable_tensor_type()->set_elem_type(onnx::TensorProto::INT64);
    sizes.mutable_type()->mutable_tensor_type()->mutable_shape()->add_dim()->set_dim_value(4);
    onnx::AttributeProto &mode = *node.add_attribute();
    mode.set_name("coordinate_transformation_mode");
    mode.set_type(onnx::AttributeProto::STRING);
    mode.set_s("tf_crop_and_resize");
    frontend::ImportOptions options;
    Halide::Buffer<int64_t> extents(4);
    for (int i = 0; i < 4; ++i) extents(i) = std::vector<int64_t>{1, 2, 3, 3}[size_t(i)];
    options.known_inputs["sizes"] = extents;
    Halide::Buffer<float> roi(8);
    const std::vector<float> crop = {0, 0, 0.25f, 0.25f, 1, 1, 0.75f, 0.75f};
    std::copy(crop.begin(), crop.end(), roi.data());
    options.known_inputs["x1"] = roi;
    EXPECT_EQ(import_model(m, options).graph.outputs()[0].op(), "resize");
    roi(5) = 0.5f; // C cut in half
    options.known_inputs["x1"] = roi;
    try {
        import_model(m, options);
        ADD_FAILURE() << "a roi cutting C imported";
    } catch (const frontend::ModelError &e) {
        EXPECT_NE(std::string(e.what()).find("keep N and C whole"), std::string::npos) << e.what();
    }
}

// Global pools of images the DPU's window takes stay on the DPU; larger ones fall back to
// global_pool on the SHAVEs, and compute what the reference does.
TEST(OnnxNn, GlobalPoolsBeyondTheDpuWindowFallBackToTheShaves) {
    struct Case {
        const char *op;
        std::vector<int64_t> shape;
        const char *layer;
    };
    for (const Case &c : {Case{"GlobalAveragePool", {1, 64, 14, 14}, "global_pool"},
                          Case{"GlobalAveragePool", {1, 16, 32, 32}, "global_pool"},
                          Case{"GlobalMaxPool", {1, 16, 9, 32}, "global_pool"},
                          Case{"GlobalAveragePool", {1, 16, 11, 11}, "avg_pool"}}) {
        SCOPED_TRACE(std::string(c.op) + " " + dsl::to_string(dsl::Shape(c.shape)));
        const frontend::ImportedModel model =
            import_model(one_node_model(c.op, {c.shape}, {c.shape[0], c.shape[1], 1, 1}));
        ASSERT_EQ(model.graph.outputs().size(), 1u);
        EXPECT_EQ(model.graph.outputs()[0].op(), c.layer);
        const codegen::CheckResult r =
            codegen::check_against_reference(model.graph, target::load_target("vpu27"));
        EXPECT_TRUE(r.ok()) << r.report();
    }
}

// Attention's product of two computed tensors imports as batch_matmul.
TEST(OnnxNn, MatMulOfTwoActivationsIsABatchMatmul) {
    const frontend::ImportedModel model =
        import_model(one_node_model("MatMul", {{2, 3, 7, 9}, {2, 3, 9, 5}}, {2, 3, 7, 5}));
    EXPECT_EQ(model.graph.outputs()[0].op(), "batch_matmul");
    const codegen::CheckResult r =
        codegen::check_against_reference(model.graph, target::load_target("vpu20"));
    EXPECT_TRUE(r.ok()) << r.report();
}

// MeanVarianceNormalization, an op ONNX defines by a function, imports as its body (ReduceMean,
// Pow, Sub, Sqrt, Div...), the axes its node leaves out taken from the schema's default
// [0, 2, 3]: each channel of random reals normalized over H and W, as worked out here in double.
TEST(OnnxFunctions, MeanVarianceNormalizationIsItsFunctionBodyWithTheDefaultAxes) {
    const frontend::ImportedModel model =
        import_model(one_node_model("MeanVarianceNormalization", {{1, 3, 5, 7}}, {1, 3, 5, 7}));
    EXPECT_NE(std::find(model.notes.begin(), model.notes.end(),
                        "MeanVarianceNormalization imported as the function body ONNX's schema "
                        "defines it by"),
              model.notes.end());
    const dsl::Layer &x = model.graph.inputs().at(0);
    const Halide::Buffer<> in = codegen::random_buffer(x.output(), 7);
    const Halide::Buffer<Halide::float16_t> got(algorithms::run_reference(model.graph, {in}).at(0));
    const Halide::Buffer<Halide::float16_t> halves(in);
    for (int c = 0; c < 3; ++c) {
        double sum = 0, squares = 0;
        for (int y = 0; y < 5; ++y)
            for (int w = 0; w < 7; ++w) {
                sum += double(halves(c, w, y));
                squares += double(halves(c, w, y)) * double(halves(c, w, y));
            }
        const double mean = sum / 35, deviation = std::sqrt(squares / 35 - mean * mean + 1e-9);
        for (int y = 0; y < 5; ++y)
            for (int w = 0; w < 7; ++w) {
                const double want = (double(halves(c, w, y)) - mean) / deviation;
                EXPECT_NEAR(double(got(c, w, y)), want, 1e-2 + 1e-2 * std::abs(want))
                    << "c " << c << ", x " << w << ", y " << y;
            }
    }
    const codegen::CheckResult r =
        codegen::check_against_reference(model.graph, target::load_target("vpu27"));
    EXPECT_TRUE(r.ok()) << r.report();
}

// InstanceNormalization: each channel of each image of random reals (a batch of 2, odd extents)
// normalized over its pixels, scaled and shifted per channel, as worked out here in double.
TEST(OnnxNn, InstanceNormalizationNormalizesEachChannelOfEachImage) {
    onnx::ModelProto m =
        one_node_model("InstanceNormalization", {{2, 3, 5, 7}, {3}, {3}}, {2, 3, 5, 7});
    const std::vector<float> scale = {0.5f, -1.25f, 2.0f}, bias = {0.125f, 1.0f, -0.75f};
    frontend::ImportOptions options;
    for (int input = 1; input <= 2; ++input) {
        Halide::Buffer<float> values(3);
        for (int c = 0; c < 3; ++c) values(c) = (input == 1 ? scale : bias)[size_t(c)];
        options.known_inputs["x" + std::to_string(input)] = values;
    }
    const frontend::ImportedModel model = import_model(m, options);
    const Halide::Buffer<> in = codegen::random_buffer(model.graph.inputs().at(0).output(), 5);
    const Halide::Buffer<Halide::float16_t> halves(in);
    const Halide::Buffer<Halide::float16_t> got(algorithms::run_reference(model.graph, {in}).at(0));
    for (int n = 0; n < 2; ++n)
        for (int c = 0; c < 3; ++c) {
            double sum = 0, squares = 0;
            for (int y = 0; y < 5; ++y)
                for (int w = 0; w < 7; ++w) sum += double(halves(c, w, y, n));
            const double mean = sum / 35;
            for (int y = 0; y < 5; ++y)
                for (int w = 0; w < 7; ++w)
                    squares +=
                        (double(halves(c, w, y, n)) - mean) * (double(halves(c, w, y, n)) - mean);
            const double deviation = std::sqrt(squares / 35 + 1e-5);
            for (int y = 0; y < 5; ++y)
                for (int w = 0; w < 7; ++w) {
                    const double want =
                        (double(halves(c, w, y, n)) - mean) / deviation * double(scale[size_t(c)]) +
                        double(bias[size_t(c)]);
                    EXPECT_NEAR(double(got(c, w, y, n)), want, 1e-2 + 1e-2 * std::abs(want))
                        << "n " << n << ", c " << c << ", x " << w << ", y " << y;
                }
        }
    for (const char *target : {"vpu27", "vpu20"}) {
        const codegen::CheckResult r =
            codegen::check_against_reference(model.graph, target::load_target(target));
        EXPECT_TRUE(r.ok()) << target << ": " << r.report();
    }
}

// A reduction over every axis of a rank-5 tensor, whose middle axes share the device's H: the
// tensor flattened and reduced as one axis, kept with extent 1 in each or squeezed to a scalar.
TEST(OnnxFunctions, ReduceSumOverEveryAxisOfRank5ReducesTheFlattenedTensor) {
    for (const int64_t keepdims : {1, 0}) {
        SCOPED_TRACE("keepdims " + std::to_string(keepdims));
        const std::vector<int64_t> kept(5, 1);
        onnx::ModelProto m = one_node_model("ReduceSum", {{2, 3, 4, 3, 5}},
                                            keepdims ? kept : std::vector<int64_t>{});
        onnx::AttributeProto &keep = *m.mutable_graph()->mutable_node(0)->add_attribute();
        keep.set_name("keepdims");
        keep.set_type(onnx::AttributeProto::INT);
        keep.set_i(keepdims);
        const frontend::ImportedModel model = import_model(m);
        EXPECT_EQ(model.graph.outputs()[0].output().shape,
                  dsl::Shape(keepdims ? kept : std::vector<int64_t>{}));
        const Halide::Buffer<> in = codegen::random_buffer(model.graph.inputs().at(0).output(), 11);
        const Halide::Buffer<Halide::float16_t> halves(in);
        double want = 0;
        halves.for_each_value([&](Halide::float16_t v) { want += double(v); });
        const Halide::Buffer<Halide::float16_t> got(
            algorithms::run_reference(model.graph, {in}).at(0));
        EXPECT_NEAR(double(got.data()[0]), want, 1e-2 + 1e-2 * std::abs(want));
        const codegen::CheckResult r =
            codegen::check_against_reference(model.graph, target::load_target("vpu27"));
        EXPECT_TRUE(r.ok()) << r.report();
    }
}

// The reference's values `got` within 1e-2 + 1e-2 * |want| of `want`, worked out in double,
// and vpu27 giving the reference's bytes for `graph`.
void expect_values_and_device(const dsl::Graph &graph, const std::vector<double> &got,
                              const std::vector<double> &want) {
    ASSERT_EQ(got.size(), want.size());
    for (size_t i = 0; i < want.size(); ++i)
        EXPECT_NEAR(got[i], want[i], 1e-2 + 1e-2 * std::abs(want[i])) << "element " << i;
    const codegen::CheckResult r =
        codegen::check_against_reference(graph, target::load_target("vpu27"));
    EXPECT_TRUE(r.ok()) << r.report();
}

// The fp16 values of a tensor laid out as make_buffer does, in logical row-major order (a rank-4
// tensor held NHWC reordered).
std::vector<double> row_major_values(const dsl::TensorDesc &t, const Halide::Buffer<> &b) {
    const std::vector<uint8_t> bytes = algorithms::to_memory_order(t, b);
    const std::vector<int64_t> strides = t.order.logical_strides(t.shape);
    const std::vector<int64_t> &extents = t.shape.raw();
    std::vector<double> values(bytes.size() / 2);
    std::vector<int64_t> at(extents.size(), 0);
    for (size_t i = 0; i < values.size(); ++i) {
        int64_t element = 0;
        for (size_t d = 0; d < at.size(); ++d) element += at[d] * strides[d];
        uint16_t bits;
        std::memcpy(&bits, &bytes[2 * size_t(element)], 2);
        values[i] = double(Halide::float16_t::make_from_bits(bits));
        for (size_t d = at.size(); d > 0 && ++at[d - 1] == extents[d - 1];) at[--d] = 0;
    }
    return values;
}

// Einsum of row-major `operands` of index strings `terms` into `result`'s indices, in double:
// every assignment of the indices visited, the operands' product added to the result's element.
std::vector<double> einsum_in_double(const std::vector<std::string> &terms,
                                     const std::vector<std::vector<double>> &operands,
                                     const std::string &result, std::map<char, int64_t> extent) {
    std::string letters; // the indices of the operands, each once
    for (const std::string &term : terms)
        for (char c : term)
            if (letters.find(c) == std::string::npos) letters += c;
    auto flat = [&](const std::string &term, const std::map<char, int64_t> &at) {
        int64_t i = 0;
        for (char c : term) i = i * extent[c] + at.at(c);
        return size_t(i);
    };
    int64_t result_size = 1;
    for (char c : result) result_size *= extent[c];
    std::vector<double> out(size_t(result_size), 0.0);
    std::map<char, int64_t> at;
    for (char c : letters) at[c] = 0;
    while (true) {
        double p = 1;
        for (size_t k = 0; k < terms.size(); ++k) p *= operands[k][flat(terms[k], at)];
        out[flat(result, at)] += p;
        size_t d = letters.size();
        while (d > 0 && ++at[letters[d - 1]] == extent[letters[d - 1]]) at[letters[--d]] = 0;
        if (d == 0) break;
    }
    return out;
}

// Einsum of one or two operands, lowered to ReduceSum, Transpose, Reshape, Slice and MatMul:
// random reals of odd extents against the sum worked out in double (matrix and batched products,
// an inner and an outer product, transposed operands and results, indices summed in one operand,
// the implicit result, diagonals, ellipses), the reference and vpu27 giving the same bytes. An
// ellipsis stands for the indices A, B... of the equation the double sum works out.
TEST(OnnxNn, EinsumOfOneOrTwoOperandsComputesTheSum) {
    const std::map<char, int64_t> extent = {{'a', 3}, {'b', 2}, {'i', 5}, {'j', 7},
                                            {'k', 3}, {'l', 4}, {'A', 3}, {'B', 2}};
    const std::vector<std::pair<std::string, std::string>> equations = {
        {"ij,jk->ik", ""},
        {"bij,bjk->bik", ""},
        {"i,i", ""},
        {"ij->i", ""},
        {"ij->ji", ""},
        {"ij,kj->ik", ""},
        {"bij,bkj->kib", ""},
        {"ijk,ikl->jl", ""},
        {"ij,j->i", ""},
        {"i,j->ij", ""},
        {"aij->ja", ""},
        {"ij,jk", ""},
        {"lij,jk->kl", ""},
        {"ii->i", ""},
        {"ii", ""},
        {"bii->bi", ""},
        {"iji->ij", ""},
        {"ii,ij->j", ""},
        {"...ii->...i", "Aii->Ai"},
        {"...ij->...ji", "Aij->Aji"},
        {"...ij,...jk->...ik", "Aij,Ajk->Aik"},
        {"i...->...", "iAB->AB"},
        {"...ij", "Aij->Aij"},
        {"...i,...i->...", "ABi,ABi->AB"}};
    for (const auto &[written, worked] : equations) {
        SCOPED_TRACE(written);
        const std::string equation = worked.empty() ? written : worked;
        const size_t arrow = equation.find("->");
        std::vector<std::string> terms;
        const std::string lhs = equation.substr(0, arrow);
        terms.push_back(lhs.substr(0, lhs.find(',')));
        if (lhs.find(',') != std::string::npos) terms.push_back(lhs.substr(lhs.find(',') + 1));
        std::string result;
        if (arrow != std::string::npos) {
            result = equation.substr(arrow + 2);
        } else {
            for (const auto &[c, e] : extent)
                if (std::count(lhs.begin(), lhs.end(), c) == 1) result += c;
        }
        auto shape = [&](const std::string &term) {
            std::vector<int64_t> s;
            for (char c : term) s.push_back(extent.at(c));
            return s;
        };
        std::vector<std::vector<int64_t>> input_shapes;
        for (const std::string &t : terms) input_shapes.push_back(shape(t));
        onnx::ModelProto m = one_node_model("Einsum", input_shapes, shape(result));
        onnx::AttributeProto &a = *m.mutable_graph()->mutable_node(0)->add_attribute();
        a.set_name("equation");
        a.set_type(onnx::AttributeProto::STRING);
        a.set_s(written);
        const frontend::ImportedModel model = import_model(m);
        std::vector<Halide::Buffer<>> inputs;
        std::vector<std::vector<double>> operands;
        for (size_t k = 0; k < terms.size(); ++k) {
            const dsl::Layer &in = model.graph.inputs().at(k);
            inputs.push_back(codegen::random_buffer(in.output(), uint32_t(3 + k)));
            operands.push_back(row_major_values(in.output(), inputs.back()));
        }
        const std::vector<double> want = einsum_in_double(terms, operands, result, extent);
        const dsl::Layer &y = model.graph.outputs().at(0);
        const std::vector<double> got =
            row_major_values(y.output(), algorithms::run_reference(model.graph, inputs).at(0));
        expect_values_and_device(model.graph, got, want);
    }
}

// What Einsum's lowering does not take is an error naming the node and the equation.
TEST(OnnxNn, EinsumBeyondTheLoweringIsNamed) {
    struct Case {
        std::string equation;
        std::vector<std::vector<int64_t>> inputs;
        std::vector<int64_t> output;
        std::string message;
    };
    for (const Case &c :
         {Case{"ij,jk,kl->il", {{2, 3}, {3, 4}, {4, 5}}, {2, 5}, "3 operands"},
          Case{"ij,jk->ikk", {{2, 3}, {3, 4}}, {2, 4, 4}, "an index repeated in the result"}}) {
        SCOPED_TRACE(c.equation);
        onnx::ModelProto m = one_node_model("Einsum", c.inputs, c.output);
        onnx::AttributeProto &a = *m.mutable_graph()->mutable_node(0)->add_attribute();
        a.set_name("equation");
        a.set_type(onnx::AttributeProto::STRING);
        a.set_s(c.equation);
        try {
            import_model(m);
            ADD_FAILURE() << "imported";
        } catch (const frontend::ModelError &e) {
            const std::string what = e.what();
            EXPECT_NE(what.find("node 'node' (Einsum)"), std::string::npos) << what;
            EXPECT_NE(what.find(c.message), std::string::npos) << what;
        }
    }
}

// A model of `op` reading data (x0), constant int64 `indices` and, for a scatter, updates (x1).
onnx::ModelProto indexed_model(const std::string &op, const std::vector<int64_t> &data,
                               const std::vector<int64_t> &indices_shape,
                               const std::vector<int64_t> &indices,
                               const std::vector<int64_t> &output,
                               const std::vector<int64_t> &updates = {}) {
    onnx::ModelProto m = updates.empty() ? one_node_model(op, {data}, output)
                                         : one_node_model(op, {data, updates}, output);
    onnx::NodeProto &node = *m.mutable_graph()->mutable_node(0);
    node.clear_input();
    node.add_input("x0");
    node.add_input("indices");
    if (!updates.empty()) node.add_input("x1");
    onnx::TensorProto &t = *m.mutable_graph()->add_initializer();
    t.set_name("indices");
    t.set_data_type(onnx::TensorProto::INT64);
    for (int64_t d : indices_shape) t.add_dims(d);
    for (int64_t v : indices) t.add_int64_data(v);
    return m;
}

void set_attr(onnx::ModelProto &m, const std::string &name, int64_t i) {
    onnx::AttributeProto &a = *m.mutable_graph()->mutable_node(0)->add_attribute();
    a.set_name(name);
    a.set_type(onnx::AttributeProto::INT);
    a.set_i(i);
}

void set_attr(onnx::ModelProto &m, const std::string &name, const std::string &s) {
    onnx::AttributeProto &a = *m.mutable_graph()->mutable_node(0)->add_attribute();
    a.set_name(name);
    a.set_type(onnx::AttributeProto::STRING);
    a.set_s(s);
}

// The imported model's result on random reals, in row-major order, with its data (x0) and
// updates (x1) in row-major order; vpu27 gives the reference's bytes.
struct IndexedRun {
    std::vector<double> got, data, updates;
};
IndexedRun run_indexed(const onnx::ModelProto &m) {
    const frontend::ImportedModel model = import_model(m);
    std::vector<Halide::Buffer<>> inputs;
    IndexedRun run;
    for (size_t i = 0; i < model.graph.inputs().size(); ++i) {
        const dsl::TensorDesc &t = model.graph.inputs()[i].output();
        inputs.push_back(codegen::random_buffer(t, uint32_t(23 + i)));
        (i == 0 ? run.data : run.updates) = row_major_values(t, inputs.back());
    }
    const dsl::Layer &y = model.graph.outputs()[0];
    run.got = row_major_values(y.output(), algorithms::run_reference(model.graph, inputs).at(0));
    codegen::CheckOptions options;
    options.inputs = inputs;
    const codegen::CheckResult r =
        codegen::check_against_reference(model.graph, target::load_target("vpu27"), options);
    EXPECT_TRUE(r.ok()) << r.report();
    return run;
}

// The message of the ModelError importing `m` throws, or "" when it imports.
std::string import_error(const onnx::ModelProto &m) {
    try {
        import_model(m);
    } catch (const frontend::ModelError &e) {
        return e.what();
    }
    return "";
}

// GatherND, ScatterND and ScatterElements of constant indices are one gather of constant indices
// (a scatter's from the data and the updates joined; one per write to an element for a
// reduction, combined by its eltwise layer): random reals against the ops worked out by hand,
// negative indices, batch_dims, repeated writes (the last wins; a reduction takes them all in
// order), and the errors.
TEST(OnnxNn, GatherAndScatterOfConstantIndices) {
    {
        // GatherND, batch_dims 1: out[b, p, t] = data[b, idx[b, p, 0], t].
        onnx::ModelProto m =
            indexed_model("GatherND", {2, 3, 5}, {2, 2, 1}, {2, -3, 1, 1}, {2, 2, 5});
        set_attr(m, "batch_dims", int64_t(1));
        const IndexedRun r = run_indexed(m);
        std::vector<double> want;
        const int64_t rows[2][2] = {{2, 0}, {1, 1}};
        for (int b = 0; b < 2; ++b)
            for (int p = 0; p < 2; ++p)
                for (int t = 0; t < 5; ++t)
                    want.push_back(r.data[size_t((b * 3 + rows[b][p]) * 5 + t)]);
        EXPECT_EQ(r.got, want);
    }
    {
        // ScatterND, reduction add, row 1 written twice: data + u0 + u2 there.
        onnx::ModelProto m = indexed_model("ScatterND", {4, 3}, {3, 1}, {1, 3, -3}, {4, 3}, {3, 3});
        set_attr(m, "reduction", std::string("add"));
        const IndexedRun r = run_indexed(m);
        std::vector<double> want = r.data;
        for (int t = 0; t < 3; ++t) {
            want[size_t(3 + t)] = double(Halide::float16_t(
                double(Halide::float16_t(want[size_t(3 + t)] + r.updates[size_t(t)])) +
                r.updates[size_t(6 + t)]));
            want[size_t(9 + t)] =
                double(Halide::float16_t(want[size_t(9 + t)] + r.updates[size_t(3 + t)]));
        }
        EXPECT_EQ(r.got, want);
    }
    {
        // ScatterElements along axis -1, row 1 writing element 2 twice: the last wins.
        const std::vector<int64_t> idx = {-1, 0, 2, 2, 4, 1};
        onnx::ModelProto last_axis =
            indexed_model("ScatterElements", {3, 5}, {3, 2}, idx, {3, 5}, {3, 2});
        set_attr(last_axis, "axis", int64_t(-1));
        const IndexedRun r = run_indexed(last_axis);
        std::vector<double> want = r.data;
        for (int i = 0; i < 3; ++i)
            for (int j = 0; j < 2; ++j) {
                const int64_t c = (idx[size_t(i * 2 + j)] + 5) % 5;
                want[size_t(i * 5 + c)] = r.updates[size_t(i * 2 + j)];
            }
        EXPECT_EQ(r.got, want);
        onnx::ModelProto m = indexed_model("ScatterElements", {3, 5}, {3, 2}, idx, {3, 5}, {3, 2});
        set_attr(m, "axis", int64_t(1));
        EXPECT_EQ(run_indexed(m).got, want);
    }
    EXPECT_NE(import_error(indexed_model("GatherND", {2, 3}, {1, 2}, {0, 3}, {1}))
                  .find("index 3 (element 1 of the indices) is outside [-3, 3)"),
              std::string::npos);
    // Indices computed on the device: refused, naming the node.
    onnx::ModelProto computed = one_node_model("GatherND", {{2, 3}, {1, 2}}, {1});
    computed.mutable_graph()
        ->mutable_input(1)
        ->mutable_type()
        ->mutable_tensor_type()
        ->set_elem_type(onnx::TensorProto::INT64);
    EXPECT_NE(import_error(computed).find("indices must be a constant"), std::string::npos);
}

// ReverseSequence and MaxUnpool of constant lengths and indices are one gather too: random reals
// against the ops worked out by hand. ReverseSequence with the time first and with the batch
// first, lengths of 0 (a copy) to the whole axis. MaxUnpool of two images into the inferred shape
// and into a larger output_shape, whose flattening the indices index (as ONNX Runtime and PyTorch
// have it), a repeated index (the last write wins); and the errors.
TEST(OnnxNn, ReverseSequenceAndMaxUnpoolOfConstantIndices) {
    for (const bool batch_first : {false, true}) {
        const int64_t steps = 4, batches = 3, inner = 5;
        const std::vector<int64_t> lengths = {4, 0, 2};
        const std::vector<int64_t> shape = batch_first
                                               ? std::vector<int64_t>{batches, steps, inner}
                                               : std::vector<int64_t>{steps, batches, inner};
        onnx::ModelProto m = indexed_model("ReverseSequence", shape, {batches}, lengths, shape);
        set_attr(m, "batch_axis", int64_t(batch_first ? 0 : 1));
        set_attr(m, "time_axis", int64_t(batch_first ? 1 : 0));
        const IndexedRun r = run_indexed(m);
        auto at = [&](int64_t t, int64_t b, int64_t e) {
            return size_t(((batch_first ? b * steps + t : t * batches + b) * inner) + e);
        };
        std::vector<double> want(r.data.size());
        for (int64_t b = 0; b < batches; ++b)
            for (int64_t t = 0; t < steps; ++t) {
                const int64_t length = lengths[size_t(b)];
                for (int64_t e = 0; e < inner; ++e)
                    want[at(t, b, e)] = r.data[at(t < length ? length - 1 - t : t, b, e)];
            }
        EXPECT_EQ(r.got, want) << (batch_first ? "batch first" : "time first");
    }
    auto unpool = [](const std::vector<int64_t> &indices, const std::vector<int64_t> &out,
                     bool with_output_shape) {
        onnx::ModelProto m = indexed_model("MaxUnpool", {2, 2, 2, 3}, {2, 2, 2, 3}, indices, out);
        for (const char *name : {"kernel_shape", "strides"}) {
            onnx::AttributeProto &a = *m.mutable_graph()->mutable_node(0)->add_attribute();
            a.set_name(name);
            a.set_type(onnx::AttributeProto::INTS);
            a.add_ints(2);
            a.add_ints(2);
        }
        if (with_output_shape) {
            m.mutable_graph()->mutable_node(0)->add_input("output_shape");
            onnx::TensorProto &t = *m.mutable_graph()->add_initializer();
            t.set_name("output_shape");
            t.set_data_type(onnx::TensorProto::INT64);
            t.add_dims(4);
            for (int64_t d : out) t.add_int64_data(d);
        }
        return m;
    };
    for (const bool with_output_shape : {false, true}) {
        // Each pooled element's place in its 2x2 window of the output [2, 2, H, W] (4x6, or 5x7
        // as output_shape), flattened whole; element 5 writes where element 4 did.
        const int64_t height = with_output_shape ? 5 : 4, width = with_output_shape ? 7 : 6;
        std::vector<int64_t> indices;
        for (int64_t plane = 0; plane < 4; ++plane) // image * 2 + channel
            for (int64_t h = 0; h < 2; ++h)
                for (int64_t w = 0; w < 3; ++w)
                    indices.push_back((plane * height + 2 * h + (w % 2)) * width + 2 * w +
                                      (h + plane) % 2);
        indices[5] = indices[4];
        const IndexedRun r = run_indexed(unpool(indices, {2, 2, height, width}, with_output_shape));
        std::vector<double> want(size_t(4 * height * width), 0.0);
        for (size_t j = 0; j < indices.size(); ++j) want[size_t(indices[j])] = r.data[j];
        EXPECT_EQ(r.got, want) << (with_output_shape ? "with output_shape" : "inferred shape");
    }

    EXPECT_NE(import_error(indexed_model("ReverseSequence", {4, 3}, {3}, {1, 5, 2}, {4, 3}))
                  .find("sequence_lens[1] = 5 is outside [0, 4]"),
              std::string::npos);
    onnx::ModelProto computed_lengths = one_node_model("ReverseSequence", {{4, 3}, {3}}, {4, 3});
    computed_lengths.mutable_graph()
        ->mutable_input(1)
        ->mutable_type()
        ->mutable_tensor_type()
        ->set_elem_type(onnx::TensorProto::INT64);
    EXPECT_NE(
        import_error(computed_lengths).find("input 1 (sequence_lens, 'x1') must be a constant"),
        std::string::npos)
        << import_error(computed_lengths);
    std::vector<int64_t> in_order(24);
    for (size_t j = 0; j < in_order.size(); ++j) in_order[j] = int64_t(j);
    EXPECT_NE(import_error(unpool(in_order, {2, 2, 3, 6}, true))
                  .find("output_shape is smaller than the unpooled shape along axis 2"),
              std::string::npos);
    EXPECT_NE(import_error(unpool(in_order, {2, 2, 4096, 4096}, true))
                  .find("the unpooled shape 2x2x4096x4096 has more than 2^24 elements"),
              std::string::npos);
    in_order.back() = 96;
    EXPECT_NE(import_error(unpool(in_order, {2, 2, 4, 6}, false))
                  .find("index 96 (element 23 of the indices) is outside [-96, 96)"),
              std::string::npos);
}

// weighted_gather sums picked elements times weights in float32 and rounds once: random reals
// and random float32 weights on an odd length against that sum worked out here, -1 taps that
// read nothing (an infinity at the element a -1 clamps to stays out), on the simulator of both
// targets, folded for a constant; the bad tables named.
TEST(WeightedGather, SumsPickedElementsTimesWeightsInFloat32) {
    const int64_t elements = 23, points = 11, taps = 3;
    std::mt19937 rng(211);
    std::uniform_real_distribution<float> real(-3.0f, 3.0f);
    std::vector<float> data(elements);
    for (float &v : data) v = float(Halide::float16_t(real(rng)));
    data[0] = INFINITY;
    dsl::ConstValues indices{dsl::ElemType::I64, {points, taps}, {}, {}};
    dsl::ConstValues weights{dsl::ElemType::F32, {points, taps}, {}, {}};
    for (int64_t e = 0; e < points * taps; ++e) {
        indices.ints.push_back(e % 5 == 2 ? -1 : 1 + int64_t(rng() % uint32_t(elements - 1)));
        weights.reals.push_back(double(real(rng)));
    }
    dsl::Attrs attrs;
    attrs.set("indices", dsl::const_buffer(indices)).set("weights", dsl::const_buffer(weights));
    const dsl::Layer x = input("x", {elements});
    const dsl::Layer sums = registry().build("weighted_gather", "sums", {x}, attrs);
    EXPECT_EQ(sums.output().shape, dsl::Shape({points}));
    std::vector<float> want;
    for (int64_t p = 0; p < points; ++p) {
        float sum = 0;
        for (int64_t k = 0; k < taps; ++k) {
            const size_t entry = size_t(p * taps + k);
            if (indices.ints[entry] >= 0)
                sum += float(weights.reals[entry]) * data[size_t(indices.ints[entry])];
        }
        want.push_back(float(Halide::float16_t(sum)));
    }
    Halide::Buffer<> in = algorithms::make_buffer(x.output());
    ASSERT_EQ(in.number_of_elements(), size_t(elements));
    for (int64_t e = 0; e < elements; ++e)
        static_cast<Halide::float16_t *>(in.data())[e] = Halide::float16_t(data[size_t(e)]);
    const std::vector<double> got = row_major_values(
        sums.output(), algorithms::run_reference(dsl::Graph("g", {sums}), {in}).at(0));
    for (int64_t p = 0; p < points; ++p) EXPECT_EQ(got[size_t(p)], want[size_t(p)]) << p;
    expect_matches_reference(sums);

    dsl::ConstValues constant{dsl::ElemType::F32, {elements}, {}, {}};
    for (float v : data) constant.reals.push_back(double(v));
    const dsl::Layer folded =
        registry().build("weighted_gather", "folded",
                         {dsl::LayerRegistry::constant("k", dsl::const_buffer(constant))}, attrs);
    ASSERT_TRUE(dsl::is_constant(folded));
    const dsl::ConstValues v = dsl::const_values(folded);
    for (int64_t p = 0; p < points; ++p)
        EXPECT_EQ(float(Halide::float16_t(float(v.reals[size_t(p)]))), want[size_t(p)]) << p;

    indices.ints[4] = elements;
    EXPECT_NE(build_error("weighted_gather", {x},
                          dsl::Attrs(attrs).set("indices", dsl::const_buffer(indices)))
                  .find("index 23 (entry 4) outside [-1, 23)"),
              std::string::npos);
    EXPECT_NE(build_error("weighted_gather", {input("batch", {2, 3, 5, 7})}, attrs)
                  .find("has a batch of 2"),
              std::string::npos);
}

// lp_normalize divides by the L1 or L2 norm along any axis but the batch: random reals of an
// odd shape along each axis, against the division worked out in double from the fp16 input
// (within an fp16 rounding), on the simulator of both targets; a vector of zeros gives NaN
// (0 / 0, ONNX's) or, with an epsilon, zeros.
TEST(LpNormalize, DividesByTheNormAlongAnyAxis) {
    const dsl::Layer x = input("x", {2, 5, 7, 9});
    const Halide::Buffer<> values = codegen::random_buffer(x.output(), 29);
    const std::vector<double> data = row_major_values(x.output(), values);
    const std::vector<int64_t> extents = {2, 5, 7, 9};
    for (int64_t axis : {1, 2, -1})
        for (int64_t p : {1, 2}) {
            SCOPED_TRACE("axis " + std::to_string(axis) + ", p " + std::to_string(p));
            const dsl::Layer y = registry().build("lp_normalize", "y", {x},
                                                  dsl::Attrs().set("axis", axis).set("p", p));
            const std::vector<double> got = row_major_values(
                y.output(), algorithms::run_reference(dsl::Graph("g", {y}), {values}).at(0));
            const size_t d = size_t(axis < 0 ? axis + 4 : axis);
            int64_t stride = 1;
            for (size_t k = d + 1; k < 4; ++k) stride *= extents[k];
            for (size_t e = 0; e < data.size(); ++e) {
                // The first element of e's vector along the axis, then the vector's norm.
                const int64_t at = int64_t(e) / stride % extents[d];
                const size_t first = e - size_t(at * stride);
                double norm = 0;
                for (int64_t k = 0; k < extents[d]; ++k) {
                    const double v = data[first + size_t(k * stride)];
                    norm += p == 2 ? v * v : std::abs(v);
                }
                const double want = data[e] / (p == 2 ? std::sqrt(norm) : norm);
                ASSERT_NEAR(got[e], want, std::ldexp(std::abs(want), -11) + 1e-7) << e;
            }
            expect_matches_reference(y);
        }
    // Along the channels: (0, 0, 0) and (3, 4, 0).
    const dsl::Layer small = input("small", {1, 3, 1, 2}, dsl::ElemType::F32);
    const std::vector<float> vectors = {0, 0, 0, 3, 4, 0}; // c innermost, then w
    auto normalized = [&](int64_t p, double epsilon) {
        return reference_values(
            small, vectors,
            {registry().build(
                "lp_normalize", "n", {small},
                dsl::Attrs().set("axis", int64_t(1)).set("p", p).set("epsilon", epsilon))},
            0);
    };
    const std::vector<float> l2 = normalized(2, 0);
    for (size_t i = 0; i < 3; ++i) EXPECT_TRUE(std::isnan(l2[i])) << i;
    EXPECT_EQ(std::vector<float>(l2.begin() + 3, l2.end()), (std::vector<float>{0.6f, 0.8f, 0}));
    const std::vector<float> l1 = normalized(1, 0.5);
    EXPECT_EQ(l1, (std::vector<float>{0, 0, 0, 3.0f / 7, 4.0f / 7, 0}));
    EXPECT_NE(build_error("lp_normalize", {small}, dsl::Attrs().set("p", int64_t(3)))
                  .find("must be 1 or 2"),
              std::string::npos);
}

// ONNX's LpNormalization is lp_normalize; along axis 0 of a rank-2 tensor (the device's batch)
// on a leading unit dimension, its columns normalized: random reals against the L1 division.
TEST(OnnxNn, LpNormalizationAlongAnyAxisTheBatchToo) {
    onnx::ModelProto m = one_node_model("LpNormalization", {{4, 6}}, {4, 6});
    set_attr(m, "axis", int64_t(0));
    set_attr(m, "p", int64_t(1));
    const frontend::ImportedModel model = import_model(m);
    std::vector<std::string> ops;
    for (const dsl::Layer &layer : model.graph.layers()) ops.push_back(layer.op());
    EXPECT_EQ(ops, (std::vector<std::string>{"unsqueeze", "lp_normalize", "squeeze"}));
    const dsl::TensorDesc &x = model.graph.inputs()[0].output();
    const Halide::Buffer<> values = codegen::random_buffer(x, 31);
    const std::vector<double> data = row_major_values(x, values);
    const std::vector<double> got = row_major_values(
        model.graph.outputs()[0].output(), algorithms::run_reference(model.graph, {values}).at(0));
    for (size_t j = 0; j < 6; ++j) {
        double norm = 0;
        for (size_t i = 0; i < 4; ++i) norm += std::abs(data[i * 6 + j]);
        for (size_t i = 0; i < 4; ++i) {
            const double want = data[i * 6 + j] / norm;
            EXPECT_NEAR(got[i * 6 + j], want, std::ldexp(std::abs(want), -11) + 1e-7);
        }
    }
    codegen::CheckOptions options;
    options.inputs = {values};
    const codegen::CheckResult r =
        codegen::check_against_reference(model.graph, target::load_target("vpu27"), options);
    EXPECT_TRUE(r.ok()) << r.report();
}

// A depthwise convolution with a channel multiplier (ONNX's Conv with group equal to the input
// channels and twice as many outputs) is a grouped conv2d: random reals on odd extents, the
// reference and both targets giving the same bytes, against the sums worked out here in double
// (within fp16 roundings of the fp16 weights and inputs).
TEST(OnnxNn, DepthwiseConvolutionWithAChannelMultiplier) {
    const int64_t c = 8, h = 9, w = 11, k = 3;
    onnx::ModelProto m = one_node_model("Conv", {{1, c, h, w}, {2 * c, 1, k, k}}, {1, 2 * c, h, w});
    set_attr(m, "group", c);
    onnx::AttributeProto &pads = *m.mutable_graph()->mutable_node(0)->add_attribute();
    pads.set_name("pads");
    pads.set_type(onnx::AttributeProto::INTS);
    for (int i = 0; i < 4; ++i) pads.add_ints(1);
    frontend::ImportOptions options;
    Halide::Buffer<float> weights{int(k), int(k), 1, int(2 * c)}; // numpy (2c, 1, k, k)
    std::mt19937 rng(37);
    std::uniform_real_distribution<float> real(-1.0f, 1.0f);
    weights.for_each_value([&](float &v) { v = float(Halide::float16_t(real(rng))); });
    options.known_inputs["x1"] = weights;
    const frontend::ImportedModel model = import_model(m, options);
    EXPECT_EQ(model.graph.outputs()[0].op(), "conv2d");
    const dsl::TensorDesc &x = model.graph.inputs()[0].output();
    const Halide::Buffer<> values = codegen::random_buffer(x, 41);
    const std::vector<double> data = row_major_values(x, values);
    const std::vector<double> got = row_major_values(
        model.graph.outputs()[0].output(), algorithms::run_reference(model.graph, {values}).at(0));
    for (int64_t o = 0; o < 2 * c; ++o)
        for (int64_t y = 0; y < h; ++y)
            for (int64_t xx = 0; xx < w; ++xx) {
                double want = 0;
                for (int64_t dy = 0; dy < k; ++dy)
                    for (int64_t dx = 0; dx < k; ++dx) {
                        const int64_t iy = y + dy - 1, ix = xx + dx - 1;
                        if (iy < 0 || iy >= h || ix < 0 || ix >= w) continue;
                        // Output channel o reads input channel o / 2.
                        want += double(weights(int(dx), int(dy), 0, int(o))) *
                                data[size_t(((o / 2) * h + iy) * w + ix)];
                    }
                EXPECT_NEAR(got[size_t((o * h + y) * w + xx)], want,
                            std::ldexp(std::abs(want), -10) + 2e-3)
                    << "channel " << o << " at " << y << ", " << xx;
            }
    for (const char *name : {"vpu27", "vpu20"}) {
        codegen::CheckOptions check;
        check.inputs = {values};
        const codegen::CheckResult r =
            codegen::check_against_reference(model.graph, target::load_target(name), check);
        EXPECT_TRUE(r.ok()) << name << ": " << r.report();
    }
}

// GridSample of a constant grid, bilinear with zeros outside (two images of odd extents, each
// with its own grid, points inside and outside the input), against the sampling worked out here
// in double from the fp16 input; RoiAlign and GridSample through the backend tests (their modes,
// paddings and coordinate modes); the limits named.
TEST(OnnxNn, GridSampleOfAConstantGridIsOneWeightedGather) {
    const int64_t n = 2, c = 3, h = 5, w = 7, oh = 4, ow = 6;
    onnx::ModelProto m = one_node_model("GridSample", {{n, c, h, w}}, {n, c, oh, ow});
    m.mutable_graph()->mutable_node(0)->add_input("grid");
    std::mt19937 rng(223);
    std::uniform_real_distribution<float> coordinate(-1.25f, 1.25f);
    std::vector<float> grid(size_t(n * oh * ow * 2));
    for (float &v : grid) v = coordinate(rng);
    onnx::TensorProto &t = *m.mutable_graph()->add_initializer();
    t.set_name("grid");
    t.set_data_type(onnx::TensorProto::FLOAT);
    for (int64_t d : {n, oh, ow, int64_t(2)}) t.add_dims(d);
    for (float v : grid) t.add_float_data(v);
    const frontend::ImportedModel model = import_model(m);
    std::vector<std::string> ops;
    for (const dsl::Layer &layer : model.graph.layers()) ops.push_back(layer.op());
    // Two images: rows of channels, one image of them, the gather, the output's shape.
    EXPECT_EQ(ops,
              (std::vector<std::string>{"reshape", "unsqueeze", "weighted_gather", "reshape"}));
    const dsl::TensorDesc &x = model.graph.inputs()[0].output();
    const Halide::Buffer<> values = codegen::random_buffer(x, 7);
    const std::vector<double> data = row_major_values(x, values);
    const dsl::Layer &y = model.graph.outputs()[0];
    const std::vector<double> got =
        row_major_values(y.output(), algorithms::run_reference(model.graph, {values}).at(0));
    for (int64_t in = 0; in < n; ++in)
        for (int64_t ic = 0; ic < c; ++ic)
            for (int64_t r = 0; r < oh; ++r)
                for (int64_t q = 0; q < ow; ++q) {
                    const size_t g = size_t(((in * oh + r) * ow + q) * 2);
                    const double px = ((grid[g] + 1.0) * double(w) - 1) / 2,
                                 py = ((grid[g + 1] + 1.0) * double(h) - 1) / 2;
                    const double x0 = std::floor(px), y0 = std::floor(py);
                    double want = 0;
                    for (int dy = 0; dy < 2; ++dy)
                        for (int dx = 0; dx < 2; ++dx) {
                            const double row = y0 + dy, column = x0 + dx;
                            if (row < 0 || row >= double(h) || column < 0 || column >= double(w))
                                continue;
                            want += (dy ? py - y0 : 1 - (py - y0)) *
                                    (dx ? px - x0 : 1 - (px - x0)) *
                                    data[size_t(((in * c + ic) * h + int64_t(row)) * w +
                                                int64_t(column))];
                        }
                    const double ours = got[size_t(((in * c + ic) * oh + r) * ow + q)];
                    EXPECT_NEAR(ours, want, 1e-3 + std::ldexp(std::abs(want), -10))
                        << "image " << in << " channel " << ic << " at " << r << ", " << q;
                }
    codegen::CheckOptions options;
    options.inputs = {values};
    const codegen::CheckResult check =
        codegen::check_against_reference(model.graph, target::load_target("vpu27"), options);
    EXPECT_TRUE(check.ok()) << check.report();

    onnx::ModelProto computed =
        one_node_model("GridSample", {{n, c, h, w}, {n, oh, ow, 2}}, {n, c, oh, ow});
    EXPECT_NE(import_error(computed).find("input 1 (grid, 'x1') must be a constant"),
              std::string::npos)
        << import_error(computed);
    onnx::ModelProto far = m;
    far.mutable_graph()->mutable_initializer(0)->set_float_data(3, 1e7f);
    EXPECT_NE(import_error(far).find("grid element 3 is 10000000.000000, beyond a million"),
              std::string::npos)
        << import_error(far);
    onnx::ModelProto max_mode = one_node_model("RoiAlign", {{1, c, h, w}}, {1, c, 1, 1});
    onnx::TensorProto &rois = *max_mode.mutable_graph()->add_initializer();
    rois.set_name("rois");
    rois.set_data_type(onnx::TensorProto::FLOAT);
    for (int64_t d : {1, 4}) rois.add_dims(d);
    for (float v : {0.5f, 1.0f, 3.5f, 4.0f}) rois.add_float_data(v);
    onnx::TensorProto &images = *max_mode.mutable_graph()->add_initializer();
    images.set_name("batch_indices");
    images.set_data_type(onnx::TensorProto::INT64);
    images.add_dims(1);
    images.add_int64_data(0);
    max_mode.mutable_graph()->mutable_node(0)->add_input("rois");
    max_mode.mutable_graph()->mutable_node(0)->add_input("batch_indices");
    onnx::ModelProto huge = max_mode;
    onnx::ModelProto overflowing = max_mode;
    onnx::AttributeProto &scale = *overflowing.mutable_graph()->mutable_node(0)->add_attribute();
    scale.set_name("spatial_scale");
    scale.set_type(onnx::AttributeProto::FLOAT);
    scale.set_f(INFINITY);
    EXPECT_NE(
        import_error(overflowing).find("box 0: its corners times spatial_scale are not finite"),
        std::string::npos)
        << import_error(overflowing);
    set_attr(max_mode, "mode", std::string("max"));
    EXPECT_NE(import_error(max_mode).find("mode 'max': only avg"), std::string::npos)
        << import_error(max_mode);
    // A bin of a million samples, and nine million bins: refused before any table is made.
    onnx::ModelProto dense = huge;
    set_attr(dense, "sampling_ratio", int64_t(1000));
    EXPECT_NE(import_error(dense).find("samples a bin, more than 4096"), std::string::npos)
        << import_error(dense);
    set_attr(huge, "output_height", int64_t(3000));
    set_attr(huge, "output_width", int64_t(3000));
    for (int d : {2, 3})
        huge.mutable_graph()
            ->mutable_output(0)
            ->mutable_type()
            ->mutable_tensor_type()
            ->mutable_shape()
            ->mutable_dim(d)
            ->set_dim_value(3000);
    EXPECT_NE(import_error(huge).find("entries, more than 2^24"), std::string::npos)
        << import_error(huge);
}

// Tile along the batch of a 4-D tensor held NHWC (node/test_tile): the other axes tiled first,
// then the images as rows [N, C, H*W] tiled along N and back in rank 4; random reals against
// y[n, c, h, w] = x[n % N, c % C, h % H, w % W], with repeats along the batch alone too.
TEST(OnnxNn, TileAlongTheBatchOfAnNhwcTensorTilesItsImagesAsRows) {
    for (const std::vector<int64_t> &repeats :
         {std::vector<int64_t>{2, 1, 2, 3}, std::vector<int64_t>{3, 1, 1, 1}}) {
        const std::vector<int64_t> in_shape = {3, 4, 5, 7};
        std::vector<int64_t> out_shape = in_shape;
        for (size_t i = 0; i < 4; ++i) out_shape[i] *= repeats[i];
        onnx::ModelProto m = one_node_model("Tile", {in_shape}, out_shape);
        m.mutable_graph()->mutable_node(0)->add_input("repeats");
        onnx::TensorProto &r = *m.mutable_graph()->add_initializer();
        r.set_name("repeats");
        r.set_data_type(onnx::TensorProto::INT64);
        r.add_dims(4);
        for (int64_t v : repeats) r.add_int64_data(v);
        const frontend::ImportedModel model = import_model(m);
        ASSERT_EQ(model.graph.inputs().at(0).output().order, dsl::DimsOrder::NHWC());
        EXPECT_EQ(model.graph.outputs()[0].output().shape, dsl::Shape(out_shape));
        const Halide::Buffer<> in = codegen::random_buffer(model.graph.inputs().at(0).output(), 17);
        const Halide::Buffer<Halide::float16_t> x(in); // (c, w, h, n)
        const Halide::Buffer<Halide::float16_t> y(
            algorithms::run_reference(model.graph, {in}).at(0));
        std::vector<double> got, want;
        for (int n = 0; n < out_shape[0]; ++n)
            for (int c = 0; c < out_shape[1]; ++c)
                for (int h = 0; h < out_shape[2]; ++h)
                    for (int w = 0; w < out_shape[3]; ++w) {
                        got.push_back(double(y(c, w, h, n)));
                        want.push_back(double(x(c % 4, w % 7, h % 5, n % 3)));
                    }
        expect_values_and_device(model.graph, got, want);
    }
}

// LRN across channels: y = x / (bias + alpha / size * the sum of squares of the window's
// channels that exist)^beta, the window c - floor((size - 1) / 2) to c + ceil((size - 1) / 2);
// random reals of 19 channels (odd, the window reaching past both ends) against that in double,
// an odd and an even size, and the device's bytes the reference's.
TEST(OnnxNn, LrnNormalizesAcrossNeighbouringChannels) {
    for (const int64_t size : {5, 4}) {
        SCOPED_TRACE(size);
        onnx::ModelProto m = one_node_model("LRN", {{1, 19, 5, 7}}, {1, 19, 5, 7});
        onnx::NodeProto &node = *m.mutable_graph()->mutable_node(0);
        const double alpha = 0.5, beta = 0.75, bias = 2;
        for (const auto &[name, value] :
             {std::pair{"alpha", alpha}, {"beta", beta}, {"bias", bias}}) {
            onnx::AttributeProto &a = *node.add_attribute();
            a.set_name(name);
            a.set_type(onnx::AttributeProto::FLOAT);
            a.set_f(float(value));
        }
        onnx::AttributeProto &s = *node.add_attribute();
        s.set_name("size");
        s.set_type(onnx::AttributeProto::INT);
        s.set_i(size);
        const frontend::ImportedModel model = import_model(m);
        const Halide::Buffer<> in = codegen::random_buffer(model.graph.inputs().at(0).output(), 19);
        const Halide::Buffer<Halide::float16_t> x(in); // (c, w, h, n)
        const Halide::Buffer<Halide::float16_t> y(
            algorithms::run_reference(model.graph, {in}).at(0));
        std::vector<double> got, want;
        for (int h = 0; h < 5; ++h)
            for (int w = 0; w < 7; ++w)
                for (int c = 0; c < 19; ++c) {
                    double sum = 0;
                    for (int64_t k = c - (size - 1) / 2; k <= c + size / 2; ++k)
                        if (k >= 0 && k < 19) sum += std::pow(double(x(int(k), w, h, 0)), 2);
                    got.push_back(double(y(c, w, h, 0)));
                    want.push_back(double(x(c, w, h, 0)) /
                                   std::pow(bias + alpha / double(size) * sum, beta));
                }
        expect_values_and_device(model.graph, got, want);
    }
    // size is required (ONNX's checker says so first).
    onnx::ModelProto m = one_node_model("LRN", {{1, 3, 2, 2}}, {1, 3, 2, 2});
    EXPECT_THROW(
        {
            try {
                import_model(m);
            } catch (const frontend::ModelError &e) {
                EXPECT_NE(std::string(e.what()).find("attribute 'size' is missing"),
                          std::string::npos)
                    << e.what();
                throw;
            }
        },
        frontend::ModelError);
}

// A reduction along the batch of a 4-D tensor held NHWC (MeanVarianceNormalization's axes 0, 2
// and 3 of a batch of 3): the images as rows [N, C, H*W], reduced there and back in rank 4;
// random reals against the mean and the maximum worked out in double.
TEST(OnnxNn, ReduceAlongTheBatchOfAnNhwcTensorReducesItsImagesAsRows) {
    struct Case {
        std::string op;
        std::vector<int64_t> axes, output;
        int64_t keepdims;
    };
    for (const Case &c :
         {Case{"ReduceMean", {0, 2, 3}, {1, 4, 1, 1}, 1}, Case{"ReduceMax", {0}, {4, 5, 7}, 0}}) {
        SCOPED_TRACE(c.op);
        onnx::ModelProto m = one_node_model(c.op, {{3, 4, 5, 7}}, c.output);
        onnx::NodeProto &node = *m.mutable_graph()->mutable_node(0);
        onnx::AttributeProto &axes = *node.add_attribute();
        axes.set_name("axes");
        axes.set_type(onnx::AttributeProto::INTS);
        for (int64_t a : c.axes) axes.add_ints(a);
        onnx::AttributeProto &keep = *node.add_attribute();
        keep.set_name("keepdims");
        keep.set_type(onnx::AttributeProto::INT);
        keep.set_i(c.keepdims);
        const frontend::ImportedModel model = import_model(m);
        EXPECT_EQ(model.graph.outputs()[0].output().shape, dsl::Shape(c.output));
        const Halide::Buffer<> in = codegen::random_buffer(model.graph.inputs().at(0).output(), 13);
        const Halide::Buffer<Halide::float16_t> x(in); // (c, w, h, n)
        const dsl::Layer &y = model.graph.outputs()[0];
        const std::vector<double> got =
            row_major_values(y.output(), algorithms::run_reference(model.graph, {in}).at(0));
        std::vector<double> want;
        if (c.op == "ReduceMean") {
            for (int ch = 0; ch < 4; ++ch) {
                double sum = 0;
                for (int n = 0; n < 3; ++n)
                    for (int h = 0; h < 5; ++h)
                        for (int w = 0; w < 7; ++w) sum += double(x(ch, w, h, n));
                want.push_back(sum / 105);
            }
        } else {
            for (int ch = 0; ch < 4; ++ch)
                for (int h = 0; h < 5; ++h)
                    for (int w = 0; w < 7; ++w) {
                        double best = -1e9;
                        for (int n = 0; n < 3; ++n) best = std::max(best, double(x(ch, w, h, n)));
                        want.push_back(best);
                    }
        }
        expect_values_and_device(model.graph, got, want);
    }
}

// EyeLike of a shape too large for a constant is an error naming the node, not an allocation
// of its elements.
TEST(OnnxNn, EyeLikeOfAHugeShapeIsNamed) {
    try {
        import_model(one_node_model("EyeLike", {{1 << 16, 1 << 16}}, {1 << 16, 1 << 16}));
        ADD_FAILURE() << "imported";
    } catch (const frontend::ModelError &e) {
        EXPECT_NE(std::string(e.what()).find("node 'node' (EyeLike): input 0's shape is too large"),
                  std::string::npos)
            << e.what();
    }
}

class NnNodeTest : public ::testing::TestWithParam<std::string> {};

TEST_P(NnNodeTest, MatchesTheExpectedOutputs) {
    vpuc::testing::expect_node_test_passes(GetParam());
}

INSTANTIATE_TEST_SUITE_P(
    Onnx, NnNodeTest,
    ::testing::Values(
        "test_globalaveragepool_precomputed", "test_globalmaxpool_precomputed", "test_erf",
        "test_reversesequence_batch", "test_reversesequence_time", "test_gridsample",
        "test_gridsample_aligncorners_true", "test_gridsample_bicubic", "test_gridsample_bilinear",
        "test_gridsample_border_padding", "test_gridsample_nearest",
        "test_gridsample_reflection_padding", "test_gridsample_zeros_padding",
        "test_roialign_aligned_false", "test_roialign_aligned_true",
        "test_maxunpool_export_without_output_shape", "test_matmul_2d", "test_matmul_3d",
        "test_matmul_4d", "test_upsample_nearest", "test_resize_downsample_scales_cubic",
        "test_resize_downsample_scales_cubic_A_n0p5_exclude_outside",
        "test_resize_downsample_scales_cubic_align_corners", "test_resize_downsample_sizes_cubic",
        "test_resize_downsample_sizes_nearest_tf_half_pixel_for_nn",
        "test_resize_tf_crop_and_resize", "test_resize_upsample_scales_cubic",
        "test_resize_upsample_scales_cubic_A_n0p5_exclude_outside",
        "test_resize_upsample_scales_cubic_align_corners",
        "test_resize_upsample_scales_cubic_asymmetric", "test_resize_upsample_sizes_cubic",
        "test_resize_downsample_scales_linear",
        "test_resize_downsample_scales_linear_align_corners",
        "test_resize_downsample_scales_nearest",
        "test_resize_downsample_sizes_linear_pytorch_half_pixel",
        "test_resize_downsample_sizes_nearest", "test_resize_upsample_scales_linear",
        "test_resize_upsample_scales_linear_align_corners", "test_resize_upsample_scales_nearest",
        "test_resize_upsample_sizes_nearest", "test_resize_upsample_sizes_nearest_ceil_half_pixel",
        "test_resize_upsample_sizes_nearest_floor_align_corners",
        "test_resize_upsample_sizes_nearest_round_prefer_ceil_asymmetric",
        "test_layer_normalization_2d_axis1", "test_layer_normalization_2d_axis_negative_1",
        "test_layer_normalization_3d_axis1_epsilon", "test_layer_normalization_3d_axis2_epsilon",
        "test_layer_normalization_3d_axis_negative_1_epsilon",
        "test_layer_normalization_3d_axis_negative_2_epsilon", "test_layer_normalization_4d_axis1",
        "test_layer_normalization_4d_axis2", "test_layer_normalization_4d_axis3",
        "test_layer_normalization_4d_axis_negative_1",
        "test_layer_normalization_4d_axis_negative_2",
        "test_layer_normalization_4d_axis_negative_3", "test_layer_normalization_default_axis",
        // Over axis 0, the device's batch (docs/onnx.md, "Along axis 0").
        "test_layer_normalization_2d_axis0", "test_layer_normalization_2d_axis_negative_2",
        "test_layer_normalization_3d_axis0_epsilon",
        "test_layer_normalization_3d_axis_negative_3_epsilon", "test_layer_normalization_4d_axis0",
        "test_layer_normalization_4d_axis_negative_4",
        // Ops ONNX defines by a function, imported as their bodies: SoftmaxCrossEntropyLoss's
        // holds a NegativeLogLikelihoodLoss, expanded in turn; a rank-6 loss sums every axis.
        "test_nllloss_NCd1d2d3d4d5_mean_weight", "test_nllloss_NCd1_ii", "test_sce_mean_log_prob",
        "test_sce_NCd1d2d3_none_no_weight_negative_ii", "test_hannwindow",
        "test_hammingwindow_symmetric", "test_blackmanwindow", "test_instancenorm_example",
        "test_instancenorm_epsilon", "test_einsum_batch_matmul", "test_einsum_inner_prod",
        "test_einsum_sum", "test_einsum_transpose", "test_mvn", "test_mvn_expanded",
        "test_eyelike_populate_off_main_diagonal", "test_eyelike_with_dtype",
        "test_eyelike_without_dtype"),
    [](const ::testing::TestParamInfo<std::string> &info) { return info.param.substr(5); });

} // namespace
