#include "codegen/shave_kernel.h"

#include <algorithm>
#include <cctype>
#include <climits>
#include <cmath>
#include <cstdio>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <sstream>

#include "codegen/bounds.h"
#include "kernel_disk_cache.h"

namespace vpuc::codegen {

namespace {

using namespace Halide::Internal;
using Halide::Internal::Interval; // not codegen's (loop_nest.h)

[[noreturn]] void fail(const std::string &kernel, const std::string &why) {
    throw ShaveKernelError("SHAVE kernel '" + kernel + "': " + why);
}

bool is_c_identifier(const std::string &name) {
    if (name.empty() || std::isdigit(static_cast<unsigned char>(name[0]))) return false;
    return std::all_of(name.begin(), name.end(), [](char c) {
        return std::isalnum(static_cast<unsigned char>(c)) || c == '_';
    });
}

bool to_dtype(const Halide::Type &type, target::DType &dtype) {
    if (type == Halide::UInt(8))
        dtype = target::DType::U8;
    else if (type == Halide::Int(8))
        dtype = target::DType::I8;
    else if (type == Halide::Float(16))
        dtype = target::DType::F16;
    else if (type == Halide::Float(32))
        dtype = target::DType::F32;
    else if (type == Halide::Int(32))
        dtype = target::DType::I32;
    else
        return false;
    return true;
}

std::string type_name(const Halide::Type &type) {
    std::ostringstream out;
    out << type;
    return out.str();
}

KernelArgDesc describe_argument(const std::string &kernel, const Halide::Argument &arg) {
    KernelArgDesc desc;
    desc.name = arg.name;
    if (!to_dtype(arg.type, desc.dtype))
        fail(kernel, "argument '" + arg.name + "' has type " + type_name(arg.type) +
                         "; kernel arguments are uint8, int8, float16, float32 or int32");
    if (arg.is_buffer()) {
        desc.kind = arg.is_input() ? KernelArgKind::InputBuffer : KernelArgKind::OutputBuffer;
        desc.rank = arg.dimensions;
    } else {
        desc.kind = arg.type.is_float() ? KernelArgKind::ScalarFloat : KernelArgKind::ScalarInt;
    }
    return desc;
}

// True when the caller scheduled some stage of `f`: Halide marks a stage "touched" when its
// loops are split, reordered, vectorized... or it is declared unscheduled.
bool is_scheduled(const Halide::Func &f) {
    const Function &function = f.function();
    return function.definition().schedule().touched() ||
           std::any_of(function.updates().begin(), function.updates().end(),
                       [](const Definition &u) { return u.schedule().touched(); });
}

// Parallel loops would need Halide's thread pool, and the simulator already splits a kernel
// across SHAVEs itself, by output crops.
void refuse_parallel_loops(const std::string &kernel, const Halide::Func &output) {
    for (const auto &[name, function] : find_transitive_calls(output.function())) {
        std::vector<Definition> stages{function.definition()};
        stages.insert(stages.end(), function.updates().begin(), function.updates().end());
        for (const Definition &stage : stages)
            for (const Dim &dim : stage.schedule().dims())
                if (dim.for_type == ForType::Parallel)
                    fail(kernel, "Func '" + name + "' has a parallel loop over '" + dim.var +
                                     "'; the simulator splits a kernel across SHAVEs itself, "
                                     "by output crops");
    }
}

ShaveKernelCost &operator+=(ShaveKernelCost &a, const ShaveKernelCost &b) {
    a.arith_ops += b.arith_ops;
    a.special_ops += b.special_ops;
    a.cmx_bytes += b.cmx_bytes;
    return a;
}

ShaveKernelCost scaled(ShaveKernelCost c, double factor) {
    c.arith_ops *= factor;
    c.special_ops *= factor;
    c.cmx_bytes *= factor;
    return c;
}

// Each figure at its larger side: a branch's cost when nothing decides which side runs.
ShaveKernelCost larger(const ShaveKernelCost &a, const ShaveKernelCost &b) {
    return {std::max(a.arith_ops, b.arith_ops), std::max(a.special_ops, b.special_ops),
            std::max(a.cmx_bytes, b.cmx_bytes)};
}

// The special-function instructions a math call of Halide's lowered code ("exp_f16",
// "floor_f32", ...) costs: rounding is an ordinary instruction, pow is a log and an exp, every
// other function (exp, log, sqrt, tanh, trigonometry...) one special-function instruction.
int special_instructions_of(const std::string &function) {
    for (const char *ordinary :
         {"floor_", "ceil_", "round_", "trunc_", "is_nan_", "is_inf_", "is_finite_"})
        if (function.rfind(ordinary, 0) == 0) return 0;
    return function.rfind("pow_", 0) == 0 ? 2 : 1;
}

// Counts what an expression or a store executes, in native vectors (an op on a wider vector
// takes several registers) and bytes moved. In vector code, address arithmetic (load/store
// indices, ramps, scalar lets) is left out: it runs in the SHAVE's scalar/address units
// alongside the vector unit. Loads and stores run on the load/store units: they count as
// bytes, not as instructions.
class OpCounter : public IRVisitor {
  public:
    OpCounter(int vector_bits, bool vector_loop)
        : vector_bits_(vector_bits), vector_loop_(vector_loop) {}
    ShaveKernelCost cost;

  private:
    using IRVisitor::visit;

    double vectors(const Halide::Type &type) const {
        if (vector_loop_ && type.is_scalar()) return 0;
        const int bits = std::max(type.bits(), 8) * type.lanes();
        return std::max(1, (bits + vector_bits_ - 1) / vector_bits_);
    }
    void count(const Halide::Type &type) { cost.arith_ops += vectors(type); }
    void count_special(const Halide::Type &type, int instructions) {
        cost.special_ops += instructions * vectors(type);
    }
    void count_bytes(const Halide::Type &type) { cost.cmx_bytes += type.bytes() * type.lanes(); }
    // A conversion or comparison costs as much as its widest side.
    const Halide::Type &wider(const Halide::Type &a, const Halide::Type &b) {
        return a.bits() >= b.bits() ? a : b;
    }

