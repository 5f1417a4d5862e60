// Passes reduce_dependencies, assign_barriers and map_physical_barriers: dependencies implied
// by others are dropped, the rest become virtual barriers, and the virtual barriers share the
// target's few physical ones, with work serialized where there are not enough of them.
//
// Where the physical barriers run out, the mapping orders tasks that could have run at once.
// Pass order_as_run, before assign_barriers, then asks the simulator (timing only) when each
// task starts with a physical barrier for every virtual one and puts the program in that order,
// where the barriers free for reuse are those of tasks long done; assign_barriers then lets the
// DPU tasks a multi-DPU tile ran at once share a barrier.
//
// "Task a finishes before task b starts" is answered with vector clocks, not a reachability
// matrix: each queue runs its tasks in program order, so the tasks of a queue that come before
// b are a prefix of that queue, and one count per queue says which. That is tasks x queues
// numbers (8 MB for 100k tasks on 20 queues) and one lookup per question.
#include <algorithm>
#include <climits>
#include <cstdint>
#include <map>
#include <string>
#include <tuple>
#include <utility>

#include "passes.h"
#include "vpu_target/simulator.h"

namespace vpuc::codegen {

namespace {

// Every task's queue and its place in it. A queue is one engine: a DMA engine, a DPU of a
// tile, the SHAVEs of a tile.
struct Queues {
    std::vector<int> queue;         // per task
    std::vector<uint32_t> position; // per task: how many tasks of its queue come before it
    std::vector<int> previous;      // per task: the task before it on its queue, or -1
    int count = 0;

    explicit Queues(const Program &p) {
        std::map<std::tuple<int, uint32_t, uint32_t>, int> id;
        std::vector<int> last;
        for (int t = 0; t < int(p.tasks.size()); ++t) {
            const TaskIR &task = p.tasks[size_t(t)];
            auto [it, fresh] =
                id.try_emplace(std::make_tuple(int(task.engine), task.tile, task.index), count);
            if (fresh) {
                ++count;
                last.push_back(-1);
            }
            const int q = it->second;
            queue.push_back(q);
            previous.push_back(last[size_t(q)]);
            position.push_back(previous.back() < 0 ? 0 : position[size_t(previous.back())] + 1);
            last[size_t(q)] = t;
        }
    }
};

// The order in which a program's tasks must run: queue order plus the edges added (the later
// task waits for the earlier one). Edges only go forward in program order, so program order
// is a topological order and each task's clock follows from its predecessors' clocks.
// Edges can be added at any time: clocks are recomputed lazily from the first task whose
// predecessors changed.
class Order {
  public:
    explicit Order(const Program &p)
        : queues_(p), preds_(p.tasks.size()), clocks_(p.tasks.size() * size_t(queues_.count), 0) {}

    const Queues &queues() const { return queues_; }

    void add_edge(int from, int to) {
        preds_[size_t(to)].push_back(from);
        valid_ = std::min(valid_, to);
    }

    // `a` finishes before `b` starts.
    bool before(int a, int b) {
        if (a >= b) return false;
        update_to(b);
        return clock(b)[queues_.queue[size_t(a)]] > queues_.position[size_t(a)];
    }
    bool before_or_same(int a, int b) { return a == b || before(a, b); }
    bool same_queue(int a, int b) const {
        return queues_.queue[size_t(a)] == queues_.queue[size_t(b)];
    }

  private:
    // clock(t)[q]: how many tasks of queue q finish before t starts.
    uint32_t *clock(int t) { return &clocks_[size_t(t) * size_t(queues_.count)]; }

    void update_to(int t) {
        for (; valid_ <= t; ++valid_) {
            uint32_t *c = clock(valid_);
            std::fill(c, c + queues_.count, 0);
            auto merge = [&](int e) {
                const uint32_t *from = clock(e);
                for (int q = 0; q < queues_.count; ++q) c[q] = std::max(c[q], from[q]);
                uint32_t &own = c[queues_.queue[size_t(e)]];
                own = std::max(own, queues_.position[size_t(e)] + 1);
            };
            if (queues_.previous[size_t(valid_)] >= 0) merge(queues_.previous[size_t(valid_)]);
            for (int e : preds_[size_t(valid_)]) merge(e);
        }
    }

