// The lowering: a graph of scheduled layers becomes a blob. It reads as a straight list of
// atomic passes (lower.cpp); each is logged, timed (VPUC_PASS_TIMES=1 prints the times) and
// followed by a verifier of its output.
#pragma once

#include <cstdint>
#include <iosfwd>
#include <map>
#include <string>
#include <vector>

#include "dsl/graph.h"
#include "vpu_target/error.h"
#include "vpu_target/target.h"

namespace vpuc::codegen {

struct LowerOptions {
    std::string dump_after;        // print the IR after this pass (pass_names() lists them)
    std::ostream *log = nullptr;   // pass log, notes and dumps; nullptr: silent
    std::ostream *notes = nullptr; // the notes alone, "note: ..." lines, as a user reads them
    // When set, receives the schedule each layer was compiled with, by layer name: its own,
    // or the default schedule lower() gave it.
    std::map<std::string, dsl::Schedule> *schedules = nullptr;
    bool time_passes = false; // print each pass's time to stderr (as VPUC_PASS_TIMES=1 does)
    // The graph scheduling passes (choose_strategies, keep_in_cmx, group_layers) change the
    // default schedules for the whole graph, and prefetch_weights loads a layer's weights during
    // the layer before; off, every unscheduled layer keeps its default and its weights load in
    // turn (the A/B of `vpuc bench models --no-graph-scheduling`).
    bool graph_scheduling = true;
};

// An error of the lowering that names the layer (and the task or buffer) concerned.
class LoweringError : public Error {
  public:
    using Error::Error;
};

// The names of the passes, in order.
const std::vector<std::string> &pass_names();

// Layers without a schedule are compiled with their default schedule (schedules/), as an
// unscheduled Halide Func gets its default. The graph's layers keep their schedules (empty
// ones stay empty); `options.schedules` receives the ones used. Throws dsl::ScheduleError,
// DpuMatchError or LoweringError.
std::vector<uint8_t> lower(const dsl::Graph &graph, const target::Target &target,
                           const LowerOptions &options = {});

} // namespace vpuc::codegen
