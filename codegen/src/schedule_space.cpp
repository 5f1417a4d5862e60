#include "codegen/schedule_space.h"

#include <algorithm>
#include <map>
#include <set>

#include "algorithms/registry.h"
#include "algorithms/views.h"
#include "codegen/dpu_match.h"
#include "codegen/lower.h"

namespace vpuc::codegen {

namespace {

using dsl::Directive;
using Kind = dsl::Directive::Kind;

// Prefetch depths tried (the resolver takes fewer): nothing in the nest bounds them.
constexpr int64_t kMaxPrefetchTried = 16;

// Pure loop dimension (0 c, 1 x, 2 y) of a logical one; -1 for N.
int loop_dim(dsl::Dim d) {
    if (d == dsl::dims::C) return 0;
    if (d == dsl::dims::W) return 1;
    if (d == dsl::dims::H) return 2;
    return -1;
}

std::string list(const std::vector<int64_t> &values) {
    if (values.empty()) return "{}";
    bool contiguous = values.size() > 2;
    for (size_t i = 1; i < values.size(); ++i) contiguous &= values[i] == values[i - 1] + 1;
    if (contiguous) return std::to_string(values.front()) + ".." + std::to_string(values.back());
    std::string s;
    for (int64_t v : values) s += (s.empty() ? "" : ", ") + std::to_string(v);
    return "{" + s + "}";
}

dsl::Directive engine_directive(dsl::Engine engine) {
    dsl::Schedule s;
    if (engine == dsl::Engine::SHAVE)
        s.on_shave();
    else
        s.on_dpu();
    return s.directives().front();
}

class SpaceBuilder {
  public:
    // `base`: the space's engine, engines, channel granule and unsplittable dims.
    SpaceBuilder(const dsl::Graph &graph, const dsl::Layer &layer, const target::Target &target,
                 const ScheduleSpace &base, const dsl::Schedule &so_far)
        : graph_(graph), layer_(layer), target_(target), so_far_(so_far), saved_(layer.schedule()),
          space_(base) {}
    ~SpaceBuilder() { layer_.schedule() = saved_; }
    SpaceBuilder(const SpaceBuilder &) = delete;
    SpaceBuilder &operator=(const SpaceBuilder &) = delete;

    ScheduleSpace build(const std::vector<Kind> &kinds) {
        space_.nest = resolve(so_far_);
        nest_dims();
        auto wanted = [&](Kind k) {
            return kinds.empty() || std::count(kinds.begin(), kinds.end(), k) > 0;
        };
        for (const Loop &loop : space_.nest.loops) {
            if (wanted(Kind::Split) || wanted(Kind::Tile)) split(loop, wanted(Kind::Split));
            if (wanted(Kind::Distribute)) distribute(loop);
            if (wanted(Kind::Unroll)) unroll(loop);
            if (wanted(Kind::Vectorize)) vectorize(loop);
            if (wanted(Kind::Workloads)) workloads(loop);
        }
        if (wanted(Kind::Tile)) tile();
        if (wanted(Kind::Fuse)) fuse();
        if (wanted(Kind::Reorder)) reorder();
        if (wanted(Kind::ComputeAt)) compute_at();
        if (wanted(Kind::ComputeRoot))
            offer_if_accepted(Kind::ComputeRoot, dsl::Schedule().compute_root());
        if (wanted(Kind::StoreIn)) store_in();
        if (wanted(Kind::Spill)) offer_if_accepted(Kind::Spill, dsl::Schedule().spill());
        if (wanted(Kind::OnDpu) || wanted(Kind::OnShave)) engines();
        if (wanted(Kind::Prefetch)) prefetch();
        return std::move(space_);
    }

  private:
    // --- asking the resolver ---------------------------------------------------------------

    LoopNest resolve(const dsl::Schedule &schedule) {
        dsl::Schedule s = schedule;
        if (s.engine() != space_.engine) s.add(engine_directive(space_.engine));
        layer_.schedule() = s;
        return resolve_loop_nest(graph_, layer_, target_, space_.channel_granule);
    }

