// What the analyses of a verified blob's memory share (races.cpp, weight_tables.cpp): its tasks
// in an order that respects every dependency, and the bytes each access touches.
#pragma once

#include <cstdint>
#include <iterator>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "vpu_target/blob.h"

namespace vpuc::blob::dataflow {

struct TaskInfo {
    const Task *task;
    const TaskQueue *queue;
    uint32_t queue_index, position;
};

// Every task, queue by queue in queue order, and for each barrier the tasks that update it and
// for each task the barriers it waits on.
struct TaskGraph {
    explicit TaskGraph(const Blob &blob);

    // Tasks (0..T-1) and barriers (T..T+B-1) in an order where each comes after what it waits
    // for: a task after its queue predecessor and its wait barriers, a barrier after its
    // producers (Kahn's algorithm; the blob has no cycle, as verify() checked).
    std::vector<uint32_t> dependency_order() const;

    std::string describe(uint32_t task) const; // "'name' (DMA queue 0)"

    std::vector<TaskInfo> tasks;
    uint32_t queue_count = 0, barrier_count = 0;
    std::vector<std::vector<uint32_t>> producers; // per barrier
    std::vector<std::vector<uint32_t>> waits;     // per task
};

// A work allowance for an analysis of untrusted data: charge() throws BlobError naming
// `analysis` once it is spent, so that no blob makes an analysis run without end.
class WorkBudget {
  public:
    WorkBudget(uint64_t units, std::string analysis)
        : left_(units), analysis_(std::move(analysis)) {}
    void charge(uint64_t units);

  private:
    uint64_t left_;
    std::string analysis_;
};

// Calls f(offset, bytes) for each contiguous run of a strided tensor.
template <typename F> void tensor_runs(const TensorRef &t, WorkBudget &budget, F &&f) {
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
        if (k == dims.size()) {
            budget.charge(1);
            return f(uint64_t(at), uint64_t(line));
        }
        const Dim *dim = dims.Get(k);
        for (uint32_t i = 0; i < dim->extent(); ++i)
            self(self, k + 1, at + i * dim->stride() * elem);
    };
    outer(outer, d, base);
}

// The bytes of a tensor as sorted, disjoint ranges, for overlap queries.
class ByteRanges {
  public:
    ByteRanges(const TensorRef &t, WorkBudget &budget);
    // The first of bytes [begin, end) among them, if any.
    std::optional<uint64_t> first_common(uint64_t begin, uint64_t end) const;

  private:
    std::vector<std::pair<uint64_t, uint64_t>> ranges_; // [begin, end)
};

// Calls f(src_offset, dst_offset, bytes) for each line a DMA copies to the destination at
// `dst`, in the order the simulator copies them.
template <typename F>
void dma_lines(const DmaTask &dma, const Address &dst, WorkBudget &budget, F &&f) {
    const auto *dims = dma.dims();
    const uint32_t count = dims ? dims->size() : 0;
    auto outer = [&](auto &self, uint32_t k, int64_t src, int64_t to) -> void {
        if (k == count) {
            budget.charge(1);
            return f(uint64_t(src), uint64_t(to), uint64_t(dma.line_bytes()));
        }
        const DmaDim *dim = dims->Get(k);
        for (uint32_t i = 0; i < dim->count(); ++i)
            self(self, k + 1, src + i * dim->src_stride(), to + i * dim->dst_stride());
    };
    outer(outer, 0, int64_t(dma.src()->offset()), int64_t(dst.offset()));
}

// For a shadow memory (a map from each segment's first byte to a segment with an `end`): the
// segment starting at `at`, after splitting the one that straddles it in two; when no segment
// covers `at`, the first one after it.
template <typename Shadow> typename Shadow::iterator split_at(Shadow &shadow, uint64_t at) {
    auto it = shadow.upper_bound(at);
    if (it == shadow.begin()) return it;
    auto prev = std::prev(it);
    if (prev->first == at) return prev;
    if (prev->second.end <= at) return it;
    auto tail = prev->second;
    prev->second.end = at;
    return shadow.emplace_hint(it, at, std::move(tail));
}

} // namespace vpuc::blob::dataflow
