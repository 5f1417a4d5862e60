#include "bench/emulation.h"

#include <chrono>
#include <exception>
#include <stdexcept>

#include "algorithms/layers.h"
#include "codegen/lower.h"
#include "functional_runs.h"
#include "vpu_target/simulator.h"

namespace vpuc::bench {

namespace {

const LayerSpec &standard_layer(const std::string &name) {
    for (const LayerSpec &spec : standard_layers())
        if (spec.name == name) return spec;
    throw std::logic_error("no standard layer " + name);
}

EmulationCase standard_case(const std::string &name, Precision precision) {
    const LayerSpec &spec = standard_layer(name);
    return {name, precision, [spec, precision] { return build_graph(spec, precision); }};
}

dsl::Graph max_pool_graph() {
    const dsl::Layer in = dsl::Layer::input(activation("input", 64, 112, 112, Precision::Int8));
    algorithms::PoolParams p;
    p.kernel_w = p.kernel_h = 3;
    p.stride_w = p.stride_h = 2;
    p.pad_left = p.pad_right = p.pad_top = p.pad_bottom = 1;
    return dsl::Graph("maxpool3x3/2 112x112x64", {algorithms::max_pool("maxpool", in, p)});
}

dsl::Graph add_graph() {
    const dsl::TensorDesc a = activation("a", 256, 56, 56, Precision::Int8);
    const dsl::TensorDesc b = activation("b", 256, 56, 56, Precision::Int8);
    const auto quant = algorithms::quant_eltwise(algorithms::EltwiseOp::Add, a.quant, b.quant,
                                                 dsl::ElemType::U8, a.quant);
    return dsl::Graph(
        "add 56x56x256",
        {algorithms::eltwise("add", algorithms::EltwiseOp::Add, dsl::Layer::input(a),
                             dsl::Layer::input(b), algorithms::Activation::relu(), quant)});
}

// The work of a blob's DPU tasks and their number, as the verifier counts it.
std::pair<uint64_t, uint64_t> dpu_work(const blob::Blob &blob) {
    uint64_t work = 0, tasks = 0;
    for (const auto *queue : *blob.queues())
        for (const auto *task : *queue->tasks()) {
            const blob::DpuTask *dpu = task->kind_as_DpuTask();
            if (!dpu) continue;
            ++tasks;
            const bool reduces_channels =
                dpu->op() == blob::DpuOp::Conv || dpu->op() == blob::DpuOp::MatMul;
            const uint64_t per_output =
                uint64_t(dpu->kernel_w()) * dpu->kernel_h() *
                (reduces_channels ? dpu->input()->dims()->Get(0)->extent() : 1);
            for (const auto *v : *dpu->variants()) {
                uint64_t outputs = 1;
                for (uint32_t i = 0; i < 3; ++i) outputs *= v->end()->Get(i) - v->start()->Get(i);
                work += outputs * per_output;
            }
        }
    return {work, tasks};
}

} // namespace

std::vector<EmulationCase> emulation_cases() {
    return {standard_case("conv3x3 56x56x64->64", Precision::Int8),
            standard_case("conv1x1 28x28x256->512", Precision::Int8),
            standard_case("conv7x7/2 224x224x3->64", Precision::Int8),
            standard_case("conv3x3 56x56x64->64", Precision::Fp16),
            standard_case("dwconv3x3 112x112x32", Precision::Int8),
            standard_case("dwconv3x3 112x112x32", Precision::Fp16),
            {"maxpool3x3/2 112x112x64", Precision::Int8, max_pool_graph},
            {"add 56x56x256", Precision::Int8, add_graph}};
}

EmulationSpeed measure_emulation(const EmulationCase &c, const target::Target &target, int runs) {
    EmulationSpeed speed;
    std::vector<uint8_t> blob;
    try {
        blob = codegen::lower(c.build(), target);
    } catch (const std::exception &e) {
        speed.error = std::string("compile: ") + e.what();
        return speed;
    }
    try {
        sim::Simulator simulator(target, std::move(blob));
        std::tie(speed.work, speed.dpu_tasks) = dpu_work(simulator.blob());
        if (speed.dpu_tasks == 0) throw std::runtime_error("no DPU task in the compiled layer");
        const auto inputs = random_inputs(simulator.blob(), c.precision);
        std::vector<double> run_ms, dpu_ms;
        for (int r = 0; r < runs; ++r) {
            const auto start = std::chrono::steady_clock::now();
            const sim::RunResult result = simulator.run(inputs);
            run_ms.push_back(ms_since(start));
            dpu_ms.push_back(result.dpu_emulation_ns / 1e6);
        }
        speed.run_ms = median(run_ms);
        speed.dpu_ms = median(dpu_ms);
    } catch (const std::exception &e) {
        speed.error = std::string("run: ") + e.what();
    }
    return speed;
}

} // namespace vpuc::bench
