// The lowering, as a straight list of atomic passes. Each pass is logged, timed
// (VPUC_PASS_TIMES=1 prints the times to stderr) and followed by a verifier of its output.
#include "codegen/lower.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <map>
#include <ostream>
#include <sstream>

#include "algorithms/registry.h"
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
        {"check_element_types", check_element_types, nullptr},
        {"default_schedules", default_schedules, nullptr},
        {"choose_strategies", choose_strategies, verify_graph_schedules},
        {"keep_in_cmx", keep_in_cmx, verify_graph_schedules},
        {"group_layers", group_layers, verify_graph_schedules},
        {"resolve_schedules", resolve_schedules, nullptr},
        {"plan_views", plan_views, verify_views},
        {"select_engines", select_engines, nullptr},
        {"compile_shave_kernels", compile_shave_kernels, nullptr},
        {"declare_tensors", declare_tensors, verify_tensors},
        {"build_tasks", build_tasks,
         [](const LoweringState &s) {
             verify_tasks(s);
             verify_channel_padding(s);
         }},
        {"broadcast_outputs", broadcast_outputs,
         [](const LoweringState &s) {
             verify_tasks(s);
             verify_broadcasts(s);
         }},
        {"order_prefetch", order_prefetch,
         [](const LoweringState &s) {
             verify_tasks(s);
             verify_prefetch(s);
         }},
        {"pack_weights", pack_weights, verify_weights},
        {"choose_workloads", choose_workloads, verify_workloads},
        {"split_weight_copies", split_weight_copies,
         [](const LoweringState &s) {
             verify_tasks(s);
             verify_weight_copies(s);
         }},
        {"prefetch_weights", prefetch_weights, verify_tasks},
        {"allocate_cmx", allocate_cmx, verify_allocation},
        {"allocate_ddr", allocate_ddr, verify_allocation},
        {"assign_dma_engines", assign_dma_engines, verify_tasks},
        {"reduce_dependencies", reduce_dependencies, verify_tasks},
        {"order_as_run", order_as_run, verify_tasks},
        {"assign_barriers", assign_barriers, verify_tasks},
        {"map_physical_barriers", map_physical_barriers, verify_barriers},
        {"assemble", assemble, verify_blob},
    };
    return list;
}

// A layer's loop nest as Halide's Func::print_loop_nest shows one, outermost loop first,
// each loop with its kind (distributed over tiles, a task loop, unrolled, vectorized, or a
// plain loop inside a task) and its range.
std::string print_loop_nest(const LoopNest &nest) {
    std::string out = "produce " + nest.layer + ":";
    if (!nest.compute_root)
        out += " (computed at " + nest.compute_at_layer + "." + nest.compute_at_loop + ")";
    if (nest.broadcast) out += " (kept in the CMX of every tile using it)";
    out += "\n";
    std::string indent = "  ";
    for (auto loop = nest.loops.rbegin(); loop != nest.loops.rend(); ++loop) {
        std::string kind = "for";
        if (loop->tiles > 0)
            kind = std::string("distributed (") + dsl::to_string(loop->strategy) + ")";
        else if (loop->task_loop)
            kind = "task";
        else if (loop->unrolled)
            kind = "unrolled";
        else if (loop->vector_width > 0)
            kind = "vectorized";
        out +=
            indent + kind + " " + loop->name + " in [0, " + std::to_string(loop->extent) + "):\n";
        indent += "  ";
    }
    return out + indent + nest.layer + "(c, x, y) = ...\n";
}