    bool accepts(const Directive &d) {
        dsl::Schedule s = so_far_;
        s.add(d);
        try {
            resolve(s);
            return true;
        } catch (const dsl::ScheduleError &) {
            return false;
        }
    }

    // The candidates `make` builds a directive from that the resolver accepts.
    template <typename Make>
    std::vector<int64_t> accepted(int64_t first, int64_t last, Make &&make) {
        std::vector<int64_t> values;
        for (int64_t v = first; v <= last; ++v)
            if (accepts(make(v))) values.push_back(v);
        return values;
    }

    void offer(Choice c) { space_.choices.push_back(std::move(c)); }

    // --- the nest --------------------------------------------------------------------------

    // The pure dimensions each loop variable covers part of, through the relations that made
    // it (a fused loop covers both of its parts').
    void nest_dims() {
        const LoopNest &nest = space_.nest;
        var_dims_.assign(nest.vars.size(), {});
        for (size_t v = 0; v < nest.vars.size() && v < 3; ++v) var_dims_[v] = {int(v)};
        for (const LoopRelation &rel : nest.relations) {
            const size_t whole = size_t(rel.whole), outer = size_t(rel.outer),
                         inner = size_t(rel.inner);
            if (rel.kind == LoopRelation::Kind::Fuse) {
                var_dims_[whole] = var_dims_[inner];
                var_dims_[whole].insert(var_dims_[outer].begin(), var_dims_[outer].end());
            } else {
                var_dims_[outer] = var_dims_[inner] = var_dims_[whole];
            }
        }
    }

    // Whether the layer's kernel may have `loop` cut into pieces computed apart.
    bool splittable(const Loop &loop) const {
        for (dsl::Dim d : space_.unsplittable_dims)
            if (var_dims_[size_t(loop.var)].count(loop_dim(d))) return false;
        return true;
    }

    std::string fresh(const std::string &stem) const { return space_.new_loop_name(stem); }

    // --- loops -----------------------------------------------------------------------------

    std::vector<int64_t> split_factors(const Loop &loop) {
        if (!splittable(loop)) return {};
        const std::string outer = fresh("o"), inner = fresh("i");
        return accepted(1, loop.extent + 1, [&](int64_t f) {
            return dsl::Schedule().split(loop.name, outer, inner, f).directives().front();
        });
    }

    // Also keeps the factors for tile.
    void split(const Loop &loop, bool offered) {
        std::vector<int64_t> factors = split_factors(loop);
        if (factors.empty()) return;
        split_factors_[loop.name] = factors;
        if (!offered) return;
        Choice c;
        c.kind = Kind::Split;
        c.loops = {loop.name};
        c.new_loops = 2;
        // Uneven: the smallest piece, then the largest.
        if (factors.front() < loop.extent) {
            Directive d = dsl::Schedule()
                              .split(loop.name, fresh("o"), fresh("i"),
                                     std::vector<int64_t>{factors.front(), factors.back()})
                              .directives()
                              .front();
            c.uneven = accepts(d);
        }
        c.values = {std::move(factors)};
        offer(std::move(c));
    }

    void tile() {
        for (const auto &[x, fx] : split_factors_)
            for (const auto &[y, fy] : split_factors_) {
                if (x == y) continue;
                const Directive d = dsl::Schedule()
                                        .tile(x, y, fresh("xo"), fresh("yo"), fresh("xi"),
                                              fresh("yi"), fx.front(), fy.front())
                                        .directives()
                                        .front();
                if (!accepts(d)) continue;
                Choice c;
                c.kind = Kind::Tile;
                c.loops = {x, y};
                c.values = {fx, fy};
                c.new_loops = 4;
                offer(std::move(c));
            }
    }

    void fuse() {
        for (const Loop &inner : space_.nest.loops)
            for (const Loop &outer : space_.nest.loops) {
                if (inner.name == outer.name) continue;
                if (!accepts(dsl::Schedule()
                                 .fuse(inner.name, outer.name, fresh("f"))
                                 .directives()
                                 .front()))
                    continue;
                Choice c;
                c.kind = Kind::Fuse;
                c.loops = {inner.name, outer.name};
                c.new_loops = 1;
                offer(std::move(c));
            }
    }

