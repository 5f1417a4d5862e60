// Passes allocate_cmx and allocate_ddr: addresses for every buffer.
#include <algorithm>
#include <functional>
#include <iterator>
#include <map>
#include <optional>
#include <queue>
#include <set>

#include "passes.h"

namespace vpuc::codegen {

namespace {

// Program-order lifetimes: the first and last task touching each buffer.
struct Lifetime {
    int first = -1, last = -1;
    std::vector<int> users;
};

std::vector<int> buffers_of(const TaskIR &t) {
    std::vector<int> out;
    if (const auto *dma = std::get_if<DmaWork>(&t.work)) {
        out.push_back(dma->src.buffer);
        for (const auto &d : dma->dsts) out.push_back(d.buffer);
    } else if (const auto *shave = std::get_if<ShaveWork>(&t.work)) {
        for (const auto &a : shave->args) out.push_back(a.buffer);
    } else {
        const auto &dpu = std::get<DpuWork>(t.work);
        out = {dpu.input.buffer, dpu.output.buffer};
        if (dpu.has_input2) out.push_back(dpu.input2.buffer);
        if (dpu.has_weights) out.insert(out.end(), {dpu.weights.buffer, dpu.weight_table.buffer});
    }
    return out;
}

std::vector<Lifetime> lifetimes(const Program &p) {
    std::vector<Lifetime> life(p.buffers.size());
    for (int t = 0; t < int(p.tasks.size()); ++t)
        for (int b : buffers_of(p.tasks[size_t(t)])) {
            Lifetime &l = life[size_t(b)];
            if (l.first < 0) l.first = t;
            l.last = t;
            if (l.users.empty() || l.users.back() != t) l.users.push_back(t);
        }
    return life;
}

// Allocation of one memory (a tile's CMX, or DDR scratch) in program order. A buffer placed
// over memory that an earlier buffer used makes its first user wait for all of that buffer's
// users (write-after-read).
//
// CMX (Policy::Ring): among the places where a buffer fits, it takes the one whose previous
// users finished longest ago: never-used memory first, then the least recently freed. Reusing
// the memory freed last would chain a task to its predecessor (a DPU task waiting for the
// previous task's output to be stored); this way consecutive tasks rotate through CMX like a
// ring.
//
// DDR (Policy::Compact): the lowest address that is free. A tensor's memory is reused once
// every task reading it is ordered before the new tensor's first writer, which for tensors of
// layers already done costs nothing, and keeps the scratch section small.
class Allocator {
  public:
    enum class Policy { Ring, Compact };

    Allocator(LoweringState &s, blob::MemSpace space, uint32_t index, uint64_t capacity,
              Policy policy, const std::vector<Lifetime> &life)
        : s_(s), space_(space), index_(index), capacity_(capacity), policy_(policy), life_(life) {}

    // Places every used buffer of the memory; returns the bytes the memory needs.
    uint64_t run() {
        auto &p = s_.program;
        std::vector<int> order;
        for (int b = 0; b < int(p.buffers.size()); ++b)
            if (p.buffers[size_t(b)].space == space_ && p.buffers[size_t(b)].index == index_ &&
                life_[size_t(b)].first >= 0)
                order.push_back(b);
        std::stable_sort(order.begin(), order.end(), [&](int a, int b) {
            return life_[size_t(a)].first < life_[size_t(b)].first;
        });
        for (int b : order) place(b);
        return high_water_;
    }

  private:
    // The memory as consecutive segments, keyed by their start: each holds one live buffer,
    // or is free and remembers the buffers freed there since a buffer last covered it (the
    // ones a new writer must wait for; older ones are implied by them).
    struct Segment {
        uint64_t end = 0;
        int live = -1;
        std::vector<int> freed;
        int last_user = -1; // the latest last user among `freed`
    };
    using Segments = std::map<uint64_t, Segment>;

    // The free range of `size` bytes starting at a segment boundary whose previous users
    // finished earliest (Ring), or the lowest (Compact).
    std::optional<uint64_t> best_fit(uint64_t size) const {
        std::optional<uint64_t> best;
        int best_cost = 0;
        for (auto start = segments_.begin(); start != segments_.end(); ++start) {
            if (start->second.live >= 0 || start->first + size > capacity_) continue;
            const uint64_t end = start->first + size;
            int cost = -1;
            bool fits = false;
            for (auto it = start; it != segments_.end() && it->second.live < 0; ++it) {
                cost = std::max(cost, it->second.last_user);
                if (it->second.end >= end) {
                    fits = true;
                    break;
                }
            }
            if (!fits) continue;
            if (policy_ == Policy::Compact) return start->first;
            if (!best || cost < best_cost) {
                best = start->first;
                best_cost = cost;
            }
        }
        return best;
    }

