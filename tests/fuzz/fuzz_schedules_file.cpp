// Fuzzes the schedules file of `vpuc compile --schedules` (dsl/schedules_file.h). The contract:
// parse_schedules_file accepts the bytes or throws ScheduleError; each schedule it accepts holds
// to schedule_contract.h, and the file written back from what it accepted reads back the same.
// A violation aborts, so that libFuzzer keeps the input.
#include <nlohmann/json.hpp>

#include <map>
#include <string>
#include <vector>

#include "dsl/schedules_file.h"
#include "schedule_contract.h"

namespace {

using namespace vpuc;

[[noreturn]] void violation(const std::string &what) {
    std::fprintf(stderr, "CONTRACT VIOLATION: %s\n", what.c_str());
    std::abort();
}

std::vector<uint8_t> written(const std::map<std::string, dsl::Schedule> &schedules) {
    nlohmann::json doc = nlohmann::json::object();
    for (const auto &[layer_name, schedule] : schedules)
        doc[layer_name] = nlohmann::json::parse(schedule.to_json());
    const std::string text = doc.dump();
    return std::vector<uint8_t>(text.begin(), text.end());
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    std::map<std::string, dsl::Schedule> schedules;
    try {
        schedules = dsl::parse_schedules_file(std::vector<uint8_t>(data, data + size), "fuzz.json");
    } catch (const dsl::ScheduleError &) {
        return 0;
    }
    for (const auto &[layer_name, schedule] : schedules) {
        const std::string broken = fuzz::round_trip_violation(schedule);
        if (!broken.empty()) violation("layer '" + layer_name + "': " + broken);
    }
    try {
        if (dsl::parse_schedules_file(written(schedules), "again.json") != schedules)
            violation("the file written back reads as other schedules");
    } catch (const dsl::ScheduleError &e) {
        violation(std::string("the file written back is refused: ") + e.what());
    }
    return 0;
}
