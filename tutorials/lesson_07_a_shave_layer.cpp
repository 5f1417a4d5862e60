// Lesson 7: a layer the DPU cannot run, as a SHAVE kernel.
//
// The DPU runs a fixed menu of operations (lesson 2). Everything else runs on the SHAVEs:
// small vector processors, two per tile on vpu27, each with 128-bit vectors. For a SHAVE
// layer vpuc does what Halide does best: it compiles the layer's own Halide definition into a
// kernel (an object file carried in the blob), with the schedule's vectorize and unroll
// directives applied to the kernel's loops. Tasks, tiles and DMAs work as for the DPU.
//
// This lesson writes an activation by hand, hard swish (MobileNetV3's x * relu6(x + 3) / 6),
// runs it on the SHAVEs with several schedules, and checks each result against the CPU
// reference.
//
// Build and run:  ninja -C build lesson_07_a_shave_layer
//                 ./build/tutorials/lesson_07_a_shave_layer

#include <Halide.h>

#include <cstdint>
#include <cstdio>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "algorithms/reference.h"
#include "codegen/dpu_match.h"
#include "codegen/lower.h"
#include "dsl/graph.h"
#include "vpu_target/simulator.h"
#include "vpu_target/target.h"

using namespace vpuc;

static std::vector<uint8_t> bytes_of(const Halide::Buffer<> &b) {
    const auto *p = static_cast<const uint8_t *>(b.raw_buffer()->host);
    return std::vector<uint8_t>(p, p + b.size_in_bytes());
}

// Hard swish on a quantized u8 tensor, computed in float32: dequantize, x * relu6(x + 3) / 6,
// quantize to the output's scale and zero point. Adding 0.5, saturating to [0, 255] and then
// converting to u8, which truncates, rounds half up.
static dsl::Layer hard_swish(const std::string &name, const dsl::Layer &input,
                             const dsl::Quant &out) {
    dsl::TensorDesc desc = input.output();
    desc.name = name;
    desc.quant = out;
    const float in_scale = input.output().quant.scale_at(0);
    const float in_zero_point = float(input.output().quant.zero_point_at(0));
    const float out_scale = out.scale_at(0), out_zero_point = float(out.zero_point_at(0));
    return dsl::Layer::make("hard_swish", desc, {input}, [=](const std::vector<Halide::Func> &in) {
        const auto &v = dsl::act_vars();
        Halide::Expr x = (Halide::cast<float>(in[0](v.c, v.x, v.y)) - in_zero_point) * in_scale;
        Halide::Expr y = x * Halide::clamp(x + 3.0f, 0.0f, 6.0f) / 6.0f;
        Halide::Expr stored = y / out_scale + out_zero_point;
        Halide::Func f(name);
        f(v.c, v.x, v.y) = Halide::cast<uint8_t>(Halide::clamp(stored + 0.5f, 0.0f, 255.0f));
        return f;
    });
}

