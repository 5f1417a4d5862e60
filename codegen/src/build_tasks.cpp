// Pass build_tasks: every task of every layer's loop nest becomes DMA-in, DPU and DMA-out
// tasks over CMX buffers, with weights and weight tables as constants in the DPU's layout.
#include <algorithm>
#include <cstring>
#include <map>
#include <tuple>

#include "codegen/bounds.h"
#include "passes.h"
#include "vpu_target/timing_model.h"

namespace vpuc::codegen {

namespace {

blob::DpuOp blob_op(target::DpuOpKind op) {
    switch (op) {
    case target::DpuOpKind::Conv:
        return blob::DpuOp::Conv;
    case target::DpuOpKind::DepthwiseConv:
        return blob::DpuOp::DepthwiseConv;
    case target::DpuOpKind::MaxPool:
        return blob::DpuOp::MaxPool;
    case target::DpuOpKind::AvgPool:
        return blob::DpuOp::AvgPool;
    case target::DpuOpKind::Eltwise:
        return blob::DpuOp::Eltwise;
    case target::DpuOpKind::MatMul:
        return blob::DpuOp::MatMul;
    }
    return blob::DpuOp::Conv;
}

blob::Activation blob_activation(dpu::Activation a) {
    switch (a) {
    case dpu::Activation::None:
        return blob::Activation::None;
    case dpu::Activation::Relu:
        return blob::Activation::Relu;
    case dpu::Activation::ReluX:
        return blob::Activation::ReluX;
    case dpu::Activation::LeakyRelu:
        return blob::Activation::LeakyRelu;
    }
    return blob::Activation::None;
}

int elem_bytes(blob::DType t) {
    return blob::dtype_bytes(t);
}

// A dense (C, W, H, N=1) view in `order`'s memory layout.
View tensor_view(int buffer, const dsl::TensorDesc &t) {
    View v;
    v.buffer = buffer;
    v.dtype = blob_dtype(t.type);
    std::vector<int64_t> strides = t.order.logical_strides(t.shape);
    using namespace dsl::dims;
    v.dims = {blob::Dim(uint32_t(t.shape[C]), strides[size_t(C.index())]),
              blob::Dim(uint32_t(t.shape[W]), strides[size_t(W.index())]),
              blob::Dim(uint32_t(t.shape[H]), strides[size_t(H.index())]),
              blob::Dim(1, t.shape.elements())};
    if (!t.quant.empty() && !t.quant.per_channel()) v.zero_point = t.quant.zero_point[0];
    return v;
}

View sub_view(const View &whole, const Region &r) {
    View v = whole;
    int64_t first = 0;
    for (int d = 0; d < 3; ++d) {
        first += r.dims[size_t(d)].begin * whole.dims[size_t(d)].stride();
        v.dims[size_t(d)] =
            blob::Dim(uint32_t(r.dims[size_t(d)].extent()), whole.dims[size_t(d)].stride());
    }
    v.offset += uint64_t(first * elem_bytes(whole.dtype));
    return v;
}

View dense_cmx_view(int buffer, blob::DType dtype, const Region &r, int32_t zero_point) {
    View v;
    v.buffer = buffer;
    v.dtype = dtype;
    v.zero_point = zero_point;
    const int64_t c = r.dims[0].extent(), w = r.dims[1].extent(), h = r.dims[2].extent();
    v.dims = {blob::Dim(uint32_t(c), 1), blob::Dim(uint32_t(w), c), blob::Dim(uint32_t(h), c * w),
              blob::Dim(1, c * w * h)};
    return v;
}

uint64_t view_bytes(const View &v) {
    uint64_t n = uint64_t(elem_bytes(v.dtype));
    for (const auto &d : v.dims) n *= d.extent();
    return n;
}

// Builds the tasks of one layer.
class LayerBuilder {
  public:
    LayerBuilder(LoweringState &s, const LayerPlan &plan)
        : s_(s), plan_(plan), d_(plan.dpu), next_dpu_(size_t(s.target.tiles), 0) {}

