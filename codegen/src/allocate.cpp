// Passes allocate_cmx and allocate_ddr: addresses for every buffer.
#include <algorithm>
#include <map>
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

struct Block {
    uint64_t begin, end;
    int buffer;
};

// First-fit allocation of one tile's CMX in program order. A buffer placed over memory that
// an earlier buffer used makes its first user wait for all of that buffer's users (WAR).
class CmxAllocator {
  public:
    CmxAllocator(LoweringState &s, uint32_t tile, const std::vector<Lifetime> &life)
        : s_(s), tile_(tile), life_(life) {}

    void run() {
        auto &p = s_.program;
        std::vector<int> order;
        for (int b = 0; b < int(p.buffers.size()); ++b)
            if (p.buffers[size_t(b)].space == blob::MemSpace::Cmx &&
                p.buffers[size_t(b)].index == tile_ && life_[size_t(b)].first >= 0)
                order.push_back(b);
        std::stable_sort(order.begin(), order.end(), [&](int a, int b) {
            return life_[size_t(a)].first < life_[size_t(b)].first;
        });
        for (int b : order) place(b);
    }

  private:
    void place(int b) {
        auto &buffer = s_.program.buffers[size_t(b)];
        const int now = life_[size_t(b)].first;
        // Free what no later task touches.
        live_.erase(std::remove_if(live_.begin(), live_.end(),
                                   [&](const Block &blk) {
                                       if (life_[size_t(blk.buffer)].last >= now) return false;
                                       freed_.push_back(blk);
                                       return true;
                                   }),
                    live_.end());
        const uint64_t size = (buffer.bytes + 63) / 64 * 64;
        uint64_t at = 0;
        std::vector<Block> sorted = live_;
        std::sort(sorted.begin(), sorted.end(),
                  [](const Block &a, const Block &b) { return a.begin < b.begin; });
        for (const Block &blk : sorted) {
            if (at + size <= blk.begin) break;
            at = std::max(at, blk.end);
        }
        if (at + size > s_.target.cmx_usable_bytes) {
            uint64_t used = 0;
            for (const Block &blk : live_) used += blk.end - blk.begin;
            throw LoweringError("buffer '" + buffer.name + "' (" + std::to_string(buffer.bytes) +
                                " bytes) does not fit in CMX of tile " + std::to_string(tile_) +
                                ": " + std::to_string(used) + " of " +
                                std::to_string(s_.target.cmx_usable_bytes) +
                                " usable bytes are live; split the layer's task loops further");
        }
        buffer.offset = at;
        Block mine{at, at + size, b};
        // Write-after-read: earlier users of the memory finish before this buffer's first use.
        auto &deps = s_.program.tasks[size_t(now)].deps;
        for (const Block &old : freed_)
            if (old.begin < mine.end && mine.begin < old.end)
                for (int user : life_[size_t(old.buffer)].users)
                    if (std::find(deps.begin(), deps.end(), user) == deps.end())
                        deps.push_back(user);
        freed_.erase(std::remove_if(freed_.begin(), freed_.end(),
                                    [&](const Block &old) {
                                        return old.begin >= mine.begin && old.end <= mine.end;
                                    }),
                     freed_.end());
        live_.push_back(mine);
    }

    LoweringState &s_;
    uint32_t tile_;
    const std::vector<Lifetime> &life_;
    std::vector<Block> live_, freed_;
};

} // namespace

void allocate_cmx(LoweringState &s) {
    const auto life = lifetimes(s.program);
    for (int tile = 0; tile < s.target.tiles; ++tile) CmxAllocator(s, uint32_t(tile), life).run();
}

void allocate_ddr(LoweringState &s) {
    // Scratch tensors get their own space each (no lifetime reuse yet).
    uint64_t at = 0;
    for (auto &b : s.program.buffers) {
        if (b.space != blob::MemSpace::Scratch) continue;
        b.offset = at;
        at += (b.bytes + 63) / 64 * 64;
    }
    s.program.scratch_bytes = at;
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
