#include "codegen/loop_nest.h"

#include "codegen/lower.h"

#include <algorithm>
#include <cctype>
#include <functional>
#include <numeric>
#include <optional>
#include <stdexcept>

namespace vpuc::codegen {

namespace {

using dsl::Directive;
using dsl::ScheduleError;

constexpr int kDimC = 0, kDimY = 2;
constexpr const char *kDimNames[3] = {"c", "x", "y"};
// Deeper prefetch only holds more CMX: 8 covers a load ahead for each DPU of a tile (vpu20
// has five) with room to spare.
constexpr int64_t kMaxPrefetch = 8;

std::string join(const std::vector<std::string> &names) {
    if (names.empty()) return "none";
    std::string s;
    for (const std::string &n : names) s += (s.empty() ? "" : ", ") + n;
    return s;
}

int64_t ceil_div(int64_t a, int64_t b) {
    return (a + b - 1) / b;
}

// Chunk `k` of `extent` cut into `chunks` contiguous pieces of whole `granule`s (the last
// piece of the extent may be short), whose granule counts differ by at most one, the larger
// ones first (every tile gets work when chunks <= ceil(extent / granule)).
Interval chunk_of(int64_t extent, int64_t chunks, int64_t k, int64_t granule = 1) {
    const int64_t granules = ceil_div(extent, granule);
    const int64_t size = granules / chunks, larger = granules % chunks;
    const int64_t begin = k * size + std::min(k, larger);
    const int64_t end = begin + size + (k < larger ? 1 : 0);
    return {std::min(begin * granule, extent), std::min(end * granule, extent)};
}

bool is_empty(Interval i) {
    return i.end <= i.begin;
}

Interval intersect(Interval a, Interval b) {
    return {std::max(a.begin, b.begin), std::min(a.end, b.end)};
}

// The values of `inner` within the pieces `outer` of a split whose piece k covers
// [starts[k], starts[k + 1]). They form an interval when `outer` is one piece or `inner` covers
// its whole extent; resolution only builds loop nests where that holds.
Interval combine(Interval outer, Interval inner, const std::vector<int64_t> &starts,
                 int64_t inner_extent) {
    if (is_empty(outer) || is_empty(inner)) return {0, 0};
    const int64_t begin = starts[size_t(outer.begin)];
    if (outer.extent() == 1)
        return {begin + inner.begin, std::min(begin + inner.end, starts[size_t(outer.end)])};
    if (!(inner == Interval{0, inner_extent}))
        throw std::logic_error("loop nest: a task region is not a box");
    return {begin, starts[size_t(outer.end)]};
}

// Sets the variables `rel` derives from the ones it made (the reverse of how it was applied).
void derive(const LoopRelation &rel, const std::vector<LoopVar> &vars,
            std::vector<Interval> &range) {
    Interval &whole = range[size_t(rel.whole)];
    Interval &outer = range[size_t(rel.outer)];
    Interval &inner = range[size_t(rel.inner)];
    switch (rel.kind) {
    case LoopRelation::Kind::Split:
        whole = combine(outer, inner, rel.starts, vars[size_t(rel.inner)].extent);
        return;
    case LoopRelation::Kind::Distribute: {
        if (rel.replicate) {
            whole = inner;
            return;
        }
        if (outer.extent() != 1) throw std::logic_error("loop nest: tile loop not fixed");
        Interval chunk =
            chunk_of(vars[size_t(rel.whole)].extent, rel.factor, outer.begin, rel.granule);
        whole = intersect({chunk.begin + inner.begin, chunk.begin + inner.end}, chunk);
        return;
    }
    case LoopRelation::Kind::Fuse: {
        int64_t n = vars[size_t(rel.inner)].extent;
        if (is_empty(whole)) {
            inner = outer = {0, 0};
        } else if (whole.extent() == 1) {
            inner = {whole.begin % n, whole.begin % n + 1};
            outer = {whole.begin / n, whole.begin / n + 1};
        } else if (whole == Interval{0, vars[size_t(rel.whole)].extent}) {
            inner = {0, n};
            outer = {0, vars[size_t(rel.outer)].extent};
        } else {
            throw std::logic_error("loop nest: a fused loop covers part of its range");
        }
        return;
    }
    }
}

bool is_identifier(const std::string &name) {
    if (name.empty()) return false;
    return std::all_of(name.begin(), name.end(),
                       [](char ch) { return std::isalnum((unsigned char)ch) || ch == '_'; });
}

class Resolver {
  public:
    Resolver(const dsl::Graph &graph, const dsl::Layer &layer, const target::Target &target,
             int64_t channel_granule)
        : graph_(graph), layer_(layer), target_(target), engine_(layer.schedule().engine()),
          channel_granule_(std::max<int64_t>(1, channel_granule)) {}