    void build() {
        reject_unsupported();
        output_ = s_.tensor_buffer.at(plan_.layer.name());
        for (const auto &in : plan_.layer.inputs())
            inputs_.push_back(s_.tensor_buffer.at(in.name()));
        // Interleave the tiles' tasks so every tile starts at once; per tile, the inputs
        // of `prefetch` tasks ahead are loaded before a task computes.
        std::vector<std::vector<Task>> per_tile(size_t(s_.target.tiles));
        for (const Task &t : plan_.nest.tasks()) per_tile[size_t(t.tile)].push_back(t);
        size_t rounds = 0;
        for (const auto &list : per_tile) rounds = std::max(rounds, list.size());
        const size_t ahead = size_t(plan_.nest.prefetch);
        std::vector<std::vector<Pending>> pending(per_tile.size());
        for (size_t r = 0; r < rounds + ahead; ++r) {
            for (size_t tile = 0; tile < per_tile.size(); ++tile)
                if (r < per_tile[tile].size()) pending[tile].push_back(load(per_tile[tile][r]));
            for (size_t tile = 0; tile < per_tile.size(); ++tile)
                if (r >= ahead && r - ahead < per_tile[tile].size())
                    compute_and_store(pending[tile][r - ahead]);
        }
    }

    std::vector<int> writers; // DMA-out tasks: who wrote this layer's output

  private:
    struct Pending {
        Task task;
        std::vector<int> loads; // DMA tasks bringing its inputs and weights
        std::vector<View> inputs;
        std::vector<Region> input_regions;
        View weights, table;
    };

    const std::string &name() const { return plan_.layer.name(); }

    [[noreturn]] void fail(const std::string &what) const {
        throw LoweringError("layer '" + name() + "': " + what);
    }

    void reject_unsupported() const {
        if (!plan_.nest.compute_root)
            fail("compute_at is not lowered yet; schedule the layer compute_root()");
        if (plan_.on_shave) return;
        if (d_.dilation_w != 1 || d_.dilation_h != 1)
            fail("dilated convolutions are not lowered to the DPU yet");
        if (d_.groups != 1) fail("grouped convolutions are not lowered to the DPU yet");
    }

    int dma_engine_in(int tile) const { return tile % s_.target.dma_engines; }
    int dma_engine_out(int tile) const { return (tile + 1) % s_.target.dma_engines; }

    int add_cmx_buffer(const std::string &buffer_name, int tile, uint64_t bytes) {
        BufferDecl b;
        b.name = buffer_name;
        b.space = blob::MemSpace::Cmx;
        b.index = uint32_t(tile);
        b.bytes = bytes;
        return s_.program.add_buffer(b);
    }

    int add_dma(const std::string &task_name, int engine, const View &src, const View &dst,
                std::vector<int> deps) {
        TaskIR t;
        t.name = task_name;
        t.layer = name();
        t.engine = blob::EngineKind::Dma;
        t.index = uint32_t(engine);
        t.work = DmaWork{src, {dst}};
        t.deps = std::move(deps);
        return s_.program.add_task(std::move(t));
    }

    std::string task_name(const Task &t, const std::string &what) const {
        return name() + "." + what + "." + std::to_string(t.tile) + "." + t.region.to_string();
    }

