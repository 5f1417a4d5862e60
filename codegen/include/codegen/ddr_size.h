// Whether a program fits the target's simulated DDR, which holds a blob's inputs, outputs,
// constants and scratch (the verifier refuses a blob whose sections exceed it).
#pragma once

#include <cstdint>

#include "codegen/task_ir.h"
#include "vpu_target/target.h"

namespace vpuc::codegen {

// The DDR a program takes, by section, once allocate_ddr has sized its scratch.
struct DdrUse {
    uint64_t inputs = 0, outputs = 0, constants = 0, scratch = 0;
    uint64_t total() const { return inputs + outputs + constants + scratch; }
};

DdrUse ddr_use(const Program &program);

// Throws LoweringError when `program` needs more DDR than `target` has, naming the model (the
// program's name), both sizes and what each section takes.
void check_ddr_size(const Program &program, const target::Target &target);

} // namespace vpuc::codegen
