// Passes assign_barriers and map_physical_barriers: dependencies become virtual barriers,
// then virtual barriers share the target's physical ones.
#include <algorithm>
#include <map>
#include <tuple>

#include "passes.h"

namespace vpuc::codegen {

namespace {

// Dependencies that matter for barriers: a task on the same queue as its dependency is
// already ordered after it by the queue.
bool same_queue(const TaskIR &a, const TaskIR &b) {
    return a.engine == b.engine && a.tile == b.tile && a.index == b.index;
}

// ancestors[t]: every task that finishes before t starts (dependencies and queue order).
std::vector<std::vector<bool>> ancestors(const Program &p) {
    const size_t n = p.tasks.size();
    std::vector<std::vector<bool>> anc(n, std::vector<bool>(n, false));
    std::map<std::tuple<int, uint32_t, uint32_t>, int> last_on_queue;
    for (size_t t = 0; t < n; ++t) {
        const TaskIR &task = p.tasks[t];
        auto key = std::make_tuple(int(task.engine), task.tile, task.index);
        std::vector<int> preds = task.deps;
        if (auto it = last_on_queue.find(key); it != last_on_queue.end())
            preds.push_back(it->second);
        for (int d : preds) {
            anc[t][size_t(d)] = true;
            for (size_t i = 0; i < n; ++i)
                if (anc[size_t(d)][i]) anc[t][i] = true;
        }
        last_on_queue[key] = int(t);
    }
    return anc;
}

} // namespace

void assign_barriers(LoweringState &s) {
    auto &p = s.program;
    // One barrier per producer task that another queue waits for.
    std::map<int, int> barrier_of;
    for (int t = 0; t < int(p.tasks.size()); ++t)
        for (int d : p.tasks[size_t(t)].deps) {
            if (same_queue(p.tasks[size_t(t)], p.tasks[size_t(d)])) continue;
            auto [it, fresh] = barrier_of.try_emplace(d, int(p.barriers.size()));
            if (fresh) p.barriers.push_back({{d}, {}, -1});
            auto &consumers = p.barriers[size_t(it->second)].consumers;
            if (std::find(consumers.begin(), consumers.end(), t) == consumers.end())
                consumers.push_back(t);
        }
}

void map_physical_barriers(LoweringState &s) {
    auto &p = s.program;
    const auto anc = ancestors(p);
    // The verifier's rule: a physical barrier moves to its next virtual barrier only once
    // every consumer of the previous one is ordered before the next one's producers.
    std::vector<int> holder(size_t(s.target.barriers), -1);
    std::vector<size_t> order(p.barriers.size());
    for (size_t i = 0; i < order.size(); ++i) order[i] = i;
    std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
        return p.barriers[a].producers.front() < p.barriers[b].producers.front();
    });
    std::vector<BarrierIR> sorted;
    for (size_t i : order) sorted.push_back(p.barriers[i]);
    p.barriers = std::move(sorted);
    for (int b = 0; b < int(p.barriers.size()); ++b) {
        BarrierIR &bar = p.barriers[size_t(b)];
        auto free_for = [&](int previous) {
            if (previous < 0) return true;
            const BarrierIR &old = p.barriers[size_t(previous)];
            const auto &before = old.consumers.empty() ? old.producers : old.consumers;
            for (int producer : bar.producers)
                for (int t : before)
                    if (t != producer && !anc[size_t(producer)][size_t(t)]) return false;
            return true;
        };
        int chosen = -1;
        for (int id = 0; id < s.target.barriers && chosen < 0; ++id)
            if (free_for(holder[size_t(id)])) chosen = id;
        if (chosen < 0)
            throw LoweringError("barriers: every one of the target's " +
                                std::to_string(s.target.barriers) +
                                " physical barriers is still in use when task '" +
                                p.tasks[size_t(bar.producers.front())].name + "' needs one");
        bar.physical = chosen;
        holder[size_t(chosen)] = b;
    }
}

void verify_barriers(const LoweringState &s) {
    const auto &p = s.program;
    for (const auto &b : p.barriers)
        if (b.physical < 0 || b.physical >= s.target.barriers || b.producers.empty())
            throw LoweringError("barriers: a virtual barrier has no physical barrier or producer");
}

} // namespace vpuc::codegen