    Pending load(const Task &task) {
        Pending p;
        p.task = task;
        p.input_regions = input_regions(plan_.layer, task.region);
        std::vector<int> dma_inputs;
        if (plan_.on_shave) {
            for (int i = 0; i < int(plan_.layer.inputs().size()); ++i) dma_inputs.push_back(i);
        } else {
            dma_inputs.push_back(d_.input);
            if (d_.input2 >= 0) dma_inputs.push_back(d_.input2);
        }
        for (int i : dma_inputs) {
            const dsl::Layer &producer = plan_.layer.inputs()[size_t(i)];
            const Region &r = p.input_regions[size_t(i)];
            View whole = tensor_view(inputs_[size_t(i)], producer.output());
            View src = sub_view(whole, r);
            int buf =
                add_cmx_buffer(name() + ".in" + std::to_string(i), task.tile, view_bytes(src));
            View dst = dense_cmx_view(buf, src.dtype, r, src.zero_point);
            p.loads.push_back(add_dma(task_name(task, "load" + std::to_string(i)),
                                      dma_engine_in(task.tile), src, dst,
                                      s_.writers_of(producer.name())));
            p.inputs.push_back(dst);
        }
        if (!plan_.on_shave && has_weights()) {
            // Tasks of a tile computing the same output channels share one copy of the weights.
            const Interval oc = task.region.dims[0];
            auto key = std::make_tuple(task.tile, oc.begin, oc.end);
            auto it = loaded_weights_.find(key);
            if (it == loaded_weights_.end()) {
                load_weights(p);
                loaded_weights_[key] = {p.weights, p.table, {p.loads.end() - 2, p.loads.end()}};
            } else {
                p.weights = it->second.weights;
                p.table = it->second.table;
                p.loads.insert(p.loads.end(), it->second.loads.begin(), it->second.loads.end());
            }
        }
        return p;
    }

    bool has_weights() const {
        return d_.op == target::DpuOpKind::Conv || d_.op == target::DpuOpKind::DepthwiseConv ||
               d_.op == target::DpuOpKind::MatMul;
    }

    // Weights of output channels [c0, c1) in the DPU's layout: channel by channel, each
    // (IC, KW, KH) dense, and the weight table pointing at every channel's set.
    void load_weights(Pending &p) {
        const Interval oc = p.task.region.dims[0];
        const auto &w = d_.weights;
        const bool depthwise = d_.op == target::DpuOpKind::DepthwiseConv;
        const int ic = depthwise ? 1 : w.dim(0).extent();
        const int kw = w.dimensions() > 2 ? w.dim(1).extent() : 1;
        const int kh = w.dimensions() > 2 ? w.dim(2).extent() : 1;
        const int elem = w.type().bytes();
        const uint64_t per_channel = uint64_t(ic) * kw * kh * elem;
        std::vector<uint8_t> data(per_channel * uint64_t(oc.extent()));
        std::vector<int32_t> table;
        for (int64_t c = oc.begin; c < oc.end; ++c) {
            uint8_t *out = data.data() + (c - oc.begin) * per_channel;
            for (int ky = 0; ky < kh; ++ky)
                for (int kx = 0; kx < kw; ++kx)
                    for (int i = 0; i < ic; ++i) {
                        int pos4[4] = {i, kx, ky, int(c)};
                        int pos2[2] = {i, int(c)};
                        const uint8_t *src = w.dimensions() > 2 ? w.raw_buffer()->address_of(pos4)
                                                                : w.raw_buffer()->address_of(pos2);
                        std::memcpy(out, src, size_t(elem));
                        out += elem;
                    }
            table.insert(table.end(), {int32_t((c - oc.begin) * per_channel), 0,
                                       int32_t(requant_word(c)), bias_word(c)});
        }
        const blob::DType wtype = blob_dtype(w.type());
        View weights_src = constant(data, wtype);
        View table_src = constant(table, blob::DType::I32);
        weights_src.dims = {blob::Dim(uint32_t(ic), 1), blob::Dim(uint32_t(kw), ic),
                            blob::Dim(uint32_t(kh), int64_t(ic) * kw),
                            blob::Dim(uint32_t(oc.extent()), int64_t(per_channel / elem))};
        weights_src.zero_point = d_.weights_zero_point;
        table_src.dims = {blob::Dim(4, 1), blob::Dim(uint32_t(oc.extent()), 4)};
        for (View *src : {&weights_src, &table_src}) {
            bool is_table = src == &table_src;
            int buf = add_cmx_buffer(name() + (is_table ? ".table" : ".weights"), p.task.tile,
                                     view_bytes(*src));
            View dst = *src;
            dst.buffer = buf;
            dst.offset = 0;
            p.loads.push_back(add_dma(task_name(p.task, is_table ? "table" : "weights"),
                                      dma_engine_in(p.task.tile), *src, dst, {}));
            (is_table ? p.table : p.weights) = dst;
        }
    }

