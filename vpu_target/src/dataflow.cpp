#include "dataflow.h"

#include <algorithm>

#include "vpu_target/printable.h"

namespace vpuc::blob::dataflow {

TaskGraph::TaskGraph(const Blob &blob) {
    const auto *queues = blob.queues();
    queue_count = queues ? queues->size() : 0;
    for (uint32_t q = 0; q < queue_count; ++q) {
        const TaskQueue *queue = queues->Get(q);
        for (uint32_t i = 0; i < queue->tasks()->size(); ++i)
            tasks.push_back({queue->tasks()->Get(i), queue, q, i});
    }
    barrier_count = blob.barriers() ? blob.barriers()->size() : 0;
    producers.resize(barrier_count);
    waits.resize(tasks.size());
    for (uint32_t t = 0; t < tasks.size(); ++t) {
        const Task &task = *tasks[t].task;
        if (task.update_barriers())
            for (uint32_t b : *task.update_barriers()) producers[b].push_back(t);
        if (task.wait_barriers())
            for (uint32_t b : *task.wait_barriers()) waits[t].push_back(b);
    }
}

std::vector<uint32_t> TaskGraph::dependency_order() const {
    const auto count = uint32_t(tasks.size());
    std::vector<std::vector<uint32_t>> next(count + barrier_count);
    std::vector<uint32_t> indegree(next.size(), 0);
    auto edge = [&](uint32_t from, uint32_t to) {
        next[from].push_back(to);
        ++indegree[to];
    };
    for (uint32_t t = 0; t + 1 < count; ++t)
        if (tasks[t].queue_index == tasks[t + 1].queue_index) edge(t, t + 1);
    for (uint32_t b = 0; b < barrier_count; ++b)
        for (uint32_t p : producers[b]) edge(p, count + b);
    for (uint32_t t = 0; t < count; ++t)
        for (uint32_t b : waits[t]) edge(count + b, t);
    std::vector<uint32_t> order;
    for (uint32_t n = 0; n < next.size(); ++n)
        if (indegree[n] == 0) order.push_back(n);
    for (size_t i = 0; i < order.size(); ++i)
        for (uint32_t s : next[order[i]])
            if (--indegree[s] == 0) order.push_back(s);
    return order;
}

std::string TaskGraph::describe(uint32_t t) const {
    const flatbuffers::String *name = tasks[t].task->name();
    return "'" + printable(name->string_view()) + "' (" + describe_queue(*tasks[t].queue) + ")";
}

void WorkBudget::charge(uint64_t units) {
    if (units <= left_) {
        left_ -= units;
        return;
    }
    throw BlobError(analysis_ + ": work budget exhausted: the blob's tasks touch memory in more "
                                "pieces than its size justifies");
}

ByteRanges::ByteRanges(const TensorRef &t, WorkBudget &budget) {
    tensor_runs(t, budget, [&](uint64_t at, uint64_t bytes) {
        ranges_.push_back({at, at + bytes});
    });
    std::sort(ranges_.begin(), ranges_.end());
    size_t kept = 0;
    for (const auto &r : ranges_) {
        if (kept > 0 && ranges_[kept - 1].second >= r.first)
            ranges_[kept - 1].second = std::max(ranges_[kept - 1].second, r.second);
        else
            ranges_[kept++] = r;
    }
    ranges_.resize(kept);
}

std::optional<uint64_t> ByteRanges::first_common(uint64_t begin, uint64_t end) const {
    // The first range ending after `begin` is the only one that can hold the first common byte.
    auto it = std::upper_bound(ranges_.begin(), ranges_.end(), begin,
                               [](uint64_t at, const auto &r) { return at < r.second; });
    if (it == ranges_.end() || it->first >= end) return std::nullopt;
    return std::max(begin, it->first);
}

} // namespace vpuc::blob::dataflow
