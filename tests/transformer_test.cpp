// The zoo's transformer encoder layer end to end (import -> graph passes -> lower for vpu27 ->
// simulator) against the CPU reference of the same graph and against ONNX Runtime, its
// independent reference (onnxruntime-node run by node on examples/zoo/ort_reference.js; `make
// deps` installs it, and without it these tests fail saying so), and what it brought: the
// layers linear (MatMul of a rank-3 activation by constant weights) and constant_eltwise (Add,
// Sub, Mul, Div with a constant operand) and their import, each against a double-precision
// computation, on odd shapes.
#include <gtest/gtest.h>
#include <onnx/onnx_pb.h>
#include <unistd.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "algorithms/reference.h"
#include "algorithms/registry.h"
#include "codegen/check.h"
#include "codegen/lower.h"
#include "examples/zoo/zoo.h"
#include "frontend/blob_io.h"
#include "frontend/compare.h"
#include "frontend/graph_passes.h"
#include "frontend/onnx_import.h"
#include "frontend/tensor_file.h"
#include "vpu_target/simulator.h"
#include "vpu_target/target.h"

#include "run_command.h"

namespace vpuc {
namespace {

using Halide::float16_t;

// A graph input of `shape`, fp16, row-major.
dsl::Layer f16_input(const std::vector<int64_t> &shape) {
    dsl::TensorDesc t;
    t.name = "x";
    t.shape = dsl::Shape(shape);
    t.type = dsl::ElemType::F16;
    t.order = dsl::DimsOrder::identity(int(shape.size()));
    return dsl::Layer::input(t);
}

// Real values uniform in [lo, hi), rounded to fp16, over every element of `buffer`.
void fill_real(Halide::Buffer<float16_t> &buffer, double lo, double hi, uint32_t seed) {
    std::mt19937 rng(seed);
    std::uniform_real_distribution<double> uniform(lo, hi);
    buffer.for_each_value([&](float16_t &v) { v = float16_t(uniform(rng)); });
}

// Compiles `layer` for both bundled targets, runs it on `input` and returns each target's
// output (after checking it against the CPU reference within the fp16 contract).
std::vector<Halide::Buffer<float16_t>> simulate(const dsl::Layer &layer,
                                                const Halide::Buffer<> &input) {
    std::vector<Halide::Buffer<float16_t>> outputs;
    for (const char *name : {"vpu27", "vpu20"}) {
        codegen::CheckOptions options;
        options.inputs = {input};
        const codegen::CheckResult r = codegen::check_against_reference(
            dsl::Graph(layer.name(), {layer}), target::load_target(name), options);
        EXPECT_TRUE(r.ok()) << name << ": " << r.report();
        outputs.emplace_back(algorithms::from_memory_order(layer.output(), r.run.outputs.at(0)));
    }
    return outputs;
}

// One fp16 unit in the last place at the magnitude of `v` (subnormals: 2^-24).
double fp16_ulp(double v) {
    const double magnitude = std::fabs(v);
    if (magnitude < std::ldexp(1.0, -14)) return std::ldexp(1.0, -24);
    return std::ldexp(1.0, int(std::floor(std::log2(magnitude))) - 10);
}

// [2, 7, 19] x [19, 13] (a batch of two, odd extents): each output within one fp16 ulp of the
// product in double precision, plus what float32 sums of 19 terms may lose.
TEST(Linear, RankThreeByConstantWeights) {
    const int64_t batch = 2, rows = 7, depth = 19, columns = 13;
    Halide::Buffer<float> weights{int(depth), int(columns)}; // dims (k, n)
    std::mt19937 rng(5);
    std::uniform_real_distribution<float> uniform(-1, 1);
    weights.for_each_value([&](float &v) { v = float(float16_t(uniform(rng))); });
    dsl::Attrs attrs;
    attrs.set("weights", Halide::Buffer<>(weights));
    const dsl::Layer x = f16_input({batch, rows, depth});
    const dsl::Layer y = algorithms::layer_registry().build("linear", "y", {x}, attrs);
    EXPECT_EQ(y.output().shape, dsl::Shape({batch, rows, columns}));
    Halide::Buffer<float16_t> input(algorithms::make_buffer(x.output())); // (row, k, 1, image)
    fill_real(input, -2, 2, 6);
    for (const Halide::Buffer<float16_t> &out : simulate(y, input))
        for (int n = 0; n < batch; ++n)
            for (int r = 0; r < rows; ++r)
                for (int c = 0; c < columns; ++c) {
                    double exact = 0, magnitude = 0;
                    for (int k = 0; k < depth; ++k) {
                        const double term = double(float(input(r, k, 0, n))) * weights(k, c);
                        exact += term;
                        magnitude += std::fabs(term);
                    }
                    EXPECT_NEAR(double(float(out(r, c, 0, n))), exact,
                                fp16_ulp(exact) + 1e-6 * magnitude)
                        << "image " << n << ", row " << r << ", column " << c;
                }
}

// c - x and c / x with a constant of one value per row ([7, 1] against [1, 7, 11]), and x + c
// with a scalar: within one fp16 ulp of the double-precision result.
TEST(ConstantEltwise, BroadcastConstantOnEitherSide) {
    const int64_t rows = 7, columns = 11;
    Halide::Buffer<float> per_row(1, int(rows)); // ONNX shape [7, 1], reversed
    for (int r = 0; r < rows; ++r) per_row(0, r) = 0.375f + 1.25f * float(r);
    Halide::Buffer<float> scalar = Halide::Buffer<float>::make_scalar();
    scalar() = 0.70710677f;
    const dsl::Layer x = f16_input({1, rows, columns});
    Halide::Buffer<float16_t> input(algorithms::make_buffer(x.output())); // (row, column, 1)
    fill_real(input, 0.5, 4, 7);
    struct Case {
        const char *op;
        Halide::Buffer<float> constant;
        bool constant_first;
    };
    for (const Case &c :
         {Case{"sub", per_row, true}, Case{"div", per_row, true}, Case{"add", scalar, false}}) {
        SCOPED_TRACE(c.op);
        dsl::Attrs attrs;
        attrs.set("op", std::string(c.op));
        attrs.set("constant", Halide::Buffer<>(c.constant));
        attrs.set("constant_first", int64_t(c.constant_first ? 1 : 0));
        const dsl::Layer y =
            algorithms::layer_registry().build("constant_eltwise", "y", {x}, attrs);
        for (const Halide::Buffer<float16_t> &out : simulate(y, input))
            for (int r = 0; r < rows; ++r)
                for (int i = 0; i < columns; ++i) {
                    const double v = double(float(input(r, i, 0))),
                                 k = c.constant.dimensions() ? c.constant(0, r) : c.constant();
                    const std::string op = c.op;
                    const double exact = op == "sub" ? k - v : op == "div" ? k / v : v + k;
                    EXPECT_NEAR(double(float(out(r, i, 0))), exact, fp16_ulp(exact))
                        << "row " << r << ", column " << i;
                }
    }
}

// The constant may not vary along the batch (images are computed one at a time), nor fail to
// broadcast.
TEST(ConstantEltwise, RefusesConstantsThatDoNotBroadcast) {
    const dsl::Layer x = f16_input({2, 3, 5});
    for (const std::vector<int> &extents : {std::vector<int>{5, 3, 2}, std::vector<int>{4}}) {
        dsl::Attrs attrs;
        attrs.set("op", std::string("mul"));
        attrs.set("constant", Halide::Buffer<>(Halide::Buffer<float>(extents)));
        EXPECT_THROW(algorithms::layer_registry().build("constant_eltwise", "y", {x}, attrs),
                     dsl::LayerError);
    }
}

// A value info of FLOAT elements of `shape`.
void set_float_type(onnx::ValueInfoProto &v, const std::string &name,
                    const std::vector<int64_t> &shape) {
    v.set_name(name);
    v.mutable_type()->mutable_tensor_type()->set_elem_type(onnx::TensorProto::FLOAT);
    for (int64_t d : shape)
        v.mutable_type()->mutable_tensor_type()->mutable_shape()->add_dim()->set_dim_value(d);
}

void add_initializer(onnx::GraphProto &g, const std::string &name,
                     const std::vector<int64_t> &shape, const std::vector<float> &values) {
    onnx::TensorProto &t = *g.add_initializer();
    t.set_name(name);
    t.set_data_type(onnx::TensorProto::FLOAT);
    for (int64_t d : shape) t.add_dims(d);
    for (float v : values) t.add_float_data(v);
}

void add_node(onnx::GraphProto &g, const std::string &op, const std::vector<std::string> &inputs,
              const std::string &output) {
    onnx::NodeProto &n = *g.add_node();
    n.set_name(output);
    n.set_op_type(op);
    for (const std::string &in : inputs) n.add_input(in);
    n.add_output(output);
}

// The ONNX model y = (bias - x W) / 2.5 with x [1, 3, 5] of floats, W [5, 4] of eighths (not
// square, so a transposed W fails) and a bias of 4 values.
struct Projection {
    static constexpr int64_t rows = 3, depth = 5, columns = 4;
    std::vector<float> w, bias;
    std::string bytes;
};

Projection make_projection() {
    Projection p;
    const int64_t rows = p.rows, depth = p.depth, columns = p.columns;
    for (int i = 0; i < depth * columns; ++i) p.w.push_back(float((i * 7) % 11 - 5) / 8);
    for (int i = 0; i < columns; ++i) p.bias.push_back(0.5f * float(i) - 0.75f);
    onnx::ModelProto m;
    m.set_ir_version(8);
    m.add_opset_import()->set_version(13);
    onnx::GraphProto &g = *m.mutable_graph();
    g.set_name("projection");
    set_float_type(*g.add_input(), "x", {1, rows, depth});
    add_initializer(g, "w", {depth, columns}, p.w);
    add_initializer(g, "bias", {columns}, p.bias);
    add_initializer(g, "divisor", {}, {2.5f});
    add_node(g, "MatMul", {"x", "w"}, "product");
    add_node(g, "Sub", {"bias", "product"}, "shifted");
    add_node(g, "Div", {"shifted", "divisor"}, "y");
    set_float_type(*g.add_output(), "y", {1, rows, columns});
    p.bytes = m.SerializeAsString();
    return p;
}

// The importer's mapping, against ONNX's definitions computed by hand in double precision: the
// CPU reference of the imported projection within what its three fp16 roundings allow, and the
// simulator within two ulps of the reference.
TEST(TransformerImport, MatMulByWeightsSubFromConstantDivByConstant) {
    const Projection p = make_projection();
    const int64_t rows = p.rows, depth = p.depth, columns = p.columns;
    const std::vector<float> &w = p.w, &bias = p.bias;
    const std::string &bytes = p.bytes;
    const dsl::Graph graph =
        frontend::import_onnx_bytes({bytes.begin(), bytes.end()}, "projection.onnx").graph;
    Halide::Buffer<float16_t> input(algorithms::make_buffer(graph.inputs()[0].output()));
    fill_real(input, -2, 2, 12); // (row, k, 1)
    const Halide::Buffer<float16_t> reference(algorithms::run_reference(graph, {input}).at(0));
    for (int r = 0; r < rows; ++r)
        for (int c = 0; c < columns; ++c) {
            double product = 0;
            for (int k = 0; k < depth; ++k)
                product += double(float(input(r, k, 0))) * double(w[size_t(k * columns + c)]);
            const double shifted = double(bias[size_t(c)]) - product, exact = shifted / 2.5;
            // Each of the three layers rounds to fp16: the product's and the difference's
            // roundings reach the result divided by 2.5.
            const double bound = (fp16_ulp(product) + fp16_ulp(shifted)) / 2.5 + fp16_ulp(exact);
            EXPECT_NEAR(double(float(reference(r, c, 0))), exact, bound)
                << "row " << r << ", column " << c;
        }
    codegen::CheckOptions options;
    options.inputs = {input};
    options.tolerance.f16_ulp = 2;
    const codegen::CheckResult r =
        codegen::check_against_reference(graph, target::load_target("vpu27"), options);
    EXPECT_TRUE(r.ok()) << r.report();
}

// The ONNX model y = x W, x [batch, rows, depth] of floats, W [depth, columns] as given.
std::string matmul_model(int64_t batch, int64_t rows, int64_t depth, int64_t columns,
                         const std::vector<float> &w) {
    onnx::ModelProto m;
    m.set_ir_version(8);
    m.add_opset_import()->set_version(13);
    onnx::GraphProto &g = *m.mutable_graph();
    g.set_name("matmul");
    set_float_type(*g.add_input(), "x", {batch, rows, depth});
    add_initializer(g, "w", {depth, columns}, w);
    add_node(g, "MatMul", {"x", "w"}, "y");
    set_float_type(*g.add_output(), "y", {batch, rows, columns});
    return m.SerializeAsString();
}

// MatMul of one image [1, M, K] by constant weights imports as the DPU's matmul between a
// reshape and a transpose each way that keep the bytes where they are, and gives the bytes the
// SHAVEs' linear layer gives on the same input (odd extents, real values); two images stay one
// linear layer.
TEST(TransformerImport, AProductOfOneImageIsTheDpusMatmulWithTheLinearLayersBytes) {
    const int64_t rows = 7, depth = 19, columns = 13;
    std::mt19937 rng(9);
    std::uniform_real_distribution<float> uniform(-1, 1);
    std::vector<float> w(size_t(depth * columns));
    for (float &v : w) v = uniform(rng);
    const std::string bytes = matmul_model(1, rows, depth, columns, w);
    const dsl::Graph graph =
        frontend::import_onnx_bytes({bytes.begin(), bytes.end()}, "matmul.onnx").graph;
    std::vector<std::string> ops;
    for (const dsl::Layer &l : graph.layers()) ops.push_back(l.op());
    EXPECT_EQ(ops,
              (std::vector<std::string>{"reshape", "transpose", "matmul", "transpose", "reshape"}));
    // Each transpose relabels the bytes: the registry makes it a view.
    for (const dsl::Layer &l : graph.layers()) {
        if (l.op() == "transpose") {
            EXPECT_TRUE(algorithms::layer_registry().find("transpose")->view(l).has_value())
                << l.name();
        }
    }

    // The linear layer of the same weights, fp16, dims (k, n).
    Halide::Buffer<float16_t> weights{int(depth), int(columns)};
    for (int k = 0; k < depth; ++k)
        for (int n = 0; n < columns; ++n) weights(k, n) = float16_t(w[size_t(k * columns + n)]);
    dsl::Attrs attrs;
    attrs.set("weights", Halide::Buffer<>(weights));
    const dsl::Layer linear =
        algorithms::layer_registry().build("linear", "y", {f16_input({1, rows, depth})}, attrs);
    Halide::Buffer<float16_t> input(algorithms::make_buffer(graph.inputs()[0].output()));
    fill_real(input, -2, 2, 13);
    const dsl::TensorDesc &out = linear.output();
    const std::vector<uint8_t> expected = algorithms::to_memory_order(
        out, algorithms::run_reference(dsl::Graph("linear", {linear}), {input}).at(0));
    for (const char *target : {"vpu27", "vpu20"}) {
        codegen::CheckOptions options;
        options.inputs = {input};
        const codegen::CheckResult r =
            codegen::check_against_reference(graph, target::load_target(target), options);
        ASSERT_TRUE(r.ok()) << target << ": " << r.report();
        EXPECT_EQ(r.run.outputs.at(0), expected) << target;
    }

    const std::string two = matmul_model(2, rows, depth, columns, w);
    const dsl::Graph batched =
        frontend::import_onnx_bytes({two.begin(), two.end()}, "matmul.onnx").graph;
    ASSERT_EQ(batched.layers().size(), 1u);
    EXPECT_EQ(batched.layers()[0].op(), "linear");

    // A storage order is one of a rank-4 output's.
    dsl::Attrs rank3;
    rank3.set("perm", std::vector<int64_t>{0, 2, 1});
    rank3.set("order", std::string("NHWC"));
    try {
        algorithms::layer_registry().build("transpose", "t", {f16_input({1, rows, depth})}, rank3);
        ADD_FAILURE() << "a rank-3 output stored NHWC was accepted";
    } catch (const dsl::LayerError &e) {
        EXPECT_NE(std::string(e.what()).find("transpose 't': order 'NHWC' of a tensor of rank 3"),
                  std::string::npos)
            << e.what();
    }
}

// The zoo's transformer encoder layer (4-head attention, LayerNorm, GELU MLP on 64x128),
// imported, through the graph passes, lowered for vpu27 and simulated on a random input,
// against the CPU reference of the same graph. Each SHAVE layer is within one ulp of the
// reference given the same inputs; through twenty layers and two LayerNorms such differences
// grow in relative terms near zero, so the whole is held to a tight absolute and relative
// tolerance, a small mean error and the cosine.
TEST(TransformerEncoder, CompilesAndMatchesTheReference) {
    const frontend::ImportedModel model = frontend::import_onnx_bytes(
        zoo::model_bytes("transformer_encoder"), "transformer_encoder.onnx");
    const dsl::Graph graph = frontend::run_graph_passes(model.graph).graph;
    ASSERT_EQ(graph.inputs().size(), 1u);
    ASSERT_EQ(graph.outputs().size(), 1u);
    const dsl::TensorDesc &in = graph.inputs()[0].output();
    Halide::Buffer<float16_t> input(algorithms::make_buffer(in));
    fill_real(input, -2, 2, 11);
    const target::Target target = target::load_target("vpu27");
    const std::vector<uint8_t> blob = codegen::lower(graph, target);
    const sim::RunResult run =
        sim::Simulator(target, blob).run({algorithms::to_memory_order(in, input)});
    const Halide::Buffer<> got =
        algorithms::from_memory_order(graph.outputs()[0].output(), run.outputs.at(0));
    const Halide::Buffer<> reference = algorithms::run_reference(graph, {input}).at(0);
    frontend::Tolerance tolerance;
    tolerance.atol = tolerance.rtol = 2e-3;
    tolerance.min_cosine = 0.9999;
    const frontend::TensorComparison c = frontend::compare_tensors(got, reference, tolerance);
    EXPECT_TRUE(c.passed) << c.reason << " (cosine " << c.cosine << ")";
    EXPECT_LT(c.mean_abs_error, 1e-4);
    EXPECT_LE(c.max_abs_error, 4e-3);
}

// ONNX Runtime, the independent reference: node runs examples/zoo/ort_reference.js with the
// onnxruntime-node that `make deps` installs (the paths are tests/CMakeLists.txt's).
namespace fs = std::filesystem;
using frontend::NamedTensor;

std::string shell_quoted(const std::string &word) {
    std::string quoted = "'";
    for (char c : word) quoted += c == '\'' ? std::string("'\\''") : std::string(1, c);
    return quoted + "'";
}

// The script with `args`, node finding its packages in `node_modules`.
tests::CommandRun run_ort_script(const std::vector<std::string> &args,
                                 const std::string &node_modules = VPUC_ORT_NODE_MODULES) {
    std::string command = "NODE_PATH=" + shell_quoted(node_modules) + " " +
                          shell_quoted(VPUC_NODE) + " " + shell_quoted(VPUC_ORT_SCRIPT);
    for (const std::string &arg : args) command += " " + shell_quoted(arg);
    return tests::run_command(command);
}

class OnnxRuntimeReference : public ::testing::Test {
  protected:
    // No silent skip: CI's `make test` installs both.
    void SetUp() override {
        if (!fs::exists(VPUC_NODE))
            FAIL() << "node is missing (CMake found '" VPUC_NODE "'): run `make deps`, which "
                      "installs node and onnxruntime-node, and configure again";
        if (!fs::exists(fs::path(VPUC_ORT_NODE_MODULES) / "onnxruntime-node" / "package.json"))
            FAIL() << "onnxruntime-node is missing from " VPUC_ORT_NODE_MODULES
                      ": run `make deps`, which installs it";
    }
    static void TearDownTestSuite() { fs::remove_all(scratch()); }

