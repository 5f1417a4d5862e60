// One exception hierarchy: every error vpuc throws for a bad input is a vpuc::Error, and the
// message names what was wrong.
#include <gtest/gtest.h>

#include <type_traits>

#include "algorithms/layers.h"
#include "algorithms/reference.h"
#include "algorithms/registry.h"
#include "codegen/dpu_match.h"
#include "codegen/lower.h"
#include "codegen/shave_kernel.h"
#include "codegen/task_ir.h"
#include "dsl/graph_text.h"
#include "vpu_target/blob.h"
#include "vpu_target/input_file.h"
#include "vpu_target/simulator.h"
#include "vpu_target/timing_calibration.h"

namespace vpuc {
namespace {

template <typename... E> constexpr bool all_vpuc_errors() {
    return (std::is_base_of_v<Error, E> && ...);
}

static_assert(
    all_vpuc_errors<dsl::LayerError, dsl::AttrError, dsl::GraphError, dsl::ScheduleError,
                    algorithms::ReferenceError, codegen::DpuMatchError, codegen::ShaveKernelError,
                    codegen::LoweringError, codegen::ProgramTextError, blob::BlobError,
                    target::TargetError, target::CalibrationError, files::InputFileError>());

// One handler catches a bad layer, bad attributes, a bad graph text, a bad target and a bad
// blob alike.
TEST(Errors, OneHandlerCatchesThemAll) {
    dsl::TensorDesc t;
    t.name = "in";
    t.shape = dsl::Shape({1, 8, 4, 4});
    t.type = dsl::ElemType::U8;
    t.order = dsl::DimsOrder::NHWC();
    const dsl::Layer in = dsl::Layer::input(t);
    const std::vector<std::function<void()>> bad = {
        [&] { algorithms::clamp("c", in, 2.0f, 1.0f); },
        [&] { algorithms::layer_registry().build("relu", "r", {in}, dsl::Attrs().set("x", 1.0)); },
        [&] { dsl::read_graph("graph \"g\"\nbogus\n", algorithms::layer_registry()); },
        [&] { target::load_target("no_such_target"); },
        [&] {
            sim::Simulator(target::load_target("vpu27"), std::vector<uint8_t>{1, 2, 3});
        },
        [&] {
            dsl::DimsOrder({dsl::Dim(0), dsl::Dim(0)});
        },
    };
    for (size_t i = 0; i < bad.size(); ++i) {
        try {
            bad[i]();
            ADD_FAILURE() << "case " << i << " threw nothing";
        } catch (const Error &e) {
            EXPECT_GT(std::string(e.what()).size(), 10u) << "case " << i;
        }
    }
}

} // namespace
} // namespace vpuc