    void reorder() {
        std::vector<std::string> names;
        for (const Loop &loop : space_.nest.loops) names.push_back(loop.name);
        if (names.size() < 2) return;
        std::vector<std::string> reversed(names.rbegin(), names.rend());
        if (!accepts(dsl::Schedule().reorder(reversed).directives().front())) return;
        Choice c;
        c.kind = Kind::Reorder;
        c.loops = names;
        offer(std::move(c));
    }

    void distribute(const Loop &loop) {
        for (dsl::Strategy strategy :
             {dsl::Strategy::SplitOverHeight, dsl::Strategy::SplitOverKernel,
              dsl::Strategy::Clustering, dsl::Strategy::HKSwitch}) {
            // Clustering replicates the loop on every tile: nothing is cut.
            if (strategy != dsl::Strategy::Clustering && !splittable(loop)) continue;
            // HKSwitch keeps the output in CMX.
            if (strategy == dsl::Strategy::HKSwitch && ddr_only()) continue;
            std::vector<int64_t> tiles = accepted(1, target_.tiles, [&](int64_t n) {
                return dsl::Schedule().distribute(loop.name, n, strategy).directives().front();
            });
            if (tiles.empty()) continue;
            Choice c;
            c.kind = Kind::Distribute;
            c.loops = {loop.name};
            c.strategy = strategy;
            c.values = {std::move(tiles)};
            offer(std::move(c));
        }
    }

    void unroll(const Loop &loop) {
        if (space_.engine != dsl::Engine::SHAVE) return;
        if (!accepts(dsl::Schedule().unroll(loop.name).directives().front())) return;
        Choice c;
        c.kind = Kind::Unroll;
        c.loops = {loop.name};
        offer(std::move(c));
    }

    // By powers of two up to one SHAVE vector of the output type.
    void vectorize(const Loop &loop) {
        if (space_.engine != dsl::Engine::SHAVE) return;
        const int64_t lanes = std::max<int64_t>(2, target_.shave_vector_bits /
                                                       (8 * dsl::bytes_of(layer_.output().type)));
        std::vector<int64_t> widths;
        for (int64_t w = 2; w <= lanes; w *= 2)
            if (accepts(dsl::Schedule().vectorize(loop.name, w).directives().front()))
                widths.push_back(w);
        if (widths.empty()) return;
        Choice c;
        c.kind = Kind::Vectorize;
        c.loops = {loop.name};
        c.values = {std::move(widths)};
        offer(std::move(c));
    }

    void workloads(const Loop &loop) {
        if (space_.engine != dsl::Engine::DPU || !splittable(loop)) return;
        std::vector<int64_t> counts = accepted(1, loop.extent, [&](int64_t n) {
            return dsl::Schedule().workloads(loop.name, n).directives().front();
        });
        if (counts.empty()) return;
        Choice c;
        c.kind = Kind::Workloads;
        c.loops = {loop.name};
        c.values = {std::move(counts)};
        offer(std::move(c));
    }

    // --- placement, engine, prefetch -------------------------------------------------------

    // Whether the layer's output must stay in DDR: a layer moving images is a view of dense
    // DDR memory, and so is its input (plan_views); a layer of several outputs is computed at
    // root into DDR, where its tuple_element layers read them (select_engines).
    bool ddr_only() const {
        if (algorithms::moves_images(layer_) || layer_.outputs().size() > 1) return true;
        const std::vector<dsl::Layer> consumers = graph_.consumers(layer_);
        return std::any_of(consumers.begin(), consumers.end(),
                           [](const dsl::Layer &c) { return algorithms::moves_images(c); });
    }