    // Makes `at` a segment boundary.
    void split_at(uint64_t at) {
        auto it = std::prev(segments_.upper_bound(at));
        if (it->first == at || it->second.end <= at) return;
        Segment tail = it->second;
        it->second.end = at;
        segments_.emplace(at, std::move(tail));
    }

    void release_finished(int now) {
        while (!live_by_last_.empty() && live_by_last_.top().first < now) {
            const int b = live_by_last_.top().second;
            live_by_last_.pop();
            Segment &seg = segments_.at(s_.program.buffers[size_t(b)].offset);
            seg.live = -1;
            seg.freed = {b};
            seg.last_user = life_[size_t(b)].last;
            live_bytes_ -= seg.end - s_.program.buffers[size_t(b)].offset;
        }
    }

    // The largest live buffers, for errors: "conv.weights 2359296 B, conv.in0 16384 B, ...".
    std::string largest_live() const {
        std::vector<std::pair<uint64_t, int>> live;
        for (const auto &[begin, seg] : segments_)
            if (seg.live >= 0) live.emplace_back(seg.end - begin, seg.live);
        std::sort(live.rbegin(), live.rend());
        std::string out;
        constexpr size_t kShown = 4;
        for (size_t i = 0; i < live.size() && i < kShown; ++i)
            out += (i ? ", " : "") + s_.program.buffers[size_t(live[i].second)].name + " " +
                   std::to_string(live[i].first) + " B";
        if (live.size() > kShown) out += ", and " + std::to_string(live.size() - kShown) + " more";
        return out.empty() ? "none" : out;
    }

    void place(int b) {
        auto &buffer = s_.program.buffers[size_t(b)];
        const int now = life_[size_t(b)].first;
        release_finished(now);
        const uint64_t size = (buffer.bytes + 63) / 64 * 64;
        const std::optional<uint64_t> at = best_fit(size);
        if (!at)
            throw LoweringError("buffer '" + buffer.name + "' (" + std::to_string(buffer.bytes) +
                                " bytes) does not fit in CMX of tile " + std::to_string(index_) +
                                ": " + std::to_string(live_bytes_) + " of " +
                                std::to_string(capacity_) + " usable bytes are live (" +
                                largest_live() +
                                "); split the layer's task loops further, or prefetch less");
        buffer.offset = *at;
        split_at(*at);
        split_at(*at + size);
        // Write-after-read: earlier users of the memory finish before this buffer's first use.
        auto &deps = s_.program.tasks[size_t(now)].deps;
        std::set<int> waits(deps.begin(), deps.end());
        auto first = segments_.find(*at), last = segments_.lower_bound(*at + size);
        for (auto it = first; it != last; ++it)
            for (int old : it->second.freed)
                for (int user : life_[size_t(old)].users)
                    if (waits.insert(user).second) deps.push_back(user);
        // The covered memory becomes one segment; whoever reuses it later waits for this
        // buffer's users, which already wait for the old ones.
        segments_.erase(std::next(first), last);
        first->second = {*at + size, b, {}, -1};
        live_by_last_.push({life_[size_t(b)].last, b});
        live_bytes_ += size;
        high_water_ = std::max(high_water_, *at + size);
    }

    LoweringState &s_;
    blob::MemSpace space_;
    uint32_t index_;
    uint64_t capacity_;
    Policy policy_;
    const std::vector<Lifetime> &life_;
    Segments segments_{{0, Segment{capacity_, -1, {}, -1}}};
    // Live buffers, the one whose last user comes first on top.
    std::priority_queue<std::pair<int, int>, std::vector<std::pair<int, int>>, std::greater<>>
        live_by_last_;
    uint64_t live_bytes_ = 0;
    uint64_t high_water_ = 0;
};

} // namespace

void allocate_cmx(LoweringState &s) {
    const auto life = lifetimes(s.program);
    for (int tile = 0; tile < s.target.tiles; ++tile)
        Allocator(s, blob::MemSpace::Cmx, uint32_t(tile), s.target.cmx_usable_bytes,
                  Allocator::Policy::Ring, life)
            .run();
}

void allocate_ddr(LoweringState &s) {
    const auto life = lifetimes(s.program);
    s.program.scratch_bytes =
        Allocator(s, blob::MemSpace::Scratch, 0, UINT64_MAX, Allocator::Policy::Compact, life)
            .run();
}

void verify_allocation(const LoweringState &s) {
    for (const auto &b : s.program.buffers) {
        if (b.offset == kUnallocated) continue; // never used
        uint64_t limit = b.space == blob::MemSpace::Cmx       ? s.target.cmx_usable_bytes
                         : b.space == blob::MemSpace::Scratch ? s.program.scratch_bytes
                                                              : UINT64_MAX;
        if (b.offset + b.bytes > limit)
            throw LoweringError("allocation: buffer '" + b.name + "' ends past its memory");
    }
}

} // namespace vpuc::codegen