    // A directory of its own for the models, inputs and outputs.
    static const fs::path &scratch() {
        static const fs::path dir = [] {
            fs::path d =
                fs::temp_directory_path() / ("vpuc_transformer_test_" + std::to_string(::getpid()));
            fs::create_directories(d);
            return d;
        }();
        return dir;
    }

    // ONNX Runtime's outputs of the model at `model` on `inputs`, in the model's order, read
    // back from the directory the script writes, scratch()/`run`.
    static std::vector<NamedTensor> run_onnxruntime(const std::string &model,
                                                    const std::vector<NamedTensor> &inputs,
                                                    const std::string &run) {
        const fs::path dir = scratch() / run;
        fs::create_directories(dir);
        std::vector<std::string> args = {model, "--out", (dir / "outputs").string()};
        for (const NamedTensor &input : inputs) {
            const std::string file =
                (dir / ("input_" + std::to_string(args.size()) + ".npy")).string();
            frontend::write_npy(file, input.value);
            args.insert(args.end(), {"--input", input.name + "=" + file});
        }
        const tests::CommandRun script = run_ort_script(args);
        if (script.status != 0) {
            ADD_FAILURE() << "ort_reference.js exited with status " << script.status << ":\n"
                          << script.output;
            return {};
        }
        return frontend::read_tensor_dir((dir / "outputs").string());
    }

