// Race finding: every task's byte ranges, swept in a dependency order against a shadow of
// memory that remembers, per range, its last writer and the readers since. Ordering queries
// use vector clocks: per task, the position of the latest task of each queue ordered before
// it (memory: tasks x queues).
#include "vpu_target/races.h"

#include "dataflow.h"

#include <algorithm>
#include <map>
#include <set>
#include <utility>

namespace vpuc::blob {

namespace {

using dataflow::TaskGraph;
using dataflow::WorkBudget;

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
    RaceFinder(const Blob &blob, size_t max_reports, uint64_t work_budget)
        : blob_(blob), max_(max_reports), graph_(blob), budget_(work_budget, "race check") {}

    std::vector<std::string> run() {
        budget_.charge(uint64_t(graph_.tasks.size() + graph_.barrier_count) * graph_.queue_count);
        clocks_.assign((graph_.tasks.size() + graph_.barrier_count) * graph_.queue_count, 0);
        for (uint32_t node : graph_.dependency_order()) {
            if (node < graph_.tasks.size()) {
                clock_task(node);
                if (!sweep(node)) break;
            } else {
                clock_barrier(node - uint32_t(graph_.tasks.size()));
            }
        }
        return reports_;
    }

  private:
    uint32_t *clock(uint32_t node) { return clocks_.data() + size_t(node) * graph_.queue_count; }

    void join(uint32_t into, uint32_t from) {
        uint32_t *a = clock(into);
        const uint32_t *b = clock(from);
        for (uint32_t q = 0; q < graph_.queue_count; ++q) a[q] = std::max(a[q], b[q]);
    }

    // A task's clock: its queue predecessor's and its wait barriers', and itself.
    void clock_task(uint32_t t) {
        const dataflow::TaskInfo &info = graph_.tasks[t];
        budget_.charge(uint64_t(1 + graph_.waits[t].size()) * graph_.queue_count);
        if (info.position > 0) join(t, t - 1);
        for (uint32_t b : graph_.waits[t]) join(t, barrier_node(b));
        clock(t)[info.queue_index] = info.position + 1;
    }

    uint32_t barrier_node(uint32_t b) const { return uint32_t(graph_.tasks.size()) + b; }

    void clock_barrier(uint32_t b) {
        budget_.charge(uint64_t(graph_.producers[b].size()) * graph_.queue_count);
        for (uint32_t p : graph_.producers[b]) join(barrier_node(b), p);
    }

    // Task a finished before task b started.
    bool ordered(uint32_t a, uint32_t b) {
        return clock(b)[graph_.tasks[a].queue_index] >= graph_.tasks[a].position + 1;
    }

    struct Segment {
        uint64_t end = 0;
        int64_t writer = -1;
        std::vector<uint32_t> readers; // since the write; none ordered before another
    };
    using Shadow = std::map<uint64_t, Segment>;

    // Checks and records every access of task t; false once enough races are reported.
    bool sweep(uint32_t t) {
        const Task &task = *graph_.tasks[t].task;
        auto tensor = [&](const TensorRef *ref, bool write) {
            if (!ref) return;
            const uint64_t key = memory_key(*ref->address());
            dataflow::tensor_runs(*ref, budget_, [&](uint64_t at, uint64_t bytes) {
                access(t, key, at, bytes, write);
            });
        };
        switch (task.kind_type()) {
        case TaskKind::DmaTask: {
            const DmaTask &dma = *task.kind_as_DmaTask();
            const uint64_t src = memory_key(*dma.src());
            for (const Address *dst : *dma.dst()) {
                const uint64_t key = memory_key(*dst);
                dataflow::dma_lines(dma, *dst, budget_,
                                    [&](uint64_t from, uint64_t to, uint64_t bytes) {
                                        access(t, src, from, bytes, false);
                                        access(t, key, to, bytes, true);
                                    });
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
        auto it = dataflow::split_at(m, begin);
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
        budget_.charge(1 + seg.readers.size());
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

    std::string describe(uint32_t t) const { return graph_.describe(t); }

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
    TaskGraph graph_;
    WorkBudget budget_;
    std::vector<uint32_t> clocks_;      // per node: one entry per queue
    std::map<uint64_t, Shadow> shadow_; // per memory
    std::set<std::pair<uint32_t, uint32_t>> reported_;
    std::vector<std::string> reports_;
};

// The first byte an operand of `dpu` shares with its output, reported.
void check_dpu_overlap(const DpuTask &dpu, const std::string &task, WorkBudget &budget,
                       std::vector<std::string> &reports) {
    const uint64_t key = memory_key(*dpu.output()->address());
    const dataflow::ByteRanges output(*dpu.output(), budget);
    const std::pair<const char *, const TensorRef *> operands[] = {
        {"input", dpu.input()}, {"input2", dpu.input2()}, {"weights", dpu.weights()}};
    for (const auto &[name, tensor] : operands) {
        if (!tensor || memory_key(*tensor->address()) != key) continue;
        std::optional<uint64_t> common;
        dataflow::tensor_runs(*tensor, budget, [&](uint64_t at, uint64_t bytes) {
            if (!common) common = output.first_common(at, at + bytes);
        });
        if (!common) continue;
        reports.push_back("task " + task + ": output overlaps its " + name + " at " +
                          memory_name(key) + "+" + std::to_string(*common) +
                          ": the DPU reads its " + name +
                          " while it writes, so the result would depend on the order it "
                          "computes its outputs in");
        return;
    }
}

} // namespace

std::vector<std::string> find_dpu_overlaps(const Blob &blob, size_t max_reports,
                                           uint64_t work_budget) {
    const TaskGraph graph(blob);
    WorkBudget budget(work_budget, "overlap check");
    std::vector<std::string> reports;
    for (uint32_t t = 0; t < graph.tasks.size() && reports.size() < max_reports; ++t)
        if (const DpuTask *dpu = graph.tasks[t].task->kind_as_DpuTask())
            check_dpu_overlap(*dpu, graph.describe(t), budget, reports);
    return reports;
}

std::vector<std::string> find_races(const Blob &blob, size_t max_reports, uint64_t work_budget) {
    return RaceFinder(blob, max_reports, work_budget).run();
}

} // namespace vpuc::blob
