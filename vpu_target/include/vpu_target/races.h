// Data races in a blob: two tasks touching the same bytes, at least one of them writing,
// with neither ordered before the other by barriers or by queue order. The simulator runs
// such a blob, but its results then depend on timing (on hardware too), so a compiler must
// never produce one: a race is a missing dependency.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "vpu_target/blob.h"

namespace vpuc::blob {

// One line per race found, at most `max_reports`, naming both tasks and the memory:
//   "'b' (DMA queue 1) writes Scratch+0..64, which 'a' (DMA queue 0) writes, and neither
//    waits for the other"
// The blob must have passed the semantic checks of verify() (every address inside its memory,
// no deadlock), which runs it too. Every location's first race is found (a vector-clock sweep
// in dependency order). The sweep stops with a BlobError after `work_budget` contiguous runs of
// bytes and vector-clock entries.
std::vector<std::string> find_races(const Blob &blob, size_t max_reports = 8,
                                    uint64_t work_budget = UINT64_MAX);

// One line per DPU task whose output shares bytes with its input, input2 or weights tensor, at
// most `max_reports`: the DPU reads them while it writes, so the result would depend on the
// order it computes its outputs in. (It reads its weight table whole when it starts: an output
// may overwrite the table.) Same preconditions and budget as find_races.
//   "task 'conv' (DPU queue tile 0 dpu 0): output overlaps its input at CMX of tile 0+64"
std::vector<std::string> find_dpu_overlaps(const Blob &blob, size_t max_reports = 8,
                                           uint64_t work_budget = UINT64_MAX);

} // namespace vpuc::blob
