// Pass broadcast_outputs: a layer kept in CMX has a copy of its whole output on every tile that
// computes it or reads it, and each of its tasks computes into its own tile's copy. After each
// such task, one DMA with several destinations copies what it wrote into the copies of the
// other tiles (but those of a replicated layer's tiles, which compute everything themselves),
// and every task that waited for the computation waits for the copy too. A layer kept by rows
// (each tile its own, read there alone) has nothing to copy.
#include <algorithm>
#include <map>

#include "passes.h"

namespace vpuc::codegen {

namespace {

// The CMX copy that a DPU or SHAVE task computes into: its layer's copy on its tile, or none.
struct ComputedCopy {
    const ResidentCopies *copies = nullptr;
    View written; // the part of it the task writes, as a DMA reads it
};

ComputedCopy computed_copy(const LoweringState &s, const TaskIR &t) {
    if (t.engine == blob::EngineKind::Dma) return {};
    const auto copies = std::find_if(s.resident_copies.begin(), s.resident_copies.end(),
                                     [&](const ResidentCopies &c) { return c.layer == t.layer; });
    if (copies == s.resident_copies.end()) return {};
    const auto buffer = copies->buffers.find(int(t.tile));
    ComputedCopy found;
    for_each_view(t, [&](const View &v, bool writes) {
        if (writes && buffer != copies->buffers.end() && v.buffer == buffer->second) {
            found.copies = &*copies;
            found.written = v;
        }
    });
    if (!found.copies) return {};
    // A SHAVE kernel's argument has no batch dimension; a DMA view has all four. The copy
    // holds one image, so the batch dimension's stride is the copy's elements.
    if (found.written.dims.size() == 3) {
        const uint64_t bytes = s.program.buffers[size_t(found.written.buffer)].bytes;
        found.written.dims.push_back(
            blob::Dim(1, int64_t(bytes) / blob::dtype_bytes(found.written.dtype)));
    }
    return found;
}

// `v` moved into `buffer`, at the same offset: the copies have one layout.
View in_buffer(View v, int buffer) {
    v.buffer = buffer;
    return v;
}

// The copies that must follow the task on `tile` that computed `computed.written`, one DMA
// each. A whole copy: all it wrote, into the copy of every other tile that does not compute it
// itself, in one DMA. A copy of rows: the rows it wrote that another tile's copy holds (a
// halo), into that copy, whose rows start elsewhere.
std::vector<DmaWork> copies_after(const ComputedCopy &computed, int tile) {
    const ResidentCopies &copies = *computed.copies;
    const View &written = computed.written;
    std::vector<DmaWork> out;
    if (copies.rows.empty()) {
        std::vector<View> others;
        for (const auto &[other, buffer] : copies.buffers)
            if (other != tile && !copies.computing_all.count(other))
                others.push_back(in_buffer(written, buffer));
        if (!others.empty()) out.push_back({written, std::move(others)});
        return out;
    }
    // Rows of all channels and columns: a row is a fixed number of bytes in every copy.
    const uint64_t row_bytes =
        uint64_t(written.dims[2].stride()) * uint64_t(blob::dtype_bytes(written.dtype));
    const int64_t held_from = copies.rows.at(tile).begin;
    const int64_t first = held_from + int64_t(written.offset / row_bytes);
    const uint64_t within_row = written.offset % row_bytes;
    const int64_t end = first + int64_t(written.dims[2].extent());
    for (const auto &[other, rows] : copies.rows) {
        const int64_t from = std::max(first, rows.begin), to = std::min(end, rows.end);
        if (other == tile || copies.computing_all.count(other) || from >= to) continue;
        View src = written;
        src.offset = within_row + uint64_t(from - held_from) * row_bytes;
        src.dims[2] = blob::Dim(uint32_t(to - from), src.dims[2].stride());
        View dst = in_buffer(src, copies.buffers.at(other));
        dst.offset = within_row + uint64_t(from - rows.begin) * row_bytes;
        out.push_back({src, {dst}});
    }
    return out;
}

// The name of the copy after computing task `t`, named `<layer>.<what>.<tile>.<region>`:
// `<layer>.broadcast.<tile>.<region>`.
std::string broadcast_name(const TaskIR &t) {
    const size_t what = t.layer.size() + 1;
    const size_t after = t.name.find('.', what);
    if (t.name.compare(0, what, t.layer + ".") != 0 || after == std::string::npos)
        return t.name + ".broadcast";
    return t.layer + ".broadcast" + t.name.substr(after);
}

} // namespace

void broadcast_outputs(LoweringState &s) {
    std::vector<TaskIR> tasks;
    std::vector<int> new_index(s.program.tasks.size());
    // Computing task -> the DMAs copying its result (new indices).
    std::map<int, std::vector<int>> copy_after;
    // Every task waiting for a computation waits for its copy too, listed right after it.
    auto with_copies = [&](const std::vector<int> &computations) {
        std::vector<int> out;
        for (int w : computations) {
            out.push_back(w);
            if (auto copy = copy_after.find(w); copy != copy_after.end())
                out.insert(out.end(), copy->second.begin(), copy->second.end());
        }
        return out;
    };
    for (size_t i = 0; i < s.program.tasks.size(); ++i) {
        TaskIR &t = s.program.tasks[i];
        for (int &dep : t.deps) dep = new_index[size_t(dep)];
        t.deps = with_copies(t.deps);
        const ComputedCopy computed = computed_copy(s, t);
        new_index[i] = int(tasks.size());
        tasks.push_back(std::move(t));
        if (!computed.copies) continue;
        const int tile = int(tasks.back().tile);
        const std::string name = broadcast_name(tasks.back()), layer = tasks.back().layer;
        for (DmaWork &copy : copies_after(computed, tile)) {
            copy_after[new_index[i]].push_back(int(tasks.size()));
            tasks.push_back(dma_task(name, layer, dma_engine_out(s.target, tile), std::move(copy),
                                     {new_index[i]}));
        }
    }
    s.program.tasks = std::move(tasks);
    s.renumber_tasks([&](int w) { return new_index[size_t(w)]; });
    for (auto &[layer, writers] : s.layer_writers) writers = with_copies(writers);
}

// Every part of a copy that a task computes reaches the copies of the other tiles that do not
// compute it themselves (but for a copy of the tile's own rows, which only that tile reads:
// build_tasks checks each read lies in them): one DMA after the task reads what it wrote and
// writes the same bytes of each of them. A task of another layer reading a copy waits for
// every task writing it (of a copy of its tile's rows: every task writing the bytes it reads).
void verify_broadcasts(const LoweringState &s) {
    std::map<int, const ResidentCopies *> copy_in; // CMX buffer -> the copies it is one of
    for (const ResidentCopies &copies : s.resident_copies)
        for (const auto &[tile, buffer] : copies.buffers) copy_in[buffer] = &copies;
    std::map<int, std::vector<int>> writers_of; // copy buffer -> tasks writing it
    for (size_t i = 0; i < s.program.tasks.size(); ++i)
        for_each_view(s.program.tasks[i], [&](const View &v, bool writes) {
            if (writes && copy_in.count(v.buffer)) writers_of[v.buffer].push_back(int(i));
        });
    for (size_t i = 0; i < s.program.tasks.size(); ++i) {
        const TaskIR &t = s.program.tasks[i];
        auto fail = [&](const std::string &what) {
            throw LoweringError("layer '" + t.layer + "': task '" + t.name + "': " + what);
        };
        const ComputedCopy computed = computed_copy(s, t);
        if (computed.copies)
            for (const DmaWork &expected : copies_after(computed, int(t.tile)))
                for (const View &dst : expected.dsts) {
                    const bool copied = std::any_of(
                        writers_of[dst.buffer].begin(), writers_of[dst.buffer].end(), [&](int w) {
                            const TaskIR &copy = s.program.tasks[size_t(w)];
                            const auto *dma = std::get_if<DmaWork>(&copy.work);
                            const auto same = [](const View &a, const View &b) {
                                return a.buffer == b.buffer && a.offset == b.offset &&
                                       a.dtype == b.dtype && a.dims == b.dims;
                            };
                            return dma && same(dma->src, expected.src) &&
                                   std::any_of(dma->dsts.begin(), dma->dsts.end(),
                                               [&](const View &d) { return same(d, dst); }) &&
                                   std::count(copy.deps.begin(), copy.deps.end(), int(i));
                        });
                    if (!copied)
                        fail("what it computes into its copy of the output on tile " +
                             std::to_string(t.tile) + " is not copied to '" +
                             s.program.buffers[size_t(dst.buffer)].name + "'");
                }
        for_each_view(t, [&](const View &v, bool writes) {
            const auto copies = copy_in.find(v.buffer);
            if (writes || copies == copy_in.end() || copies->second->layer == t.layer) return;
            for (int w : writers_of[v.buffer])
                if ((copies->second->rows.empty() ||
                     writes_within(s.program.tasks[size_t(w)], v)) &&
                    !std::count(t.deps.begin(), t.deps.end(), w))
                    fail("reads the copy of '" + copies->second->layer + "' in '" +
                         s.program.buffers[size_t(v.buffer)].name + "' without waiting for '" +
                         s.program.tasks[size_t(w)].name + "', which writes it");
        });
    }
}

} // namespace vpuc::codegen
