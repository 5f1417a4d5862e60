#include "codegen/random_schedule.h"

#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "codegen/loop_nest.h"
#include "codegen/schedule_space.h"

namespace vpuc::codegen {

namespace {

using Kind = dsl::Directive::Kind;

constexpr int64_t kMaxTasks = 32, kMaxTinyTasks = 256;
// Policy, not legality: deeper prefetch and more workloads only cost CMX and time in tests.
constexpr int64_t kMaxPrefetch = 3, kMaxWorkloads = 6;
constexpr int kMaxShapingSteps = 5;

class Generator {
  public:
    Generator(const dsl::Graph &graph, const dsl::Layer &layer, const target::Target &target,
              std::mt19937 &rng, dsl::Engine engine)
        : graph_(graph), layer_(layer), target_(target), rng_(rng),
          spaces_(graph, layer, target, engine), saved_(layer.schedule()) {}
    ~Generator() { layer_.schedule() = saved_; }
    Generator(const Generator &) = delete;
    Generator &operator=(const Generator &) = delete;

    dsl::Schedule run() {
        tiny_ = chance(10);
        budget_ = tiny_ ? kMaxTinyTasks : kMaxTasks;
        const int steps = int(uniform(0, kMaxShapingSteps));
        for (int step = 0; step < steps; ++step) shape();
        kernel_loops();
        engine_and_prefetch();
        return schedule_;
    }

  private:
    // --- randomness, independent of the standard library's distributions -------------------

    int64_t uniform(int64_t lo, int64_t hi) { // inclusive; hi - lo < 2^32
        return lo + int64_t(uint64_t(rng_()) % uint64_t(hi - lo + 1));
    }
    bool chance(int percent) { return uniform(0, 99) < percent; }
    template <typename T> void shuffle(std::vector<T> &v) {
        for (size_t i = v.size(); i > 1; --i)
            std::swap(v[i - 1], v[size_t(uniform(0, int64_t(i) - 1))]);
    }
    template <typename T> const T &pick(const std::vector<T> &v) {
        return v[size_t(uniform(0, int64_t(v.size()) - 1))];
    }

    // --- the space and the resolver --------------------------------------------------------

    // Only the kinds about to be drawn: every candidate costs the space a resolution.
    ScheduleSpace space(const std::vector<Kind> &kinds) { return spaces_.after(schedule_, kinds); }

    // The resolved nest of `s` with the space's engine, or nothing when the resolver refuses.
    std::optional<LoopNest> resolve(dsl::Schedule s, const ScheduleSpace &space,
                                    bool name_engine = true) {
        if (name_engine && s.engine() != space.engine) {
            if (space.engine == dsl::Engine::SHAVE)
                s.on_shave();
            else
                s.on_dpu();
        }
        layer_.schedule() = s;
        try {
            return resolve_loop_nest(graph_, layer_, target_, space.channel_granule);
        } catch (const dsl::ScheduleError &) {
            return std::nullopt;
        }
    }

    // An upper bound of the task count (clamping can leave iterations empty).
    static int64_t task_bound(const LoopNest &nest) {
        int64_t n = 1;
        for (const Loop &l : nest.loops)
            if (l.task_loop) n = std::min<int64_t>(n * l.extent, int64_t(1) << 40);
        return n;
    }

    // Adds `d` when the resolver takes it and the tasks stay within the budget.
    bool add_within_budget(const dsl::Directive &d, const ScheduleSpace &space) {
        dsl::Schedule s = schedule_;
        s.add(d);
        const std::optional<LoopNest> nest = resolve(s, space);
        if (!nest || task_bound(*nest) > budget_) return false;
        schedule_ = std::move(s);
        return true;
    }

    std::string new_name(const ScheduleSpace &space, const std::string &loop, char part) {
        const Loop *l = space.nest.find(loop);
        const int dim = l ? space.nest.vars[size_t(l->var)].dim : -1;
        const std::string stem = dim >= 0 ? std::string(1, "cxy"[dim]) : "f";
        return space.new_loop_name(stem + part + std::to_string(++counter_));
    }

    // --- shaping the loops -----------------------------------------------------------------

    // One directive that shapes the loops or places the layer: a kind drawn by weight among
    // those the space offers (splits most; a producer usually goes into its consumer).
    void shape() {
        std::vector<std::pair<Kind, int>> weights = {
            {Kind::Split, 8}, {Kind::Tile, 3},       {Kind::Distribute, 5}, {Kind::Reorder, 3},
            {Kind::Fuse, 2},  {Kind::ComputeAt, 12}, {Kind::StoreIn, 2},
        };
        while (!weights.empty()) {
            int total = 0;
            for (const auto &w : weights) total += w.second;
            int64_t at = uniform(0, total - 1);
            size_t k = 0;
            while (at >= weights[k].second) at -= weights[k++].second;
            const Kind kind = weights[k].first;
            weights.erase(weights.begin() + long(k));
            const ScheduleSpace s = space({kind});
            if (s.choices.empty()) continue;
            const Choice &c = pick(s.choices);
            // A few draws of values; one that leaves too many tasks drops the step.
            for (int attempt = 0; attempt < 8; ++attempt)
                if (add_within_budget(draw(c, s), s)) break;
            return;
        }
    }

