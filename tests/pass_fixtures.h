// For tests that run lowering passes one by one (they include codegen's private passes.h).
#pragma once

#include "../codegen/src/passes.h"

namespace vpuc::test {

// The passes of lower() from default_schedules through split_weight_copies: the task program
// before allocation.
inline void run_through_task_program(codegen::LoweringState &s) {
    codegen::default_schedules(s);
    codegen::resolve_schedules(s);
    codegen::select_engines(s);
    codegen::compile_shave_kernels(s);
    codegen::declare_tensors(s);
    codegen::build_tasks(s);
    codegen::order_prefetch(s);
    codegen::pack_weights(s);
    codegen::choose_workloads(s);
    codegen::split_weight_copies(s);
}

// The passes of lower() from default_schedules through allocate_cmx.
inline void run_through_allocate_cmx(codegen::LoweringState &s) {
    run_through_task_program(s);
    codegen::allocate_cmx(s);
}

} // namespace vpuc::test
