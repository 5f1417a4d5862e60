// Lesson 2: scheduling a layer onto the DPU, compiling it and running it on the simulator.
//
// Lesson 1 wrote what a layer computes. This lesson says where it runs: the schedule
// `on_dpu()` puts an int8 conv + ReLU on the DPU, the NPU's matrix engine. The compiler
// (codegen::lower) turns the graph into a blob: DMA tasks that copy the input and weights
// from DDR into CMX (the tile's fast local memory), a DPU task, and a DMA task that copies
// the result back. The simulator runs the blob, and its result must be bit-exact with the CPU
// reference of lesson 1: a schedule changes where and how fast, never what.
//
// Build and run:  ninja -C build lesson_02_scheduling_onto_the_dpu
//                 ./build/tutorials/lesson_02_scheduling_onto_the_dpu

#include <Halide.h>

#include <cstdint>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "algorithms/layers.h"
#include "algorithms/reference.h"
#include "codegen/dpu_match.h"
#include "codegen/lower.h"
#include "dsl/graph.h"
#include "vpu_target/simulator.h"
#include "vpu_target/target.h"

using namespace vpuc;

// The bytes of a reference buffer, in the layout the blob's outputs use (NHWC, dense).
static std::vector<uint8_t> bytes_of(const Halide::Buffer<> &b) {
    const auto *p = static_cast<const uint8_t *>(b.raw_buffer()->host);
    return std::vector<uint8_t>(p, p + b.size_in_bytes());
}