    LoopNest run() {
        start_loops();
        for (const Directive &d : layer_.schedule().directives()) {
            current_ = &d;
            apply(d);
        }
        check_placement();
        std::stable_partition(nest_.loops.begin(), nest_.loops.end(),
                              [](const Loop &l) { return !l.task_loop; });
        return nest_;
    }

  private:
    [[noreturn]] void fail(const std::string &what) const {
        throw ScheduleError("layer '" + layer_.name() + "': " + current_->to_string() + ": " +
                            what);
    }

    // The pure loops c, x, y (innermost first) over the output's C, W and H: one image; a batch
    // runs the nest once per image.
    void start_loops() {
        const dsl::Shape shape = dsl::device_view(layer_.output()).shape;
        bool ok = shape.rank() == 4 && shape[dsl::dims::N] > 0 && shape[dsl::dims::C] > 0 &&
                  shape[dsl::dims::H] > 0 && shape[dsl::dims::W] > 0;
        if (!ok)
            throw LoweringError("layer '" + layer_.name() +
                                "': a loop nest needs an NxCxHxW output with N, C, H, W > 0 "
                                "(got " +
                                dsl::to_string(shape) + ")");
        nest_.layer = layer_.name();
        const int64_t extents[3] = {shape[dsl::dims::C], shape[dsl::dims::W], shape[dsl::dims::H]};
        for (int d = 0; d < 3; ++d) {
            Loop loop;
            loop.name = kDimNames[d];
            loop.extent = extents[d];
            loop.var = add_var(loop.name, loop.extent, d);
            nest_.loops.push_back(loop);
        }
    }

    void apply(const Directive &d) {
        using K = Directive::Kind;
        switch (d.kind) {
        case K::Split:
            split(d.loops[0], d.loops[1], d.loops[2], d.factors);
            return;
        case K::Tile:
            tile(d);
            return;
        case K::Reorder:
            reorder(d.loops);
            return;
        case K::Fuse:
            fuse(d.loops[0], d.loops[1], d.loops[2]);
            return;
        case K::Unroll:
            kernel_loop(d.loops[0]).unrolled = true;
            return;
        case K::Vectorize:
            vectorize(d.loops[0], d.factors[0]);
            return;
        case K::ComputeRoot:
            nest_.compute_root = true;
            nest_.compute_at_layer.clear();
            nest_.compute_at_loop.clear();
            return;
        case K::ComputeAt:
            compute_at(d.name, d.loops[0]);
            return;
        case K::StoreIn:
            nest_.store = d.memory;
            return;
        case K::OnDpu:
            on_dpu(d.name);
            return;
        case K::OnShave:
            nest_.engine = dsl::Engine::SHAVE;
            nest_.mpe_mode.clear();
            return;
        case K::Workloads:
            workloads(d.loops[0], d.factors[0]);
            return;
        case K::Distribute:
            distribute(d.loops[0], d.factors[0], d.strategy);
            return;
        case K::Prefetch:
            prefetch(d.factors[0]);
            return;
        case K::Spill:
            nest_.spill = true;
            return;
        }
    }