    template <typename T> View constant(const std::vector<T> &values, blob::DType dtype) {
        auto &section = s_.program.constants;
        size_t offset = (section.size() + 63) / 64 * 64;
        section.resize(offset + values.size() * sizeof(T), 0);
        std::memcpy(section.data() + offset, values.data(), values.size() * sizeof(T));
        BufferDecl b;
        b.name = name() + ".const";
        b.space = blob::MemSpace::Constant;
        b.bytes = values.size() * sizeof(T);
        b.offset = offset;
        View v;
        v.buffer = s_.program.add_buffer(b);
        v.dtype = dtype;
        return v;
    }

    static size_t per(const std::vector<int32_t> &v, int64_t c) {
        return v.size() == 1 ? 0 : size_t(c);
    }

    uint32_t requant_word(int64_t c) const {
        if (d_.input_type.is_float())
            return fp16::float_bits(
                d_.fp_scale.empty() ? 1.0f : d_.fp_scale[d_.fp_scale.size() == 1 ? 0 : size_t(c)]);
        size_t i = d_.mult.size() == 1 ? 0 : size_t(c);
        return dpu::pack_requant(d_.mult.at(i), d_.shift.at(i));
    }

    int32_t bias_word(int64_t c) const {
        if (d_.input_type.is_float())
            return d_.fp_bias.empty() ? 0
                                      : int32_t(fp16::float_bits(
                                            d_.fp_bias[d_.fp_bias.size() == 1 ? 0 : size_t(c)]));
        return d_.bias.empty() ? 0 : d_.bias[per(d_.bias, c)];
    }

    // The DPU task's padding for one task: the layer's padding where the task's input region
    // touches the input's border, none inside.
    void set_window(blob::DpuTaskT &t, const Pending &p) const {
        const Region &out = p.task.region;
        const Region &in = p.input_regions[size_t(d_.input)];
        auto pads = [](int64_t out_begin, int64_t out_extent, int stride, int pad, int kernel,
                       const Interval &in_range, uint8_t &before, uint8_t &after) {
            int64_t first = out_begin * stride - pad;
            before = uint8_t(std::max<int64_t>(0, in_range.begin - first));
            int64_t needed = (out_extent - 1) * stride + kernel;
            after = uint8_t(std::max<int64_t>(0, needed - before - in_range.extent()));
        };
        t.kernel_w = uint8_t(d_.kernel_w);
        t.kernel_h = uint8_t(d_.kernel_h);
        t.stride_w = uint8_t(d_.stride_w);
        t.stride_h = uint8_t(d_.stride_h);
        pads(out.dims[1].begin, out.dims[1].extent(), d_.stride_w, d_.pad_left, d_.kernel_w,
             in.dims[1], t.pad_left, t.pad_right);
        pads(out.dims[2].begin, out.dims[2].extent(), d_.stride_h, d_.pad_top, d_.kernel_h,
             in.dims[2], t.pad_top, t.pad_bottom);
    }

    std::unique_ptr<blob::PpeT> ppe() const {
        auto p = std::make_unique<blob::PpeT>();
        const bool fp = d_.output_type.is_float();
        p->activation = blob_activation(fp ? d_.float_ppe.activation : d_.int_ppe.activation);
        p->relux_max = d_.int_ppe.relux_max;
        p->leaky_mult = d_.int_ppe.leaky_mult;
        p->leaky_shift = uint8_t(d_.int_ppe.leaky_shift);
        p->leaky_alpha = d_.float_ppe.leaky_alpha;
        p->clamp_low = d_.int_ppe.clamp_low;
        p->clamp_high = d_.int_ppe.clamp_high;
        p->fp_clamp_low = d_.float_ppe.clamp_low;
        p->fp_clamp_high = d_.float_ppe.clamp_high;
        if (!has_weights()) {
            if (!d_.mult.empty()) p->mult = d_.mult[0];
            if (!d_.shift.empty()) p->shift = d_.shift[0];
            if (!d_.bias.empty()) p->bias = d_.bias[0];
            if (!d_.fp_scale.empty()) p->fp_scale = d_.fp_scale[0];
        }
        p->eltwise_op = blob::EltwiseOp(int(d_.eltwise));
        p->in1_mult = d_.in1_mult;
        p->in2_mult = d_.in2_mult;
        return p;
    }