    template <typename T> void binary(const T *op) {
        count(wider(op->type, op->a.type()));
        IRVisitor::visit(op);
    }
    void visit(const Add *op) override { binary(op); }
    void visit(const Sub *op) override { binary(op); }
    void visit(const Mul *op) override { binary(op); }
    // The SHAVE has no vector divide: a float division is a special-function reciprocal (and
    // its multiply); an integer one by a constant, as Halide emits it, a multiply and shifts.
    void visit(const Div *op) override {
        if (op->type.is_float()) {
            count_special(op->type, 1);
            IRVisitor::visit(op);
        } else {
            binary(op);
        }
    }
    void visit(const Mod *op) override { binary(op); }
    void visit(const Min *op) override { binary(op); }
    void visit(const Max *op) override { binary(op); }
    void visit(const EQ *op) override { binary(op); }
    void visit(const NE *op) override { binary(op); }
    void visit(const LT *op) override { binary(op); }
    void visit(const LE *op) override { binary(op); }
    void visit(const GT *op) override { binary(op); }
    void visit(const GE *op) override { binary(op); }
    void visit(const And *op) override { binary(op); }
    void visit(const Or *op) override { binary(op); }
    void visit(const Not *op) override {
        count(op->type);
        IRVisitor::visit(op);
    }
    void visit(const Select *op) override {
        count(op->type);
        IRVisitor::visit(op);
    }
    void visit(const Cast *op) override {
        count(wider(op->type, op->value.type()));
        IRVisitor::visit(op);
    }
    void visit(const Shuffle *op) override {
        count(op->type);
        IRVisitor::visit(op);
    }
    void visit(const VectorReduce *op) override {
        count(op->value.type());
        IRVisitor::visit(op);
    }
    void visit(const Load *op) override {
        count_bytes(op->type);
        // A gather: the SHAVE's vector loads read consecutive elements, so a vector of
        // computed indices (a table lookup) is a scalar load per lane, from indices the vector
        // unit computes. A ramp (any stride) or one element for every lane is a vector load.
        if (vector_loop_ && op->type.is_vector() && !op->index.as<Ramp>() &&
            !op->index.as<Broadcast>()) {
            cost.arith_ops += op->type.lanes();
            op->index.accept(this);
        }
        op->predicate.accept(this);
    }
    void visit(const Store *op) override {
        count_bytes(op->value.type());
        op->value.accept(this);
        op->predicate.accept(this);
    }
    void visit(const Ramp *) override {}
    void visit(const Call *op) override {
        if (op->is_intrinsic({Call::likely, Call::likely_if_innermost, Call::promise_clamped,
                              Call::unsafe_promise_clamped, Call::strict_float,
                              Call::reinterpret})) {
            // Hints to the compiler and bit casts: no instruction.
        } else if (op->call_type == Call::PureExtern || op->call_type == Call::Extern) {
            const int special = special_instructions_of(op->name);
            if (special > 0)
                count_special(op->type, special);
            else
                count(op->type);
        } else {
            Halide::Type widest = op->type;
            for (const Halide::Expr &arg : op->args) widest = wider(widest, arg.type());
            count(widest);
        }
        IRVisitor::visit(op);
    }

    int vector_bits_;
    bool vector_loop_;
};

// True when `s` stores a vector somewhere: code that stores only scalars is scalar code.
bool stores_vectors(const Stmt &s) {
    struct Finder : public IRVisitor {
        bool found = false;
        using IRVisitor::visit;
        void visit(const Store *op) override { found = found || op->value.type().is_vector(); }
    } finder;
    s.accept(&finder);
    return finder.found;
}

// What a lowered kernel executes, instructions in native vectors and bytes: each statement's
// cost times the trip counts of the loops around it, so a stage costs what it computes whatever
// its share of the output (a reduction computed once per row, a producer with a halo). Loop
// extents are constants once the output's extents are (see cost_per_output_vector); one that
// still varies with an enclosing loop counts at its largest. A branch the extents do not decide
// counts as its costlier side, figure by figure. In vector code (a loop body or branch that stores
// vectors), scalar ops are address arithmetic and are left out, as OpCounter says.
class KernelCost : public IRVisitor {
  public:
    explicit KernelCost(int vector_bits) : vector_bits_(vector_bits) {}

    ShaveKernelCost of(const Stmt &s) {
        region(s);
        return cost_;
    }

  private:
    using IRVisitor::visit;

    void add(const Halide::Expr &e) {
        OpCounter counter(vector_bits_, vector_code_);
        e.accept(&counter);
        cost_ += scaled(counter.cost, trips_);
    }

    void region(const Stmt &s) {
        const bool outer = vector_code_;
        vector_code_ = stores_vectors(s);
        s.accept(this);
        vector_code_ = outer;
    }

    // The trip count of a loop, or an upper bound of it; an unbounded loop (an extent read from
    // an input) counts once.
    double trips(const Halide::Expr &extent) const {
        Halide::Expr e = simplify(extent);
        if (!is_const(e)) {
            const Interval range = bounds_of_expr_in_scope(e, bounds_);
            if (range.has_upper_bound()) e = simplify(range.max);
        }
        const int64_t *value = as_const_int(e);
        return value ? double(std::max<int64_t>(*value, 0)) : 1;
    }