    Queues queues_;
    std::vector<std::vector<int>> preds_;
    std::vector<uint32_t> clocks_;
    int valid_ = 0; // clocks of tasks [0, valid_) are up to date
};

// Assigns the virtual barriers of a program to physical ones, in order of their first
// producer. A physical barrier passes from virtual barrier u to the next one v only once every
// consumer of u is ordered before every producer of v (the verifier's rule: the hardware moves
// on once u's consumers have started, and v's producers must not count down before). When no
// physical barrier is free, one is freed by adding order instead of failing (make_room).
//
// Every change keeps the ordering the barriers had: a dependency a -> c that a change removes
// is replaced by a path a -> x -> c, and every barrier's producers come before its consumers in
// program order, so the program stays free of deadlock. A task produces at most one barrier
// besides relays (below), and a relay is never the latest barrier on its physical barrier: so
// the latest barrier on every physical barrier has a producer before the first producer of the
// barrier being placed, and make_room can always release one.
class BarrierMapper {
  public:
    BarrierMapper(Program &p, int physical_count)
        : p_(p), order_(p), last_on_(size_t(physical_count), -1) {
        for (const BarrierIR &b : p_.barriers)
            for (int c : b.consumers)
                for (int t : b.producers) order_.add_edge(t, c);
        for (BarrierIR &b : p_.barriers) push(std::move(b));
    }

    void run() {
        while (!pending_.empty()) {
            BarrierIR v = std::move(pending_.begin()->second);
            pending_.erase(pending_.begin());
            if (place_where_free(v)) continue;
            // Free a physical barrier for the first producer alone: the others follow later.
            if (v.producers.size() > 1) {
                push({{v.producers.begin() + 1, v.producers.end()}, v.consumers, -1});
                v.producers.resize(1);
                if (place_where_free(v)) continue;
            }
            make_room(v);
            ++serialized_;
        }
        p_.barriers = std::move(placed_);
    }

    // How many barriers were placed by ordering work (make_room), none being free.
    int serialized() const { return serialized_; }

  private:
    void push(BarrierIR b) {
        std::sort(b.producers.begin(), b.producers.end());
        std::sort(b.consumers.begin(), b.consumers.end());
        const int first = b.producers.front();
        pending_.emplace(std::make_pair(first, pushed_++), std::move(b));
    }

    void place(BarrierIR b, int physical) {
        b.physical = physical;
        last_on_[size_t(physical)] = int(placed_.size());
        placed_.push_back(std::move(b));
    }

    bool ordered(const std::vector<int> &first, const std::vector<int> &then) {
        for (int a : first)
            for (int b : then)
                if (!order_.before_or_same(a, b)) return false;
        return true;
    }

    bool place_where_free(BarrierIR &v) {
        for (int id = 0; id < int(last_on_.size()); ++id) {
            const int u = last_on_[size_t(id)];
            if (u < 0 || ordered(placed_[size_t(u)].consumers, v.producers)) {
                place(std::move(v), id);
                return true;
            }
        }
        return false;
    }

    // How the last barrier u of a physical barrier is released for v, whose one producer is
    // `p`. u's consumers before p in program order are chained, each waiting for the one
    // before through a relay barrier on the same physical barrier, and p waits for the last;
    // u's consumers after p wait for p instead of u (they join v). u's producers after p go
    // back to the pending barriers. Every barrier on the physical barrier then has one
    // consumer, which the next one's producer follows.
    struct Eviction {
        std::vector<int> kept, moved;           // u's producers before and after p
        std::vector<int> early, late;           // u's consumers before and after p
        std::vector<std::pair<int, int>> relay; // (from, to): `to` newly waits for `from`
        int new_waits = 0; // orderings added before p, which delay work already issued

        // Best first: no split; fewest new waits; consumers delayed as far ahead as possible.
        std::tuple<bool, int, int> cost() const {
            return {!moved.empty(), new_waits, late.empty() ? INT_MIN : -late.front()};
        }
    };

    Eviction plan_eviction(const BarrierIR &u, int p) {
        Eviction e;
        for (int t : u.producers) (t < p ? e.kept : e.moved).push_back(t);
        for (int c : u.consumers) {
            if (c < p) e.early.push_back(c);
            if (c > p) e.late.push_back(c);
        }
        if (e.early.empty()) {
            for (int t : e.kept) e.new_waits += order_.before(t, p) ? 0 : 1;
            return e;
        }
        int last = e.early.front();
        std::vector<int> chain(e.early.begin() + 1, e.early.end());
        chain.push_back(p);
        for (int c : chain) {
            if (!order_.before_or_same(last, c)) e.relay.emplace_back(last, c);
            last = c;
        }
        e.new_waits += int(e.relay.size());
        return e;
    }

