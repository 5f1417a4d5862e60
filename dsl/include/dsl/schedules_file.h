// A schedules file (`vpuc compile --schedules FILE`): a JSON object from layer names to
// schedules in Schedule's JSON form (Schedule::from_json).
//
//   {"conv1": [{"directive": "split", "loops": ["y", "yo", "yi"], "factor": 8}], "relu1": []}
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "dsl/schedule.h"

namespace vpuc::dsl {

// The schedules in `bytes`, by layer name. Whether the layers exist is the caller's to check.
// Throws ScheduleError, naming the file by `path`, when the bytes are not a JSON object, name a
// layer twice, nest deeper than a schedule does, or hold a schedule from_json refuses (then
// naming the layer).
std::map<std::string, Schedule> parse_schedules_file(const std::vector<uint8_t> &bytes,
                                                     const std::string &path);

} // namespace vpuc::dsl
