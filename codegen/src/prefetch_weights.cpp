// Pass prefetch_weights: a layer's first weights load while the layer before it computes.
//
// build_tasks starts each layer with the copies of its first weights, queued on the DMA
// engines behind every DMA of the layer before; that layer's output stores wait for its last
// computes, so the copies could start only when it had finished, and the DPUs then waited for
// them. A weight copy depends on nothing (its source is a constant), so it may move earlier in
// the program without changing what anything computes: this pass queues the copies just before
// the first compute of the layer before (prefetch_point), so that the engines carry them while
// it computes.
// The memory they take is allocated from there on: a move is kept only if allocating CMX with
// it evicts nothing while the copy waits (a spilled copy would be copied twice).
#include <algorithm>
#include <map>
#include <set>
#include <vector>

#include "passes.h"

namespace vpuc::codegen {

namespace {

// The task of `chain` before which the next layer's weights are queued: its first compute, so
// that they load while it computes, ahead of its output stores and copies, which wait for its
// computes. On a target of one DMA engine the copies would also hold up the layer's own later
// loads there, so they go after its last load instead (or its first compute, if that is
// later). Measured with `vpuc bench models`: ResNet-50 int8 on vpu27 (two engines) 2,230 us
// before the first compute against 2,247 after the last load; on vpu20 (one) 6,545 against
// 6,398.
int prefetch_point(const PrefetchChain &chain, int dma_engines) {
    int first_compute = -1, last_load = -1;
    for (const auto &steps : chain.tiles)
        for (const PrefetchChain::Step &step : steps) {
            if (first_compute < 0 || step.compute < first_compute) first_compute = step.compute;
            for (int load : step.input_loads) last_load = std::max(last_load, load);
        }
    return dma_engines > 1 ? first_compute : std::max(first_compute, last_load + 1);
}

int first_input_load_or_compute(const PrefetchChain &chain) {
    int first = -1;
    auto keep = [&](int task) { first = first < 0 ? task : std::min(first, task); };
    for (const auto &steps : chain.tiles) {
        if (steps.empty()) continue;
        for (int load : steps.front().input_loads) keep(load);
        keep(steps.front().compute);
    }
    return first;
}

// A layer's leading weight copies, to be queued before task `point` of the layer before.
struct Move {
    int point = -1;
    int start = -1; // the layer's first load or compute
    std::vector<int> copies;
};

// The program's tasks in the order `moves` give them: entry i of the result is the index, in
// the program, of the task to put at i.
std::vector<int> order_with(size_t tasks, const std::vector<Move> &moves) {
    std::map<int, std::vector<int>> before; // task -> the copies placed right before it
    std::set<int> moved;
    for (const Move &m : moves) {
        auto &slot = before[m.point];
        slot.insert(slot.end(), m.copies.begin(), m.copies.end());
        moved.insert(m.copies.begin(), m.copies.end());
    }
    std::vector<int> order;
    order.reserve(tasks);
    for (int t = 0; t < int(tasks); ++t) {
        if (moved.count(t)) continue;
        auto it = before.find(t);
        if (it != before.end()) order.insert(order.end(), it->second.begin(), it->second.end());
        order.push_back(t);
    }
    if (order.size() != tasks)
        throw LoweringError("prefetch_weights: " + std::to_string(order.size()) + " of " +
                            std::to_string(tasks) + " tasks ordered");
    return order;
}

} // namespace

void prefetch_weights(LoweringState &s) {
    if (!s.graph_scheduling) return;
    const std::set<int> constants = weight_constants(s);
    std::vector<Move> moves;
    for (size_t c = 1; c < s.prefetch_chains.size(); ++c) {
        const PrefetchChain &before = s.prefetch_chains[c - 1], &chain = s.prefetch_chains[c];
        Move m{
            prefetch_point(before, s.target.dma_engines), first_input_load_or_compute(chain), {}};
        if (m.point < 0 || m.start <= m.point) continue;
        for (int t = m.point; t < m.start; ++t) {
            const TaskIR &task = s.program.tasks[size_t(t)];
            // A copy of a constant that waits for nothing can move anywhere earlier.
            if (task.layer == chain.layer && task.deps.empty() && copies_weights(task, constants))
                m.copies.push_back(t);
        }
        if (!m.copies.empty()) moves.push_back(std::move(m));
    }

    // A moved copy holds its CMX from its new place on. Allocate CMX with the moves, and undo
    // each move that is live where the allocation would evict a buffer, until none is: a
    // prefetch never spills.
    const std::vector<TaskIR> original = s.program.tasks;
    std::vector<int> order;
    while (!moves.empty()) {
        order = order_with(original.size(), moves);
        s.program.tasks = reordered(original, order);
        std::vector<Eviction> evictions;
        try {
            evictions = cmx_evictions(s);
        } catch (const LoweringError &) {
            // Some buffer fits nowhere with the moves: make none, and let allocate_cmx report
            // whatever the program does without them.
            moves.clear();
            break;
        }
        std::set<int> crowded; // tasks (original indices) where a buffer would be evicted
        for (const Eviction &e : evictions) crowded.insert(order[size_t(e.at)]);
        const size_t kept = moves.size();
        // The copies' own places in the program lie in [point, start) too.
        moves.erase(std::remove_if(moves.begin(), moves.end(),
                                   [&](const Move &m) {
                                       auto it = crowded.lower_bound(m.point);
                                       return it != crowded.end() && *it < m.start;
                                   }),
                    moves.end());
        if (moves.size() == kept) break;
    }
    if (moves.empty()) {
        s.program.tasks = original;
        return;
    }
    const std::vector<int> new_index = new_indices(order);
    s.renumber_tasks([&](int old) { return new_index[size_t(old)]; });
    size_t copies = 0;
    for (const Move &m : moves) copies += m.copies.size();
    s.notes.push_back("prefetch_weights: the first weights of " + std::to_string(moves.size()) +
                      " layer(s) (" + std::to_string(copies) +
                      " copies) load while the layer before computes");
}

} // namespace vpuc::codegen