    void compute_at() {
        if (ddr_only()) return;
        for (const dsl::Layer &consumer : graph_.consumers(layer_)) {
            std::vector<std::string> task_loops;
            try {
                task_loops = resolve_loop_nest(graph_, consumer, target_).task_loop_names();
            } catch (const dsl::ScheduleError &) {
                continue; // the consumer's schedule is not legal (yet): nowhere to compute at
            }
            for (const std::string &loop : task_loops)
                if (accepts(
                        dsl::Schedule().compute_at(consumer.name(), loop).directives().front())) {
                    Choice c;
                    c.kind = Kind::ComputeAt;
                    c.name = consumer.name();
                    c.loops = {loop};
                    offer(std::move(c));
                }
        }
    }

    void store_in() {
        for (dsl::MemoryLevel level : {dsl::MemoryLevel::CMX, dsl::MemoryLevel::DDR})
            if ((level == dsl::MemoryLevel::DDR || !ddr_only()) &&
                accepts(dsl::Schedule().store_in(level).directives().front())) {
                Choice c;
                c.kind = Kind::StoreIn;
                c.memory = level;
                offer(std::move(c));
            }
    }

    void offer_if_accepted(Kind kind, const dsl::Schedule &one) {
        if (!accepts(one.directives().front())) return;
        Choice c;
        c.kind = kind;
        offer(std::move(c));
    }

    void engines() {
        if (space_.engine == dsl::Engine::SHAVE) {
            offer_if_accepted(Kind::OnShave, dsl::Schedule().on_shave());
            return;
        }
        std::vector<std::string> modes = {""};
        for (const target::MpeMode &m : target_.mpe_modes) modes.push_back(m.name);
        for (const std::string &mode : modes)
            if (accepts(dsl::Schedule().on_dpu(mode).directives().front())) {
                Choice c;
                c.kind = Kind::OnDpu;
                c.name = mode;
                offer(std::move(c));
            }
    }

    void prefetch() {
        std::vector<int64_t> depths = accepted(0, kMaxPrefetchTried, [](int64_t depth) {
            return dsl::Schedule().prefetch(depth).directives().front();
        });
        if (depths.empty()) return;
        Choice c;
        c.kind = Kind::Prefetch;
        c.values = {std::move(depths)};
        offer(std::move(c));
    }

