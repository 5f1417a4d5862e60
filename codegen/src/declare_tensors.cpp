// Pass declare_tensors: the DDR tensors of the task program. Network inputs and outputs live
// in their sections; the output of every other layer stored in DDR lives in scratch, placed
// later by allocate_ddr; a tensor placed in another (plan_views) is a view of that one's memory.
#include <algorithm>
#include <functional>

#include "passes.h"

namespace vpuc::codegen {

View tensor_view(int buffer, const dsl::TensorDesc &t) {
    View v;
    v.buffer = buffer;
    v.dtype = blob_dtype(t.type);
    const std::vector<int64_t> strides = t.order.logical_strides(t.shape);
    using namespace dsl::dims;
    for (dsl::Dim d : {C, W, H, N})
        v.dims.push_back(blob::Dim(uint32_t(t.shape[d]), strides[size_t(d.index())]));
    if (!t.quant.empty() && !t.quant.per_channel()) v.zero_point = t.quant.zero_point[0];
    return v;
}

View box_view(const View &whole, const dsl::Box &box) {
    View v = whole;
    int64_t first = 0;
    using namespace dsl::dims;
    const dsl::Dim view_dims[4] = {C, W, H, N}; // the view's dims, innermost first
    for (size_t i = 0; i < 4; ++i) {
        const size_t d = size_t(view_dims[i].index());
        first += box.start.at(d) * whole.dims[i].stride();
        v.dims[i] = blob::Dim(uint32_t(box.extent.at(d)), whole.dims[i].stride());
    }
    v.offset += uint64_t(first * blob::dtype_bytes(whole.dtype));
    return v;
}

void declare_tensors(LoweringState &s) {
    auto &p = s.program;
    p.name = s.graph.name();
    const auto &outputs = s.graph.outputs();
    for (size_t i = 0; i < s.graph.inputs().size(); ++i) {
        const auto &t = s.graph.inputs()[i].output();
        BufferDecl b{t.name, blob::MemSpace::Input, uint32_t(i), uint64_t(t.bytes()), 0};
        s.tensor_views[t.name] = tensor_view(p.add_buffer(b), t);
        p.inputs.push_back(io_decl(t));
    }
    p.outputs.resize(outputs.size());
    for (const auto &plan : s.plans) {
        if (!stored_in_ddr(plan)) continue;
        const auto out = std::find_if(outputs.begin(), outputs.end(),
                                      [&](const dsl::Layer &l) { return l.same_as(plan.layer); });
        // A layer of several outputs (never a graph output itself) has a tensor for each.
        for (const dsl::TensorDesc &t : plan.layer.outputs()) {
            if (s.placed.count(t.name)) continue;
            BufferDecl b{t.name, blob::MemSpace::Scratch, 0, uint64_t(t.bytes()), kUnallocated};
            if (out != outputs.end()) {
                b.space = blob::MemSpace::Output;
                b.index = uint32_t(out - outputs.begin());
                b.offset = 0;
                p.outputs[b.index] = io_decl(t);
            }
            s.tensor_views[t.name] = tensor_view(p.add_buffer(b), t);
        }
    }
    // Placed tensors after the ones they are placed in, which may be placed themselves.
    std::function<View(const std::string &)> view_of = [&](const std::string &name) {
        const auto known = s.tensor_views.find(name);
        if (known != s.tensor_views.end()) return known->second;
        const Placement &placement = s.placed.at(name);
        const View in = view_of(placement.in);
        if (!placement.alias) return s.tensor_views[name] = box_view(in, placement.box);
        View alias = tensor_view(in.buffer, s.tensor(name));
        alias.offset = in.offset;
        return s.tensor_views[name] = alias;
    };
    for (const auto &[name, placement] : s.placed) view_of(name);
}

// Every network input, and every layer stored in DDR and not placed in another tensor, has
// one DDR buffer of each of its tensors' size; network outputs are in the output section, at their
// index. A placed tensor is a view of the same buffer as the tensor it is placed in.
void verify_tensors(const LoweringState &s) {
    auto check = [&](const std::string &name, uint64_t bytes, blob::MemSpace space) {
        const auto it = s.tensor_views.find(name);
        if (it == s.tensor_views.end()) throw LoweringError("tensor '" + name + "': no DDR buffer");
        const BufferDecl &b = s.program.buffers.at(size_t(it->second.buffer));
        if (b.bytes != bytes || b.space != space || it->second.offset != 0)
            throw LoweringError("tensor '" + name + "': its DDR buffer '" + b.name + "' is " +
                                std::to_string(b.bytes) + " bytes in " +
                                blob::EnumNameMemSpace(b.space) + ", not " + std::to_string(bytes) +
                                " in " + blob::EnumNameMemSpace(space));
    };
    for (const dsl::Layer &in : s.graph.inputs())
        check(in.output().name, uint64_t(in.output().bytes()), blob::MemSpace::Input);
    for (const LayerPlan &plan : s.plans) {
        const std::string &name = plan.layer.name();
        const bool output = is_network_output(s, plan.layer);
        const auto placed = s.placed.find(name);
        if (placed != s.placed.end()) {
            const auto view = s.tensor_views.find(name);
            if (view == s.tensor_views.end() ||
                view->second.buffer != s.tensor_views.at(placed->second.in).buffer)
                throw LoweringError("tensor '" + name + "': not a view of the memory of '" +
                                    placed->second.in + "', where it is placed");
        } else if (stored_in_ddr(plan)) {
            for (const dsl::TensorDesc &t : plan.layer.outputs())
                check(t.name, uint64_t(t.bytes()),
                      output ? blob::MemSpace::Output : blob::MemSpace::Scratch);
        } else if (s.tensor_views.count(name)) {
            throw LoweringError("layer '" + name + "': lives in CMX, yet has a DDR buffer");
        }
    }
}

} // namespace vpuc::codegen
