// The ONNX importer: models of the ONNX backend test data (Debian's libonnx-testdata) compile,
// run on the simulator and match their expected outputs; bad and hostile models are errors
// naming the file and what is wrong.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>
#include <random>
#include <sstream>

#include "../frontend/src/onnx_internal.h"
#include "algorithms/reference.h"
#include "codegen/check.h"
#include "codegen/lower.h"
#include "dsl/constant_values.h"
#include "frontend/blob_io.h"
#include "frontend/onnx_import.h"
#include "onnx_node_test.h"
#include "vpu_target/blob_printer.h"
#include "vpu_target/simulator.h"
#include "vpu_target/verifier.h"

using namespace vpuc;
namespace fs = std::filesystem;

namespace {

class NodeTest : public ::testing::TestWithParam<std::string> {};

TEST_P(NodeTest, MatchesTheExpectedOutputs) {
    vpuc::testing::expect_node_test_passes(GetParam());
}

INSTANTIATE_TEST_SUITE_P(
    Onnx, NodeTest,
    ::testing::Values(
        "test_relu", "test_leakyrelu", "test_sigmoid", "test_hardsigmoid", "test_clip", "test_add",
        "test_mul", "test_sub", "test_softmax_axis_1", "test_conv_with_strides_padding",
        "test_conv_with_strides_no_padding", "test_conv_with_autopad_same",
        "test_maxpool_2d_default", "test_maxpool_2d_same_upper", "test_averagepool_2d_default",
        "test_globalaveragepool", "test_globalmaxpool", "test_gemm_transposeB", "test_gemm_alpha",
        "test_gemm_beta", "test_reshape_reduced_dims", "test_flatten_axis1",
        "test_transpose_all_permutations_1", "test_concat_3d_axis_1", "test_slice_negative_axes",
        "test_top_k", "test_split_equal_parts_2d", "test_split_variable_parts_2d",
        "test_unsqueeze_axis_1", "test_gather_1", "test_gather_2d_indices",
        "test_gather_negative_indices", "test_gemm_default_matrix_bias", "test_max_example",
        "test_min_example", "test_sum_example", "test_mean_example", "test_add_uint8",
        "test_sub_uint8", "test_mul_uint8", "test_max_int8", "test_min_uint8", "test_max_int32",
        // Along axis 0, the device's batch (docs/onnx.md, "Along axis 0").
        "test_concat_2d_axis_0", "test_concat_3d_axis_negative_3", "test_transpose_default",
        "test_transpose_all_permutations_4", "test_softmax_axis_0", "test_slice",
        "test_split_variable_parts_default_axis", "test_reshape_reordered_all_dims",
        "test_unsqueeze_axis_0", "test_flatten_axis0", "test_flatten_axis2", "test_squeeze",
        "test_gather_0", "test_gemm_transposeA", "test_gemm_all_attributes", "test_div",
        // Graph outputs that are constants (int64 and float) or graph inputs.
        "test_shape", "test_shape_start_1_end_negative_1", "test_constant",
        "test_constantofshape_int_zeros", "test_constantofshape_float_ones",
        "test_range_float_type_positive_delta", "test_range_int32_type_negative_delta",
        "test_identity", "test_cast_FLOAT_to_FLOAT16", "test_cast_DOUBLE_to_FLOAT",
        "test_dropout_default", "test_dropout_default_mask",
        "test_training_dropout_zero_ratio_mask",
        // Scalars: Size's constant as a graph output.
        "test_size", "test_size_example",
        // Empty constants in shape arithmetic: the prefix of a shape before axis 0.
        "test_layer_normalization_2d_axis0_expanded",
        "test_layer_normalization_3d_axis_negative_3_epsilon_expanded",
        "test_layer_normalization_4d_axis0_expanded",
        // Reductions (axes as an attribute, ReduceSum's as an input), kept or not, over every
        // axis (the batch too); ArgMax and ArgMin ties; Hardmax; LogSoftmax along axis 0.
        "test_reduce_mean_do_not_keepdims_random", "test_reduce_sum_keepdims_random",
        "test_reduce_sum_empty_axes_input_noop_random", "test_reduce_l2_keep_dims_random",
        "test_reduce_log_sum_exp_default_axes_keepdims_random",
        "test_reduce_prod_do_not_keepdims_random", "test_reduce_min_negative_axes_keepdims_random",
        "test_reduce_log_sum_desc_axes", "test_argmax_no_keepdims_example_select_last_index",
        "test_argmin_keepdims_random", "test_argmax_default_axis_random", "test_hardmax_one_hot",
        "test_hardmax_axis_0", "test_logsoftmax_axis_0",
        // OneHot: int64 and float indices, negative ones, the new axis first, last and inside.
        "test_onehot_without_axis", "test_onehot_with_axis", "test_onehot_with_negative_axis",
        "test_onehot_negative_indices"),
    [](const ::testing::TestParamInfo<std::string> &info) { return info.param.substr(5); });

} // namespace

