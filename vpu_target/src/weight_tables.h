// The weight tables a blob's DPU tasks read: each entry's weights pointer must put the
// channel's weights inside memory when the task runs (the DPU follows it). A table is data in
// CMX, written by whatever task copied it there, so the check follows the copies: it replays
// every write to the bytes some task reads as a weight table, in dependency order, from the
// constant section (docs/blob.md, "Weight tables").
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "vpu_target/blob.h"
#include "vpu_target/target.h"

namespace vpuc::blob {

// One line per entry whose weights pointer is not a constant's or points outside memory, at
// most `max_reports`. The blob must have passed verify()'s semantic checks and be free of
// races (find_races), so that the order of the replay is the order of the hardware. Throws
// BlobError once `work_budget` copied lines are spent.
std::vector<std::string> check_weight_tables(const Blob &blob, const target::Target &target,
                                             size_t max_reports, uint64_t work_budget);

} // namespace vpuc::blob
