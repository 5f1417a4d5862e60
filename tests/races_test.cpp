// Data races: tasks touching the same bytes, one of them writing, must be ordered by barriers
// or queue order; the verifier rejects a blob with races, reporting each with both tasks and
// the memory (find_races).
#include <gtest/gtest.h>

#include <sstream>

#include "vpu_target/blob_writer.h"
#include "vpu_target/races.h"
#include "vpu_target/simulator.h"
#include "vpu_target/verifier.h"

using namespace vpuc::blob;

namespace {

// The races the verifier reports, one per line after its first line, which says what a race
// is; find_races must report the same.
std::vector<std::string> races_of(BlobWriter &w) {
    static const vpuc::target::Target target = vpuc::target::load_target("vpu27");
    const std::vector<uint8_t> bytes = w.finish();
    std::vector<std::string> reported;
    try {
        verify(bytes, target);
    } catch (const BlobError &e) {
        std::istringstream lines(e.what());
        std::string line;
        std::getline(lines, line);
        EXPECT_EQ(line.rfind("data races: tasks touch the same bytes, one writing, and neither "
                             "waits for the other",
                             0),
                  0u)
            << line;
        while (std::getline(lines, line)) reported.push_back(line);
    }
    EXPECT_EQ(find_races(verify_structure(bytes)), reported);
    return reported;
}

std::vector<uint8_t> bytes_of_input(size_t n) {
    return std::vector<uint8_t>(n, 7);
}

BlobWriter with_input() {
    BlobWriter w(vpuc::target::load_target("vpu27"), "races");
    w.add_input("x", {256}, DType::U8, Layout::ND);
    return w;
}

TEST(Races, TwoUnorderedWritesOfTheSameBytes) {
    BlobWriter w = with_input();
    w.add_dma(0, "a", input_at(0), cmx_at(0, 0), 64);
    w.add_dma(1, "b", input_at(0, 64), cmx_at(0, 32), 64);
    EXPECT_EQ(races_of(w), std::vector<std::string>{
                               "'b' (DMA queue 1) writes CMX of tile 0+32..64, which 'a' (DMA "
                               "queue 0) writes, and neither waits for the other"});
}

// A blob a compiler pass builds to time a trial program is checked for timing only: its data
// races are not looked for, and the simulator then runs it for timing, never functionally.
TEST(Races, ABlobCheckedForTimingOnlyRunsForTimingOnly) {
    const vpuc::target::Target target = vpuc::target::load_target("vpu27");
    BlobWriter w = with_input();
    w.add_dma(0, "a", input_at(0), cmx_at(0, 0), 64);
    w.add_dma(1, "b", input_at(0, 64), cmx_at(0, 32), 64);
    const std::vector<uint8_t> bytes = w.finish();
    EXPECT_THROW(verify(bytes, target), BlobError);
    EXPECT_NO_THROW(verify_for_timing(bytes, target));
    vpuc::sim::Simulator timing(target, bytes, vpuc::sim::Checks::Timing);
    EXPECT_GT(timing.run({}, vpuc::sim::Mode::TimingOnly).latency_ns, 0);
    try {
        timing.run({bytes_of_input(256)});
        ADD_FAILURE() << "a functional run of a blob checked for timing only";
    } catch (const BlobError &e) {
        EXPECT_EQ(std::string(e.what()).rfind("a functional run of a blob verified for timing "
                                              "only",
                                              0),
                  0u)
            << e.what();
    }
    EXPECT_THROW(vpuc::sim::Simulator(target, bytes), BlobError);
}

TEST(Races, AReadUnorderedWithAWrite) {
    BlobWriter w = with_input();
    w.add_dma(0, "load", input_at(0), cmx_at(0, 0), 64);
    w.add_dma(1, "store", cmx_at(0, 48), output_at(0), 16);
    w.add_output("y", {16}, DType::U8, Layout::ND);
    EXPECT_EQ(races_of(w), std::vector<std::string>{
                               "'store' (DMA queue 1) reads CMX of tile 0+48..64, which 'load' "
                               "(DMA queue 0) writes, and neither waits for the other"});
}

TEST(Races, BarriersAndQueueOrderOrderTasks) {
    BlobWriter w = with_input();
    const uint32_t loaded = w.add_barrier(0);
    w.add_dma(0, "load", input_at(0), cmx_at(0, 0), 64).update(loaded);
    w.add_dma(1, "store", cmx_at(0, 0), output_at(0), 64).wait(loaded);
    w.add_dma(1, "reload", input_at(0, 64), cmx_at(0, 0), 64); // after store, on its queue
    w.add_output("y", {64}, DType::U8, Layout::ND);
    EXPECT_TRUE(races_of(w).empty());
}

// Each copies four 16-byte lines, 32 bytes apart: `odd` fills the gaps `even` leaves.
BlobWriter interleaved() {
    BlobWriter w = with_input();
    w.add_dma(0, "even", input_at(0), {cmx_at(0, 0)}, 16, {DmaDim(4, 16, 32)});
    w.add_dma(1, "odd", input_at(0, 64), {cmx_at(0, 16)}, 16, {DmaDim(4, 16, 32)});
    return w;
}

TEST(Races, InterleavedLinesDoNotOverlap) {
    BlobWriter w = interleaved();
    EXPECT_TRUE(races_of(w).empty());
    BlobWriter over = interleaved();
    // After `odd` on its queue, but not ordered with `even`, whose first line it overlaps.
    over.add_dma(1, "over", input_at(0), cmx_at(0, 8), 16);
    EXPECT_EQ(races_of(over), std::vector<std::string>{
                                  "'over' (DMA queue 1) writes CMX of tile 0+8..16, which 'even' "
                                  "(DMA queue 0) writes, and neither waits for the other"});
}

} // namespace
