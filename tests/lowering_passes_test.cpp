// The passes between the loop nests and allocation, one at a time: each verifier accepts what
// its pass makes and names the task or tensor when the promise is broken.
#include <gtest/gtest.h>

#include <cstring>

#include "lowering_fixtures.h"
#include "pass_fixtures.h"

using namespace vpuc;
using namespace vpuc::test;

namespace {

// A 3x3 conv over both tiles by rows: both tiles wait for the same weights, whose copy is
// large enough to be split between the DMA engines.
struct TwoTileConv : ::testing::Test {
    const target::Target target = target::load_target("vpu27");
    dsl::Layer in = dsl::Layer::input(activation("in", 64, 16, 16));
    dsl::Layer conv = conv3x3("conv", in, 64, 3);
    dsl::Graph graph{"two_tiles", {conv}};
    codegen::LoweringState s{graph, target};

    void SetUp() override {
        conv.schedule()
            .distribute("y", 2, dsl::Strategy::SplitOverHeight)
            .split("y", "yo", "yi", 4);
        run_through_task_program(s);
    }

    codegen::TaskIR &task(const std::string &name) {
        for (codegen::TaskIR &t : s.program.tasks)
            if (t.name == name) return t;
        throw std::runtime_error("no task " + name);
    }
    codegen::DpuWork &first_dpu() {
        for (codegen::TaskIR &t : s.program.tasks)
            if (auto *dpu = std::get_if<codegen::DpuWork>(&t.work)) return *dpu;
        throw std::runtime_error("no DPU task");
    }

    template <typename F> std::string error_of(F verify) {
        try {
            verify(s);
        } catch (const codegen::LoweringError &e) {
            return e.what();
        }
        return "";
    }
};

TEST_F(TwoTileConv, EveryVerifierAcceptsThePassesOutput) {
    EXPECT_EQ(error_of(codegen::verify_tensors), "");
    EXPECT_EQ(error_of(codegen::verify_tasks), "");
    EXPECT_EQ(error_of(codegen::verify_channel_padding), "");
    EXPECT_EQ(error_of(codegen::verify_weights), "");
    EXPECT_EQ(error_of(codegen::verify_workloads), "");
    EXPECT_EQ(error_of(codegen::verify_weight_copies), "");
}

TEST_F(TwoTileConv, DeclareTensorsGivesEveryDdrTensorABuffer) {
    s.tensor_buffer.erase("conv");
    EXPECT_EQ(error_of(codegen::verify_tensors), "tensor 'conv': no DDR buffer");
}

TEST_F(TwoTileConv, ChannelPaddingKeepsDpuTensorsInWholeGroups) {
    codegen::DpuWork &dpu = first_dpu();
    dpu.output.dims[0] = blob::Dim(8, 1);
    EXPECT_NE(
        error_of(codegen::verify_channel_padding)
            .find("its output holds 8 channels at 64 lanes per pixel, not whole groups of 16"),
        std::string::npos);
}

TEST_F(TwoTileConv, PackWeightsPointsEveryTableEntryAtItsChannel) {
    const codegen::DpuWork &dpu = first_dpu();
    const codegen::TaskIR &copy = task("conv.weights.c[0,64).0");
    const codegen::BufferDecl &constant =
        s.program.buffers[size_t(std::get<codegen::DmaWork>(copy.work).src.buffer)];
    const int32_t wrong = 0;
    std::memcpy(s.program.constants.data() + constant.offset + dpu.weight_table.offset + 16, &wrong,
                sizeof(wrong));
    EXPECT_NE(error_of(codegen::verify_weights)
                  .find("weight table entry 1 points at byte 0, not at the channel's weights"),
              std::string::npos);
}

TEST_F(TwoTileConv, ChooseWorkloadsCoversEveryDpuOutput) {
    first_dpu().invariant.variants.pop_back();
    EXPECT_NE(error_of(codegen::verify_workloads).find("no variants"), std::string::npos);
}

TEST_F(TwoTileConv, SplitWeightCopiesMovesTheWholeConstant) {
    // Two parts on the two DMA engines.
    EXPECT_EQ(task("conv.weights.c[0,64).0").index, 0u);
    EXPECT_EQ(task("conv.weights.c[0,64).1").index, 1u);
    auto &first = std::get<codegen::DmaWork>(task("conv.weights.c[0,64).0").work);
    first.src.dims[0] = blob::Dim(first.src.dims[0].extent() - 64, 1);
    for (codegen::View &d : first.dsts) d.dims = first.src.dims;
    EXPECT_NE(error_of(codegen::verify_weight_copies)
                  .find("layer 'conv': weight copy 'conv.weights.c[0,64).1': starts at byte "),
              std::string::npos);
}

} // namespace
