#include "codegen/bounds.h"

#include "codegen/lower.h"

#include <Halide.h>

#include <algorithm>
#include <array>
#include <map>
#include <sstream>

#include "codegen/lower.h"
#include "dsl/registry.h"

namespace vpuc::codegen {

namespace HI = Halide::Internal;

namespace {

std::string input_name(size_t index) {
    return "vpuc_bounds_in" + std::to_string(index);
}

// Replaces each value read from a Func or buffer by a variable of its type, which `unknown`
// bounds by nothing.
class ForgetReadValues : public HI::IRMutator {
  public:
    HI::Scope<HI::Interval> unknown;

  private:
    using HI::IRMutator::visit;
    Halide::Expr visit(const HI::Call *op) override {
        if (op->call_type != HI::Call::Halide && op->call_type != HI::Call::Image)
            return HI::IRMutator::visit(op);
        const std::string name = "vpuc_read" + std::to_string(reads_++);
        unknown.push(name, HI::Interval::everything());
        return HI::Variable::make(op->type, name);
    }
    int reads_ = 0;
};

// The constant lower (`upper` false) or upper bound `e` gives. A bound that depends on values
// the layer reads (gather_elements reading data at an index it reads, a task of one index) is
// widened to what the rest of it allows (the index's clamp into the data's extent).
int64_t constant_bound(const Halide::Expr &e, bool upper, const std::string &layer) {
    Halide::Expr simple = HI::simplify(e);
    if (const int64_t *v = HI::as_const_int(simple)) return *v;
    ForgetReadValues forget;
    const Halide::Expr widened = forget.mutate(simple);
    const HI::Interval range = HI::bounds_of_expr_in_scope(widened, forget.unknown);
    const Halide::Expr side = upper ? range.max : range.min;
    if (side.defined() && (upper ? range.has_upper_bound() : range.has_lower_bound()))
        if (const int64_t *v = HI::as_const_int(HI::simplify(side))) return *v;
    std::ostringstream bound;
    bound << simple;
    throw LoweringError("layer '" + layer + "': bounds inference: the bound '" + bound.str() +
                        "' is not a constant");
}

// Binds a function's pure variables to the box its consumers require of it, and its
// reduction variables to their domains.
HI::Scope<HI::Interval> scope_for(const HI::Function &f, const HI::Definition &def,
                                  const HI::Box &box) {
    HI::Scope<HI::Interval> scope;
    const auto &args = f.args();
    for (size_t i = 0; i < args.size() && i < box.size(); ++i) scope.push(args[i], box[i]);
    for (const auto &rv : def.schedule().rvars())
        scope.push(rv.var, HI::Interval(rv.min, HI::simplify(rv.min + rv.extent - 1)));
    return scope;
}

// Adds every box `def` requires (through its values and argument expressions) to `required`.
void require(const HI::Function &f, const HI::Definition &def, const HI::Box &box,
             std::map<std::string, HI::Box> &required) {
    HI::Scope<HI::Interval> scope = scope_for(f, def, box);
    std::vector<Halide::Expr> exprs = def.values();
    exprs.insert(exprs.end(), def.args().begin(), def.args().end());
    for (const auto &e : exprs)
        for (const auto &[name, b] : HI::boxes_required(e, scope)) {
            auto it = required.find(name);
            if (it == required.end())
                required.emplace(name, b);
            else
                HI::merge_boxes(it->second, b);
        }
}

// Every function `root` calls, by name, and their names with consumers before producers.
struct CallGraph {
    std::map<std::string, HI::Function> env;
    std::vector<std::string> consumers_first;

    explicit CallGraph(const HI::Function &root) : env(HI::find_transitive_calls(root)) {
        env[root.name()] = root;
        consumers_first = HI::topological_order({root}, env);
        std::reverse(consumers_first.begin(), consumers_first.end());
    }

