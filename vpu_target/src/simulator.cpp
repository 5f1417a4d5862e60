// The discrete-event core of the simulator: queues, barriers, engines and DDR sharing.
#include "vpu_target/simulator.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <functional>
#include <limits>

#include "sim_memory.h"
#include "sim_shave.h"
#include "vpu_target/timing_model.h"
#include "vpu_target/verifier.h"

namespace vpuc::sim {

using blob::Blob;
using blob::BlobError;
using blob::EngineKind;
using blob::MemSpace;
using blob::Task;
using blob::TaskKind;

namespace {

bool in_ddr(MemSpace space) {
    return space != MemSpace::Cmx;
}

target::DmaDirection direction_of(const blob::DmaTask &dma) {
    bool src_ddr = in_ddr(dma.src()->space());
    bool dst_ddr = in_ddr(dma.dst()->Get(0)->space());
    if (src_ddr && dst_ddr) return target::DmaDirection::DdrToDdr;
    if (src_ddr) return target::DmaDirection::DdrToCmx;
    if (dst_ddr) return target::DmaDirection::CmxToDdr;
    return target::DmaDirection::CmxToCmx;
}

// Lines follow each other without gaps when each stride equals the bytes of one step inside.
bool contiguous(const blob::DmaTask &dma, bool source) {
    if (!dma.dims()) return true;
    int64_t inner = dma.line_bytes();
    for (uint32_t i = dma.dims()->size(); i-- > 0;) {
        const auto *d = dma.dims()->Get(i);
        int64_t stride = source ? d->src_stride() : d->dst_stride();
        if (d->count() > 1 && stride != inner) return false;
        inner *= d->count();
    }
    return true;
}

target::DmaTransfer transfer_of(const blob::DmaTask &dma) {
    target::DmaTransfer t;
    t.direction = direction_of(dma);
    t.line_bytes = dma.line_bytes();
    t.lines = 1;
    if (dma.dims())
        for (const auto *d : *dma.dims()) t.lines *= d->count();
    t.src_contiguous = contiguous(dma, true);
    t.dst_contiguous = contiguous(dma, false);
    return t;
}

// DPU cycles of a task: its variants run one after another on the DPU.
double dpu_task_cycles(const target::Target &target, const blob::DpuTask &dpu) {
    const auto *in = dpu.input()->dims();
    double cycles = 0;
    for (const auto *v : *dpu.variants()) {
        target::DpuWorkload w;
        w.op = dpu.op();
        w.input_dtype = dpu.input()->dtype();
        w.output_dtype = dpu.output()->dtype();
        w.out_w = int(v->end()->Get(0) - v->start()->Get(0));
        w.out_h = int(v->end()->Get(1) - v->start()->Get(1));
        w.out_c = int(v->end()->Get(2) - v->start()->Get(2));
        w.kernel_w = dpu.kernel_w();
        w.kernel_h = dpu.kernel_h();
        w.stride_w = dpu.stride_w();
        w.stride_h = dpu.stride_h();
        // The input region this variant reads (padding lies outside it).
        w.in_w = std::min<int>(int(in->Get(1)->extent()), (w.out_w - 1) * w.stride_w + w.kernel_w);
        w.in_h = std::min<int>(int(in->Get(2)->extent()), (w.out_h - 1) * w.stride_h + w.kernel_h);
        bool per_channel = dpu.op() != blob::DpuOp::Conv && dpu.op() != blob::DpuOp::MatMul;
        w.in_c = per_channel ? w.out_c : int(in->Get(0)->extent());
        w.pad_left = dpu.pad_left();
        w.pad_right = dpu.pad_right();
        w.pad_top = dpu.pad_top();
        w.pad_bottom = dpu.pad_bottom();
        w.mpe_mode = v->mpe_mode()->str();
        w.activation = dpu.ppe() && dpu.ppe()->activation() != blob::Activation::None;
        cycles += target::dpu_workload_cycles(target, w);
    }
    return cycles;
}

std::string engine_name(const blob::TaskQueue &q, const target::Target &target) {
    switch (q.engine()) {
    case EngineKind::Dma:
        return "DMA " + std::to_string(q.index());
    case EngineKind::Dpu:
        return target.dpus_per_tile > 1
                   ? "DPU tile " + std::to_string(q.tile()) + "." + std::to_string(q.index())
                   : "DPU tile " + std::to_string(q.tile());
    case EngineKind::Shave:
        return "SHAVE tile " + std::to_string(q.tile());
    }
    return "?";
}

// A DMA moves its bytes in two phases: fixed latency, then data at a shared rate.
struct DmaProgress {
    double latency_end_ns = 0;
    double remaining_bytes = 0;
    double max_rate = 0; // bytes per ns (= GB/s)
    bool uses_ddr = true;
    double rate = 0; // current rate, set each step
};

struct Running {
    size_t queue = 0;
    uint32_t position = 0; // in its queue
    const Task *task = nullptr;
    double start_ns = 0;
    double end_ns = 0; // fixed end for DPU/SHAVE; DMAs end when their bytes are moved
    bool is_dma = false;
    DmaProgress dma;
    bool kernel_submitted = false; // a SHAVE task's kernel, running in the sandbox
    uint64_t kernel_ticket = 0;
};

struct BarrierState {
    uint32_t producers_left = 0;
    uint32_t consumers_left = 0;
    bool released = false;
};

} // namespace

struct Simulator::Impl {
    std::vector<uint8_t> bytes;
    const Blob *blob = nullptr;
    SandboxOptions sandbox;
    std::unique_ptr<KernelImages> kernels; // laid out at the first functional run
    Checks checks = Checks::All;
};

Simulator::Simulator(target::Target target, std::vector<uint8_t> blob_bytes, Checks checks)
    : target_(std::move(target)), impl_(std::make_unique<Impl>()) {
    impl_->bytes = std::move(blob_bytes);
    impl_->checks = checks;
    impl_->blob = checks == Checks::All ? &blob::verify(impl_->bytes, target_)
                                        : &blob::verify_for_timing(impl_->bytes, target_);
}

Simulator::~Simulator() = default;

const Blob &Simulator::blob() const {
    return *impl_->blob;
}

namespace {

// The SHAVE sandbox of a functional run.
using SandboxSource = std::function<ShaveSandbox &()>;

// One run: the event loop over queues and barriers.
class Run {
  public:
    Run(const target::Target &target, const Blob &blob, Memory *memory, SandboxSource sandbox)
        : target_(target), blob_(blob), memory_(memory), sandbox_(std::move(sandbox)) {
        const auto *queues = blob.queues();
        size_t n = queues ? queues->size() : 0;
        next_.assign(n, 0);
        busy_.assign(n, false);
        for (size_t q = 0; q < n; ++q) {
            const blob::TaskQueue &queue = *queues->Get(uint32_t(q));
            result_.engines.push_back({engine_name(queue, target), queue.engine(), 0, 0});
        }
        const auto *barriers = blob.barriers();
        size_t nb = barriers ? barriers->size() : 0;
        barriers_.resize(nb);
        phys_order_.resize(size_t(target.barriers));
        for (uint32_t b = 0; b < nb; ++b) {
            const auto *bar = barriers->Get(b);
            barriers_[b] = {bar->producer_count(), bar->consumer_count(), false};
            phys_order_[bar->physical_id()].push_back(b);
        }
        phys_cursor_.assign(phys_order_.size(), 0);
        for (size_t q = 0; q < n; ++q) task_count_ += queues->Get(uint32_t(q))->tasks()->size();
    }

