// A run's Chrome trace-event JSON (the per-layer table is tools/run_report's).
#include <map>
#include <nlohmann/json.hpp>

#include "vpu_target/simulator.h"

namespace vpuc::sim {

std::string chrome_trace_json(const RunResult &result, const std::string &title) {
    using nlohmann::json;
    json events = json::array();
    std::map<std::string, int> track;
    events.push_back(
        {{"ph", "M"}, {"name", "process_name"}, {"pid", 1}, {"args", {{"name", title}}}});
    for (const auto &engine : result.engines) {
        int tid = int(track.size()) + 1;
        track[engine.engine] = tid;
        events.push_back({{"ph", "M"},
                          {"name", "thread_name"},
                          {"pid", 1},
                          {"tid", tid},
                          {"args", {{"name", engine.engine}}}});
        events.push_back({{"ph", "M"},
                          {"name", "thread_sort_index"},
                          {"pid", 1},
                          {"tid", tid},
                          {"args", {{"sort_index", tid}}}});
    }
    for (const auto &t : result.tasks) {
        // Trace-event timestamps are in microseconds.
        events.push_back(
            {{"ph", "X"},
             {"name", t.name},
             {"cat", t.layer.empty() ? "task" : t.layer},
             {"pid", 1},
             {"tid", track[t.engine]},
             {"ts", t.start_ns / 1000.0},
             {"dur", (t.end_ns - t.start_ns) / 1000.0},
             {"args", {{"layer", t.layer}, {"start_ns", t.start_ns}, {"end_ns", t.end_ns}}}});
    }
    json doc = {{"traceEvents", events}, {"displayTimeUnit", "ns"}};
    return doc.dump(1);
}

} // namespace vpuc::sim
