// DPU matching: the layer's algorithm is called with ImageParams for its inputs and its
// Halide definitions are read structurally, as Halide's tensorization does:
//
//   output Func  pure and elementwise: the pure Funcs it calls are inlined, leaving one
//                expression over an accumulator (a Func with one update), the inputs and
//                constant buffers. Its outer part is the output stage (the PPE), as
//                algorithms/arith.h builds it: int8 cast<u8|i8>(clamp(activation(sat32(
//                round_shift(i64(acc) * mult, shift))) + zero_point, lo, hi)); fp16
//                cast<f16>(activation((acc + bias) * scale)). A stage composed over another
//                (relu, clamp or leaky relu of a conv's output) folds into the one PPE.
//   accumulator  pure definition = bias (the lowest value for a max); one update over an
//                RDom: acc + input * weight (conv, depthwise, matmul), acc + input (average
//                pool) or max(acc, input) (max pool). The input is read directly or through a
//                padded Func (select(inside the image, value, outside)); the read's indices
//                give stride, dilation and padding; weights come from constant Buffers.
//   eltwise      no accumulator: two inputs read at the output's position and combined.
//
// The layer's op name is never read: the definition is the only source of truth.
#include "codegen/dpu_match.h"
#include "codegen/lower.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstring>
#include <map>
#include <set>
#include <sstream>

#include "dsl/registry.h"
#include "vpu_target/printable.h"

namespace vpuc::codegen {

namespace {

using Halide::Expr;
using Halide::Type;
using Halide::Internal::Add;
using Halide::Internal::And;
using Halide::Internal::Call;
using Halide::Internal::Cast;
using Halide::Internal::Definition;
using Halide::Internal::Div;
using Halide::Internal::Function;
using Halide::Internal::Max;
using Halide::Internal::Min;
using Halide::Internal::Mul;
using Halide::Internal::Select;
using Halide::Internal::Sub;
using Halide::Internal::Variable;
using target::DpuOpKind;

// ---- Reading Halide IR ---------------------------------------------------------------------

// Text without the "$n" suffixes Halide adds to reused names, so messages do not depend on
// how many times an algorithm was built.
std::string readable(const std::string &text) {
    std::string out;
    for (size_t i = 0; i < text.size(); ++i) {
        if (text[i] == '$' && i + 1 < text.size() && std::isdigit(text[i + 1])) {
            while (i + 1 < text.size() && std::isdigit(text[i + 1])) ++i;
            continue;
        }
        out += text[i];
    }
    return out;
}

std::string show(const Expr &e) {
    std::ostringstream os;
    os << e;
    return readable(os.str());
}

std::string number_text(double v) {
    if (v == std::floor(v) && std::abs(v) < 1e15) return std::to_string(int64_t(v));
    std::ostringstream os;
    os << v;
    return os.str();
}

std::string type_name(const Type &t) {
    if (t.is_float()) return "f" + std::to_string(t.bits());
    return (t.is_uint() ? "u" : "i") + std::to_string(t.bits());
}

std::optional<int64_t> int_const(const Expr &e) {
    if (!e.defined() || !e.type().is_int_or_uint()) return std::nullopt;
    const Expr s = Halide::Internal::simplify(e);
    if (const int64_t *i = Halide::Internal::as_const_int(s)) return *i;
    if (const uint64_t *u = Halide::Internal::as_const_uint(s)) return int64_t(*u);
    return std::nullopt;
}

std::optional<double> float_const(const Expr &e) {
    if (!e.defined() || !e.type().is_float()) return std::nullopt;
    if (const double *f = Halide::Internal::as_const_float(Halide::Internal::simplify(e)))
        return *f;
    return std::nullopt;
}

// An int or float constant as a double.
std::optional<double> number(const Expr &e) {
    if (auto i = int_const(e)) return double(*i);
    return float_const(e);
}

bool is_var(const Expr &e, const std::string &name) {
    const Variable *v = e.as<Variable>();
    return v && v->name == name;
}

// The operand of `e` if `e` is a cast to `t`, else undefined.
Expr uncast(const Expr &e, const Type &t) {
    const Cast *c = e.defined() ? e.as<Cast>() : nullptr;
    return c && c->type == t ? c->value : Expr();
}

// Splits the operands of a commutative node into (value, constant).
bool with_const(const Expr &a, const Expr &b, Expr &value, double &constant) {
    if (auto k = number(b)) {
        value = a;
        constant = *k;
        return true;
    }
    if (auto k = number(a)) {
        value = b;
        constant = *k;
        return true;
    }
    return false;
}

// max(e, k) or min(e, k) with a constant k.
bool max_min_with(const Expr &e, bool &is_max, Expr &value, double &k) {
    if (const Max *m = e.as<Max>()) {
        is_max = true;
        return with_const(m->a, m->b, value, k);
    }
    if (const Min *m = e.as<Min>()) {
        is_max = false;
        return with_const(m->a, m->b, value, k);
    }
    return false;
}

// clamp(v, lo, hi) as Halide builds it: max(min(v, hi), lo).
bool split_clamp(const Expr &e, Expr &value, double &lo, double &hi) {
    const Max *mx = e.as<Max>();
    Expr inner;
    if (!mx || !with_const(mx->a, mx->b, inner, lo)) return false;
    const Min *mn = inner.as<Min>();
    return mn && with_const(mn->a, mn->b, value, hi);
}

bool is_sat32(const Expr &e, Expr &value) {
    double lo, hi;
    return split_clamp(e, value, lo, hi) && lo == INT32_MIN && hi == INT32_MAX;
}

// round_shift(value, shift) as algorithms::round_shift builds it.
bool split_round_shift(const Expr &e, Expr &value, Expr &shift) {
    const Call *sr = e.as<Call>();
    if (!sr || !sr->is_intrinsic(Call::shift_right)) return false;
    const Add *add = sr->args[0].as<Add>();
    if (!add) return false;
    shift = sr->args[1];
    const Expr half = Expr(int64_t(1)) << (shift - 1);
    value = add->a;
    return Halide::Internal::equal(Halide::Internal::simplify(add->b),
                                   Halide::Internal::simplify(half));
}

// The terms of a product: a * b * c -> {a, b, c}.
void factors(const Expr &e, std::vector<Expr> &out) {
    if (const Mul *m = e.as<Mul>()) {
        factors(m->a, out);
        factors(m->b, out);
    } else {
        out.push_back(e);
    }
}

// e = sum of coefficient * variable + constant.
struct Affine {
    std::map<std::string, int64_t> coeff;
    int64_t constant = 0;

    int64_t of(const std::string &v) const {
        auto it = coeff.find(v);
        return it == coeff.end() ? 0 : it->second;
    }
};

Affine scaled(Affine a, const Affine &b, int64_t sign) {
    for (const auto &[name, c] : b.coeff) a.coeff[name] += sign * c;
    a.constant += sign * b.constant;
    return a;
}

std::optional<Affine> affine(const Expr &e) {
    if (auto k = int_const(e)) return Affine{{}, *k};
    if (const Variable *v = e.as<Variable>()) return Affine{{{v->name, 1}}, 0};
    if (const Add *op = e.as<Add>()) {
        auto a = affine(op->a), b = affine(op->b);
        if (a && b) return scaled(*a, *b, 1);
    } else if (const Sub *op = e.as<Sub>()) {
        auto a = affine(op->a), b = affine(op->b);
        if (a && b) return scaled(*a, *b, -1);
    } else if (const Mul *op = e.as<Mul>()) {
        Expr value;
        double k;
        auto a = with_const(op->a, op->b, value, k) ? affine(value) : std::nullopt;
        if (a) return scaled(Affine{}, *a, int64_t(k));
    }
    return std::nullopt;
}

// A comparison of a variable with a constant, as the inclusive range it allows.
bool var_range(const Expr &cmp, std::string &var, int64_t &lo, int64_t &hi) {
    auto less = [&](const Expr &a, const Expr &b, int64_t strict) { // a < b, or a <= b
        const Variable *va = a.as<Variable>(), *vb = b.as<Variable>();
        auto ka = int_const(a), kb = int_const(b);
        if (va && kb) {
            var = va->name;
            hi = *kb - strict;
            return true;
        }
        if (vb && ka) {
            var = vb->name;
            lo = *ka + strict;
            return true;
        }
        return false;
    };
    if (const auto *op = cmp.as<Halide::Internal::LT>()) return less(op->a, op->b, 1);
    if (const auto *op = cmp.as<Halide::Internal::LE>()) return less(op->a, op->b, 0);
    if (const auto *op = cmp.as<Halide::Internal::GT>()) return less(op->b, op->a, 1);
    if (const auto *op = cmp.as<Halide::Internal::GE>()) return less(op->b, op->a, 0);
    return false;
}

// A Func's value without the lets Halide's common-subexpression elimination put in it.
Expr value_of(const Definition &d) {
    return Halide::Internal::substitute_in_all_lets(d.values()[0]);
}

// Inlines every pure Func called (arguments substituted), so an output split over helper Funcs
// reads as one expression. Reductions stay calls.
class InlinePure : public Halide::Internal::IRMutator {
    using IRMutator::visit;