    // --- helpers ---------------------------------------------------------------------------

    int add_var(const std::string &name, int64_t extent, int dim, int64_t unit = 1) {
        nest_.vars.push_back({name, extent, dim, unit});
        return int(nest_.vars.size() - 1);
    }

    // Iterations of a loop from c that make one channel granule (1 for other loops): task
    // boundaries on this loop must fall on multiples of it.
    int64_t granule_iterations(const Loop &loop) const {
        const LoopVar &v = var_of(loop);
        if (v.dim != kDimC || channel_granule_ == 1) return 1;
        return channel_granule_ / std::gcd(channel_granule_, v.unit);
    }

    // Task boundaries on a loop from c (`starts`, the pieces of a split) must fall on whole
    // channel granules on the DPU.
    void check_channel_split(const Loop &loop, const std::vector<int64_t> &starts,
                             const std::string &what) const {
        const int64_t g = granule_iterations(loop);
        for (size_t k = 1; k + 1 < starts.size(); ++k)
            if (starts[k] % g != 0)
                fail("the DPU computes output channels in groups of " +
                     std::to_string(channel_granule_) + ", so tasks must start and end on them: " +
                     what + " of '" + loop.name + "' (" + std::to_string(var_of(loop).unit) +
                     " channel(s) per iteration) puts a task boundary at " +
                     std::to_string(starts[k]) + " (legal: multiples of " + std::to_string(g) +
                     ", or " + std::to_string(loop.extent) + " and more; or on_shave())");
    }

    const LoopVar &var_of(const Loop &loop) const { return nest_.vars[size_t(loop.var)]; }

    std::vector<std::string> names_where(const std::function<bool(const Loop &)> &pred) const {
        std::vector<std::string> names;
        for (const Loop &l : nest_.loops)
            if (pred(l)) names.push_back(l.name);
        return names;
    }

    std::string loop_list() const {
        return join(names_where([](const Loop &) { return true; }));
    }

    size_t find_loop(const std::string &name) const {
        for (size_t i = 0; i < nest_.loops.size(); ++i)
            if (nest_.loops[i].name == name) return i;
        fail("no loop '" + name + "' (loops: " + loop_list() + ")");
    }

    // Split, fuse and distribute change the loop's meaning; unroll/vectorize marks and the
    // tile loop's tile assignment would be lost.
    void check_reshapable(const Loop &loop) const {
        if (loop.tiles > 0)
            fail("loop '" + loop.name +
                 "' spreads tasks over NCE tiles; it cannot be split, fused or distributed");
        if (loop.unrolled || loop.vector_width > 0)
            fail("loop '" + loop.name + "' is " + (loop.unrolled ? "unrolled" : "vectorized") +
                 " (split, fuse and distribute come before unroll and vectorize)");
    }

    // New loop names are identifiers that no other loop has; a name the directive replaces may
    // be reused, as in Halide's split(x, x, xi, 8).
    void check_new_names(const std::vector<std::string> &names,
                         const std::vector<std::string> &replaced) const {
        for (size_t i = 0; i < names.size(); ++i) {
            const std::string &name = names[i];
            if (!is_identifier(name))
                fail("new loop name '" + name +
                     "' is not an identifier (legal: letters, digits and '_')");
            for (size_t j = 0; j < i; ++j)
                if (names[j] == name) fail("new loop name '" + name + "' is given twice");
            bool replaces = std::count(replaced.begin(), replaced.end(), name) > 0;
            auto taken = names_where([&](const Loop &l) {
                return std::count(replaced.begin(), replaced.end(), l.name) == 0;
            });
            if (!replaces && std::count(taken.begin(), taken.end(), name) > 0)
                fail("new loop name '" + name + "' is taken (taken: " + join(taken) + ")");
        }
    }

    // --- loops -----------------------------------------------------------------------------

