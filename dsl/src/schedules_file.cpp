#include "dsl/schedules_file.h"

#include <nlohmann/json.hpp>

#include <set>

#include "vpu_target/printable.h"

namespace vpuc::dsl {

namespace {

// A schedule nests four deep in the file (object, directives, directive, loop names). Deeper
// values are dropped while parsing, and refused: printing them again for from_json would recurse
// once per level.
constexpr int kMaxDepth = 16;

} // namespace

std::map<std::string, Schedule> parse_schedules_file(const std::vector<uint8_t> &bytes,
                                                     const std::string &path) {
    const std::string what = "schedules file '" + path + "'";
    bool too_deep = false;
    std::set<std::string> layer_names;
    std::string named_twice;
    const auto check = [&](int depth, nlohmann::json::parse_event_t event, nlohmann::json &value) {
        if (depth > kMaxDepth) {
            too_deep = true;
            return false;
        }
        if (depth == 1 && event == nlohmann::json::parse_event_t::key &&
            !layer_names.insert(value.get<std::string>()).second && named_twice.empty())
            named_twice = value.get<std::string>();
        return true;
    };
    nlohmann::json doc;
    try {
        doc = nlohmann::json::parse(bytes.begin(), bytes.end(), check);
    } catch (const nlohmann::json::exception &e) { // a syntax error, or a number out of range
        throw ScheduleError(what + ": not JSON: " + printable(e.what()));
    }
    if (!doc.is_object())
        throw ScheduleError(what + ": not a JSON object of layer names to schedules");
    if (too_deep)
        throw ScheduleError(what + ": nested deeper than " + std::to_string(kMaxDepth) +
                            " levels; a schedule nests 4");
    if (!named_twice.empty())
        throw ScheduleError(what + ": layer '" + printable(named_twice) + "' is given twice");
    std::map<std::string, Schedule> schedules;
    for (const auto &[layer_name, schedule] : doc.items()) {
        try {
            schedules.emplace(layer_name, Schedule::from_json(schedule.dump()));
        } catch (const ScheduleError &e) {
            throw ScheduleError(what + ": layer '" + printable(layer_name) + "': " + e.what());
        }
    }
    return schedules;
}

} // namespace vpuc::dsl
