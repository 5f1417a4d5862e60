// Pass declare_tensors: the DDR tensors of the task program. Network inputs and outputs live
// in their sections; the output of every other layer computed at root and not kept in CMX
// lives in scratch, placed later by allocate_ddr.
#include <algorithm>

#include "passes.h"

namespace vpuc::codegen {

namespace {

bool stored_in_ddr(const LayerPlan &plan) {
    return plan.nest.compute_root && !plan.nest.broadcast;
}

} // namespace

void declare_tensors(LoweringState &s) {
    auto &p = s.program;
    p.name = s.graph.name();
    const auto &outputs = s.graph.outputs();
    for (size_t i = 0; i < s.graph.inputs().size(); ++i) {
        const auto &t = s.graph.inputs()[i].output();
        BufferDecl b{t.name, blob::MemSpace::Input, uint32_t(i), uint64_t(t.bytes()), 0};
        s.tensor_buffer[t.name] = p.add_buffer(b);
        p.inputs.push_back(io_decl(t));
    }
    p.outputs.resize(outputs.size());
    for (const auto &plan : s.plans) {
        if (!stored_in_ddr(plan)) continue; // lives in CMX only
        const auto &t = plan.layer.output();
        auto out = std::find_if(outputs.begin(), outputs.end(),
                                [&](const dsl::Layer &l) { return l.same_as(plan.layer); });
        BufferDecl b{plan.layer.name(), blob::MemSpace::Scratch, 0, uint64_t(t.bytes()),
                     kUnallocated};
        if (out != outputs.end()) {
            b.space = blob::MemSpace::Output;
            b.index = uint32_t(out - outputs.begin());
            b.offset = 0;
            p.outputs[b.index] = io_decl(t);
        }
        s.tensor_buffer[plan.layer.name()] = p.add_buffer(b);
    }
}

// Every network input, and every layer stored in DDR, has one DDR buffer of its tensor's
// size; network outputs are in the output section, at their index.
void verify_tensors(const LoweringState &s) {
    auto check = [&](const std::string &name, uint64_t bytes, blob::MemSpace space) {
        const auto it = s.tensor_buffer.find(name);
        if (it == s.tensor_buffer.end())
            throw LoweringError("tensor '" + name + "': no DDR buffer");
        const BufferDecl &b = s.program.buffers.at(size_t(it->second));
        if (b.bytes != bytes || b.space != space)
            throw LoweringError("tensor '" + name + "': its DDR buffer '" + b.name + "' is " +
                                std::to_string(b.bytes) + " bytes in " +
                                blob::EnumNameMemSpace(b.space) + ", not " + std::to_string(bytes) +
                                " in " + blob::EnumNameMemSpace(space));
    };
    for (const dsl::Layer &in : s.graph.inputs())
        check(in.output().name, uint64_t(in.output().bytes()), blob::MemSpace::Input);
    const auto &outputs = s.graph.outputs();
    for (const LayerPlan &plan : s.plans) {
        const bool output = std::any_of(outputs.begin(), outputs.end(),
                                        [&](const dsl::Layer &l) { return l.same_as(plan.layer); });
        if (stored_in_ddr(plan))
            check(plan.layer.name(), uint64_t(plan.layer.output().bytes()),
                  output ? blob::MemSpace::Output : blob::MemSpace::Scratch);
        else if (s.tensor_buffer.count(plan.layer.name()))
            throw LoweringError("layer '" + plan.layer.name() +
                                "': lives in CMX, yet has a DDR buffer");
    }
}

} // namespace vpuc::codegen