namespace {

// A conv of 16 channels over a 1x16x6x6 input, its weights an initializer, then a relu.
onnx::ModelProto conv_model() {
    onnx::ModelProto m;
    m.set_ir_version(8);
    m.add_opset_import()->set_version(13);
    onnx::GraphProto &g = *m.mutable_graph();
    g.set_name("conv");
    onnx::ValueInfoProto &x = *g.add_input();
    x.set_name("x");
    x.mutable_type()->mutable_tensor_type()->set_elem_type(onnx::TensorProto::FLOAT);
    for (int64_t d : {1, 16, 6, 6})
        x.mutable_type()->mutable_tensor_type()->mutable_shape()->add_dim()->set_dim_value(d);
    onnx::TensorProto &w = *g.add_initializer();
    w.set_name("w");
    w.set_data_type(onnx::TensorProto::FLOAT);
    for (int64_t d : {16, 16, 3, 3}) w.add_dims(d);
    for (int i = 0; i < 16 * 16 * 9; ++i) w.add_float_data(float((i * 7) % 11 - 5) / 16);
    onnx::NodeProto &conv = *g.add_node();
    conv.set_name("conv1");
    conv.set_op_type("Conv");
    conv.add_input("x");
    conv.add_input("w");
    conv.add_output("c");
    onnx::NodeProto &relu = *g.add_node();
    relu.set_name("relu1");
    relu.set_op_type("Relu");
    relu.add_input("c");
    relu.add_output("y");
    onnx::ValueInfoProto &y = *g.add_output();
    y.set_name("y");
    y.mutable_type()->mutable_tensor_type()->set_elem_type(onnx::TensorProto::FLOAT);
    for (int64_t d : {1, 16, 4, 4})
        y.mutable_type()->mutable_tensor_type()->mutable_shape()->add_dim()->set_dim_value(d);
    return m;
}

std::vector<uint8_t> bytes_of(const onnx::ModelProto &m) {
    const std::string s = m.SerializeAsString();
    return {s.begin(), s.end()};
}

// The message of the ModelError importing `m` throws, or "" when it imports.
std::string import_error(const onnx::ModelProto &m, const frontend::ImportOptions &options = {},
                         const std::string &path = "model.onnx") {
    try {
        frontend::import_onnx_bytes(bytes_of(m), path, options);
    } catch (const frontend::ModelError &e) {
        return e.what();
    }
    return "";
}

// Layers take their node's name; a graph output's layer takes the output's, so that results
// are named as the model names them.
TEST(OnnxImport, AModelImportsWithNodeNamesAsLayerNames) {
    const frontend::ImportedModel model =
        frontend::import_onnx_bytes(bytes_of(conv_model()), "conv.onnx");
    EXPECT_EQ(model.opset, 13);
    ASSERT_EQ(model.graph.outputs().size(), 1u);
    EXPECT_EQ(model.graph.outputs()[0].name(), "y"); // node 'relu1' computes output 'y'
    EXPECT_THROW(model.graph.find("relu1"), Error);
    EXPECT_EQ(model.output_names, std::vector<std::string>{"y"});
    EXPECT_EQ(model.graph.find("conv1").op(), "conv2d");
    EXPECT_EQ(model.graph.inputs().at(0).output().type, dsl::ElemType::F16);
}

TEST(OnnxImport, MalformedModelsAreErrorsNamingTheFile) {
    EXPECT_EQ(import_error(conv_model()), "");
    try {
        frontend::import_onnx_bytes({'n', 'o', 't', 0xff, 0x01}, "junk.onnx");
        FAIL() << "imported";
    } catch (const frontend::ModelError &e) {
        EXPECT_EQ(std::string(e.what()), "junk.onnx: not an ONNX model: the protobuf does not "
                                         "parse (truncated, or another format)");
    }
    // Every truncation and every single-byte change of a model is an error or a model, never
    // a crash.
    const std::vector<uint8_t> good = bytes_of(conv_model());
    for (size_t cut = 0; cut < good.size(); cut += 7) {
        try {
            frontend::import_onnx_bytes({good.begin(), good.begin() + long(cut)}, "cut.onnx");
        } catch (const frontend::ModelError &e) {
            EXPECT_EQ(std::string(e.what()).rfind("cut.onnx: ", 0), 0u) << e.what();
        }
    }
    for (size_t at = 0; at < std::min<size_t>(good.size(), 400); ++at) {
        std::vector<uint8_t> bad = good;
        bad[at] ^= uint8_t(0x5a + at);
        try {
            frontend::import_onnx_bytes(bad, "flipped.onnx");
        } catch (const frontend::ModelError &e) {
            EXPECT_EQ(std::string(e.what()).rfind("flipped.onnx: ", 0), 0u) << e.what();
        }
    }
}

TEST(OnnxImport, WhatCannotBeImportedIsNamed) {
    onnx::ModelProto op = conv_model();
    op.mutable_graph()->mutable_node(1)->set_op_type("RandomUniformLike");
    EXPECT_EQ(import_error(op), "model.onnx: node 'relu1' (RandomUniformLike): op "
                                "RandomUniformLike is not supported (docs/onnx.md lists the "
                                "supported ops)");

    onnx::ModelProto attr = conv_model();
    onnx::AttributeProto &a = *attr.mutable_graph()->mutable_node(0)->add_attribute();
    a.set_name("group");
    a.set_type(onnx::AttributeProto::INT);
    a.set_i(3);
    EXPECT_NE(import_error(attr).find("model.onnx: node 'conv1' (Conv): weights of 16 input "
                                      "channels per group x 3 groups"),
              std::string::npos)
        << import_error(attr);

    onnx::ModelProto dynamic = conv_model();
    dynamic.mutable_graph()
        ->mutable_input(0)
        ->mutable_type()
        ->mutable_tensor_type()
        ->mutable_shape()
        ->mutable_dim(0)
        ->set_dim_param("batch");
    EXPECT_EQ(import_error(dynamic),
              "model.onnx: graph input 'x': dimension 0 is 'batch', not a fixed extent; give the "
              "shape with --input-shape x=...");
    frontend::ImportOptions fixed;
    fixed.input_shapes["x"] = {1, 16, 6, 6};
    EXPECT_EQ(import_error(dynamic, fixed), "");
    fixed.input_shapes = {{"y", {1}}};
    EXPECT_EQ(import_error(dynamic, fixed),
              "model.onnx: input shape for 'y': the model has no such input (inputs: 'x')");

    onnx::ModelProto newer = conv_model();
    newer.mutable_opset_import(0)->set_version(18);
    EXPECT_EQ(import_error(newer),
              "model.onnx: opset 18 is not one of 1..17, the opsets ONNX 1.12 knows");

    onnx::ModelProto older = conv_model();
    older.mutable_opset_import(0)->set_version(9);
    frontend::ImportedModel upgraded = frontend::import_onnx_bytes(bytes_of(older), "old.onnx");
    EXPECT_EQ(upgraded.original_opset, 9);
    EXPECT_EQ(upgraded.opset, 13);
}

// A Concat of two float inputs of `shape` along axis 0, output 'y'.
onnx::ModelProto concat_model(const std::vector<int64_t> &shape) {
    onnx::ModelProto m;
    m.set_ir_version(8);
    m.add_opset_import()->set_version(13);
    onnx::GraphProto &g = *m.mutable_graph();
    g.set_name("concat");
    auto value = [&](onnx::ValueInfoProto &v, const std::string &name, int64_t first) {
        v.set_name(name);
        v.mutable_type()->mutable_tensor_type()->set_elem_type(onnx::TensorProto::FLOAT);
        for (size_t d = 0; d < shape.size(); ++d)
            v.mutable_type()->mutable_tensor_type()->mutable_shape()->add_dim()->set_dim_value(
                d == 0 ? first : shape[d]);
    };
    value(*g.add_input(), "a", shape[0]);
    value(*g.add_input(), "b", shape[0]);
    value(*g.add_output(), "y", 2 * shape[0]);
    onnx::NodeProto &concat = *g.add_node();
    concat.set_name("join");
    concat.set_op_type("Concat");
    concat.add_input("a");
    concat.add_input("b");
    concat.add_output("y");
    onnx::AttributeProto &axis = *concat.add_attribute();
    axis.set_name("axis");
    axis.set_type(onnx::AttributeProto::INT);
    axis.set_i(0);
    return m;
}

// Along axis 0 an op runs on a leading unit dimension, named after the node; where that
// cannot be (a 4-D input held NHWC, one of rank 8), the error names the node and the reason.
TEST(OnnxImport, AlongAxis0AnOpRunsOnALeadingUnitDimension) {
    const frontend::ImportedModel model =
        frontend::import_onnx_bytes(bytes_of(concat_model({2, 3, 5})), "concat.onnx");
    ASSERT_EQ(model.graph.outputs().size(), 1u);
    const dsl::Layer y = model.graph.outputs()[0];
    EXPECT_EQ(y.op(), "squeeze");
    EXPECT_EQ(dsl::to_string(y.output().shape), "4x3x5");
    const dsl::Layer inner = y.inputs().at(0);
    EXPECT_EQ(inner.op(), "concat");
    EXPECT_EQ(inner.name(), "join.unbatched");
    EXPECT_EQ(dsl::to_string(inner.output().shape), "1x4x3x5");
    EXPECT_EQ(import_error(concat_model({2, 3, 4, 5})),
              "model.onnx: node 'join' (Concat): unsqueeze 'join.a_unbatched': reshapes 2x3x4x5 to "
              "1x2x3x4x5, changing the batch (the first extent): on the device that is a view "
              "of the input's bytes, and 'a' is held NHWC, not in logical order");
    // Rank 5 gains its leading unit dimension as rank 6; rank 8 has no room for it.
    const frontend::ImportedModel five =
        frontend::import_onnx_bytes(bytes_of(concat_model({2, 3, 4, 5, 6})), "concat.onnx");
    EXPECT_EQ(dsl::to_string(five.graph.outputs()[0].output().shape), "4x3x4x5x6");
    EXPECT_EQ(dsl::to_string(five.graph.outputs()[0].inputs().at(0).output().shape), "1x4x3x4x5x6");
    const codegen::CheckResult r =
        codegen::check_against_reference(five.graph, target::load_target("vpu27"), {});
    EXPECT_TRUE(r.ok()) << r.report();
    EXPECT_EQ(import_error(concat_model({2, 3, 2, 3, 2, 3, 2, 3})),
              "model.onnx: node 'join' (Concat): unsqueeze 'join.a_unbatched': the output "
              "1x2x3x2x3x2x3x2x3 has rank 9; the device computes tensors of rank 0 to 8");
}

// External data is read only from files inside the model's directory.
TEST(OnnxImport, ExternalDataStaysInsideTheModelsDirectory) {
    const fs::path root = fs::temp_directory_path() / ("vpuc_onnx_" + std::to_string(::getpid()));
    fs::remove_all(root);
    fs::create_directories(root / "model");
    onnx::ModelProto m = conv_model();
    onnx::TensorProto &w = *m.mutable_graph()->mutable_initializer(0);
    std::string raw;
    for (float v : w.float_data()) raw.append(reinterpret_cast<const char *>(&v), sizeof v);
    w.clear_float_data();
    w.set_data_location(onnx::TensorProto::EXTERNAL);
    auto place = [&](const std::string &location, uint64_t offset) {
        w.clear_external_data();
        auto *entry = w.add_external_data();
        entry->set_key("location");
        entry->set_value(location);
        entry = w.add_external_data();
        entry->set_key("offset");
        entry->set_value(std::to_string(offset));
        const std::string bytes = m.SerializeAsString();
        std::ofstream(root / "model" / "m.onnx", std::ios::binary) << bytes;
        try {
            frontend::import_onnx((root / "model" / "m.onnx").string());
        } catch (const frontend::ModelError &e) {
            return std::string(e.what());
        }
        return std::string();
    };
    std::ofstream(root / "model" / "w.bin", std::ios::binary) << "pad!" << raw;
    std::ofstream(root / "secret.bin", std::ios::binary) << raw;
    fs::create_symlink(root / "secret.bin", root / "model" / "link.bin");
    EXPECT_EQ(place("w.bin", 4), "");
    const std::string prefix =
        (root / "model" / "m.onnx").string() + ": tensor 'w': external data: ";
    EXPECT_EQ(place("../secret.bin", 0),
              prefix + "location '../secret.bin' leaves the model's directory");
    EXPECT_EQ(place((root / "secret.bin").string(), 0),
              prefix + "location '" + (root / "secret.bin").string() +
                  "' is absolute; it must lie inside the model's directory");
    EXPECT_NE(place("link.bin", 0).find("', outside the model's directory"), std::string::npos);
    EXPECT_NE(place("w.bin", 8).find("run past the end of 'w.bin'"), std::string::npos);
    EXPECT_NE(place("missing.bin", 0).find("missing.bin"), std::string::npos);
    fs::remove_all(root);
}

} // namespace