    Expr visit(const Call *op) override {
        if (op->call_type != Call::Halide) return IRMutator::visit(op);
        Function f(op->func);
        if (f.has_update_definition() || f.has_extern_definition() || f.outputs() != 1)
            return IRMutator::visit(op);
        std::map<std::string, Expr> args;
        for (size_t i = 0; i < op->args.size(); ++i) args[f.args()[i]] = mutate(op->args[i]);
        return mutate(Halide::Internal::substitute(args, value_of(f.definition())));
    }
};

// What an expression reads, looking through the pure Funcs it calls: reductions, input
// images, and extern functions (exp, log...).
class Reads : public Halide::Internal::IRGraphVisitor {
  public:
    std::map<std::string, Function> reductions;
    std::set<std::string> params, externs;

  private:
    using IRGraphVisitor::visit;

    void visit(const Call *op) override {
        IRGraphVisitor::visit(op);
        if (op->call_type == Call::Image && op->param.defined()) params.insert(op->param.name());
        if (op->call_type == Call::PureExtern || op->call_type == Call::Extern) {
            std::string name = op->name; // exp_f32 -> exp
            const size_t us = name.rfind('_');
            if (us != std::string::npos && name.size() - us == 4 && name[us + 1] == 'f')
                name.resize(us);
            externs.insert(name);
        }
        if (op->call_type != Call::Halide) return;
        Function f(op->func);
        if (f.has_update_definition())
            reductions.emplace(f.name(), f);
        else
            for (const Expr &v : f.definition().values()) include(v);
    }
};

Reads reads_of(const Expr &e) {
    Reads r;
    e.accept(&r);
    return r;
}

std::string quoted(const std::set<std::string> &names) {
    std::string s;
    for (const auto &n : names) s += (s.empty() ? "'" : ", '") + n + "'";
    return s;
}

// ---- What the matcher builds ---------------------------------------------------------------

// The PPE found so far, as a function of the value it starts from (int8: the saturated scaled
// accumulator S; fp16: (acc + bias) * scale): clamp(activation(S), low, high) + zero point,
// stored as `type`.
struct Ppe {
    dpu::Activation act = dpu::Activation::None;
    int32_t leaky_mult = 1;
    int leaky_shift = 0;
    float leaky_alpha = 0;
    double low = -INFINITY, high = INFINITY;
    int32_t zero_point = 0;
    Type type;

    // max/min with a constant after the activation: the bounds move.
    void bound(bool is_max, double k) {
        low = is_max ? std::max(low, k) : std::min(low, k);
        high = is_max ? std::max(high, k) : std::min(high, k);
    }
};

// What the output stage applies to: the accumulator and the scaling constants.
struct Core {
    Expr acc;
    Expr mult, shift; // int8
    Expr bias, scale; // fp16; bias may be undefined
};

// One activation step of an output stage, in order of application.
struct Step {
    enum Kind { Bound, Leaky } kind = Bound;
    bool is_max = true; // Bound
    double k = 0;       // Bound: the constant; Leaky: the float slope
    int32_t leaky_mult = 1;
    int leaky_shift = 0;
};

// How the accumulator reads its input.
struct InputUse {
    int input = -1;
    std::vector<Expr> at; // indices, in the accumulator's variables
    int32_t zero_point = 0;
    bool padded = false;
    double outside = 0; // the padding value
};

// The accumulator's update: acc + term or max(acc, term), over an RDom.
struct Update {
    Function acc;
    std::string where;             // "update definition of 'acc'"
    std::vector<std::string> vars; // the accumulator's pure vars (c, x, y)
    std::vector<std::string> rvars;
    std::map<std::string, int64_t> extent;
    bool is_max = false;
    std::vector<Expr> terms; // the factors of the term
    int reading = -1;        // the factor that reads the input
};

class Matcher {
  public:
    explicit Matcher(const dsl::Layer &layer) : layer_(layer) {}

    DpuOpDesc run();

  private:
    const dsl::Layer &layer_;
    std::vector<std::string> params_;   // the ImageParam name of each layer input
    std::vector<std::string> out_vars_; // the output Func's pure vars (c, x, y)
    int64_t oc_ = 0, ow_ = 0, oh_ = 0;  // output extents
    DpuOpDesc d_;

    [[noreturn]] void fail(const std::string &part, const std::string &why) const {
        throw DpuMatchError("layer '" + layer_.name() + "': " + part + ": " + why);
    }

    Expr algorithm_output(bool &is_float);
    bool input_read(const Expr &e, int &input, std::vector<Expr> &args) const;
    dsl::TensorDesc input_tensor(int i) const {
        return dsl::device_view(dsl::input_tensor(layer_, size_t(i)));
    }
    std::string describe(const Expr &e) const;
    std::vector<double> channel_values(const Expr &e, const std::string &what,
                                       const std::string &channel) const;

    // Output stage.
    Ppe int_stage(const Expr &e, Core &core);
    Ppe float_stage(const Expr &e, Core &core);
    bool int_leaky(const Expr &e, Step &step, Expr &inner) const;
    bool float_leaky(const Expr &e, Step &step, Expr &inner) const;
    void apply(Ppe &ppe, const std::vector<Step> &steps, bool is_float) const;
    void int_core(const Expr &scaled, Core &core) const;
    void float_core(const Expr &v, Core &core) const;
    void finish_int(const Ppe &ppe, const Core &core);
    void finish_float(const Ppe &ppe, const Core &core);

    // Accumulator.
    void reduction(const Function &acc, bool is_float);
    Update parse_update(const Function &acc) const;
    bool mac_operand(const Expr &e, bool is_float, InputUse &use, std::vector<Expr> &at) const;
    InputUse input_use(const Expr &operand, bool is_float) const;
    void padding(const Function &pad, bool is_float, InputUse &use) const;
    void check_start(const Update &u, const InputUse &use, bool is_float);
    Halide::Buffer<> weights(const Expr &term, bool is_float, std::vector<Expr> &at);
    void roles(const Update &u, const std::vector<Expr> &w_at, std::string &r_ic, std::string &r_kx,
               std::string &r_ky);
    void channels(const Update &u, const InputUse &use, const std::string &r_ic);
    void window(const Update &u, const InputUse &use, std::string &r_kx, std::string &r_ky);
    void check_domain(const Update &u, bool is_float, const std::vector<std::string> &roles);
    void set_weights(Halide::Buffer<> w, const Update &u, const std::string &r_ic);

