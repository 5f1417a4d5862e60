// The loading stage of the ONNX importer (frontend/src/onnx_model.cpp) on models that ONNX's
// checker lets through but its version converter or shape inference would crash on, as
// fuzz_onnx_import found them.
#include <gtest/gtest.h>

#include <onnx/onnx_pb.h>

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

} // namespace