    void visit(const For *op) override {
        const double extent = trips(op->extent);
        const Interval first = bounds_of_expr_in_scope(op->min, bounds_);
        const Interval last = bounds_of_expr_in_scope(simplify(op->min + op->extent - 1), bounds_);
        bounds_.push(op->name, Interval(first.min, last.max));
        const double outer = trips_;
        trips_ *= extent;
        region(op->body);
        trips_ = outer;
        bounds_.pop(op->name);
    }
    void visit(const LetStmt *op) override {
        add(op->value);
        const bool index = op->value.type().is_scalar() && op->value.type().is_int_or_uint();
        if (index) bounds_.push(op->name, bounds_of_expr_in_scope(op->value, bounds_));
        op->body.accept(this);
        if (index) bounds_.pop(op->name);
    }
    void visit(const Store *op) override {
        OpCounter counter(vector_bits_, vector_code_);
        op->accept(&counter);
        cost_ += scaled(counter.cost, trips_);
    }
    void visit(const Evaluate *op) override { add(op->value); }
    void visit(const IfThenElse *op) override {
        add(op->condition);
        const ShaveKernelCost before = cost_;
        cost_ = {};
        region(op->then_case);
        const ShaveKernelCost then_cost = cost_;
        cost_ = {};
        if (op->else_case.defined()) region(op->else_case);
        cost_ = larger(then_cost, cost_);
        cost_ += before;
    }
    // Checks of the arguments at entry, and allocation sizes: not per element.
    void visit(const AssertStmt *) override {}
    void visit(const Allocate *op) override { op->body.accept(this); }

    int vector_bits_;
    bool vector_code_ = true;
    double trips_ = 1;
    ShaveKernelCost cost_;
    Scope<Interval> bounds_; // of the enclosing loop variables and integer lets
};

// Sets the lets that unpack the output buffer's mins and extents to constants.
class FixOutputRegion : public IRMutator {
  public:
    explicit FixOutputRegion(std::map<std::string, Halide::Expr> values)
        : values_(std::move(values)) {}

    size_t fixed() const { return fixed_; } // lets replaced

  private:
    using IRMutator::visit;
    Stmt visit(const LetStmt *op) override {
        const auto value = values_.find(op->name);
        if (value == values_.end()) return IRMutator::visit(op);
        ++fixed_;
        return LetStmt::make(op->name, value->second, mutate(op->body));
    }

