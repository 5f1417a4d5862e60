// The memory map of a run (vpu_target/memory_map.h): buffers inside their memories, peaks
// within capacity, and lifetimes from each writer's start to its last reader's end.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>

#include "codegen/lower.h"
#include "examples/conv_relu_shave.h"
#include "examples/small_net.h"
#include "vpu_target/memory_map.h"

namespace {

using namespace vpuc;

struct Mapped {
    sim::RunResult run;
    sim::MemoryMap map;
};

Mapped map_of(const target::Target &target, const std::vector<uint8_t> &bytes) {
    sim::Simulator simulator(target, bytes);
    Mapped m;
    m.run = simulator.run({}, sim::Mode::TimingOnly);
    m.map = sim::memory_map(simulator.blob(), simulator.target(), m.run.tasks);
    return m;
}

const sim::TaskRecord &record(const sim::RunResult &run, const std::string &name) {
    const auto it = std::find_if(run.tasks.begin(), run.tasks.end(),
                                 [&](const sim::TaskRecord &t) { return t.name == name; });
    if (it == run.tasks.end()) throw std::runtime_error("no task " + name);
    return *it;
}

const sim::MemoryBuffer &buffer_written_by(const sim::MemoryUse &use, const std::string &task) {
    const auto it = std::find_if(use.buffers.begin(), use.buffers.end(),
                                 [&](const sim::MemoryBuffer &b) { return b.writer == task; });
    if (it == use.buffers.end()) throw std::runtime_error("no buffer of " + task);
    return *it;
}

// What holds for every map: buffers inside their memory and the run, the occupancy a step
// function from time 0 back to 0 bytes whose largest step is the peak, and the peak within
// capacity.
void expect_consistent(const sim::MemoryMap &map) {
    for (const sim::MemoryUse &use : map.memories) {
        SCOPED_TRACE(use.name);
        EXPECT_LE(use.peak_bytes, use.capacity);
        for (const sim::MemoryBuffer &b : use.buffers) {
            EXPECT_LT(b.begin, b.end) << b.writer;
            EXPECT_LE(b.end, use.capacity) << b.writer;
            EXPECT_GT(b.bytes, 0u) << b.writer;
            EXPECT_LE(b.bytes, b.end - b.begin) << b.writer;
            EXPECT_GE(b.live_from_ns, 0) << b.writer;
            EXPECT_LT(b.live_from_ns, b.live_to_ns) << b.writer;
            EXPECT_LE(b.live_to_ns, map.latency_ns) << b.writer;
        }
        ASSERT_FALSE(use.occupancy.empty());
        EXPECT_EQ(use.occupancy.front().first, 0.0);
        EXPECT_EQ(use.occupancy.back().second, 0u);
        uint64_t peak = 0;
        for (size_t i = 0; i < use.occupancy.size(); ++i) {
            if (i > 0) {
                EXPECT_LT(use.occupancy[i - 1].first, use.occupancy[i].first);
            }
            peak = std::max(peak, use.occupancy[i].second);
        }
        EXPECT_EQ(peak, use.peak_bytes);
    }
}

TEST(MemoryMap, OfTheSmallNetwork) {
    const target::Target target = target::load_target("vpu27");
    const Mapped m = map_of(target, codegen::lower(examples::small_net(1).graph, target));
    EXPECT_DOUBLE_EQ(m.map.latency_ns, m.run.latency_ns);
    ASSERT_GE(m.map.memories.size(), size_t(target.tiles));
    for (int tile = 0; tile < target.tiles; ++tile) {
        const sim::MemoryUse &cmx = m.map.memories[size_t(tile)];
        EXPECT_EQ(cmx.name, "CMX tile " + std::to_string(tile));
        EXPECT_EQ(cmx.capacity, target.cmx_usable_bytes);
        EXPECT_GT(cmx.peak_bytes, 0u);
        EXPECT_FALSE(cmx.buffers.empty());
    }
    expect_consistent(m.map);
    // The first conv's DPU output on tile 0 is read by the tasks after it: it lives from its
    // writer's start to past its writer's end.
    const sim::MemoryUse &cmx0 = m.map.memories[0];
    const auto dpu =
        std::find_if(cmx0.buffers.begin(), cmx0.buffers.end(), [](const sim::MemoryBuffer &b) {
            return b.layer == "conv1" && b.writer.find(".dpu.") != std::string::npos;
        });
    ASSERT_NE(dpu, cmx0.buffers.end());
    const sim::TaskRecord &writer = record(m.run, dpu->writer);
    EXPECT_EQ(dpu->queue, writer.queue);
    EXPECT_EQ(dpu->position, writer.position);
    EXPECT_DOUBLE_EQ(dpu->live_from_ns, writer.start_ns);
    EXPECT_GT(dpu->live_to_ns, writer.end_ns);
}

TEST(MemoryMap, OfTheHandBuiltBlob) {
    const target::Target target = target::load_target("vpu27");
    const examples::ExampleBlob example = examples::conv_relu_shave(target, 1);
    const Mapped m = map_of(target, example.bytes);
    expect_consistent(m.map);
    for (int tile = 0; tile < target.tiles; ++tile) {
        const std::string t = ".t" + std::to_string(tile);
        const sim::MemoryUse &cmx = m.map.memories[size_t(tile)];
        // The conv's output lives until the SHAVE kernel that reads it has finished, and the
        // kernel's until the DMA that stores it has.
        const sim::MemoryBuffer &conv = buffer_written_by(cmx, "conv" + t);
        EXPECT_DOUBLE_EQ(conv.live_from_ns, record(m.run, "conv" + t).start_ns);
        EXPECT_DOUBLE_EQ(conv.live_to_ns, record(m.run, "soft_square" + t).end_ns);
        const sim::MemoryBuffer &shave = buffer_written_by(cmx, "soft_square" + t);
        EXPECT_DOUBLE_EQ(shave.live_to_ns, record(m.run, "output" + t).end_ns);
        EXPECT_EQ(shave.bytes, uint64_t(examples::kExampleC) * examples::kExampleW *
                                   (examples::kExampleH / uint32_t(target.tiles)));
        // The broadcast weights are a buffer of their own in every tile.
        EXPECT_NO_THROW(buffer_written_by(cmx, "weights.bcast"));
    }
}

TEST(MemoryMap, RecordsOfAnotherRunAreRefused) {
    const target::Target target = target::load_target("vpu27");
    const examples::ExampleBlob example = examples::conv_relu_shave(target, 1);
    sim::Simulator simulator(target, example.bytes);
    sim::RunResult run = simulator.run({}, sim::Mode::TimingOnly);
    run.tasks.pop_back();
    EXPECT_THROW(sim::memory_map(simulator.blob(), target, run.tasks), blob::BlobError);
    run = simulator.run({}, sim::Mode::TimingOnly);
    run.tasks[1].position = run.tasks[0].position;
    run.tasks[1].queue = run.tasks[0].queue;
    EXPECT_THROW(sim::memory_map(simulator.blob(), target, run.tasks), blob::BlobError);
}

TEST(MemoryMap, StopsWhenItsBudgetIsSpent) {
    const target::Target target = target::load_target("vpu27");
    const examples::ExampleBlob example = examples::conv_relu_shave(target, 1);
    sim::Simulator simulator(target, example.bytes);
    const sim::RunResult run = simulator.run({}, sim::Mode::TimingOnly);
    try {
        sim::memory_map(simulator.blob(), target, run.tasks, 10);
        FAIL() << "expected the budget to run out";
    } catch (const blob::BlobError &e) {
        EXPECT_NE(std::string(e.what()).find("memory map: work budget exhausted"),
                  std::string::npos)
            << e.what();
    }
}

} // namespace