    static std::string write_model(const std::string &name, const std::string &bytes) {
        const fs::path path = scratch() / name;
        std::ofstream(path, std::ios::binary) << bytes;
        return path.string();
    }
};

// The script on exact fractions (x in eighths): each output as float32 computes it from exact
// sums, the tensor read back with its name, numpy shape and element order.
TEST_F(OnnxRuntimeReference, ReadsNpyInputsAndWritesTheOutputs) {
    const Projection p = make_projection();
    Halide::Buffer<float> x(int(p.depth), int(p.rows), 1); // numpy [1, 3, 5], reversed
    x.for_each_element(
        [&](int k, int r, int) { x(k, r, 0) = float((r * 5 + k * 3) % 17 - 8) / 8; });
    const std::vector<NamedTensor> outputs =
        run_onnxruntime(write_model("projection.onnx", p.bytes), {{"x", x}}, "projection");
    ASSERT_EQ(outputs.size(), 1u);
    EXPECT_EQ(outputs[0].name, "y");
    ASSERT_EQ(frontend::shape_text(outputs[0].value), "1x3x4");
    ASSERT_EQ(outputs[0].value.type(), Halide::Float(32));
    const Halide::Buffer<float> y(outputs[0].value);
    for (int r = 0; r < p.rows; ++r)
        for (int c = 0; c < p.columns; ++c) {
            float product = 0; // sums of multiples of 1/64: exact
            for (int k = 0; k < p.depth; ++k)
                product += x(k, r, 0) * p.w[size_t(k * p.columns + c)];
            const float expected = (p.bias[size_t(c)] - product) / 2.5f;
            EXPECT_NEAR(y(c, r, 0), expected, std::fabs(expected) * 0x1p-23f)
                << "row " << r << ", column " << c;
        }
}

// A missing file, one whose data falls short of its shape, an input of the wrong dtype or
// shape, an unknown or a missing input, a file that is no model and a missing
// onnxruntime-node: exit status 1 and a message naming the problem.
TEST_F(OnnxRuntimeReference, FailuresExitNonZeroNamingTheProblem) {
    const std::string model = write_model("projection.onnx", make_projection().bytes);
    const std::string integers = (scratch() / "integers.npy").string();
    frontend::write_npy(integers, Halide::Buffer<int32_t>(5, 3, 1));
    const std::string floats = (scratch() / "floats.npy").string();
    frontend::write_npy(floats, Halide::Buffer<float>(5, 3, 1));
    const std::string wide = (scratch() / "wide.npy").string();
    frontend::write_npy(wide, Halide::Buffer<float>(6, 3, 1));
    const std::string truncated = (scratch() / "truncated.npy").string();
    const std::vector<uint8_t> bytes = frontend::serialize_npy(Halide::Buffer<float>(5, 3, 1));
    std::ofstream(truncated, std::ios::binary)
        .write(reinterpret_cast<const char *>(bytes.data()), std::streamsize(bytes.size() - 4));
    const std::string missing = (scratch() / "missing.npy").string();
    const std::string out = (scratch() / "failures").string();
    struct Case {
        std::vector<std::string> args;
        std::string node_modules, message;
    };
    for (const Case &c : {
             Case{{model, "--input", "x=" + missing, "--out", out},
                  VPUC_ORT_NODE_MODULES,
                  "cannot read '" + missing + "'"},
             Case{{model, "--input", "x=" + integers, "--out", out},
                  VPUC_ORT_NODE_MODULES,
                  "holds int32 ('i4'), the model's input is float32"},
             Case{{model, "--input", "x=" + truncated, "--out", out},
                  VPUC_ORT_NODE_MODULES,
                  truncated + ": 56 bytes of data, but shape (1, 3, 5) of '<f4' needs 60"},
             Case{{model, "--input", "x=" + wide, "--out", out},
                  VPUC_ORT_NODE_MODULES,
                  "ONNX Runtime failed: "},
             Case{{model, "--input", "q=" + floats, "--out", out},
                  VPUC_ORT_NODE_MODULES,
                  "--input q: the model has no input 'q' (its inputs: x)"},
             Case{{model, "--out", out},
                  VPUC_ORT_NODE_MODULES,
                  "no --input for the model's inputs x"},
             Case{{floats, "--input", "x=" + floats, "--out", out},
                  VPUC_ORT_NODE_MODULES,
                  floats + ": ONNX Runtime cannot load the model"},
             Case{{model, "--input", "x=" + floats, "--out", out},
                  scratch().string(),
                  "cannot load onnxruntime-node from NODE_PATH '" + scratch().string() +
                      "': it is not installed; `make deps` installs it"},
         }) {
        const tests::CommandRun run = run_ort_script(c.args, c.node_modules);
        EXPECT_EQ(run.status, 1) << run.output;
        EXPECT_NE(run.output.find(c.message), std::string::npos) << run.output;
    }
    EXPECT_FALSE(fs::exists(out)) << "nothing written";
}

// The zoo's transformer encoder layer as `vpuc compile` and `vpuc run` take it (import, graph
// passes, lowering for vpu27, the simulator in fp16) against ONNX Runtime's fp32 on the same
// standard normal input, rounded to fp16 so that both see the same values.
TEST_F(OnnxRuntimeReference, TransformerEncoderMatchesTheSimulator) {
    const zoo::ModelInfo &info = zoo::model_info("transformer_encoder");
    const std::string path = zoo::write_model(info.name, scratch().string());
    Halide::Buffer<float> values(
        std::vector<int>(info.input_shape.rbegin(), info.input_shape.rend()));
    std::mt19937 rng(7);
    std::normal_distribution<float> normal(0.0f, 1.0f);
    values.for_each_value([&](float &v) { v = float(float16_t(normal(rng))); });
    const NamedTensor input{info.input_name, values};
    const std::vector<NamedTensor> reference = run_onnxruntime(path, {input}, info.name);
    ASSERT_EQ(reference.size(), 1u);
    EXPECT_EQ(reference[0].name, info.output_names.at(0));

    const dsl::Graph graph = frontend::run_graph_passes(frontend::import_onnx(path).graph).graph;
    const target::Target target = target::load_target("vpu27");
    sim::Simulator simulator(target, codegen::lower(graph, target));
    const sim::RunResult result = simulator.run(frontend::blob_inputs(simulator.blob(), {input}));
    const std::vector<NamedTensor> outputs =
        frontend::blob_outputs(simulator.blob(), result.outputs);
    ASSERT_EQ(outputs.size(), 1u);

    const frontend::TensorComparison c = frontend::compare_tensors(
        outputs[0].value, reference[0].value, frontend::Tolerance{0.01, 0.01, 0.999});
    std::printf("transformer_encoder against ONNX Runtime: cosine %.7f, max abs error %.4g, mean "
                "abs error %.3g\n",
                c.cosine, c.max_abs_error, c.mean_abs_error);
    EXPECT_TRUE(c.passed) << c.reason;
    EXPECT_GE(c.cosine, 0.999);
    EXPECT_LE(c.max_abs_error, 0.01);
    EXPECT_LT(c.mean_abs_error, 1e-3);
}

} // namespace
} // namespace vpuc