    // Eltwise.
    void eltwise(const Expr &acc, bool is_float);
    void eltwise_operand(const Expr &e, bool is_float, int &input, int32_t &zero_point,
                         int32_t &mult) const;
};

// ---- Inputs and constants ------------------------------------------------------------------

// A read of a layer input: the ImageParam's call, or a call to the Func wrapping it.
bool Matcher::input_read(const Expr &e, int &input, std::vector<Expr> &args) const {
    const Call *call = e.defined() ? e.as<Call>() : nullptr;
    if (!call) return false;
    const Call *image = call;
    if (call->call_type == Call::Halide) {
        Function f(call->func);
        if (f.has_update_definition() || f.outputs() != 1) return false;
        image = value_of(f.definition()).as<Call>();
    }
    if (!image || image->call_type != Call::Image || !image->param.defined()) return false;
    auto it = std::find(params_.begin(), params_.end(), image->param.name());
    if (it == params_.end()) return false;
    input = int(it - params_.begin());
    args = call->args;
    return true;
}

// How a value that should be a constant is produced, for error messages.
std::string Matcher::describe(const Expr &e) const {
    int input = 0;
    std::vector<Expr> args;
    if (input_read(e, input, args))
        return "read from the run-time input '" + layer_.inputs()[size_t(input)].name() + "'";
    const Call *c = e.as<Call>();
    if (c && c->call_type == Call::Halide) return "computed by Func '" + readable(c->name) + "'";
    return "`" + show(e) + "`";
}

// A per-tensor constant, or a constant buffer read at the output channel (the variable
// `channel`).
std::vector<double> Matcher::channel_values(const Expr &e, const std::string &what,
                                            const std::string &channel) const {
    if (auto k = number(e)) return {*k};
    const Call *c = e.as<Call>();
    const bool buffer = c && c->call_type == Call::Image && c->image.defined() &&
                        c->args.size() == 1 && is_var(c->args[0], channel);
    if (!buffer)
        fail(what, "is " + describe(e) +
                       "; the PPE takes a constant, or a constant buffer indexed by the output "
                       "channel");
    const Halide::Buffer<> &b = c->image;
    if (b.dimensions() != 1 || b.dim(0).min() != 0 || b.dim(0).extent() != oc_)
        fail(what, "buffer '" + b.name() + "' must have one entry per output channel (" +
                       std::to_string(oc_) + ")");
    const Type t = b.type();
    std::vector<double> values;
    for (int i = 0; i < b.dim(0).extent(); ++i) {
        if (t == Halide::UInt(8))
            values.push_back(b.as<uint8_t>()(i));
        else if (t == Halide::UInt(16))
            values.push_back(b.as<uint16_t>()(i));
        else if (t == Halide::Int(32))
            values.push_back(b.as<int32_t>()(i));
        else if (t == Halide::Float(32))
            values.push_back(b.as<float>()(i));
        else
            fail(what, "buffer '" + b.name() + "' is " + type_name(t) +
                           "; expected u8 shifts, u16 multipliers, i32 or f32 values");
    }
    return values;
}

// ---- The output stage ----------------------------------------------------------------------

// Leaky relu in the int8 stage: select(v < 0, round_shift(v * mult, shift), v).
bool Matcher::int_leaky(const Expr &e, Step &step, Expr &inner) const {
    const Select *s = e.as<Select>();
    const auto *lt = s ? s->condition.as<Halide::Internal::LT>() : nullptr;
    Expr product, shift, v;
    double mult;
    if (!lt || int_const(lt->b) != 0 || !Halide::Internal::equal(lt->a, s->false_value) ||
        !split_round_shift(s->true_value, product, shift) || !int_const(shift))
        return false;
    const Mul *m = product.as<Mul>();
    if (!m || !with_const(m->a, m->b, v, mult) || !Halide::Internal::equal(v, s->false_value))
        return false;
    step = {Step::Leaky, true, 0, int32_t(mult), int(*int_const(shift))};
    inner = s->false_value;
    return true;
}

// Leaky relu in the fp16 stage: select(v < 0, v * alpha, v).
bool Matcher::float_leaky(const Expr &e, Step &step, Expr &inner) const {
    const Select *s = e.as<Select>();
    const auto *lt = s ? s->condition.as<Halide::Internal::LT>() : nullptr;
    const Mul *m = s ? s->true_value.as<Mul>() : nullptr;
    Expr v;
    double alpha;
    if (!lt || float_const(lt->b) != 0.0 || !Halide::Internal::equal(lt->a, s->false_value) || !m ||
        !with_const(m->a, m->b, v, alpha) || !Halide::Internal::equal(v, s->false_value))
        return false;
    step = {Step::Leaky, true, alpha};
    inner = s->false_value;
    return true;
}

// Applies steps (innermost first) to `ppe`. A leaky relu becomes the activation and moves the
// bounds found before it through itself: it is monotone, so leaky(clamp(v, lo, hi)) =
// clamp(leaky(v), leaky(lo), leaky(hi)).
void Matcher::apply(Ppe &ppe, const std::vector<Step> &steps, bool is_float) const {
    for (const Step &step : steps) {
        if (step.kind == Step::Bound) {
            ppe.bound(step.is_max, step.k);
            continue;
        }
        if (ppe.act == dpu::Activation::LeakyRelu)
            fail("output stage", "applies leaky relu twice; the PPE has one activation");
        if (is_float ? step.k < 0 : step.leaky_mult < 0)
            fail("output stage", "leaky relu has a negative slope; the PPE's slope is >= 0");
        auto leaky = [&](double v) {
            if (!(v < 0)) return v;
            if (is_float) return std::isinf(v) && step.k == 0 ? 0.0 : v * step.k;
            return double(dpu::round_shift(int64_t(v) * step.leaky_mult, step.leaky_shift));
        };
        ppe.act = dpu::Activation::LeakyRelu;
        ppe.leaky_alpha = float(step.k);
        ppe.leaky_mult = step.leaky_mult;
        ppe.leaky_shift = step.leaky_shift;
        ppe.low = leaky(ppe.low);
        ppe.high = leaky(ppe.high);
    }
}

// round_shift(i64(acc) * mult, shift): the requantization of the int32 accumulator.
void Matcher::int_core(const Expr &scaled, Core &core) const {
    Expr product, shift;
    const Mul *m = split_round_shift(scaled, product, shift) ? product.as<Mul>() : nullptr;
    const Expr a = m ? uncast(m->a, Halide::Int(64)) : Expr();
    const Expr b = m ? uncast(m->b, Halide::Int(64)) : Expr();
    const bool a_acc = a.defined() && a.type() == Halide::Int(32);
    const bool b_acc = b.defined() && b.type() == Halide::Int(32);
    if (a_acc == b_acc)
        fail("output stage", "saturates `" + show(scaled) +
                                 "`; the PPE requantizes round_shift(i64(acc) * mult, shift) of "
                                 "the int32 accumulator");
    auto narrow = [](const Expr &e) { return e.as<Cast>() ? e.as<Cast>()->value : e; };
    core.acc = a_acc ? a : b;
    core.mult = narrow(a_acc ? m->b : m->a);
    core.shift = narrow(shift);
}

// cast<u8|i8>(clamp(steps(sat32(X)) + zero_point, lo, hi)) with X the requantized accumulator
// (the core) or i64(i32(Q) - zp), a stage composed over a producer's stored output Q; or
// max/min(Q, k) on stored values.
Ppe Matcher::int_stage(const Expr &e, Core &core) {
    bool is_max;
    Expr q;
    double k;
    if (max_min_with(e, is_max, q, k)) {
        if (q.type() != e.type())
            fail("output stage", "`" + show(e) + "` is not a clamp of the stored output");
        Ppe ppe = int_stage(q, core);
        ppe.bound(is_max, k - ppe.zero_point);
        return ppe;
    }
    const Cast *cast = e.as<Cast>();
    Expr sum;
    double low, high;
    if (!cast || !split_clamp(cast->value, sum, low, high))
        fail("output stage", "ends with `" + show(e) +
                                 "`; the PPE's int8 output is cast<u8|i8>(clamp(v + zero "
                                 "point, low, high)), as algorithms::requantize builds it");
    const double type_lo = cast->type.is_uint() ? 0 : -128,
                 type_hi = cast->type.is_uint() ? 255 : 127;
    if (low < type_lo || high > type_hi || low > high)
        fail("output stage", "clamps to [" + std::to_string(int64_t(low)) + ", " +
                                 std::to_string(int64_t(high)) + "] before the cast to " +
                                 type_name(cast->type) + "; the PPE saturates to the output type");
    Expr activated = sum;
    double zero_point = 0;
    if (const Add *add = sum.as<Add>()) with_const(add->a, add->b, activated, zero_point);

    // Activation steps, outermost first, down to the int32 saturation.
    std::vector<Step> steps;
    Expr v = activated, saturated;
    while (!is_sat32(v, saturated)) {
        Step step;
        Expr inner;
        if (max_min_with(v, step.is_max, inner, step.k) || int_leaky(v, step, inner)) {
            steps.insert(steps.begin(), step);
            v = inner;
            continue;
        }
        fail("output stage", "`" + show(v) +
                                 "` is neither an activation (max, min, leaky relu) nor "
                                 "saturated to 32 bits, as the PPE saturates the scaled "
                                 "accumulator");
    }

    Ppe ppe;
    const Expr centered = uncast(saturated, Halide::Int(64));
    const Sub *sub = centered.defined() ? centered.as<Sub>() : nullptr;
    Expr stored = uncast(sub ? sub->a : centered, Halide::Int(32));
    if (stored.defined() && stored.type().is_int_or_uint() && stored.type().bits() == 8) {
        // A stage over a producer's stored output: Q - zp is clamp(act(S), low, high) of the
        // producer's PPE, the same function of S.
        ppe = int_stage(stored, core);
        const int64_t zp_in = sub ? int_const(sub->b).value_or(INT64_MIN) : 0;
        if (zp_in != ppe.zero_point)
            fail("output stage", "reads the producer's output with zero point " +
                                     std::to_string(zp_in) + " but it was written with " +
                                     std::to_string(ppe.zero_point));
    } else {
        int_core(saturated, core);
        ppe.low = INT32_MIN;
        ppe.high = INT32_MAX;
    }
    ppe.type = cast->type;
    ppe.zero_point = int32_t(zero_point);
    apply(ppe, steps, false);
    // + zero point, then clamp the stored value to [low, high].
    auto clamp_stored = [&](double b) {
        return std::clamp(b + zero_point, low, high) - zero_point;
    };
    ppe.low = clamp_stored(ppe.low);
    ppe.high = clamp_stored(ppe.high);
    return ppe;
}

// (acc + bias) * scale, or acc * scale; bias and scale constants or per-channel buffers.
void Matcher::float_core(const Expr &v, Core &core) const {
    auto is_constant = [](const Expr &e) {
        const Call *c = e.as<Call>();
        return number(e) || (c && c->call_type == Call::Image && c->image.defined());
    };
    const Mul *m = v.as<Mul>();
    if (!m || !(is_constant(m->a) || is_constant(m->b)))
        fail("output stage", "`" + show(v) +
                                 "` is not scaled by a constant; the PPE's fp16 output is "
                                 "(acc + bias) * scale");
    const bool scale_first = is_constant(m->a) && !is_constant(m->b);
    core.scale = scale_first ? m->a : m->b;
    core.acc = scale_first ? m->b : m->a;
    if (const Add *a = core.acc.as<Add>()) {
        if (is_constant(a->b)) {
            core.bias = a->b;
            core.acc = a->a;
        } else if (is_constant(a->a)) {
            core.bias = a->a;
            core.acc = a->b;
        }
    }
}

// cast<f16>(steps(V)) with V the scaled accumulator (the core), or f32(Q) for a stage
// composed over a producer's f16 output Q.
Ppe Matcher::float_stage(const Expr &e, Core &core) {
    const Expr value = uncast(e, Halide::Float(16));
    if (!value.defined() || value.type() != Halide::Float(32))
        fail("output stage",
             "ends with `" + show(e) + "`; the PPE's fp16 output is cast<f16> of a float32 value");
    std::vector<Step> steps;
    Expr v = value;
    for (;;) {
        Step step;
        Expr inner;
        if (!max_min_with(v, step.is_max, inner, step.k) && !float_leaky(v, step, inner)) break;
        steps.insert(steps.begin(), step);
        v = inner;
    }
    Ppe ppe;
    const Expr stored = uncast(v, Halide::Float(32));
    if (stored.defined() && stored.type() == Halide::Float(16)) {
        // Rounding to f16 between the stages is monotone, so clamps fold exactly; a leaky
        // relu after it rounds twice where the fused PPE rounds once (fp16 tolerance).
        ppe = float_stage(stored, core);
    } else {
        float_core(v, core);
    }
    ppe.type = Halide::Float(16);
    apply(ppe, steps, true);
    return ppe;
}

void Matcher::finish_int(const Ppe &ppe, const Core &core) {
    for (double m : channel_values(core.mult, "the requantization multiplier", out_vars_[0])) {
        if (m < 0 || m > 65535)
            fail("output stage", "the multiplier " + std::to_string(int64_t(m)) +
                                     " does not fit the PPE's 16 bits");
        d_.mult.push_back(uint16_t(m));
    }
    for (double s : channel_values(core.shift, "the requantization shift", out_vars_[0])) {
        if (s < 0 || s > 63)
            fail("output stage",
                 "the shift " + std::to_string(int64_t(s)) + " does not fit the PPE's 6 bits");
        d_.shift.push_back(uint8_t(s));
    }
    dpu::IntPpe &p = d_.int_ppe;
    p.out_min = ppe.type.is_uint() ? 0 : -128;
    p.out_max = ppe.type.is_uint() ? 255 : 127;
    p.out_zero_point = ppe.zero_point;
    p.activation = ppe.act;
    p.leaky_mult = ppe.leaky_mult;
    p.leaky_shift = ppe.leaky_shift;
    // A clamp at 0 before the zero point is a relu.
    if (p.activation == dpu::Activation::None && ppe.low == 0) p.activation = dpu::Activation::Relu;
    p.clamp_low = int32_t(ppe.low + ppe.zero_point);
    p.clamp_high = int32_t(ppe.high + ppe.zero_point);
    d_.output_type = ppe.type;
}

void Matcher::finish_float(const Ppe &ppe, const Core &core) {
    for (double s : channel_values(core.scale, "the output scale", out_vars_[0]))
        d_.fp_scale.push_back(float(s));
    if (core.bias.defined())
        for (double b : channel_values(core.bias, "the output bias", out_vars_[0]))
            d_.fp_bias.push_back(float(b));
    dpu::FloatPpe &p = d_.float_ppe;
    p.activation = ppe.act;
    p.leaky_alpha = ppe.leaky_alpha;
    p.clamp_low = float(ppe.low);
    if (p.activation == dpu::Activation::None && ppe.low == 0) {
        p.activation = dpu::Activation::Relu;
        p.clamp_low = -INFINITY; // implied by the relu
    }
    p.clamp_high = float(ppe.high);
    d_.output_type = ppe.type;
}

// ---- The accumulator -----------------------------------------------------------------------

Update Matcher::parse_update(const Function &acc) const {
    Update u;
    u.acc = acc;
    u.where = "update definition of '" + readable(acc.name()) + "'";
    u.vars = acc.args();
    if (acc.updates().size() != 1 || acc.outputs() != 1)
        fail(u.where, "there are " + std::to_string(acc.updates().size()) +
                          " updates; a DPU operation accumulates once over a kernel window");
    const Definition &update = acc.updates()[0];
    for (size_t i = 0; i < u.vars.size(); ++i)
        if (!is_var(update.args()[i], u.vars[i]))
            fail(u.where, "writes '" + readable(acc.name()) + "' at `" + show(update.args()[i]) +
                              "`; the DPU accumulates each output at its own position");
    const std::string domain = "reduction domain of '" + readable(acc.name()) + "'";
    if (!Halide::Internal::is_const_one(update.predicate()))
        fail(domain, "has a predicate (RDom::where); the DPU's kernel window is a dense box");
    for (const auto &rv : update.schedule().rvars()) {
        auto lo = int_const(rv.min), ext = int_const(rv.extent);
        if (lo != 0 || !ext)
            fail(domain, "'" + readable(rv.var) + "' runs over [" + show(rv.min) + ", +" +
                             show(rv.extent) +
                             "); a kernel window starts at 0 with a constant "
                             "extent");
        u.extent[rv.var] = *ext;
        u.rvars.push_back(rv.var);
    }

    // acc(c, x, y) + term, or max(acc(c, x, y), term).
    const Expr value = value_of(update);
    auto is_self = [&](const Expr &e) {
        const Call *c = e.as<Call>();
        if (!c || c->call_type != Call::Halide || c->name != acc.name()) return false;
        for (size_t i = 0; i < u.vars.size(); ++i)
            if (!is_var(c->args[i], u.vars[i])) return false;
        return true;
    };
    Expr term;
    if (const Add *a = value.as<Add>()) {
        term = is_self(a->a) ? a->b : is_self(a->b) ? a->a : Expr();
    } else if (const Max *m = value.as<Max>()) {
        term = is_self(m->a) ? m->b : is_self(m->b) ? m->a : Expr();
        u.is_max = true;
    }
    if (!term.defined())
        fail(u.where, "is `" + show(value) +
                          "`; the DPU accumulates a sum (conv, matmul, average pool) or a max "
                          "(max pool) into the output's own accumulator");
    factors(term, u.terms);
    if (u.terms.size() > 2 || (u.is_max && u.terms.size() > 1))
        fail(u.where, std::string(u.is_max ? "the max takes" : "the reduction adds") +
                          " a product of " + std::to_string(u.terms.size()) +
                          " terms; a DPU MAC multiplies an input by a weight");
    for (size_t i = 0; i < u.terms.size(); ++i)
        if (!reads_of(u.terms[i]).params.empty()) {
            if (u.reading >= 0)
                fail(u.where, "multiplies two run-time tensors; a DPU MAC multiplies an input "
                              "by constant weights");
            u.reading = int(i);
        }
    if (u.reading < 0) fail(u.where, "reads no layer input");
    return u;
}

// The input as the MAC takes it: i32(in(...)) - zero point (f32(in(...)) for fp16).
bool Matcher::mac_operand(const Expr &e, bool is_float, InputUse &use,
                          std::vector<Expr> &at) const {
    Expr stored;
    if (is_float) {
        stored = uncast(e, Halide::Float(32));
    } else {
        const Sub *s = e.as<Sub>();
        const auto zp = s ? int_const(s->b) : std::nullopt;
        if (zp) use.zero_point = int32_t(*zp);
        stored = uncast(zp ? s->a : e, Halide::Int(32));
    }
    return stored.defined() && stored.type().bits() == (is_float ? 16 : 8) &&
           input_read(stored, use.input, at);
}

InputUse Matcher::input_use(const Expr &operand, bool is_float) const {
    InputUse use;
    if (mac_operand(operand, is_float, use, use.at)) return use;
    const Call *call = operand.as<Call>();
    if (call && call->call_type == Call::Halide) {
        const Function pad(call->func);
        if (!pad.has_update_definition() && value_of(pad.definition()).as<Select>()) {
            padding(pad, is_float, use);
            use.at = call->args;
            return use;
        }
    }
    fail("input read", "`" + show(operand) +
                           "` is not the input as the MAC takes it: i32(v) - zero point (or "
                           "f32(v)), read directly or through a padded Func");
}

// The padded Func: select(0 <= x < W && 0 <= y < H, operand(in(c, clamp(x, 0, W - 1),
// clamp(y, 0, H - 1))), outside): zero padding around the whole input.
void Matcher::padding(const Function &pad, bool is_float, InputUse &use) const {
    const std::string where = "padded input '" + readable(pad.name()) + "'";
    const Expr body = value_of(pad.definition());
    const Select *sel = body.as<Select>();
    const std::vector<std::string> &pv = pad.args();
    if (pv.size() != 3) fail(where, "is not a Func of (c, x, y)");
    std::vector<Expr> at;
    if (!mac_operand(sel->true_value, is_float, use, at) || !is_var(at[0], pv[0]))
        fail(where, "reads `" + show(sel->true_value) +
                        "`; expected the input at (c, clamp(x), clamp(y)) as the MAC takes it "
                        "(i32(v) - zero point, or f32(v))");
    std::map<std::string, std::pair<int64_t, int64_t>> guard;
    std::vector<Expr> conds = {sel->condition};
    while (!conds.empty()) {
        const Expr c = conds.back();
        conds.pop_back();
        if (const And *a = c.as<And>()) {
            conds.push_back(a->a);
            conds.push_back(a->b);
            continue;
        }
        std::string var;
        int64_t lo = INT64_MIN, hi = INT64_MAX;
        if (!var_range(c, var, lo, hi) || (var != pv[1] && var != pv[2]))
            fail(where,
                 "guards with `" + show(c) + "`; a padded input bounds x and y by constants");
        auto &g = guard.try_emplace(var, INT64_MIN, INT64_MAX).first->second;
        g = {std::max(g.first, lo), std::min(g.second, hi)};
    }
    const dsl::Shape shape = input_tensor(use.input).shape;
    const int64_t size[3] = {shape[dsl::dims::C], shape[dsl::dims::W], shape[dsl::dims::H]};
    for (size_t d = 1; d <= 2; ++d) {
        auto g = guard.count(pv[d]) ? guard[pv[d]] : std::make_pair(INT64_MIN, INT64_MAX);
        Expr v;
        double lo, hi;
        const bool clamped = split_clamp(at[d], v, lo, hi) && is_var(v, pv[d]) && lo == 0 &&
                             hi == double(size[d] - 1);
        if (g.first != 0 || g.second != size[d] - 1 || !clamped)
            fail(where, std::string("pads ") + (d == 1 ? "x" : "y") + " with the guard `" +
                            show(sel->condition) + "` and the read `" + show(at[d]) +
                            "`; the padding must surround the whole input [0, " +
                            std::to_string(size[d]) + ")");
    }
    auto outside = number(sel->false_value);
    if (!outside) fail(where, "pads with `" + show(sel->false_value) + "`; padding is a constant");
    use.padded = true;
    use.outside = *outside;
}

// Padding and the accumulator's start contribute nothing: 0 to a sum, below every input to a
// max. The int8 sum starts at the bias.
void Matcher::check_start(const Update &u, const InputUse &use, bool is_float) {
    const Type stored = dsl::halide_type(input_tensor(use.input).type);
    const double lowest = is_float           ? -65504.0 // the lowest f16
                          : stored.is_uint() ? -double(use.zero_point)
                                             : -128.0 - use.zero_point;
    if (use.padded && (u.is_max ? use.outside > lowest : use.outside != 0))
        fail("padded input", "pads with " + number_text(use.outside) +
                                 (u.is_max ? "; padding must never win the max (a value below "
                                             "every input)"
                                           : "; padding must contribute 0 to the sum"));
    const std::string where = "pure definition of '" + readable(u.acc.name()) + "'";
    const Expr init = value_of(u.acc.definition());
    if (u.is_max) {
        auto k = number(init);
        if (!k || *k > lowest)
            fail(where, "starts the max at `" + show(init) + "`; it must start below every input");
        if (!is_float) d_.bias = {0};
    } else if (is_float) {
        if (float_const(init) != 0.0)
            fail(where, "starts the fp32 sum at `" + show(init) +
                            "`; the DPU starts at 0 and adds the bias after the window");
    } else {
        for (double b : channel_values(init, "the bias (" + where + ")", u.vars[0]))
            d_.bias.push_back(int32_t(b));
    }
}

// The weight factor: i32(w(...)) - zero point (f32(w(...))) from a constant buffer.
Halide::Buffer<> Matcher::weights(const Expr &term, bool is_float, std::vector<Expr> &at) {
    Expr w = term;
    if (!is_float) {
        const Sub *s = w.as<Sub>();
        if (auto zp = s ? int_const(s->b) : std::nullopt) {
            d_.weights_zero_point = int32_t(*zp);
            w = s->a;
        }
    }
    w = uncast(w, is_float ? Halide::Float(32) : Halide::Int(32));
    const Call *wc = w.defined() ? w.as<Call>() : nullptr;
    if (!wc)
        fail("weights", "`" + show(term) +
                            "` is not a weight as the MAC takes it (i32(w) - zero point, or "
                            "f32(w))");
    if (wc->call_type != Call::Image || !wc->image.defined())
        fail("weights",
             "are " + describe(w) + "; the DPU reads weights from a constant Halide::Buffer");
    const Type t = wc->image.type();
    if (is_float ? t != Halide::Float(16) : !(t == Halide::Int(8) || t == Halide::UInt(8)))
        fail("weights",
             "are " + type_name(t) + "; the DPU's weights are " + (is_float ? "f16" : "i8 or u8"));
    at = wc->args;
    return wc->image;
}

// The reduction variables' roles, from where the weights are read: w(ic, kx, ky, c) conv,
// w(0, kx, ky, c) depthwise, w(k, c) matmul; no weights: a pool.
void Matcher::roles(const Update &u, const std::vector<Expr> &w_at, std::string &r_ic,
                    std::string &r_kx, std::string &r_ky) {
    auto rvar = [&](const Expr &e) -> std::string {
        const Variable *v = e.as<Variable>();
        return v && u.extent.count(v->name) ? v->name : "";
    };
    const std::string &c = u.vars[0];
    if (u.terms.size() == 1) {
        d_.op = u.is_max ? DpuOpKind::MaxPool : DpuOpKind::AvgPool;
    } else if (w_at.size() == 4 && is_var(w_at[3], c) && !rvar(w_at[1]).empty() &&
               !rvar(w_at[2]).empty() && (!rvar(w_at[0]).empty() || int_const(w_at[0]) == 0)) {
        r_ic = rvar(w_at[0]);
        r_kx = rvar(w_at[1]);
        r_ky = rvar(w_at[2]);
        d_.op = r_ic.empty() ? DpuOpKind::DepthwiseConv : DpuOpKind::Conv;
    } else if (w_at.size() == 2 && is_var(w_at[1], c) && !rvar(w_at[0]).empty()) {
        r_ic = rvar(w_at[0]);
        d_.op = DpuOpKind::MatMul;
    } else {
        std::string at;
        for (const Expr &a : w_at) at += (at.empty() ? "" : ", ") + show(a);
        fail("weights", "are read at (" + at +
                            "); expected w(ic, kx, ky, c), w(0, kx, ky, c) or w(k, c) with "
                            "kernel-window RVars and the output channel");
    }
}

// The channel the input is read at: the summed input channel, (c / oc_per_group) *
// ic_per_group + ic with groups; the output channel for depthwise and pools.
void Matcher::channels(const Update &u, const InputUse &use, const std::string &r_ic) {
    const Expr ch = use.at[0];
    const std::string &c = u.vars[0];
    const int64_t in_c = input_tensor(use.input).shape[dsl::dims::C];
    if (r_ic.empty()) {
        if (!is_var(ch, c))
            fail("input read", "the channel index is `" + show(ch) +
                                   "`; depthwise convs and pools read the output's channel");
        return;
    }
    const int64_t ic_per_group = u.extent.at(r_ic);
    int64_t groups = 1;
    if (!is_var(ch, r_ic)) {
        const Add *a = ch.as<Add>();
        const Mul *m = a ? a->a.as<Mul>() : nullptr;
        const Div *dv = m ? m->a.as<Div>() : nullptr;
        const auto oc_per_group = dv ? int_const(dv->b) : std::nullopt;
        if (!oc_per_group || !is_var(a->b, r_ic) || !is_var(dv->a, c) ||
            int_const(m->b) != ic_per_group)
            fail("input read", "the channel index `" + show(ch) +
                                   "` is neither the summed input channel nor (c / "
                                   "oc_per_group) * ic_per_group + ic (groups)");
        groups = oc_ / *oc_per_group;
        if (groups * *oc_per_group != oc_)
            fail("input read", "the groups of `" + show(ch) + "` do not divide the " +
                                   std::to_string(oc_) + " output channels");
    }
    if (groups * ic_per_group != in_c)
        fail("input read", std::to_string(groups) + " group(s) of " + std::to_string(ic_per_group) +
                               " input channels do not cover the " + std::to_string(in_c) +
                               " channels of the input");
    d_.groups = int(groups);
}

// The spatial indices: x * stride + kx * dilation - pad (and y), inside the input unless a
// padded Func surrounds it. Finds the window RVars of pools.
void Matcher::window(const Update &u, const InputUse &use, std::string &r_kx, std::string &r_ky) {
    const dsl::Shape shape = input_tensor(use.input).shape;
    if (d_.op == DpuOpKind::MatMul) {
        if (!is_var(use.at[1], u.vars[1]) || !is_var(use.at[2], u.vars[2]) || use.padded)
            fail("input read", "a matmul reads the input at (k, x, y), unpadded");
        return;
    }
    for (int d = 1; d <= 2; ++d) {
        const std::string &v = u.vars[size_t(d)];
        const std::string axis = d == 1 ? "x" : "y";
        const Expr index = use.at[size_t(d)];
        std::string &rk = d == 1 ? r_kx : r_ky;
        auto form = affine(index);
        if (!form)
            fail("input read", "the " + axis + " index `" + show(index) + "` is not affine in " +
                                   axis +
                                   " and the kernel window; the DPU walks the input with "
                                   "a fixed stride");
        if (rk.empty()) // a pool: the window RVar is the one the index moves with
            for (const auto &[name, coeff] : form->coeff)
                if (u.extent.count(name) && coeff != 0) rk = name;
        for (const auto &[name, coeff] : form->coeff)
            if (coeff != 0 && name != v && name != rk)
                fail("input read", "the " + axis + " index `" + show(index) + "` depends on '" +
                                       name + "'; expected " + axis +
                                       " * stride + k * dilation - pad");
        const int64_t kernel = rk.empty() ? 1 : u.extent.at(rk);
        const int64_t stride = form->of(v), dilation = rk.empty() ? 1 : form->of(rk);
        if (stride < 1 || dilation < 1)
            fail("input read", "the " + axis + " index `" + show(index) +
                                   "` does not advance with the output and the window");
        const bool pool = d_.op == DpuOpKind::MaxPool || d_.op == DpuOpKind::AvgPool;
        if (pool && kernel > 1 && dilation != 1)
            fail("input read", "the " + axis + " index `" + show(index) +
                                   "` dilates a pool's window; the DPU pools every element of "
                                   "the span (a dilated kernel is its span with zero weights)");
        const int64_t in = shape[d == 1 ? dsl::dims::W : dsl::dims::H];
        const int64_t out = d == 1 ? ow_ : oh_;
        const int64_t before = -form->constant;
        const int64_t last = (out - 1) * stride + (kernel - 1) * dilation - before;
        if (before < 0)
            fail("input read", "starts reading " + axis + " at " + std::to_string(-before) +
                                   "; the DPU's window starts at the input's first element or "
                                   "in the padding before it");
        if (!use.padded && (before > 0 || last > in - 1))
            fail("input read", "reads " + axis + " outside the input with no padded Func");
        const int64_t after = std::max<int64_t>(0, last - (in - 1));
        if (u.is_max && (before >= kernel || after >= kernel))
            fail("input read", "a max pool window would lie entirely in the padding");
        (d == 1 ? d_.kernel_w : d_.kernel_h) = int(kernel);
        (d == 1 ? d_.stride_w : d_.stride_h) = int(stride);
        (d == 1 ? d_.dilation_w : d_.dilation_h) = kernel == 1 ? 1 : int(dilation);
        (d == 1 ? d_.pad_left : d_.pad_top) = int(before);
        (d == 1 ? d_.pad_right : d_.pad_bottom) = int(after);
    }
}

// Every RVar has a role; fp16 sums run in the DPU's order (ic innermost, then kx, ky).
void Matcher::check_domain(const Update &u, bool is_float, const std::vector<std::string> &roles) {
    const std::string where = "reduction domain of '" + readable(u.acc.name()) + "'";
    std::set<std::string> distinct(roles.begin(), roles.end());
    if (distinct.size() != roles.size() || roles.size() != u.rvars.size())
        fail(where, "has " + std::to_string(u.rvars.size()) +
                        " dimensions; each must be the input channel or a kernel-window "
                        "dimension, used once");
    if (is_float && roles != u.rvars)
        fail(where, "the fp16 sum must run over (ic, kx, ky), innermost first, in the DPU's order");
}

// The weights as DpuOpDesc wants them: (ic, kx, ky, oc); a matmul's (k, n) is a 1x1 conv's.
void Matcher::set_weights(Halide::Buffer<> w, const Update &u, const std::string &r_ic) {
    const bool matmul = d_.op == DpuOpKind::MatMul;
    const int64_t ic = r_ic.empty() ? 1 : u.extent.at(r_ic);
    const std::vector<int64_t> expect =
        matmul ? std::vector<int64_t>{ic, oc_}
               : std::vector<int64_t>{ic, d_.kernel_w, d_.kernel_h, oc_};
    bool fits = w.dimensions() == int(expect.size());
    for (int i = 0; fits && i < w.dimensions(); ++i)
        fits = w.dim(i).min() == 0 && w.dim(i).extent() == expect[size_t(i)];
    if (!fits)
        fail("weights", "buffer '" + w.name() + "' does not match the window and the " +
                            std::to_string(oc_) + " output channels");
    if (matmul) {
        Halide::Buffer<> w4(w.type(), {int(ic), 1, 1, int(oc_)});
        for (int n = 0; n < oc_; ++n)
            for (int k = 0; k < ic; ++k) {
                const int at2[2] = {k, n}, at4[4] = {k, 0, 0, n};
                std::memcpy(w4.raw_buffer()->address_of(at4), w.raw_buffer()->address_of(at2),
                            size_t(w.type().bytes()));
            }
        w = w4;
    }
    d_.weights = w;
}

void Matcher::reduction(const Function &acc, bool is_float) {
    const Update u = parse_update(acc);
    const InputUse use = input_use(u.terms[size_t(u.reading)], is_float);
    d_.input = use.input;
    d_.input_zero_point = use.zero_point;
    d_.input_type = dsl::halide_type(input_tensor(use.input).type);
    check_start(u, use, is_float);

    Halide::Buffer<> w;
    std::vector<Expr> w_at;
    if (u.terms.size() == 2) w = weights(u.terms[size_t(1 - u.reading)], is_float, w_at);
    std::string r_ic, r_kx, r_ky;
    roles(u, w_at, r_ic, r_kx, r_ky);
    channels(u, use, r_ic);
    window(u, use, r_kx, r_ky);
    std::vector<std::string> order;
    for (const std::string &r : {r_ic, r_kx, r_ky})
        if (!r.empty()) order.push_back(r);
    check_domain(u, is_float, order);
    if (w.defined()) set_weights(w, u, r_ic);

    const bool pool = d_.op == DpuOpKind::MaxPool || d_.op == DpuOpKind::AvgPool;
    if (pool && (d_.mult.size() > 1 || d_.shift.size() > 1 || d_.bias.size() > 1 ||
                 d_.fp_scale.size() > 1 || !d_.fp_bias.empty()))
        fail("output stage", "a pool's scale or bias varies per channel; the DPU's pools take "
                             "one scale per tensor and no float bias");
}

// ---- Eltwise -------------------------------------------------------------------------------

// One operand of the eltwise: sat32(i64(i32(v) - zp) * mult) for int8, f32(v) for fp16, read
// at the output's position.
void Matcher::eltwise_operand(const Expr &e, bool is_float, int &input, int32_t &zero_point,
                              int32_t &mult) const {
    Expr stored;
    if (is_float) {
        stored = uncast(e, Halide::Float(32));
    } else {
        Expr scaled, v;
        double k = 0;
        const Mul *m = is_sat32(e, scaled) ? scaled.as<Mul>() : nullptr;
        if (!m || !with_const(m->a, m->b, v, k))
            fail("eltwise", "the operand `" + show(e) +
                                "` is not sat32(i64(i32(v) - zero point) * mult), as the DPU "
                                "scales each input");
        mult = int32_t(k);
        Expr centered = uncast(v, Halide::Int(64));
        const Sub *s = centered.defined() ? centered.as<Sub>() : nullptr;
        if (auto zp = s ? int_const(s->b) : std::nullopt) {
            zero_point = int32_t(*zp);
            centered = s->a;
        }
        stored = uncast(centered, Halide::Int(32));
    }
    std::vector<Expr> at;
    if (!input_read(stored, input, at))
        fail("eltwise", "the operand `" + show(e) + "` does not read a layer input");
    const std::string &name = layer_.inputs()[size_t(input)].name();
    const char *axis[3] = {"c", "x", "y"};
    for (size_t i = 0; i < 3; ++i)
        if (!is_var(at[i], out_vars_[i]))
            fail("eltwise",
                 "input '" + name + "' is " +
                     (int_const(at[i]) ? std::string("broadcast along ") + axis[i]
                                       : "read at `" + show(at[i]) + "` along " + axis[i]) +
                     "; the DPU's eltwise reads both inputs at the output's position");
    const dsl::Shape out_shape = dsl::device_view(layer_.output()).shape;
    if (input_tensor(input).shape != out_shape)
        fail("eltwise", "input '" + name + "' is " + dsl::to_string(input_tensor(input).shape) +
                            " and the output " + dsl::to_string(out_shape) +
                            "; the DPU's eltwise takes inputs of the output's shape");
}

void Matcher::eltwise(const Expr &acc, bool is_float) {
    using E = blob::EltwiseOp;
    const Expr op = is_float ? acc : uncast(acc, Halide::Int(32));
    Expr a, b;
    auto binary = [&](auto *node, E kind) {
        if (!node) return false;
        a = node->a;
        b = node->b;
        d_.eltwise = kind;
        return true;
    };
    const bool known =
        op.defined() && (binary(op.as<Add>(), E::Add) || binary(op.as<Sub>(), E::Sub) ||
                         binary(op.as<Mul>(), E::Mul) || binary(op.as<Max>(), E::Max) ||
                         binary(op.as<Min>(), E::Min));
    if (!known)
        fail("eltwise", "`" + show(acc) + "` is not " +
                            (is_float ? "add, sub, mul, max or min of two inputs"
                                      : "i32(add, sub, mul, max or min) of two scaled inputs") +
                            "; the DPU's eltwise combines two tensors");
    d_.op = DpuOpKind::Eltwise;
    eltwise_operand(a, is_float, d_.input, d_.input_zero_point, d_.in1_mult);
    eltwise_operand(b, is_float, d_.input2, d_.input2_zero_point, d_.in2_mult);
    d_.input_type = dsl::halide_type(input_tensor(d_.input).type);
    if (!is_float) d_.bias = {0};
    if (d_.mult.size() > 1 || d_.shift.size() > 1 || d_.fp_scale.size() > 1 || !d_.fp_bias.empty())
        fail("output stage", "an eltwise's scale varies per channel; the DPU's eltwise takes one "
                             "scale per tensor and no float bias");
}

// ---- The layer -----------------------------------------------------------------------------

// The layer's algorithm on ImageParams named after its inputs, as one expression.
Expr Matcher::algorithm_output(bool &is_float) {
    std::vector<Halide::Func> inputs;
    for (size_t i = 0; i < layer_.inputs().size(); ++i) {
        const dsl::Layer &in = layer_.inputs()[i];
        std::string name = dsl::halide_name(in.name());
        if (std::count(params_.begin(), params_.end(), name)) name += "_" + std::to_string(i);
        params_.push_back(name);
        inputs.push_back(Halide::ImageParam(dsl::halide_type(input_tensor(int(i)).type), 3, name));
    }
    Halide::Func out;
    try {
        out = layer_.algorithm()(inputs);
    } catch (const Halide::Error &e) {
        fail("algorithm", std::string("Halide error: ") + e.what());
    }
    const Function f = out.function();
    if (f.outputs() != 1 || f.dimensions() != 3 || f.has_update_definition())
        fail("output Func '" + readable(f.name()) + "'",
             "must be one pure 3-D definition over (c, x, y): the output stage");
    out_vars_ = f.args();
    const Type t = f.output_types()[0];
    if (!(t == Halide::Float(16) || (t.is_int_or_uint() && t.bits() == 8)))
        fail("output", "is " + type_name(t) + "; the DPU writes u8, i8 or f16");
    is_float = t.is_float();
    return InlinePure().mutate(value_of(f.definition()));
}

DpuOpDesc Matcher::run() {
    if (layer_.is_input()) fail("input", "a graph input has no algorithm");
    if (dsl::is_constant(layer_))
        fail("constant", "its value is copied from the blob's constant section, not computed");
    // The DPU computes device views (dsl::device_view): any rank maps onto 4-D.
    const dsl::Shape shape = dsl::device_view(layer_.output()).shape;
    if (shape.rank() != 4)
        fail("output tensor", dsl::to_string(shape) + "; the DPU computes 4-D tensors");
    oc_ = shape[dsl::dims::C];
    ow_ = shape[dsl::dims::W];
    oh_ = shape[dsl::dims::H];

    bool is_float = false;
    const Expr value = algorithm_output(is_float);
    const Reads r = reads_of(value);
    const std::string calls = r.externs.empty() ? "" : " and calls " + quoted(r.externs);
    if (r.reductions.size() > 1) {
        std::set<std::string> names;
        for (const auto &kv : r.reductions) names.insert(readable(kv.first));
        fail("output", "combines " + std::to_string(names.size()) + " reductions (" +
                           quoted(names) + ")" + calls + "; a DPU operation has one accumulator");
    }
    if (r.reductions.empty() && r.params.size() < 2)
        fail("not a reduction", "the output is elementwise on one input" + calls +
                                    "; the DPU runs conv, depthwise conv, pools, eltwise and "
                                    "matmul");
    if (!r.externs.empty()) fail("output stage", "calls " + quoted(r.externs) + "; the PPE cannot");

    Core core;
    if (is_float)
        finish_float(float_stage(value, core), core);
    else
        finish_int(int_stage(value, core), core);

    const Call *acc = core.acc.as<Call>();
    if (acc && acc->call_type == Call::Halide && Function(acc->func).has_update_definition()) {
        for (size_t i = 0; i < out_vars_.size(); ++i)
            if (!is_var(acc->args[i], out_vars_[i]))
                fail("output stage", "reads the accumulator at `" + show(core.acc) +
                                         "`; expected the output's own position");
        reduction(Function(acc->func), is_float);
    } else {
        eltwise(core.acc, is_float);
    }
    return d_;
}

const char *op_name(DpuOpKind op) {
    switch (op) {
    case DpuOpKind::Conv:
        return "conv";
    case DpuOpKind::DepthwiseConv:
        return "dwconv";
    case DpuOpKind::MaxPool:
        return "maxpool";
    case DpuOpKind::AvgPool:
        return "avgpool";
    case DpuOpKind::Eltwise:
        return "eltwise";
    case DpuOpKind::MatMul:
        return "matmul";
    }
    return "?";
}

const char *eltwise_name(blob::EltwiseOp e) {
    switch (e) {
    case blob::EltwiseOp::Add:
        return "add";
    case blob::EltwiseOp::Sub:
        return "sub";
    case blob::EltwiseOp::Mul:
        return "mul";
    case blob::EltwiseOp::Max:
        return "max";
    case blob::EltwiseOp::Min:
        return "min";
    }
    return "?";
}

// "2" when both are 2, "2x1" otherwise.
std::string pair(int a, int b) {
    return a == b ? std::to_string(a) : std::to_string(a) + "x" + std::to_string(b);
}

} // namespace

std::string DpuOpDesc::to_string() const {
    std::ostringstream os;
    os << op_name(op);
    if (op == DpuOpKind::Eltwise) {
        os << " " << eltwise_name(eltwise);
    } else if (op != DpuOpKind::MatMul) {
        os << " " << kernel_w << "x" << kernel_h << " s" << pair(stride_w, stride_h);
        if (dilation_w != 1 || dilation_h != 1) os << " d" << pair(dilation_w, dilation_h);
        os << " p" << pad_left << "," << pad_right << "," << pad_top << "," << pad_bottom;
        if (groups != 1) os << " g" << groups;
    }
    os << " " << type_name(input_type) << "->" << type_name(output_type);
    const bool is_float = output_type.is_float();
    const dpu::Activation act = is_float ? float_ppe.activation : int_ppe.activation;
    if (act == dpu::Activation::Relu) os << " relu";
    if (act == dpu::Activation::ReluX) os << " relux";
    if (act == dpu::Activation::LeakyRelu) os << " leaky";
    if (is_float && (std::isfinite(float_ppe.clamp_low) || std::isfinite(float_ppe.clamp_high)))
        os << " clamp[" << float_ppe.clamp_low << "," << float_ppe.clamp_high << "]";
    // A relu's clamp at the zero point is implied, not a clamp of its own.
    const int32_t implied_low = act == dpu::Activation::Relu
                                    ? std::max(int_ppe.out_zero_point, int_ppe.out_min)
                                    : int_ppe.out_min;
    if (!is_float && (int_ppe.clamp_low > implied_low || int_ppe.clamp_high < int_ppe.out_max))
        os << " clamp[" << int_ppe.clamp_low << "," << int_ppe.clamp_high << "]";
    return os.str();
}

DpuOpDesc match_dpu(const dsl::Layer &layer) {
    return Matcher(layer).run();
}

std::optional<DpuOpDesc> try_match_dpu(const dsl::Layer &layer, std::string *why) {
    try {
        return match_dpu(layer);
    } catch (const DpuMatchError &e) {
        if (why) *why = e.what();
        return std::nullopt;
    }
}

void check_dpu_limits(const std::string &layer, const DpuOpDesc &op, const target::Target &target) {
    const std::string prefix = "layer '" + layer + "': ";
    const std::string dpu = "the DPU of target '" + printable(target.name) + "'";
    // build_tasks runs a dilated kernel as its span, with zero weights between the taps.
    const int span_w = (op.kernel_w - 1) * op.dilation_w + 1;
    const int span_h = (op.kernel_h - 1) * op.dilation_h + 1;
    if (span_w > target.max_kernel || span_h > target.max_kernel) {
        const bool dilated = op.dilation_w != 1 || op.dilation_h != 1;
        throw DpuMatchError(
            prefix + "kernel " + std::to_string(op.kernel_w) + "x" + std::to_string(op.kernel_h) +
            (dilated ? " dilated by " + pair(op.dilation_w, op.dilation_h) + " spans " +
                           std::to_string(span_w) + "x" + std::to_string(span_h)
                     : "") +
            "; " + dpu + " takes kernels of at most " + std::to_string(target.max_kernel) + "x" +
            std::to_string(target.max_kernel) + " (dpu.max_kernel)");
    }
    if (op.stride_w > target.max_stride || op.stride_h > target.max_stride)
        throw DpuMatchError(prefix + "stride " + pair(op.stride_w, op.stride_h) + "; " + dpu +
                            " takes strides of at most " + std::to_string(target.max_stride) +
                            " (dpu.max_stride)");
}

DpuOpDesc match_dpu(const dsl::Layer &layer, const target::Target &target) {
    DpuOpDesc op = match_dpu(layer);
    check_dpu_limits(layer.name(), op, target);
    return op;
}

std::optional<DpuOpDesc> try_match_dpu(const dsl::Layer &layer, const target::Target &target,
                                       std::string *why) {
    try {
        return match_dpu(layer, target);
    } catch (const DpuMatchError &e) {
        if (why) *why = e.what();
        return std::nullopt;
    }
}

int64_t dpu_weight_bytes(const dsl::Layer &layer, const target::Target &target) {
    const std::optional<DpuOpDesc> d = try_match_dpu(layer, target);
    return d ? dpu_weight_bytes(*d, target) : 0;
}

int64_t dpu_weight_bytes(const DpuOpDesc &op, const target::Target &target) {
    if (!op.weights.defined()) return 0;
    const Halide::Buffer<> &w = op.weights;
    const int64_t group = std::max(1, target.channel_alignment);
    auto padded = [&](int64_t c) { return (c + group - 1) / group * group; };
    const int64_t out_channels = padded(w.dim(w.dimensions() - 1).extent());
    // Per output channel: (IC, KW, KH) with a dilated kernel's span, then a table entry;
    // depthwise weights have one input channel, and a layer of fewer input channels than a
    // group runs channel-major on them unpadded.
    const int64_t in_channels = w.dim(0).extent();
    const bool padded_input =
        op.op != target::DpuOpKind::DepthwiseConv && in_channels * op.groups >= group;
    const int64_t taps = w.dimensions() > 2 ? int64_t((op.kernel_w - 1) * op.dilation_w + 1) *
                                                  ((op.kernel_h - 1) * op.dilation_h + 1)
                                            : 1;
    return out_channels *
           ((padded_input ? padded(in_channels) : in_channels) * taps * w.type().bytes() +
            target.weight_table_entry_bytes);
}

} // namespace vpuc::codegen