    std::map<std::string, Halide::Expr> values_;
    size_t fixed_ = 0;
};

// The kernel's cost per output vector when it computes an output of `extents` at mins 0: the
// whole kernel's instructions and bytes (every stage, with its own loops) over the output's
// vectors. With the output's region constant, simplification gives every loop of the lowered
// statement its trip count and drops the vector tails that region does not run.
//
// Halide may prove a small region unreachable (a vector along a dimension wider than its
// extent, whose predicated tail reads past the stage it consumes): then the count is taken at
// mins equal to the extents (the next task's region), and failing that over extents of at
// least 16 (the cost of a larger region, per vector).
ShaveKernelCost cost_per_output_vector(const LoweredFunc &function,
                                       const std::vector<int64_t> &extents, int vector_bits,
                                       uint32_t lanes) {
    enum class Region { AtZero, Shifted, Widened };
    for (const Region attempt : {Region::AtZero, Region::Shifted, Region::Widened}) {
        std::vector<int64_t> counted = extents;
        if (attempt == Region::Widened)
            for (int64_t &e : counted) e = std::max<int64_t>(e, 16);
        double elements = 1;
        for (int64_t e : counted) elements *= double(e);
        // Every output (a Tuple's values) covers the same region.
        std::map<std::string, Halide::Expr> region;
        for (const LoweredArgument &arg : function.args) {
            if (!arg.is_output()) continue;
            for (size_t d = 0; d < counted.size(); ++d) {
                const std::string dim = std::to_string(d);
                region[arg.name + ".min." + dim] =
                    attempt == Region::Shifted ? int32_t(counted[d]) : 0;
                region[arg.name + ".extent." + dim] = int32_t(counted[d]);
            }
        }
        FixOutputRegion fix(region);
        const Stmt body = simplify(fix.mutate(function.body));
        // Without them the loops keep symbolic extents and would count once: a silent
        // undercount.
        if (fix.fixed() == 0 && !counted.empty())
            throw std::logic_error("the lowered kernel does not unpack its output's extents");
        const Evaluate *only = body.as<Evaluate>();
        const Call *call = only ? only->value.as<Call>() : nullptr;
        if (call && call->is_intrinsic(Call::unreachable)) continue;
        return scaled(KernelCost(vector_bits).of(body), 1 / std::ceil(elements / lanes));
    }
    throw std::logic_error("Halide proves every output region the kernel's cost is counted for "
                           "unreachable");
}

// The output a count is taken for when the caller gives none: 16 vectors along the innermost
// dimension, 4 along each other one.
std::vector<int64_t> nominal_extents(int dimensions, uint32_t lanes) {
    std::vector<int64_t> extents(size_t(dimensions), 4);
    if (!extents.empty()) extents[0] = 16 * int64_t(lanes);
    return extents;
}

// --- The schedule of the stages the caller left alone --------------------------------------

bool is_inlined(const Function &f) {
    // Reading a LoopLevel needs it locked; lowering locks it anyway, and scheduling the Func
    // later replaces it rather than changing it.
    Halide::LoopLevel level = f.schedule().compute_level();
    return level.lock().is_inlined();
}

// Funcs called from an update definition: evaluated once per point of its reduction domain.
std::set<std::string> called_from_updates(const std::map<std::string, Function> &funcs) {
    struct Calls : public IRVisitor {
        std::set<std::string> names;
        using IRVisitor::visit;
        void visit(const Call *op) override {
            if (op->call_type == Call::Halide) names.insert(op->name);
            IRVisitor::visit(op);
        }
    } calls;
    for (const auto &entry : funcs)
        for (const Definition &update : entry.second.updates()) {
            for (const Halide::Expr &e : update.values()) e.accept(&calls);
            for (const Halide::Expr &e : update.args()) e.accept(&calls);
        }
    return calls.names;
}

// A Func that reads another Func or a buffer at its own coordinates and nothing else, such as
// an ImageParam's Func: computing it would only copy its input.
bool is_wrapper(const Function &f) {
    if (f.has_update_definition() || f.values().size() != 1) return false;
    const auto *call = f.values()[0].as<Call>();
    if (!call || (call->call_type != Call::Halide && call->call_type != Call::Image) ||
        call->args.size() != f.args().size())
        return false;
    for (size_t i = 0; i < call->args.size(); ++i) {
        const auto *var = call->args[i].as<Variable>();
        if (!var || var->name != f.args()[i]) return false;
    }
    return true;
}

// A max or min over a one-dimensional reduction domain gives the same result in any order, so
// its domain can be cut in vectors: rfactor makes an intermediate whose `lanes` lanes each
// reduce every lanes-th point, then the update reduces the lanes. (A sum is left in order:
// reassociating float additions would change their rounding against the reference.)
bool vectorize_reduction(Halide::Func &f, int update, int lanes) {
    const Definition &def = f.function().update(update);
    if (def.values().size() != 1 || !(def.values()[0].as<Max>() || def.values()[0].as<Min>()))
        return false;
    const std::vector<ReductionVariable> &rvars = def.schedule().rvars();
    if (rvars.size() != 1) return false;
    const int64_t *extent = as_const_int(rvars[0].extent);
    if (!extent || *extent < 2 * lanes) return false;
    Halide::RVar r(rvars[0].var), outer(rvars[0].var + "_vo"), inner(rvars[0].var + "_vi");
    Halide::Var lane(f.name() + "_lane");
    f.update(update).split(r, outer, inner, lanes, Halide::TailStrategy::GuardWithIf);
    Halide::Func partial = f.update(update).rfactor(inner, lane);
    partial.compute_root().vectorize(lane);
    partial.update(0).vectorize(lane);
    return true;
}

// A native vector's lanes of the output's widest type (8 bits at least).
int64_t output_lanes(const Halide::Func &out, int vector_bits) {
    int bits = 8;
    for (const Halide::Type &t : out.output_types()) bits = std::max(bits, t.bits());
    return vector_bits / bits;
}

// Vectorizes a stage's pure innermost dimension by the lanes of the Func's widest type, guarded
// so any extent works.
void vectorize_innermost(Halide::Func &f, int vector_bits) {
    const int lanes = int(output_lanes(f, vector_bits));
    const std::vector<std::string> &pure = f.function().args();
    if (pure.empty() || lanes < 2) return;
    const Halide::Var x(pure[0]);
    f.vectorize(x, lanes, Halide::TailStrategy::GuardWithIf);
    // An update keeps a pure variable in the pure position: its lanes are independent points
    // and vectorizing them leaves every point's reduction order, so its rounding, as it was.
    for (int i = 0; i < f.num_update_definitions(); ++i) {
        if (vectorize_reduction(f, i, lanes)) continue;
        const auto *arg = f.function().update(i).args()[0].as<Variable>();
        if (arg && arg->name == pure[0])
            f.update(i).vectorize(x, lanes, Halide::TailStrategy::GuardWithIf);
        else
            f.update(i).unscheduled();
    }
}

// Whether an output of `extents` may be vectorized along its second dimension, the first
// unrolled: a pure output whose first extent is short (at most 16 copies of the body, and not
// whole vectors) and whose second holds a vector.
bool may_vectorize_along_second(const Halide::Func &out, int64_t lanes,
                                const std::vector<int64_t> &extents) {
    constexpr int64_t kMaxUnrolled = 16;
    return extents.size() >= 2 && out.function().args().size() >= 2 &&
           out.num_update_definitions() == 0 && extents[0] <= kMaxUnrolled &&
           extents[0] % lanes != 0 && extents[1] >= lanes;
}

// The output's default vectorization: its innermost dimension, unless the extents it computes
// (the caller's count extents) hold a few elements along it (an image's 3 channels) and a
// vector's worth along the next: then the next dimension is vectorized and the short one
// unrolled, so a vector's lanes are all used rather than 3 of 16. `along_second` asks for the
// latter wherever may_vectorize_along_second allows it.
void vectorize_output(Halide::Func &out, int vector_bits, const std::vector<int64_t> &extents,
                      bool along_second) {
    const int64_t lanes = output_lanes(out, vector_bits);
    const std::vector<std::string> &pure = out.function().args();
    constexpr int64_t kShortExtent = 4;
    if (!may_vectorize_along_second(out, lanes, extents) ||
        (!along_second && (extents[0] > kShortExtent || extents[0] * 2 > lanes))) {
        vectorize_innermost(out, vector_bits);
        return;
    }
    const Halide::Var inner(pure[0]), next(pure[1]);
    out.vectorize(next, int(lanes), Halide::TailStrategy::GuardWithIf)
        .unroll(inner, int(extents[0]), Halide::TailStrategy::GuardWithIf);
}

// Left inlined, a reduction (a Func with update definitions) is computed at the innermost loop
// of each consumer, so a softmax recomputed its max and sum for every output element. Every
// stage the caller left alone (inlined, untouched) that is a reduction, or is evaluated inside
// one (called from an update definition, once per point of its domain), is computed at root
// inside the kernel, over the region the output needs, vectorized along its innermost
// dimension. Root, not a loop of the output: a reduction along one output dimension is the same
// for every point of that dimension, so computing it inside that dimension's loop would redo
// it. Pointwise stages stay inlined into their consumers, as do Funcs that only read an input.
void schedule_inner_stages(const Halide::Func &output, int vector_bits) {
    const std::map<std::string, Function> funcs = find_transitive_calls(output.function());
    const std::set<std::string> in_reductions = called_from_updates(funcs);
    for (const auto &[name, function] : funcs) {
        if (name == output.name() || !is_inlined(function)) continue;
        Halide::Func f(function);
        if (is_scheduled(f)) continue;
        const bool reduction = function.has_update_definition();
        if (!reduction && (!in_reductions.count(name) || is_wrapper(function))) continue;
        f.compute_root();
        vectorize_innermost(f, vector_bits);
    }
}

// --- What a kernel reads of its inputs -------------------------------------------------------

// One bound of an input dimension's read region, as blob.fbs ReadBound writes it:
// clamp(scale * floor_div(v + shift, divisor) + offset, lo, hi) of one bound v of an output
// dimension (its min or its max), or a constant (source -1, the value in `offset`), with
// clamp(x, lo, hi) = max(min(x, hi), lo).
struct BoundTerm {
    int source = -1;
    bool of_max = false; // v is the output dimension's max, not its min
    int64_t scale = 1, divisor = 1, shift = 0, offset = 0;
    int64_t lo = INT64_MIN, hi = INT64_MAX;
    bool constant() const { return source < 0; }
    bool clamped() const { return lo != INT64_MIN || hi != INT64_MAX; }
};

int64_t floor_div(int64_t a, int64_t b) {
    return a / b - ((a % b != 0) && ((a < 0) != (b < 0)));
}

int64_t shifted(int64_t bound, int64_t k) {
    return bound == INT64_MIN || bound == INT64_MAX ? bound : bound + k;
}

// The variables standing for the output region's bounds, dimension by dimension.
struct OutputBounds {
    std::vector<std::string> min_names, max_names;
};

// `e` (a simplified bound from Halide's interval analysis) as a BoundTerm, if it has that form.
std::optional<BoundTerm> match_bound(const Halide::Expr &e, const OutputBounds &vars) {
    if (const int64_t *k = as_const_int(e)) {
        BoundTerm t;
        t.offset = *k;
        return t;
    }
    if (const auto *v = e.as<Variable>()) {
        for (size_t d = 0; d < vars.min_names.size(); ++d)
            if (v->name == vars.min_names[d] || v->name == vars.max_names[d]) {
                BoundTerm t;
                t.source = int(d);
                t.of_max = v->name == vars.max_names[d];
                return t;
            }
        return std::nullopt;
    }
    // Binary operations with a constant operand (the simplifier puts constants on the right).
    auto operands = [&](const Halide::Expr &a,
                        const Halide::Expr &b) -> std::optional<std::pair<BoundTerm, int64_t>> {
        const int64_t *k = as_const_int(b);
        if (!k) return std::nullopt;
        std::optional<BoundTerm> t = match_bound(a, vars);
        if (!t) return std::nullopt;
        return std::make_pair(*t, *k);
    };
    if (const auto *op = e.as<Add>()) {
        auto m = operands(op->a, op->b);
        if (!m) return std::nullopt;
        auto [t, k] = *m;
        t.offset += k;
        t.lo = shifted(t.lo, k);
        t.hi = shifted(t.hi, k);
        return t;
    }
    if (const auto *op = e.as<Sub>()) {
        auto m = operands(op->a, op->b);
        if (!m) return std::nullopt;
        auto [t, k] = *m;
        t.offset -= k;
        t.lo = shifted(t.lo, -k);
        t.hi = shifted(t.hi, -k);
        return t;
    }
    if (const auto *op = e.as<Mul>()) {
        auto m = operands(op->a, op->b);
        if (!m || m->second < 0) return std::nullopt;
        auto [t, k] = *m;
        if (t.constant()) return BoundTerm{-1, false, 1, 1, 0, t.offset * k};
        if (t.clamped() && k == 0) return BoundTerm{-1, false, 1, 1, 0, 0};
        t.scale *= k;
        t.offset *= k;
        if (t.lo != INT64_MIN) t.lo *= k;
        if (t.hi != INT64_MAX) t.hi *= k;
        return t;
    }
    if (const auto *op = e.as<Div>()) { // Halide's integer division rounds down
        auto m = operands(op->a, op->b);
        if (!m || m->second <= 0) return std::nullopt;
        auto [t, k] = *m;
        if (t.constant()) return BoundTerm{-1, false, 1, 1, 0, floor_div(t.offset, k)};
        // floor_div(floor_div(v + s, d) + o, k) = floor_div(v + s + o * d, d * k)
        if (t.scale != 1) return std::nullopt;
        t.shift += t.offset * t.divisor;
        t.divisor *= k;
        t.offset = 0;
        if (t.lo != INT64_MIN) t.lo = floor_div(t.lo, k);
        if (t.hi != INT64_MAX) t.hi = floor_div(t.hi, k);
        return t;
    }
    if (const auto *op = e.as<Max>()) {
        auto m = operands(op->a, op->b);
        if (!m) m = operands(op->b, op->a);
        if (!m) return std::nullopt;
        auto [t, k] = *m;
        if (t.constant()) return BoundTerm{-1, false, 1, 1, 0, std::max(t.offset, k)};
        t.lo = std::max(t.lo, k);
        return t;
    }
    if (const auto *op = e.as<Min>()) {
        auto m = operands(op->a, op->b);
        if (!m) m = operands(op->b, op->a);
        if (!m) return std::nullopt;
        auto [t, k] = *m;
        if (t.constant()) return BoundTerm{-1, false, 1, 1, 0, std::min(t.offset, k)};
        t.hi = std::min(t.hi, k);
        t.lo = std::min(t.lo, k);
        return t;
    }
    return std::nullopt;
}

bool fits_int32(int64_t v) {
    return v >= INT32_MIN && v <= INT32_MAX;
}

int32_t clamp_bound(int64_t v) {
    return int32_t(std::clamp<int64_t>(v, INT32_MIN, INT32_MAX));
}

// The read bound of one input dimension from its interval, or nullopt when the interval does
// not have a form the blob can state.
std::optional<blob::ReadBound> read_bound(const Interval &interval, const OutputBounds &vars) {
    if (!interval.is_bounded()) return std::nullopt;
    std::optional<BoundTerm> lo = match_bound(simplify(interval.min), vars);
    std::optional<BoundTerm> hi = match_bound(simplify(interval.max), vars);
    if (!lo || !hi) return std::nullopt;
    if (lo->constant() && hi->constant()) {
        if (!fits_int32(lo->offset) || !fits_int32(hi->offset)) return std::nullopt;
        return blob::ReadBound(-1, 0, 1, 0, int32_t(lo->offset), int32_t(hi->offset), INT32_MIN,
                               INT32_MAX, INT32_MIN, INT32_MAX);
    }
    if (lo->constant() || hi->constant() || lo->source != hi->source || lo->of_max || !hi->of_max ||
        lo->scale != hi->scale || lo->divisor != hi->divisor || lo->scale == 0)
        return std::nullopt;
    if (lo->divisor == 1) { // the shift folds into the offsets
        lo->offset += lo->scale * lo->shift;
        hi->offset += hi->scale * hi->shift;
        lo->shift = hi->shift = 0;
    }
    // floor_div(v + shift + m * divisor, divisor) = floor_div(v + shift, divisor) + m: the
    // simplifier folds a constant added to a quotient into its numerator (a window reaching
    // back whole strides).
    if (lo->shift != hi->shift && (hi->shift - lo->shift) % lo->divisor == 0) {
        hi->offset += hi->scale * ((hi->shift - lo->shift) / lo->divisor);
        hi->shift = lo->shift;
    }
    if (lo->shift != hi->shift) return std::nullopt;
    for (int64_t v : {lo->scale, lo->divisor, lo->shift, lo->offset, hi->offset})
        if (!fits_int32(v)) return std::nullopt;
    return blob::ReadBound(int8_t(lo->source), int32_t(lo->scale), int32_t(lo->divisor),
                           int32_t(lo->shift), int32_t(lo->offset), int32_t(hi->offset),
                           clamp_bound(lo->lo), clamp_bound(lo->hi), clamp_bound(hi->lo),
                           clamp_bound(hi->hi));
}

// Per input buffer, per dimension, what the kernel reads for an output region given by
// variables, as Halide's bounds inference (the one its asserts use) computes it.
void describe_reads(const std::string &kernel, const Halide::Func &output,
                    std::vector<KernelArgDesc> &args) {
    OutputBounds vars;
    Box box;
    for (int d = 0; d < output.dimensions(); ++d) {
        vars.min_names.push_back(kernel + ".out.min." + std::to_string(d));
        vars.max_names.push_back(kernel + ".out.max." + std::to_string(d));
        box.push_back(Interval(Variable::make(Halide::Int(32), vars.min_names.back()),
                               Variable::make(Halide::Int(32), vars.max_names.back())));
    }
    const std::map<std::string, Box> required = required_boxes(output, box);
    for (KernelArgDesc &arg : args) {
        if (arg.kind != KernelArgKind::InputBuffer) continue;
        const auto found = required.find(arg.name);
        if (found == required.end()) continue; // not read
        for (int d = 0; d < arg.rank; ++d) {
            std::optional<blob::ReadBound> bound;
            if (size_t(d) < found->second.size())
                bound = read_bound(found->second[size_t(d)], vars);
            if (!bound) {
                std::ostringstream region;
                if (size_t(d) < found->second.size())
                    region << " (" << simplify(found->second[size_t(d)].min) << " to "
                           << simplify(found->second[size_t(d)].max) << ")";
                fail(kernel, "what it reads of '" + arg.name + "' along dimension " +
                                 std::to_string(d) + region.str() +
                                 " is not of the form the blob states (a clamp of scale * "
                                 "floor_div(v + shift, divisor) + offset of one output bound, "
                                 "or a constant)");
            }
            arg.reads.push_back(*bound);
        }
    }
}

// --- The cache of compiled kernels -----------------------------------------------------------

// Renames every name in a lowered kernel, dot-separated part by part, to "%0", "%1"... in the
// order the parts first appear, and empties strings (they only word error messages): two
// kernels print the same when they compute the same thing, whatever their layers, Funcs,
// variables and loops are called. Renaming each part the same way everywhere keeps the links
// names make ("in0" and its "in0.buffer"). Extern and intrinsic calls keep their names.
class CanonicalNames : public IRMutator {
  public:
    std::string rename(const std::string &name) {
        std::string out;
        size_t begin = 0;
        while (true) {
            const size_t end = name.find('.', begin);
            const std::string part = name.substr(begin, end - begin);
            const auto found = parts_.emplace(part, "%" + std::to_string(parts_.size())).first;
            out += found->second;
            if (end == std::string::npos) return out;
            out += '.';
            begin = end + 1;
        }
    }

