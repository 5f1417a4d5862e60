// Pass prefetch_weights: a layer's first weights load while the layer before it computes.
//
// build_tasks starts each layer with the copies of its first weights, queued on the DMA
// engines behind every DMA of the layer before; that layer's output stores wait for its last
// computes, so the copies could start only when it had finished, and the DPUs then waited for
// them. A weight copy depends on nothing (its source is a constant), so it may move earlier in
// the program without changing what anything computes: this pass queues the copies just before
// the first compute of the layer before (prefetch_point), so that the engines carry them while
// it computes. A layer that loads nothing (an add or a pool of tensors kept in CMX) may take
// less time than the next layer's weights take to load: on a target of several DMA engines the
// copies go back past every such layer to the last one that loads something, so that they load
// while it and the layers after it compute.
// The memory they take is allocated from there on: a move is kept only if allocating CMX with
// it evicts nothing while the copy waits, and nothing the program keeps without the moves (a
// spilled copy would be copied twice).
#include <algorithm>
#include <map>
#include <optional>
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

bool loads_anything(const PrefetchChain &chain, const std::set<std::string> &loading_weights) {
    if (loading_weights.count(chain.layer)) return true;
    for (const auto &steps : chain.tiles)
        for (const PrefetchChain::Step &step : steps)
            if (!step.input_loads.empty()) return true;
    return false;
}

// The chain during whose computation chain `c`'s first weights load: the one before it, or, on
// a target of several DMA engines, the last one before it that loads anything. On one engine
// the copies would hold up the stores of the layers they pass, which share the engine with
// them. Measured with `vpuc bench models` against the chain before, vpu27: ResNet-18 fp16 1,504
// to 1,450 us, ResNet-50 int8 1,715 to 1,708 and fp16 3,615 to 3,594, MobileNet-V2 int8 416 to
// 412, the transformer 817.3 to 818.1 (its out-projection's weights ahead of a transpose's
// copies), the rest within 0.5%; vpu20 ResNet-50 fp16 17,603 to 17,894 us.
size_t prefetch_chain(const LoweringState &s, size_t c,
                      const std::set<std::string> &loading_weights) {
    size_t before = c - 1;
    if (s.target.dma_engines > 1)
        while (before > 0 && !loads_anything(s.prefetch_chains[before], loading_weights)) --before;
    return before;
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
    std::set<std::string> loading_weights; // layers with weight copies
    for (const TaskIR &task : s.program.tasks)
        if (copies_weights(task, constants)) loading_weights.insert(task.layer);
    std::vector<Move> moves;
    for (size_t c = 1; c < s.prefetch_chains.size(); ++c) {
        const PrefetchChain &chain = s.prefetch_chains[c];
        const PrefetchChain &before = s.prefetch_chains[prefetch_chain(s, c, loading_weights)];
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

    // A moved copy holds its CMX from its new place on. Allocate CMX with the moves and undo
    // each move whose copies wait across a task where the allocation evicts a buffer; and where
    // it evicts a buffer it keeps without the moves, at a task no copy waits across, the move
    // before that task, whose copies shifted where the later buffers went. Until neither
    // happens: a prefetch never spills.
    // The buffers the allocation evicts without any move: the program spills them anyway.
    std::set<int> evicted_anyway;
    try {
        for (const Eviction &e : cmx_evictions(s)) evicted_anyway.insert(e.buffer);
    } catch (const LoweringError &) {
        return; // some buffer fits nowhere: allocate_cmx reports it
    }
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
        // Tasks (original indices) where a buffer is evicted, and where one is that is not
        // evicted without the moves.
        std::set<int> crowded, newly_crowded;
        for (const Eviction &e : evictions) {
            crowded.insert(order[size_t(e.at)]);
            if (!evicted_anyway.count(e.buffer)) newly_crowded.insert(order[size_t(e.at)]);
        }
        // The copies' own places in the program lie in [point, start) too.
        auto waits_across = [&](const Move &m, int task) {
            return m.point <= task && task < m.start;
        };
        std::vector<bool> undo(moves.size());
        for (size_t i = 0; i < moves.size(); ++i) {
            auto it = crowded.lower_bound(moves[i].point);
            undo[i] = it != crowded.end() && waits_across(moves[i], *it);
        }
        for (int task : newly_crowded) {
            if (std::any_of(moves.begin(), moves.end(),
                            [&](const Move &m) { return waits_across(m, task); }))
                continue;
            std::optional<size_t> before;
            for (size_t i = 0; i < moves.size(); ++i)
                if (moves[i].point <= task && (!before || moves[i].point > moves[*before].point))
                    before = i;
            if (before) undo[*before] = true;
        }
        if (std::none_of(undo.begin(), undo.end(), [](bool u) { return u; })) break;
        std::vector<Move> kept;
        for (size_t i = 0; i < moves.size(); ++i)
            if (!undo[i]) kept.push_back(std::move(moves[i]));
        moves = std::move(kept);
    }
    if (moves.empty()) {
        s.program.tasks = original;
        return;
    }
    const std::vector<int> new_index = new_indices(order);
    s.renumber_tasks([&](int old) { return new_index[size_t(old)]; });
    size_t copies = 0;
    for (const Move &m : moves) copies += m.copies.size();
    s.weights_prefetched = true;
    s.notes.push_back("prefetch_weights: the first weights of " + std::to_string(moves.size()) +
                      " layer(s) (" + std::to_string(copies) +
                      " copies) load while the layer before computes");
}

} // namespace vpuc::codegen