    // Variants: the task's region split along the workload loop's dimension.
    std::vector<std::array<Interval, 3>> workloads(const Region &r) const {
        int dim = 2;
        int64_t count = plan_.nest.workloads;
        if (const Loop *l = plan_.nest.find(plan_.nest.workload_loop))
            dim = std::max(0, plan_.nest.vars[size_t(l->var)].dim);
        std::vector<std::array<Interval, 3>> out;
        const int64_t extent = r.dims[size_t(dim)].extent();
        count = std::clamp<int64_t>(count, 1, extent);
        for (int64_t i = 0; i < count; ++i) {
            std::array<Interval, 3> local = {Interval{0, r.dims[0].extent()},
                                             Interval{0, r.dims[1].extent()},
                                             Interval{0, r.dims[2].extent()}};
            local[size_t(dim)] = {extent * i / count, extent * (i + 1) / count};
            out.push_back(local);
        }
        return out;
    }

    std::string mpe_mode(const std::vector<std::array<Interval, 3>> &variants,
                         const blob::DpuTaskT &t) const {
        if (!plan_.nest.mpe_mode.empty()) return plan_.nest.mpe_mode;
        // The compiler's choice: the mode with the fewest cycles for these workloads.
        const bool fp = d_.input_type.is_float();
        std::string best;
        double best_cycles = 0;
        for (const auto &mode : s_.target.mpe_modes) {
            if (!(fp ? mode.fp16 : mode.int8)) continue;
            double cycles = 0;
            for (const auto &v : variants) {
                target::DpuWorkload w;
                w.op = d_.op;
                w.input_dtype = fp ? target::DType::F16 : target::DType::I8;
                w.output_dtype = w.input_dtype;
                w.out_c = int(v[0].extent());
                w.out_w = int(v[1].extent());
                w.out_h = int(v[2].extent());
                w.in_c =
                    d_.op == target::DpuOpKind::Conv || d_.op == target::DpuOpKind::MatMul
                        ? int(plan_.layer.inputs()[size_t(d_.input)].output().shape[dsl::dims::C])
                        : w.out_c;
                w.in_w = (w.out_w - 1) * t.stride_w + t.kernel_w;
                w.in_h = (w.out_h - 1) * t.stride_h + t.kernel_h;
                w.kernel_w = t.kernel_w;
                w.kernel_h = t.kernel_h;
                w.stride_w = t.stride_w;
                w.stride_h = t.stride_h;
                w.mpe_mode = mode.name;
                cycles += target::dpu_workload_cycles(s_.target, w);
            }
            if (best.empty() || cycles < best_cycles) best = mode.name, best_cycles = cycles;
        }
        if (best.empty()) fail("the target has no MPE mode for this input type");
        return best;
    }

    void compute_and_store(const Pending &p) {
        const dsl::TensorDesc &out_desc = plan_.layer.output();
        View whole_out = tensor_view(output_, out_desc);
        int out_buf = add_cmx_buffer(name() + ".out", p.task.tile,
                                     view_bytes(sub_view(whole_out, p.task.region)));
        View out_cmx =
            dense_cmx_view(out_buf, whole_out.dtype, p.task.region, whole_out.zero_point);
        int compute = plan_.on_shave ? shave_task(p, out_cmx) : dpu_task(p, out_cmx);
        writers.push_back(add_dma(task_name(p.task, "store"), dma_engine_out(p.task.tile), out_cmx,
                                  sub_view(whole_out, p.task.region), {compute}));
    }

    static std::vector<int32_t> mins_of(const Region &r) {
        return {int32_t(r.dims[0].begin), int32_t(r.dims[1].begin), int32_t(r.dims[2].begin)};
    }