namespace {

onnx::NodeProto &add_node(onnx::GraphProto &g, const std::string &op,
                          std::vector<std::string> inputs, const std::string &output) {
    onnx::NodeProto &n = *g.add_node();
    n.set_name(output);
    n.set_op_type(op);
    for (const std::string &in : inputs) n.add_input(in);
    n.add_output(output);
    return n;
}

// A flatten written as ONNX exporters write it: Reshape(x, Concat(Unsqueeze(Gather(Shape(x),
// 0)), [-1])). The shape arithmetic folds at compile time; only the conv and the reshape
// reach the device, and the result matches the reference.
TEST(OnnxImport, ShapeArithmeticFoldsAtCompileTime) {
    onnx::ModelProto m = conv_model();
    onnx::GraphProto &g = *m.mutable_graph();
    g.mutable_output(0)->set_name("flat");
    g.mutable_output(0)->mutable_type()->mutable_tensor_type()->clear_shape();
    for (int64_t d : {1, 256})
        g.mutable_output(0)
            ->mutable_type()
            ->mutable_tensor_type()
            ->mutable_shape()
            ->add_dim()
            ->set_dim_value(d);
    auto ints = [&](const std::string &name, std::vector<int64_t> values, bool scalar) {
        onnx::TensorProto &t = *g.add_initializer();
        t.set_name(name);
        t.set_data_type(onnx::TensorProto::INT64);
        if (!scalar) t.add_dims(int64_t(values.size()));
        for (int64_t v : values) t.add_int64_data(v);
    };
    ints("zero", {0}, true);
    ints("axes0", {0}, false);
    ints("minus_one", {-1}, false);
    add_node(g, "Shape", {"y"}, "shape");
    add_node(g, "Gather", {"shape", "zero"}, "batch");
    add_node(g, "Unsqueeze", {"batch", "axes0"}, "batch1");
    onnx::AttributeProto &axis =
        *add_node(g, "Concat", {"batch1", "minus_one"}, "target").add_attribute();
    axis.set_name("axis");
    axis.set_type(onnx::AttributeProto::INT);
    axis.set_i(0);
    add_node(g, "Reshape", {"y", "target"}, "flat");
    const frontend::ImportedModel model = frontend::import_onnx_bytes(bytes_of(m), "flat.onnx");
    std::vector<std::string> ops;
    for (const dsl::Layer &layer : model.graph.layers()) ops.push_back(layer.op());
    EXPECT_EQ(ops, (std::vector<std::string>{"conv2d", "relu", "reshape"}));
    EXPECT_EQ(model.graph.outputs().at(0).output().shape, dsl::Shape({1, 256}));
    codegen::CheckOptions check;
    check.tolerance.f16_ulp = 0;
    const codegen::CheckResult r =
        codegen::check_against_reference(model.graph, target::load_target("vpu27"), check);
    EXPECT_TRUE(r.ok()) << r.report();
}

// A graph output of `type` and `shape` (of rank 0: a scalar).
void add_output(onnx::GraphProto &g, const std::string &name, int32_t type,
                const std::vector<int64_t> &shape) {
    onnx::ValueInfoProto &y = *g.add_output();
    y.set_name(name);
    y.mutable_type()->mutable_tensor_type()->set_elem_type(type);
    y.mutable_type()->mutable_tensor_type()->mutable_shape();
    for (int64_t d : shape)
        y.mutable_type()->mutable_tensor_type()->mutable_shape()->add_dim()->set_dim_value(d);
}

// An int64 initializer of `values`, of one dimension (or none: a scalar).
void add_ints(onnx::GraphProto &g, const std::string &name, const std::vector<int64_t> &values,
              bool scalar = false) {
    onnx::TensorProto &t = *g.add_initializer();
    t.set_name(name);
    t.set_data_type(onnx::TensorProto::INT64);
    if (!scalar) t.add_dims(int64_t(values.size()));
    for (int64_t v : values) t.add_int64_data(v);
}

// A float graph input of `shape`.
void add_float_input(onnx::GraphProto &g, const std::string &name, std::vector<int64_t> shape) {
    onnx::ValueInfoProto &x = *g.add_input();
    x.set_name(name);
    x.mutable_type()->mutable_tensor_type()->set_elem_type(onnx::TensorProto::FLOAT);
    for (int64_t d : shape)
        x.mutable_type()->mutable_tensor_type()->mutable_shape()->add_dim()->set_dim_value(d);
}

// A model of opset 13 whose one output, float of `shape`, is named `output`; no nodes yet.
onnx::ModelProto graph_model(const std::string &output, std::vector<int64_t> shape) {
    onnx::ModelProto m;
    m.set_ir_version(8);
    m.add_opset_import()->set_version(13);
    onnx::GraphProto &g = *m.mutable_graph();
    g.set_name("g");
    onnx::ValueInfoProto &y = *g.add_output();
    y.set_name(output);
    y.mutable_type()->mutable_tensor_type()->set_elem_type(onnx::TensorProto::FLOAT);
    for (int64_t d : shape)
        y.mutable_type()->mutable_tensor_type()->mutable_shape()->add_dim()->set_dim_value(d);
    return m;
}

// An int64 graph input is i32 on the device, with a note saying so; the ops the ONNX tests
// give int64 data run on it, their values checked to fit when the blob runs.
TEST(OnnxImport, AnInt64GraphInputIsI32OnTheDevice) {
    onnx::ModelProto m = graph_model("y", {2, 3});
    onnx::GraphProto &g = *m.mutable_graph();
    m.mutable_graph()->mutable_output(0)->mutable_type()->mutable_tensor_type()->set_elem_type(
        onnx::TensorProto::INT64);
    for (const char *name : {"a", "b"}) {
        add_float_input(g, name, {2, 3});
        g.mutable_input(g.input_size() - 1)
            ->mutable_type()
            ->mutable_tensor_type()
            ->set_elem_type(onnx::TensorProto::INT64);
    }
    add_node(g, "Max", {"a", "b"}, "y");
    const frontend::ImportedModel model = frontend::import_onnx_bytes(bytes_of(m), "max.onnx");
    EXPECT_EQ(model.graph.inputs().at(0).output().type, dsl::ElemType::I32);
    EXPECT_NE(std::find(model.notes.begin(), model.notes.end(),
                        "graph input 'a' is i64 in the model and i32 on the device (each value "
                        "must fit; integer arithmetic wraps at 32 bits)"),
              model.notes.end());
    for (const char *test : {"test_max_int64", "test_min_int64", "test_tril", "test_triu_one_row",
                             "test_mod_mixed_sign_int64", "test_where_long_example"})
        vpuc::testing::expect_node_test_passes(test);
}

// A node of domain "vpuc" is the registry's layer of its op_type, attributes by name: a layer
// ONNX has no op for needs no importer of its own.
TEST(OnnxImport, ANodeOfTheVpucDomainIsARegistryLayer) {
    auto model = [](const std::string &op, const std::function<void(onnx::NodeProto &)> &edit) {
        onnx::ModelProto m = graph_model("y", {1, 5, 3, 7});
        onnx::OperatorSetIdProto &domain = *m.add_opset_import();
        domain.set_domain(frontend::kRegistryDomain);
        domain.set_version(1);
        onnx::GraphProto &g = *m.mutable_graph();
        add_float_input(g, "x", {1, 5, 3, 7});
        onnx::NodeProto &node = add_node(g, op, {"x"}, "y");
        node.set_domain(frontend::kRegistryDomain);
        edit(node);
        return m;
    };
    const auto alpha = [](onnx::NodeProto &node) {
        onnx::AttributeProto &a = *node.add_attribute();
        a.set_name("alpha");
        a.set_type(onnx::AttributeProto::FLOAT);
        a.set_f(0.375f);
    };
    const frontend::ImportedModel imported =
        frontend::import_onnx_bytes(bytes_of(model("hard_sigmoid", alpha)), "gate.onnx");
    const dsl::Layer &gate = imported.graph.outputs().at(0);
    EXPECT_EQ(gate.op(), "hard_sigmoid");
    EXPECT_EQ(gate.attrs().get_float("alpha"), 0.375);
    EXPECT_EQ(gate.attrs().get_float("beta"), 0.5); // the registry's default
    const codegen::CheckResult r =
        codegen::check_against_reference(imported.graph, target::load_target("vpu27"));
    EXPECT_TRUE(r.ok()) << r.report();

    EXPECT_EQ(import_error(model("no_such_layer", [](onnx::NodeProto &) {})),
              "model.onnx: node 'y' (no_such_layer): op no_such_layer is no layer of the "
              "registry (`vpuc layers` lists them)");
    const std::string wrong_type = import_error(model("hard_sigmoid", [](onnx::NodeProto &node) {
        onnx::AttributeProto &a = *node.add_attribute();
        a.set_name("alpha");
        a.set_type(onnx::AttributeProto::STRING);
        a.set_s("steep");
    }));
    EXPECT_NE(wrong_type.find("node 'y' (hard_sigmoid)"), std::string::npos) << wrong_type;
    EXPECT_NE(wrong_type.find("alpha"), std::string::npos) << wrong_type;
    onnx::ModelProto other = model("hard_sigmoid", alpha);
    other.mutable_graph()->mutable_node(0)->set_domain("com.example");
    other.mutable_opset_import(1)->set_domain("com.example");
    EXPECT_EQ(import_error(other), "model.onnx: node 'y' (hard_sigmoid): domain 'com.example' is "
                                   "not supported (only ONNX's, and 'vpuc' for layers of the "
                                   "registry)");
}

// Gemm adds a C it cannot fold into the matmul's bias after it: a computed C (times beta) by
// an add, a constant one varying along the rows (images) by constant_eltwise on a leading unit
// dimension.
TEST(OnnxImport, GemmAddsABiasOfRowsAfterTheMatmul) {
    auto gemm = [](bool constant_c, std::vector<int64_t> c_shape) {
        onnx::ModelProto m = graph_model("y", {3, 4});
        onnx::GraphProto &g = *m.mutable_graph();
        add_float_input(g, "a", {3, 5});
        onnx::TensorProto &b = *g.add_initializer();
        b.set_name("b");
        b.set_data_type(onnx::TensorProto::FLOAT);
        for (int64_t d : {5, 4}) b.add_dims(d);
        for (int i = 0; i < 20; ++i) b.add_float_data(float(i % 7 - 3) / 8);
        if (constant_c) {
            onnx::TensorProto &c = *g.add_initializer();
            c.set_name("c");
            c.set_data_type(onnx::TensorProto::FLOAT);
            int64_t count = 1;
            for (int64_t d : c_shape) c.add_dims(d), count *= d;
            for (int64_t i = 0; i < count; ++i) c.add_float_data(0.25f * float(i));
        } else {
            add_float_input(g, "c", c_shape);
        }
        onnx::AttributeProto &beta = *add_node(g, "Gemm", {"a", "b", "c"}, "y").add_attribute();
        beta.set_name("beta");
        beta.set_type(onnx::AttributeProto::FLOAT);
        beta.set_f(0.5f);
        return m;
    };
    const frontend::ImportedModel computed =
        frontend::import_onnx_bytes(bytes_of(gemm(false, {3, 4})), "gemm.onnx");
    std::vector<std::string> layers;
    for (const dsl::Layer &layer : computed.graph.layers())
        layers.push_back(layer.op() + " " + layer.name());
    EXPECT_EQ(layers,
              (std::vector<std::string>{"matmul y.matmul", "constant_eltwise y.beta", "add y"}));
    const codegen::CheckResult r =
        codegen::check_against_reference(computed.graph, target::load_target("vpu27"), {});
    EXPECT_TRUE(r.ok()) << r.report();
    // A constant [3, 1] or [3, 4] varies along the rows, the batch: added on a leading unit
    // dimension.
    for (const std::vector<int64_t> &rows : {std::vector<int64_t>{3, 1}, {3, 4}}) {
        const frontend::ImportedModel constant =
            frontend::import_onnx_bytes(bytes_of(gemm(true, rows)), "gemm.onnx");
        layers.clear();
        for (const dsl::Layer &layer : constant.graph.layers())
            layers.push_back(layer.op() + " " + layer.name());
        EXPECT_EQ(layers,
                  (std::vector<std::string>{"matmul y.matmul", "unsqueeze y.y.matmul_unbatched",
                                            "constant_eltwise y.unbatched", "squeeze y"}));
        const codegen::CheckResult checked =
            codegen::check_against_reference(constant.graph, target::load_target("vpu27"), {});
        EXPECT_TRUE(checked.ok()) << checked.report();
    }
    EXPECT_NE(import_error(gemm(true, {2, 4}))
                  .find("the bias C 2x4 does not broadcast to the "
                        "output [3, 4]"),
              std::string::npos)
        << import_error(gemm(true, {2, 4}));
    EXPECT_EQ(import_error(gemm(true, {1, 4})), "");
}

// Max, Min and Sum of more than two inputs chain two-input layers, the last named after the
// node; Mean divides their sum; a constant among more than two inputs is refused.
TEST(OnnxImport, OpsOfSeveralInputsChainTwoInputLayers) {
    for (const std::string op : {"Max", "Min", "Sum", "Mean"}) {
        onnx::ModelProto m = graph_model("y", {1, 3, 5, 7});
        onnx::GraphProto &g = *m.mutable_graph();
        for (const char *in : {"a", "b", "c", "d"}) add_float_input(g, in, {1, 3, 5, 7});
        add_node(g, op, {"a", "b", "c", "d"}, "y");
        const frontend::ImportedModel model =
            frontend::import_onnx_bytes(bytes_of(m), op + ".onnx");
        std::vector<std::string> layers;
        for (const dsl::Layer &layer : model.graph.layers())
            layers.push_back(layer.op() + " " + layer.name());
        const std::string two = op == "Max" ? "max" : op == "Min" ? "min" : "add";
        if (op == "Mean")
            EXPECT_EQ(layers, (std::vector<std::string>{"add y.1", "add y.2", "add y.sum",
                                                        "constant_eltwise y"}));
        else
            EXPECT_EQ(layers, (std::vector<std::string>{two + " y.1", two + " y.2", two + " y"}));
    }
    onnx::ModelProto constant = graph_model("y", {1, 3});
    onnx::GraphProto &g = *constant.mutable_graph();
    for (const char *in : {"a", "b"}) add_float_input(g, in, {1, 3});
    onnx::TensorProto &k = *g.add_initializer();
    k.set_name("k");
    k.set_data_type(onnx::TensorProto::FLOAT);
    k.add_float_data(1.5f);
    add_node(g, "Max", {"a", "b", "k"}, "y");
    EXPECT_EQ(import_error(constant),
              "model.onnx: node 'y' (Max): input 2 is a constant; a chain of more than two "
              "inputs (or a Mean) takes computed tensors only");
}

// A float initializer of `shape` whose element i (row-major) is `value(i)`.
void add_float_initializer(onnx::GraphProto &g, const std::string &name,
                           const std::vector<int64_t> &shape,
                           const std::function<float(int64_t)> &value) {
    onnx::TensorProto &t = *g.add_initializer();
    t.set_name(name);
    t.set_data_type(onnx::TensorProto::FLOAT);
    int64_t count = 1;
    for (int64_t d : shape) t.add_dims(d), count *= d;
    for (int64_t i = 0; i < count; ++i) t.add_float_data(value(i));
}

// Graph tensors have ranks 1 to 8, as .npy files and blobs: an input or an initializer of
// rank 9 is an error naming it.
TEST(OnnxImport, GraphTensorsHaveRanksUpTo8) {
    onnx::ModelProto nine = graph_model("y", {1, 2, 1, 2, 1, 2, 1, 2, 3});
    add_float_input(*nine.mutable_graph(), "x", {1, 2, 1, 2, 1, 2, 1, 2, 3});
    add_node(*nine.mutable_graph(), "Relu", {"x"}, "y");
    EXPECT_EQ(import_error(nine),
              "model.onnx: graph input 'x': rank 9 (graph inputs have ranks 1 to 8)");
    onnx::ModelProto nine_constant = graph_model("y", {1, 2, 1, 2, 1, 2, 1, 2, 3});
    add_float_initializer(*nine_constant.mutable_graph(), "k", {1, 2, 1, 2, 1, 2, 1, 2, 3},
                          [](int64_t i) { return float(i); });
    add_node(*nine_constant.mutable_graph(), "Relu", {"k"}, "y");
    EXPECT_NE(import_error(nine_constant).find("rank 9 (graph tensors have ranks up to 8)"),
              std::string::npos)
        << import_error(nine_constant);
}

// Gather along axis 0, Gemm with transA and an eltwise op by a constant varying along axis 0
// run on a leading unit dimension, named after the node (a Gather of data of rank 3 or more
// on its rows [N, rest], also held NHWC); the results match the reference.
TEST(OnnxImport, GatherGemmAndEltwiseAlongAxis0RunOnALeadingUnitDimension) {
    auto gather = [](const std::vector<int64_t> &data, const std::vector<int64_t> &indices_shape,
                     const std::vector<int64_t> &indices, const std::vector<int64_t> &out) {
        onnx::ModelProto m = graph_model("y", out);
        onnx::GraphProto &g = *m.mutable_graph();
        add_float_input(g, "a", data);
        onnx::TensorProto &k = *g.add_initializer();
        k.set_name("k");
        k.set_data_type(onnx::TensorProto::INT64);
        for (int64_t d : indices_shape) k.add_dims(d);
        for (int64_t i : indices) k.add_int64_data(i);
        add_node(g, "Gather", {"a", "k"}, "y");
        return m;
    };
    onnx::ModelProto gemm = graph_model("y", {3, 4});
    add_float_input(*gemm.mutable_graph(), "a", {5, 3});
    add_float_initializer(*gemm.mutable_graph(), "b", {5, 4},
                          [](int64_t i) { return float(i % 7 - 3) / 8; });
    onnx::AttributeProto &trans_a =
        *add_node(*gemm.mutable_graph(), "Gemm", {"a", "b"}, "y").add_attribute();
    trans_a.set_name("transA");
    trans_a.set_type(onnx::AttributeProto::INT);
    trans_a.set_i(1);
    auto eltwise = [](const std::string &op, const std::vector<int64_t> &shape,
                      const std::vector<int64_t> &constant, bool constant_first) {
        onnx::ModelProto m = graph_model("y", shape);
        add_float_input(*m.mutable_graph(), "a", shape);
        add_float_initializer(*m.mutable_graph(), "k", constant,
                              [](int64_t i) { return 0.25f * float(i % 9) + 0.5f; });
        add_node(*m.mutable_graph(), op,
                 constant_first ? std::vector<std::string>{"k", "a"}
                                : std::vector<std::string>{"a", "k"},
                 "y");
        return m;
    };
    struct Case {
        std::string what;
        onnx::ModelProto model;
        std::vector<std::string> layers;
    };
    const Case cases[] = {
        {"gather of rank 2",
         gather({9, 4}, {3}, {8, -9, 4}, {3, 4}),
         {"unsqueeze y.a_unbatched 1x9x4", "gather y.unbatched 1x3x4", "squeeze y 3x4"}},
        {"gather of rank 4, held NHWC",
         gather({3, 5, 2, 3}, {2, 2}, {2, 0, -1, 1}, {2, 2, 5, 2, 3}),
         {"reshape y.rows 3x30", "unsqueeze y.picked.y.rows_unbatched 1x3x30",
          "gather y.picked.unbatched 1x2x2x30", "squeeze y.picked 2x2x30", "reshape y 2x2x5x2x3"}},
        {"gemm with transA",
         gemm,
         {"unsqueeze y.a_transposed.a_unbatched 1x5x3", "transpose y.a_transposed.unbatched 1x3x5",
          "squeeze y.a_transposed 3x5", "matmul y 3x4"}},
        {"div by a constant varying along axis 0",
         eltwise("Div", {3, 5, 7}, {3, 1, 7}, false),
         {"unsqueeze y.a_unbatched 1x3x5x7", "constant_eltwise y.unbatched 1x3x5x7",
          "squeeze y 3x5x7"}},
        {"a constant minus a tensor",
         eltwise("Sub", {4, 9}, {4, 1}, true),
         {"unsqueeze y.a_unbatched 1x4x9", "constant_eltwise y.unbatched 1x4x9", "squeeze y 4x9"}},
        {"mul of rank 5 by a constant varying along axis 0",
         eltwise("Mul", {2, 3, 2, 3, 5}, {2, 1, 1, 1, 5}, false),
         {"unsqueeze y.a_unbatched 1x2x3x2x3x5", "constant_eltwise y.unbatched 1x2x3x2x3x5",
          "squeeze y 2x3x2x3x5"}},
    };
    for (const Case &c : cases) {
        SCOPED_TRACE(c.what);
        const frontend::ImportedModel model =
            frontend::import_onnx_bytes(bytes_of(c.model), "model.onnx");
        std::vector<std::string> layers;
        for (const dsl::Layer &layer : model.graph.layers())
            layers.push_back(layer.op() + " " + layer.name() + " " +
                             dsl::to_string(layer.output().shape));
        EXPECT_EQ(layers, c.layers);
        const codegen::CheckResult r =
            codegen::check_against_reference(model.graph, target::load_target("vpu27"), {});
        EXPECT_TRUE(r.ok()) << r.report();
    }
    // A 4-D input held NHWC is not in logical order, and one of rank 8 has no room for the
    // leading unit dimension: errors naming the layer.
    EXPECT_EQ(import_error(eltwise("Div", {2, 3, 4, 5}, {2, 1, 1, 1}, false)),
              "model.onnx: node 'y' (Div): unsqueeze 'y.a_unbatched': reshapes 2x3x4x5 to "
              "1x2x3x4x5, changing the batch (the first extent): on the device that is a view "
              "of the input's bytes, and 'a' is held NHWC, not in logical order");
    EXPECT_EQ(
        import_error(eltwise("Mul", {2, 3, 1, 2, 1, 1, 3, 5}, {2, 1, 1, 1, 1, 1, 1, 5}, false)),
        "model.onnx: node 'y' (Mul): unsqueeze 'y.a_unbatched': the output "
        "1x2x3x1x2x1x1x3x5 has rank 9; the device computes tensors of rank 0 to 8");
}

// Opset-6 models whose Gemm or Add reads an intermediate value upgrade to opset 13: the
// version converter's adapters need its shape, inferred first.
TEST(OnnxImport, OldGemmAndAddOfIntermediateValuesUpgrade) {
    for (const char *test : {"test_operator_addmm", "test_operator_mm"}) {
        frontend::ConformanceOptions options;
        options.compile = [](const dsl::Graph &graph, const target::Target &target) {
            return codegen::lower(graph, target);
        };
        const frontend::ConformanceResult result = frontend::run_conformance_test(
            {std::string("pytorch-operator/") + test,
             std::string("/usr/share/libonnx-testdata/data/pytorch-operator/") + test},
            options);
        EXPECT_EQ(result.outcome, frontend::Outcome::Passed)
            << test << ": " << frontend::to_string(result.stage) << ": " << result.reason;
    }
}

// Dropout drops nothing in inference, nor in training with a ratio of 0: its output is its
// input and its mask all true, a constant output (u8 on the device). A ratio above 0 in training
// would draw random numbers: an error naming the node.
TEST(OnnxImport, DropoutWithoutDroppingPassesItsInputOnWithAMaskOfOnes) {
    auto model = [](float ratio) {
        onnx::ModelProto m = conv_model();
        onnx::GraphProto &g = *m.mutable_graph();
        onnx::TensorProto &r = *g.add_initializer();
        r.set_name("ratio");
        r.set_data_type(onnx::TensorProto::FLOAT);
        r.add_float_data(ratio);
        onnx::TensorProto &training = *g.add_initializer();
        training.set_name("training");
        training.set_data_type(onnx::TensorProto::BOOL);
        training.add_int32_data(1);
        add_node(g, "Dropout", {"y", "ratio", "training"}, "z").add_output("mask");
        g.mutable_output(0)->set_name("z");
        onnx::ValueInfoProto &mask = *g.add_output();
        mask.set_name("mask");
        mask.mutable_type()->mutable_tensor_type()->set_elem_type(onnx::TensorProto::BOOL);
        for (int64_t d : {1, 16, 4, 4})
            mask.mutable_type()->mutable_tensor_type()->mutable_shape()->add_dim()->set_dim_value(
                d);
        return m;
    };
    EXPECT_EQ(import_error(model(0.5f)),
              "model.onnx: node 'z' (Dropout): training mode with ratio 0.5 drops random "
              "elements, which is not supported (only ratio 0 is)");
    const frontend::ImportedModel imported =
        frontend::import_onnx_bytes(bytes_of(model(0)), "dropout.onnx");
    ASSERT_EQ(imported.graph.outputs().size(), 2u);
    EXPECT_EQ(imported.graph.outputs()[0].op(), "relu");
    const dsl::Layer &mask = imported.graph.outputs()[1];
    ASSERT_TRUE(dsl::is_constant(mask));
    EXPECT_EQ(mask.output().type, dsl::ElemType::U8);
    EXPECT_EQ(mask.output().shape, dsl::Shape({1, 16, 4, 4}));
    const dsl::ConstValues ones = dsl::const_values(mask);
    EXPECT_EQ(ones.ints, std::vector<int64_t>(256, 1));
    codegen::CheckOptions check;
    check.tolerance.f16_ulp = 0;
    const codegen::CheckResult r =
        codegen::check_against_reference(imported.graph, target::load_target("vpu27"), check);
    EXPECT_TRUE(r.ok()) << r.report();
    EXPECT_EQ(r.run.outputs.at(1), std::vector<uint8_t>(256, 1));
}

// Cast of a computed tensor to an integer type is the registry's cast (INT64 as i32, which holds
// every value a device tensor has); to bool it is an error naming the node.
TEST(OnnxImport, CastOfAComputedTensorToIntegers) {
    auto model = [](onnx::TensorProto::DataType to) {
        onnx::ModelProto m = conv_model();
        onnx::GraphProto &g = *m.mutable_graph();
        onnx::AttributeProto &a = *add_node(g, "Cast", {"y"}, "z").add_attribute();
        a.set_name("to");
        a.set_type(onnx::AttributeProto::INT);
        a.set_i(to);
        g.mutable_output(0)->set_name("z");
        g.mutable_output(0)->mutable_type()->mutable_tensor_type()->set_elem_type(to);
        return m;
    };
    EXPECT_EQ(import_error(model(onnx::TensorProto::BOOL)),
              "model.onnx: node 'z' (Cast): a cast of a computed tensor to bool is not supported");
    const frontend::ImportedModel imported =
        frontend::import_onnx_bytes(bytes_of(model(onnx::TensorProto::INT64)), "cast.onnx");
    const dsl::Layer &z = imported.graph.outputs().at(0);
    EXPECT_EQ(z.op(), "cast");
    EXPECT_EQ(z.output().type, dsl::ElemType::I32);
    codegen::CheckOptions check;
    check.tolerance.f16_ulp = 0;
    const codegen::CheckResult r =
        codegen::check_against_reference(imported.graph, target::load_target("vpu27"), check);
    EXPECT_TRUE(r.ok()) << r.report();
}

} // namespace