    // Where the pieces of a split of `extent` iterations by `extents` begin, and the end: the
    // last extent repeats until the loop is covered, and the last piece is clamped to it.
    std::vector<int64_t> piece_starts(const std::string &v, int64_t extent,
                                      const std::vector<int64_t> &extents) const {
        for (int64_t e : extents)
            if (e < 1)
                fail((extents.size() == 1 ? "factor " : "extent ") + std::to_string(e) +
                     " is not positive (legal: >= 1)");
        std::vector<int64_t> starts{0};
        for (size_t k = 0; starts.back() < extent; ++k)
            starts.push_back(
                std::min(extent, starts.back() + extents[std::min(k, extents.size() - 1)]));
        const size_t pieces = starts.size() - 1;
        if (pieces < extents.size())
            fail((pieces == 1 ? std::string("the first extent already covers")
                              : "the first " + std::to_string(pieces) + " extents already cover") +
                 " the " + std::to_string(extent) + " iterations of '" + v + "' (legal: at most " +
                 std::to_string(pieces) + (pieces == 1 ? " extent)" : " extents)"));
        return starts;
    }

    void split(const std::string &v, const std::string &outer, const std::string &inner,
               const std::vector<int64_t> &extents) {
        size_t at = find_loop(v);
        Loop old = nest_.loops[at];
        check_reshapable(old);
        if (!old.task_loop && var_of(old).dim < 0)
            fail("'" + v +
                 "' is a fused loop inside a task; its parts would not be boxes (split before "
                 "fusing)");
        check_new_names({outer, inner}, {v});
        const std::vector<int64_t> starts = piece_starts(v, old.extent, extents);
        const bool uniform = extents.size() == 1;
        check_channel_split(old, starts,
                            uniform ? "factor " + std::to_string(extents[0]) : "a split");
        int64_t largest = 0, common = 0; // common: of the pieces before the last
        for (size_t k = 0; k + 1 < starts.size(); ++k) {
            largest = std::max(largest, starts[k + 1] - starts[k]);
            if (k + 2 < starts.size()) common = std::gcd(common, starts[k + 1] - starts[k]);
        }
        const int dim = var_of(old).dim;
        const int64_t unit = var_of(old).unit;
        Loop in;
        in.name = inner;
        in.extent = largest;
        in.task_loop = old.task_loop; // the iterations of a task loop stay tasks
        in.var = add_var(inner, in.extent, dim, unit);
        Loop out;
        out.name = outer;
        out.extent = int64_t(starts.size()) - 1;
        out.task_loop = true;
        // Every piece but the last is a multiple of `common` iterations of v.
        out.var = add_var(outer, out.extent, dim, unit * (uniform ? extents[0] : common));
        nest_.relations.push_back(
            {LoopRelation::Kind::Split, old.var, out.var, in.var, 1, 1, false, starts});
        nest_.loops[at] = in;
        nest_.loops.insert(nest_.loops.begin() + long(at) + 1, out);
    }

    void tile(const Directive &d) {
        const std::vector<std::string> &l = d.loops;
        if (l[0] == l[1]) fail("tile needs two different loops (got '" + l[0] + "' twice)");
        split(l[0], l[2], l[4], {d.factors[0]});
        split(l[1], l[3], l[5], {d.factors[1]});
        reorder({l[4], l[5], l[2], l[3]});
    }

    // Halide's reorder: the named loops take the positions they occupy, in the given order.
    void reorder(const std::vector<std::string> &innermost_first) {
        std::vector<size_t> at;
        for (const std::string &name : innermost_first) {
            size_t i = find_loop(name);
            if (std::count(at.begin(), at.end(), i) > 0)
                fail("loop '" + name +
                     "' is named twice (each loop at most once; loops: " + loop_list() + ")");
            at.push_back(i);
        }
        std::vector<Loop> moved;
        for (size_t i : at) moved.push_back(nest_.loops[i]);
        std::sort(at.begin(), at.end());
        for (size_t k = 0; k < at.size(); ++k) nest_.loops[at[k]] = moved[k];
    }