    const dsl::Graph &graph_;
    dsl::Layer layer_; // a handle: its schedule is the graph's
    const target::Target &target_;
    const dsl::Schedule so_far_;
    const dsl::Schedule saved_;
    ScheduleSpace space_;
    std::vector<std::set<int>> var_dims_;
    std::map<std::string, std::vector<int64_t>> split_factors_;
};

} // namespace

dsl::Directive Choice::make(const std::vector<int64_t> &numbers,
                            const std::vector<std::string> &names) const {
    auto fail = [&](const std::string &what) {
        throw dsl::ScheduleError("choice " + to_string() + ": " + what);
    };
    auto value_in = [&](size_t k, int64_t v) {
        if (!std::count(values[k].begin(), values[k].end(), v))
            fail(std::to_string(v) + " is not one of its values " + list(values[k]));
    };
    const size_t numbers_wanted = kind == Kind::Reorder ? 0 : values.size();
    const bool uneven_split = kind == Kind::Split && uneven && numbers.size() > 1;
    if (!uneven_split && numbers.size() != numbers_wanted)
        fail("takes " + std::to_string(numbers_wanted) + " number(s), got " +
             std::to_string(numbers.size()));
    for (size_t k = 0; k < numbers.size(); ++k) value_in(uneven_split ? 0 : k, numbers[k]);
    if (kind != Kind::Reorder && names.size() != size_t(new_loops))
        fail("takes " + std::to_string(new_loops) + " new loop name(s), got " +
             std::to_string(names.size()));
    dsl::Schedule s;
    switch (kind) {
    case Kind::Split:
        s.split(loops[0], names[0], names[1], numbers);
        break;
    case Kind::Tile:
        s.tile(loops[0], loops[1], names[0], names[1], names[2], names[3], numbers[0], numbers[1]);
        break;
    case Kind::Reorder:
        for (const std::string &n : names)
            if (!std::count(loops.begin(), loops.end(), n))
                fail("'" + n + "' is not one of the loops it may reorder");
        s.reorder(names);
        break;
    case Kind::Fuse:
        s.fuse(loops[0], loops[1], names[0]);
        break;
    case Kind::Unroll:
        s.unroll(loops[0]);
        break;
    case Kind::Vectorize:
        s.vectorize(loops[0], numbers[0]);
        break;
    case Kind::ComputeRoot:
        s.compute_root();
        break;
    case Kind::ComputeAt:
        s.compute_at(name, loops[0]);
        break;
    case Kind::StoreIn:
        s.store_in(memory);
        break;
    case Kind::OnDpu:
        s.on_dpu(name);
        break;
    case Kind::OnShave:
        s.on_shave();
        break;
    case Kind::Workloads:
        s.workloads(loops[0], numbers[0]);
        break;
    case Kind::Distribute:
        s.distribute(loops[0], numbers[0], strategy);
        break;
    case Kind::Prefetch:
        s.prefetch(numbers[0]);
        break;
    case Kind::Spill:
        s.spill();
        break;
    }
    return s.directives().front();
}

std::string Choice::to_string() const {
    std::vector<std::string> args = loops;
    if (kind == Kind::ComputeAt || kind == Kind::OnDpu) args.insert(args.begin(), name);
    if (kind == Kind::StoreIn) args.push_back(dsl::to_string(memory));
    if (kind == Kind::Distribute) args.push_back(dsl::to_string(strategy));
    for (const std::vector<int64_t> &v : values) args.push_back(list(v));
    if (uneven) args.push_back("uneven");
    std::string s;
    for (const std::string &a : args) s += (s.empty() ? "" : ", ") + a;
    return std::string(dsl::to_string(kind)) + "(" + s + ")";
}

std::vector<const Choice *> ScheduleSpace::of_kind(dsl::Directive::Kind kind) const {
    std::vector<const Choice *> found;
    for (const Choice &c : choices)
        if (c.kind == kind) found.push_back(&c);
    return found;
}

std::string ScheduleSpace::new_loop_name(const std::string &stem) const {
    auto taken = [&](const std::string &name) {
        for (const Loop &l : nest.loops)
            if (l.name == name) return true;
        for (const LoopVar &v : nest.vars)
            if (v.name == name) return true;
        return false;
    };
    if (!taken(stem)) return stem;
    for (int n = 1;; ++n)
        if (!taken(stem + std::to_string(n))) return stem + std::to_string(n);
}

LayerScheduleSpace::LayerScheduleSpace(const dsl::Graph &graph, const dsl::Layer &layer,
                                       const target::Target &target, dsl::Engine engine)
    : graph_(graph), layer_(layer), target_(target) {
    std::string why;
    const bool dpu_op = try_match_dpu(layer, &why).has_value();
    if (dpu_op) base_.engines.push_back(dsl::Engine::DPU);
    base_.engines.push_back(dsl::Engine::SHAVE);
    if (engine == dsl::Engine::Auto) engine = dpu_op ? dsl::Engine::DPU : dsl::Engine::SHAVE;
    if (engine == dsl::Engine::DPU && !dpu_op)
        throw dsl::ScheduleError("layer '" + layer.name() + "': the DPU cannot run it (" + why +
                                 "); legal: on_shave()");
    base_.engine = engine;
    base_.channel_granule = engine == dsl::Engine::DPU ? target.channel_alignment : 1;
    base_.unsplittable_dims = algorithms::layer_registry().unsplittable_dims(layer);
}

ScheduleSpace LayerScheduleSpace::after(const dsl::Schedule &so_far,
                                        const std::vector<dsl::Directive::Kind> &kinds) const {
    return SpaceBuilder(graph_, layer_, target_, base_, so_far).build(kinds);
}

ScheduleSpace schedule_space(const dsl::Graph &graph, const dsl::Layer &layer,
                             const target::Target &target, dsl::Engine engine,
                             const dsl::Schedule &so_far,
                             const std::vector<dsl::Directive::Kind> &kinds) {
    return LayerScheduleSpace(graph, layer, target, engine).after(so_far, kinds);
}

} // namespace vpuc::codegen
