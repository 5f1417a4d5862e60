// Race finding: every task's byte ranges, swept in a dependency order against a shadow of
// memory that remembers, per range, its last writer and the readers since. Ordering queries
// use vector clocks: per task, the position of the latest task of each queue ordered before
// it (memory: tasks x queues).
#include "vpu_target/races.h"

#include <algorithm>
#include <map>
#include <set>
#include <utility>

namespace vpuc::blob {

namespace {

struct TaskInfo {
    const Task *task;
    const TaskQueue *queue;
    uint32_t queue_index, position;
};

// Calls f(offset, bytes) for each contiguous run of a strided tensor.
template <typename F> void tensor_runs(const TensorRef &t, F &&f) {
    const auto &dims = *t.dims();
    const int64_t elem = dtype_bytes(t.dtype());
    int64_t line = elem;
    uint32_t d = 0;
    for (; d < dims.size(); ++d) {
        const Dim *dim = dims.Get(d);
        if (dim->extent() == 0) return;
        if (dim->extent() > 1 && dim->stride() * elem != line) break;
        line *= dim->extent();
    }
    const auto base = int64_t(t.address()->offset());
    auto outer = [&](auto &self, uint32_t k, int64_t at) -> void {
        if (k == dims.size()) return f(uint64_t(at), uint64_t(line));
        const Dim *dim = dims.Get(k);
        for (uint32_t i = 0; i < dim->extent(); ++i)
            self(self, k + 1, at + i * dim->stride() * elem);
    };
    outer(outer, d, base);
}

// Calls f(offset, bytes) for each line a DMA reads (`source`) or writes at `address`.
template <typename F>
void dma_runs(const DmaTask &dma, const Address &address, bool source, F &&f) {
    const auto *dims = dma.dims();
    const uint32_t count = dims ? dims->size() : 0;
    auto outer = [&](auto &self, uint32_t k, int64_t at) -> void {
        if (k == count) return f(uint64_t(at), uint64_t(dma.line_bytes()));
        const DmaDim *dim = dims->Get(k);
        const int64_t stride = source ? dim->src_stride() : dim->dst_stride();
        for (uint32_t i = 0; i < dim->count(); ++i) self(self, k + 1, at + i * stride);
    };
    outer(outer, 0, int64_t(address.offset()));
}

uint64_t memory_key(const Address &a) {
    return uint64_t(a.space()) << 32 | a.index();
}

std::string memory_name(uint64_t key) {
    const auto space = MemSpace(key >> 32);
    const std::string name = EnumNameMemSpace(space);
    if (space == MemSpace::Cmx) return "CMX of tile " + std::to_string(uint32_t(key));
    if (space == MemSpace::Input || space == MemSpace::Output)
        return name + " " + std::to_string(uint32_t(key));
    return name;
}

class RaceFinder {
  public:
    RaceFinder(const Blob &blob, size_t max_reports) : blob_(blob), max_(max_reports) {}

    std::vector<std::string> run() {
        collect_tasks();
        clocks_.assign((tasks_.size() + barrier_count_) * queue_count_, 0);
        for (uint32_t node : dependency_order()) {
            if (node < tasks_.size()) {
                clock_task(node);
                if (!sweep(node)) break;
            } else {
                clock_barrier(node - uint32_t(tasks_.size()));
            }
        }
        return reports_;
    }

  private:
    void collect_tasks() {
        const auto *queues = blob_.queues();
        queue_count_ = queues ? queues->size() : 0;
        for (uint32_t q = 0; q < queue_count_; ++q) {
            const TaskQueue *queue = queues->Get(q);
            for (uint32_t i = 0; i < queue->tasks()->size(); ++i)
                tasks_.push_back({queue->tasks()->Get(i), queue, q, i});
        }
        barrier_count_ = blob_.barriers() ? blob_.barriers()->size() : 0;
        producers_.resize(barrier_count_);
        waits_.resize(tasks_.size());
        for (uint32_t t = 0; t < tasks_.size(); ++t) {
            const Task &task = *tasks_[t].task;
            if (task.update_barriers())
                for (uint32_t b : *task.update_barriers()) producers_[b].push_back(t);
            if (task.wait_barriers())
                for (uint32_t b : *task.wait_barriers()) waits_[t].push_back(b);
        }
    }