  private:
    using IRMutator::visit;
    Halide::Expr visit(const StringImm *) override { return StringImm::make(""); }
    Halide::Expr visit(const Variable *op) override {
        return Variable::make(op->type, rename(op->name), op->image, op->param,
                              op->reduction_domain);
    }
    Halide::Expr visit(const Let *op) override {
        const std::string name = rename(op->name);
        return Let::make(name, mutate(op->value), mutate(op->body));
    }
    Stmt visit(const LetStmt *op) override {
        const std::string name = rename(op->name);
        return LetStmt::make(name, mutate(op->value), mutate(op->body));
    }
    Stmt visit(const For *op) override {
        const std::string name = rename(op->name);
        return For::make(name, mutate(op->min), mutate(op->extent), op->for_type, op->device_api,
                         mutate(op->body));
    }
    Halide::Expr visit(const Load *op) override {
        const std::string name = rename(op->name);
        return Load::make(op->type, name, mutate(op->index), op->image, op->param,
                          mutate(op->predicate), op->alignment);
    }
    Stmt visit(const Store *op) override {
        const std::string name = rename(op->name);
        return Store::make(name, mutate(op->value), mutate(op->index), op->param,
                           mutate(op->predicate), op->alignment);
    }
    Stmt visit(const Allocate *op) override {
        const std::string name = rename(op->name);
        std::vector<Halide::Expr> extents;
        for (const Halide::Expr &e : op->extents) extents.push_back(mutate(e));
        return Allocate::make(
            name, op->type, op->memory_type, extents, mutate(op->condition), mutate(op->body),
            op->new_expr.defined() ? mutate(op->new_expr) : Halide::Expr(), op->free_function);
    }
    Stmt visit(const Free *op) override { return Free::make(rename(op->name)); }
    Stmt visit(const ProducerConsumer *op) override {
        const std::string name = rename(op->name);
        return ProducerConsumer::make(name, op->is_producer, mutate(op->body));
    }
    Stmt visit(const Atomic *op) override {
        const std::string producer = rename(op->producer_name);
        const std::string mutex = op->mutex_name.empty() ? "" : rename(op->mutex_name);
        return Atomic::make(producer, mutex, mutate(op->body));
    }
    Halide::Expr visit(const Call *op) override {
        if (op->call_type != Call::Halide && op->call_type != Call::Image)
            return IRMutator::visit(op);
        const std::string name = rename(op->name);
        std::vector<Halide::Expr> args;
        for (const Halide::Expr &e : op->args) args.push_back(mutate(e));
        return Call::make(op->type, name, args, op->call_type, op->func, op->value_index, op->image,
                          op->param);
    }

