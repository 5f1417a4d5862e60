// Pass compile_shave_kernels: each SHAVE layer's algorithm, with the schedule's loops inside a
// task, compiled by Halide into a kernel object for the blob.
#include <algorithm>
#include <cctype>
#include <functional>
#include <set>
#include <string>
#include <vector>

#include "codegen/shave_kernel.h"
#include "passes.h"
#include "vpu_target/parallel.h"
#include "vpu_target/timing_model.h"

namespace vpuc::codegen {

namespace {

// The schedule's loops inside a task, on the kernel's output Func. A kernel computes one task's
// region (a SHAVE's crop of it). Every split makes its outer loop a task loop, and distribute
// keeps the remainder's kind, so inside a task each of c, x and y has one loop left: its
// innermost descendant, whatever its name, over the task's range of that dimension, which is
// the kernel's own loop over it. Fusing two of them makes one loop inside the task, fused the
// same way in Halide (fused = outer * extent(inner) + inner). A schedule that vectorizes,
// unrolls, fuses or reorders loops inside the task orders the kernel's loops as it orders
// them; otherwise the kernel keeps compile_shave_kernel's default schedule. Scheduling the output
// replaces that default, whose vectorization would then be lost: unless the schedule vectorizes
// a loop itself, the innermost loop inside the task is vectorized as the default vectorizes c,
// by a full vector of the output type (or the loop's extent, if smaller), before unrolling,
// which then unrolls the loop over vectors.
void apply_shave_schedule(const LayerPlan &plan, Halide::Func &out, int vector_bits) {
    const LoopNest &nest = plan.nest;
    std::vector<const Loop *> inside; // innermost first
    bool schedules_kernel = false, vectorizes = false;
    for (const Loop &loop : nest.loops) {
        if (loop.task_loop) continue;
        inside.push_back(&loop);
        schedules_kernel = schedules_kernel || loop.unrolled || loop.vector_width > 0 ||
                           nest.vars.at(size_t(loop.var)).dim < 0;
        vectorizes = vectorizes || loop.vector_width > 0;
    }
    // Loops inside the task out of Halide's order (c, x, y, innermost first): a reorder.
    for (size_t i = 1; i < inside.size(); ++i)
        schedules_kernel = schedules_kernel || nest.vars.at(size_t(inside[i]->var)).dim <
                                                   nest.vars.at(size_t(inside[i - 1]->var)).dim;
    if (!schedules_kernel) return;
    int element_bits = 8;
    for (const Halide::Type &t : out.output_types())
        element_bits = std::max(element_bits, t.bits());
    const int64_t default_lanes = vector_bits / element_bits;

    using Kind = dsl::Directive::Kind;
    // The directive that made or marked loop `name`, for errors.
    auto directive = [&](const std::string &name, std::initializer_list<Kind> kinds) {
        for (const dsl::Directive &d : plan.layer.schedule().directives())
            if (std::find(kinds.begin(), kinds.end(), d.kind) != kinds.end() &&
                d.loops.at(d.kind == Kind::Fuse ? 2 : 0) == name)
                return d.to_string();
        return "loop '" + name + "'";
    };
    std::string doing; // the directive being applied
    auto error = [&](const std::string &why) {
        std::string legal;
        for (const Loop *loop : inside) legal += (legal.empty() ? "" : ", ") + loop->name;
        return LoweringError("layer '" + plan.layer.name() + "': " + doing + ": " + why +
                             " (loops inside a task, which SHAVE kernels vectorize, unroll and "
                             "fuse: " +
                             legal + ")");
    };
    const auto &v = dsl::act_vars();
    const Halide::Var pure[3] = {v.c, v.x, v.y};
    // The Halide variable of a loop variable (an index into nest.vars) inside the kernel.
    std::function<Halide::Var(int)> kernel_var = [&](int var) {
        const LoopVar &lv = nest.vars.at(size_t(var));
        if (lv.dim >= 0 && lv.dim < 3) return pure[lv.dim];
        for (const LoopRelation &rel : nest.relations)
            if (rel.kind == LoopRelation::Kind::Fuse && rel.whole == var) {
                const Halide::Var inner = kernel_var(rel.inner), outer = kernel_var(rel.outer);
                const Halide::Var fused(Halide::Internal::unique_name(lv.name));
                doing = directive(lv.name, {Kind::Fuse});
                out.fuse(inner, outer, fused);
                return fused;
            }
        throw error("'" + lv.name + "' does not come from c, x or y by split, distribute or fuse");
    };

    // Halide unrolls loops of constant extent. A kernel's extents are known at run time only,
    // but a loop inside a task has at most its extent in the nest: a short one (a split's inner
    // loop) is unrolled whole, a long one by 2; guards cover the smaller crops SHAVEs get.
    constexpr int64_t kMaxFullUnroll = 8;
    try {
        // Halide's own order is c, x, y innermost first; anything else comes from a reorder.
        std::vector<Halide::VarOrRVar> order;
        bool reordered = false;
        for (size_t i = 0; i < inside.size(); ++i) {
            order.emplace_back(kernel_var(inside[i]->var));
            const int dim = nest.vars.at(size_t(inside[i]->var)).dim;
            reordered = reordered || dim < 0 ||
                        (i > 0 && dim < nest.vars.at(size_t(inside[i - 1]->var)).dim);
        }
        if (reordered) {
            doing = "the order of the loops inside a task";
            for (const dsl::Directive &d : plan.layer.schedule().directives())
                if (d.kind == Kind::Reorder) doing = d.to_string();
            out.reorder(order);
        }
        for (size_t i = 0; i < inside.size(); ++i) {
            const Loop &loop = *inside[i];
            const Halide::Var var = order[i].var;
            int64_t width = loop.vector_width;
            if (!vectorizes && i == 0) {
                // Halide 14 splits a predicated vector (under an unrolled loop's guard) into
                // native pieces of 4 lanes or more, and a one-lane piece left over (13 lanes:
                // 4 + 4 + 4 + 1) is a masked load LLVM refuses: such widths lose a lane.
                width = std::min(default_lanes, loop.extent);
                if (width > 4 && width % 4 == 1) --width;
                doing = "the default vectorization of loop '" + loop.name + "' by " +
                        std::to_string(width);
            } else if (width > 0) {
                doing = directive(loop.name, {Kind::Vectorize});
            }
            int64_t iterations = loop.extent;
            if (width > 1) {
                out.vectorize(var, int(width), Halide::TailStrategy::GuardWithIf);
                iterations = (loop.extent + width - 1) / width;
            }
            // After vectorize, `var` is the loop over vectors.
            const int64_t unroll = iterations <= kMaxFullUnroll ? iterations : 2;
            if (loop.unrolled && unroll > 1) {
                doing = directive(loop.name, {Kind::Unroll});
                out.unroll(var, int(unroll), Halide::TailStrategy::GuardWithIf);
            }
        }
    } catch (const Halide::Error &e) {
        throw error(std::string("Halide: ") + e.what());
    }
}

// The layer's output as a kernel's output named "out" (a Tuple's buffers "out.0", "out.1"...)
// whatever the layer and its Func are called: Halide orders the code it emits by buffer names,
// so a kernel named after its layer would differ from another layer's identical one, and the
// two could not share a compiled kernel (compile_shave_kernel's cache). The wrapper inlines the
// layer's Func, so the code is the same. A Func with updates or a schedule of its own cannot be
// inlined, and a Func called "out" already would clash: those stay as they are.
Halide::Func named_out(const Halide::Func &layer_out) {
    const std::string name = "out";
    const Halide::Internal::Function &f = layer_out.function();
    if (f.has_update_definition() || f.definition().schedule().touched() || f.name() == name)
        return layer_out;
    for (const auto &called : Halide::Internal::find_transitive_calls(f))
        if (called.first == name) return layer_out;
    Halide::Func out(name);
    const std::vector<Halide::Var> vars = layer_out.args();
    if (layer_out.outputs() == 1) {
        out(vars) = layer_out(vars);
    } else {
        std::vector<Halide::Expr> values;
        for (int i = 0; i < layer_out.outputs(); ++i) values.push_back(layer_out(vars)[i]);
        out(vars) = Halide::Tuple(values);
    }
    return out;
}

// The SHAVE cycles of the prepared kernel's counted output on one SHAVE, launch included.
double one_shave_cycles(const target::Target &target, const PreparedShaveKernel &prepared) {
    const ShaveKernelCost cost = prepared_cost(prepared);
    target::ShaveWork work;
    work.output_elements = 1;
    for (int64_t e : prepared.counted_extents) work.output_elements *= double(e);
    work.vector_lanes = prepared.kernel.vector_lanes;
    work.arith_ops_per_vector = cost.arith_ops;
    work.special_ops_per_vector = cost.special_ops;
    work.cmx_bytes_per_vector = cost.cmx_bytes;
    return target::shave_task_cycles(target, work);
}

} // namespace

// The kernels compile on every core: each SHAVE layer's kernel is prepared (scheduled, lowered,
// its cache key computed) on its own, an output of a short innermost extent both ways
// (OutputVectorization) and the cheaper kept; then the first layer of each key generates its
// object, and the others of that key take it from the cache, as if compiled one after another, so
// the blob does not depend on which thread finished first.
void compile_shave_kernels(LoweringState &s) {
    std::vector<LayerPlan *> shave_plans;
    for (auto &plan : s.plans)
        if (plan.on_shave) shave_plans.push_back(&plan);
    const size_t first_kernel = s.program.kernels.size();
    std::vector<PreparedShaveKernel> prepared(shave_plans.size());
    run_in_parallel(shave_plans.size(), [&](size_t k) {
        const LayerPlan &plan = *shave_plans[k];
        std::vector<Halide::Func> inputs;
        std::vector<Halide::Argument> args;
        for (size_t i = 0; i < plan.layer.inputs().size(); ++i) {
            Halide::ImageParam p(dsl::halide_type(dsl::input_tensor(plan.layer, i).type), 3,
                                 "in" + std::to_string(i));
            inputs.emplace_back(p);
            args.emplace_back(p);
        }
        std::string name = "k" + std::to_string(first_kernel + k) + "_";
        for (char c : plan.layer.name())
            name += std::isalnum(static_cast<unsigned char>(c)) ? c : '_';
        auto scheduled_output = [&] {
            Halide::Func out = named_out(plan.layer.algorithm()(inputs));
            apply_shave_schedule(plan, out, s.target.shave_vector_bits);
            return out;
        };
        // The op count for one SHAVE's share of the first task: splits and distribute make the
        // first task the largest. Stages like a softmax's reductions cost the same whatever the
        // share, so the count per output vector depends on it.
        const std::vector<Task> tasks = plan.nest.tasks();
        std::vector<int64_t> cost_extents;
        if (!tasks.empty()) {
            for (const Interval &dim : tasks.front().region.dims)
                cost_extents.push_back(dim.extent());
            cost_extents = shave_share(cost_extents, s.target.shaves_available(tasks.front().tile));
        }
        try {
            prepared[k] = prepare_shave_kernel(name, scheduled_output(), args,
                                               s.target.shave_vector_bits, cost_extents);
            if (prepared[k].may_vectorize_along_second) {
                PreparedShaveKernel other =
                    prepare_shave_kernel(name, scheduled_output(), args, s.target.shave_vector_bits,
                                         cost_extents, OutputVectorization::AlongSecond);
                if (one_shave_cycles(s.target, other) < one_shave_cycles(s.target, prepared[k]))
                    prepared[k] = std::move(other);
            }
        } catch (const ShaveKernelError &e) {
            throw LoweringError("layer '" + plan.layer.name() + "': " + e.what());
        }
    });
    // The first kernel of each key, in layer order, then the rest.
    std::set<std::string> keys;
    std::vector<size_t> firsts, others;
    for (size_t k = 0; k < prepared.size(); ++k)
        (keys.insert(prepared[k].key).second ? firsts : others).push_back(k);
    std::vector<ShaveKernelBinary> kernels(prepared.size());
    auto finish = [&](size_t k) {
        try {
            kernels[k] = finish_shave_kernel(std::move(prepared[k]));
        } catch (const ShaveKernelError &e) {
            throw LoweringError("layer '" + shave_plans[k]->layer.name() + "': " + e.what());
        }
    };
    run_in_parallel(firsts.size(), [&](size_t i) { finish(firsts[i]); });
    for (size_t k : others) finish(k);
    for (size_t k = 0; k < kernels.size(); ++k) {
        shave_plans[k]->kernel = uint32_t(s.program.kernels.size());
        s.program.kernels.push_back(*to_blob_kernel(kernels[k]));
    }
}

} // namespace vpuc::codegen
