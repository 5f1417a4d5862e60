// Pass assign_dma_engines: the DMA engine mapping the simulator runs fastest.
//
// build_tasks puts a tile's loads on one engine and its stores and copies to other tiles on
// another (dma_engine_in, dma_engine_out): on two engines, each carries one tile's loads and
// the other tile's outputs, and the loads of both tiles, each paying a fixed latency, run side
// by side. Once prefetch_weights has queued a layer's weight copies ahead of the layers before
// it, though, those layers' outputs, which the next layers wait for, queue behind the copies on
// the engines' in-order queues. Two other mappings keep them apart, each giving some transfers
// the first half of the engines and the rest the other half, by tile within a half:
//  - by direction (Split::ReadsDdr): the transfers reading DDR (weights, inputs, spilled
//    buffers loaded back) apart from those reading CMX (stores, copies between tiles, spills);
//  - weights apart (Split::Weights): the copies of constants apart from every other transfer,
//    the ones some task is waiting for.
// On vpu27 an engine alone moves DDR bytes at the DDR's rate (docs/timing-model.md, "DMA
// model"), so loads sharing one lose only the overlap of their latencies.
//
// Which mapping wins depends on the program: vpu27's ResNet-50 int8 runs 1,623 us by tile,
// 1,549 us by direction and 1,534 us with weights apart, its fp16 form 3,568, 3,254 and
// 3,293 us, but three small 3x3 convolutions 9.2 us by tile and 11.0 us by direction. The pass
// asks the simulator (timing only, as order_as_run does) how long the program runs each way,
// and keeps the fastest. It runs with graph scheduling, on programs whose weights
// prefetch_weights queued ahead, on targets of two engines or more.
#include <cstdio>

#include "passes.h"

namespace vpuc::codegen {

namespace {

// Which transfers take the first half of the DMA engines; the others take the rest.
enum class Split {
    ReadsDdr, // those reading DDR (weights, inputs, spills loaded back): outputs apart
    Weights,  // those reading the constants: weights apart from every transfer waited for
};

// `s`'s tasks with the DMA engines split `split`'s way, each transfer on its half by the tile
// whose CMX it reads or writes (a copy from DDR to DDR: tile 0's); how many moved.
std::vector<TaskIR> split_engines(const LoweringState &s, Split split, size_t &moved) {
    const int first_half = s.target.dma_engines / 2;
    const int second_half = s.target.dma_engines - first_half;
    const std::vector<BufferDecl> &buffers = s.program.buffers;
    std::vector<TaskIR> tasks = s.program.tasks;
    moved = 0;
    for (TaskIR &t : tasks) {
        const auto *copy = std::get_if<DmaWork>(&t.work);
        if (!copy) continue;
        const BufferDecl &src = buffers[size_t(copy->src.buffer)];
        const BufferDecl &dst = buffers[size_t(copy->dsts.at(0).buffer)];
        const bool first = split == Split::ReadsDdr ? src.space != blob::MemSpace::Cmx
                                                    : src.space == blob::MemSpace::Constant;
        const int tile = src.space == blob::MemSpace::Cmx   ? int(src.index)
                         : dst.space == blob::MemSpace::Cmx ? int(dst.index)
                                                            : 0;
        const uint32_t engine =
            uint32_t(first ? tile % first_half : first_half + tile % second_half);
        moved += engine != t.index ? 1 : 0;
        t.index = engine;
    }
    return tasks;
}

std::string us(double ns) {
    char text[32];
    std::snprintf(text, sizeof text, "%.1f us", ns / 1000);
    return text;
}

} // namespace

void assign_dma_engines(LoweringState &s) {
    if (!s.graph_scheduling || !s.weights_prefetched || s.target.dma_engines < 2) return;
    const std::optional<double> by_tile_ns = simulated_latency_ns(s, s.program.tasks);
    if (!by_tile_ns) return;
    struct Candidate {
        const char *what;
        std::vector<TaskIR> tasks;
        size_t moved = 0;
        double ns = 0;
    };
    std::optional<Candidate> best;
    std::string tried;
    for (const auto &[split, what] :
         {std::pair{Split::ReadsDdr, "engines read DDR or CMX, not both"},
          std::pair{Split::Weights, "weights on engines of their own"}}) {
        Candidate c{what, {}, 0, 0};
        c.tasks = split_engines(s, split, c.moved);
        if (c.moved == 0) continue;
        const std::optional<double> ns = simulated_latency_ns(s, c.tasks);
        if (!ns) continue;
        c.ns = *ns;
        tried += std::string(tried.empty() ? "" : ", ") + us(c.ns) + " with " + what;
        if (c.ns < *by_tile_ns && (!best || c.ns < best->ns)) best = std::move(c);
    }
    if (tried.empty()) return; // every mapping is the tile mapping
    const std::string times =
        " (" + us(*by_tile_ns) + " by tile, " + tried + ", as the simulator runs them)";
    if (!best) {
        s.notes.push_back("assign_dma_engines: the DMA engines stay by tile" + times);
        return;
    }
    s.program.tasks = std::move(best->tasks);
    s.notes.push_back("assign_dma_engines: " + std::to_string(best->moved) +
                      " DMA transfer(s) moved: " + best->what + times);
}

} // namespace vpuc::codegen