namespace {

// The Reduce ops, ArgMax and ArgMin keep the reduced axes with extent 1 (keepdims 1) or squeeze
// the kept result, NODE.kept (keepdims 0); along axis 0 they run on a leading unit dimension.
// A result of rank 0 is a scalar, one element on the device.
TEST(OnnxImport, ReductionsKeepOrSqueezeTheReducedAxes) {
    auto model = [](const std::string &op, const std::vector<int64_t> &shape,
                    const std::vector<int64_t> &axes, int64_t keepdims,
                    const std::vector<int64_t> &out) {
        onnx::ModelProto m = graph_model("y", out);
        onnx::GraphProto &g = *m.mutable_graph();
        const bool arg = op.rfind("Arg", 0) == 0;
        onnx::TypeProto::Tensor &y = *g.mutable_output(0)->mutable_type()->mutable_tensor_type();
        y.mutable_shape(); // of rank 0 when `out` is empty
        if (arg) y.set_elem_type(onnx::TensorProto::INT64);
        add_float_input(g, "a", shape);
        onnx::NodeProto &n = add_node(g, op, {"a"}, "y");
        onnx::AttributeProto &keep = *n.add_attribute();
        keep.set_name("keepdims");
        keep.set_type(onnx::AttributeProto::INT);
        keep.set_i(keepdims);
        onnx::AttributeProto &along = *n.add_attribute();
        along.set_name(arg ? "axis" : "axes");
        along.set_type(arg ? onnx::AttributeProto::INT : onnx::AttributeProto::INTS);
        if (arg)
            along.set_i(axes.at(0));
        else
            for (int64_t axis : axes) along.add_ints(axis);
        return m;
    };
    struct Case {
        std::string what;
        onnx::ModelProto model;
        std::vector<std::string> layers;
    };
    const Case cases[] = {
        {"a mean over the last axis, kept",
         model("ReduceMean", {3, 5, 7}, {2}, 1, {3, 5, 1}),
         {"reduce y 3x5x1"}},
        {"an L2 norm over axes 0 and -1, not kept",
         model("ReduceL2", {3, 5, 7}, {0, -1}, 0, {5}),
         {"unsqueeze y.kept.a_unbatched 1x3x5x7", "reduce y.kept.unbatched 1x1x5x1",
          "squeeze y.kept 1x5x1", "squeeze y 5"}},
        {"an argmax, not kept",
         model("ArgMax", {4, 9}, {1}, 0, {4}),
         {"argmax y.kept 4x1", "squeeze y 4"}},
        {"an argmin along axis 0, kept",
         model("ArgMin", {4, 9}, {0}, 1, {1, 9}),
         {"unsqueeze y.a_unbatched 1x4x9", "argmin y.unbatched 1x1x9", "squeeze y 1x9"}},
        {"a maximum over every axis, not kept: a scalar",
         model("ReduceMax", {3, 5}, {0, 1}, 0, {}),
         {"unsqueeze y.kept.a_unbatched 1x3x5", "reduce y.kept.unbatched 1x1x1",
          "squeeze y.kept 1x1", "squeeze y scalar"}},
        {"an argmax of a vector, not kept: a scalar",
         model("ArgMax", {11}, {0}, 0, {}),
         {"argmax y.kept 1", "squeeze y scalar"}},
    };
    for (const Case &c : cases) {
        SCOPED_TRACE(c.what);
        const frontend::ImportedModel imported =
            frontend::import_onnx_bytes(bytes_of(c.model), "model.onnx");
        std::vector<std::string> layers;
        for (const dsl::Layer &layer : imported.graph.layers())
            layers.push_back(layer.op() + " " + layer.name() + " " +
                             dsl::to_string(layer.output().shape));
        EXPECT_EQ(layers, c.layers);
        const codegen::CheckResult r =
            codegen::check_against_reference(imported.graph, target::load_target("vpu27"), {});
        EXPECT_TRUE(r.ok()) << r.report();
    }
}

} // namespace

