// Functional SHAVE execution and the figures its timing needs.
#pragma once

#include <string>

#include "sim_memory.h"
#include "vpu_target/shave_linker.h"

namespace vpuc::sim {

uint64_t shave_output_elements(const blob::ShaveTask &task, const blob::Kernel &kernel);

void run_shave(const blob::ShaveTask &task, const blob::Kernel &kernel, KernelEntry entry,
               Memory &memory, const std::string &task_name);

} // namespace vpuc::sim