    void make_room(BarrierIR &v) {
        const int p = v.producers.front();
        int id = -1;
        Eviction best;
        for (int k = 0; k < int(last_on_.size()); ++k) {
            Eviction e = plan_eviction(placed_[size_t(last_on_[size_t(k)])], p);
            if (e.kept.empty()) continue; // cannot happen: see the class comment
            if (id < 0 || e.cost() < best.cost()) {
                id = k;
                best = std::move(e);
            }
        }
        if (id < 0)
            throw LoweringError("barriers: no physical barrier can be freed for task '" +
                                p_.tasks[size_t(p)].name + "'");
        BarrierIR &u = placed_[size_t(last_on_[size_t(id)])];
        if (!best.moved.empty()) push({best.moved, u.consumers, -1});
        u.producers = best.kept;
        if (best.early.empty()) {
            u.consumers = {p};
            for (int t : u.producers) order_.add_edge(t, p);
        } else {
            u.consumers = {best.early.front()};
        }
        for (auto [from, to] : best.relay) {
            order_.add_edge(from, to);
            place({{from}, {to}, -1}, id);
        }
        // (Only the queue is asked about: ordering far-off tasks would compute their clocks
        // early, and again after every change.)
        for (int c : best.late)
            if (!order_.same_queue(p, c)) {
                v.consumers.push_back(c);
                order_.add_edge(p, c);
            }
        std::sort(v.consumers.begin(), v.consumers.end());
        v.consumers.erase(std::unique(v.consumers.begin(), v.consumers.end()), v.consumers.end());
        place(std::move(v), id);
    }

