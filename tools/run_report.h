// The report `vpuc run` and `vpuc demo` print after a simulation.
#pragma once

#include <string>

#include "vpu_target/simulator.h"

namespace vpuc::tools {

void print_run_report(const sim::Simulator &simulator, const sim::RunResult &result);

// Writes the Chrome trace of `result` to `path` and says so.
void write_trace(const sim::RunResult &result, const std::string &title, const std::string &path);

} // namespace vpuc::tools
