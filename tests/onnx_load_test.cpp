// The loading stage of the ONNX importer (frontend/src/onnx_model.cpp) on models that ONNX's
// checker lets through but its version converter or shape inference would crash on, as
// fuzz_onnx_import found them.
#include <gtest/gtest.h>

#include <onnx/onnx_pb.h>

#include <optional>

#include "frontend/onnx_import.h"

using namespace vpuc;

namespace {

// A 2x2 max pool of opset 12 (so that the version converter upgrades it) whose graph output
// is `output`, while the node writes "y".
onnx::ModelProto max_pool_model(const std::string &output) {
    onnx::ModelProto m;
    m.set_ir_version(7);
    m.add_opset_import()->set_version(12);
    onnx::GraphProto &g = *m.mutable_graph();
    g.set_name("pool");
    const auto add_value = [](onnx::ValueInfoProto &v, const std::string &name, int64_t side) {
        v.set_name(name);
        v.mutable_type()->mutable_tensor_type()->set_elem_type(onnx::TensorProto::FLOAT);
        for (int64_t d : {int64_t(1), int64_t(3), side, side})
            v.mutable_type()->mutable_tensor_type()->mutable_shape()->add_dim()->set_dim_value(d);
    };
    add_value(*g.add_input(), "x", 32);
    add_value(*g.add_output(), output, 31);
    onnx::NodeProto &pool = *g.add_node();
    pool.set_op_type("MaxPool");
    pool.add_input("x");
    pool.add_output("y");
    onnx::AttributeProto &kernel = *pool.add_attribute();
    kernel.set_name("kernel_shape");
    kernel.set_type(onnx::AttributeProto::INTS);
    kernel.add_ints(2);
    kernel.add_ints(2);
    return m;
}

std::vector<uint8_t> bytes_of(const onnx::ModelProto &m) {
    const std::string s = m.SerializeAsString();
    return {s.begin(), s.end()};
}

TEST(OnnxLoad, AGraphOutputNoNodeComputesIsAnError) {
    ASSERT_NO_THROW(frontend::import_onnx_bytes(bytes_of(max_pool_model("y")), "pool.onnx"));
    try {
        frontend::import_onnx_bytes(bytes_of(max_pool_model("z\x80")), "pool.onnx");
        FAIL() << "imported";
    } catch (const frontend::ModelError &e) {
        EXPECT_STREQ(e.what(), "pool.onnx: graph 'pool': output 'z\\x80' is no node's output, "
                               "graph input or initializer");
    }
}

// LayerNormalization of opset 17 with its Mean and InvStdDev outputs, over `axis` (none: the
// default) of x, of shape `dims`, through a Relu: the normalized input's rank is inferred.
onnx::ModelProto layer_norm_model(const std::vector<int64_t> &dims, std::optional<int64_t> axis) {
    onnx::ModelProto m;
    m.set_ir_version(8);
    m.add_opset_import()->set_version(17);
    onnx::GraphProto &g = *m.mutable_graph();
    g.set_name("norm");
    const auto add_value = [](onnx::ValueInfoProto &v, const std::string &name,
                              const std::vector<int64_t> &shape) {
        v.set_name(name);
        v.mutable_type()->mutable_tensor_type()->set_elem_type(onnx::TensorProto::FLOAT);
        auto &s = *v.mutable_type()->mutable_tensor_type()->mutable_shape();
        for (int64_t d : shape) s.add_dim()->set_dim_value(d);
    };
    add_value(*g.add_input(), "x", dims);
    for (const char *name : {"y", "mean", "inv_std_dev"}) {
        onnx::ValueInfoProto &out = *g.add_output();
        out.set_name(name);
        out.mutable_type()->mutable_tensor_type()->set_elem_type(onnx::TensorProto::FLOAT);
        auto &shape = *out.mutable_type()->mutable_tensor_type()->mutable_shape();
        for (size_t d = 0; d < dims.size(); ++d)
            shape.add_dim()->set_dim_param("d" + std::to_string(d));
    }
    const std::vector<int64_t> last(dims.empty() ? dims.end() : dims.end() - 1, dims.end());
    for (const char *name : {"scale", "bias"}) {
        onnx::TensorProto &t = *g.add_initializer();
        t.set_name(name);
        t.set_data_type(onnx::TensorProto::FLOAT);
        int64_t count = 1;
        for (int64_t d : last) {
            t.add_dims(d);
            count *= d;
        }
        for (int64_t i = 0; i < count; ++i) t.add_float_data(0.5f + float(i));
    }
    onnx::NodeProto &relu = *g.add_node();
    relu.set_op_type("Relu");
    relu.add_input("x");
    relu.add_output("r");
    onnx::NodeProto &norm = *g.add_node();
    norm.set_name("ln");
    norm.set_op_type("LayerNormalization");
    for (const char *name : {"r", "scale", "bias"}) norm.add_input(name);
    for (const char *name : {"y", "mean", "inv_std_dev"}) norm.add_output(name);
    if (axis) {
        onnx::AttributeProto &a = *norm.add_attribute();
        a.set_name("axis");
        a.set_type(onnx::AttributeProto::INT);
        a.set_i(*axis);
    }
    return m;
}

// ONNX 1.12's shape inference would index the input's dims before the first.
TEST(OnnxLoad, ALayerNormalizationAxisOutsideTheRankIsAnError) {
    ASSERT_NO_THROW(
        frontend::import_onnx_bytes(bytes_of(layer_norm_model({2, 3, 5}, -1)), "norm.onnx"));
    const auto refuses = [](const std::vector<int64_t> &dims, std::optional<int64_t> axis,
                            const std::string &why) {
        try {
            frontend::import_onnx_bytes(bytes_of(layer_norm_model(dims, axis)), "norm.onnx");
            ADD_FAILURE() << "imported: " << why;
        } catch (const frontend::ModelError &e) {
            EXPECT_EQ(e.what(), "norm.onnx: node 'ln' (LayerNormalization): " + why);
        }
    };
    refuses({}, std::nullopt, "axis -1 is outside [-0, 0) for input 'r' of rank 0");
    refuses({2, 3, 5}, -4, "axis -4 is outside [-3, 3) for input 'r' of rank 3");
    refuses({2, 3, 5}, 3, "axis 3 is outside [-3, 3) for input 'r' of rank 3");
}

} // namespace
