#include "codegen/bounds.h"

#include <Halide.h>

#include <algorithm>
#include <map>
#include <sstream>

namespace vpuc::codegen {

namespace HI = Halide::Internal;

namespace {

std::string input_name(size_t index) {
    return "vpuc_bounds_in" + std::to_string(index);
}

int64_t constant_bound(const Halide::Expr &e, const std::string &layer) {
    Halide::Expr simple = HI::simplify(e);
    if (const int64_t *v = HI::as_const_int(simple)) return *v;
    std::ostringstream bound;
    bound << simple;
    throw std::runtime_error("layer '" + layer + "': bounds inference: the bound '" + bound.str() +
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

} // namespace

std::vector<Region> input_regions(const dsl::Layer &layer, const Region &output) {
    const auto &inputs = layer.inputs();
    std::vector<Halide::Func> params;
    std::vector<Halide::ImageParam> images;
    for (size_t i = 0; i < inputs.size(); ++i) {
        images.emplace_back(dsl::halide_type(inputs[i].output().type), 3, input_name(i));
        params.emplace_back(images.back());
    }
    Halide::Func out = layer.algorithm()(params);
    HI::Function root = out.function();
    std::map<std::string, HI::Function> env = HI::find_transitive_calls(root);
    env[root.name()] = root;
    std::vector<std::string> order = HI::topological_order({root}, env);

    std::map<std::string, HI::Box> required;
    HI::Box root_box;
    for (const Interval &d : output.dims)
        root_box.push_back(
            HI::Interval(Halide::Expr(int32_t(d.begin)), Halide::Expr(int32_t(d.end - 1))));
    required[root.name()] = root_box;
    // Consumers before producers: each function's box is complete when it is visited.
    for (auto it = order.rbegin(); it != order.rend(); ++it) {
        auto f = env.find(*it);
        auto box = required.find(*it);
        if (f == env.end() || box == required.end()) continue;
        const HI::Box needed = box->second;
        require(f->second, f->second.definition(), needed, required);
        for (const auto &update : f->second.updates()) require(f->second, update, needed, required);
    }

    std::vector<Region> regions;
    for (size_t i = 0; i < inputs.size(); ++i) {
        const dsl::Shape &shape = inputs[i].output().shape;
        const int64_t extents[3] = {shape[dsl::dims::C], shape[dsl::dims::W], shape[dsl::dims::H]};
        Region r;
        auto box = required.find(input_name(i));
        for (int d = 0; d < 3; ++d) {
            if (box == required.end() || size_t(d) >= box->second.size()) {
                r.dims[size_t(d)] = {0, 0}; // not read
                continue;
            }
            int64_t lo = constant_bound(box->second[size_t(d)].min, layer.name());
            int64_t hi = constant_bound(box->second[size_t(d)].max, layer.name()) + 1;
            r.dims[size_t(d)] = {std::clamp<int64_t>(lo, 0, extents[d]),
                                 std::clamp<int64_t>(hi, 0, extents[d])};
        }
        regions.push_back(r);
    }
    return regions;
}

} // namespace vpuc::codegen