    void fuse(const std::string &inner, const std::string &outer, const std::string &fused) {
        size_t i = find_loop(inner), o = find_loop(outer);
        Loop in = nest_.loops[i], out = nest_.loops[o];
        check_reshapable(in);
        check_reshapable(out);
        if (o != i + 1)
            fail("'" + inner + "' is not directly inside '" + outer +
                 "' (loops, innermost first: " + loop_list() + ")");
        if (in.task_loop != out.task_loop) {
            const Loop &task = in.task_loop ? in : out, &other = in.task_loop ? out : in;
            fail("'" + task.name + "' is a task loop but '" + other.name +
                 "' is not (fuse two task loops or two loops inside a task)");
        }
        check_new_names({fused}, {inner, outer});
        Loop f;
        f.name = fused;
        f.extent = in.extent * out.extent;
        f.task_loop = in.task_loop;
        f.var = add_var(fused, f.extent, -1);
        nest_.relations.push_back(
            {LoopRelation::Kind::Fuse, f.var, out.var, in.var, in.extent, 1, false, {}});
        nest_.loops[i] = f;
        nest_.loops.erase(nest_.loops.begin() + long(o));
    }

    // A loop a SHAVE kernel may unroll or vectorize: inside a task, on a SHAVE layer.
    Loop &kernel_loop(const std::string &name) {
        if (engine_ != dsl::Engine::SHAVE)
            fail("unroll and vectorize schedule SHAVE kernels (legal only with on_shave())");
        Loop &loop = nest_.loops[find_loop(name)];
        if (loop.task_loop)
            fail("'" + name + "' is a task loop (loops inside a task: " +
                 join(names_where([](const Loop &l) { return !l.task_loop; })) + ")");
        return loop;
    }

    void vectorize(const std::string &name, int64_t width) {
        Loop &loop = kernel_loop(name);
        if (width < 2 || (width & (width - 1)) != 0)
            fail("width " + std::to_string(width) +
                 " is not a power of two (legal: 2, 4, 8, 16, ...)");
        loop.vector_width = width;
    }

    // --- placement and engines -------------------------------------------------------------

    void compute_at(const std::string &consumer, const std::string &loop) {
        std::vector<std::string> names;
        const dsl::Layer *found = nullptr;
        std::vector<dsl::Layer> consumers = graph_.consumers(layer_);
        for (const dsl::Layer &c : consumers) {
            names.push_back(c.name());
            if (c.name() == consumer) found = &c;
        }
        if (!found)
            fail("'" + consumer + "' does not consume this layer (consumers: " + join(names) + ")");
        std::vector<std::string> task_loops =
            resolve_loop_nest(graph_, *found, target_).task_loop_names();
        if (std::count(task_loops.begin(), task_loops.end(), loop) == 0)
            fail("'" + loop + "' is not a task loop of '" + consumer +
                 "' (task loops: " + join(task_loops) + "; or compute_root())");
        if (consumers.size() > 1)
            fail("compute_at keeps the result in the CMX of one consumer, and '" + layer_.name() +
                 "' has " + std::to_string(consumers.size()) + " (" + join(names) +
                 "); legal: compute_root()");
        for (const dsl::Layer &out : graph_.outputs())
            if (out.same_as(layer_))
                fail("'" + layer_.name() +
                     "' is a network output, which lives in DDR; legal: compute_root()");
        nest_.compute_root = false;
        nest_.compute_at_layer = consumer;
        nest_.compute_at_loop = loop;
    }