    std::map<std::string, std::string> parts_;
};

// What a compiled kernel is a function of, none of it a name: the lowered statement (schedule,
// types and constants in place), the arguments in order, the constant buffers' contents, the
// target and vector width, the shape its ops were counted for, and the compilers' versions.
std::string cache_key(const Halide::Module &module, const LoweredFunc &function, int vector_bits,
                      const std::vector<int64_t> &cost_extents) {
    CanonicalNames names;
    std::ostringstream key;
    key << "vpuc " << VPUC_VERSION << " (codegen sources " << detail::codegen_source_digest()
        << "), Halide " << VPUC_HALIDE_VERSION << ", target " << shave_halide_target().to_string()
        << ", vector bits " << vector_bits << ", counted for";
    for (int64_t e : cost_extents) key << ' ' << e;
    key << "\n";
    for (const LoweredArgument &arg : function.args)
        key << "argument " << names.rename(arg.name) << ' ' << int(arg.kind) << ' '
            << int(arg.dimensions) << ' ' << arg.type << "\n";
    for (const Halide::Buffer<> &buffer : module.buffers()) {
        key << "buffer " << names.rename(buffer.name()) << ' ' << buffer.type();
        for (int d = 0; d < buffer.dimensions(); ++d)
            key << ' ' << buffer.dim(d).min() << ':' << buffer.dim(d).extent() << ':'
                << buffer.dim(d).stride();
        key << ' ' << buffer.size_in_bytes() << " bytes: ";
        const auto *bytes = reinterpret_cast<const char *>(buffer.raw_buffer()->host);
        key.write(bytes, std::streamsize(buffer.size_in_bytes()));
        key << "\n";
    }
    key << names.mutate(function.body);
    return key.str();
}

// Process-wide: every lowering, on any thread, shares it. Behind it, when
// VPUC_KERNEL_CACHE_DIR is set, the disk cache shares kernels between processes.
class KernelCache {
  public:
    KernelCache() : dir_(detail::kernel_cache_dir()) {}