namespace {

// Before opset 13 LogSoftmax and Hardmax took the input as a matrix, the axes before `axis`
// its rows and the rest its columns; the version converter's upgrade keeps that meaning. Of a
// [2, 3, 4] input along axis 1 each image's 12 elements are one row.
TEST(OnnxImport, OldLogSoftmaxAndHardmaxTakeTheInputAsAMatrix) {
    for (const std::string op : {"LogSoftmax", "Hardmax"}) {
        SCOPED_TRACE(op);
        onnx::ModelProto m = graph_model("y", {2, 3, 4});
        m.mutable_opset_import(0)->set_version(11);
        add_float_input(*m.mutable_graph(), "a", {2, 3, 4});
        onnx::AttributeProto &axis = *add_node(*m.mutable_graph(), op, {"a"}, "y").add_attribute();
        axis.set_name("axis");
        axis.set_type(onnx::AttributeProto::INT);
        axis.set_i(1);
        const frontend::ImportedModel imported =
            frontend::import_onnx_bytes(bytes_of(m), "model.onnx");
        ASSERT_EQ(imported.graph.inputs().size(), 1u);
        if (op == "Hardmax") {
            const dsl::Layer &y = imported.graph.outputs().at(0);
            EXPECT_EQ(y.op(), "reshape");
            const dsl::Layer &rows = y.inputs().at(0);
            EXPECT_EQ(rows.op() + " " + rows.name() + " " + dsl::to_string(rows.output().shape),
                      "hardmax y.hardmax 2x12");
            EXPECT_EQ(rows.inputs().at(0).op() + " " + rows.inputs().at(0).name(),
                      "flatten y.rows");
        }
        Halide::Buffer<Halide::float16_t> x(
            algorithms::make_buffer(imported.graph.inputs()[0].output()));
        ASSERT_EQ(x.dimensions(), 4); // (c, x, y, n): C 3, W 4, one row, 2 images
        // Distinct values, the largest of each image in a different place.
        x.for_each_element([&](int c, int w, int h, int n) {
            x(c, w, h, n) = Halide::float16_t(float((c * 4 + w) * (n ? -1 : 1)) / 8);
        });
        const Halide::Buffer<Halide::float16_t> y(
            algorithms::run_reference(imported.graph, {x}).at(0));
        for (int n = 0; n < 2; ++n) {
            double top = -INFINITY, sum = 0;
            for (int c = 0; c < 3; ++c)
                for (int w = 0; w < 4; ++w) top = std::max(top, double(x(c, w, 0, n)));
            for (int c = 0; c < 3; ++c)
                for (int w = 0; w < 4; ++w) sum += std::exp(double(x(c, w, 0, n)) - top);
            for (int c = 0; c < 3; ++c)
                for (int w = 0; w < 4; ++w) {
                    const double v = double(x(c, w, 0, n));
                    const double want =
                        op == "Hardmax" ? (v == top ? 1 : 0) : v - top - std::log(sum);
                    EXPECT_NEAR(double(y(c, w, 0, n)), want, 2e-3)
                        << "image " << n << " at " << c << "," << w;
                }
        }
    }
}

} // namespace

