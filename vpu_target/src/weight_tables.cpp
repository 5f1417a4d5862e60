#include "weight_tables.h"

#include <algorithm>
#include <map>
#include <optional>

#include "dataflow.h"

namespace vpuc::blob {

namespace {

using dataflow::TaskGraph;
using dataflow::WorkBudget;

constexpr int16_t kUnknown = -1;

// The watched bytes of one CMX tile: disjoint runs, each with its bytes' values (or kUnknown)
// and the task that last wrote each (-1: none yet).
struct Run {
    uint64_t end = 0;
    std::vector<int16_t> value;
    std::vector<int64_t> writer;
};
using Watched = std::map<uint64_t, Run>; // by start

class Replay {
  public:
    Replay(const Blob &blob, const target::Target &target, size_t max_reports, uint64_t budget)
        : blob_(blob), target_(target), max_(max_reports), graph_(blob),
          budget_(budget, "weight table check") {}

    std::vector<std::string> run() {
        watch_tables();
        if (watched_.empty()) return {};
        for (uint32_t node : graph_.dependency_order()) {
            if (node >= graph_.tasks.size() || reports_.size() >= max_) continue;
            const Task &task = *graph_.tasks[node].task;
            switch (task.kind_type()) {
            case TaskKind::DmaTask:
                copy(node, *task.kind_as_DmaTask());
                break;
            case TaskKind::DpuTask:
                check_table(node, *task.kind_as_DpuTask());
                overwrite(node, task.kind_as_DpuTask()->output());
                break;
            case TaskKind::ShaveTask: {
                const ShaveTask &shave = *task.kind_as_ShaveTask();
                const Kernel &kernel = *blob_.kernels()->Get(shave.kernel());
                for (uint32_t i = 0; i < shave.args()->size(); ++i)
                    if (kernel.args()->Get(i)->kind() == ArgKind::OutputBuffer)
                        overwrite(node, shave.args()->Get(i)->tensor());
                break;
            }
            default:
                break;
            }
        }
        return reports_;
    }

  private:
    void watch_tables() {
        std::map<uint32_t, std::vector<std::pair<uint64_t, uint64_t>>> ranges;
        for (const auto &info : graph_.tasks) {
            const DpuTask *dpu = info.task->kind_as_DpuTask();
            if (!dpu || !dpu->weight_table() || !dpu->weights()) continue;
            const TensorRef &table = *dpu->weight_table();
            dataflow::tensor_runs(table, budget_, [&](uint64_t at, uint64_t bytes) {
                ranges[table.address()->index()].emplace_back(at, at + bytes);
            });
        }
        for (auto &[tile, list] : ranges) {
            std::sort(list.begin(), list.end());
            Watched &w = watched_[tile];
            for (const auto &[begin, end] : list) {
                if (!w.empty() && std::prev(w.end())->second.end >= begin) {
                    Run &last = std::prev(w.end())->second;
                    last.end = std::max(last.end, end);
                    continue;
                }
                w[begin].end = end;
            }
            for (auto &[begin, r] : w) {
                budget_.charge((r.end - begin) / 64);
                r.value.assign(r.end - begin, kUnknown);
                r.writer.assign(r.end - begin, -1);
            }
        }
    }

    Watched *watched_in(const Address &a) {
        if (a.space() != MemSpace::Cmx) return nullptr;
        auto it = watched_.find(a.index());
        return it == watched_.end() ? nullptr : &it->second;
    }

    // Calls f(run start, run, first, last) for the watched bytes in [begin, end).
    template <typename F> static void overlaps(Watched &w, uint64_t begin, uint64_t end, F &&f) {
        auto it = w.upper_bound(begin);
        if (it != w.begin()) --it;
        for (; it != w.end() && it->first < end; ++it) {
            const uint64_t lo = std::max(begin, it->first), hi = std::min(end, it->second.end);
            if (lo < hi) f(it->first, it->second, lo, hi);
        }
    }

    // The known value of a source byte: the constant section's, or a watched CMX byte's.
    int16_t source_byte(const Address &src, uint64_t offset) {
        if (src.space() == MemSpace::Constant)
            return int16_t(blob_.constants()->Get(uint32_t(offset)));
        Watched *w = watched_in(src);
        if (!w) return kUnknown;
        int16_t value = kUnknown;
        overlaps(*w, offset, offset + 1, [&](uint64_t start, Run &r, uint64_t lo, uint64_t) {
            value = r.value[lo - start];
        });
        return value;
    }