    Program &p_;
    Order order_;
    std::map<std::pair<int, int>, BarrierIR> pending_; // by (first producer, arrival)
    int pushed_ = 0;
    int serialized_ = 0;
    std::vector<BarrierIR> placed_; // the result, in the order the physical barriers take them
    std::vector<int> last_on_;      // per physical barrier: its latest barrier in placed_, or -1
};

} // namespace

void reduce_dependencies(LoweringState &s) {
    auto &tasks = s.program.tasks;
    Order order(s.program);
    for (int t = 0; t < int(tasks.size()); ++t) {
        auto &deps = tasks[size_t(t)].deps;
        std::vector<int> unique;
        for (int d : deps)
            if (std::find(unique.begin(), unique.end(), d) == unique.end()) unique.push_back(d);
        deps = std::move(unique);
        for (int d : deps) order.add_edge(d, t);
    }
    // A dependency is implied when it finishes before another of the task's dependencies, or
    // before the task's predecessor on its queue (which covers dependencies on the same
    // queue). The implied ones can all go at once: in a DAG the ones left keep every path.
    // (VPUX's optimize-async-deps does the same on its async tokens.)
    for (int t = 0; t < int(tasks.size()); ++t) {
        auto &deps = tasks[size_t(t)].deps;
        const int previous = order.queues().previous[size_t(t)];
        std::vector<int> kept;
        for (int d : deps) {
            bool implied = previous >= 0 && order.before_or_same(d, previous);
            for (size_t i = 0; i < deps.size() && !implied; ++i)
                implied = deps[i] != d && order.before(d, deps[i]);
            if (!implied) kept.push_back(d);
        }
        deps = std::move(kept);
    }
}

namespace {

// DPU tasks that finish within this share of the shortest one's time of each other may share
// a barrier (barriers_of): a reader waiting for all of them then waits at most that much longer.
// A tenth: with a quarter, vpu20's ResNet-50 fp16 ran 3% slower (docs/graph-scheduling.md).
constexpr double kWaveSpread = 0.1;

// The virtual barriers of a program's dependencies across queues. Producers the same tasks
// wait for share one barrier: those tasks wait on one barrier rather than one per producer,
// and fewer barriers are in use at once. Given when the tasks ran (`times`, the program in
// that order), the DPU tasks of a layer on a tile share one too, as many at a time as the tile
// has DPUs, consecutive, finishing within kWaveSpread of their time of each other, and each
// before every task waiting for any of them in the program: the tasks the tile's DPUs ran at
// once.
std::vector<BarrierIR> barriers_of(const Program &p, int dpus_per_tile,
                                   const RunTimes *times = nullptr) {
    const Queues queues(p);
    // Who waits for each task from another queue (its own queue orders it already).
    std::vector<std::vector<int>> waiting(p.tasks.size());
    for (int t = 0; t < int(p.tasks.size()); ++t)
        for (int d : p.tasks[size_t(t)].deps) {
            auto &w = waiting[size_t(d)];
            if (queues.queue[size_t(d)] != queues.queue[size_t(t)] && (w.empty() || w.back() != t))
                w.push_back(t);
        }
    std::vector<BarrierIR> barriers;
    if (times && dpus_per_tile > 1) {
        std::map<std::pair<std::string, uint32_t>, std::vector<int>> by_layer_and_tile;
        for (int d = 0; d < int(p.tasks.size()); ++d) {
            const TaskIR &t = p.tasks[size_t(d)];
            if (t.engine == blob::EngineKind::Dpu && !waiting[size_t(d)].empty())
                by_layer_and_tile[{t.layer, t.tile}].push_back(d);
        }
        auto duration = [&](int t) {
            return times->end_ns[size_t(t)] - times->start_ns[size_t(t)];
        };
        for (const auto &[key, producers] : by_layer_and_tile)
            for (size_t i = 0; i < producers.size();) {
                std::vector<int> wave{producers[i]};
                double first_end = times->end_ns[size_t(producers[i])], last_end = first_end;
                double shortest = duration(producers[i]);
                for (++i; i < producers.size() && int(wave.size()) < dpus_per_tile; ++i) {
                    const int t = producers[i];
                    const double end = times->end_ns[size_t(t)];
                    if (std::max(last_end, end) - std::min(first_end, end) >
                        kWaveSpread * std::min(shortest, duration(t)))
                        break;
                    first_end = std::min(first_end, end);
                    last_end = std::max(last_end, end);
                    shortest = std::min(shortest, duration(t));
                    wave.push_back(t);
                }
                if (wave.size() < 2) continue;
                std::vector<int> consumers;
                for (int d : wave)
                    consumers.insert(consumers.end(), waiting[size_t(d)].begin(),
                                     waiting[size_t(d)].end());
                std::sort(consumers.begin(), consumers.end());
                consumers.erase(std::unique(consumers.begin(), consumers.end()), consumers.end());
                if (wave.back() >= consumers.front()) continue;
                barriers.push_back({wave, consumers, -1});
                for (int d : wave) waiting[size_t(d)].clear();
            }
    }
    std::map<std::vector<int>, size_t> barrier_of;
    for (int d = 0; d < int(p.tasks.size()); ++d) {
        if (waiting[size_t(d)].empty()) continue;
        auto [it, fresh] = barrier_of.try_emplace(waiting[size_t(d)], barriers.size());
        if (fresh) barriers.push_back({{}, waiting[size_t(d)], -1});
        barriers[it->second].producers.push_back(d);
    }
    return barriers;
}

// `program` with `tasks` for a timing-only run: the same buffers, every constant buffer at the
// start of a section of zeros as large as the largest (they overlap, and nothing writes them).
// Timing reads no constant's values, and copying a network's tens of megabytes of weights into
// each trial blob would cost more than the run.
Program timing_copy(const Program &program, std::vector<TaskIR> tasks) {
    Program copy;
    copy.name = program.name;
    copy.inputs = program.inputs;
    copy.outputs = program.outputs;
    copy.buffers = program.buffers;
    copy.kernels = program.kernels;
    copy.tasks = std::move(tasks);
    copy.scratch_bytes = program.scratch_bytes;
    uint64_t largest = 0;
    for (BufferDecl &b : copy.buffers)
        if (b.space == blob::MemSpace::Constant) {
            b.offset = 0;
            largest = std::max(largest, b.bytes);
        }
    copy.constants.assign(largest, 0);
    return copy;
}

// When each of `tasks` (`s`'s program's, or another form of them) starts and ends with a
// physical barrier for each of their virtual `barriers`, as the simulator runs them (timing
// only).
RunTimes simulate_without_barrier_limit(const LoweringState &s, std::vector<TaskIR> tasks,
                                        std::vector<BarrierIR> barriers) {
    target::Target roomy = s.target;
    LoweringState trial(s.graph, roomy, timing_copy(s.program, std::move(tasks)));
    trial.program.barriers = std::move(barriers);
    roomy.barriers = std::max(roomy.barriers, int(trial.program.barriers.size()));
    for (size_t b = 0; b < trial.program.barriers.size(); ++b)
        trial.program.barriers[b].physical = int(b);
    // Named by their indices, the simulator's records name the tasks.
    for (size_t t = 0; t < trial.program.tasks.size(); ++t)
        trial.program.tasks[t].name = std::to_string(t);
    assemble(trial);
    const sim::RunResult run = sim::Simulator(roomy, std::move(trial.blob), sim::Checks::Timing)
                                   .run({}, sim::Mode::TimingOnly);
    const size_t n = trial.program.tasks.size();
    RunTimes ran{std::vector<double>(n, -1), std::vector<double>(n, -1)};
    for (const sim::TaskRecord &r : run.tasks) {
        const size_t t = std::stoul(r.name);
        ran.start_ns.at(t) = r.start_ns;
        ran.end_ns.at(t) = r.end_ns;
    }
    if (std::count(ran.start_ns.begin(), ran.start_ns.end(), -1.0) > 0)
        throw LoweringError("timing trial: the simulator did not run every task of the program");
    return ran;
}

} // namespace

std::optional<double> simulated_latency_ns(const LoweringState &s, std::vector<TaskIR> tasks) {
    Program queues; // the tasks are all barriers_of reads
    queues.tasks = std::move(tasks);
    std::vector<BarrierIR> barriers = barriers_of(queues, 1);
    // The trial blob holds each barrier's id in 16 bits.
    if (queues.tasks.empty() || barriers.size() > size_t(UINT16_MAX) + 1) return std::nullopt;
    const RunTimes ran =
        simulate_without_barrier_limit(s, std::move(queues.tasks), std::move(barriers));
    return *std::max_element(ran.end_ns.begin(), ran.end_ns.end());
}

void order_as_run(LoweringState &s) {
    // (A target without barriers is map_physical_barriers' error to report.)
    if (s.program.tasks.empty() || s.target.barriers < 1) return;
    Program trial; // the tasks and barriers are all the mapping reads
    trial.tasks = s.program.tasks;
    std::vector<BarrierIR> virtual_barriers = barriers_of(trial, 1);
    trial.barriers = virtual_barriers; // the mapping consumes its copy
    // The trial blob gives each virtual barrier a physical one, whose id the blob holds in 16
    // bits: a program of more barriers keeps its program order.
    const bool simulable = virtual_barriers.size() <= size_t(UINT16_MAX) + 1;
    BarrierMapper in_program_order(trial, s.target.barriers);
    in_program_order.run();
    if (in_program_order.serialized() == 0 || !simulable) return;
    const RunTimes ran =
        simulate_without_barrier_limit(s, s.program.tasks, std::move(virtual_barriers));
    auto &tasks = s.program.tasks;
    std::vector<int> order(tasks.size());
    for (size_t i = 0; i < order.size(); ++i) order[i] = int(i);
    // Each queue keeps its order, and every task still comes after the tasks it waits for.
    std::stable_sort(order.begin(), order.end(), [&](int a, int b) {
        return ran.start_ns[size_t(a)] < ran.start_ns[size_t(b)];
    });
    RunTimes in_order;
    for (int t : order) {
        in_order.start_ns.push_back(ran.start_ns[size_t(t)]);
        in_order.end_ns.push_back(ran.end_ns[size_t(t)]);
    }
    tasks = reordered(tasks, order);
    const std::vector<int> new_index = new_indices(order);
    s.renumber_tasks([&](int old) { return new_index[size_t(old)]; });
    s.run_times = std::move(in_order);
    s.notes.push_back("order_as_run: the " + std::to_string(s.target.barriers) +
                      " physical barriers ran out " +
                      std::to_string(in_program_order.serialized()) +
                      " time(s) in program order: the program is put in the order its tasks run "
                      "(docs/graph-scheduling.md)");
}

void assign_barriers(LoweringState &s) {
    s.program.barriers =
        barriers_of(s.program, s.target.dpus_per_tile, s.run_times ? &*s.run_times : nullptr);
}

void map_physical_barriers(LoweringState &s) {
    if (s.program.barriers.empty()) return;
    if (s.target.barriers < 1)
        throw LoweringError("barriers: target '" + s.target.name + "' has no physical barriers");
    BarrierMapper mapper(s.program, s.target.barriers);
    mapper.run();
    if (s.run_times)
        s.notes.push_back("map_physical_barriers: in the order the tasks run, the barriers ran "
                          "out " +
                          std::to_string(mapper.serialized()) + " time(s)");
}

void verify_barriers(const LoweringState &s) {
    const auto &p = s.program;
    for (size_t b = 0; b < p.barriers.size(); ++b) {
        const BarrierIR &bar = p.barriers[b];
        if (bar.physical < 0 || bar.physical >= s.target.barriers || bar.producers.empty() ||
            bar.consumers.empty())
            throw LoweringError("barriers: barrier " + std::to_string(b) +
                                " has no physical barrier, producer or consumer");
        // Queues run in program order: a task that waited on a later task could deadlock.
        for (int t : bar.producers)
            for (int c : bar.consumers)
                if (t >= c)
                    throw LoweringError("barriers: task '" + p.tasks[size_t(c)].name +
                                        "' waits on barrier " + std::to_string(b) +
                                        " of the later task '" + p.tasks[size_t(t)].name + "'");
    }
}

} // namespace vpuc::codegen