    RunResult run() {
        const auto *queues = blob_.queues();
        const size_t n = queues ? queues->size() : 0;
        // Each event finishes a task or ends a DMA's latency phase, so a run takes at most
        // two events per task; the limit is the last guard of that promise.
        const uint64_t event_limit = 2 * task_count_ + 16;
        for (uint64_t events = 0;; ++events) {
            start_ready_tasks(n);
            if (running_.empty()) {
                check_finished(n);
                break;
            }
            if (events == event_limit)
                throw BlobError("simulator: no progress after " + std::to_string(events) +
                                " events for " + std::to_string(task_count_) +
                                " tasks (an internal error)");
            advance_to_next_event();
        }
        result_.latency_ns = now_;
        result_.latency_dpu_cycles = now_ * target_.dpu_clock_mhz / 1000.0;
        std::stable_sort(
            result_.tasks.begin(), result_.tasks.end(),
            [](const TaskRecord &a, const TaskRecord &b) { return a.start_ns < b.start_ns; });
        return std::move(result_);
    }

  private:
    uint32_t active_virtual(uint32_t barrier) const {
        uint16_t p = blob_.barriers()->Get(barrier)->physical_id();
        const auto &order = phys_order_[p];
        return phys_cursor_[p] < order.size() ? order[phys_cursor_[p]] : UINT32_MAX;
    }