namespace {

// ---- Element types the device does not have: int16, uint16, uint32 and uint64 as i64 in the
// graph (i32 on the device), bfloat16 as f32 ----

// A tensor of ONNX type `type` and `dims` whose raw_data holds `elements` (of that type's C
// type, little-endian).
template <typename T>
onnx::TensorProto raw_tensor(const std::string &name, int32_t type, std::vector<int64_t> dims,
                             const std::vector<T> &elements) {
    onnx::TensorProto t;
    t.set_name(name);
    t.set_data_type(type);
    for (int64_t d : dims) t.add_dims(d);
    t.set_raw_data(
        std::string(reinterpret_cast<const char *>(elements.data()), elements.size() * sizeof(T)));
    return t;
}

std::vector<int64_t> int64_values(const Halide::Buffer<> &value) {
    EXPECT_EQ(value.type(), Halide::Int(64));
    const Halide::Buffer<int64_t> v(value);
    return {v.data(), v.data() + v.number_of_elements()};
}

std::string tensor_value_error(const onnx::TensorProto &t) {
    try {
        frontend::detail::tensor_value(t, "'" + t.name() + "'");
    } catch (const frontend::ModelError &e) {
        return e.what();
    }
    return "";
}

// Every value of the 16-bit and unsigned 32-bit types fits the graph's i64, in raw_data and in
// the typed fields ONNX stores them in; a uint64 above 2^63 - 1 does not, and is an error
// naming the tensor and the element.
TEST(OnnxTypes, NarrowAndUnsignedIntegersAreI64InTheGraph) {
    using onnx::TensorProto;
    EXPECT_EQ(int64_values(frontend::detail::tensor_value(
                  raw_tensor<uint16_t>("u", TensorProto::UINT16, {3}, {0, 65535, 32768}), "u")),
              (std::vector<int64_t>{0, 65535, 32768}));
    EXPECT_EQ(
        int64_values(frontend::detail::tensor_value(
            raw_tensor<int16_t>("i", TensorProto::INT16, {2, 2}, {-32768, -1, 0, 32767}), "i")),
        (std::vector<int64_t>{-32768, -1, 0, 32767}));
    EXPECT_EQ(int64_values(frontend::detail::tensor_value(
                  raw_tensor<uint32_t>("w", TensorProto::UINT32, {3},
                                       {2147483647u, 2147483648u, 4294967295u}),
                  "w")),
              (std::vector<int64_t>{2147483647, 2147483648, 4294967295}));
    const uint64_t int64_max = uint64_t(std::numeric_limits<int64_t>::max());
    EXPECT_EQ(int64_values(frontend::detail::tensor_value(
                  raw_tensor<uint64_t>("q", TensorProto::UINT64, {2}, {int64_max, 7}), "q")),
              (std::vector<int64_t>{std::numeric_limits<int64_t>::max(), 7}));

    // The typed fields: int32_data for the 16-bit types, uint64_data for the unsigned 32- and
    // 64-bit ones, each value in its type's range.
    TensorProto typed;
    typed.set_name("typed");
    typed.set_data_type(TensorProto::INT16);
    typed.add_dims(2);
    typed.add_int32_data(-300);
    typed.add_int32_data(32767);
    EXPECT_EQ(int64_values(frontend::detail::tensor_value(typed, "typed")),
              (std::vector<int64_t>{-300, 32767}));
    typed.set_int32_data(0, 32768);
    EXPECT_EQ(tensor_value_error(typed), "'typed': int32_data holds 32768, outside the range of "
                                         "INT16");
    typed.clear_int32_data();
    typed.set_data_type(TensorProto::UINT32);
    typed.add_uint64_data(4294967295u);
    typed.add_uint64_data(4294967296u);
    EXPECT_EQ(tensor_value_error(typed), "'typed': uint64_data holds 4294967296, outside the "
                                         "range of UINT32");
    typed.set_data_type(TensorProto::UINT64);
    EXPECT_EQ(int64_values(frontend::detail::tensor_value(typed, "typed")),
              (std::vector<int64_t>{4294967295, 4294967296}));

    EXPECT_EQ(tensor_value_error(
                  raw_tensor<uint64_t>("big", TensorProto::UINT64, {3}, {1, int64_max + 1, 2})),
              "'big': element 1 (9223372036854775808) is above 2^63 - 1: graph tensors hold "
              "uint64 values as i64");
    // An initializer above it is refused when the model is imported, naming the initializer.
    onnx::ModelProto m = graph_model("y", {3});
    m.mutable_graph()->mutable_output(0)->mutable_type()->mutable_tensor_type()->set_elem_type(
        TensorProto::UINT64);
    *m.mutable_graph()->add_initializer() =
        raw_tensor<uint64_t>("big", TensorProto::UINT64, {3}, {1, 2, ~uint64_t(0)});
    add_node(*m.mutable_graph(), "Identity", {"big"}, "y");
    EXPECT_EQ(import_error(m), "model.onnx: initializer 'big': element 2 (18446744073709551615) "
                               "is above 2^63 - 1: graph tensors hold uint64 values as i64");
}

// A bfloat16 is the high half of the bits of the float32 of its value: f32 holds each exactly.
TEST(OnnxTypes, Bfloat16IsF32InTheGraph) {
    // 1, -3.140625, the smallest normal, the largest finite, infinity, NaN.
    const std::vector<uint16_t> bits = {0x3f80, 0xc049, 0x0080, 0x7f7f, 0x7f80, 0x7fc0};
    for (bool raw : {true, false}) {
        onnx::TensorProto t = raw_tensor<uint16_t>("b", onnx::TensorProto::BFLOAT16, {6}, bits);
        if (!raw) {
            t.clear_raw_data();
            for (uint16_t b : bits) t.add_int32_data(b);
        }
        const Halide::Buffer<float> value(frontend::detail::tensor_value(t, "b"));
        EXPECT_EQ(value(0), 1.0f);
        EXPECT_EQ(value(1), -3.140625f);
        EXPECT_EQ(value(2), std::ldexp(1.0f, -126));
        EXPECT_EQ(value(3), 0x1.fep127f);
        EXPECT_EQ(value(4), INFINITY);
        EXPECT_TRUE(std::isnan(value(5)));
    }
}

// A model of `op` over graph inputs named a, b, ... of ONNX type `input_type` and shape
// [count], its output y of `output_type`.
onnx::ModelProto typed_model(const std::string &op, size_t inputs, int32_t input_type,
                             int32_t output_type, int64_t count) {
    onnx::ModelProto m = graph_model("y", {count});
    m.mutable_graph()->mutable_output(0)->mutable_type()->mutable_tensor_type()->set_elem_type(
        output_type);
    std::vector<std::string> names;
    for (size_t i = 0; i < inputs; ++i) {
        names.push_back(std::string(1, char('a' + i)));
        add_float_input(*m.mutable_graph(), names.back(), {count});
        m.mutable_graph()
            ->mutable_input(int(i))
            ->mutable_type()
            ->mutable_tensor_type()
            ->set_elem_type(input_type);
    }
    add_node(*m.mutable_graph(), op, names, "y");
    return m;
}

// `model` compiled, run on the simulator with `inputs` (named a, b, ...), its output read in
// the model's type.
Halide::Buffer<> run_typed(const frontend::ImportedModel &model,
                           const std::vector<Halide::Buffer<>> &inputs) {
    const target::Target target = target::load_target("vpu27");
    sim::Simulator simulator(target, codegen::lower(model.graph, target));
    std::vector<frontend::NamedTensor> named;
    for (size_t i = 0; i < inputs.size(); ++i)
        named.push_back({std::string(1, char('a' + i)), inputs[i]});
    const auto outputs = frontend::blob_outputs(
        simulator.blob(), simulator.run(frontend::blob_inputs(simulator.blob(), named)).outputs);
    return frontend::output_in_type(outputs.at(0), model.output_types.at(0));
}

template <typename T> Halide::Buffer<> buffer(const std::vector<T> &values) {
    Halide::Buffer<T> b(int(values.size()));
    for (size_t i = 0; i < values.size(); ++i) b(int(i)) = values[i];
    return b;
}

template <typename T> std::vector<T> elements(const Halide::Buffer<> &value) {
    EXPECT_EQ(value.type(), Halide::type_of<T>());
    const Halide::Buffer<T> v(value);
    return {v.data(), v.data() + v.number_of_elements()};
}

std::string error_text(const std::function<void()> &f) {
    try {
        f();
    } catch (const Error &e) {
        return e.what();
    }
    return "";
}

// Max, Min and Mod of uint32, uint16 and int16 inputs run in i32 on the device and give the
// model's answers, read in the model's type; an input value i32 does not hold is an error
// naming the input and the element.
TEST(OnnxTypes, NarrowAndUnsignedIntegersRunInI32) {
    using onnx::TensorProto;
    const frontend::ImportedModel max32 = frontend::import_onnx_bytes(
        bytes_of(typed_model("Max", 2, TensorProto::UINT32, TensorProto::UINT32, 5)), "m.onnx");
    EXPECT_EQ(max32.graph.inputs().at(0).output().type, dsl::ElemType::I32);
    EXPECT_EQ(max32.output_types.at(0), Halide::UInt(32));
    EXPECT_NE(std::find(max32.notes.begin(), max32.notes.end(),
                        "graph input 'a' is u32 in the model and i32 on the device (each value "
                        "must fit; integer arithmetic wraps at 32 bits)"),
              max32.notes.end());
    EXPECT_NE(std::find(max32.notes.begin(), max32.notes.end(),
                        "graph output 'y' is u32 in the model and i32 on the device (read in the "
                        "model's type, each value must fit)"),
              max32.notes.end());
    const std::vector<uint32_t> a = {2147483647u, 2147483646u, 0, 5, 1u << 30},
                                b = {2147483646u, 2147483647u, 1, 5, 3};
    EXPECT_EQ(elements<uint32_t>(run_typed(max32, {buffer(a), buffer(b)})),
              (std::vector<uint32_t>{2147483647u, 2147483647u, 1, 5, 1u << 30}));
    EXPECT_EQ(
        error_text([&] {
            run_typed(max32, {buffer(std::vector<uint32_t>{1, 2147483648u, 0, 0, 0}), buffer(b)});
        }),
        "input 'a': element [1] is 2147483648, which is not exact in i32");

    const frontend::ImportedModel mod16 = frontend::import_onnx_bytes(
        bytes_of(typed_model("Mod", 2, TensorProto::UINT16, TensorProto::UINT16, 7)), "m.onnx");
    EXPECT_EQ(elements<uint16_t>(run_typed(
                  mod16, {buffer(std::vector<uint16_t>{65535, 65534, 7, 0, 1000, 65535, 12}),
                          buffer(std::vector<uint16_t>{2, 65535, 3, 9, 7, 65535, 5})})),
              (std::vector<uint16_t>{1, 65534, 1, 0, 6, 0, 2}));

    const frontend::ImportedModel min16 = frontend::import_onnx_bytes(
        bytes_of(typed_model("Min", 2, TensorProto::INT16, TensorProto::INT16, 5)), "m.onnx");
    EXPECT_EQ(elements<int16_t>(
                  run_typed(min16, {buffer(std::vector<int16_t>{-32768, -5, 7, 32767, -1}),
                                    buffer(std::vector<int16_t>{32767, -6, -7, 32766, 0})})),
              (std::vector<int16_t>{-32768, -6, -7, 32766, -1}));
    const frontend::ImportedModel mod_signed = frontend::import_onnx_bytes(
        bytes_of(typed_model("Mod", 2, TensorProto::INT16, TensorProto::INT16, 4)), "m.onnx");
    // The divisor's sign, as numpy's remainder.
    EXPECT_EQ(
        elements<int16_t>(run_typed(mod_signed, {buffer(std::vector<int16_t>{-32768, 7, -7, 32767}),
                                                 buffer(std::vector<int16_t>{3, -3, 3, -32768})})),
        (std::vector<int16_t>{1, -2, 2, -1}));
}

// BitShift shifts at the width of the model's unsigned type: a uint16 left shift drops the
// bits past 16, a shift by the width or more gives 0; a uint32 result of 2^31 or more, which
// the device's i32 holds as negative, is an error naming the output where it is read.
TEST(OnnxTypes, BitShiftAtTheWidthOfTheModelsType) {
    using onnx::TensorProto;
    auto model = [](int32_t type, const std::string &direction) {
        onnx::ModelProto m = typed_model("BitShift", 2, type, type, 5);
        onnx::AttributeProto &d = *m.mutable_graph()->mutable_node(0)->add_attribute();
        d.set_name("direction");
        d.set_type(onnx::AttributeProto::STRING);
        d.set_s(direction);
        return frontend::import_onnx_bytes(bytes_of(m), "m.onnx");
    };
    EXPECT_EQ(elements<uint16_t>(run_typed(model(TensorProto::UINT16, "LEFT"),
                                           {buffer(std::vector<uint16_t>{65535, 0x8001, 1, 3, 5}),
                                            buffer(std::vector<uint16_t>{1, 1, 15, 16, 0})})),
              (std::vector<uint16_t>{65534, 2, 32768, 0, 5}));
    EXPECT_EQ(
        elements<uint16_t>(run_typed(model(TensorProto::UINT16, "RIGHT"),
                                     {buffer(std::vector<uint16_t>{65535, 0x8001, 1, 3, 40000}),
                                      buffer(std::vector<uint16_t>{1, 15, 0, 16, 3})})),
        (std::vector<uint16_t>{32767, 1, 1, 0, 5000}));
    const frontend::ImportedModel left32 = model(TensorProto::UINT32, "LEFT");
    EXPECT_EQ(
        elements<uint32_t>(run_typed(left32, {buffer(std::vector<uint32_t>{1, 3, 0x3fffffff, 7, 1}),
                                              buffer(std::vector<uint32_t>{30, 29, 1, 32, 0})})),
        (std::vector<uint32_t>{1u << 30, 3u << 29, 0x7ffffffe, 0, 1}));
    EXPECT_EQ(error_text([&] {
                  run_typed(left32, {buffer(std::vector<uint32_t>{1, 3, 0x40000000, 7, 1}),
                                     buffer(std::vector<uint32_t>{30, 29, 1, 32, 0})});
              }),
              "output 'y': element [2] is -2147483648, which is not exact in u32");
    EXPECT_EQ(elements<uint64_t>(
                  run_typed(model(TensorProto::UINT64, "RIGHT"),
                            {buffer(std::vector<uint64_t>{2147483647, 8, 2147483647, 1, 6}),
                             buffer(std::vector<uint64_t>{31, 40, 1, 63, 1})})),
              (std::vector<uint64_t>{0, 0, 1073741823, 0, 3}));
    const frontend::ImportedModel left64 = model(TensorProto::UINT64, "LEFT");
    EXPECT_EQ(
        elements<uint64_t>(run_typed(left64, {buffer(std::vector<uint64_t>{1, 8, 3, 1, 6}),
                                              buffer(std::vector<uint64_t>{30, 27, 1, 64, 0})})),
        (std::vector<uint64_t>{1u << 30, 1u << 30, 6, 0, 6}));
    // 8 << 40 is a u64 the device's i32 cannot hold: an error, not its low 32 bits (0).
    EXPECT_EQ(error_text([&] {
                  run_typed(left64, {buffer(std::vector<uint64_t>{1, 8, 3, 1, 6}),
                                     buffer(std::vector<uint64_t>{30, 40, 1, 64, 0})});
              }),
              "output 'y': element [1] is -2147483648, which is not exact in u64");
}

// A Cast of a computed tensor to INT16, UINT16, UINT32 or UINT64 (i32 on the device, which
// would not wrap at the type's width) takes only a type all of whose values the target holds.
TEST(OnnxTypes, ACastToANarrowOrUnsignedTypeTakesATypeItHolds) {
    using onnx::TensorProto;
    auto cast = [](int32_t from, int32_t to) {
        onnx::ModelProto m = typed_model("Cast", 1, from, to, 3);
        onnx::AttributeProto &a = *m.mutable_graph()->mutable_node(0)->add_attribute();
        a.set_name("to");
        a.set_type(onnx::AttributeProto::INT);
        a.set_i(to);
        return m;
    };
    EXPECT_EQ(import_error(cast(TensorProto::INT32, TensorProto::UINT32)),
              "model.onnx: node 'y' (Cast): a cast of a computed tensor to u32 is supported only "
              "from an integer type all of whose values it holds (the device computes it in i32, "
              "where other values would not wrap at u32's width)");
    EXPECT_NE(import_error(cast(TensorProto::FLOAT, TensorProto::UINT16)), "");
    EXPECT_NE(import_error(cast(TensorProto::UINT16, TensorProto::INT16)), "");
    const frontend::ImportedModel widening = frontend::import_onnx_bytes(
        bytes_of(cast(TensorProto::UINT8, TensorProto::UINT16)), "m.onnx");
    EXPECT_EQ(elements<uint16_t>(run_typed(widening, {buffer(std::vector<uint8_t>{0, 255, 7})})),
              (std::vector<uint16_t>{0, 255, 7}));
    EXPECT_EQ(import_error(cast(TensorProto::UINT16, TensorProto::UINT64)), "");
}

// The bfloat16 nearest a float32 (round to nearest, ties to even), NaN kept.
float nearest_bfloat16(float x) {
    if (std::isnan(x)) return x;
    uint32_t bits;
    std::memcpy(&bits, &x, sizeof bits);
    bits = (bits + 0x7fff + ((bits >> 16) & 1)) & 0xffff0000u;
    float rounded;
    std::memcpy(&rounded, &bits, sizeof bits);
    return rounded;
}

// A Cast to BFLOAT16 rounds to the nearest bfloat16, ties to even: a constant exactly in f32;
// a computed tensor, f16 on the device, in f16 (which holds every bfloat16 of its range). A
// bfloat16 input cast to FLOAT keeps its values.
TEST(OnnxTypes, ACastToBfloat16RoundsToNearestEven) {
    using onnx::TensorProto;
    const float half = std::ldexp(1.0f, -8); // half a bfloat16 ulp at 1
    const std::vector<float> ties = {1 + half,
                                     1 + 3 * half,
                                     1 + half + 0x1p-20f,
                                     -(1 + half),
                                     0x1.fefffep127f,
                                     0x1.ff0000p127f,
                                     -INFINITY,
                                     0.1f,
                                     NAN};
    const std::vector<float> rounded = {1,        1 + 4 * half, 1 + 2 * half,   -1, 0x1.fep127f,
                                        INFINITY, -INFINITY,    0.10009765625f, NAN};
    for (size_t i = 0; i < ties.size(); ++i)
        if (!std::isnan(ties[i])) {
            EXPECT_EQ(nearest_bfloat16(ties[i]), rounded[i]) << i;
        }

    // A constant folds in f32.
    onnx::ModelProto m = graph_model("y", {int64_t(ties.size())});
    m.mutable_graph()->mutable_output(0)->mutable_type()->mutable_tensor_type()->set_elem_type(
        TensorProto::BFLOAT16);
    *m.mutable_graph()->add_initializer() =
        raw_tensor<float>("c", TensorProto::FLOAT, {int64_t(ties.size())}, ties);
    onnx::NodeProto &cast = add_node(*m.mutable_graph(), "Cast", {"c"}, "y");
    onnx::AttributeProto &to = *cast.add_attribute();
    to.set_name("to");
    to.set_type(onnx::AttributeProto::INT);
    to.set_i(TensorProto::BFLOAT16);
    const frontend::ImportedModel folded = frontend::import_onnx_bytes(bytes_of(m), "c.onnx");
    EXPECT_EQ(folded.output_types.at(0), Halide::Float(32));
    const Halide::Buffer<float> value(dsl::constant_value(folded.graph.outputs().at(0)));
    for (size_t i = 0; i < ties.size(); ++i) {
        if (std::isnan(rounded[i]))
            EXPECT_TRUE(std::isnan(value(int(i))));
        else
            EXPECT_EQ(value(int(i)), rounded[i]) << i;
    }

    // A computed tensor: f16 on the device, the ties of f16's range and random reals.
    onnx::ModelProto computed =
        typed_model("Cast", 1, TensorProto::FLOAT, TensorProto::BFLOAT16, 37);
    *computed.mutable_graph()->mutable_node(0)->add_attribute() = to;
    const frontend::ImportedModel model = frontend::import_onnx_bytes(bytes_of(computed), "c.onnx");
    std::vector<float> x = {1 + half, 1 + 3 * half, -(1 + half + 0x1p-10f), 65504, NAN, -INFINITY};
    std::mt19937 rng(97);
    std::uniform_real_distribution<float> real(-300, 300);
    while (x.size() < 37) x.push_back(float(Halide::float16_t(real(rng))));
    const std::vector<float> y = elements<float>(run_typed(model, {buffer(x)}));
    for (size_t i = 0; i < x.size(); ++i) {
        // 65504 rounds to 65536, beyond f16: an infinity on the device.
        const float want = x[i] == 65504 ? INFINITY : nearest_bfloat16(x[i]);
        if (std::isnan(want))
            EXPECT_TRUE(std::isnan(y[i]));
        else
            EXPECT_EQ(y[i], want) << "x = " << x[i];
    }

    // bfloat16 in, FLOAT out: the values as they are.
    onnx::ModelProto back = typed_model("Cast", 1, TensorProto::BFLOAT16, TensorProto::FLOAT, 5);
    to.set_i(TensorProto::FLOAT);
    *back.mutable_graph()->mutable_node(0)->add_attribute() = to;
    const frontend::ImportedModel widened = frontend::import_onnx_bytes(bytes_of(back), "b.onnx");
    EXPECT_NE(std::find(widened.notes.begin(), widened.notes.end(),
                        "graph input 'a' is bf16 in the model and f16 on the device (precision "
                        "fp16)"),
              widened.notes.end());
    const std::vector<float> bf16 = {1, -3.140625f, 0.478515625f, 256, -INFINITY};
    // A FLOAT output is read as the device computes it, in f16 (which holds these exactly).
    const std::vector<Halide::float16_t> out =
        elements<Halide::float16_t>(run_typed(widened, {buffer(bf16)}));
    for (size_t i = 0; i < bf16.size(); ++i) EXPECT_EQ(float(out[i]), bf16[i]) << i;
}

INSTANTIATE_TEST_SUITE_P(
    Types, NodeTest,
    ::testing::Values("test_bitshift_left_uint16", "test_bitshift_right_uint32",
                      "test_bitshift_left_uint64", "test_max_uint32", "test_min_int16",
                      "test_max_uint64", "test_mod_mixed_sign_int16", "test_mod_uint16",
                      "test_pow_types_float32_uint64", "test_cast_BFLOAT16_to_FLOAT",
                      "test_cast_FLOAT_to_BFLOAT16", "test_castlike_FLOAT_to_BFLOAT16_expanded",
                      "test_castlike_BFLOAT16_to_FLOAT"),
    [](const ::testing::TestParamInfo<std::string> &info) { return info.param.substr(5); });

// The outputs of `imported` compiled for vpu27 and run on the simulator with `inputs`.
std::vector<frontend::NamedTensor> run_model(const frontend::ImportedModel &imported,
                                             const std::vector<frontend::NamedTensor> &inputs) {
    const target::Target target = target::load_target("vpu27");
    sim::Simulator simulator(target, codegen::lower(imported.graph, target));
    return frontend::blob_outputs(
        simulator.blob(), simulator.run(frontend::blob_inputs(simulator.blob(), inputs)).outputs);
}

// Shape arithmetic folds empty constants: the prefix of x's shape before axis 0 is empty (as
// LayerNormalization's expanded form slices it), joined with [-1] it flattens x, and a
// ConstantOfShape of it is a scalar, added to every element. An empty slice of a computed
// tensor, and an empty constant as a graph output, have no device form: errors naming them.
TEST(OnnxImport, EmptyConstantsFoldInShapeArithmetic) {
    onnx::ModelProto m = graph_model("y", {35});
    onnx::GraphProto &g = *m.mutable_graph();
    add_float_input(g, "x", {5, 7});
    add_ints(g, "zero", {0});
    add_ints(g, "minus_one", {-1});
    add_node(g, "Shape", {"x"}, "shape");
    add_node(g, "Slice", {"shape", "zero", "zero"}, "prefix");
    onnx::AttributeProto &axis =
        *add_node(g, "Concat", {"prefix", "minus_one", "prefix"}, "flat_shape").add_attribute();
    axis.set_name("axis");
    axis.set_type(onnx::AttributeProto::INT);
    axis.set_i(0);
    onnx::AttributeProto &fill = *add_node(g, "ConstantOfShape", {"prefix"}, "c").add_attribute();
    fill.set_name("value");
    fill.set_type(onnx::AttributeProto::TENSOR);
    fill.mutable_t()->set_data_type(onnx::TensorProto::FLOAT);
    fill.mutable_t()->add_dims(1);
    fill.mutable_t()->add_float_data(0.375f);
    add_node(g, "Reshape", {"x", "flat_shape"}, "flat");
    add_node(g, "Add", {"flat", "c"}, "y");
    const frontend::ImportedModel imported = frontend::import_onnx_bytes(bytes_of(m), "m.onnx");
    std::vector<std::string> layers;
    for (const dsl::Layer &layer : imported.graph.layers())
        layers.push_back(layer.op() + " " + dsl::to_string(layer.output().shape));
    EXPECT_EQ(layers, (std::vector<std::string>{"reshape 35", "constant_eltwise 35"}));
    // Eighths of odd numerators, exact in fp16, as are their sums with 0.375.
    Halide::Buffer<float> x(7, 5); // numpy (5, 7)
    x.for_each_element([&](int j, int i) { x(j, i) = float(2 * (i * 7 + j) - 33) / 8; });
    const std::vector<frontend::NamedTensor> out = run_model(imported, {{"x", x}});
    ASSERT_EQ(out.size(), 1u);
    const Halide::Buffer<Halide::float16_t> y(out[0].value);
    ASSERT_EQ(y.dimensions(), 1);
    ASSERT_EQ(y.dim(0).extent(), 35);
    for (int e = 0; e < 35; ++e) EXPECT_EQ(float(y(e)), x(e % 7, e / 7) + 0.375f) << e;

    onnx::ModelProto empty = graph_model("y", {5, 0});
    add_float_input(*empty.mutable_graph(), "x", {5, 7});
    add_ints(*empty.mutable_graph(), "far", {1000});
    add_ints(*empty.mutable_graph(), "one", {1});
    add_node(*empty.mutable_graph(), "Slice", {"x", "far", "far", "one"}, "y");
    EXPECT_EQ(import_error(empty), "model.onnx: node 'y' (Slice): slice 'y': axis 1: [1000, "
                                   "1000) in steps of 1 of 7 is empty");

    onnx::ModelProto nothing = graph_model("y", {2, 0});
    add_ints(*nothing.mutable_graph(), "extents", {2, 0});
    add_node(*nothing.mutable_graph(), "ConstantOfShape", {"extents"}, "y");
    EXPECT_EQ(import_error(nothing), "model.onnx: graph output 'y': an empty constant (2x0); the "
                                     "device has no tensor of an extent 0");
}

// A scalar (a result of rank 0) is one element on the device, and a blob output of rank 0:
// the range of x over 255 levels (DynamicQuantizeLinear's scale: reductions over every axis,
// not kept, then arithmetic on scalars), and Size's constant.
TEST(OnnxImport, ScalarsAreOneElementOfRankZero) {
    onnx::ModelProto m = graph_model("scale", {});
    onnx::GraphProto &g = *m.mutable_graph();
    g.mutable_output(0)->mutable_type()->mutable_tensor_type()->mutable_shape(); // rank 0
    add_output(g, "n", onnx::TensorProto::INT64, {});
    add_float_input(g, "x", {3, 5});
    onnx::TensorProto &levels = *g.add_initializer();
    levels.set_name("levels");
    levels.set_data_type(onnx::TensorProto::FLOAT);
    levels.add_float_data(255);
    for (const char *op : {"ReduceMin", "ReduceMax"}) {
        onnx::AttributeProto &keep =
            *add_node(g, op, {"x"}, op == std::string("ReduceMin") ? "low" : "high")
                 .add_attribute();
        keep.set_name("keepdims");
        keep.set_type(onnx::AttributeProto::INT);
        keep.set_i(0);
    }
    add_node(g, "Sub", {"high", "low"}, "range");
    add_node(g, "Div", {"range", "levels"}, "scale");
    add_node(g, "Size", {"x"}, "n").set_name("size"); // so that the output takes the name n
    const frontend::ImportedModel imported = frontend::import_onnx_bytes(bytes_of(m), "m.onnx");
    ASSERT_EQ(imported.graph.outputs().size(), 2u);
    EXPECT_EQ(imported.graph.outputs()[0].op(), "constant_eltwise");
    EXPECT_EQ(imported.graph.outputs()[0].output().shape.rank(), 0);
    EXPECT_TRUE(dsl::is_constant(imported.graph.outputs()[1]));
    EXPECT_EQ(imported.graph.outputs()[1].output().shape.rank(), 0);
    const codegen::CheckResult r =
        codegen::check_against_reference(imported.graph, target::load_target("vpu27"), {});
    EXPECT_TRUE(r.ok()) << r.report();

    // The blob's outputs have rank 0 and hold one element; `vpuc inspect` prints them as
    // scalars.
    const target::Target target = target::load_target("vpu27");
    const std::vector<uint8_t> bytes = codegen::lower(imported.graph, target);
    const blob::Blob &b = blob::verify_structure(bytes);
    ASSERT_EQ(b.header()->outputs()->size(), 2u);
    for (uint32_t i = 0; i < 2; ++i) {
        EXPECT_EQ(b.header()->outputs()->Get(i)->shape()->size(), 0u);
        EXPECT_EQ(b.header()->outputs()->Get(i)->bytes(), i == 0 ? 2u : 4u);
    }
    std::ostringstream inspected;
    EXPECT_TRUE(blob::print_blob_text(inspected, "m.vpub", bytes));
    for (const char *scalar : {"\n  0 'scale': scalar ", "\n  1 'n': scalar "})
        EXPECT_NE(inspected.str().find(scalar), std::string::npos) << inspected.str();

    // Odd eighths from -17/8 to 11/8: a range of 3.5, then random reals.
    Halide::Buffer<float> x(5, 3); // numpy (3, 5)
    x.for_each_element([&](int j, int i) { x(j, i) = float(2 * (i * 5 + j) - 17) / 8; });
    std::vector<frontend::NamedTensor> out = run_model(imported, {{"x", x}});
    ASSERT_EQ(out.size(), 2u);
    EXPECT_EQ(out[0].name, "scale");
    EXPECT_EQ(out[0].value.dimensions(), 0);
    EXPECT_EQ(float(static_cast<const Halide::float16_t *>(out[0].value.data())[0]),
              float(Halide::float16_t(3.5f / 255)));
    EXPECT_EQ(out[1].name, "n");
    ASSERT_EQ(out[1].value.dimensions(), 0);
    ASSERT_EQ(out[1].value.type(), Halide::Int(32));
    EXPECT_EQ(static_cast<const int32_t *>(out[1].value.data())[0], 15);

    std::mt19937 rng(7);
    std::uniform_real_distribution<float> real(-4, 4);
    x.for_each_value([&](float &v) { v = float(Halide::float16_t(real(rng))); });
    float low = x(0, 0), high = x(0, 0);
    x.for_each_value([&](float v) { low = std::min(low, v), high = std::max(high, v); });
    out = run_model(imported, {{"x", x}});
    const double scale = double((high - low) / 255);
    EXPECT_NEAR(double(static_cast<const Halide::float16_t *>(out[0].value.data())[0]), scale,
                2e-3 * scale);
}

} // namespace

