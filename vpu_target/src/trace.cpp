// Reports of a run: Chrome trace-event JSON and a per-layer table.
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>

#include "vpu_target/printable.h"
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

std::string layer_table(const RunResult &result) {
    struct Row {
        double first = 0, last = 0;
        std::map<std::string, double> busy; // by engine kind
        size_t tasks = 0;
    };
    std::map<std::string, Row> rows;
    std::vector<std::string> order;
    for (const auto &t : result.tasks) {
        std::string layer = t.layer.empty() ? "(no layer)" : t.layer;
        auto [it, fresh] = rows.try_emplace(layer);
        Row &r = it->second;
        if (fresh) {
            order.push_back(layer);
            r.first = t.start_ns;
        }
        r.first = std::min(r.first, t.start_ns);
        r.last = std::max(r.last, t.end_ns);
        r.busy[t.engine.substr(0, t.engine.find(' '))] += t.end_ns - t.start_ns;
        ++r.tasks;
    }
    std::ostringstream os;
    char line[256];
    std::snprintf(line, sizeof line, "%-28s %6s %11s %11s %11s %11s %11s\n", "layer", "tasks",
                  "start us", "span us", "DMA us", "DPU us", "SHAVE us");
    os << line;
    for (const auto &name : order) {
        const Row &r = rows[name];
        auto busy = [&](const char *kind) {
            auto it = r.busy.find(kind);
            return it == r.busy.end() ? 0.0 : it->second / 1000.0;
        };
        std::snprintf(line, sizeof line, "%-28s %6zu %11.3f %11.3f %11.3f %11.3f %11.3f\n",
                      printable(name).substr(0, 28).c_str(), r.tasks, r.first / 1000.0,
                      (r.last - r.first) / 1000.0, busy("DMA"), busy("DPU"), busy("SHAVE"));
        os << line;
    }
    return os.str();
}

} // namespace vpuc::sim
