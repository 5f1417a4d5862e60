// Pass assemble: the task program becomes a blob (the graph assembler), and the IR printer.
#include <sstream>

#include "passes.h"
#include "vpu_target/verifier.h"

namespace vpuc::codegen {

namespace {

blob::Address address_of(const Program &p, const View &v) {
    const BufferDecl &b = p.buffers.at(size_t(v.buffer));
    return blob::Address(b.space, b.index, b.offset + v.offset);
}

blob::TensorRefT tensor_of(const Program &p, const View &v) {
    blob::TensorRefT t;
    t.address = std::make_unique<blob::Address>(address_of(p, v));
    t.dtype = v.dtype;
    t.dims = v.dims;
    t.zero_point = v.zero_point;
    return t;
}

// A copy between two views of equal extents as lines of contiguous bytes and outer dims.
struct DmaShape {
    uint32_t line_bytes = 0;
    std::vector<blob::DmaDim> dims; // outermost first
};

DmaShape dma_shape(const DmaWork &dma, const std::string &task) {
    const int elem = blob::dtype_bytes(dma.src.dtype);
    const View &src = dma.src, &dst = dma.dsts.front();
    int64_t line = elem;
    size_t d = 0;
    // Collapse the innermost dims while both sides stay contiguous.
    for (; d < src.dims.size(); ++d) {
        const bool contiguous =
            src.dims[d].stride() * elem == line && dst.dims[d].stride() * elem == line;
        if (src.dims[d].extent() > 1 && !contiguous) break;
        line *= src.dims[d].extent();
    }
    DmaShape shape;
    shape.line_bytes = uint32_t(line);
    for (size_t i = src.dims.size(); i-- > d;)
        if (src.dims[i].extent() > 1)
            shape.dims.emplace_back(src.dims[i].extent(), src.dims[i].stride() * elem,
                                    dst.dims[i].stride() * elem);
    if (shape.dims.size() > 4)
        throw LoweringError("task '" + task + "': a copy needs " +
                            std::to_string(shape.dims.size()) + " strided dims; a DMA takes 4");
    return shape;
}

} // namespace

void assemble(LoweringState &s) {
    const Program &p = s.program;
    blob::BlobWriter w(s.target, p.name);
    for (const auto &io : p.inputs) w.add_input(io.name, io.shape, io.dtype, io.layout, io.quant);
    for (const auto &io : p.outputs) w.add_output(io.name, io.shape, io.dtype, io.layout, io.quant);
    w.add_constant(p.constants.data(), p.constants.size(), 64);
    w.set_scratch_bytes(p.scratch_bytes);
    for (const auto &b : p.barriers) w.add_barrier(uint16_t(b.physical));
    for (const auto &k : p.kernels) w.add_kernel(k);

    std::vector<std::vector<uint32_t>> waits(p.tasks.size()), updates(p.tasks.size());
    for (uint32_t b = 0; b < p.barriers.size(); ++b) {
        for (int t : p.barriers[b].producers) updates[size_t(t)].push_back(b);
        for (int t : p.barriers[b].consumers) waits[size_t(t)].push_back(b);
    }
    for (size_t i = 0; i < p.tasks.size(); ++i) {
        const TaskIR &t = p.tasks[i];
        std::optional<blob::TaskHandle> h;
        if (const auto *dma = std::get_if<DmaWork>(&t.work)) {
            DmaShape shape = dma_shape(*dma, t.name);
            std::vector<blob::Address> dsts;
            for (const auto &d : dma->dsts) dsts.push_back(address_of(p, d));
            h = w.add_dma(t.index, t.name, address_of(p, dma->src), dsts, shape.line_bytes,
                          shape.dims);
        } else if (const auto *shave = std::get_if<ShaveWork>(&t.work)) {
            blob::ShaveTaskT task;
            task.kernel = shave->kernel;
            task.shaves = shave->shaves;
            for (size_t a = 0; a < shave->args.size(); ++a) {
                auto arg = std::make_unique<blob::ShaveArgT>();
                arg->tensor = std::make_unique<blob::TensorRefT>(tensor_of(p, shave->args[a]));
                arg->mins = shave->mins[a];
                task.args.push_back(std::move(arg));
            }
            h = w.add_shave(t.tile, t.name, std::move(task));
        } else {
            const auto &work = std::get<DpuWork>(t.work);
            blob::DpuTaskT task = work.invariant;
            task.input = std::make_unique<blob::TensorRefT>(tensor_of(p, work.input));
            task.output = std::make_unique<blob::TensorRefT>(tensor_of(p, work.output));
            if (work.has_input2)
                task.input2 = std::make_unique<blob::TensorRefT>(tensor_of(p, work.input2));
            if (work.has_weights) {
                task.weights = std::make_unique<blob::TensorRefT>(tensor_of(p, work.weights));
                task.weight_table =
                    std::make_unique<blob::TensorRefT>(tensor_of(p, work.weight_table));
            }
            h = w.add_dpu(t.tile, t.index, t.name, std::move(task));
        }
        h->layer(t.layer);
        for (uint32_t b : waits[i]) h->wait(b);
        for (uint32_t b : updates[i]) h->update(b);
    }
    s.blob = w.finish();
}

// The blob verifies against the target, which includes that its dependencies order every two
// tasks that touch the same bytes (one writing): a race would be a dependency some pass lost.
void verify_blob(const LoweringState &s) {
    try {
        blob::verify(s.blob, s.target);
    } catch (const blob::BlobError &e) {
        throw LoweringError(std::string("the assembled blob does not verify:\n") + e.what());
    }
}

} // namespace vpuc::codegen
