// For tests that run lowering passes one by one (they include codegen's private passes.h).
#pragma once

#include "../codegen/src/passes.h"

namespace vpuc::test {

// The passes of lower() through split_weight_copies, each verified: the task program before
// allocation.
inline void run_through_task_program(codegen::LoweringState &s) {
    codegen::run_passes(s, "check_element_types", "split_weight_copies");
}

// The passes of lower() through allocate_cmx, each verified.
inline void run_through_allocate_cmx(codegen::LoweringState &s) {
    codegen::run_passes(s, "check_element_types", "allocate_cmx");
}

} // namespace vpuc::test