    // `expected` is the kernel being compiled, without its object, reads and cost: what a
    // kernel read from disk must agree with, or it is not used.
    std::optional<ShaveKernelBinary> find(const std::string &key,
                                          const ShaveKernelBinary &expected) {
        {
            std::lock_guard<std::mutex> lock(mutex_);
            const auto found = kernels_.find(key);
            if (found != kernels_.end()) {
                ++stats_.hits;
                return found->second;
            }
            ++stats_.misses;
        }
        if (dir_.empty()) return std::nullopt;
        std::optional<ShaveKernelBinary> stored = detail::read_cached_kernel(dir_, key);
        if (!stored || !agrees(*stored, expected)) return std::nullopt;
        std::lock_guard<std::mutex> lock(mutex_);
        ++stats_.disk_hits;
        kernels_.emplace(key, *stored);
        return stored;
    }
    // Two threads may compile the same kernel at once; the first one kept serves later hits.
    void insert(const std::string &key, const ShaveKernelBinary &kernel) {
        {
            std::lock_guard<std::mutex> lock(mutex_);
            kernels_.emplace(key, kernel);
        }
        if (dir_.empty()) return;
        const std::string why = detail::write_cached_kernel(dir_, key, kernel);
        // A cache that cannot be written costs time, not results: say so once, go on.
        std::lock_guard<std::mutex> lock(mutex_);
        if (!why.empty() && !warned_) {
            warned_ = true;
            std::fprintf(stderr,
                         "vpuc: warning: SHAVE kernel cache (VPUC_KERNEL_CACHE_DIR): %s; "
                         "kernels are compiled in each process\n",
                         why.c_str());
        }
    }
    ShaveKernelCacheStats stats() {
        std::lock_guard<std::mutex> lock(mutex_);
        return stats_;
    }

  private:
    // The key fixes the arguments and vector lanes; a file that says otherwise was not written
    // by this compiler for this key.
    static bool agrees(const ShaveKernelBinary &stored, const ShaveKernelBinary &expected) {
        if (stored.entry.empty() || stored.object.empty() ||
            stored.vector_lanes != expected.vector_lanes ||
            stored.args.size() != expected.args.size())
            return false;
        for (size_t i = 0; i < stored.args.size(); ++i) {
            const KernelArgDesc &a = stored.args[i], &b = expected.args[i];
            if (a.kind != b.kind || a.dtype != b.dtype || a.rank != b.rank ||
                (!a.reads.empty() && a.reads.size() != size_t(a.rank)))
                return false;
        }
        for (double v : {stored.per_vector.arith_ops, stored.per_vector.special_ops,
                         stored.per_vector.cmx_bytes})
            if (!std::isfinite(v) || v < 0) return false;
        return true;
    }

