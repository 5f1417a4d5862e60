// Passes allocate_cmx and allocate_ddr: addresses for every buffer.
#include <algorithm>
#include <functional>
#include <iterator>
#include <map>
#include <optional>
#include <queue>
#include <set>

#include "codegen/ddr_size.h"
#include "passes.h"

namespace vpuc::codegen {

namespace {

// Program-order lifetimes: the first and last task touching each buffer, and the tasks
// writing it.
struct Lifetime {
    int first = -1, last = -1;
    std::vector<int> users, writers;
};

std::vector<Lifetime> lifetimes(const Program &p) {
    std::vector<Lifetime> life(p.buffers.size());
    for (int t = 0; t < int(p.tasks.size()); ++t)
        for_each_view(p.tasks[size_t(t)], [&](const View &v, bool writes) {
            Lifetime &l = life[size_t(v.buffer)];
            if (l.first < 0) l.first = t;
            l.last = t;
            if (l.users.empty() || l.users.back() != t) l.users.push_back(t);
            if (writes && (l.writers.empty() || l.writers.back() != t)) l.writers.push_back(t);
        });
    return life;
}

// Allocation of one memory (a tile's CMX, or DDR scratch) in program order. A buffer placed
// over memory that an earlier buffer used makes every task writing it wait for all of that
// buffer's users (write-after-read): a buffer may have several writers (the parts of a region
// computed at a consumer, a weight copy split between DMA engines), which need not wait for
// each other.
//
// CMX (Policy::Ring): among the places where a buffer fits, it takes the one whose previous
// users finished longest ago: never-used memory first, then the least recently freed. Reusing
// the memory freed last would chain a task to its predecessor (a DPU task waiting for the
// previous task's output to be stored); this way consecutive tasks rotate through CMX like a
// ring. Bands kept by rows (BufferDecl::from_top) are placed from the top down instead, and
// the other buffers, where they fit, below the room those bands take while they live.
//
// When no place is free, CMX evicts the live buffer, not used by the task at hand, whose next
// use is furthest away (Belady's choice), until the buffer fits; the evicted buffer is placed
// again at its next use, as its reload will be. Evictions are only recorded: allocate_cmx
// spills the evicted buffers and allocates again.
//
// DDR (Policy::Compact): the lowest address that is free. A tensor's memory is reused once
// every task reading it is ordered before the new tensor's first writer, which for tensors of
// layers already done costs nothing, and keeps the scratch section small.
//
// The write-after-read dependencies go to `Allocation::waits`, to be added to the tasks once
// an allocation needs no eviction.
struct Allocation {
    explicit Allocation(size_t tasks) : waits(tasks) {}
    std::vector<std::vector<int>> waits; // per task: the tasks it must also wait for
    std::vector<Eviction> evictions;
};

class Allocator {
  public:
    enum class Policy { Ring, Compact };

    Allocator(LoweringState &s, blob::MemSpace space, uint32_t index, uint64_t capacity,
              Policy policy, const std::vector<Lifetime> &life, Allocation &out)
        : s_(s), space_(space), index_(index), capacity_(capacity), policy_(policy), life_(life),
          out_(out) {}

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
        band_bytes_before_.assign(p.tasks.size() + 1, 0);
        for (int b : order)
            if (p.buffers[size_t(b)].from_top)
                band_bytes_before_[size_t(life_[size_t(b)].first) + 1] +=
                    placed_bytes(p.buffers[size_t(b)]);
        for (size_t t = 1; t < band_bytes_before_.size(); ++t)
            band_bytes_before_[t] += band_bytes_before_[t - 1];
        for (size_t next = 0; next < order.size() || !reloads_.empty();) {
            const int b = next < order.size() ? order[next] : -1;
            // A reload runs just before its next use: before buffers that use begins.
            if (!reloads_.empty() && (b < 0 || reloads_.top().first <= life_[size_t(b)].first)) {
                const int stay = reloads_.top().second;
                reloads_.pop();
                place(stay);
            } else {
                stays_.push_back({b, 0, kUnallocated});
                place(int(stays_.size()) - 1);
                ++next;
            }
        }
        return high_water_;
    }