    // Where the output lives follows from the placement: a layer computed at root stores it
    // to DDR, where its consumers load it (that is spill()), unless it is stored in CMX
    // (store_in(CMX), or distributed with HKSwitch): then its whole output stays in the CMX of
    // every tile that computes it or runs a consumer, broadcast there as it is computed. One
    // computed at a consumer's loop keeps it in that consumer's CMX. A layer computed at a
    // consumer's loop also runs on that consumer's tile, once per iteration of the loop, with
    // its inputs loaded just before: distribution and prefetch belong to the consumer's
    // schedule.
    void check_placement() {
        const auto &directives = layer_.schedule().directives();
        const bool hk_switch = std::any_of(directives.begin(), directives.end(), [](auto &d) {
            return d.kind == Directive::Kind::Distribute && d.strategy == dsl::Strategy::HKSwitch;
        });
        bool network_output = false;
        for (const dsl::Layer &out : graph_.outputs()) network_output |= out.same_as(layer_);
        nest_.broadcast = nest_.compute_root && (nest_.store == dsl::MemoryLevel::CMX || hk_switch);
        for (const Directive &d : directives) {
            current_ = &d;
            if (nest_.compute_root) {
                const bool to_cmx =
                    (d.kind == Directive::Kind::StoreIn && d.memory == dsl::MemoryLevel::CMX) ||
                    (d.kind == Directive::Kind::Distribute &&
                     d.strategy == dsl::Strategy::HKSwitch);
                if (to_cmx && nest_.broadcast && network_output)
                    fail("'" + layer_.name() +
                         "' is a network output, which goes to DDR, and this keeps it in CMX "
                         "(legal: " +
                         (d.kind == Directive::Kind::StoreIn ? "store_in(DDR)" : "SOH") + ")");
                if (hk_switch && d.kind == Directive::Kind::StoreIn &&
                    d.memory == dsl::MemoryLevel::DDR)
                    fail("HKSwitch broadcasts the output into the CMX of every tile (legal: "
                         "store_in(CMX), or distribute with SOH to store it to DDR)");
                if (nest_.broadcast && d.kind == Directive::Kind::Spill)
                    fail("the output stays in CMX (store_in(CMX) or HKSwitch), and spill() "
                         "sends it to DDR (legal: store_in(DDR) with SOH, SOK or Clustering)");
                continue;
            }
            if (d.kind == Directive::Kind::StoreIn && d.memory == dsl::MemoryLevel::DDR)
                fail("a layer computed at '" + nest_.compute_at_layer +
                     "' lives in that layer's CMX (legal: store_in(CMX), or compute_root())");
            if (d.kind == Directive::Kind::Spill)
                fail("a layer computed at '" + nest_.compute_at_layer +
                     "' lives in that layer's CMX; going through DDR is what compute_root() "
                     "does (legal: compute_root())");
            if (d.kind == Directive::Kind::Distribute)
                fail("a layer computed at '" + nest_.compute_at_layer +
                     "' runs on that layer's tiles (legal: distribute the consumer, or "
                     "compute_root())");
            if (d.kind == Directive::Kind::Prefetch && d.factors[0] > 0)
                fail("a layer computed at '" + nest_.compute_at_layer +
                     "' is computed when its consumer loads its inputs, so the consumer's "
                     "prefetch covers it (legal: prefetch(0), or compute_root())");
        }
    }

    void on_dpu(const std::string &mode) {
        if (!mode.empty()) check_mpe_mode(mode);
        nest_.engine = dsl::Engine::DPU;
        nest_.mpe_mode = mode;
    }

