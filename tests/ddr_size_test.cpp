// A model whose inputs, outputs, constants and scratch do not fit the target's simulated DDR is
// an error saying so, with the sizes (codegen/ddr_size.h); a model that fits never meets it.
#include <gtest/gtest.h>

#include <onnx/onnx_pb.h>

#include <fstream>
#include <sstream>

#include "codegen/ddr_size.h"
#include "codegen/lower.h"
#include "frontend/onnx_import.h"

namespace vpuc::codegen {

namespace {

// vpu27 with `ddr_bytes` of DDR, under the name `name`, as a target file would give it.
target::Target vpu27_with_ddr(uint64_t ddr_bytes, const std::string &name) {
    std::ifstream file(std::string(VPUC_SOURCE_DIR) + "/vpu_target/targets/vpu27.json");
    std::stringstream text;
    text << file.rdbuf();
    std::string json = text.str();
    const auto replace = [&](const std::string &from, const std::string &to) {
        const size_t at = json.find(from);
        ASSERT_NE(at, std::string::npos) << from;
        json.replace(at, from.size(), to);
    };
    replace("\"name\": \"vpu27\"", "\"name\": \"" + name + "\"");
    replace("\"bytes\": 536870912", "\"bytes\": " + std::to_string(ddr_bytes));
    return target::parse_target(json, name + ".json");
}

constexpr int64_t kChannels = 256, kSide = 4;

// A 3x3 conv of 256 channels on a 4x4 image: 1.1 MiB of weights (an initializer, in fp16 on the
// device) for 8 KiB of input and output each.
std::vector<uint8_t> model_with_large_weights() {
    onnx::ModelProto m;
    m.set_ir_version(8);
    m.add_opset_import()->set_version(13);
    onnx::GraphProto &g = *m.mutable_graph();
    g.set_name("big_weights");
    for (const char *name : {"x", "y"}) {
        onnx::ValueInfoProto &v = name[0] == 'x' ? *g.add_input() : *g.add_output();
        v.set_name(name);
        v.mutable_type()->mutable_tensor_type()->set_elem_type(onnx::TensorProto::FLOAT);
        for (int64_t d : {int64_t(1), kChannels, kSide, kSide})
            v.mutable_type()->mutable_tensor_type()->mutable_shape()->add_dim()->set_dim_value(d);
    }
    onnx::TensorProto &w = *g.add_initializer();
    w.set_name("w");
    w.set_data_type(onnx::TensorProto::FLOAT);
    for (int64_t d : {kChannels, kChannels, int64_t(3), int64_t(3)}) w.add_dims(d);
    std::vector<float> values(size_t(kChannels * kChannels * 9));
    for (size_t i = 0; i < values.size(); ++i) values[i] = float(int(i % 7) - 3) / 64;
    w.set_raw_data(values.data(), values.size() * sizeof(float));
    onnx::NodeProto &conv = *g.add_node();
    conv.set_name("conv1");
    conv.set_op_type("Conv");
    conv.add_input("x");
    conv.add_input("w");
    conv.add_output("y");
    onnx::AttributeProto &pads = *conv.add_attribute();
    pads.set_name("pads");
    pads.set_type(onnx::AttributeProto::INTS);
    for (int i = 0; i < 4; ++i) pads.add_ints(1);
    const std::string bytes = m.SerializeAsString();
    return {bytes.begin(), bytes.end()};
}

Program program_of(uint64_t input, uint64_t output, size_t constants, uint64_t scratch) {
    Program p;
    p.name = "net";
    p.add_buffer({"in", blob::MemSpace::Input, 0, input});
    p.add_buffer({"out", blob::MemSpace::Output, 0, output});
    p.add_buffer({"tmp", blob::MemSpace::Scratch, 0, scratch});
    p.add_buffer({"cmx", blob::MemSpace::Cmx, 0, 1 << 20});
    p.constants.resize(constants);
    p.scratch_bytes = scratch;
    return p;
}

} // namespace

TEST(DdrSize, SumsEverySectionInDdr) {
    const DdrUse use = ddr_use(program_of(1000, 500, 300, 200));
    EXPECT_EQ(use.inputs, 1000u);
    EXPECT_EQ(use.outputs, 500u);
    EXPECT_EQ(use.constants, 300u);
    EXPECT_EQ(use.scratch, 200u);
    EXPECT_EQ(use.total(), 2000u); // CMX is not DDR
}

TEST(DdrSize, AProgramThatFillsTheDdrExactlyFits) {
    const target::Target target = vpu27_with_ddr(1 << 20, "tiny");
    EXPECT_NO_THROW(check_ddr_size(program_of(1 << 18, 1 << 18, 1 << 18, 1 << 18), target));
}

TEST(DdrSize, AProgramLargerThanTheDdrIsAnErrorWithTheSizes) {
    const target::Target target = vpu27_with_ddr(1 << 20, "tiny");
    try {
        check_ddr_size(program_of(1 << 18, 1 << 18, 1 << 19, 1), target);
        FAIL() << "accepted";
    } catch (const LoweringError &e) {
        EXPECT_STREQ(e.what(), "model 'net' does not fit the DDR of tiny: it needs 1048577 bytes "
                               "(1.0 MiB), the target has 1048576 bytes (1.0 MiB) (ddr.bytes); "
                               "constants 524288, scratch 1, inputs 262144, outputs 262144 bytes");
    }
}

// The model's weights alone take more than the whole DDR of a 1 MiB target.
TEST(DdrSize, AModelWithLargeWeightsDoesNotCompileForASmallDdr) {
    const frontend::ImportedModel model =
        frontend::import_onnx_bytes(model_with_large_weights(), "big.onnx");
    try {
        lower(model.graph, vpu27_with_ddr(1 << 20, "small_ddr"));
        FAIL() << "compiled";
    } catch (const LoweringError &e) {
        const std::string message = e.what();
        EXPECT_EQ(
            message.rfind("model 'big_weights' does not fit the DDR of small_ddr: it needs ", 0),
            0u)
            << message;
        const std::string has = "the target has 1048576 bytes (1.0 MiB) (ddr.bytes); constants ";
        const size_t at = message.find(has);
        ASSERT_NE(at, std::string::npos) << message;
        // At least the weights in fp16 (how the lowering packs them may add to that).
        EXPECT_GE(std::stoull(message.substr(at + has.size())),
                  uint64_t(kChannels * kChannels * 9 * 2))
            << message;
        EXPECT_NE(message.find(", inputs 8192, outputs 8192 bytes"), std::string::npos) << message;
    }
}

TEST(DdrSize, TheSameModelCompilesForTheBundledTarget) {
    const frontend::ImportedModel model =
        frontend::import_onnx_bytes(model_with_large_weights(), "big.onnx");
    EXPECT_FALSE(lower(model.graph, target::load_target("vpu27")).empty());
}

} // namespace vpuc::codegen
