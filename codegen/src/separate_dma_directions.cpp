// Pass separate_dma_directions: DMA engines by direction where that runs faster.
//
// build_tasks puts a tile's loads on one engine and its stores and copies to other tiles on
// another (dma_engine_in, dma_engine_out): on two engines, each carries one tile's loads and
// the other tile's outputs, and the loads of both tiles, each paying a fixed latency, run side
// by side. Once prefetch_weights has queued a layer's weight copies ahead of the layers before
// it, though, those layers' outputs, which the next layers wait for, queue behind the copies on
// the engines' in-order queues. By direction, the transfers that read DDR (weights, inputs,
// spilled buffers loaded back) take the first half of the engines and those that read CMX
// (stores, copies between tiles, spills) the other half, each by its tile: no output waits
// behind a weight. On vpu27 an engine alone moves DDR bytes at the DDR's rate
// (docs/timing-model.md, "DMA model"), so loads sharing one lose only the overlap of their
// latencies.
//
// Which mapping wins depends on the program: by direction, vpu27's ResNet-50 int8 runs 1,623 to
// 1,549 us, but three small 3x3 convolutions 9.2 to 11.0 us. The pass asks the
// simulator (timing only, as order_as_run does) how long the program runs each way, and keeps
// the faster. It runs with graph scheduling, on programs whose weights prefetch_weights queued
// ahead, on targets of two engines or more.
#include <cstdio>

#include "passes.h"

namespace vpuc::codegen {

namespace {

// `s`'s tasks with each DMA transfer on the engine of its direction; how many moved.
std::vector<TaskIR> by_direction(const LoweringState &s, size_t &moved) {
    const int readers_of_ddr = s.target.dma_engines / 2;
    const int readers_of_cmx = s.target.dma_engines - readers_of_ddr;
    const std::vector<BufferDecl> &buffers = s.program.buffers;
    std::vector<TaskIR> tasks = s.program.tasks;
    moved = 0;
    for (TaskIR &t : tasks) {
        const auto *copy = std::get_if<DmaWork>(&t.work);
        if (!copy) continue;
        const BufferDecl &src = buffers[size_t(copy->src.buffer)];
        uint32_t engine = 0;
        if (src.space == blob::MemSpace::Cmx) {
            engine = uint32_t(readers_of_ddr + int(src.index) % readers_of_cmx);
        } else {
            // Into the CMX of its first destination's tile (a copy from DDR to DDR: tile 0's).
            const BufferDecl &dst = buffers[size_t(copy->dsts.at(0).buffer)];
            engine =
                uint32_t((dst.space == blob::MemSpace::Cmx ? int(dst.index) : 0) % readers_of_ddr);
        }
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

void separate_dma_directions(LoweringState &s) {
    if (!s.graph_scheduling || !s.weights_prefetched || s.target.dma_engines < 2) return;
    size_t moved = 0;
    std::vector<TaskIR> separated = by_direction(s, moved);
    if (moved == 0) return;
    const std::optional<double> by_tile_ns = simulated_latency_ns(s, s.program.tasks);
    const std::optional<double> separated_ns = simulated_latency_ns(s, separated);
    if (!by_tile_ns || !separated_ns) return;
    const std::string times = " (" + us(*separated_ns) + " against " + us(*by_tile_ns) +
                              " by tile, as the simulator runs them)";
    if (*separated_ns >= *by_tile_ns) {
        s.notes.push_back("separate_dma_directions: the DMA engines stay by tile" + times);
        return;
    }
    s.program.tasks = std::move(separated);
    s.notes.push_back("separate_dma_directions: " + std::to_string(moved) +
                      " DMA transfer(s) moved: engines read DDR or CMX, not both" + times);
}

} // namespace vpuc::codegen
