// Pass order_prefetch: prefetch bounds how far a layer's loads run ahead of its computation.
// On each tile, the inputs of task r load once task r - prefetch - 1 has computed, so at most
// `prefetch` tasks' inputs wait in CMX beside the one computing: deeper prefetch hides more
// DMA latency and holds more CMX.
#include <algorithm>

#include "passes.h"

namespace vpuc::codegen {

namespace {

bool depends_on(const TaskIR &task, int other) {
    return std::find(task.deps.begin(), task.deps.end(), other) != task.deps.end();
}

} // namespace

void order_prefetch(LoweringState &s) {
    for (const PrefetchChain &chain : s.prefetch_chains) {
        const size_t ahead = size_t(chain.prefetch);
        for (const auto &steps : chain.tiles)
            for (size_t r = ahead + 1; r < steps.size(); ++r)
                for (int load : steps[r].input_loads) {
                    TaskIR &task = s.program.tasks.at(size_t(load));
                    const int waits_for = steps[r - ahead - 1].compute;
                    if (!depends_on(task, waits_for)) task.deps.push_back(waits_for);
                }
    }
}

// On each tile, every input load of a layer's task r waits for its task r - prefetch - 1.
void verify_prefetch(const LoweringState &s) {
    for (const PrefetchChain &chain : s.prefetch_chains) {
        const size_t ahead = size_t(chain.prefetch);
        for (const auto &steps : chain.tiles)
            for (size_t r = ahead + 1; r < steps.size(); ++r)
                for (int load : steps[r].input_loads) {
                    const TaskIR &task = s.program.tasks.at(size_t(load));
                    const TaskIR &earlier =
                        s.program.tasks.at(size_t(steps[r - ahead - 1].compute));
                    if (!depends_on(task, steps[r - ahead - 1].compute))
                        throw LoweringError(
                            "layer '" + chain.layer + "': load '" + task.name +
                            "' runs more than prefetch(" + std::to_string(chain.prefetch) +
                            ") tasks ahead: it does not wait for '" + earlier.name + "'");
                }
    }
}

} // namespace vpuc::codegen