int main() {
    const target::Target target = target::load_target("vpu27");
    std::printf("target %s: %d SHAVEs per tile, %d-bit vectors\n", target.name.c_str(),
                target.shaves_per_tile, target.shave_vector_bits);

    // The input is what a conv with a linear output might give: real values from -5.12 to
    // 5.08 in steps of 0.04. Hard swish's output is at least -0.375, so its zero point is 10.
    dsl::TensorDesc image_desc;
    image_desc.name = "features";
    image_desc.shape = dsl::Shape{1, 48, 40, 40}; // N, C, H, W
    image_desc.type = dsl::ElemType::U8;
    image_desc.quant = dsl::Quant::per_tensor(0.04f, 128);
    image_desc.order = dsl::DimsOrder::NHWC();
    dsl::Layer features = dsl::Layer::input(image_desc);
    const dsl::Quant out_quant = dsl::Quant::per_tensor(0.04f, 10);

    Halide::Buffer<uint8_t> values = algorithms::make_buffer(image_desc);
    std::mt19937 rng(70);
    values.for_each_value([&](uint8_t &v) { v = uint8_t(rng()); });
    const std::vector<uint8_t> expected =
        bytes_of(algorithms::run_reference(
                     dsl::Graph("reference", {hard_swish("hswish", features, out_quant)}), {values})
                     .at(0));

    // ---- Not a DPU operation -------------------------------------------------------------
    //
    // The matcher says why: there is no reduction (the DPU's operations all are one, or are
    // elementwise on two inputs), and the PPE's output stage cannot multiply a value by a
    // function of itself. Left without a schedule, the compiler would pick the SHAVEs by
    // itself; on_shave() says so explicitly.
    std::string why;
    codegen::try_match_dpu(hard_swish("hswish", features, out_quant), &why);
    std::printf("DPU matcher: %s\n\n", why.c_str());

    // ---- Schedules -----------------------------------------------------------------------
    //
    // vectorize("c", n) computes n channels at a time in vector registers, as in Halide. A
    // SHAVE vector has 128 bits: 16 u8 values, but only 4 float32 ones, and hard swish
    // computes in float. So going from 2 lanes to 4 halves the instructions per value, while
    // going from 4 to 16 saves only on loads, conversions and stores: the float math of 16
    // values takes four vectors either way. (Without vectorize, the kernel gets the default:
    // the innermost dimension, c, by the full width of the output type.) The other directives
    // are lessons 3 to 5's: split makes tasks, distribute spreads them over the tiles, and
    // each task's output is shared between the tile's SHAVEs.
    struct Plan {
        const char *what;
        std::function<void(dsl::Schedule &)> apply;
    };
    const std::vector<Plan> plans = {
        {"1 tile, 2 lanes", [](dsl::Schedule &s) { s.on_shave().vectorize("c", 2); }},
        {"1 tile, 4 lanes", [](dsl::Schedule &s) { s.on_shave().vectorize("c", 4); }},
        {"1 tile, 16 lanes", [](dsl::Schedule &s) { s.on_shave().vectorize("c", 16); }},
        {"2 tiles, 16 lanes, 4 tasks",
         [](dsl::Schedule &s) {
             s.distribute("y", 2, dsl::Strategy::SplitOverHeight)
                 .split("y", "yo", "yi", 10)
                 .prefetch(1)
                 .on_shave()
                 .vectorize("c", 16);
         }},
    };
    int failures = 0;
    for (const Plan &plan : plans) {
        dsl::Layer layer = hard_swish("hswish", features, out_quant);
        plan.apply(layer.schedule());
        sim::Simulator simulator(target, codegen::lower(dsl::Graph("shave", {layer}), target));

        // The blob carries the kernel: its object code, its entry point, and the cost the
        // simulator's timing uses, counted by the compiler on Halide's lowered statement
        // (per vector of 16 output values: instructions, special-function instructions such as
        // exp, and bytes loaded and stored).
        const blob::Kernel *kernel = simulator.blob().kernels()->Get(0);
        sim::RunResult result = simulator.run({bytes_of(values)});
        const bool same = result.outputs.at(0) == expected;
        failures += !same;
        std::printf("%s: %s\n  kernel %s: %u bytes of code; per vector %.1f instructions, %.1f "
                    "special, %.0f bytes\n  %.0f DPU cycles (%.2f us), %s\n",
                    plan.what, layer.schedule().to_string().c_str(), kernel->entry()->c_str(),
                    kernel->object()->size(), kernel->arith_ops_per_vector(),
                    kernel->special_ops_per_vector(), kernel->cmx_bytes_per_vector(),
                    result.latency_dpu_cycles, result.latency_ns / 1000,
                    same ? "same bytes as the reference" : "MISMATCH");
        for (const sim::EngineStats &e : result.engines)
            if (e.engine.rfind("SHAVE", 0) == 0)
                std::printf("    %-12s %llu tasks, busy %.2f us\n", e.engine.c_str(),
                            static_cast<unsigned long long>(e.tasks), e.busy_ns / 1000);
    }

    // ---- Exactness -------------------------------------------------------------------------
    //
    // The comparison above is exact, byte for byte, although hard swish is computed in float.
    // The reference is the same Halide definition, JIT-compiled for the same instruction set
    // as the kernels (x86-64 with SSE4.1, no FMA: algorithms/reference.h). Without fused
    // multiply-adds every float operation rounds the same way in a scalar loop and in a
    // vector lane, and Halide expands exp, log and pow into the same code for both. The
    // reference and the kernels also keep the definition's order of float operations
    // (strict_float), so no schedule's tiling or vector width changes a result's bits
    // (docs/ARCHITECTURE.md, "fp16 results"). A larger tolerance is needed only against an
    // implementation that is not this definition (another library, or the hardware's own
    // math units).
    std::printf("\n%zu schedules, %d differing from the reference\n", plans.size(), failures);
    return failures == 0 ? 0 : 1;
}