    bool can_start(const Task &task) const {
        if (!task.wait_barriers()) return true;
        for (uint32_t b : *task.wait_barriers())
            if (active_virtual(b) != b || !barriers_[b].released) return false;
        return true;
    }

    // A physical barrier moves on to its next virtual barrier once released and consumed.
    void maybe_free(uint32_t b) {
        const BarrierState &s = barriers_[b];
        if (!s.released || s.consumers_left > 0) return;
        uint16_t p = blob_.barriers()->Get(b)->physical_id();
        if (active_virtual(b) == b) ++phys_cursor_[p];
    }

    void start_ready_tasks(size_t n) {
        bool started = true;
        while (started) {
            started = false;
            for (size_t q = 0; q < n; ++q) {
                const auto *queue = blob_.queues()->Get(uint32_t(q));
                if (busy_[q] || next_[q] >= queue->tasks()->size()) continue;
                const Task *task = queue->tasks()->Get(uint32_t(next_[q]));
                if (!can_start(*task)) continue;
                start(q, *task);
                started = true;
            }
        }
    }

    void start(size_t q, const Task &task) {
        busy_[q] = true;
        ++next_[q];
        if (task.wait_barriers())
            for (uint32_t b : *task.wait_barriers()) {
                --barriers_[b].consumers_left;
                maybe_free(b);
            }
        Running r;
        r.queue = q;
        r.position = uint32_t(next_[q] - 1);
        r.task = &task;
        r.start_ns = now_;
        switch (task.kind_type()) {
        case TaskKind::DmaTask: {
            const auto *dma = task.kind_as_DmaTask();
            target::DmaCost cost = target::dma_transfer_cost(target_, transfer_of(*dma));
            r.is_dma = true;
            r.dma.latency_end_ns = now_ + cost.latency_ns;
            r.dma.remaining_bytes = cost.bus_bytes;
            r.dma.max_rate = cost.max_bandwidth_gbps;
            r.dma.uses_ddr = cost.uses_ddr;
            if (memory_) run_dma(*dma, *memory_);
            break;
        }
        case TaskKind::DpuTask: {
            const auto *dpu = task.kind_as_DpuTask();
            r.end_ns = now_ + dpu_task_cycles(target_, *dpu) * 1000.0 / target_.dpu_clock_mhz;
            if (memory_) {
                const auto start = std::chrono::steady_clock::now();
                run_dpu(*dpu, *memory_, task.name()->str());
                result_.dpu_emulation_ns += std::chrono::duration<double, std::nano>(
                                                std::chrono::steady_clock::now() - start)
                                                .count();
            }
            break;
        }
        case TaskKind::ShaveTask: {
            const auto *shave = task.kind_as_ShaveTask();
            const auto *kernel = blob_.kernels()->Get(shave->kernel());
            r.end_ns = now_ + shave_task_ns(*shave, *kernel);
            // The kernel runs in the worker while the loop goes on: no task that touches its
            // memory can start before this one finishes (a verified blob has no races).
            if (memory_) {
                r.kernel_ticket =
                    submit_shave(*shave, *kernel, sandbox_(), *memory_, task.name()->str());
                r.kernel_submitted = true;
            }
            break;
        }
        default:
            throw BlobError("task '" + task.name()->str() + "': unknown task kind");
        }
        running_.push_back(r);
    }