    // The mode exists on the target and takes the layer's input type (the DPU reads int8 or
    // fp16; other types are the DPU matcher's business).
    void check_mpe_mode(const std::string &mode) const {
        std::vector<std::string> names;
        for (const target::MpeMode &m : target_.mpe_modes) names.push_back(m.name);
        const target::MpeMode *found = target_.find_mpe_mode(mode);
        if (!found)
            fail("no MPE mode '" + mode + "' on " + target_.name + " (legal: " + join(names) +
                 ", or on_dpu() to let the compiler choose)");
        if (layer_.inputs().empty()) return;
        dsl::ElemType type = layer_.inputs()[0].output().type;
        bool int8 = dsl::is_quantized_int(type), fp16 = type == dsl::ElemType::F16;
        if (!int8 && !fp16) return;
        if ((int8 && found->int8) || (fp16 && found->fp16)) return;
        std::vector<std::string> usable;
        for (const target::MpeMode &m : target_.mpe_modes)
            if ((int8 && m.int8) || (fp16 && m.fp16)) usable.push_back(m.name);
        fail("MPE mode '" + mode + "' does not take " + dsl::to_string(type) +
             " inputs (legal for " + dsl::to_string(type) + ": " + join(usable) + ")");
    }

    void workloads(const std::string &name, int64_t count) {
        if (engine_ != dsl::Engine::DPU)
            fail("workloads split DPU tasks (legal only with on_dpu())");
        const Loop &loop = nest_.loops[find_loop(name)];
        auto legal = names_where([&](const Loop &l) { return !l.task_loop && var_of(l).dim >= 0; });
        if (loop.task_loop) fail("'" + name + "' is a task loop (legal: " + join(legal) + ")");
        if (var_of(loop).dim < 0)
            fail("'" + name + "' is fused; workloads must be boxes (legal: " + join(legal) + ")");
        // Variants of a DPU task cover whole channel groups.
        const int64_t granule = granule_iterations(loop);
        const int64_t most = ceil_div(loop.extent, granule);
        if (count < 1 || count > most)
            fail("count " + std::to_string(count) + " is outside 1.." + std::to_string(most) +
                 " (the extent of '" + name + "'" +
                 (granule > 1 ? ", in groups of " + std::to_string(granule) + " channels"
                              : std::string()) +
                 ")");
        nest_.workload_loop = name;
        nest_.workloads = count;
    }

    // --- distribution and data movement ----------------------------------------------------

    // v becomes a tile loop "v.tile" (a task loop; its index is the NCE tile) outside a
    // remainder loop that keeps the name v and v's task-ness.
    void distribute(const std::string &v, int64_t tiles, dsl::Strategy strategy) {
        if (distributed_)
            fail("the layer is already distributed (at most one distribute per layer)");
        size_t at = find_loop(v);
        Loop old = nest_.loops[at];
        check_reshapable(old);
        int dim = strategy == dsl::Strategy::SplitOverKernel ? kDimC : kDimY;
        if (var_of(old).dim != dim)
            fail(std::string(dsl::to_string(strategy)) + " needs " + kDimNames[dim] +
                 " or a loop split from it (legal: " +
                 join(names_where([&](const Loop &l) { return var_of(l).dim == dim; })) + ")");
        // Clustering replicates the work, so the loop's extent does not bound the tile count.
        bool replicate = strategy == dsl::Strategy::Clustering;
        // SOK cuts whole channel granules, so each tile gets at least one.
        const int64_t granule = replicate ? 1 : granule_iterations(old);
        int64_t max_tiles = replicate
                                ? target_.tiles
                                : std::min<int64_t>(target_.tiles, ceil_div(old.extent, granule));
        if (tiles < 1 || tiles > max_tiles)
            fail(std::to_string(tiles) + " tiles is outside 1.." + std::to_string(max_tiles) +
                 " (" + target_.name + " has " + std::to_string(target_.tiles) + " NCE tiles, '" +
                 v + "' has extent " + std::to_string(old.extent) +
                 (granule > 1 ? ", cut in groups of " + std::to_string(granule) +
                                    " for the DPU's channel alignment"
                              : std::string()) +
                 ")");
        Loop rest = old;
        rest.extent = replicate ? old.extent : chunk_of(old.extent, tiles, 0, granule).extent();
        rest.var = add_var(v, rest.extent, dim, var_of(old).unit);
        Loop tile;
        tile.name = v + ".tile"; // '.' is not in user loop names, so this cannot clash
        tile.extent = tiles;
        tile.task_loop = true;
        tile.tiles = tiles;
        tile.strategy = strategy;
        tile.var = add_var(tile.name, tiles, -1);
        nest_.relations.push_back({LoopRelation::Kind::Distribute,
                                   old.var,
                                   tile.var,
                                   rest.var,
                                   tiles,
                                   granule,
                                   replicate,
                                   {}});
        nest_.loops[at] = rest;
        nest_.loops.insert(nest_.loops.begin() + long(at) + 1, tile);
        distributed_ = true;
    }