  private:
    // A buffer's stay in memory: its whole life, or, once evicted, from its next use on.
    struct Stay {
        int buffer = -1;
        size_t first_user = 0; // index into its users
        uint64_t offset = kUnallocated;
    };

    // The memory as consecutive segments, keyed by their start: each holds one live stay,
    // or is free and remembers the buffers freed there since a buffer last covered it (the
    // ones a new writer must wait for; older ones are implied by them).
    struct Segment {
        uint64_t end = 0;
        int live = -1; // a stay
        std::vector<int> freed;
        int last_user = -1; // the latest last user among `freed`
    };
    using Segments = std::map<uint64_t, Segment>;

    // The free range of `size` bytes ending at or below `limit`, starting at a segment boundary
    // whose previous users finished earliest (Ring), or the lowest (Compact).
    std::optional<uint64_t> best_fit(uint64_t size, uint64_t limit) const {
        std::optional<uint64_t> best;
        int best_cost = 0;
        for (auto start = segments_.begin(); start != segments_.end(); ++start) {
            if (start->second.live >= 0 || start->first + size > limit) continue;
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

    // The highest free range of `size` bytes: the top of the highest run of free segments that
    // holds it.
    std::optional<uint64_t> top_fit(uint64_t size) const {
        std::optional<uint64_t> best;
        for (auto start = segments_.begin(); start != segments_.end();) {
            if (start->second.live >= 0) {
                ++start;
                continue;
            }
            auto it = start;
            uint64_t end = start->second.end;
            while (std::next(it) != segments_.end() && std::next(it)->second.live < 0) {
                ++it;
                end = it->second.end;
            }
            if (end - start->first >= size) best = end - size;
            start = std::next(it);
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
            const int stay = live_by_last_.top().second;
            live_by_last_.pop();
            if (evicted_.count(stay)) continue;
            const Stay &st = stays_[size_t(stay)];
            Segment &seg = segments_.at(st.offset);
            seg.live = -1;
            seg.freed = {st.buffer};
            seg.last_user = life_[size_t(st.buffer)].last;
            live_bytes_ -= seg.end - st.offset;
        }
    }

    // The largest live buffers, for errors: "conv.weights 2359296 B, conv.in0 16384 B, ...".
    std::string largest_live() const {
        std::vector<std::pair<uint64_t, int>> live;
        for (const auto &[begin, seg] : segments_)
            if (seg.live >= 0) live.emplace_back(seg.end - begin, stays_[size_t(seg.live)].buffer);
        std::sort(live.rbegin(), live.rend());
        std::string out;
        constexpr size_t kShown = 4;
        for (size_t i = 0; i < live.size() && i < kShown; ++i)
            out += (i ? ", " : "") + s_.program.buffers[size_t(live[i].second)].name + " " +
                   std::to_string(live[i].first) + " B";
        if (live.size() > kShown) out += ", and " + std::to_string(live.size() - kShown) + " more";
        return out.empty() ? "none" : out;
    }

    // Makes task `task` wait for each of `earlier` it does not wait for yet.
    void wait_for(int task, const std::set<int> &earlier) {
        const auto &deps = s_.program.tasks[size_t(task)].deps;
        auto &added = out_.waits[size_t(task)];
        std::set<int> waits(deps.begin(), deps.end());
        waits.insert(added.begin(), added.end());
        for (int user : earlier)
            if (waits.insert(user).second) added.push_back(user);
    }

    // Evicts the live buffer not used by task `now` whose next use is furthest, to come back
    // at that use; false when every live buffer is used by `now`.
    bool evict(int now) {
        int victim = -1, next_use = -1;
        size_t victim_next = 0; // index of next_use among the victim's users
        for (const auto &[begin, seg] : segments_) {
            if (seg.live < 0) continue;
            const auto &users = life_[size_t(stays_[size_t(seg.live)].buffer)].users;
            const auto next = std::lower_bound(users.begin(), users.end(), now);
            if (next == users.end() || *next == now || *next <= next_use) continue;
            victim = seg.live;
            next_use = *next;
            victim_next = size_t(next - users.begin());
        }
        if (victim < 0) return false;
        const Stay &st = stays_[size_t(victim)];
        Segment &seg = segments_.at(st.offset);
        live_bytes_ -= seg.end - st.offset;
        seg = {seg.end, -1, {}, -1};
        evicted_.insert(victim);
        out_.evictions.push_back({st.buffer, now});
        stays_.push_back({st.buffer, victim_next, kUnallocated});
        reloads_.push({next_use, int(stays_.size()) - 1});
        return true;
    }

    static uint64_t placed_bytes(const BufferDecl &buffer) { return (buffer.bytes + 63) / 64 * 64; }

    // Where buffer `b`, placed at task `now`, should end for the bands kept by rows to keep
    // their room at the top: below the lowest live band, less the bytes of the bands that begin
    // while it lives. A weight copy placed anywhere else could cut the top into pieces that no
    // longer fit a band of 41% of CMX (ResNet-50 fp16's 56x56x256 tensors on vpu27).
    uint64_t from_top_room(int b, int now) const {
        // No bands in this memory (DDR scratch has none): nothing to leave room for.
        if (s_.program.buffers[size_t(b)].from_top || band_bytes_before_.back() == 0)
            return capacity_;
        uint64_t lowest_band = capacity_;
        for (const auto &[begin, seg] : segments_)
            if (seg.live >= 0 &&
                s_.program.buffers[size_t(stays_[size_t(seg.live)].buffer)].from_top)
                lowest_band = std::min(lowest_band, begin);
        const uint64_t coming = band_bytes_before_[size_t(life_[size_t(b)].last) + 1] -
                                band_bytes_before_[size_t(now) + 1];
        return coming < lowest_band ? lowest_band - coming : 0;
    }

    void place(int stay) {
        const int b = stays_[size_t(stay)].buffer;
        auto &buffer = s_.program.buffers[size_t(b)];
        const int now = life_[size_t(b)].users[stays_[size_t(stay)].first_user];
        release_finished(now);
        const uint64_t size = placed_bytes(buffer);
        const std::string what = "buffer '" + buffer.name + "' (" + std::to_string(buffer.bytes) +
                                 " bytes) does not fit in CMX of tile " + std::to_string(index_);
        if (size > capacity_)
            throw LoweringError(what + ", which has " + std::to_string(capacity_) +
                                " usable bytes; split the layer's task loops further");
        // A band kept by rows stays from its producer to its last reader: from the top down,
        // away from the tasks' short-lived buffers, such bands leave CMX in fewer pieces.
        const uint64_t below = from_top_room(b, now);
        auto fit = [&]() -> std::optional<uint64_t> {
            if (buffer.from_top) return top_fit(size);
            if (below < capacity_)
                if (auto at = best_fit(size, below)) return at;
            return best_fit(size, capacity_);
        };
        std::optional<uint64_t> at = fit();
        while (!at && policy_ == Policy::Ring && evict(now)) at = fit();
        if (!at)
            throw LoweringError(what + ": " + std::to_string(live_bytes_) + " of " +
                                std::to_string(capacity_) +
                                " usable bytes are live, all used by task '" +
                                s_.program.tasks[size_t(now)].name + "' (" + largest_live() +
                                "); split the layer's task loops further, or prefetch less");
        buffer.offset = *at;
        stays_[size_t(stay)].offset = *at;
        split_at(*at);
        split_at(*at + size);
        // Write-after-read: earlier users of the memory finish before this buffer is written.
        std::set<int> earlier;
        auto first = segments_.find(*at), last = segments_.lower_bound(*at + size);
        for (auto it = first; it != last; ++it)
            for (int old : it->second.freed)
                earlier.insert(life_[size_t(old)].users.begin(), life_[size_t(old)].users.end());
        if (!earlier.empty()) {
            std::vector<int> writers;
            for (int w : life_[size_t(b)].writers)
                if (w >= now) writers.push_back(w);
            if (writers.empty()) writers.push_back(now);
            for (int w : writers) wait_for(w, earlier);
        }
        // The covered memory becomes one segment; whoever reuses it later waits for this
        // buffer's users, which already wait for the old ones.
        segments_.erase(std::next(first), last);
        first->second = {*at + size, stay, {}, -1};
        live_by_last_.push({life_[size_t(b)].last, stay});
        live_bytes_ += size;
        high_water_ = std::max(high_water_, *at + size);
    }

    LoweringState &s_;
    blob::MemSpace space_;
    uint32_t index_;
    uint64_t capacity_;
    Policy policy_;
    const std::vector<Lifetime> &life_;
    Allocation &out_;
    std::vector<Stay> stays_;
    std::set<int> evicted_; // stays
    Segments segments_{{0, Segment{capacity_, -1, {}, -1}}};
    using ByTask =
        std::priority_queue<std::pair<int, int>, std::vector<std::pair<int, int>>, std::greater<>>;
    ByTask live_by_last_; // live stays, the one whose last user comes first on top
    ByTask reloads_;      // evicted buffers' returns, the earliest next use on top
    uint64_t live_bytes_ = 0;
    uint64_t high_water_ = 0;
    // Per task t, the bytes of the bands kept by rows whose first user comes before t.
    std::vector<uint64_t> band_bytes_before_;
};

// An empty buffer would take no memory, and would make an empty segment that the allocator
// cannot place: it means a task with nothing to read or write, which task building never makes.
void verify_no_empty_buffers(const Program &p) {
    const std::vector<Lifetime> life = lifetimes(p);
    for (size_t b = 0; b < p.buffers.size(); ++b)
        if (p.buffers[b].bytes == 0 && life[b].first >= 0)
            throw LoweringError("allocation: buffer '" + p.buffers[b].name + "' (used by task '" +
                                p.tasks[size_t(life[b].first)].name + "') has no bytes");
}

void add_waits(Program &p, const Allocation &a) {
    for (size_t t = 0; t < p.tasks.size(); ++t)
        p.tasks[t].deps.insert(p.tasks[t].deps.end(), a.waits[t].begin(), a.waits[t].end());
}

Allocation allocate_cmx_once(LoweringState &s) {
    const auto life = lifetimes(s.program);
    Allocation allocation(s.program.tasks.size());
    for (int tile = 0; tile < s.target.tiles; ++tile)
        Allocator(s, blob::MemSpace::Cmx, uint32_t(tile), s.target.cmx_usable_bytes,
                  Allocator::Policy::Ring, life, allocation)
            .run();
    return allocation;
}

} // namespace

std::vector<Eviction> cmx_evictions(LoweringState &s) {
    verify_no_empty_buffers(s.program);
    std::vector<uint64_t> offsets;
    for (const BufferDecl &b : s.program.buffers) offsets.push_back(b.offset);
    std::vector<Eviction> evictions = allocate_cmx_once(s).evictions;
    for (size_t b = 0; b < offsets.size(); ++b) s.program.buffers[b].offset = offsets[b];
    return evictions;
}

// Allocation evicts what does not fit; the evicted buffers are spilled (insert_spills) and
// the program allocated again, until nothing more is evicted. A spill's reload can itself
// crowd CMX, so this may take a few rounds.
void allocate_cmx(LoweringState &s) {
    verify_no_empty_buffers(s.program);
    constexpr int kMaxRounds = 32;
    for (int round = 0;; ++round) {
        const Allocation allocation = allocate_cmx_once(s);
        if (allocation.evictions.empty()) return add_waits(s.program, allocation);
        if (round == kMaxRounds)
            throw LoweringError("CMX allocation still evicts buffers after " +
                                std::to_string(kMaxRounds) + " rounds of spilling (first: '" +
                                s.program.buffers[size_t(allocation.evictions[0].buffer)].name +
                                "'); split the layers' task loops further");
        insert_spills(s, allocation.evictions);
    }
}

void allocate_ddr(LoweringState &s) {
    verify_no_empty_buffers(s.program);
    const auto life = lifetimes(s.program);
    Allocation allocation(s.program.tasks.size());
    s.program.scratch_bytes = Allocator(s, blob::MemSpace::Scratch, 0, UINT64_MAX,
                                        Allocator::Policy::Compact, life, allocation)
                                  .run();
    add_waits(s.program, allocation);
    check_ddr_size(s.program, s.target);
}

void verify_allocation(const LoweringState &s) {
    verify_tasks(s); // allocation adds dependencies, and spilling adds tasks
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
