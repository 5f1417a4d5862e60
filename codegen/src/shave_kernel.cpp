#include "codegen/shave_kernel.h"

#include <algorithm>
#include <cctype>
#include <map>
#include <set>
#include <sstream>

namespace vpuc::codegen {

namespace {

using namespace Halide::Internal;

// Halide expands exp/log/pow and friends (PureExtern math calls in the lowered Stmt) into a
// range reduction and a polynomial, or calls libm lane by lane: an estimate of the vector
// instructions that costs per native vector.
constexpr double kMathFunctionOps = 16;

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

// The stage a loop belongs to: Halide names loops "<func>.s<definition>.<var>[.<split>...]".
// Returns "<func>.s<definition>" and the var the loop came from.
std::pair<std::string, std::string> stage_and_var(const std::string &loop) {
    for (size_t dot = loop.find(".s"); dot != std::string::npos; dot = loop.find(".s", dot + 1)) {
        size_t end = dot + 2;
        while (end < loop.size() && std::isdigit(static_cast<unsigned char>(loop[end]))) ++end;
        if (end > dot + 2 && end < loop.size() && loop[end] == '.') {
            const size_t var_end = loop.find('.', end + 1);
            return {loop.substr(0, end), loop.substr(end + 1, var_end - end - 1)};
        }
    }
    return {loop, ""};
}

// An innermost loop body (or the producer body of a kernel without loops), the stage it
// computes and the loops around it.
struct LoopScope {
    std::string stage;
    Stmt body;
    std::vector<const For *> loops; // outermost first, the innermost loop last
};

class InnermostLoops : public IRVisitor {
  public:
    std::vector<LoopScope> of(const Stmt &s) {
        s.accept(this);
        return loops_seen_ == 0 ? producers_ : scopes_;
    }

  private:
    using IRVisitor::visit;
    void visit(const For *op) override {
        enclosing_.push_back(op);
        const int before = loops_seen_++;
        op->body.accept(this);
        if (loops_seen_ == before + 1)
            scopes_.push_back({stage_and_var(op->name).first, op->body, enclosing_});
        enclosing_.pop_back();
    }
    void visit(const ProducerConsumer *op) override {
        if (op->is_producer) producers_.push_back({op->name + ".s0", op->body, {}});
        IRVisitor::visit(op);
    }

    std::vector<LoopScope> scopes_, producers_;
    std::vector<const For *> enclosing_;
    int loops_seen_ = 0;
};

// Counts the instructions of one loop body, in native vectors: an op on a wider vector takes
// several registers. Address arithmetic (load/store indices, ramps, scalar lets in a vector
// loop) is left out: it runs in the SHAVE's scalar/address units alongside the vector unit.
class OpCounter : public IRVisitor {
  public:
    OpCounter(int vector_bits, bool vector_loop)
        : vector_bits_(vector_bits), vector_loop_(vector_loop) {}
    double ops = 0;

  private:
    using IRVisitor::visit;

