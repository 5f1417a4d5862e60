// The zoo's transformer encoder layer end to end (import -> graph passes -> lower for vpu27 ->
// simulator) against the CPU reference of the same graph, and what it brought: the layers
// linear (MatMul of a rank-3 activation by constant weights) and constant_eltwise (Add, Sub,
// Mul, Div with a constant operand) and their import, each against a double-precision
// computation, on odd shapes.
#include <gtest/gtest.h>
#include <onnx/onnx_pb.h>

#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "algorithms/reference.h"
#include "algorithms/registry.h"
#include "codegen/check.h"
#include "codegen/lower.h"
#include "examples/zoo/zoo.h"
#include "frontend/compare.h"
#include "frontend/graph_passes.h"
#include "frontend/onnx_import.h"
#include "vpu_target/simulator.h"
#include "vpu_target/target.h"

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

// The importer's mapping, against ONNX's definitions computed by hand in double precision:
// y = (bias - x W) / 2.5 with x [1, 3, 5], W [5, 4] (not square, so a transposed W fails) and
// a bias of 4 values; the CPU reference of the imported graph within what its three fp16
// roundings allow, and the simulator within two ulps of the reference.
TEST(TransformerImport, MatMulByWeightsSubFromConstantDivByConstant) {
    const int64_t rows = 3, depth = 5, columns = 4;
    std::vector<float> w, bias;
    for (int i = 0; i < depth * columns; ++i) w.push_back(float((i * 7) % 11 - 5) / 8);
    for (int i = 0; i < columns; ++i) bias.push_back(0.5f * float(i) - 0.75f);
    onnx::ModelProto m;
    m.set_ir_version(8);
    m.add_opset_import()->set_version(13);
    onnx::GraphProto &g = *m.mutable_graph();
    g.set_name("projection");
    set_float_type(*g.add_input(), "x", {1, rows, depth});
    add_initializer(g, "w", {depth, columns}, w);
    add_initializer(g, "bias", {columns}, bias);
    add_initializer(g, "divisor", {}, {2.5f});
    add_node(g, "MatMul", {"x", "w"}, "product");
    add_node(g, "Sub", {"bias", "product"}, "shifted");
    add_node(g, "Div", {"shifted", "divisor"}, "y");
    set_float_type(*g.add_output(), "y", {1, rows, columns});
    const std::string bytes = m.SerializeAsString();
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

} // namespace
} // namespace vpuc
