// Spilling, for allocate_cmx: evicted CMX buffers leave CMX between two of their uses.
#include <algorithm>
#include <map>

#include "passes.h"

namespace vpuc::codegen {

namespace {

// One eviction of a buffer: its contents leave CMX after `last_before` and come back, in a
// new buffer, before `next_use`. A buffer evicted k times lives in k + 1 pieces.
struct Spill {
    int from = -1;        // the buffer of the piece before
    int last_before = -1; // its last user (old task index)
    int next_use = -1;    // the first user of the piece after (old task index)
    int reloaded = -1;    // the CMX buffer of the piece after
    int scratch = -1;     // DDR buffer holding it in between; -1 when copied from constants
    int spill_task = -1;  // new task indices
    std::vector<int> reload_tasks;
};

View whole_buffer(int buffer, uint64_t bytes) {
    View v;
    v.buffer = buffer;
    v.dtype = blob::DType::U8;
    v.dims = {blob::Dim(uint32_t(bytes), 1)};
    return v;
}

// The tasks using each buffer of `wanted`, in program order, and whether each writes it.
std::map<int, std::vector<std::pair<int, bool>>> users_of(const Program &p,
                                                          const std::vector<Eviction> &wanted) {
    std::map<int, std::vector<std::pair<int, bool>>> users;
    for (const Eviction &e : wanted) users[e.buffer];
    for (int t = 0; t < int(p.tasks.size()); ++t)
        for_each_view(p.tasks[size_t(t)], [&](const View &v, bool writes) {
            auto it = users.find(v.buffer);
            if (it == users.end()) return;
            if (!it->second.empty() && it->second.back().first == t)
                it->second.back().second |= writes;
            else
                it->second.emplace_back(t, writes);
        });
    return users;
}

// The tasks writing a buffer before task `before`, when all of them are DMAs copying
// constants; otherwise none.
std::vector<int> constant_writers(const Program &p, const std::vector<std::pair<int, bool>> &users,
                                  int before) {
    std::vector<int> writers;
    for (const auto &[t, writes] : users) {
        if (t >= before || !writes) continue;
        const auto *dma = std::get_if<DmaWork>(&p.tasks[size_t(t)].work);
        if (!dma || p.buffers[size_t(dma->src.buffer)].space != blob::MemSpace::Constant) return {};
        writers.push_back(t);
    }
    return writers;
}

} // namespace

void insert_spills(LoweringState &s, const std::vector<Eviction> &evictions) {
    Program &p = s.program;
    const size_t count = p.tasks.size();
    const auto users = users_of(p, evictions);
    // Per evicted buffer, its evictions in program order.
    std::map<int, std::vector<Spill>> spills;
    std::map<int, std::vector<int>> refetch; // the DMAs that copied it from constants
    for (const Eviction &e : evictions) {
        Spill sp;
        sp.from = e.buffer;
        for (const auto &[t, writes] : users.at(e.buffer)) {
            if (t < e.at) sp.last_before = t;
            if (t > e.at && sp.next_use < 0) sp.next_use = t;
        }
        if (sp.last_before < 0 || sp.next_use < 0)
            throw LoweringError("spill: buffer '" + p.buffers[size_t(e.buffer)].name +
                                "' is not in use both before and after task '" +
                                p.tasks[size_t(e.at)].name + "'");
        spills[e.buffer].push_back(sp);
    }
    std::vector<std::vector<std::pair<int, size_t>>> spill_after(count), reload_before(count);
    for (auto &[buffer, list] : spills) {
        std::sort(list.begin(), list.end(),
                  [](const Spill &a, const Spill &b) { return a.next_use < b.next_use; });
        const auto writers = constant_writers(p, users.at(buffer), list[0].last_before + 1);
        if (!writers.empty()) refetch[buffer] = writers;
        for (size_t k = 0; k < list.size(); ++k) {
            Spill &sp = list[k];
            if (k > 0) sp.from = list[k - 1].reloaded;
            BufferDecl reloaded = p.buffers[size_t(buffer)];
            reloaded.offset = kUnallocated;
            reloaded.from_top = false; // lives from its reload to its next users only
            if (writers.empty()) {
                BufferDecl scratch;
                scratch.name = reloaded.name + ".spilled";
                scratch.space = blob::MemSpace::Scratch;
                scratch.bytes = reloaded.bytes;
                sp.scratch = p.add_buffer(std::move(scratch));
            }
            sp.reloaded = p.add_buffer(std::move(reloaded));
            spill_after[size_t(sp.last_before)].emplace_back(buffer, k);
            reload_before[size_t(sp.next_use)].emplace_back(buffer, k);
        }
    }

    // The new program order: each spill right after the last user of the piece before, each
    // reload right before the first user of the piece after.
    std::vector<int> new_index(count, -1);
    std::vector<TaskIR> tasks;
    tasks.reserve(count + 2 * evictions.size());
    for (size_t t = 0; t < count; ++t) {
        for (const auto &[buffer, k] : reload_before[t]) {
            Spill &sp = spills.at(buffer)[k];
            const BufferDecl &b = p.buffers[size_t(buffer)];
            const std::string &layer = p.tasks[t].layer;
            const int tile = int(b.index);
            if (sp.scratch >= 0) {
                sp.reload_tasks.push_back(int(tasks.size()));
                tasks.push_back(dma_task(b.name + ".reload." + std::to_string(tile), layer,
                                         dma_engine_in(s.target, tile),
                                         DmaWork{whole_buffer(sp.scratch, b.bytes),
                                                 {whole_buffer(sp.reloaded, b.bytes)}},
                                         {sp.spill_task}));
                continue;
            }
            for (int writer : refetch.at(buffer)) {
                const TaskIR &w = tasks[size_t(new_index[size_t(writer)])]; // already moved
                DmaWork copy = std::get<DmaWork>(w.work);
                std::vector<View> dsts;
                for (View v : copy.dsts)
                    if (v.buffer == buffer) {
                        v.buffer = sp.reloaded;
                        dsts.push_back(v);
                    }
                copy.dsts = std::move(dsts);
                sp.reload_tasks.push_back(int(tasks.size()));
                tasks.push_back(dma_task(w.name + ".refetch." + std::to_string(tile), layer,
                                         int(w.index), std::move(copy), {}));
            }
        }
        new_index[t] = int(tasks.size());
        tasks.push_back(std::move(p.tasks[t]));
        for (int &d : tasks.back().deps) d = new_index[size_t(d)];
        const std::string layer = tasks.back().layer;
        for (const auto &[buffer, k] : spill_after[t]) {
            Spill &sp = spills.at(buffer)[k];
            if (sp.scratch < 0) continue;
            const BufferDecl &b = p.buffers[size_t(buffer)];
            // The copy out waits for every write of the piece before.
            std::vector<int> deps;
            if (k > 0) deps = spills.at(buffer)[k - 1].reload_tasks;
            const int piece_begin = k > 0 ? spills.at(buffer)[k - 1].next_use : 0;
            for (const auto &[user, writes] : users.at(buffer))
                if (user >= piece_begin && user <= sp.last_before && writes)
                    deps.push_back(new_index[size_t(user)]);
            sp.spill_task = int(tasks.size());
            tasks.push_back(dma_task(
                b.name + ".spill." + std::to_string(b.index), layer,
                dma_engine_out(s.target, int(b.index)),
                DmaWork{whole_buffer(sp.from, b.bytes), {whole_buffer(sp.scratch, b.bytes)}},
                std::move(deps)));
        }
    }

    // Each piece's users use its buffer, once it is back.
    for (const auto &[buffer, list] : spills)
        for (const auto &[user, writes] : users.at(buffer)) {
            size_t piece = 0;
            while (piece < list.size() && list[piece].next_use <= user) ++piece;
            if (piece == 0) continue;
            const Spill &sp = list[piece - 1];
            TaskIR &t = tasks[size_t(new_index[size_t(user)])];
            // The structured binding is captured by copy: C++17 has no other way.
            for_each_view(t, [&, buffer = buffer](View &v, bool) {
                if (v.buffer == buffer) v.buffer = sp.reloaded;
            });
            t.deps.insert(t.deps.end(), sp.reload_tasks.begin(), sp.reload_tasks.end());
        }
    p.tasks = std::move(tasks);
    s.renumber_tasks([&](int w) { return new_index[size_t(w)]; });
}

} // namespace vpuc::codegen