int main() {
    // ---- The target ---------------------------------------------------------------------------
    //
    // A target is a data file describing one NPU generation. vpu27 is bundled into the library
    // (vpu_target/targets/vpu27.json), so load_target finds it by name.
    const target::Target target = target::load_target("vpu27");
    std::printf("target %s: %d tiles, %d DPU per tile, %d int8 MACs/cycle at %.0f MHz, %llu KB "
                "CMX per tile for the compiler\n",
                target.name.c_str(), target.tiles, target.dpus_per_tile, target.int8_macs_per_cycle,
                target.dpu_clock_mhz,
                static_cast<unsigned long long>(target.cmx_usable_bytes / 1024));

    // ---- The layer: int8 conv 3x3 + ReLU, as in lesson 1 --------------------------------------
    dsl::TensorDesc image_desc;
    image_desc.name = "image";
    image_desc.shape = dsl::Shape{1, 32, 16, 16}; // N, C, H, W
    image_desc.type = dsl::ElemType::U8;
    image_desc.quant = dsl::Quant::per_tensor(0.02f, 128);
    image_desc.order = dsl::DimsOrder::NHWC();
    dsl::Layer image = dsl::Layer::input(image_desc);

    const int IC = 32, OC = 64;
    std::mt19937 rng(2);
    auto uniform = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
    algorithms::QuantWeights w;
    w.weights = Halide::Buffer<int8_t>(IC, 3, 3, OC);
    w.weights.for_each_value([&](int8_t &v) { v = int8_t(uniform(-60, 60)); });
    for (int oc = 0; oc < OC; ++oc) w.bias.push_back(uniform(-3000, 3000));
    w.requant = {algorithms::fixed_point(0.02 * 0.01 / 0.05)};
    w.output_type = dsl::ElemType::U8;
    w.output_quant = dsl::Quant::per_tensor(0.05f, 0);
    algorithms::Conv2dParams same;
    same.pad_left = same.pad_right = same.pad_top = same.pad_bottom = 1;
    same.activation = algorithms::Activation::relu();
    dsl::Layer conv = algorithms::conv2d("conv", image, w, same);

    // ---- What the DPU matcher sees -------------------------------------------------------------
    //
    // The DPU is not programmed with code: it is configured with an operation (conv, depthwise
    // conv, pool, eltwise, matmul), its kernel, strides, padding, zero points, weights and an
    // output stage (the PPE: requantization, activation, clamp). The DPU matcher recovers all
    // of that from the Halide definition alone, as Halide's tensorization would; nothing reads
    // the layer's name or the "conv2d" label. This is the description the compiler will use:
    codegen::DpuOpDesc op = codegen::match_dpu(conv);
    std::printf("DPU matcher: layer '%s' is %s\n", conv.name().c_str(), op.to_string().c_str());

    // ---- The schedule --------------------------------------------------------------------------
    //
    // A schedule is a list of directives, printed as a chain. on_dpu() with no argument lets the
    // compiler choose the MPE mode (the shape of the output block the DPU computes at a time)
    // from its cost model. With no other directive the whole output is one DPU task on tile 0;
    // lessons 3 and 4 cut it into tasks and spread it over tiles.
    conv.schedule().on_dpu();
    std::printf("schedule: %s\n", conv.schedule().to_string().c_str());

    // ---- Lowering ------------------------------------------------------------------------------
    //
    // lower() runs the passes listed in docs/ARCHITECTURE.md and returns the blob's bytes. A
    // LowerOptions with a log shows each pass as it finishes (lesson 3 dumps the IR too).
    dsl::Graph graph("lesson2", {conv});
    std::vector<uint8_t> blob = codegen::lower(graph, target);
    std::printf("blob: %zu bytes\n", blob.size());

    // ---- Running on the simulator --------------------------------------------------------------
    //
    // The simulator verifies the blob first (it is the trust boundary), then runs it. Inputs
    // are raw bytes in the blob's input layout: NHWC, as make_buffer lays out (c, x, y). Its
    // task records show what ran where and when; a task's name gives its layer, its job, its
    // tile and the output region it serves.
    Halide::Buffer<uint8_t> pixels = algorithms::make_buffer(image_desc);
    pixels.for_each_value([&](uint8_t &v) { v = uint8_t(uniform(0, 255)); });
    sim::Simulator simulator(target, blob);
    sim::RunResult result = simulator.run({bytes_of(pixels)});
    std::printf("simulated latency: %.0f DPU cycles (%.2f us)\n", result.latency_dpu_cycles,
                result.latency_ns / 1000);
    std::printf("  %8s %8s  %-12s %s\n", "start ns", "end ns", "engine", "task");
    for (const sim::TaskRecord &task : result.tasks)
        std::printf("  %8.0f %8.0f  %-12s %s\n", task.start_ns, task.end_ns, task.engine.c_str(),
                    task.name.c_str());

    // ---- Bit-exact against the reference -------------------------------------------------------
    //
    // The reference runs the same Halide definition on the CPU; the DPU's integer arithmetic
    // is defined once (vpu_target/dpu_arith.h) and used by both, so every byte must agree.
    Halide::Buffer<> expected = algorithms::run_reference(graph, {pixels})[0];
    const std::vector<uint8_t> want = bytes_of(expected);
    const std::vector<uint8_t> &got = result.outputs.at(0);
    size_t mismatches = got.size() == want.size() ? 0 : want.size();
    for (size_t i = 0; i < want.size() && i < got.size(); ++i) mismatches += got[i] != want[i];
    std::printf("DPU vs reference: %zu of %zu output bytes differ\n", mismatches, want.size());

    // ---- The MPE mode changes the time, not the result ----------------------------------------
    //
    // on_dpu(mode) fixes the MPE mode instead. Each mode computes a block of output columns x
    // rows x channels at a time; how well the blocks cover the output decides how many DPU
    // cycles are wasted. The result is the same bytes in every mode.
    for (const target::MpeMode &mode : target.mpe_modes) {
        if (!mode.int8) continue;
        dsl::Layer conv_in_mode = algorithms::conv2d("conv", image, w, same);
        conv_in_mode.schedule().on_dpu(mode.name);
        sim::Simulator in_mode(target, codegen::lower(dsl::Graph("mode", {conv_in_mode}), target));
        sim::RunResult r = in_mode.run({bytes_of(pixels)});
        const bool same_bytes = r.outputs.at(0) == want;
        mismatches += !same_bytes;
        std::printf("  %-28s %6.0f DPU cycles, %s\n", conv_in_mode.schedule().to_string().c_str(),
                    r.latency_dpu_cycles, same_bytes ? "same bytes" : "MISMATCH");
    }

    // ---- A layer on_dpu() that the DPU cannot run ----------------------------------------------
    //
    // Here is a hand-written layer that looks like a conv: a reduction over a 3x3 window with
    // weights. But it sums the *square* of each input times a weight, and a DPU MAC multiplies
    // one input by one weight; there is no way to configure the DPU for x * x * w. Asking for
    // the DPU anyway is an error, and the message names the layer and the part of the
    // definition that does not fit. (Left unscheduled, the compiler would notice the same and
    // generate a SHAVE kernel instead: lesson 7.)
    Halide::Buffer<int8_t> energy_weights(IC, 3, 3, OC);
    energy_weights.fill(1);
    dsl::TensorDesc energy_desc = image_desc;
    energy_desc.name = "energy";
    energy_desc.shape = dsl::Shape{1, OC, 16, 16};
    const algorithms::FixedPoint scale = algorithms::fixed_point(1.0 / 4096);
    dsl::Layer energy =
        dsl::Layer::make("energy", energy_desc, {image}, [=](const std::vector<Halide::Func> &in) {
            const auto &v = dsl::act_vars();
            Halide::RDom r(0, IC, 0, 3, 0, 3);
            Halide::Expr pixel =
                Halide::cast<int32_t>(in[0](r.x, Halide::clamp(v.x + r.y - 1, 0, 15),
                                            Halide::clamp(v.y + r.z - 1, 0, 15))) -
                128;
            Halide::Func sum("energy_sum"), energy("energy");
            sum(v.c, v.x, v.y) = 0;
            sum(v.c, v.x, v.y) +=
                pixel * pixel * Halide::cast<int32_t>(energy_weights(r.x, r.y, r.z, v.c));
            energy(v.c, v.x, v.y) = algorithms::requantize(
                sum(v.c, v.x, v.y), scale.mult, scale.shift,
                algorithms::int_ppe({}, energy_desc.type, energy_desc.quant), Halide::UInt(8));
            return energy;
        });
    energy.schedule().on_dpu();
    bool refused = false;
    try {
        codegen::lower(dsl::Graph("not_a_dpu_op", {energy}), target);
    } catch (const codegen::DpuMatchError &e) {
        refused = true;
        std::printf("lowering '%s' with %s:\n  %s\n", energy.name().c_str(),
                    energy.schedule().to_string().c_str(), e.what());
    }
    if (!refused) std::printf("MISMATCH: the energy layer should not run on the DPU\n");

    return mismatches == 0 && refused ? 0 : 1;
}