    // Tasks (0..T-1) and barriers (T..T+B-1) in an order where each comes after what it
    // waits for: a task after its queue predecessor and its wait barriers, a barrier after
    // its producers (Kahn's algorithm; verify() has ruled out cycles).
    std::vector<uint32_t> dependency_order() const {
        const auto tasks = uint32_t(tasks_.size());
        std::vector<std::vector<uint32_t>> next(tasks + barrier_count_);
        std::vector<uint32_t> indegree(next.size(), 0);
        auto edge = [&](uint32_t from, uint32_t to) {
            next[from].push_back(to);
            ++indegree[to];
        };
        for (uint32_t t = 0; t + 1 < tasks; ++t)
            if (tasks_[t].queue_index == tasks_[t + 1].queue_index) edge(t, t + 1);
        for (uint32_t b = 0; b < barrier_count_; ++b)
            for (uint32_t p : producers_[b]) edge(p, tasks + b);
        for (uint32_t t = 0; t < tasks; ++t)
            for (uint32_t b : waits_[t]) edge(tasks + b, t);
        std::vector<uint32_t> order;
        for (uint32_t n = 0; n < next.size(); ++n)
            if (indegree[n] == 0) order.push_back(n);
        for (size_t i = 0; i < order.size(); ++i)
            for (uint32_t s : next[order[i]])
                if (--indegree[s] == 0) order.push_back(s);
        return order;
    }

    uint32_t *clock(uint32_t node) { return clocks_.data() + size_t(node) * queue_count_; }

    void join(uint32_t into, uint32_t from) {
        uint32_t *a = clock(into);
        const uint32_t *b = clock(from);
        for (uint32_t q = 0; q < queue_count_; ++q) a[q] = std::max(a[q], b[q]);
    }

    // A task's clock: its queue predecessor's and its wait barriers', and itself.
    void clock_task(uint32_t t) {
        const TaskInfo &info = tasks_[t];
        if (info.position > 0) join(t, t - 1);
        for (uint32_t b : waits_[t]) join(t, barrier_node(b));
        clock(t)[info.queue_index] = info.position + 1;
    }

    uint32_t barrier_node(uint32_t b) const { return uint32_t(tasks_.size()) + b; }

    void clock_barrier(uint32_t b) {
        for (uint32_t p : producers_[b]) join(barrier_node(b), p);
    }

    // Task a finished before task b started.
    bool ordered(uint32_t a, uint32_t b) {
        return clock(b)[tasks_[a].queue_index] >= tasks_[a].position + 1;
    }

    struct Segment {
        uint64_t end = 0;
        int64_t writer = -1;
        std::vector<uint32_t> readers; // since the write; none ordered before another
    };
    using Shadow = std::map<uint64_t, Segment>;

    // Checks and records every access of task t; false once enough races are reported.
    bool sweep(uint32_t t) {
        const Task &task = *tasks_[t].task;
        auto tensor = [&](const TensorRef *ref, bool write) {
            if (!ref) return;
            const uint64_t key = memory_key(*ref->address());
            tensor_runs(*ref,
                        [&](uint64_t at, uint64_t bytes) { access(t, key, at, bytes, write); });
        };
        switch (task.kind_type()) {
        case TaskKind::DmaTask: {
            const DmaTask &dma = *task.kind_as_DmaTask();
            const uint64_t src = memory_key(*dma.src());
            dma_runs(dma, *dma.src(), true,
                     [&](uint64_t at, uint64_t bytes) { access(t, src, at, bytes, false); });
            for (const Address *dst : *dma.dst()) {
                const uint64_t key = memory_key(*dst);
                dma_runs(dma, *dst, false,
                         [&](uint64_t at, uint64_t bytes) { access(t, key, at, bytes, true); });
            }
            break;
        }
        case TaskKind::DpuTask: {
            const DpuTask &dpu = *task.kind_as_DpuTask();
            tensor(dpu.input(), false);
            tensor(dpu.input2(), false);
            tensor(dpu.weights(), false);
            tensor(dpu.weight_table(), false);
            tensor(dpu.output(), true);
            break;
        }
        case TaskKind::ShaveTask: {
            const ShaveTask &shave = *task.kind_as_ShaveTask();
            const Kernel *kernel = blob_.kernels()->Get(shave.kernel());
            for (uint32_t i = 0; i < shave.args()->size(); ++i)
                tensor(shave.args()->Get(i)->tensor(),
                       kernel->args()->Get(i)->kind() == ArgKind::OutputBuffer);
            break;
        }
        default:
            break;
        }
        return reports_.size() < max_;
    }