    void copy(uint32_t task, const DmaTask &dma) {
        for (const Address *dst : *dma.dst()) {
            Watched *w = watched_in(*dst);
            if (!w) continue;
            dataflow::dma_lines(
                dma, *dst, budget_, [&](uint64_t from, uint64_t to, uint64_t bytes) {
                    overlaps(
                        *w, to, to + bytes, [&](uint64_t start, Run &r, uint64_t lo, uint64_t hi) {
                            budget_.charge((hi - lo) / 64);
                            for (uint64_t at = lo; at < hi; ++at) {
                                r.value[at - start] = source_byte(*dma.src(), from + (at - to));
                                r.writer[at - start] = task;
                            }
                        });
                });
        }
    }

    void overwrite(uint32_t task, const TensorRef *t) {
        if (!t) return;
        Watched *w = watched_in(*t->address());
        if (!w) return;
        dataflow::tensor_runs(*t, budget_, [&](uint64_t at, uint64_t bytes) {
            overlaps(*w, at, at + bytes, [&](uint64_t start, Run &r, uint64_t lo, uint64_t hi) {
                for (uint64_t b = lo; b < hi; ++b) {
                    r.value[b - start] = kUnknown;
                    r.writer[b - start] = task;
                }
            });
        });
    }

    // Each entry's first word, the weights offset, as the DPU reads it (sim_dpu.cpp).
    void check_table(uint32_t task, const DpuTask &dpu) {
        if (!dpu.weight_table() || !dpu.weights()) return;
        const TensorRef &table = *dpu.weight_table();
        Watched &w = watched_[table.address()->index()];
        const int64_t channel_stride = table.dims()->Get(1)->stride();
        const uint32_t channels = table.dims()->Get(1)->extent();
        const uint64_t span = channel_weight_span(*dpu.weights());
        const Address &weights = *dpu.weights()->address();
        const Address &out = *dpu.output()->address();
        // The DPU reads a channel's weights while it writes its output.
        std::optional<dataflow::ByteRanges> output;
        if (out.space() == weights.space() && out.index() == weights.index())
            output.emplace(*dpu.output(), budget_);
        budget_.charge(channels);
        for (uint32_t c = 0; c < channels && reports_.size() < max_; ++c) {
            const uint64_t at =
                table.address()->offset() + uint64_t(int64_t(c) * channel_stride * 4);
            uint32_t word = 0;
            int64_t writer = -1;
            bool known = true;
            for (uint64_t b = 0; b < 4; ++b)
                overlaps(w, at + b, at + b + 1, [&](uint64_t start, Run &r, uint64_t lo, uint64_t) {
                    const int16_t v = r.value[lo - start];
                    if (v == kUnknown) {
                        known = false;
                        writer = r.writer[lo - start];
                    }
                    word |= uint32_t(uint8_t(v)) << (8 * b);
                });
            const std::string where = "task " + graph_.describe(task) + ": weight_table: entry " +
                                      std::to_string(c) + ": ";
            if (!known) {
                reports_.push_back(where +
                                   "its weights offset is not a copy of the constant "
                                   "section when the task runs (" +
                                   (writer < 0
                                        ? std::string("nothing wrote it")
                                        : "last written by " + graph_.describe(uint32_t(writer))) +
                                   ")");
                continue;
            }
            const uint64_t offset = weights.offset() + word;
            const uint64_t cmx = target_.cmx_bytes_per_tile;
            if (offset > cmx || span > cmx - offset) {
                reports_.push_back(where + "weights offset " + std::to_string(word) + " puts the " +
                                   std::to_string(span) +
                                   " bytes of the channel's weights past "
                                   "the end of CMX tile " +
                                   std::to_string(weights.index()) + " (" + std::to_string(cmx) +
                                   " bytes)");
            } else if (const auto common =
                           output ? output->first_common(offset, offset + span) : std::nullopt) {
                reports_.push_back(where + "weights offset " + std::to_string(word) +
                                   " puts the channel's weights over the task's output (CMX tile " +
                                   std::to_string(weights.index()) + "+" + std::to_string(*common) +
                                   "): the DPU reads them while it writes, so the result would "
                                   "depend on the order it computes its outputs in");
            }
        }
    }

    const Blob &blob_;
    const target::Target &target_;
    const size_t max_;
    TaskGraph graph_;
    WorkBudget budget_;
    std::map<uint32_t, Watched> watched_; // per CMX tile
    std::vector<std::string> reports_;
};

} // namespace

std::vector<std::string> check_weight_tables(const Blob &blob, const target::Target &target,
                                             size_t max_reports, uint64_t work_budget) {
    return Replay(blob, target, max_reports, work_budget).run();
}

} // namespace vpuc::blob
