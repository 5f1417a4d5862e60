// Functional SHAVE: calls a linked Halide kernel on halide_buffer_t views of simulated
// memory. A task split across n SHAVEs gives each one a slice of the output's outermost
// non-trivial dimension; Halide kernels compute exactly the region their output describes.
#include "sim_shave.h"

#include <HalideRuntime.h>

#include <algorithm>

#include "vpu_target/fp16.h"

namespace vpuc::sim {

namespace {

halide_type_t halide_type_of(blob::DType dtype) {
    switch (dtype) {
    case blob::DType::U8:
        return halide_type_t(halide_type_uint, 8);
    case blob::DType::I8:
        return halide_type_t(halide_type_int, 8);
    case blob::DType::F16:
        return halide_type_t(halide_type_float, 16);
    case blob::DType::F32:
        return halide_type_t(halide_type_float, 32);
    case blob::DType::I32:
        return halide_type_t(halide_type_int, 32);
    }
    return halide_type_t(halide_type_uint, 8);
}

struct BufferArg {
    halide_buffer_t buffer{};
    std::vector<halide_dimension_t> dims;
};

void describe(const blob::ShaveArg &shave_arg, Memory &memory, BufferArg &arg) {
    const blob::TensorRef &t = *shave_arg.tensor();
    const auto *mins = shave_arg.mins();
    arg.dims.clear();
    for (uint32_t i = 0; i < t.dims()->size(); ++i) {
        const auto *d = t.dims()->Get(i);
        int32_t min = mins && mins->size() == t.dims()->size() ? mins->Get(i) : 0;
        arg.dims.push_back(halide_dimension_t(min, int32_t(d->extent()), int32_t(d->stride())));
    }
    arg.buffer = halide_buffer_t{};
    arg.buffer.host = memory.at(*t.address());
    arg.buffer.type = halide_type_of(t.dtype());
    arg.buffer.dimensions = int32_t(arg.dims.size());
    arg.buffer.dim = arg.dims.data();
}

// The dimension to split an output across SHAVEs: the outermost with extent > 1.
int split_dimension(const BufferArg &out) {
    for (int d = out.buffer.dimensions - 1; d >= 0; --d)
        if (out.dims[size_t(d)].extent > 1) return d;
    return 0;
}

} // namespace

uint64_t shave_output_elements(const blob::ShaveTask &task, const blob::Kernel &kernel) {
    for (uint32_t i = 0; i < kernel.args()->size(); ++i) {
        if (kernel.args()->Get(i)->kind() != blob::ArgKind::OutputBuffer) continue;
        uint64_t elements = 1;
        for (const auto *d : *task.args()->Get(i)->tensor()->dims()) elements *= d->extent();
        return elements;
    }
    return 0;
}

void run_shave(const blob::ShaveTask &task, const blob::Kernel &kernel, KernelEntry entry,
               Memory &memory, const std::string &task_name) {
    const uint32_t n = kernel.args()->size();
    std::vector<BufferArg> buffers(n);
    std::vector<int64_t> ints(n);
    std::vector<float> floats(n);
    std::vector<uint16_t> halves(n);
    std::vector<void *> argv(n);
    int output = -1;
    for (uint32_t i = 0; i < n; ++i) {
        const auto *contract = kernel.args()->Get(i);
        const auto *arg = task.args()->Get(i);
        switch (contract->kind()) {
        case blob::ArgKind::InputBuffer:
        case blob::ArgKind::OutputBuffer:
            describe(*arg, memory, buffers[i]);
            argv[i] = &buffers[i].buffer;
            if (contract->kind() == blob::ArgKind::OutputBuffer && output < 0) output = int(i);
            break;
        case blob::ArgKind::ScalarInt:
            // x86-64 is little-endian: a narrower int parameter reads the low bytes.
            ints[i] = arg->int_value();
            argv[i] = &ints[i];
            break;
        case blob::ArgKind::ScalarFloat:
            // Halide reads a float scalar at its own width.
            if (contract->dtype() == blob::DType::F16) {
                halves[i] = fp16::from_float(float(arg->float_value()));
                argv[i] = &halves[i];
            } else {
                floats[i] = float(arg->float_value());
                argv[i] = &floats[i];
            }
            break;
        }
    }
    if (output < 0) throw blob::BlobError("task '" + task_name + "': kernel has no output");

    BufferArg &out = buffers[size_t(output)];
    const int d = split_dimension(out);
    const int32_t extent = out.dims[size_t(d)].extent;
    const int32_t parts = std::clamp<int32_t>(task.shaves(), 1, std::max(extent, 1));
    const halide_dimension_t whole = out.dims[size_t(d)];
    for (int32_t p = 0; p < parts; ++p) {
        int32_t begin = int32_t(int64_t(extent) * p / parts);
        int32_t end = int32_t(int64_t(extent) * (p + 1) / parts);
        out.dims[size_t(d)].min = whole.min + begin;
        out.dims[size_t(d)].extent = end - begin;
        // The host pointer addresses the slice's first element: min shifts by `begin`.
        uint8_t *base = static_cast<uint8_t *>(
            memory.at(*task.args()->Get(uint32_t(output))->tensor()->address()));
        out.buffer.host = base + int64_t(begin) * whole.stride * out.buffer.type.bytes();
        int status = entry(argv.data());
        if (status != 0)
            throw blob::BlobError("task '" + task_name + "': kernel '" + kernel.name()->str() +
                                  "' failed with status " + std::to_string(status));
    }
    out.dims[size_t(d)] = whole;
}

} // namespace vpuc::sim