    double shave_task_ns(const blob::ShaveTask &task, const blob::Kernel &kernel) const {
        target::ShaveWork work;
        work.output_elements = double(shave_output_elements(task, kernel));
        work.shaves = task.shaves();
        work.vector_lanes = kernel.vector_lanes();
        work.arith_ops_per_vector = kernel.arith_ops_per_vector();
        work.special_ops_per_vector = kernel.special_ops_per_vector();
        work.cmx_bytes_per_vector = kernel.cmx_bytes_per_vector();
        return target::shave_task_cycles(target_, work) * 1000.0 / target_.shave_clock_mhz;
    }

    // Water-filling: DDR bandwidth split evenly among transfers in their data phase, each
    // capped by its own engine's rate; what a capped transfer leaves goes to the others.
    void assign_dma_rates() {
        std::vector<Running *> ddr;
        for (auto &r : running_) {
            if (!r.is_dma) continue;
            bool moving = r.dma.latency_end_ns <= now_;
            r.dma.rate = moving ? r.dma.max_rate : 0;
            if (moving && r.dma.uses_ddr) ddr.push_back(&r);
        }
        std::sort(ddr.begin(), ddr.end(), [](const Running *a, const Running *b) {
            return a->dma.max_rate < b->dma.max_rate;
        });
        double left = target_.ddr_bandwidth_gbps;
        for (size_t i = 0; i < ddr.size(); ++i) {
            double share = left / double(ddr.size() - i);
            ddr[i]->dma.rate = std::min(ddr[i]->dma.max_rate, share);
            left -= ddr[i]->dma.rate;
        }
    }

    // When a running task next changes: its end, or for a DMA the end of its latency phase or
    // of its data at the current rate (water-filling gives every moving DMA a rate above 0).
    double event_time(const Running &r) const {
        if (!r.is_dma) return r.end_ns;
        if (r.dma.latency_end_ns > now_) return r.dma.latency_end_ns;
        if (r.dma.remaining_bytes <= 0) return now_;
        return now_ + r.dma.remaining_bytes / r.dma.rate;
    }

    // Moves time to the earliest event. The tasks whose event it is finish, exactly, whatever
    // the rounding of the byte arithmetic, and a DMA whose latency phase it ends starts moving.
    void advance_to_next_event() {
        assign_dma_rates();
        std::vector<double> at(running_.size());
        double next = std::numeric_limits<double>::infinity();
        for (size_t i = 0; i < running_.size(); ++i)
            next = std::min(next, at[i] = event_time(running_[i]));
        if (!(next >= now_) || !std::isfinite(next))
            throw BlobError("simulator: the next event is at " + std::to_string(next) +
                            " ns, now is " + std::to_string(now_) + " ns (an internal error)");
        const double dt = next - now_;
        std::vector<Running> still;
        std::vector<Running> done;
        for (size_t i = 0; i < running_.size(); ++i) {
            Running &r = running_[i];
            const bool moving = r.is_dma && r.dma.latency_end_ns <= now_;
            if (moving)
                r.dma.remaining_bytes =
                    at[i] == next ? 0 : std::max(0.0, r.dma.remaining_bytes - r.dma.rate * dt);
            const bool finished = at[i] == next && (!r.is_dma || r.dma.remaining_bytes <= 0);
            (finished ? done : still).push_back(r);
        }
        now_ = next;
        running_ = std::move(still);
        for (const auto &r : done) finish(r);
    }

