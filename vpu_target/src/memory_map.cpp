// The memory map: every task's accesses, swept in a dependency order (as the race check does)
// against a shadow of CMX and DDR scratch that remembers, per byte range, the buffer holding
// it and when its last reader so far finishes. A range leaves the shadow when it is overwritten
// or at the end, adding its bytes to its buffer's occupancy until then.
#include "vpu_target/memory_map.h"

#include <algorithm>
#include <map>

#include "dataflow.h"

namespace vpuc::sim {

namespace {

using blob::Address;
using blob::BlobError;
using blob::MemSpace;
using blob::Task;
using blob::TensorRef;
using blob::dataflow::TaskGraph;
using blob::dataflow::WorkBudget;

constexpr uint32_t kUntracked = UINT32_MAX;

class MemoryMapper {
  public:
    MemoryMapper(const blob::Blob &blob, const target::Target &target,
                 const std::vector<TaskRecord> &records, uint64_t work_budget)
        : blob_(blob), graph_(blob), budget_(work_budget, "memory map") {
        for (int tile = 0; tile < target.tiles; ++tile)
            add_memory("CMX tile " + std::to_string(tile), MemSpace::Cmx, uint32_t(tile),
                       target.cmx_usable_bytes);
        if (blob.header()->ddr_scratch_bytes() > 0)
            add_memory("DDR scratch", MemSpace::Scratch, 0, blob.header()->ddr_scratch_bytes());
        match_records(records);
    }

    MemoryMap run() {
        for (uint32_t node : graph_.dependency_order())
            if (node < graph_.tasks.size()) sweep(node);
        for (uint32_t m = 0; m < memories_.size(); ++m)
            for (const auto &[begin, segment] : shadows_[m]) retire(m, begin, segment);
        MemoryMap map;
        map.latency_ns = latency_ns_;
        for (uint32_t m = 0; m < memories_.size(); ++m) map.memories.push_back(finish(m));
        return map;
    }

  private:
    // A range of bytes with the same content: the buffer that wrote it (an index into
    // buffers_) and when the last task reading it so far finishes.
    struct Segment {
        uint64_t end = 0;
        uint32_t buffer = 0;
        double read_until_ns = 0;
    };
    using Shadow = std::map<uint64_t, Segment>;

    void add_memory(std::string name, MemSpace space, uint32_t index, uint64_t capacity) {
        MemoryUse use;
        use.name = std::move(name);
        use.space = space;
        use.index = index;
        use.capacity = capacity;
        memories_.push_back(std::move(use));
        shadows_.emplace_back();
        changes_.emplace_back();
    }

    // Each task's start and end from its record, every task having exactly one.
    void match_records(const std::vector<TaskRecord> &records) {
        std::vector<uint32_t> first_of_queue(graph_.queue_count + 1, 0);
        for (const blob::dataflow::TaskInfo &info : graph_.tasks)
            ++first_of_queue[info.queue_index + 1];
        for (uint32_t q = 0; q < graph_.queue_count; ++q)
            first_of_queue[q + 1] += first_of_queue[q];
        const std::string mismatch = "memory map: the run's task records are not those of the "
                                     "blob's tasks";
        if (records.size() != graph_.tasks.size()) throw BlobError(mismatch);
        times_.assign(graph_.tasks.size(), {-1.0, -1.0});
        for (const TaskRecord &record : records) {
            if (record.queue >= graph_.queue_count ||
                record.position >= first_of_queue[record.queue + 1] - first_of_queue[record.queue])
                throw BlobError(mismatch);
            auto &time = times_[first_of_queue[record.queue] + record.position];
            if (time.first >= 0 || record.start_ns < 0 || record.end_ns < record.start_ns)
                throw BlobError(mismatch);
            time = {record.start_ns, record.end_ns};
            latency_ns_ = std::max(latency_ns_, record.end_ns);
        }
    }

    uint32_t memory_of(const Address &address) const {
        for (uint32_t m = 0; m < memories_.size(); ++m)
            if (memories_[m].space == address.space() && memories_[m].index == address.index())
                return m;
        return kUntracked;
    }