namespace {

// A OneHot model: indices `x` of `shape` (a float graph input, or an int64 initializer of
// `constant_indices`), depth 7 and values [off, on] as initializers, the new axis at `axis`.
onnx::ModelProto one_hot_model(const std::vector<int64_t> &shape, int64_t axis, float off, float on,
                               const std::vector<int64_t> &constant_indices = {}) {
    std::vector<int64_t> out_shape = shape;
    out_shape.insert(out_shape.begin() + (axis < 0 ? axis + int64_t(shape.size()) + 1 : axis), 7);
    onnx::ModelProto m = graph_model("y", out_shape);
    onnx::GraphProto &g = *m.mutable_graph();
    if (constant_indices.empty())
        add_float_input(g, "x", shape);
    else {
        add_ints(g, "x", constant_indices);
        g.mutable_initializer(0)->clear_dims();
        for (int64_t d : shape) g.mutable_initializer(0)->add_dims(d);
    }
    add_ints(g, "depth", {7}, true);
    const std::vector<float> values = {off, on};
    add_float_initializer(g, "values", {2}, [&](int64_t i) { return values[size_t(i)]; });
    onnx::AttributeProto &a = *add_node(g, "OneHot", {"x", "depth", "values"}, "y").add_attribute();
    a.set_name("axis");
    a.set_type(onnx::AttributeProto::INT);
    a.set_i(axis);
    return m;
}

// What OneHot gives at position p of the new axis for index k, depth 7: float indices truncated,
// [-7, 0) counting from the end, others off everywhere.
bool one_hot_at(double k, int64_t p) {
    const double whole = std::trunc(k);
    return (whole >= 0 ? whole : whole + 7) == double(p);
}

} // namespace

