#include "bench/models.h"

#include <algorithm>
#include <chrono>
#include <cstdlib>

#include "bench/layers.h"
#include "codegen/check.h"
#include "codegen/dpu_match.h"
#include "codegen/lower.h"
#include "vpu_target/blob.h"
#include "vpu_target/simulator.h"

namespace vpuc::bench {

namespace {

// The DPU operations of one layer, and the fraction of the conv MAC rate its op kind runs at.
struct DpuWork {
    double operations = 0;
    double rate = 1;
};

DpuWork dpu_work(const codegen::DpuOpDesc &op, const dsl::TensorDesc &output) {
    const double outputs = double(dsl::device_view(output).shape.elements());
    const double window = double(op.kernel_w) * op.kernel_h;
    switch (op.op) {
    case target::DpuOpKind::Conv:
    case target::DpuOpKind::MatMul:
        // Weights (ic per group, kx, ky, oc).
        return {outputs * window * double(op.weights.dim(0).extent()), 1};
    case target::DpuOpKind::DepthwiseConv:
    case target::DpuOpKind::MaxPool:
    case target::DpuOpKind::AvgPool:
        return {outputs * window, 1.0 / 16};
    case target::DpuOpKind::Eltwise:
        return {outputs, 1.0 / 32};
    }
    return {};
}

// The last byte after `offset` that a strided tensor reaches, plus one.
uint64_t tensor_end(const blob::TensorRef &t) {
    int64_t last = 0;
    for (const blob::Dim *d : *t.dims())
        if (d->extent() > 0) last += int64_t(d->extent() - 1) * std::llabs(d->stride());
    return t.address()->offset() + uint64_t(last + 1) * uint64_t(blob::dtype_bytes(t.dtype()));
}

// The bytes a DMA copies, and how far past its source or destination offset it reaches.
uint64_t dma_bytes(const blob::DmaTask &dma) {
    uint64_t bytes = dma.line_bytes();
    if (dma.dims())
        for (const blob::DmaDim *d : *dma.dims()) bytes *= d->count();
    return bytes;
}
uint64_t dma_end(const blob::DmaTask &dma, bool destination, uint64_t offset) {
    int64_t last = 0;
    if (dma.dims())
        for (const blob::DmaDim *d : *dma.dims())
            if (d->count() > 0)
                last += int64_t(d->count() - 1) *
                        std::llabs(destination ? d->dst_stride() : d->src_stride());
    return offset + uint64_t(last) + dma.line_bytes();
}

template <typename Visit> void for_each_task(const std::vector<uint8_t> &bytes, Visit visit) {
    const blob::Blob *b = blob::GetBlob(bytes.data());
    if (!b->queues()) return;
    for (const blob::TaskQueue *q : *b->queues())
        for (const blob::Task *task : *q->tasks()) visit(*task);
}

} // namespace

ModelRoofline model_roofline(const dsl::Graph &graph, const target::Target &target) {
    ModelRoofline r;
    double int8_cycles = 0, fp16_cycles = 0;
    for (const dsl::Layer &layer : graph.layers()) {
        const std::optional<codegen::DpuOpDesc> op = codegen::try_match_dpu(layer, target);
        if (!op) continue;
        const DpuWork work = dpu_work(*op, layer.output());
        const bool int8 = op->input_type.is_int() || op->input_type.is_uint();
        const double peak =
            double(target.macs_per_cycle(int8 ? target::DType::I8 : target::DType::F16)) *
            work.rate * target.dpus_per_tile * target.tiles;
        (int8 ? int8_cycles : fp16_cycles) += work.operations / peak;
    }
    r.compute_ns = (int8_cycles + fp16_cycles) * 1e3 / target.dpu_clock_mhz;
    r.ddr_bytes = graph_ddr_bytes(graph);
    r.ddr_ns = double(r.ddr_bytes) / target.ddr_bandwidth_gbps; // B / (B/ns)
    return r;
}

DdrTraffic ddr_traffic(const std::vector<uint8_t> &bytes) {
    DdrTraffic t;
    for_each_task(bytes, [&](const blob::Task &task) {
        const blob::DmaTask *dma = task.kind_as_DmaTask();
        if (!dma) return;
        const int64_t n = int64_t(dma_bytes(*dma));
        const blob::MemSpace from = dma->src()->space();
        const blob::MemSpace to = dma->dst()->Get(0)->space();
        if (from == blob::MemSpace::Constant)
            t.constants += n;
        else if (from == blob::MemSpace::Input)
            t.network_inputs += n;
        else if (from == blob::MemSpace::Scratch)
            t.activation_loads += n;
        else if (to == blob::MemSpace::Scratch)
            t.activation_stores += n;
        else if (to == blob::MemSpace::Output)
            t.network_outputs += n;
        // CMX to CMX moves no DDR byte.
    });
    return t;
}

int64_t cmx_high_water_bytes(const std::vector<uint8_t> &bytes) {
    uint64_t high = 0;
    auto cmx = [&](const blob::TensorRef *t) {
        if (t && t->address()->space() == blob::MemSpace::Cmx)
            high = std::max(high, tensor_end(*t));
    };
    for_each_task(bytes, [&](const blob::Task &task) {
        if (const blob::DmaTask *dma = task.kind_as_DmaTask()) {
            if (dma->src()->space() == blob::MemSpace::Cmx)
                high = std::max(high, dma_end(*dma, false, dma->src()->offset()));
            for (const blob::Address *dst : *dma->dst())
                if (dst->space() == blob::MemSpace::Cmx)
                    high = std::max(high, dma_end(*dma, true, dst->offset()));
        } else if (const blob::DpuTask *dpu = task.kind_as_DpuTask()) {
            for (const blob::TensorRef *t :
                 {dpu->input(), dpu->input2(), dpu->weights(), dpu->weight_table(), dpu->output()})
                cmx(t);
        } else if (const blob::ShaveTask *shave = task.kind_as_ShaveTask()) {
            for (const blob::ShaveArg *arg : *shave->args()) cmx(arg->tensor());
        }
    });
    return int64_t(high);
}

double simulated_latency_ns(const dsl::Graph &graph, const target::Target &target,
                            bool graph_scheduling) {
    codegen::LowerOptions options;
    options.graph_scheduling = graph_scheduling;
    sim::Simulator simulator(target, codegen::lower(graph, target, options));
    return simulator.run({}, sim::Mode::TimingOnly).latency_ns;
}

ModelMeasurement measure_model(const dsl::Graph &graph, const target::Target &target,
                               bool graph_scheduling) {
    ModelMeasurement m;
    m.layers = int(graph.layers().size());
    try {
        auto start = std::chrono::steady_clock::now();
        codegen::LowerOptions options;
        options.graph_scheduling = graph_scheduling;
        const std::vector<uint8_t> blob = codegen::lower(graph, target, options);
        m.lower_ms = ms_since(start);
        m.ddr = ddr_traffic(blob);
        m.cmx_high_water_bytes = cmx_high_water_bytes(blob);

        sim::Simulator simulator(target, blob);
        start = std::chrono::steady_clock::now();
        const sim::RunResult timing = simulator.run({}, sim::Mode::TimingOnly);
        m.simulate_timing_ms = ms_since(start);
        m.latency_ns = timing.latency_ns;
        auto share = [&](blob::EngineKind kind) {
            double busy = 0;
            int engines = 0;
            for (const sim::EngineStats &e : timing.engines)
                if (e.kind == kind) busy += e.busy_ns, ++engines;
            return engines && timing.latency_ns > 0 ? busy / engines / timing.latency_ns : 0.0;
        };
        m.dma_busy = share(blob::EngineKind::Dma);
        m.dpu_busy = share(blob::EngineKind::Dpu);
        m.shave_busy = share(blob::EngineKind::Shave);

        // Real-valued random inputs, in the sections' sizes (their layout does not change the
        // time a functional run takes).
        std::vector<std::vector<uint8_t>> inputs;
        const auto *io = blob::GetBlob(blob.data())->header()->inputs();
        for (size_t i = 0; io && i < io->size(); ++i) {
            std::vector<uint8_t> bytes(io->Get(uint32_t(i))->bytes());
            if (i < graph.inputs().size()) {
                const Halide::Buffer<> b =
                    codegen::random_buffer(graph.inputs()[i].output(), uint32_t(i + 1));
                const auto *p = static_cast<const uint8_t *>(b.raw_buffer()->host);
                std::copy(p, p + std::min(bytes.size(), b.size_in_bytes()), bytes.begin());
            }
            inputs.push_back(std::move(bytes));
        }
        start = std::chrono::steady_clock::now();
        simulator.run(inputs, sim::Mode::Functional);
        m.simulate_functional_ms = ms_since(start);
    } catch (const std::exception &e) {
        m.error = e.what();
    }
    return m;
}

} // namespace vpuc::bench
