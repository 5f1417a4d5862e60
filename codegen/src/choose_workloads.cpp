// Pass choose_workloads: every DPU task's output is cut into variants (the schedule's
// workloads) and given an MPE mode: the schedule's, or the one the DPU cost model finds
// fastest for those variants.
#include <algorithm>
#include <array>

#include "dpu_layout.h"
#include "vpu_target/timing_model.h"

namespace vpuc::codegen {

namespace {

using Box = std::array<Interval, 3>; // c, x, y, from the task output's first element

// Variants: the task's output (`extents`: c, w, h, channels in whole groups) split along the
// workload loop's dimension; channels in whole groups.
std::vector<Box> workloads(const LoopNest &nest, const target::Target &target,
                           const std::array<int64_t, 3> &extents) {
    int dim = 2;
    int64_t count = nest.workloads;
    if (const Loop *l = nest.find(nest.workload_loop))
        dim = std::max(0, nest.vars[size_t(l->var)].dim);
    const int64_t unit = dim == 0 ? target.channel_alignment : 1;
    const int64_t units = extents[size_t(dim)] / unit;
    count = std::clamp<int64_t>(count, 1, units);
    std::vector<Box> out;
    for (int64_t i = 0; i < count; ++i) {
        Box local = {Interval{0, extents[0]}, Interval{0, extents[1]}, Interval{0, extents[2]}};
        local[size_t(dim)] = {units * i / count * unit, units * (i + 1) / count * unit};
        out.push_back(local);
    }
    return out;
}

std::string mpe_mode(const LayerPlan &plan, const target::Target &target,
                     const std::vector<Box> &variants, const blob::DpuTaskT &t, int in_channels) {
    if (!plan.nest.mpe_mode.empty()) return plan.nest.mpe_mode;
    // The compiler's choice: the mode with the fewest cycles for these workloads.
    const DpuOpDesc &d = plan.dpu;
    const bool fp = d.input_type.is_float();
    std::string best;
    double best_cycles = 0;
    for (const auto &mode : target.mpe_modes) {
        if (!(fp ? mode.fp16 : mode.int8)) continue;
        double cycles = 0;
        for (const auto &v : variants) {
            target::DpuWorkload w;
            w.op = d.op;
            w.input_dtype = fp ? target::DType::F16 : target::DType::I8;
            w.output_dtype = w.input_dtype;
            w.out_c = int(v[0].extent());
            w.out_w = int(v[1].extent());
            w.out_h = int(v[2].extent());
            w.in_c = sums_channels(d) ? in_channels : w.out_c;
            w.in_w = (w.out_w - 1) * t.stride_w + t.kernel_w;
            w.in_h = (w.out_h - 1) * t.stride_h + t.kernel_h;
            w.kernel_w = t.kernel_w;
            w.kernel_h = t.kernel_h;
            w.stride_w = t.stride_w;
            w.stride_h = t.stride_h;
            w.mpe_mode = mode.name;
            w.activation = t.ppe && t.ppe->activation != blob::Activation::None;
            cycles += target::dpu_workload_cycles(target, w);
        }
        if (best.empty() || cycles < best_cycles) best = mode.name, best_cycles = cycles;
    }
    if (best.empty())
        throw LoweringError("layer '" + plan.layer.name() +
                            "': the target has no MPE mode for this input type");
    return best;
}

} // namespace

void choose_workloads(LoweringState &s) {
    for (TaskIR &task : s.program.tasks) {
        auto *dpu = std::get_if<DpuWork>(&task.work);
        if (!dpu) continue;
        const LayerPlan &plan = s.plan_of(task.layer);
        const View &out = dpu->output;
        const auto variants =
            workloads(plan.nest, s.target,
                      {int64_t(out.dims[0].extent()), int64_t(out.dims[1].extent()),
                       int64_t(out.dims[2].extent())});
        blob::DpuTaskT &t = dpu->invariant;
        const std::string mode =
            mpe_mode(plan, s.target, variants, t, int(dpu->input.dims[0].extent()));
        t.variants.clear();
        for (const auto &v : variants)
            t.variants.push_back(std::make_unique<blob::DpuVariantT>(
                blob::variant({uint32_t(v[1].begin), uint32_t(v[2].begin), uint32_t(v[0].begin)},
                              {uint32_t(v[1].end), uint32_t(v[2].end), uint32_t(v[0].end)}, mode)));
    }
}

// Every DPU task's variants are boxes inside its output that cover it exactly, channels in
// whole groups, each with an MPE mode of the target for the task's input type.
void verify_workloads(const LoweringState &s) {
    for (const TaskIR &task : s.program.tasks) {
        const auto *dpu = std::get_if<DpuWork>(&task.work);
        if (!dpu) continue;
        auto fail = [&](const std::string &what) {
            throw LoweringError("layer '" + task.layer + "': task '" + task.name + "': " + what);
        };
        const auto &variants = dpu->invariant.variants;
        if (variants.empty()) fail("no variants");
        // x, y, c, as variants list them.
        const uint64_t extent[3] = {dpu->output.dims[1].extent(), dpu->output.dims[2].extent(),
                                    dpu->output.dims[0].extent()};
        const bool fp = s.plan_of(task.layer).dpu.input_type.is_float();
        uint64_t volume = 0;
        for (size_t i = 0; i < variants.size(); ++i) {
            const blob::DpuVariantT &v = *variants[i];
            const std::string which = "variant " + std::to_string(i) + ": ";
            if (v.start.size() != 3 || v.end.size() != 3) fail(which + "not 3 dims");
            uint64_t size = 1;
            for (size_t d = 0; d < 3; ++d) {
                if (v.start[d] >= v.end[d] || v.end[d] > extent[d])
                    fail(which + "empty or outside the output");
                size *= v.end[d] - v.start[d];
            }
            if ((v.start[2] % uint32_t(s.target.channel_alignment) != 0) ||
                (v.end[2] % uint32_t(s.target.channel_alignment) != 0))
                fail(which + "channels not in whole groups");
            for (size_t j = 0; j < i; ++j) {
                const blob::DpuVariantT &o = *variants[j];
                bool overlap = true;
                for (size_t d = 0; d < 3; ++d)
                    overlap &= v.start[d] < o.end[d] && o.start[d] < v.end[d];
                if (overlap) fail(which + "overlaps variant " + std::to_string(j));
            }
            const auto mode = std::find_if(s.target.mpe_modes.begin(), s.target.mpe_modes.end(),
                                           [&](const auto &m) { return m.name == v.mpe_mode; });
            if (mode == s.target.mpe_modes.end() || !(fp ? mode->fp16 : mode->int8))
                fail(which + "MPE mode '" + v.mpe_mode + "' is not one of the target's for " +
                     (fp ? "fp16" : "int8"));
            volume += size;
        }
        if (volume != extent[0] * extent[1] * extent[2]) fail("variants do not cover the output");
    }
}

} // namespace vpuc::codegen