    dsl::Directive draw(const Choice &c, const ScheduleSpace &space) {
        switch (c.kind) {
        case Kind::Split: {
            const int64_t extent = space.nest.find(c.loops[0])->extent;
            std::vector<int64_t> extents = c.uneven && chance(30)
                                               ? uneven_extents(c.values[0], extent)
                                               : std::vector<int64_t>{factor(c.values[0])};
            std::string outer = new_name(space, c.loops[0], 'o');
            std::string inner = new_name(space, c.loops[0], 'i');
            // The split loop's name may be reused, as in Halide's split(x, x, xi, 8).
            if (chance(25)) (chance(50) ? outer : inner) = c.loops[0];
            return c.make(extents, {outer, inner});
        }
        case Kind::Tile: {
            // Distinct: fresh names are unique.
            const std::vector<std::string> names = {
                new_name(space, c.loops[0], 'o'), new_name(space, c.loops[1], 'o'),
                new_name(space, c.loops[0], 'i'), new_name(space, c.loops[1], 'i')};
            return c.make({factor(c.values[0]), factor(c.values[1])}, names);
        }
        case Kind::Reorder: {
            std::vector<std::string> names = c.loops;
            shuffle(names);
            names.resize(size_t(uniform(2, int64_t(names.size()))));
            return c.make({}, names);
        }
        case Kind::Fuse:
            return c.make({}, {space.new_loop_name("f" + std::to_string(++counter_))});
        default: {
            std::vector<int64_t> numbers;
            for (const std::vector<int64_t> &v : c.values) numbers.push_back(pick(v));
            return c.make(numbers);
        }
        }
    }

    // Mostly any offered factor (often not dividing the loop); now and then one past the loop
    // (one task); in a tiny schedule, mostly one of the three smallest.
    int64_t factor(const std::vector<int64_t> &factors) {
        if (chance(5)) return factors.back();
        if (tiny_ && chance(60))
            return factors[size_t(uniform(0, std::min<int64_t>(3, int64_t(factors.size())) - 1))];
        return pick(factors);
    }

    // Two to four pieces of at most half the loop each (or the smallest factor), stopping
    // once they cover it: more would be an error.
    std::vector<int64_t> uneven_extents(const std::vector<int64_t> &factors, int64_t extent) {
        std::vector<int64_t> small;
        for (int64_t f : factors)
            if (f == factors.front() || 2 * f <= extent) small.push_back(f);
        const int64_t pieces = uniform(2, 4);
        std::vector<int64_t> extents;
        int64_t covered = 0;
        while (int64_t(extents.size()) < pieces && covered < extent) {
            extents.push_back(pick(small));
            covered += extents.back();
        }
        return extents;
    }

    // --- the engine's loops, the engine, prefetch -------------------------------------------

    void kernel_loops() {
        if (spaces_.engine() == dsl::Engine::DPU) {
            if (!chance(50)) return;
            const ScheduleSpace s = space({Kind::Workloads});
            const auto choices = s.of_kind(Kind::Workloads);
            if (choices.empty()) return;
            const Choice &c = *pick(choices);
            std::vector<int64_t> counts;
            for (int64_t n : c.values[0])
                if (n <= kMaxWorkloads) counts.push_back(n);
            schedule_.add(c.make({pick(counts)}));
            workloads_ = true;
            return;
        }
        // Each on its own loop, as a kernel usually has them.
        std::string vectorized;
        if (chance(60)) {
            const ScheduleSpace s = space({Kind::Vectorize});
            const auto choices = s.of_kind(Kind::Vectorize);
            if (!choices.empty()) {
                const Choice &c = *pick(choices);
                vectorized = c.loops[0];
                schedule_.add(c.make({pick(c.values[0])}));
            }
        }
        if (chance(40)) {
            const ScheduleSpace s = space({Kind::Unroll});
            std::vector<const Choice *> choices;
            for (const Choice *c : s.of_kind(Kind::Unroll))
                if (c->loops[0] != vectorized) choices.push_back(c);
            if (!choices.empty()) schedule_.add(pick(choices)->make());
        }
    }

    // Inserts `d` at a random place when the resolver takes it there, else appends it.
    void insert_anywhere(const dsl::Directive &d, const ScheduleSpace &space, bool name_engine) {
        std::vector<dsl::Directive> list = schedule_.directives();
        list.insert(list.begin() + long(uniform(0, int64_t(list.size()))), d);
        dsl::Schedule s;
        for (const dsl::Directive &each : list) s.add(each);
        if (resolve(s, space, name_engine))
            schedule_ = std::move(s);
        else
            schedule_.add(d);
    }

    void engine_and_prefetch() {
        const ScheduleSpace s = space({Kind::Prefetch, Kind::OnDpu, Kind::OnShave});
        const auto prefetch = s.of_kind(Kind::Prefetch);
        if (!prefetch.empty() && chance(70)) {
            std::vector<int64_t> depths;
            for (int64_t depth : prefetch.front()->values[0])
                if (depth <= kMaxPrefetch) depths.push_back(depth);
            insert_anywhere(prefetch.front()->make({pick(depths)}), s, true);
        }
        const auto engines =
            s.of_kind(s.engine == dsl::Engine::SHAVE ? Kind::OnShave : Kind::OnDpu);
        // Without an engine directive the compiler chooses: the DPU for a layer it runs.
        if (s.engine == dsl::Engine::DPU && !workloads_ && chance(10) &&
            resolve(schedule_, s, false))
            return;
        insert_anywhere(pick(engines)->make(), s, false);
    }

    const dsl::Graph &graph_;
    dsl::Layer layer_; // a handle: its schedule is swapped to resolve candidates
    const target::Target &target_;
    std::mt19937 &rng_;
    const LayerScheduleSpace spaces_;
    const dsl::Schedule saved_;
    dsl::Schedule schedule_;
    bool tiny_ = false, workloads_ = false;
    int64_t budget_ = kMaxTasks;
    int counter_ = 0;
};

} // namespace

dsl::Schedule random_schedule(const dsl::Graph &graph, const dsl::Layer &layer,
                              const target::Target &target, std::mt19937 &rng, dsl::Engine engine) {
    return Generator(graph, layer, target, rng, engine).run();
}

} // namespace vpuc::codegen
