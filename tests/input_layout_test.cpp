// NCHW network inputs: loaded as they are (the DMAs gather each pixel's channels), bit-exact,
// and noted in the lowering log with what loading them costs against NHWC.
#include <gtest/gtest.h>

#include <regex>
#include <sstream>
#include <string>

#include "codegen/lower.h"
#include "lowering_fixtures.h"

namespace vpuc {
namespace {

using dsl::ElemType;

dsl::TensorDesc nchw(dsl::TensorDesc t) {
    t.order = dsl::DimsOrder::NCHW();
    return t;
}

// The bytes of a (c, x, y) buffer, of one-byte elements, in NCHW order.
std::vector<uint8_t> nchw_bytes(const Halide::Buffer<uint8_t> &b) {
    std::vector<uint8_t> out;
    for (int c = 0; c < b.dim(0).extent(); ++c)
        for (int y = 0; y < b.dim(2).extent(); ++y)
            for (int x = 0; x < b.dim(1).extent(); ++x) out.push_back(b(c, x, y));
    return out;
}

struct Lowered {
    std::vector<uint8_t> blob;
    std::string log;
};

Lowered lower_logged(const dsl::Graph &graph, const target::Target &target) {
    std::ostringstream log;
    codegen::LowerOptions options;
    options.log = &log;
    Lowered l;
    l.blob = codegen::lower(graph, target, options);
    l.log = log.str();
    return l;
}

class InputLayout : public ::testing::TestWithParam<std::string> {};

// A conv on an odd-sized NCHW input gives the reference's bytes, and costs more than on the
// same input as NHWC; the log says so with the estimate.
TEST_P(InputLayout, NchwInputIsExactAndNotedWithItsCost) {
    const target::Target target = target::load_target(GetParam());
    const dsl::TensorDesc desc = nchw(test::activation("img", 19, 13, 11));
    const dsl::Layer in = dsl::Layer::input(desc);
    const dsl::Graph graph("nchw", {test::conv3x3("conv", in, 21, 3)});
    const Lowered lowered = lower_logged(graph, target);

    const Halide::Buffer<uint8_t> input = test::random_input(desc, 5);
    const Halide::Buffer<> want = algorithms::run_reference(graph, {input}).at(0);
    const sim::RunResult nchw_run = sim::Simulator(target, lowered.blob).run({nchw_bytes(input)});
    // The conv's output keeps its input's layout.
    EXPECT_EQ(nchw_run.outputs.at(0), nchw_bytes(Halide::Buffer<uint8_t>(want)));

    const std::regex note("note: input 'img' is NCHW, and the DPU and SHAVEs read NHWC: its "
                          "loads gather the channels one element at a time\\. Loading it once "
                          "takes about ([0-9]+) DMA cycles, ([0-9]+) more than from NHWC "
                          "\\(([0-9]+)\\); give it as NHWC \\(DimsOrder::NHWC\\)\n");
    std::smatch m;
    ASSERT_TRUE(std::regex_search(lowered.log, m, note)) << lowered.log;
    const long long total = std::stoll(m[1]), extra = std::stoll(m[2]), nhwc = std::stoll(m[3]);
    EXPECT_EQ(total, extra + nhwc);
    EXPECT_GT(extra, 4 * nhwc) << "19 channels gathered one byte at a time";

    // The same network on an NHWC input: no note, and a shorter run.
    const dsl::Layer nhwc_in = dsl::Layer::input(test::activation("img", 19, 13, 11));
    const dsl::Graph nhwc_graph("nhwc", {test::conv3x3("conv", nhwc_in, 21, 3)});
    const Lowered nhwc_lowered = lower_logged(nhwc_graph, target);
    EXPECT_EQ(nhwc_lowered.log.find("note: input"), std::string::npos) << nhwc_lowered.log;
    const sim::RunResult nhwc_run =
        sim::Simulator(target, nhwc_lowered.blob).run({test::bytes_of(input)});
    EXPECT_EQ(nhwc_run.outputs.at(0), test::bytes_of(want));
    EXPECT_GT(nchw_run.latency_ns, nhwc_run.latency_ns);
}

// One channel, or one pixel: NCHW and NHWC are the same bytes, and there is nothing to note.
TEST_P(InputLayout, NchwOfOneChannelOrOnePixelIsNotNoted) {
    const target::Target target = target::load_target(GetParam());
    for (const auto &[c, w, h] : {std::tuple{1, 9, 7}, std::tuple{24, 1, 1}}) {
        const dsl::Layer in = dsl::Layer::input(nchw(test::activation("img", c, w, h)));
        algorithms::PoolParams p;
        const Lowered lowered =
            lower_logged(dsl::Graph("one", {algorithms::max_pool("pool", in, p)}), target);
        EXPECT_EQ(lowered.log.find("note: input"), std::string::npos) << lowered.log;
    }
}

INSTANTIATE_TEST_SUITE_P(Targets, InputLayout, ::testing::Values("vpu27", "vpu20"));

} // namespace
} // namespace vpuc