    const std::string dir_;
    std::mutex mutex_;
    std::map<std::string, ShaveKernelBinary> kernels_;
    ShaveKernelCacheStats stats_;
    bool warned_ = false;
};

KernelCache &kernel_cache() {
    static KernelCache cache;
    return cache;
}

} // namespace

ShaveKernelCacheStats shave_kernel_cache_stats() {
    return kernel_cache().stats();
}

const Halide::Target &shave_halide_target() {
    static const Halide::Target target(
        "x86-64-linux-sse41-no_runtime-no_bounds_query-strict_float");
    return target;
}

PreparedShaveKernel prepare_shave_kernel(const std::string &name, Halide::Func output,
                                         const std::vector<Halide::Argument> &inputs,
                                         int vector_bits, const std::vector<int64_t> &cost_extents,
                                         OutputVectorization vectorization) {
    if (!is_c_identifier(name)) fail(name, "the name must be a C identifier");
    if (!output.defined()) fail(name, "the output Func has no definition");
    // Outputs of several types (a Tuple) are vectorized by the lanes of the widest.
    Halide::Type out_type = output.output_types()[0];
    for (const Halide::Type &t : output.output_types()) {
        if (vector_bits <= 0 || vector_bits % t.bits() != 0)
            fail(name, "vector width " + std::to_string(vector_bits) +
                           " bits does not hold whole " + type_name(t) + " elements");
        if (t.bits() > out_type.bits()) out_type = t;
    }
    if (!cost_extents.empty() && (cost_extents.size() != size_t(output.dimensions()) ||
                                  std::any_of(cost_extents.begin(), cost_extents.end(),
                                              [](int64_t e) { return e < 1 || e > INT32_MAX; })))
        fail(name, "the extents to count ops for must be " + std::to_string(output.dimensions()) +
                       " positive int32 values, one per output dimension");

    PreparedShaveKernel p;
    p.output = output;
    p.vector_bits = vector_bits;
    p.kernel.name = name;
    p.kernel.entry = name + "_argv";
    p.kernel.vector_lanes = uint32_t(vector_bits / out_type.bits());
    try {
        p.counted_extents = cost_extents.empty()
                                ? nominal_extents(output.dimensions(), p.kernel.vector_lanes)
                                : cost_extents;
        p.may_vectorize_along_second =
            !is_scheduled(output) && vectorization == OutputVectorization::Default &&
            may_vectorize_along_second(output, output_lanes(output, vector_bits), cost_extents);
        if (!is_scheduled(output))
            vectorize_output(output, vector_bits, cost_extents,
                             vectorization == OutputVectorization::AlongSecond);
        schedule_inner_stages(output, vector_bits);
        refuse_parallel_loops(name, output);
        p.module = output.compile_to_module(inputs, name, shave_halide_target());
        const LoweredFunc function = p.module.get_function_by_name(name);
        for (const Halide::Argument &arg : function.args)
            p.kernel.args.push_back(describe_argument(name, arg));
        p.key = cache_key(p.module, function, vector_bits, p.counted_extents);
    } catch (const Halide::Error &e) {
        fail(name, std::string("Halide: ") + e.what());
    }
    return p;
}

ShaveKernelCost prepared_cost(const PreparedShaveKernel &prepared) {
    try {
        return cost_per_output_vector(prepared.module.get_function_by_name(prepared.kernel.name),
                                      prepared.counted_extents, prepared.vector_bits,
                                      prepared.kernel.vector_lanes);
    } catch (const Halide::Error &e) {
        fail(prepared.kernel.name, std::string("Halide: ") + e.what());
    }
}

ShaveKernelBinary finish_shave_kernel(PreparedShaveKernel prepared) {
    ShaveKernelBinary &kernel = prepared.kernel;
    const std::string &name = kernel.name;
    try {
        if (std::optional<ShaveKernelBinary> cached = kernel_cache().find(prepared.key, kernel)) {
            // The same computation: its object, entry, reads and cost, with this kernel's
            // name and argument names.
            for (size_t i = 0; i < kernel.args.size(); ++i)
                cached->args[i].name = kernel.args[i].name;
            cached->name = name;
            return *cached;
        }
        describe_reads(name, prepared.output, kernel.args);
        kernel.per_vector = prepared_cost(prepared);
        const Halide::Buffer<uint8_t> object = prepared.module.compile_to_buffer();
        kernel.object.assign(object.data(), object.data() + object.size_in_bytes());
        kernel_cache().insert(prepared.key, kernel);
    } catch (const Halide::Error &e) {
        fail(name, std::string("Halide: ") + e.what());
    }
    return kernel;
}

ShaveKernelBinary compile_shave_kernel(const std::string &name, Halide::Func output,
                                       const std::vector<Halide::Argument> &inputs, int vector_bits,
                                       const std::vector<int64_t> &cost_extents) {
    return finish_shave_kernel(
        prepare_shave_kernel(name, std::move(output), inputs, vector_bits, cost_extents));
}

std::vector<int64_t> shave_share(std::vector<int64_t> extents, int shaves) {
    for (size_t d = extents.size(); d-- > 0;) {
        if (extents[d] <= 1) continue;
        const int64_t parts = std::clamp<int64_t>(shaves, 1, extents[d]);
        extents[d] = (extents[d] + parts - 1) / parts;
        break;
    }
    return extents;
}

std::unique_ptr<blob::KernelT> to_blob_kernel(const ShaveKernelBinary &kernel) {
    auto out = std::make_unique<blob::KernelT>();
    out->name = kernel.name;
    out->entry = kernel.entry;
    out->object = kernel.object;
    for (const KernelArgDesc &arg : kernel.args) {
        auto blob_arg = std::make_unique<blob::KernelArgT>();
        blob_arg->name = arg.name;
        blob_arg->kind = arg.kind;
        blob_arg->dtype = arg.dtype;
        blob_arg->rank = uint8_t(arg.rank);
        blob_arg->reads = arg.reads;
        out->args.push_back(std::move(blob_arg));
    }
    out->vector_lanes = kernel.vector_lanes;
    out->arith_ops_per_vector = float(kernel.per_vector.arith_ops);
    out->special_ops_per_vector = float(kernel.per_vector.special_ops);
    out->cmx_bytes_per_vector = float(kernel.per_vector.cmx_bytes);
    return out;
}

} // namespace vpuc::codegen
