#include "bench/sandbox.h"

#include <chrono>
#include <exception>

#include "codegen/lower.h"
#include "functional_runs.h"
#include "vpu_target/simulator.h"

namespace vpuc::bench {

std::vector<SandboxCase> sandbox_cases() {
    using K = LayerSpec::Kind;
    const LayerSpec softmax_1000 = standard_layers().back();
    return {{softmax_1000, Precision::Int8},
            {softmax_1000, Precision::Fp16},
            {named({"", K::Sigmoid, 48, 40, 40, 48, 1, 1, 0}), Precision::Fp16},
            {named({"", K::Softmax, 48, 40, 40, 48, 1, 1, 0}), Precision::Fp16},
            {named({"", K::Sigmoid, 64, 112, 112, 64, 1, 1, 0}), Precision::Fp16},
            {named({"", K::Softmax, 64, 112, 112, 64, 1, 1, 0}), Precision::Fp16}};
}

SandboxCost measure_sandbox(const SandboxCase &c, const target::Target &target, int runs) {
    SandboxCost cost;
    try {
        const std::vector<uint8_t> blob = codegen::lower(build_graph(c.spec, c.precision), target);
        sim::Simulator simulator(target, blob);
        const auto inputs = random_inputs(simulator.blob(), c.precision);
        std::vector<double> run_ms, start_ms, blocked_ms, kernel_ms;
        for (int r = 0; r < runs; ++r) {
            const auto begin = std::chrono::steady_clock::now();
            const sim::RunResult result = simulator.run(inputs);
            run_ms.push_back(
                std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - begin)
                    .count());
            const sim::SandboxStats &s = result.sandbox;
            cost.shave_tasks = s.tasks;
            start_ms.push_back(s.start_ns / 1e6);
            blocked_ms.push_back(s.blocked_ns / 1e6);
            kernel_ms.push_back(s.kernel_ns / 1e6);
        }
        cost.run_ms = median(run_ms);
        cost.start_ms = median(start_ms);
        cost.first_start_ms = start_ms.front();
        cost.blocked_ms = median(blocked_ms);
        cost.kernel_ms = median(kernel_ms);
    } catch (const std::exception &e) {
        cost.error = e.what();
    }
    return cost;
}

} // namespace vpuc::bench
