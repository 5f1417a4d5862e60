// SHAVE layers through the lowering, from what the compiler refuses to what it makes of a
// layer's schedule: reads outside an input are refused by name, and the kernel keeps its
// vectorization under unroll and fuse. Results are compared with the CPU reference byte for
// byte.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "lowering_fixtures.h"

using namespace vpuc;
using vpuc::test::activation;

namespace {

// out(c, x, y) = max(in(c, x + dx, y), 120): a ReLU around the input's zero point, over an
// output of w x h, reading the input directly or through Halide's repeat_edge.
dsl::Layer shifted_relu(const std::string &name, const dsl::Layer &in, int64_t w, int64_t h, int dx,
                        bool repeat_edge = false) {
    const dsl::TensorDesc input = in.output();
    const int in_w = int(input.shape[dsl::dims::W]), in_h = int(input.shape[dsl::dims::H]),
              in_c = int(input.shape[dsl::dims::C]);
    return dsl::Layer::make("shifted_relu", activation(name, in_c, w, h), {in},
                            [=](const std::vector<Halide::Func> &inputs) {
                                const auto &v = dsl::act_vars();
                                Halide::Func source = inputs[0];
                                if (repeat_edge)
                                    source = Halide::BoundaryConditions::repeat_edge(
                                        inputs[0], {{0, in_c}, {0, in_w}, {0, in_h}});
                                Halide::Func f(name);
                                f(v.c, v.x, v.y) =
                                    Halide::max(source(v.c, v.x + dx, v.y), uint8_t(120));
                                return f;
                            });
}

// The message of the LoweringError lower() throws for `output`, or "" if it compiles.
std::string lowering_error(const dsl::Layer &output) {
    try {
        codegen::lower(dsl::Graph("g", {output}), target::load_target("vpu27"));
    } catch (const codegen::LoweringError &e) {
        return e.what();
    }
    return "";
}

// A pointwise layer declared larger than its input used to reach CMX allocation with an empty
// input buffer for the tasks past the input, and abort there.
TEST(ShaveLayer, AnOutputLargerThanItsInputIsRefused) {
    const dsl::Layer in = dsl::Layer::input(activation("in", 32, 20, 20));
    dsl::Layer larger = shifted_relu("larger", in, 40, 40, 0);
    larger.schedule().on_shave().split("y", "yo", "yi", 10);
    EXPECT_EQ(lowering_error(larger).rfind("layer 'larger': its output, x [0, 40), reads x [0, "
                                           "40) of input 'in', which has x [0, 20); read the "
                                           "input through a boundary condition",
                                           0),
              0u)
        << lowering_error(larger);
    dsl::Layer unscheduled = shifted_relu("unscheduled", in, 20, 40, 0);
    EXPECT_EQ(lowering_error(unscheduled)
                  .rfind("layer 'unscheduled': its output, y [0, 40), reads y [0, 40) of input "
                         "'in', which has y [0, 20)",
                         0),
              0u)
        << lowering_error(unscheduled);
}

// A stencil with no boundary condition reads a column past its input: refused at compile time
// with the advice to add one, and with repeat_edge it computes what the reference does.
TEST(ShaveLayer, AReadPastTheInputIsRefusedAndABoundaryConditionFixesIt) {
    const dsl::Layer in = dsl::Layer::input(activation("in", 32, 20, 20));
    dsl::Layer past = shifted_relu("past", in, 20, 20, 1);
    past.schedule().on_shave();
    EXPECT_EQ(lowering_error(past),
              "layer 'past': its output, x [0, 20), reads x [1, 21) of input 'in', which has x "
              "[0, 20); read the input through a boundary condition "
              "(Halide::BoundaryConditions::repeat_edge or constant_exterior, or clamp the "
              "coordinates), or declare an output that reads only inside the input");
    dsl::Layer edge = shifted_relu("edge", in, 20, 20, 1, true);
    edge.schedule().on_shave().split("x", "xo", "xi", 8);
    test::compile_and_check(dsl::Graph("edge", {edge}), "vpu27");
}

// The ops per output vector the blob's kernel for `layer` counts (kernels are named after
// their layers).
float kernel_ops(const std::vector<uint8_t> &blob, const std::string &layer) {
    for (const auto *kernel : *blob::GetBlob(blob.data())->kernels())
        if (kernel->name()->str().find("_" + layer) != std::string::npos)
            return kernel->arith_ops_per_vector() + kernel->special_ops_per_vector();
    ADD_FAILURE() << "no kernel for layer '" << layer << "'";
    return 0;
}

const dsl::Quant kProbability = dsl::Quant::per_tensor(1.0f / 256, 0);

// Scheduling the loops inside a task replaces the kernel's default schedule; without a
// vectorize of its own, the innermost loop is still vectorized by a full vector. A sigmoid
// computes in float32, so a scalar kernel would take about four times the instructions.
TEST(ShaveLayer, UnrollAndFuseKeepTheKernelVectorized) {
    const dsl::Layer in = dsl::Layer::input(activation("in", 32, 9, 10));
    dsl::Layer plain = algorithms::sigmoid("plain", in, kProbability);
    plain.schedule().on_shave();
    dsl::Layer unrolled = algorithms::sigmoid("unrolled", plain, kProbability);
    unrolled.schedule().on_shave().unroll("c");
    dsl::Layer fused = algorithms::sigmoid("fused", unrolled, kProbability);
    fused.schedule().on_shave().split("y", "yo", "yi", 2).fuse("c", "x", "cx");
    dsl::Layer rows = algorithms::sigmoid("rows", fused, kProbability);
    rows.schedule().on_shave().split("y", "yo", "yi", 5).unroll("yi");
    const std::vector<uint8_t> blob =
        test::compile_and_check(dsl::Graph("vectorized", {rows}), "vpu27").blob;
    const float vectorized = kernel_ops(blob, "plain");
    EXPECT_GT(vectorized, 0);
    for (const std::string layer : {"unrolled", "fused", "rows"})
        EXPECT_LE(kernel_ops(blob, layer), 1.25f * vectorized) << layer;
}

} // namespace
