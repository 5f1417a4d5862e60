// The lowering, as a straight list of atomic passes. Each pass is logged, timed
// (VPUC_PASS_TIMES=1 prints the times to stderr) and followed by a verifier of its output.
#include "codegen/lower.h"

#include <cctype>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <map>
#include <ostream>

#include "codegen/shave_kernel.h"
#include "passes.h"
#include "schedules/default_schedule.h"

namespace vpuc::codegen {

namespace {

struct Pass {
    std::string name;
    std::function<void(LoweringState &)> run;
    std::function<void(const LoweringState &)> verify;
};

const std::vector<Pass> &passes() {
    static const std::vector<Pass> list = {
        {"default_schedules", default_schedules, nullptr},
        {"resolve_schedules", resolve_schedules, nullptr},
        {"select_engines", select_engines, nullptr},
        {"compile_shave_kernels", compile_shave_kernels, nullptr},
        {"build_tasks", build_tasks, verify_tasks},
        {"allocate_cmx", allocate_cmx, verify_allocation},
        {"allocate_ddr", allocate_ddr, verify_allocation},
        {"assign_barriers", assign_barriers, verify_tasks},
        {"map_physical_barriers", map_physical_barriers, verify_barriers},
        {"assemble", assemble, verify_blob},
    };
    return list;
}

std::string dump(const LoweringState &s, const std::string &pass) {
    if (pass == "default_schedules") {
        std::string out;
        for (const auto &layer : s.graph.layers())
            out += layer.name() + ": " + layer.schedule().to_string() + "\n";
        return out;
    }
    if (pass == "resolve_schedules" || pass == "select_engines" ||
        pass == "compile_shave_kernels") {
        std::string out;
        for (const auto &plan : s.plans) {
            out += plan.layer.name() + ": " + plan.layer.schedule().to_string() + "\n";
            for (const auto &t : plan.nest.tasks())
                out += "  task tile " + std::to_string(t.tile) + " " + t.region.to_string() + "\n";
            if (pass != "resolve_schedules")
                out += plan.on_shave ? "  shave kernel " + std::to_string(plan.kernel) + "\n"
                                     : "  dpu: " + plan.dpu.to_string() + "\n";
        }
        return out;
    }
    if (pass == "assemble") return "blob: " + std::to_string(s.blob.size()) + " bytes\n";
    return print(s.program);
}

} // namespace

const std::vector<std::string> &pass_names() {
    static const std::vector<std::string> names = [] {
        std::vector<std::string> n;
        for (const auto &p : passes()) n.push_back(p.name);
        return n;
    }();
    return names;
}

std::vector<uint8_t> lower(const dsl::Graph &graph, const target::Target &target,
                           const LowerOptions &options) {
    const auto &names = pass_names();
    if (!options.dump_after.empty() &&
        std::find(names.begin(), names.end(), options.dump_after) == names.end()) {
        std::string known;
        for (const auto &n : names) known += (known.empty() ? "" : ", ") + n;
        throw LoweringError("--dump-after " + options.dump_after +
                            ": no such pass (passes: " + known + ")");
    }
    const bool print_times = std::getenv("VPUC_PASS_TIMES") != nullptr;
    LoweringState state{graph, target, {}, {}, {}, {}, {}};
    for (const auto &pass : passes()) {
        auto start = std::chrono::steady_clock::now();
        pass.run(state);
        if (pass.verify) pass.verify(state);
        double ms =
            std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
                .count();
        if (options.log) *options.log << "pass " << pass.name << " done\n";
        if (print_times) std::fprintf(stderr, "vpuc pass %-24s %9.3f ms\n", pass.name.c_str(), ms);
        if (options.dump_after == pass.name && options.log)
            *options.log << "IR after " << pass.name << ":\n" << dump(state, pass.name);
    }
    return std::move(state.blob);
}

void default_schedules(LoweringState &s) {
    schedules::apply_default_schedules(s.graph, s.target);
}

void resolve_schedules(LoweringState &s) {
    for (const auto &layer : s.graph.layers())
        s.plans.push_back({layer, resolve_loop_nest(s.graph, layer, s.target), false, {}, 0});
}

void select_engines(LoweringState &s) {
    for (auto &plan : s.plans) {
        switch (plan.nest.engine) {
        case dsl::Engine::DPU:
            plan.dpu = match_dpu(plan.layer);
            break;
        case dsl::Engine::SHAVE:
            plan.on_shave = true;
            break;
        case dsl::Engine::Auto:
            // The DPU when the algorithm is a DPU operation, a SHAVE kernel otherwise.
            if (auto desc = try_match_dpu(plan.layer))
                plan.dpu = *desc;
            else
                plan.on_shave = true;
            break;
        }
    }
}

// The schedule's vectorize and unroll directives, on the kernel's pure loops.
void apply_shave_schedule(const LayerPlan &plan, Halide::Func &out) {
    const auto &v = dsl::act_vars();
    const std::map<std::string, Halide::Var> pure = {{"c", v.c}, {"x", v.x}, {"y", v.y}};
    for (const Loop &loop : plan.nest.loops) {
        if (!loop.unrolled && loop.vector_width == 0) continue;
        auto var = pure.find(loop.name);
        if (var == pure.end() || loop.task_loop)
            throw LoweringError("layer '" + plan.layer.name() + "': vectorize/unroll of '" +
                                loop.name + "': SHAVE kernels take them on c, x or y only so far");
        if (loop.vector_width > 0)
            out.vectorize(var->second, int(loop.vector_width), Halide::TailStrategy::GuardWithIf);
        // Kernel extents are known only at run time: an unrolled loop is unrolled by 2.
        if (loop.unrolled) out.unroll(var->second, 2, Halide::TailStrategy::GuardWithIf);
    }
}

void compile_shave_kernels(LoweringState &s) {
    for (auto &plan : s.plans) {
        if (!plan.on_shave) continue;
        std::vector<Halide::Func> inputs;
        std::vector<Halide::Argument> args;
        for (size_t i = 0; i < plan.layer.inputs().size(); ++i) {
            Halide::ImageParam p(dsl::halide_type(plan.layer.inputs()[i].output().type), 3,
                                 "in" + std::to_string(i));
            inputs.emplace_back(p);
            args.emplace_back(p);
        }
        std::string name = "k" + std::to_string(s.program.kernels.size()) + "_";
        for (char c : plan.layer.name())
            name += std::isalnum(static_cast<unsigned char>(c)) ? c : '_';
        Halide::Func out = plan.layer.algorithm()(inputs);
        apply_shave_schedule(plan, out);
        ShaveKernelBinary kernel;
        try {
            kernel = compile_shave_kernel(name, out, args, s.target.shave_vector_bits);
        } catch (const ShaveKernelError &e) {
            throw LoweringError("layer '" + plan.layer.name() + "': " + e.what());
        }
        plan.kernel = uint32_t(s.program.kernels.size());
        s.program.kernels.push_back(*to_blob_kernel(kernel));
    }
}

void verify_tasks(const LoweringState &s) {
    const auto &p = s.program;
    for (size_t t = 0; t < p.tasks.size(); ++t)
        for (int d : p.tasks[t].deps)
            if (d < 0 || size_t(d) >= t)
                throw LoweringError("task '" + p.tasks[t].name +
                                    "' depends on a task that is not before it");
}

IoDecl io_decl(const dsl::TensorDesc &t) {
    IoDecl io;
    io.name = t.name;
    for (int64_t v : t.shape.raw()) io.shape.push_back(uint32_t(v));
    io.dtype = blob_dtype(t.type);
    io.layout = t.order == dsl::DimsOrder::NHWC() ? blob::Layout::NHWC : blob::Layout::NCHW;
    if (!t.quant.empty() && !t.quant.per_channel())
        io.quant.push_back(blob::Quant(t.quant.scale[0], t.quant.zero_point[0]));
    return io;
}

blob::DType blob_dtype(dsl::ElemType t) {
    switch (t) {
    case dsl::ElemType::U8:
        return blob::DType::U8;
    case dsl::ElemType::I8:
        return blob::DType::I8;
    case dsl::ElemType::F16:
        return blob::DType::F16;
    case dsl::ElemType::F32:
        return blob::DType::F32;
    case dsl::ElemType::I32:
        return blob::DType::I32;
    }
    return blob::DType::U8;
}

blob::DType blob_dtype(Halide::Type t) {
    if (t.is_float()) return t.bits() == 16 ? blob::DType::F16 : blob::DType::F32;
    if (t.bits() == 32) return blob::DType::I32;
    return t.is_uint() ? blob::DType::U8 : blob::DType::I8;
}

} // namespace vpuc::codegen