    void prefetch(int64_t depth) {
        if (depth < 0 || depth > kMaxPrefetch)
            fail("depth " + std::to_string(depth) + " is outside 0.." +
                 std::to_string(kMaxPrefetch));
        nest_.prefetch = depth;
    }

    const dsl::Graph &graph_;
    const dsl::Layer &layer_;
    const target::Target &target_;
    // The schedule's final engine, so that unroll, vectorize and workloads are checked the same
    // wherever on_dpu/on_shave stands.
    const dsl::Engine engine_;
    const int64_t channel_granule_;
    const Directive *current_ = nullptr;
    bool distributed_ = false;
    LoopNest nest_;
};

// The region and tile of the task at `index` (one value per task loop, outermost first), or
// nothing when clamping leaves it empty.
std::optional<Task> task_at(const LoopNest &nest, const std::vector<const Loop *> &task_loops,
                            const std::vector<int64_t> &index) {
    std::vector<Interval> range;
    for (const LoopVar &v : nest.vars) range.push_back({0, v.extent});
    for (size_t k = 0; k < task_loops.size(); ++k)
        range[size_t(task_loops[k]->var)] = {index[k], index[k] + 1};
    for (auto rel = nest.relations.rbegin(); rel != nest.relations.rend(); ++rel)
        derive(*rel, nest.vars, range);
    Task task;
    for (size_t d = 0; d < 3; ++d) {
        if (is_empty(range[d])) return std::nullopt;
        task.region.dims[d] = range[d];
    }
    for (const LoopRelation &rel : nest.relations)
        if (rel.kind == LoopRelation::Kind::Distribute)
            task.tile = int(range[size_t(rel.outer)].begin);
    task.loop_index = index;
    return task;
}

} // namespace

std::string Region::to_string() const {
    std::string s;
    for (size_t d = 0; d < 3; ++d)
        s += (d ? " " : "") + std::string(kDimNames[d]) + "[" + std::to_string(dims[d].begin) +
             "," + std::to_string(dims[d].end) + ")";
    return s;
}

std::vector<Task> LoopNest::tasks() const {
    std::vector<const Loop *> task_loops; // outermost first
    for (auto it = loops.rbegin(); it != loops.rend(); ++it)
        if (it->task_loop) task_loops.push_back(&*it);
    std::vector<int64_t> index(task_loops.size(), 0);
    std::vector<Task> result;
    while (true) {
        if (std::optional<Task> task = task_at(*this, task_loops, index)) result.push_back(*task);
        size_t k = index.size();
        while (k > 0 && ++index[k - 1] == task_loops[k - 1]->extent) index[--k] = 0;
        if (k == 0) return result;
    }
}

const Loop *LoopNest::find(const std::string &name) const {
    for (const Loop &l : loops)
        if (l.name == name) return &l;
    return nullptr;
}

std::vector<std::string> LoopNest::task_loop_names() const {
    std::vector<std::string> names;
    for (auto it = loops.rbegin(); it != loops.rend(); ++it)
        if (it->task_loop) names.push_back(it->name);
    return names;
}

LoopNest resolve_loop_nest(const dsl::Graph &graph, const dsl::Layer &layer,
                           const target::Target &target, int64_t channel_granule) {
    return Resolver(graph, layer, target, channel_granule).run();
}

} // namespace vpuc::codegen
