// Pass split_weight_copies: a weight copy that several tiles wait for is shared out between
// the DMA engines their inputs come on, so that no tile's first input queues behind all of it.
#include <algorithm>
#include <map>
#include <set>

#include "passes.h"

namespace vpuc::codegen {

namespace {

// Where to cut `bytes` into `parts` copies that run side by side on as many DMA engines, each
// part a DMA latency's worth of bytes (`latency_bytes`) larger than the one before. Equal
// parts would end together, and every engine would then wait out its next transfer's latency
// at the same moment while DDR idles; staggered, one engine's latency hides behind another's
// transfer. The step shrinks when the smallest part would fall below half a latency's worth.
// Cuts fall on 64-byte boundaries, the DDR burst.
std::vector<uint64_t> staggered_cuts(uint64_t bytes, size_t parts, double latency_bytes) {
    const double n = double(parts), share = double(bytes) / n;
    double step = latency_bytes;
    if (parts > 1 && share - step * (n - 1) / 2 < latency_bytes / 2)
        step = std::max(0.0, (share - latency_bytes / 2) * 2 / (n - 1));
    std::vector<uint64_t> cuts{0};
    double end = 0;
    for (size_t k = 0; k + 1 < parts; ++k) {
        end += share + step * (double(k) - (n - 1) / 2);
        cuts.push_back(std::min<uint64_t>(bytes, uint64_t(end) / 64 * 64));
    }
    cuts.push_back(bytes);
    return cuts;
}

} // namespace

void split_weight_copies(LoweringState &s) {
    const std::set<int> constants = weight_constants(s);
    // Each part moves at least a DMA latency's worth of bytes, or its latency costs more than
    // the split saves.
    const double latency_bytes =
        s.target.dma_timing.ddr_to_cmx_latency_ns * s.target.ddr_bandwidth_gbps;
    std::vector<TaskIR> tasks;
    std::vector<std::vector<int>> replaced_by(s.program.tasks.size());
    for (size_t i = 0; i < s.program.tasks.size(); ++i) {
        TaskIR &t = s.program.tasks[i];
        std::vector<int> deps;
        for (int dep : t.deps)
            for (int part : replaced_by[size_t(dep)]) deps.push_back(part);
        t.deps = std::move(deps);
        if (!copies_weights(t, constants)) {
            replaced_by[i] = {int(tasks.size())};
            tasks.push_back(std::move(t));
            continue;
        }
        const DmaWork &copy = std::get<DmaWork>(t.work);
        // The tiles waiting for the copy, in the order of its destinations.
        std::vector<int> tiles;
        for (const View &dst : copy.dsts)
            tiles.push_back(int(s.program.buffers[size_t(dst.buffer)].index));
        const uint64_t bytes = copy.src.dims[0].extent();
        const size_t parts =
            std::clamp<size_t>(size_t(double(bytes) / latency_bytes), 1,
                               std::min(tiles.size(), size_t(s.target.dma_engines)));
        const std::vector<uint64_t> cuts = staggered_cuts(bytes, parts, latency_bytes);
        for (size_t part = 0; part < parts; ++part) {
            const uint64_t begin = cuts[part], end = cuts[part + 1];
            DmaWork piece = copy;
            piece.src.offset += begin;
            piece.src.dims = {blob::Dim(uint32_t(end - begin), 1)};
            for (View &d : piece.dsts) {
                d.offset += begin;
                d.dims = piece.src.dims;
            }
            replaced_by[i].push_back(int(tasks.size()));
            tasks.push_back(dma_task(t.name + "." + std::to_string(part), t.layer,
                                     dma_engine_in(s.target, tiles[part]), std::move(piece),
                                     t.deps));
        }
    }
    s.program.tasks = std::move(tasks);
    s.renumber_tasks([&](int w) { return replaced_by[size_t(w)].front(); });
}

// Each weight constant is copied by parts that run on DMA engines of the target, read it from
// its first byte to its last, one after another, and write the same bytes of every
// destination: their sizes sum to the logical copy.
void verify_weight_copies(const LoweringState &s) {
    const std::set<int> constants = weight_constants(s);
    std::map<int, std::vector<const TaskIR *>> parts; // constant -> its copies, in order
    for (const TaskIR &t : s.program.tasks)
        if (copies_weights(t, constants)) parts[std::get<DmaWork>(t.work).src.buffer].push_back(&t);
    for (int constant : constants) {
        const BufferDecl &b = s.program.buffers[size_t(constant)];
        uint64_t next = 0;
        for (const TaskIR *t : parts[constant]) {
            const DmaWork &copy = std::get<DmaWork>(t->work);
            auto fail = [&](const std::string &what) {
                throw LoweringError("layer '" + t->layer + "': weight copy '" + t->name +
                                    "': " + what);
            };
            if (t->index >= uint32_t(s.target.dma_engines))
                fail("DMA engine " + std::to_string(t->index) + " does not exist");
            if (copy.src.offset != next)
                fail("starts at byte " + std::to_string(copy.src.offset) + " of '" + b.name +
                     "', not " + std::to_string(next));
            for (const View &d : copy.dsts)
                if (d.offset != copy.src.offset || d.dims.size() != copy.src.dims.size() ||
                    d.dims[0].extent() != copy.src.dims[0].extent())
                    fail("a destination's bytes differ from the source's");
            next += copy.src.dims[0].extent();
        }
        if (next != b.bytes)
            throw LoweringError("the copies of the weight constant '" + b.name + "' move " +
                                std::to_string(next) + " of its " + std::to_string(b.bytes) +
                                " bytes");
    }
}

} // namespace vpuc::codegen