// OneHot of computed float indices along the middle axis of an odd shape, on the simulator:
// whole and fractional indices (truncated), negative ones (from the end), ones outside
// [-depth, depth) (off everywhere), and values that are random reals (rounded to fp16). Of
// constant indices it folds. Depth and values must be constants.
TEST(OnnxImport, OneHotOfComputedAndConstantIndices) {
    const float off = -1.2345f, on = 0.8421f;
    const frontend::ImportedModel imported =
        frontend::import_onnx_bytes(bytes_of(one_hot_model({3, 5}, 1, off, on)), "m.onnx");
    EXPECT_EQ(imported.graph.outputs().at(0).output().shape, dsl::Shape({3, 7, 5}));
    std::mt19937 rng(131);
    Halide::Buffer<float> x(5, 3); // numpy (3, 5)
    const std::vector<float> chosen = {0, 6, -1, -7, 7, -8, 2.75f, -1.5f, 0.5f, -0.5f, 100};
    x.for_each_element([&](int j, int i) {
        const size_t e = size_t(i * 5 + j);
        x(j, i) =
            e < chosen.size() ? chosen[e] : float(std::uniform_real_distribution<>(-9.5, 9.5)(rng));
    });
    const std::vector<frontend::NamedTensor> out = run_model(imported, {{"x", x}});
    ASSERT_EQ(out.size(), 1u);
    const Halide::Buffer<Halide::float16_t> y(out[0].value);
    ASSERT_EQ(y.dimensions(), 3);
    for (int i = 0; i < 3; ++i)
        for (int p = 0; p < 7; ++p)
            for (int j = 0; j < 5; ++j) {
                // The device's input is x in fp16.
                const double k = double(Halide::float16_t(x(j, i)));
                EXPECT_EQ(float(y(j, p, i)), float(Halide::float16_t(one_hot_at(k, p) ? on : off)))
                    << "index " << k << " at position " << p;
            }

    // Constant indices fold into a constant result, here along the last axis.
    const std::vector<int64_t> indices = {3, -2, 9, -8, 0, 6};
    const frontend::ImportedModel folded = frontend::import_onnx_bytes(
        bytes_of(one_hot_model({2, 3}, -1, 0.25f, 4.5f, indices)), "m.onnx");
    ASSERT_TRUE(dsl::is_constant(folded.graph.outputs().at(0)));
    const dsl::ConstValues v = dsl::const_values(folded.graph.outputs().at(0));
    EXPECT_EQ(v.shape, (std::vector<int64_t>{2, 3, 7}));
    for (size_t e = 0; e < indices.size(); ++e)
        for (int64_t p = 0; p < 7; ++p)
            EXPECT_EQ(v.reals.at(e * 7 + size_t(p)), one_hot_at(double(indices[e]), p) ? 4.5 : 0.25)
                << "index " << indices[e] << " at position " << p;

    onnx::ModelProto computed_depth = one_hot_model({3, 5}, 1, off, on);
    add_float_input(*computed_depth.mutable_graph(), "d", {1});
    computed_depth.mutable_graph()->mutable_node(0)->set_input(1, "d");
    computed_depth.mutable_graph()->mutable_initializer()->DeleteSubrange(0, 1); // depth
    EXPECT_NE(import_error(computed_depth)
                  .find("node 'y' (OneHot): input 1 (depth, 'd') must be a "
                        "constant"),
              std::string::npos)
        << import_error(computed_depth);
    onnx::ModelProto three_values = one_hot_model({3, 5}, 1, off, on);
    three_values.mutable_graph()->mutable_initializer(1)->add_float_data(1);
    three_values.mutable_graph()->mutable_initializer(1)->set_dims(0, 3);
    EXPECT_NE(import_error(three_values).find("Input 'values' must have exactly two elements"),
              std::string::npos)
        << import_error(three_values);
}