    // Task t's reads, then its writes, so that a task updating bytes in place reads the
    // previous content before its own replaces it.
    void sweep(uint32_t t) {
        const Task &task = *graph_.tasks[t].task;
        auto read_tensor = [&](const TensorRef *ref) {
            if (!ref) return;
            const uint32_t m = memory_of(*ref->address());
            if (m == kUntracked) return;
            blob::dataflow::tensor_runs(
                *ref, budget_, [&](uint64_t at, uint64_t bytes) { read(t, m, at, at + bytes); });
        };
        auto write_tensor = [&](const TensorRef *ref) {
            if (!ref) return;
            const uint32_t m = memory_of(*ref->address());
            if (m == kUntracked) return;
            const uint32_t buffer = new_buffer(t, m);
            blob::dataflow::tensor_runs(*ref, budget_, [&](uint64_t at, uint64_t bytes) {
                write(buffer, m, at, at + bytes);
            });
        };
        switch (task.kind_type()) {
        case blob::TaskKind::DmaTask: {
            const blob::DmaTask &dma = *task.kind_as_DmaTask();
            // Every destination gets the same source lines: one pass reads them.
            const uint32_t src = memory_of(*dma.src());
            if (src != kUntracked && dma.dst()->size() > 0)
                blob::dataflow::dma_lines(dma, *dma.dst()->Get(0), budget_,
                                          [&](uint64_t from, uint64_t, uint64_t bytes) {
                                              read(t, src, from, from + bytes);
                                          });
            for (const Address *dst : *dma.dst()) {
                const uint32_t m = memory_of(*dst);
                if (m == kUntracked) continue;
                const uint32_t buffer = new_buffer(t, m);
                blob::dataflow::dma_lines(dma, *dst, budget_,
                                          [&](uint64_t, uint64_t to, uint64_t bytes) {
                                              write(buffer, m, to, to + bytes);
                                          });
            }
            break;
        }
        case blob::TaskKind::DpuTask: {
            const blob::DpuTask &dpu = *task.kind_as_DpuTask();
            for (const TensorRef *ref :
                 {dpu.input(), dpu.input2(), dpu.weights(), dpu.weight_table()})
                read_tensor(ref);
            write_tensor(dpu.output());
            break;
        }
        case blob::TaskKind::ShaveTask: {
            const blob::ShaveTask &shave = *task.kind_as_ShaveTask();
            const blob::Kernel &kernel = *blob_.kernels()->Get(shave.kernel());
            auto is_output = [&](uint32_t i) {
                return kernel.args()->Get(i)->kind() == blob::ArgKind::OutputBuffer;
            };
            for (uint32_t i = 0; i < shave.args()->size(); ++i)
                if (!is_output(i)) read_tensor(shave.args()->Get(i)->tensor());
            for (uint32_t i = 0; i < shave.args()->size(); ++i)
                if (is_output(i)) write_tensor(shave.args()->Get(i)->tensor());
            break;
        }
        default:
            break;
        }
    }

    uint32_t new_buffer(uint32_t t, uint32_t m) {
        const Task &task = *graph_.tasks[t].task;
        MemoryBuffer buffer;
        buffer.begin = UINT64_MAX;
        buffer.writer = task.name()->str();
        buffer.layer = task.layer() ? task.layer()->str() : "";
        buffer.queue = graph_.tasks[t].queue_index;
        buffer.position = graph_.tasks[t].position;
        buffer.live_from_ns = times_[t].first;
        buffer.live_to_ns = times_[t].second;
        buffers_.push_back(std::move(buffer));
        buffer_memory_.push_back(m);
        return uint32_t(buffers_.size() - 1);
    }

