// Functional SHAVE: a task's arguments as the sandboxed worker's kernel calls take them
// (halide_buffer_t views of the simulated memory). The worker splits the output across the
// task's SHAVEs; Halide kernels compute exactly the region their output describes.
#include "sim_shave.h"

namespace vpuc::sim {

uint64_t shave_output_elements(const blob::ShaveTask &task, const blob::Kernel &kernel) {
    for (uint32_t i = 0; i < kernel.args()->size(); ++i) {
        if (kernel.args()->Get(i)->kind() != blob::ArgKind::OutputBuffer) continue;
        uint64_t elements = 1;
        for (const auto *d : *task.args()->Get(i)->tensor()->dims()) elements *= d->extent();
        return elements;
    }
    return 0;
}

uint64_t submit_shave(const blob::ShaveTask &task, const blob::Kernel &kernel,
                      ShaveSandbox &sandbox, const Memory &memory, const std::string &task_name) {
    std::vector<ShaveArgument> args;
    for (uint32_t i = 0; i < kernel.args()->size(); ++i) {
        const blob::KernelArg &contract = *kernel.args()->Get(i);
        const blob::ShaveArg &given = *task.args()->Get(i);
        ShaveArgument arg;
        arg.kind = contract.kind();
        arg.dtype = contract.dtype();
        arg.int_value = given.int_value();
        arg.float_value = given.float_value();
        if (const blob::TensorRef *t = given.tensor()) {
            arg.offset = memory.offset_of(*t->address());
            const auto *mins = given.mins();
            for (uint32_t d = 0; d < t->dims()->size(); ++d) {
                const blob::Dim &dim = *t->dims()->Get(d);
                const int32_t min = mins && mins->size() == t->dims()->size() ? mins->Get(d) : 0;
                arg.dims.push_back({min, int32_t(dim.extent()), int32_t(dim.stride())});
            }
        }
        args.push_back(std::move(arg));
    }
    return sandbox.submit(task.kernel(), args, task.shaves(), task_name);
}

} // namespace vpuc::sim
