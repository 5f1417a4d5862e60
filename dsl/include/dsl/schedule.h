// A schedule: how a layer's algorithm runs on the VPU. Data, not code: it prints, serializes
// to JSON and loads back identically, so the autotuner can generate, mutate and store it.
//
// Vocabulary (Halide's, plus the VPU's). Loops are named; a layer starts with the loops of its
// pure variables c, x, y (innermost first, as in Halide).
//   split(v, outer, inner, f)    v becomes outer * f + inner
//   split(v, outer, inner, {e0, e1, ...})   uneven: iteration k of outer covers the next e_k
//                                iterations of v, the last extent repeating until v is covered
//                                (split(v, o, i, f) is split(v, o, i, {f}))
//   tile(x, y, xo, yo, xi, yi, fx, fy)   split x and y, then order xi, yi, xo, yo
//   reorder(v0, v1, ...)         innermost first, as Halide
//   fuse(inner, outer, fused)
//   unroll(v) / vectorize(v, f)  SHAVE kernels only (Halide schedules them)
//   compute_root()               computed whole, result in DDR (the default)
//   compute_at(consumer, loop)   computed per iteration of the consumer's `loop`, kept in CMX
//                                (layer grouping; halos are recomputed)
//   store_in(CMX | DDR)          where the output lives: DDR at root, CMX when computed at a
//                                consumer; CMX at root keeps the whole output in the CMX of
//                                every tile that uses it (output broadcast)
//   on_dpu(mode) / on_shave()    the engine; mode "" lets the compiler choose the MPE mode
//   workloads(v, n)              split each DPU task into n variants along v
//   distribute(v, tiles, strategy)   spread v over NCE tiles: SOH, SOK, Clustering, HKSwitch
//                                (SOH with the output broadcast: implies store_in(CMX))
//   prefetch(depth)              load the inputs of `depth` tasks ahead (double buffering: 1)
//   spill()                      write the output to DDR and reload it where it is consumed
//                                (what a layer computed at root does; an error with compute_at)
//
// The outer loops made by split/tile are task loops: each of their iterations is one DPU or
// SHAVE task with its own DMAs. Whatever lies inside them runs inside one task.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "vpu_target/error.h"

namespace vpuc::dsl {

enum class MemoryLevel { CMX, DDR };
enum class Engine { Auto, DPU, SHAVE };
enum class Strategy { SplitOverHeight, SplitOverKernel, Clustering, HKSwitch };

const char *to_string(MemoryLevel level);
const char *to_string(Strategy strategy); // "SOH", "SOK", "Clustering", "HKSwitch"

struct Directive {
    enum class Kind {
        Split,
        Tile,
        Reorder,
        Fuse,
        Unroll,
        Vectorize,
        ComputeRoot,
        ComputeAt,
        StoreIn,
        OnDpu,
        OnShave,
        Workloads,
        Distribute,
        Prefetch,
        Spill,
    };
    Kind kind = Kind::Split;
    std::vector<std::string> loops; // loop names, in the directive's argument order
    std::vector<int64_t> factors;   // split factors (extents), counts, tiles, depth
    std::string name;               // compute_at: the consumer layer; on_dpu: the MPE mode
    MemoryLevel memory = MemoryLevel::DDR;
    Strategy strategy = Strategy::SplitOverHeight;

    bool operator==(const Directive &o) const;
    std::string to_string() const; // "split(y, yo, yi, 8)"
};

const char *to_string(Directive::Kind kind); // "split", "compute_at", ...

class Schedule {
  public:
    Schedule &split(const std::string &loop, const std::string &outer, const std::string &inner,
                    int64_t factor);
    Schedule &split(const std::string &loop, const std::string &outer, const std::string &inner,
                    const std::vector<int64_t> &extents);
    Schedule &tile(const std::string &x, const std::string &y, const std::string &xo,
                   const std::string &yo, const std::string &xi, const std::string &yi, int64_t fx,
                   int64_t fy);
    Schedule &reorder(const std::vector<std::string> &innermost_first);
    Schedule &fuse(const std::string &inner, const std::string &outer, const std::string &fused);
    Schedule &unroll(const std::string &loop);
    Schedule &vectorize(const std::string &loop, int64_t factor);
    Schedule &compute_root();
    Schedule &compute_at(const std::string &consumer, const std::string &loop);
    Schedule &store_in(MemoryLevel level);
    Schedule &on_dpu(const std::string &mpe_mode = "");
    Schedule &on_shave();
    Schedule &workloads(const std::string &loop, int64_t count);
    Schedule &distribute(const std::string &loop, int64_t tiles, Strategy strategy);
    Schedule &prefetch(int64_t depth);
    Schedule &spill();

    Schedule &add(Directive d);
    const std::vector<Directive> &directives() const { return directives_; }
    bool empty() const { return directives_.empty(); }
    // The engine the schedule asks for: its last on_dpu/on_shave, Auto without one.
    Engine engine() const;
    bool operator==(const Schedule &o) const { return directives_ == o.directives_; }
    bool operator!=(const Schedule &o) const { return !(*this == o); }

    // "split(y, yo, yi, 8).on_dpu(CUBOID_16x16).prefetch(1)"
    std::string to_string() const;
    // The printed chain read back: parse(s.to_string()) == s, unless a loop name is empty or a
    // name holds white space, a comma, a parenthesis or a brace (names from JSON may). Throws
    // ScheduleError naming the directive and what is wrong with it.
    static Schedule parse(const std::string &chain);
    // JSON text: an array of {"directive": "split", "loops": [...], ...}. Names are UTF-8 in
    // JSON: bytes of a name that are not UTF-8 are written as U+FFFD, so only such a schedule
    // does not read back identically.
    std::string to_json() const;
    // Throws ScheduleError naming the entry and field on malformed JSON.
    static Schedule from_json(const std::string &text);

  private:
    std::vector<Directive> directives_;
};

// An illegal schedule. The message names the layer and the directive and lists what is legal.
class ScheduleError : public Error {
  public:
    using Error::Error;
};

} // namespace vpuc::dsl
