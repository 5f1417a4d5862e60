// The memory map of a run: which bytes of each tile's CMX and of DDR scratch hold live data,
// and when. A buffer is what one task writes through one tensor (a DMA destination, a DPU
// output, a SHAVE output argument); it is live from its writer's start until the last task
// reading its bytes, before they are overwritten, has finished (its writer's end when nothing
// reads it). Times come from a run of the blob (a timing-only run is enough).
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "vpu_target/blob.h"
#include "vpu_target/simulator.h"
#include "vpu_target/target.h"

namespace vpuc::sim {

struct MemoryBuffer {
    uint64_t begin = 0, end = 0;      // the bytes [begin, end) it spans in its memory
    uint64_t bytes = 0;               // of them, the bytes written (a strided tensor leaves gaps)
    std::string writer;               // the name of the task that wrote it
    std::string layer;                // and that task's layer
    uint32_t queue = 0, position = 0; // and where it is in the blob
    double live_from_ns = 0, live_to_ns = 0;
};

struct MemoryUse {
    std::string name; // "CMX tile 0", "DDR scratch"
    blob::MemSpace space = blob::MemSpace::Cmx;
    uint32_t index = 0;      // the tile of a CMX
    uint64_t capacity = 0;   // the target's usable CMX, or the blob's DDR scratch size
    uint64_t peak_bytes = 0; // the most bytes live at once
    double peak_at_ns = 0;   // when that peak starts
    // The bytes live from each time on until the next entry's time, in time order: the
    // first entry's time is 0, and the last one's bytes are 0.
    std::vector<std::pair<double, uint64_t>> occupancy;
    std::vector<MemoryBuffer> buffers; // by live_from_ns, then offset
};

struct MemoryMap {
    double latency_ns = 0;
    std::vector<MemoryUse> memories; // each tile's CMX, then DDR scratch
};

// The memory map of `blob` (verified against `target`) from the task records of a run of it
// (RunResult::tasks). Throws blob::BlobError when the records are not those of the blob's
// tasks, or after `work_budget` contiguous runs of bytes and shadow segments, so that no blob
// makes the analysis run without end.
MemoryMap memory_map(const blob::Blob &blob, const target::Target &target,
                     const std::vector<TaskRecord> &tasks, uint64_t work_budget = UINT64_MAX);

} // namespace vpuc::sim