std::string dump(const LoweringState &s, const std::string &pass) {
    if (pass == "default_schedules" || pass == "choose_strategies" || pass == "keep_in_cmx") {
        std::string out;
        for (const auto &layer : s.graph.layers())
            out += layer.name() + ": " + layer.schedule().to_string() + "\n";
        return out;
    }
    if (pass == "resolve_schedules" || pass == "plan_views" || pass == "select_engines" ||
        pass == "compile_shave_kernels") {
        std::string out;
        for (const auto &plan : s.plans) {
            out += plan.layer.name() + ": " + plan.layer.schedule().to_string() + "\n";
            std::istringstream nest(print_loop_nest(plan.nest));
            for (std::string line; std::getline(nest, line);) out += "  " + line + "\n";
            for (const auto &t : plan.nest.tasks())
                out += "  task tile " + std::to_string(t.tile) + " " + t.region.to_string() + "\n";
            if (plan.view)
                out += "  view of DDR memory\n";
            else if (dsl::is_constant(plan.layer))
                out += "  copy of a constant\n";
            else if (pass != "resolve_schedules" && pass != "plan_views")
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

void run_passes(LoweringState &s, const std::string &first, const std::string &last) {
    const auto &list = passes();
    auto find = [&](const std::string &name) {
        const auto it = std::find_if(list.begin(), list.end(),
                                     [&](const Pass &pass) { return pass.name == name; });
        if (it == list.end()) throw LoweringError("no lowering pass '" + name + "'");
        return it;
    };
    for (auto pass = find(first), end = find(last) + 1; pass < end; ++pass) {
        pass->run(s);
        if (pass->verify) pass->verify(s);
    }
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
    const bool print_times = options.time_passes || std::getenv("VPUC_PASS_TIMES") != nullptr;
    // The lowering compiles 4-D tensors: every tensor as its device view, on a copy that leaves
    // the caller's schedules alone.
    const dsl::Graph own = graph.device_clone();
    LoweringState state(own, target);
    state.graph_scheduling = options.graph_scheduling;
    note_input_layouts(state);
    size_t notes_logged = 0;
    for (const auto &pass : passes()) {
        auto start = std::chrono::steady_clock::now();
        pass.run(state);
        if (pass.verify) pass.verify(state);
        double ms =
            std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
                .count();
        if (options.log) *options.log << "pass " << pass.name << " done\n";
        for (; notes_logged < state.notes.size(); ++notes_logged)
            for (std::ostream *out : {options.log, options.notes})
                if (out) *out << "note: " << state.notes[notes_logged] << "\n";
        if (print_times) std::fprintf(stderr, "vpuc pass %-24s %9.3f ms\n", pass.name.c_str(), ms);
        if (options.dump_after == pass.name && options.log)
            *options.log << "IR after " << pass.name << ":\n" << dump(state, pass.name);
    }
    if (options.schedules)
        for (const dsl::Layer &layer : own.layers())
            (*options.schedules)[layer.name()] = layer.schedule();
    return std::move(state.blob);
}

void check_element_types(LoweringState &s) {
    auto check = [&](const dsl::Layer &layer) {
        for (const dsl::TensorDesc &t : layer.outputs()) {
            if (dsl::is_device_type(t.type)) continue;
            const char *device = dsl::to_string(dsl::device_type(t.type));
            throw LoweringError(std::string(layer.is_input() ? "graph input '" : "layer '") +
                                t.name + "' is " + dsl::to_string(t.type) +
                                ", which the device does not have: fold it away at compile time, "
                                "or give the graph " +
                                device + " there (dsl::to_device converts values to " + device +
                                ", checking that they fit)");
        }
    };
    for (const dsl::Layer &in : s.graph.inputs()) check(in);
    for (const dsl::Layer &layer : s.graph.layers()) check(layer);
}

void default_schedules(LoweringState &s) {
    for (const auto &layer : s.graph.layers()) {
        dsl::Layer handle = layer;
        if (!handle.schedule().empty()) {
            s.authored_schedules[layer.name()] = handle.schedule();
            continue;
        }
        const std::optional<DpuOpDesc> &match =
            s.dpu_matches.emplace(layer.name(), try_match_dpu(layer, s.target)).first->second;
        handle.schedule() = schedules::default_schedule(
            layer, s.target, 0, match ? dpu_weight_bytes(*match, s.target) : 0,
            algorithms::layer_registry().unsplittable_dims(layer), !match);
        s.defaulted_schedules.insert(layer.name());
    }
}

void verify_graph_schedules(const LoweringState &s) {
    for (const dsl::Layer &layer : s.graph.layers()) {
        const auto authored = s.authored_schedules.find(layer.name());
        if (authored != s.authored_schedules.end() && authored->second != layer.schedule())
            throw LoweringError("graph scheduling changed the schedule of layer '" + layer.name() +
                                "', which its author gave: " + authored->second.to_string() +
                                " became " + layer.schedule().to_string());
        const auto &directives = layer.schedule().directives();
        const bool in_cmx = std::any_of(directives.begin(), directives.end(), [](auto &d) {
            return d.kind == dsl::Directive::Kind::StoreIn && d.memory == dsl::MemoryLevel::CMX;
        });
        if (authored == s.authored_schedules.end() && in_cmx && is_network_output(s, layer))
            throw LoweringError("graph scheduling keeps graph output '" + layer.name() +
                                "' in CMX");
    }
}

bool runs_on_dpu(LoweringState &s, const dsl::Layer &layer) {
    const dsl::Engine engine = layer.schedule().engine();
    if (engine != dsl::Engine::Auto) return engine == dsl::Engine::DPU;
    auto known = s.dpu_matches.find(layer.name());
    if (known == s.dpu_matches.end())
        known = s.dpu_matches.emplace(layer.name(), try_match_dpu(layer, s.target)).first;
    return known->second.has_value();
}

void resolve_schedules(LoweringState &s) {
    for (const auto &layer : s.graph.layers()) {
        // The DPU computes output channels in groups of the channel alignment.
        const int64_t granule = runs_on_dpu(s, layer) ? s.target.channel_alignment : 1;
        s.plans.push_back({layer,
                           resolve_loop_nest(s.graph, layer, s.target, granule),
                           false,
                           {},
                           0,
                           std::nullopt});
    }
}

void select_engines(LoweringState &s) {
    for (auto &plan : s.plans) {
        // No engine computes a view, nor a constant, which build_tasks copies.
        if (plan.view || dsl::is_constant(plan.layer)) continue;
        const size_t outputs = plan.layer.outputs().size();
        if (outputs > 1) {
            // One SHAVE kernel computes every output; its tuple_element layers are views of
            // them in DDR.
            if (plan.nest.engine == dsl::Engine::DPU || !stored_in_ddr(plan))
                throw LoweringError("layer '" + plan.layer.name() + "' has " +
                                    std::to_string(outputs) +
                                    " outputs: it runs on the SHAVEs, computed at root and stored "
                                    "in DDR, where its tuple_element layers read them");
            plan.on_shave = true;
            continue;
        }
        const auto known = s.dpu_matches.find(plan.layer.name());
        switch (plan.nest.engine) {
        case dsl::Engine::DPU:
            // match_dpu says why a layer that is not a DPU operation is not.
            plan.dpu = known != s.dpu_matches.end() && known->second
                           ? *known->second
                           : match_dpu(plan.layer, s.target);
            break;
        case dsl::Engine::SHAVE:
            plan.on_shave = true;
            break;
        case dsl::Engine::Auto: {
            // The DPU when the algorithm is a DPU operation the target's DPU can run, else a
            // SHAVE kernel, with a note saying why.
            const std::optional<DpuOpDesc> desc =
                known != s.dpu_matches.end() ? known->second : try_match_dpu(plan.layer, s.target);
            if (desc) {
                plan.dpu = *desc;
            } else {
                plan.on_shave = true;
                std::string why;
                try_match_dpu(plan.layer, s.target, &why);
                s.notes.push_back("SHAVE kernel for " + why);
            }
            break;
        }
        }
    }
}

std::vector<int> new_indices(const std::vector<int> &order) {
    std::vector<int> new_index(order.size());
    for (size_t i = 0; i < order.size(); ++i) new_index[size_t(order[i])] = int(i);
    return new_index;
}

std::vector<TaskIR> reordered(const std::vector<TaskIR> &tasks, const std::vector<int> &order) {
    const std::vector<int> new_index = new_indices(order);
    std::vector<TaskIR> out;
    out.reserve(order.size());
    for (int t : order) {
        out.push_back(tasks[size_t(t)]);
        for (int &dep : out.back().deps) dep = new_index[size_t(dep)];
    }
    return out;
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
    // A tensor of another rank than 4 keeps its graph shape, in row-major order (ND), which
    // is its device view's NCHW.
    for (int64_t v : t.logical_shape().raw()) io.shape.push_back(uint32_t(v));
    io.dtype = blob_dtype(t.type);
    io.layout = t.graph_shape                       ? blob::Layout::ND
                : t.order == dsl::DimsOrder::NHWC() ? blob::Layout::NHWC
                                                    : blob::Layout::NCHW;
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
    case dsl::ElemType::I64:
    case dsl::ElemType::Bool:
    case dsl::ElemType::F64:
        break; // check_element_types refuses them first
    }
    throw std::logic_error(std::string("blob_dtype: ") + dsl::to_string(t) +
                           " is not a device type");
}

blob::DType blob_dtype(Halide::Type t) {
    if (t.is_float()) return t.bits() == 16 ? blob::DType::F16 : blob::DType::F32;
    if (t.bits() == 32) return blob::DType::I32;
    return t.is_uint() ? blob::DType::U8 : blob::DType::I8;
}

} // namespace vpuc::codegen