    void access(uint32_t t, uint64_t key, uint64_t begin, uint64_t bytes, bool write) {
        if (reports_.size() >= max_ || bytes == 0) return;
        Shadow &m = shadow_[key];
        const uint64_t end = begin + bytes;
        auto it = m.upper_bound(begin);
        if (it != m.begin()) {
            auto prev = std::prev(it);
            if (prev->first == begin) {
                it = prev;
            } else if (prev->second.end > begin) {
                Segment tail = prev->second;
                prev->second.end = begin;
                it = m.emplace_hint(it, begin, std::move(tail));
            }
        }
        for (uint64_t at = begin; at < end;) {
            if (it == m.end() || it->first > at) {
                const uint64_t gap_end = it == m.end() ? end : std::min(end, it->first);
                it = m.emplace_hint(it, at, Segment{gap_end, -1, {}});
            } else if (it->second.end > end) {
                Segment tail = it->second;
                it->second.end = end;
                m.emplace_hint(std::next(it), end, std::move(tail));
            }
            visit(t, key, it->first, it->second, write);
            at = it->second.end;
            ++it;
        }
    }

    void visit(uint32_t t, uint64_t key, uint64_t begin, Segment &seg, bool write) {
        if (seg.writer >= 0 && uint32_t(seg.writer) != t && !ordered(uint32_t(seg.writer), t))
            report(uint32_t(seg.writer), t, key, begin, seg.end, true, write);
        if (write) {
            for (uint32_t r : seg.readers)
                if (r != t && !ordered(r, t)) report(r, t, key, begin, seg.end, false, true);
            seg.writer = t;
            seg.readers.clear();
            return;
        }
        seg.readers.erase(std::remove_if(seg.readers.begin(), seg.readers.end(),
                                         [&](uint32_t r) { return r != t && ordered(r, t); }),
                          seg.readers.end());
        if (std::find(seg.readers.begin(), seg.readers.end(), t) == seg.readers.end())
            seg.readers.push_back(t);
    }

    std::string describe(uint32_t t) const {
        return "'" + tasks_[t].task->name()->str() + "' (" + describe_queue(*tasks_[t].queue) + ")";
    }

    void report(uint32_t earlier, uint32_t later, uint64_t key, uint64_t begin, uint64_t end,
                bool earlier_writes, bool later_writes) {
        if (reports_.size() >= max_ || !reported_.insert({earlier, later}).second) return;
        reports_.push_back(
            describe(later) + (later_writes ? " writes " : " reads ") + memory_name(key) + "+" +
            std::to_string(begin) + ".." + std::to_string(end) + ", which " + describe(earlier) +
            (earlier_writes ? " writes" : " reads") + ", and neither waits for the other");
    }

    const Blob &blob_;
    const size_t max_;
    std::vector<TaskInfo> tasks_; // queue by queue, in queue order
    uint32_t queue_count_ = 0, barrier_count_ = 0;
    std::vector<std::vector<uint32_t>> producers_; // per barrier
    std::vector<std::vector<uint32_t>> waits_;     // per task: the barriers it waits on
    std::vector<uint32_t> clocks_;                 // per node: one entry per queue
    std::map<uint64_t, Shadow> shadow_;            // per memory
    std::set<std::pair<uint32_t, uint32_t>> reported_;
    std::vector<std::string> reports_;
};

} // namespace

std::vector<std::string> find_races(const Blob &blob, size_t max_reports) {
    return RaceFinder(blob, max_reports).run();
}

} // namespace vpuc::blob
