#include "schedules/random_schedule.h"

#include <algorithm>
#include <cstdint>
#include <numeric>
#include <set>
#include <string>
#include <utility>
#include <vector>

namespace vpuc::schedules {

namespace {

constexpr const char *kDimNames[3] = {"c", "x", "y"};
constexpr int kDimC = 0, kDimX = 1, kDimY = 2;
constexpr int64_t kMaxTasks = 32, kMaxTinyTasks = 256;
constexpr int64_t kMaxPrefetch = 3; // deep enough to cover the lowering; the resolver allows 8

// The generator's model of the loop nest, enough to stay legal: the rules of
// codegen/loop_nest.h it must respect are about names, extents, task-ness and the dimension a
// loop comes from (this library sits below codegen and cannot ask it).
struct GenLoop {
    std::string name;
    int64_t extent = 1;
    bool task = false;      // made by split or distribute: iterates tasks
    int dim = -1;           // 0, 1, 2: from c, x or y; -1: the tile loop of distribute
    bool tile_loop = false; // cannot be split or distributed
    int64_t unit = 1;       // elements of its dim per iteration
};

class Generator {
  public:
    Generator(const dsl::Layer &layer, const target::Target &target, std::mt19937 &rng,
              dsl::Engine engine)
        : layer_(layer), target_(target), rng_(rng), engine_(engine),
          channel_granule_(engine == dsl::Engine::SHAVE ? 1 : target.channel_alignment) {}

