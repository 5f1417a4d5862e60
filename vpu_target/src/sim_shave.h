// Functional SHAVE execution and the figures its timing needs.
#pragma once

#include <string>

#include "sim_memory.h"
#include "vpu_target/shave_sandbox.h"

namespace vpuc::sim {

uint64_t shave_output_elements(const blob::ShaveTask &task, const blob::Kernel &kernel);

// Submits the task's kernel to the sandbox on views of the simulated memory; returns the
// ticket for ShaveSandbox::finish().
uint64_t submit_shave(const blob::ShaveTask &task, const blob::Kernel &kernel,
                      ShaveSandbox &sandbox, const Memory &memory, const std::string &task_name);

} // namespace vpuc::sim