    std::map<std::string, HI::Box> required(const HI::Function &root, const HI::Box &box) const {
        std::map<std::string, HI::Box> boxes;
        boxes[root.name()] = box;
        // Consumers before producers: each function's box is complete when it is visited.
        for (const std::string &name : consumers_first) {
            auto f = env.find(name);
            auto found = boxes.find(name);
            if (f == env.end() || found == boxes.end()) continue;
            const HI::Box needed = found->second;
            require(f->second, f->second.definition(), needed, boxes);
            for (const auto &update : f->second.updates())
                require(f->second, update, needed, boxes);
        }
        return boxes;
    }
};

} // namespace

std::map<std::string, HI::Box> required_boxes(const Halide::Func &output, const HI::Box &box) {
    return CallGraph(output.function()).required(output.function(), box);
}

// The layer's algorithm over image parameters standing for its inputs, with every function it
// calls in consumer-to-producer order.
struct InputBounds::Pipeline {
    std::string layer;
    std::vector<std::array<int64_t, 3>> input_extents; // c, x, y
    std::vector<Halide::ImageParam> images;
    HI::Function root;
    std::unique_ptr<CallGraph> calls;
};

InputBounds::InputBounds(const dsl::Layer &layer) : pipeline_(std::make_unique<Pipeline>()) {
    Pipeline &p = *pipeline_;
    p.layer = layer.name();
    std::vector<Halide::Func> params;
    for (size_t i = 0; i < layer.inputs().size(); ++i) {
        const dsl::TensorDesc in = dsl::device_view(dsl::input_tensor(layer, i));
        p.images.emplace_back(dsl::halide_type(in.type), 3, input_name(i));
        params.emplace_back(p.images.back());
        p.input_extents.push_back(
            {in.shape[dsl::dims::C], in.shape[dsl::dims::W], in.shape[dsl::dims::H]});
    }
    p.root = layer.algorithm()(params).function();
    p.calls = std::make_unique<CallGraph>(p.root);
    check_reads_inside_inputs(layer);
}

// Per task, regions are clamped to the inputs, so a read outside an input would silently
// become a smaller (or empty) region, and the task would compute from memory that does not
// hold the input. Over the whole output, bounds inference must find every read inside.
void InputBounds::check_reads_inside_inputs(const dsl::Layer &layer) const {
    const Pipeline &p = *pipeline_;
    const dsl::Shape shape = dsl::device_view(layer.output()).shape;
    const std::array<int64_t, 3> extents = {shape[dsl::dims::C], shape[dsl::dims::W],
                                            shape[dsl::dims::H]};
    HI::Box whole;
    for (int64_t extent : extents)
        whole.push_back(HI::Interval(Halide::Expr(0), Halide::Expr(int32_t(extent - 1))));
    const std::map<std::string, HI::Box> required = p.calls->required(p.root, whole);
    static const char *const kDimNames[3] = {"c", "x", "y"};
    for (size_t i = 0; i < p.input_extents.size(); ++i) {
        auto box = required.find(input_name(i));
        if (box == required.end()) continue;
        for (size_t d = 0; d < 3 && d < box->second.size(); ++d) {
            const int64_t lo = constant_bound(box->second[d].min, false, p.layer);
            const int64_t hi = constant_bound(box->second[d].max, true, p.layer) + 1;
            const int64_t extent = p.input_extents[i][d];
            if (lo >= 0 && hi <= extent) continue;
            const std::string dim = kDimNames[d];
            throw LoweringError(
                "layer '" + p.layer + "': its output, " + dim + " [0, " +
                std::to_string(extents[d]) + "), reads " + dim + " [" + std::to_string(lo) + ", " +
                std::to_string(hi) + ") of input '" + dsl::input_tensor(layer, i).name +
                "', which has " + dim + " [0, " + std::to_string(extent) +
                "); read the input through a boundary condition "
                "(Halide::BoundaryConditions::repeat_edge or constant_exterior, or clamp the "
                "coordinates), or declare an output that reads only inside the input");
        }
    }
}

InputBounds::~InputBounds() = default;
InputBounds::InputBounds(InputBounds &&) noexcept = default;

std::vector<Region> InputBounds::operator()(const Region &output) const {
    const Pipeline &p = *pipeline_;
    HI::Box root_box;
    for (const Interval &d : output.dims)
        root_box.push_back(
            HI::Interval(Halide::Expr(int32_t(d.begin)), Halide::Expr(int32_t(d.end - 1))));
    const std::map<std::string, HI::Box> required = p.calls->required(p.root, root_box);

    std::vector<Region> regions;
    for (size_t i = 0; i < p.input_extents.size(); ++i) {
        Region r;
        auto box = required.find(input_name(i));
        for (size_t d = 0; d < 3; ++d) {
            if (box == required.end() || d >= box->second.size()) {
                r.dims[d] = {0, 0}; // not read
                continue;
            }
            const int64_t extent = p.input_extents[i][d];
            const int64_t lo = constant_bound(box->second[d].min, false, p.layer);
            const int64_t hi = constant_bound(box->second[d].max, true, p.layer) + 1;
            r.dims[d] = {std::clamp<int64_t>(lo, 0, extent), std::clamp<int64_t>(hi, 0, extent)};
        }
        regions.push_back(r);
    }
    return regions;
}

std::vector<Region> input_regions(const dsl::Layer &layer, const Region &output) {
    return InputBounds(layer)(output);
}

} // namespace vpuc::codegen