    // Buffers as the kernel sees them: (c, x, y) with the region's coordinates as mins.
    static View kernel_view(View v) {
        v.dims.resize(3);
        return v;
    }

    int shave_task(const Pending &p, const View &out_cmx) {
        ShaveWork work;
        work.kernel = plan_.kernel;
        for (size_t i = 0; i < p.inputs.size(); ++i) {
            work.args.push_back(kernel_view(p.inputs[i]));
            work.mins.push_back(mins_of(p.input_regions[i]));
        }
        work.args.push_back(kernel_view(out_cmx));
        work.mins.push_back(mins_of(p.task.region));
        work.shaves = uint8_t(std::min(s_.target.shaves_available(p.task.tile), 255));
        TaskIR t;
        t.name = task_name(p.task, "shave");
        t.layer = name();
        t.engine = blob::EngineKind::Shave;
        t.tile = uint32_t(p.task.tile);
        t.deps = p.loads;
        t.work = std::move(work);
        return s_.program.add_task(std::move(t));
    }

    int dpu_task(const Pending &p, const View &out_cmx) {
        const Task &task = p.task;
        DpuWork work;
        blob::DpuTaskT &t = work.invariant;
        t.op = blob_op(d_.op);
        set_window(t, p);
        t.weights_zero_point = d_.weights_zero_point;
        t.ppe = ppe();
        const auto variants = workloads(task.region);
        const std::string mode = mpe_mode(variants, t);
        for (const auto &v : variants)
            t.variants.push_back(std::make_unique<blob::DpuVariantT>(
                blob::variant({uint32_t(v[1].begin), uint32_t(v[2].begin), uint32_t(v[0].begin)},
                              {uint32_t(v[1].end), uint32_t(v[2].end), uint32_t(v[0].end)}, mode)));
        work.input = p.inputs[0];
        if (d_.input2 >= 0) {
            work.input2 = p.inputs[1];
            work.has_input2 = true;
        }
        if (has_weights()) {
            work.weights = p.weights;
            work.weight_table = p.table;
            work.has_weights = true;
        }
        work.output = out_cmx;

        TaskIR dpu_task;
        dpu_task.name = task_name(task, "dpu");
        dpu_task.layer = name();
        dpu_task.engine = blob::EngineKind::Dpu;
        dpu_task.tile = uint32_t(task.tile);
        dpu_task.index = uint32_t(next_dpu_[size_t(task.tile)]++ % s_.target.dpus_per_tile);
        dpu_task.deps = p.loads;
        dpu_task.work = std::move(work);
        return s_.program.add_task(std::move(dpu_task));
    }

    struct LoadedWeights {
        View weights, table;
        std::vector<int> loads;
    };
    std::map<std::tuple<int, int64_t, int64_t>, LoadedWeights> loaded_weights_;

    LoweringState &s_;
    const LayerPlan &plan_;
    const DpuOpDesc &d_;
    int output_ = -1;
    std::vector<int> inputs_;
    std::vector<int> next_dpu_; // per tile: the DPU the next task goes to
};

} // namespace

void build_tasks(LoweringState &s) {
    auto &p = s.program;
    p.name = s.graph.name();
    // DDR tensors: network inputs and outputs in their sections, the rest in scratch.
    const auto &outputs = s.graph.outputs();
    for (size_t i = 0; i < s.graph.inputs().size(); ++i) {
        const auto &t = s.graph.inputs()[i].output();
        BufferDecl b{t.name, blob::MemSpace::Input, uint32_t(i), uint64_t(t.bytes()), 0};
        s.tensor_buffer[t.name] = p.add_buffer(b);
        p.inputs.push_back(io_decl(t));
    }
    p.outputs.resize(outputs.size());
    for (const auto &plan : s.plans) {
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
    for (const auto &plan : s.plans) {
        LayerBuilder builder(s, plan);
        builder.build();
        s.layer_writers[plan.layer.name()] = builder.writers;
    }
}

} // namespace vpuc::codegen