    void count(const Halide::Type &type, double per_vector = 1) {
        if (vector_loop_ && type.is_scalar()) return;
        const int bits = std::max(type.bits(), 8) * type.lanes();
        ops += per_vector * std::max(1, (bits + vector_bits_ - 1) / vector_bits_);
    }
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
    void visit(const Div *op) override { binary(op); }
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
        count(op->type);
        op->predicate.accept(this);
    }
    void visit(const Store *op) override {
        count(op->value.type());
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
            count(op->type, kMathFunctionOps);
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

// Elements a loop body stores per iteration, and its widest store.
struct Stores : public IRVisitor {
    int elements = 0;
    int widest = 0;

    using IRVisitor::visit;
    void visit(const Store *op) override {
        elements += op->value.type().lanes();
        widest = std::max(widest, op->value.type().lanes());
        IRVisitor::visit(op);
    }
};

// The RVars of each update stage ("f.s1" -> {"r$x"}), to recognise reduction loops.
std::map<std::string, std::set<std::string>> reduction_vars(const Halide::Func &output) {
    std::map<std::string, std::set<std::string>> rvars;
    for (const auto &[name, function] : find_transitive_calls(output.function()))
        for (size_t i = 0; i < function.updates().size(); ++i)
            for (const ReductionVariable &rv : function.updates()[i].schedule().rvars())
                rvars[name + ".s" + std::to_string(i + 1)].insert(rv.var);
    return rvars;
}

// How many times a scope runs per element it stores: the product of the constant extents of
// the reduction loops around it (1 for pure stages; unknown extents count as 1).
double reduction_trips(const LoopScope &scope, const std::set<std::string> &rvars) {
    double trips = 1;
    for (const For *loop : scope.loops) {
        const auto [stage, var] = stage_and_var(loop->name);
        const auto *extent = loop->extent.as<IntImm>();
        if (stage == scope.stage && rvars.count(var) && extent) trips *= double(extent->value);
    }
    return trips;
}

// Vector instructions per output vector: the sum over the pipeline's stages of each stage's
// cost per element it stores, assuming every stage covers as many elements as the output.
// Halide versions a loop (steady state, vector tails): the widest and then cheapest version
// of each stage is its steady state, the only one counted.
double ops_per_output_vector(const Stmt &body, const Halide::Func &output, int vector_bits,
                             uint32_t lanes) {
    struct Candidate {
        int widest;
        double ops_per_element;
    };
    const auto rvars = reduction_vars(output);
    std::map<std::string, Candidate> steady_state; // by stage
    for (const LoopScope &scope : InnermostLoops().of(body)) {
        Stores stores;
        scope.body.accept(&stores);
        if (stores.elements == 0) continue;
        OpCounter counter(vector_bits, stores.widest > 1);
        scope.body.accept(&counter);
        const auto stage_rvars = rvars.find(scope.stage);
        const double trips =
            stage_rvars == rvars.end() ? 1 : reduction_trips(scope, stage_rvars->second);
        const Candidate candidate{stores.widest, counter.ops / stores.elements * trips};

        auto [it, inserted] = steady_state.emplace(scope.stage, candidate);
        const Candidate &best = it->second;
        if (candidate.widest > best.widest ||
            (candidate.widest == best.widest && candidate.ops_per_element < best.ops_per_element))
            it->second = candidate;
    }
    double ops_per_element = 0;
    for (const auto &entry : steady_state) ops_per_element += entry.second.ops_per_element;
    return ops_per_element * lanes;
}

// Vectorizes the pure definition's innermost dimension. Update definitions stay serial: their
// innermost dimension may be a reduction, which vectorizing could race on.
void apply_default_schedule(Halide::Func &f, uint32_t lanes) {
    if (f.dimensions() > 0) f.vectorize(f.args()[0], int(lanes), Halide::TailStrategy::GuardWithIf);
    for (int i = 0; i < f.num_update_definitions(); ++i) f.update(i).unscheduled();
}

blob::DType to_blob(target::DType dtype) {
    switch (dtype) {
    case target::DType::U8:
        return blob::DType::U8;
    case target::DType::I8:
        return blob::DType::I8;
    case target::DType::F16:
        return blob::DType::F16;
    case target::DType::F32:
        return blob::DType::F32;
    case target::DType::I32:
        return blob::DType::I32;
    }
    throw std::logic_error("unknown DType");
}

blob::ArgKind to_blob(KernelArgKind kind) {
    switch (kind) {
    case KernelArgKind::InputBuffer:
        return blob::ArgKind::InputBuffer;
    case KernelArgKind::OutputBuffer:
        return blob::ArgKind::OutputBuffer;
    case KernelArgKind::ScalarInt:
        return blob::ArgKind::ScalarInt;
    case KernelArgKind::ScalarFloat:
        return blob::ArgKind::ScalarFloat;
    }
    throw std::logic_error("unknown KernelArgKind");
}

} // namespace

const Halide::Target &shave_halide_target() {
    static const Halide::Target target("x86-64-linux-sse41-no_runtime-no_asserts-no_bounds_query");
    return target;
}

ShaveKernelBinary compile_shave_kernel(const std::string &name, Halide::Func output,
                                       const std::vector<Halide::Argument> &inputs,
                                       int vector_bits) {
    if (!is_c_identifier(name)) fail(name, "the name must be a C identifier");
    if (!output.defined()) fail(name, "the output Func has no definition");
    if (output.outputs() != 1) fail(name, "a kernel has exactly one output");
    const Halide::Type out_type = output.output_types()[0];
    if (vector_bits <= 0 || vector_bits % out_type.bits() != 0)
        fail(name, "vector width " + std::to_string(vector_bits) + " bits does not hold whole " +
                       type_name(out_type) + " elements");

    ShaveKernelBinary kernel;
    kernel.name = name;
    kernel.entry = name + "_argv";
    kernel.vector_lanes = uint32_t(vector_bits / out_type.bits());
    try {
        if (!is_scheduled(output)) apply_default_schedule(output, kernel.vector_lanes);
        refuse_parallel_loops(name, output);
        const Halide::Module module = output.compile_to_module(inputs, name, shave_halide_target());
        const LoweredFunc function = module.get_function_by_name(name);
        for (const Halide::Argument &arg : function.args)
            kernel.args.push_back(describe_argument(name, arg));
        kernel.ops_per_vector =
            float(ops_per_output_vector(function.body, output, vector_bits, kernel.vector_lanes));
        const Halide::Buffer<uint8_t> object = module.compile_to_buffer();
        kernel.object.assign(object.data(), object.data() + object.size_in_bytes());
    } catch (const Halide::Error &e) {
        fail(name, std::string("Halide: ") + e.what());
    }
    return kernel;
}

std::unique_ptr<blob::KernelT> to_blob_kernel(const ShaveKernelBinary &kernel) {
    auto out = std::make_unique<blob::KernelT>();
    out->name = kernel.name;
    out->entry = kernel.entry;
    out->object = kernel.object;
    for (const KernelArgDesc &arg : kernel.args) {
        auto blob_arg = std::make_unique<blob::KernelArgT>();
        blob_arg->name = arg.name;
        blob_arg->kind = to_blob(arg.kind);
        blob_arg->dtype = to_blob(arg.dtype);
        blob_arg->rank = uint8_t(arg.rank);
        out->args.push_back(std::move(blob_arg));
    }
    out->vector_lanes = kernel.vector_lanes;
    out->ops_per_vector = kernel.ops_per_vector;
    return out;
}

} // namespace vpuc::codegen