    // The shadow's segments over [begin, end) split at both ends, and, when `fill` is true,
    // its gaps made segments of `buffer`: calls f(begin, segment) for each, in order.
    template <typename F>
    void segments(uint32_t m, uint64_t begin, uint64_t end, bool fill, uint32_t buffer, F &&f) {
        Shadow &shadow = shadows_[m];
        auto it = blob::dataflow::split_at(shadow, begin);
        for (uint64_t at = begin; at < end;) {
            budget_.charge(1);
            if (it == shadow.end() || it->first > at) {
                const uint64_t gap_end = it == shadow.end() ? end : std::min(end, it->first);
                if (!fill) {
                    at = gap_end;
                    continue;
                }
                it = shadow.emplace_hint(it, at, Segment{gap_end, buffer, -1.0});
            } else if (it->second.end > end) {
                Segment tail = it->second;
                it->second.end = end;
                shadow.emplace_hint(std::next(it), end, tail);
            }
            f(it->first, it->second);
            at = it->second.end;
            ++it;
        }
    }

    void read(uint32_t t, uint32_t m, uint64_t begin, uint64_t end) {
        const double until = times_[t].second;
        segments(m, begin, end, false, 0, [&](uint64_t, Segment &segment) {
            segment.read_until_ns = std::max(segment.read_until_ns, until);
        });
    }

    void write(uint32_t buffer, uint32_t m, uint64_t begin, uint64_t end) {
        MemoryBuffer &b = buffers_[buffer];
        b.begin = std::min(b.begin, begin);
        b.end = std::max(b.end, end);
        segments(m, begin, end, true, buffer, [&](uint64_t at, Segment &segment) {
            if (segment.buffer == buffer) return;
            retire(m, at, segment);
            segment.buffer = buffer;
            segment.read_until_ns = -1.0;
        });
    }

    // The content of a segment leaves memory: its bytes were live from its buffer's start to
    // the end of its last reader (or of its writer).
    void retire(uint32_t m, uint64_t begin, const Segment &segment) {
        MemoryBuffer &b = buffers_[segment.buffer];
        const uint64_t bytes = segment.end - begin;
        const double until = std::max(b.live_to_ns, segment.read_until_ns);
        b.bytes += bytes;
        b.live_to_ns = until;
        changes_[m][b.live_from_ns] += int64_t(bytes);
        changes_[m][until] -= int64_t(bytes);
    }

    MemoryUse finish(uint32_t m) {
        MemoryUse use = std::move(memories_[m]);
        use.occupancy.push_back({0.0, 0});
        int64_t live = 0;
        for (const auto &[time, change] : changes_[m]) {
            live += change;
            if (use.occupancy.back().first == time)
                use.occupancy.back().second = uint64_t(live);
            else
                use.occupancy.push_back({time, uint64_t(live)});
            if (uint64_t(live) > use.peak_bytes) {
                use.peak_bytes = uint64_t(live);
                use.peak_at_ns = time;
            }
        }
        for (uint32_t b = 0; b < buffers_.size(); ++b)
            if (buffer_memory_[b] == m && buffers_[b].bytes > 0)
                use.buffers.push_back(std::move(buffers_[b]));
        std::stable_sort(use.buffers.begin(), use.buffers.end(),
                         [](const MemoryBuffer &a, const MemoryBuffer &b) {
                             return a.live_from_ns != b.live_from_ns
                                        ? a.live_from_ns < b.live_from_ns
                                        : a.begin < b.begin;
                         });
        return use;
    }

    const blob::Blob &blob_;
    TaskGraph graph_;
    WorkBudget budget_;
    double latency_ns_ = 0;
    std::vector<std::pair<double, double>> times_; // per task: start, end
    std::vector<MemoryUse> memories_;
    std::vector<Shadow> shadows_;                    // per memory
    std::vector<std::map<double, int64_t>> changes_; // per memory: bytes live, by time
    std::vector<MemoryBuffer> buffers_;
    std::vector<uint32_t> buffer_memory_; // per buffer
};

} // namespace

MemoryMap memory_map(const blob::Blob &blob, const target::Target &target,
                     const std::vector<TaskRecord> &tasks, uint64_t work_budget) {
    return MemoryMapper(blob, target, tasks, work_budget).run();
}

} // namespace vpuc::sim