    dsl::Schedule run() {
        const dsl::Shape &shape = layer_.output().shape;
        const int64_t extents[3] = {shape[dsl::dims::C], shape[dsl::dims::W], shape[dsl::dims::H]};
        for (int d = 0; d < 3; ++d)
            loops_.push_back({kDimNames[d], extents[d], false, d, false, 1});
        tiny_ = chance(10);
        budget_ = tiny_ ? kMaxTinyTasks : kMaxTasks;

        enum class Action { Split, Tile, Distribute, Reorder };
        std::vector<Action> actions(size_t(uniform(0, 3)), Action::Split);
        if (chance(35)) actions.push_back(Action::Tile);
        if (chance(60)) actions.push_back(Action::Distribute);
        if (chance(40)) actions.push_back(Action::Reorder);
        shuffle(actions);
        for (Action a : actions) {
            switch (a) {
            case Action::Split:
                split();
                break;
            case Action::Tile:
                tile();
                break;
            case Action::Distribute:
                distribute();
                break;
            case Action::Reorder:
                reorder();
                break;
            }
        }
        // The engine and prefetch depth do not name loops: any position is legal, and the
        // resolution must read them wherever they stand.
        if (engine_ == dsl::Engine::SHAVE) {
            // Last, so no later split renames or reshapes the loops they name.
            if (chance(60)) add_kernel_loop_directive(true);
            if (chance(40)) add_kernel_loop_directive(false);
            insert_anywhere([&](dsl::Schedule &s) { s.on_shave(); });
        } else {
            // Last, so no later split renames the loop it names.
            const bool workloads = chance(50) && add_workloads();
            // Without on_dpu the compiler chooses the engine (the DPU for these layers);
            // workloads need on_dpu.
            if (workloads || directives_.empty() || chance(90)) {
                std::string mode = mpe_mode();
                insert_anywhere([&](dsl::Schedule &s) { s.on_dpu(mode); });
            }
        }
        if (chance(70)) {
            int64_t depth = uniform(0, kMaxPrefetch);
            insert_anywhere([&](dsl::Schedule &s) { s.prefetch(depth); });
        }
        dsl::Schedule schedule;
        for (const dsl::Directive &d : directives_) schedule.add(d);
        return schedule;
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

    // --- the model --------------------------------------------------------------------------

    // An upper bound of the task count (clamping can leave iterations empty).
    int64_t task_count() const {
        int64_t n = 1;
        for (const GenLoop &l : loops_)
            if (l.task) n = std::min<int64_t>(n * l.extent, int64_t(1) << 40);
        return n;
    }

    size_t index_of(const std::string &name) const {
        for (size_t i = 0; i < loops_.size(); ++i)
            if (loops_[i].name == name) return i;
        return loops_.size(); // unreachable: names come from loops_
    }

    // Loops that split and distribute accept, preferring those with something to split.
    std::vector<std::string> reshapable(int dim = -1) const {
        std::vector<std::string> all, worth;
        for (const GenLoop &l : loops_) {
            if (l.tile_loop || (dim >= 0 && l.dim != dim)) continue;
            all.push_back(l.name);
            if (l.extent >= 2) worth.push_back(l.name);
        }
        return worth.empty() ? all : worth;
    }

    // Fresh names cannot clash: pure names have one letter, these a letter and a number.
    std::pair<std::string, std::string> new_names(const GenLoop &old) {
        const std::string n = std::to_string(++counter_);
        std::string outer = std::string(kDimNames[old.dim]) + "o" + n;
        std::string inner = std::string(kDimNames[old.dim]) + "i" + n;
        // The replaced loop's name may be reused, as in Halide's split(x, x, xi, 8).
        if (chance(25)) (chance(50) ? outer : inner) = old.name;
        return {outer, inner};
    }

    // Iterations of `l` that make one channel granule: on the DPU, task boundaries on a loop
    // from c fall on multiples of the channel alignment (resolve_loop_nest's channel_granule).
    int64_t granule_of(const GenLoop &l) const {
        if (l.dim != kDimC || channel_granule_ == 1) return 1;
        return channel_granule_ / std::gcd(channel_granule_, l.unit);
    }

    int64_t factor_for(const GenLoop &l) {
        const int64_t extent = l.extent, g = granule_of(l);
        if (chance(5) || extent <= g) return uniform(extent + 1, 2 * extent); // one task
        const int64_t granules = (extent + g - 1) / g;
        if (tiny_ && chance(60)) return g * uniform(1, std::min<int64_t>(3, granules));
        return g * uniform(1, granules); // often not dividing it
    }

    // The extents of a split: usually one factor; sometimes (uneven) two to four pieces of
    // whole granules, stopping once they cover the loop, since more would be an error.
    std::vector<int64_t> extents_for(const GenLoop &l) {
        const int64_t g = granule_of(l);
        if (l.extent <= g || chance(70)) return {factor_for(l)};
        const int64_t granules = (l.extent + g - 1) / g, pieces = uniform(2, 4);
        std::vector<int64_t> extents;
        int64_t covered = 0;
        while (int64_t(extents.size()) < pieces && covered < l.extent) {
            extents.push_back(g * uniform(1, std::max<int64_t>(1, granules / 2)));
            covered += extents.back();
        }
        return extents;
    }

    // resolve_loop_nest's split: outer (a task loop) and inner replace the loop in place; the
    // last extent repeats until the loop is covered.
    void apply_split(const std::string &name, const std::string &outer, const std::string &inner,
                     const std::vector<int64_t> &extents) {
        size_t at = index_of(name);
        GenLoop old = loops_[at];
        int64_t pieces = 0, largest = 0, common = 0;
        for (int64_t begin = 0; begin < old.extent; ++pieces) {
            const int64_t size =
                std::min(extents[size_t(std::min<int64_t>(pieces, int64_t(extents.size()) - 1))],
                         old.extent - begin);
            largest = std::max(largest, size);
            begin += size;
            if (begin < old.extent) common = std::gcd(common, size);
        }
        const int64_t unit = extents.size() == 1 ? extents[0] : std::max<int64_t>(1, common);
        GenLoop in{inner, largest, old.task, old.dim, false, old.unit};
        GenLoop out{outer, pieces, true, old.dim, false, old.unit * unit};
        loops_[at] = in;
        loops_.insert(loops_.begin() + long(at) + 1, out);
    }

    // Halide's reorder: the named loops take the positions they held, in the given order.
    void apply_reorder(const std::vector<std::string> &innermost_first) {
        std::vector<size_t> at;
        std::vector<GenLoop> moved;
        for (const std::string &name : innermost_first) {
            at.push_back(index_of(name));
            moved.push_back(loops_[at.back()]);
        }
        std::sort(at.begin(), at.end());
        for (size_t k = 0; k < at.size(); ++k) loops_[at[k]] = moved[k];
    }

    template <typename Build> void emit(Build &&build) {
        dsl::Schedule one;
        build(one);
        directives_.push_back(one.directives().front());
    }

    template <typename Build> void insert_anywhere(Build &&build) {
        dsl::Schedule one;
        build(one);
        size_t at = size_t(uniform(0, int64_t(directives_.size())));
        directives_.insert(directives_.begin() + long(at), one.directives().front());
    }

    // --- directives -------------------------------------------------------------------------

    // A few factors are tried; one that leaves too many tasks drops the directive.
    void split() {
        const std::string name = pick(reshapable());
        const GenLoop old = loops_[index_of(name)];
        for (int attempt = 0; attempt < 8; ++attempt) {
            const std::vector<int64_t> extents = extents_for(old);
            const auto saved = loops_;
            const auto [outer, inner] = new_names(old);
            apply_split(name, outer, inner, extents);
            if (task_count() <= budget_) {
                // Structured bindings are captured by copy: C++17 has no other way.
                emit([&, outer = outer, inner = inner](dsl::Schedule &s) {
                    s.split(name, outer, inner, extents);
                });
                return;
            }
            loops_ = saved;
        }
    }

    // Usually x by y; sometimes any two loops, which is as legal.
    void tile() {
        std::vector<std::string> candidates = reshapable();
        if (candidates.size() < 2) return;
        std::vector<std::string> xs = reshapable(kDimX), ys = reshapable(kDimY);
        std::string a, b;
        if (!xs.empty() && !ys.empty() && chance(70)) {
            a = pick(xs);
            b = pick(ys);
        } else {
            shuffle(candidates);
            a = candidates[0];
            b = candidates[1];
        }
        const GenLoop la = loops_[index_of(a)], lb = loops_[index_of(b)];
        for (int attempt = 0; attempt < 8; ++attempt) {
            const int64_t fa = factor_for(la), fb = factor_for(lb);
            const auto saved = loops_;
            // Distinct: fresh names are unique and each split reuses only its own loop's name.
            const auto [ao, ai] = new_names(la);
            const auto [bo, bi] = new_names(lb);
            apply_split(a, ao, ai, {fa});
            apply_split(b, bo, bi, {fb});
            apply_reorder({ai, bi, ao, bo});
            if (task_count() <= budget_) {
                emit([&, ao = ao, ai = ai, bo = bo, bi = bi](dsl::Schedule &s) {
                    s.tile(a, b, ao, bo, ai, bi, fa, fb);
                });
                return;
            }
            loops_ = saved;
        }
    }

    // SOH on y or a loop split from it, SOK likewise on c: the loop is cut into `tiles`
    // chunks, larger first, and keeps its name and task-ness; "v.tile" iterates the tiles.
    void distribute() {
        if (distributed_ || target_.tiles < 2) return;
        std::vector<std::pair<dsl::Strategy, int>> strategies = {
            {dsl::Strategy::SplitOverHeight, kDimY}, {dsl::Strategy::SplitOverKernel, kDimC}};
        if (chance(50)) std::swap(strategies[0], strategies[1]);
        for (const auto &[strategy, dim] : strategies) {
            std::vector<std::string> candidates;
            for (const std::string &name : reshapable(dim)) {
                const GenLoop &l = loops_[index_of(name)];
                if ((l.extent + granule_of(l) - 1) / granule_of(l) >= 2) candidates.push_back(name);
            }
            if (candidates.empty()) continue;
            // Mostly the pure loop, as people write it; sometimes a split part.
            const bool pure = std::count(candidates.begin(), candidates.end(), kDimNames[dim]);
            const std::string name = pure && chance(75) ? kDimNames[dim] : pick(candidates);
            const size_t at = index_of(name);
            const GenLoop old = loops_[at];
            // SOK cuts whole channel granules on the DPU.
            const int64_t g = strategy == dsl::Strategy::SplitOverKernel ? granule_of(old) : 1;
            const int64_t granules = (old.extent + g - 1) / g;
            const int64_t tiles = uniform(2, std::min<int64_t>(target_.tiles, granules));
            const auto saved = loops_;
            GenLoop rest = old;
            // The first, larger chunk.
            rest.extent = std::min(old.extent, (granules + tiles - 1) / tiles * g);
            GenLoop tile_loop{name + ".tile", tiles, true, -1, true, 1};
            loops_[at] = rest;
            loops_.insert(loops_.begin() + long(at) + 1, tile_loop);
            if (task_count() > budget_) {
                loops_ = saved;
                return;
            }
            emit([&, strategy = strategy](dsl::Schedule &s) {
                s.distribute(name, tiles, strategy);
            });
            distributed_ = true;
            return;
        }
    }

    // A random permutation of some task loops (which only changes the task order), sometimes
    // mixing in loops that run inside a task (the resolution moves those inward anyway).
    void reorder() {
        std::vector<std::string> names;
        for (const GenLoop &l : loops_)
            if (l.task) names.push_back(l.name);
        if (names.size() < 2 || chance(20)) {
            names.clear();
            for (const GenLoop &l : loops_) names.push_back(l.name);
        }
        shuffle(names);
        names.resize(size_t(uniform(2, int64_t(names.size()))));
        apply_reorder(names);
        emit([&](dsl::Schedule &s) { s.reorder(names); });
    }

    bool add_workloads() {
        std::vector<std::string> candidates;
        for (const GenLoop &l : loops_)
            if (!l.task && l.dim >= 0) candidates.push_back(l.name);
        if (candidates.empty()) return false;
        const std::string name = pick(candidates);
        // Variants along c cover whole channel groups.
        const GenLoop &l = loops_[index_of(name)];
        const int64_t units = (l.extent + granule_of(l) - 1) / granule_of(l);
        const int64_t count = uniform(1, std::min<int64_t>(6, units));
        emit([&](dsl::Schedule &s) { s.workloads(name, count); });
        return true;
    }

    // vectorize (by 2, 4, 8 or 16) or unroll a loop that runs inside a task: the SHAVE
    // kernel's loops.
    void add_kernel_loop_directive(bool vectorize) {
        std::vector<std::string> candidates;
        for (const GenLoop &l : loops_)
            if (!l.task && l.dim >= 0 && !kernel_loop_used_.count(l.name))
                candidates.push_back(l.name);
        if (candidates.empty()) return;
        const std::string name = pick(candidates);
        kernel_loop_used_.insert(name);
        if (vectorize) {
            const int64_t width = int64_t(1) << uniform(1, 4);
            emit([&](dsl::Schedule &s) { s.vectorize(name, width); });
        } else {
            emit([&](dsl::Schedule &s) { s.unroll(name); });
        }
    }

    // "" (the compiler chooses) or a mode that takes the layer's input type.
    std::string mpe_mode() {
        std::vector<std::string> modes = {""};
        if (!layer_.inputs().empty()) {
            const dsl::ElemType type = layer_.inputs()[0].output().type;
            const bool int8 = dsl::is_quantized_int(type), fp16 = type == dsl::ElemType::F16;
            for (const target::MpeMode &m : target_.mpe_modes)
                if ((int8 && m.int8) || (fp16 && m.fp16)) modes.push_back(m.name);
        }
        return pick(modes);
    }

    const dsl::Layer &layer_;
    const target::Target &target_;
    std::mt19937 &rng_;
    const dsl::Engine engine_;
    const int64_t channel_granule_;
    std::vector<GenLoop> loops_;             // innermost first
    std::set<std::string> kernel_loop_used_; // vectorized or unrolled
    std::vector<dsl::Directive> directives_;
    bool tiny_ = false, distributed_ = false;
    int64_t budget_ = kMaxTasks;
    int counter_ = 0;
};

} // namespace

dsl::Schedule random_schedule(const dsl::Layer &layer, const target::Target &target,
                              std::mt19937 &rng, dsl::Engine engine) {
    return Generator(layer, target, rng, engine).run();
}

} // namespace vpuc::schedules