    void finish(const Running &r) {
        if (r.kernel_submitted) sandbox_().finish(r.kernel_ticket);
        busy_[r.queue] = false;
        const Task &task = *r.task;
        EngineStats &stats = result_.engines[r.queue];
        stats.busy_ns += now_ - r.start_ns;
        ++stats.tasks;
        result_.tasks.push_back({task.name()->str(), task.layer() ? task.layer()->str() : "",
                                 stats.engine, stats.kind, r.start_ns, now_, uint32_t(r.queue),
                                 r.position});
        if (!task.update_barriers()) return;
        for (uint32_t b : *task.update_barriers()) {
            if (active_virtual(b) != b)
                throw BlobError("task '" + task.name()->str() + "' updates barrier " +
                                std::to_string(b) + " while its physical barrier " +
                                std::to_string(blob_.barriers()->Get(b)->physical_id()) +
                                " still holds barrier " + std::to_string(active_virtual(b)));
            if (--barriers_[b].producers_left == 0) {
                barriers_[b].released = true;
                maybe_free(b);
            }
        }
    }

    void check_finished(size_t n) const {
        std::string stuck;
        for (size_t q = 0; q < n; ++q) {
            const auto *queue = blob_.queues()->Get(uint32_t(q));
            if (next_[q] >= queue->tasks()->size()) continue;
            const Task *task = queue->tasks()->Get(uint32_t(next_[q]));
            stuck += "\n  " + blob::describe_queue(*queue) + ": task '" + task->name()->str() +
                     "' waits on barriers";
            if (task->wait_barriers())
                for (uint32_t b : *task->wait_barriers())
                    if (active_virtual(b) != b || !barriers_[b].released)
                        stuck += " " + std::to_string(b);
        }
        if (!stuck.empty()) throw BlobError("deadlock: no task can run" + stuck);
    }

    const target::Target &target_;
    const Blob &blob_;
    Memory *memory_;
    SandboxSource sandbox_;
    uint64_t task_count_ = 0;
    double now_ = 0;
    std::vector<size_t> next_;
    std::vector<bool> busy_;
    std::vector<Running> running_;
    std::vector<BarrierState> barriers_;
    std::vector<std::vector<uint32_t>> phys_order_;
    std::vector<size_t> phys_cursor_;
    RunResult result_;
};

bool has_shave_tasks(const Blob &blob) {
    if (!blob.queues()) return false;
    for (const auto *queue : *blob.queues())
        if (queue->engine() == EngineKind::Shave && queue->tasks()->size() > 0) return true;
    return false;
}

} // namespace

void Simulator::set_sandbox_options(const SandboxOptions &options) {
    impl_->sandbox = options;
}

RunResult Simulator::run(const std::vector<std::vector<uint8_t>> &inputs, Mode mode) {
    if (mode == Mode::TimingOnly) return Run(target_, *impl_->blob, nullptr, nullptr).run();
    if (impl_->checks != Checks::All)
        throw blob::BlobError("a functional run of a blob verified for timing only (its data "
                              "races and weight tables are unchecked)");
    Memory memory(*impl_->blob, target_);
    // Started before the memory is loaded, so that the worker starts and loads the kernels
    // while the simulator writes the inputs and fills CMX, then runs the first tasks.
    std::unique_ptr<ShaveSandbox> sandbox;
    if (has_shave_tasks(*impl_->blob)) {
        if (!impl_->kernels)
            impl_->kernels = std::make_unique<KernelImages>(KernelImages::of(*impl_->blob));
        sandbox = std::make_unique<ShaveSandbox>(*impl_->kernels, memory.shared(), impl_->sandbox);
    }
    memory.load(*impl_->blob, inputs);
    auto start_sandbox = [&]() -> ShaveSandbox & { return *sandbox; };
    RunResult result = Run(target_, *impl_->blob, &memory, start_sandbox).run();
    result.outputs = memory.outputs();
    if (sandbox) {
        const auto end = std::chrono::steady_clock::now();
        result.sandbox = sandbox->stats();
        sandbox.reset(); // ending the worker is part of the sandbox's cost
        result.sandbox.blocked_ns +=
            std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - end)
                .count();
    }
    return result;
}

} // namespace vpuc::sim
