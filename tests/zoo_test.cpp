// The model zoo: its ONNX files are deterministic and valid, OpenCV DNN runs them, and vpuc
// computes what OpenCV computes on whole networks (import -> graph passes -> lower for vpu27
// -> simulator, against OpenCV's fp32 on the same input). docs/zoo.md holds the figures.
#include <gtest/gtest.h>
#include <onnx/checker.h>
#include <onnx/shape_inference/implementation.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <numeric>
#include <random>
#include <set>

#include <unistd.h>

#include "bench/models.h"
#include "codegen/lower.h"
#include "examples/zoo/opencv_reference.h"
#include "examples/zoo/zoo.h"
#include "frontend/blob_io.h"
#include "frontend/compare.h"
#include "frontend/graph_passes.h"
#include "frontend/onnx_import.h"
#include "vpu_target/blob.h"
#include "vpu_target/simulator.h"
#include "vpu_target/target.h"

namespace vpuc {
namespace {

using frontend::NamedTensor;

// A directory of the test program's own, removed when it exits: ctest runs each test case as a
// process of its own, and two of them writing one shared file at once gave a reader half a model.
struct ScratchDir {
    const std::filesystem::path path =
        std::filesystem::path(VPUC_BINARY_DIR) / ("zoo_test_models." + std::to_string(::getpid()));
    ScratchDir() { std::filesystem::create_directories(path); }
    ~ScratchDir() {
        std::error_code ignored;
        std::filesystem::remove_all(path, ignored);
    }
};

// The model's file, written once per run of the test program.
std::string model_path(const std::string &name) {
    static const ScratchDir scratch;
    const std::string dir = scratch.path.string();
    static std::map<std::string, std::string> written;
    auto it = written.find(name);
    if (it == written.end()) it = written.emplace(name, zoo::write_model(name, dir)).first;
    return it->second;
}

// The QDQ form's file and bytes, made once per run of the test program.
const std::vector<uint8_t> &qdq_bytes(const std::string &name) {
    static std::map<std::string, std::vector<uint8_t>> made;
    auto it = made.find(name);
    if (it == made.end()) it = made.emplace(name, zoo::qdq_model_bytes(name)).first;
    return it->second;
}

// The QDQ form's file, NAME_qdq.onnx beside the float model's, of those bytes.
std::string qdq_model_path(const std::string &name) {
    const std::string path =
        (std::filesystem::path(model_path(name)).parent_path() / (name + "_qdq.onnx")).string();
    const std::vector<uint8_t> &bytes = qdq_bytes(name);
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out.write(reinterpret_cast<const char *>(bytes.data()), std::streamsize(bytes.size()));
    EXPECT_TRUE(out.good()) << path;
    return path;
}

onnx::ModelProto parse(const std::vector<uint8_t> &bytes) {
    onnx::ModelProto model;
    EXPECT_TRUE(model.ParseFromArray(bytes.data(), int(bytes.size())));
    return model;
}

// Standard normal floats in the model's input shape (numpy order reversed into Halide's).
NamedTensor random_input(const zoo::ModelInfo &info, uint32_t seed) {
    std::vector<int> extents(info.input_shape.rbegin(), info.input_shape.rend());
    Halide::Buffer<float> value(extents);
    std::mt19937 random(seed);
    std::normal_distribution<float> normal(0.0f, 1.0f);
    value.for_each_value([&](float &v) { v = normal(random); });
    return {info.input_name, value};
}

std::vector<float> floats_of(const Halide::Buffer<> &tensor) {
    const Halide::Buffer<> data = frontend::dense(tensor);
    std::vector<float> values(size_t(data.number_of_elements()));
    if (data.type() == Halide::Float(16)) {
        const auto *halves = static_cast<const Halide::float16_t *>(data.data());
        for (size_t i = 0; i < values.size(); ++i) values[i] = float(halves[i]);
    } else if (data.type() == Halide::Float(32)) {
        std::copy_n(static_cast<const float *>(data.data()), values.size(), values.begin());
    } else {
        ADD_FAILURE() << "a result of type " << frontend::dtype_name(data.type());
    }
    return values;
}

// The indices of the k largest values, largest first.
std::vector<size_t> top_k(const std::vector<float> &values, size_t k) {
    std::vector<size_t> order(values.size());
    std::iota(order.begin(), order.end(), 0);
    std::partial_sort(order.begin(), order.begin() + long(k), order.end(),
                      [&](size_t a, size_t b) { return values[a] > values[b]; });
    order.resize(k);
    return order;
}

TEST(Zoo, SameBytesEveryTime) {
    for (const zoo::ModelInfo &info : zoo::models())
        EXPECT_TRUE(zoo::model_bytes(info.name) == zoo::model_bytes(info.name)) << info.name;
}

// ONNX's checker and strict shape inference accept `model` (shapes inferred into it), and it
// has the one input and the outputs `info` names.
void expect_valid_model(onnx::ModelProto &model, const zoo::ModelInfo &info) {
    EXPECT_NO_THROW(onnx::checker::check_model(model));
    EXPECT_NO_THROW(onnx::shape_inference::InferShapes(model, onnx::OpSchemaRegistry::Instance(),
                                                       onnx::ShapeInferenceOptions(true, 1, true)));
    ASSERT_EQ(model.graph().input_size(), 1);
    EXPECT_EQ(model.graph().input(0).name(), info.input_name);
    std::vector<std::string> outputs;
    for (const onnx::ValueInfoProto &output : model.graph().output())
        outputs.push_back(output.name());
    EXPECT_EQ(outputs, info.output_names);
}

TEST(Zoo, ModelsPassOnnxCheckerAndShapeInference) {
    for (const zoo::ModelInfo &info : zoo::models()) {
        SCOPED_TRACE(info.name);
        onnx::ModelProto model = parse(zoo::model_bytes(info.name));
        expect_valid_model(model, info);
        // Every node produces a value: shape inference gave each intermediate tensor a shape.
        EXPECT_EQ(model.graph().value_info_size() + model.graph().output_size(),
                  model.graph().node_size());
    }
}

// Node names as PyTorch's exporter writes them, unique, and never the name of a tensor.
TEST(Zoo, NamesFollowPyTorchsExport) {
    for (const zoo::ModelInfo &info : zoo::models()) {
        SCOPED_TRACE(info.name);
        const onnx::ModelProto model = parse(zoo::model_bytes(info.name));
        std::set<std::string> nodes, tensors;
        for (const onnx::NodeProto &node : model.graph().node()) {
            EXPECT_TRUE(nodes.insert(node.name()).second) << node.name();
            EXPECT_EQ(node.name().front(), '/') << node.name();
            for (const std::string &output : node.output()) tensors.insert(output);
        }
        for (const onnx::TensorProto &t : model.graph().initializer()) tensors.insert(t.name());
        for (const std::string &tensor : tensors) EXPECT_EQ(nodes.count(tensor), 0u) << tensor;
    }
    const onnx::ModelProto resnet = parse(zoo::model_bytes("resnet18"));
    std::map<std::string, int> ops;
    std::set<std::string> names;
    for (const onnx::NodeProto &node : resnet.graph().node()) {
        ++ops[node.op_type()];
        names.insert(node.name());
    }
    EXPECT_EQ(ops["Conv"], 20);
    EXPECT_EQ(ops["BatchNormalization"], 20);
    EXPECT_EQ(ops["Add"], 8);
    EXPECT_EQ(names.count("/layer1/layer1.0/conv1/Conv"), 1u);
    EXPECT_EQ(names.count("/layer2/layer2.0/downsample/downsample.1/BatchNormalization"), 1u);
    EXPECT_EQ(names.count("/fc/Gemm"), 1u);
}

// The QDQ forms: deterministic, valid, and as ONNX Runtime writes them.
TEST(ZooQdq, SameBytesEveryTimeAndInTheFile) {
    for (const char *name : {"mobilenet_v2", "yolo_tiny"})
        EXPECT_TRUE(zoo::qdq_model_bytes(name) == qdq_bytes(name)) << name;
    const std::string dir = std::filesystem::path(model_path("yolo_tiny")).parent_path().string();
    const std::string path = zoo::write_qdq_model("yolo_tiny", dir);
    EXPECT_EQ(std::filesystem::path(path).filename(), "yolo_tiny_qdq.onnx");
    std::ifstream in(path, std::ios::binary);
    EXPECT_TRUE(std::vector<uint8_t>(std::istreambuf_iterator<char>(in), {}) ==
                qdq_bytes("yolo_tiny"));
}

TEST(ZooQdq, ModelsPassOnnxCheckerAndShapeInference) {
    for (const zoo::ModelInfo &info : zoo::models()) {
        if (!info.has_qdq_form) continue;
        SCOPED_TRACE(info.name);
        onnx::ModelProto model = parse(qdq_bytes(info.name));
        expect_valid_model(model, info);
    }
}

TEST(ZooQdq, ResNet18HasInt8WeightsAndQdqOnActivations) {
    const onnx::ModelProto model = parse(qdq_bytes("resnet18"));
    std::map<std::string, int> ops;
    for (const onnx::NodeProto &node : model.graph().node()) ++ops[node.op_type()];
    EXPECT_EQ(ops["BatchNormalization"], 0);
    EXPECT_EQ(ops["Conv"], 20);
    // The input, the 20 convs' results after Relu or not, maxpool, the 8 adds after Relu,
    // the pool, flatten and logits.
    EXPECT_EQ(ops["QuantizeLinear"], 1 + 20 + 1 + 8 + 3);
    // Those, and 21 weights and 21 biases.
    EXPECT_EQ(ops["DequantizeLinear"], ops["QuantizeLinear"] + 42);
    std::map<int, int> types;
    for (const onnx::TensorProto &t : model.graph().initializer()) ++types[t.data_type()];
    EXPECT_EQ(types[onnx::TensorProto::INT8], 21 + 21);  // weights and their zero points
    EXPECT_EQ(types[onnx::TensorProto::INT32], 21 + 21); // biases and their zero points
    EXPECT_EQ(types[onnx::TensorProto::UINT8], ops["QuantizeLinear"]);
    // The logits are float, after a DequantizeLinear.
    EXPECT_EQ(model.graph().node(model.graph().node_size() - 1).op_type(), "DequantizeLinear");
    EXPECT_EQ(model.graph().node(model.graph().node_size() - 1).output(0), "logits");
}

// Its 8 residual Adds, between DequantizeLinears and a QuantizeLinear, are int8 adds reading
// the u8 tensors themselves (the DequantizeLinears fold into them), not fp16 ones.
TEST(ZooQdq, ResNet18AddsAreInt8) {
    const frontend::ImportedModel imported =
        frontend::import_onnx_bytes(qdq_bytes("resnet18"), "resnet18_qdq.onnx");
    int adds = 0;
    for (const dsl::Layer &layer : imported.graph.layers()) {
        if (layer.op() != "add") continue;
        ++adds;
        EXPECT_TRUE(dsl::is_quantized_int(layer.output().type)) << layer.output().describe();
        for (const dsl::Layer &in : layer.inputs())
            EXPECT_TRUE(dsl::is_quantized_int(in.output().type)) << in.output().describe();
    }
    EXPECT_EQ(adds, 8);
}

TEST(ZooQdq, AModelWithoutAQdqFormIsAnError) {
    try {
        zoo::qdq_model_bytes("transformer_encoder");
        FAIL() << "no error";
    } catch (const zoo::ZooError &e) {
        EXPECT_NE(std::string(e.what()).find("resnet18"), std::string::npos) << e.what();
    }
}

TEST(Zoo, UnknownModelIsAnError) {
    try {
        zoo::model_bytes("resnet19");
        FAIL() << "no error";
    } catch (const zoo::ZooError &e) {
        EXPECT_NE(std::string(e.what()).find("resnet18"), std::string::npos) << e.what();
    }
}

// OpenCV's logits: finite, and spread (a network whose activations died would give one value).
void expect_opencv_runs(const std::string &name) {
    const zoo::ModelInfo &info = zoo::model_info(name);
    const std::vector<NamedTensor> outputs =
        zoo::run_opencv(model_path(name), {random_input(info, 1)}, info.output_names);
    ASSERT_EQ(outputs.size(), 1u);
    EXPECT_EQ(outputs[0].name, "logits");
    EXPECT_EQ(frontend::shape_text(outputs[0].value), "1x1000");
    const std::vector<float> logits = floats_of(outputs[0].value);
    for (float v : logits) ASSERT_TRUE(std::isfinite(v));
    const auto [low, high] = std::minmax_element(logits.begin(), logits.end());
    EXPECT_GT(*high - *low, 1.0f);
}

TEST(ZooOpenCv, RunsResNet18) {
    expect_opencv_runs("resnet18");
}
TEST(ZooOpenCv, RunsMobileNetV2) {
    expect_opencv_runs("mobilenet_v2");
}

TEST(ZooOpenCv, RefusesAnInputOfAnotherType) {
    const zoo::ModelInfo &info = zoo::model_info("resnet18");
    NamedTensor input = random_input(info, 1);
    input.value = Halide::Buffer<double>(224, 224, 3, 1);
    EXPECT_THROW(zoo::run_opencv(model_path("resnet18"), {input}, info.output_names),
                 zoo::OpenCvReferenceError);
}

// Each output against OpenCV's: a cosine of at least `min_cosine` (printed with the largest
// error); for logits, the top-1 and top-5 classes printed and, with `require_top5`, the same
// top-1 class and at least 4 of the 5 top classes shared.
void expect_close_to_opencv(const std::vector<NamedTensor> &outputs,
                            const std::vector<NamedTensor> &reference, double min_cosine,
                            bool require_top5) {
    ASSERT_EQ(outputs.size(), reference.size());
    const frontend::Tolerance tolerance{1.0, 1.0, min_cosine};
    for (size_t i = 0; i < outputs.size(); ++i) {
        SCOPED_TRACE(reference[i].name);
        const frontend::TensorComparison c =
            frontend::compare_tensors(outputs[i].value, reference[i].value, tolerance);
        const std::vector<float> ours = floats_of(outputs[i].value);
        const std::vector<float> theirs = floats_of(reference[i].value);
        const auto [low, high] = std::minmax_element(theirs.begin(), theirs.end());
        std::printf("  %s: cosine %.7f, max abs error %.4g (OpenCV's values span %.3g)\n",
                    reference[i].name.c_str(), c.cosine, c.max_abs_error, double(*high - *low));
        EXPECT_GE(c.cosine, min_cosine) << c.reason;
        if (reference[i].name != "logits") continue;
        const std::vector<size_t> our_top5 = top_k(ours, 5), their_top5 = top_k(theirs, 5);
        const auto shared = std::count_if(our_top5.begin(), our_top5.end(), [&](size_t k) {
            return std::find(their_top5.begin(), their_top5.end(), k) != their_top5.end();
        });
        std::printf("  top-1 %s, top-5: %ld of 5 shared\n",
                    our_top5[0] == their_top5[0] ? "the same" : "differs", long(shared));
        if (!require_top5) continue;
        EXPECT_EQ(our_top5[0], their_top5[0]);
        EXPECT_GE(shared, 4);
    }
}

// Graph scheduling changes where tensors live and how layers are split over the tiles, never a
// result: `graph` lowered without it gives the bytes `scheduled` (its run with it) gave.
void expect_same_bytes_without_graph_scheduling(const dsl::Graph &graph,
                                                const target::Target &target,
                                                const NamedTensor &input,
                                                const sim::RunResult &scheduled) {
    codegen::LowerOptions defaults_only;
    defaults_only.graph_scheduling = false;
    sim::Simulator simulator(target, codegen::lower(graph, target, defaults_only));
    const sim::RunResult result = simulator.run(frontend::blob_inputs(simulator.blob(), {input}));
    std::printf("without graph scheduling: simulated latency %.0f us\n", result.latency_ns / 1000);
    EXPECT_TRUE(result.outputs == scheduled.outputs);
}

// Import, graph passes and lowering for vpu27 as `vpuc compile` does them, then the
// simulator, on the input OpenCV is given; every output compared with OpenCV's, and for
// logits the top classes too. The layers `kept_in_cmx` store nothing to DDR.
void expect_matches_opencv(const std::string &name,
                           const std::vector<std::string> &kept_in_cmx = {},
                           const frontend::GraphPassOptions &passes = {}) {
    const zoo::ModelInfo &info = zoo::model_info(name);
    const std::string path = model_path(name);
    const NamedTensor input = random_input(info, 7);
    const std::vector<NamedTensor> reference = zoo::run_opencv(path, {input}, info.output_names);

    using Clock = std::chrono::steady_clock;
    const auto seconds_since = [](Clock::time_point start) {
        return std::chrono::duration<double>(Clock::now() - start).count();
    };
    const Clock::time_point start = Clock::now();
    const frontend::ImportedModel model = frontend::import_onnx(path);
    const frontend::GraphPassState passed = frontend::run_graph_passes(model.graph, passes);
    const double import_s = seconds_since(start);
    const target::Target target = target::load_target("vpu27");
    std::vector<uint8_t> blob = codegen::lower(passed.graph, target);
    const double lower_s = seconds_since(start) - import_s;
    // Each constant byte loads once: no weight is evicted from CMX and loaded again (a prefetch
    // never spills), and a weight used on both tiles is one broadcast.
    EXPECT_EQ(bench::ddr_traffic(blob).constants,
              int64_t(blob::GetBlob(blob.data())->constants()->size()));
    sim::Simulator simulator(target, std::move(blob));
    const sim::RunResult result = simulator.run(frontend::blob_inputs(simulator.blob(), {input}));
    const std::vector<NamedTensor> outputs =
        frontend::blob_outputs(simulator.blob(), result.outputs);
    const double total_s = seconds_since(start);

    std::printf("%s: import + graph passes %.1f s, lower %.1f s, simulate %.1f s; %zu layers, "
                "simulated latency %.0f us\n",
                name.c_str(), import_s, lower_s, total_s - import_s - lower_s,
                passed.graph.layers().size(), result.latency_ns / 1000);
    expect_same_bytes_without_graph_scheduling(passed.graph, target, input, result);
    for (const std::string &layer : kept_in_cmx)
        EXPECT_EQ(std::count_if(result.tasks.begin(), result.tasks.end(),
                                [&](const sim::TaskRecord &t) {
                                    return t.layer == layer &&
                                           t.name.find(".store") != std::string::npos;
                                }),
                  0)
            << layer << " stores to DDR";
    ASSERT_EQ(outputs.size(), reference.size());
    expect_close_to_opencv(outputs, reference, 0.999, true);
}

TEST(ZooEndToEnd, ResNet18MatchesOpenCv) {
    expect_matches_opencv("resnet18");
}
// The first stage's 56x56x256 fp16 tensors of its blocks' last convolutions, 800 KB on each
// tile by rows (41% of its CMX), stay in CMX: keep_in_cmx takes them, and allocate_cmx leaves
// them room at the top of CMX while the layers before them place their buffers.
TEST(ZooEndToEnd, ResNet50MatchesOpenCv) {
    expect_matches_opencv("resnet50", {"/layer1/layer1.0/conv3/Conv", "/layer1/layer1.1/conv3/Conv",
                                       "/layer1/layer1.2/conv3/Conv"});
}
TEST(ZooEndToEnd, MobileNetV2MatchesOpenCv) {
    expect_matches_opencv("mobilenet_v2");
}
TEST(ZooEndToEnd, YoloMatchesOpenCv) {
    expect_matches_opencv("yolo_tiny");
}
// Its SiLUs in fp16 arithmetic (`vpuc compile --fp16-activations`) stay as close to OpenCV's fp32
// result.
TEST(ZooEndToEnd, YoloWithFp16ActivationsMatchesOpenCv) {
    frontend::GraphPassOptions passes;
    passes.fp16_activations = true;
    const frontend::GraphPassState passed =
        frontend::run_graph_passes(frontend::import_onnx(model_path("yolo_tiny")).graph, passes);
    EXPECT_TRUE(std::any_of(passed.notes.begin(), passed.notes.end(), [](const std::string &n) {
        return n.rfind("fp16_activations: ", 0) == 0;
    }));
    expect_matches_opencv("yolo_tiny", {}, passes);
}

// The QDQ form compiled as `vpuc compile --precision int8` does (int8 layers, a quantize of
// the float input and a dequantize of the logits), simulated on a standard normal input and
// compared with OpenCV's fp32 result of the fp32 model.
void expect_qdq_close_to_opencv(const std::string &name) {
    const zoo::ModelInfo &info = zoo::model_info(name);
    const NamedTensor input = random_input(info, 7);
    const std::vector<NamedTensor> reference =
        zoo::run_opencv(model_path(name), {input}, info.output_names);

    frontend::ImportOptions options;
    options.precision = frontend::Precision::INT8;
    const frontend::ImportedModel model = frontend::import_onnx(qdq_model_path(name), options);
    const frontend::GraphPassState passed = frontend::run_graph_passes(model.graph);
    // Every convolution and product is int8.
    int64_t int8_layers = 0;
    for (const dsl::Layer &l : passed.graph.layers()) {
        const bool int8 = dsl::is_quantized_int(l.output().type);
        int8_layers += int8 ? 1 : 0;
        if (l.op() == "conv2d" || l.op() == "depthwise_conv2d" || l.op() == "matmul") {
            EXPECT_TRUE(int8) << l.name();
        }
    }
    const target::Target target = target::load_target("vpu27");
    sim::Simulator simulator(target, codegen::lower(passed.graph, target));
    const sim::RunResult result = simulator.run(frontend::blob_inputs(simulator.blob(), {input}));
    const std::vector<NamedTensor> outputs =
        frontend::blob_outputs(simulator.blob(), result.outputs);
    std::printf("%s_qdq: %zu layers, %ld of them int8; simulated latency %.0f us\n", name.c_str(),
                passed.graph.layers().size(), long(int8_layers), result.latency_ns / 1000);
    expect_same_bytes_without_graph_scheduling(passed.graph, target, input, result);
    ASSERT_EQ(outputs.size(), reference.size());
    expect_close_to_opencv(outputs, reference, 0.99, false);
}

TEST(ZooQdqEndToEnd, ResNet18IsCloseToOpenCvsFp32) {
    expect_qdq_close_to_opencv("resnet18");
}
TEST(ZooQdqEndToEnd, ResNet50IsCloseToOpenCvsFp32) {
    expect_qdq_close_to_opencv("resnet50");
}
TEST(ZooQdqEndToEnd, MobileNetV2IsCloseToOpenCvsFp32) {
    expect_qdq_close_to_opencv("mobilenet_v2");
}
TEST(ZooQdqEndToEnd, YoloIsCloseToOpenCvsFp32) {
    expect_qdq_close_to_opencv("yolo_tiny");
}

} // namespace
} // namespace vpuc
