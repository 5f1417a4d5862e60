// Pass plan_views: layers that only rearrange data (concat, slice, tuple_element, and a reshape
// or transpose keeping the bytes' order; the layer registry says where their output lies)
// become views of DDR memory when they and their inputs are stored there. A constant (a graph
// output) must be stored in DDR, where build_tasks copies it from the blob's constant section. A
// slice's tensor is a box of its input's, an alias (reshape, transpose) all of its input's bytes. A
// concat's producers write their parts of its output in place; a part that cannot be placed there
// (a graph input or output, a part placed elsewhere already, an input's second use) is copied by
// one DMA in build_tasks. A view layer computed in CMX stays a SHAVE copy kernel, but one moving
// whole images (a reshape changing the batch) is a view only, of dense memory: computed in CMX it
// is an error.
#include <algorithm>
#include <set>

#include "algorithms/registry.h"
#include "algorithms/views.h"
#include "passes.h"

namespace vpuc::codegen {

namespace {

bool in_ddr(const LoweringState &s, const dsl::Layer &layer) {
    return layer.is_input() || stored_in_ddr(s.plan_of(layer.name()));
}

} // namespace

bool is_network_output(const LoweringState &s, const dsl::Layer &layer) {
    const auto &outputs = s.graph.outputs();
    return std::any_of(outputs.begin(), outputs.end(),
                       [&](const dsl::Layer &o) { return o.same_as(layer); });
}

void plan_views(LoweringState &s) {
    const dsl::LayerRegistry &registry = algorithms::layer_registry();
    // A layer moving images is an alias of dense memory: neither it nor its input is placed in
    // another tensor.
    std::set<std::string> keep_dense;
    for (const LayerPlan &plan : s.plans)
        if (algorithms::moves_images(plan.layer)) {
            keep_dense.insert(plan.layer.name());
            keep_dense.insert(plan.layer.inputs().at(0).name());
        }
    for (LayerPlan &plan : s.plans) {
        const dsl::Layer &layer = plan.layer;
        const std::optional<dsl::ViewDef> view = registry.view(layer);
        if (dsl::is_tuple_element(layer) && !stored_in_ddr(plan))
            throw LoweringError("layer '" + layer.name() + "' (tuple_element) is a view of " +
                                "an output of '" + layer.inputs().at(0).name() +
                                "' in DDR: it is not computed, in CMX or at a consumer's loop");
        if (dsl::is_constant(layer) && !stored_in_ddr(plan))
            throw LoweringError("layer '" + layer.name() +
                                "' (constant) is copied from the blob's constants into DDR: it "
                                "is not computed, in CMX or at a consumer's loop");
        if (!view || view->kind == dsl::ViewDef::Kind::Alias || !stored_in_ddr(plan)) continue;
        const auto &inputs = layer.inputs();
        if (!std::all_of(inputs.begin(), inputs.end(),
                         [&](const dsl::Layer &in) { return in_ddr(s, in); }))
            continue;
        if (view->kind == dsl::ViewDef::Kind::Window) {
            plan.view = view;
            // A graph output has its own memory, in the output section: build_tasks copies
            // the window there.
            if (!is_network_output(s, layer) && !keep_dense.count(layer.name()))
                s.placed[layer.name()] = {dsl::input_tensor(layer, 0).name, view->boxes.at(0)};
            continue;
        }
        plan.view = view;
        for (size_t i = 0; i < inputs.size(); ++i) {
            const dsl::Layer &part = inputs[i];
            // A part read twice is placed once (the first time) and copied once.
            if (part.is_input() || is_network_output(s, part) || s.placed.count(part.name()) ||
                keep_dense.count(part.name()) || part.output().order != layer.output().order)
                continue; // copied
            s.placed[part.name()] = {layer.name(), view->boxes.at(i)};
        }
    }
    // Aliases last, once every part has its place: the input must keep dense memory of its own
    // (a graph input, a buffer of its own, or an alias of one), which a placement would take.
    for (LayerPlan &plan : s.plans) {
        const dsl::Layer &layer = plan.layer;
        const std::optional<dsl::ViewDef> view = registry.view(layer);
        if (!view || view->kind != dsl::ViewDef::Kind::Alias) continue;
        if (algorithms::moves_images(layer) &&
            (!stored_in_ddr(plan) || !in_ddr(s, layer.inputs().at(0))))
            throw LoweringError(
                "layer '" + layer.name() + "' (" + layer.op() + ") moves whole images, " +
                dsl::to_string(dsl::input_tensor(layer, 0).logical_shape()) + " to " +
                dsl::to_string(layer.output().logical_shape()) +
                ": it is a view of DDR memory only, so it and its input '" +
                layer.inputs().at(0).name() + "' are stored in DDR, not computed in CMX");
        if (!stored_in_ddr(plan) || s.placed.count(layer.name()) ||
            !in_ddr(s, layer.inputs().at(0)))
            continue;
        const std::string &in = dsl::input_tensor(layer, 0).name;
        const auto placed = s.placed.find(in);
        if (placed != s.placed.end() && !placed->second.alias) continue;
        plan.view = view;
        // A graph output has its own memory: build_tasks copies the bytes there.
        if (!is_network_output(s, layer)) s.placed[layer.name()] = {in, {}, true};
    }
}

// Every placed tensor is a view layer's window or a part of a view layer, lies inside the
// tensor it is placed in and has that box's extents, and no two parts of a tensor overlap; an
// alias is a view layer of its input's bytes.
void verify_views(const LoweringState &s) {
    auto overlap = [](const dsl::Box &a, const dsl::Box &b) {
        for (size_t d = 0; d < a.start.size(); ++d)
            if (a.start[d] + a.extent[d] <= b.start[d] || b.start[d] + b.extent[d] <= a.start[d])
                return false;
        return true;
    };
    std::map<std::string, std::vector<const dsl::Box *>> parts;
    for (const auto &[name, placement] : s.placed) {
        const dsl::Layer tensor = s.graph.find(name);
        if (placement.alias) {
            if (!s.plan_of(name).view || s.tensor(placement.in).bytes() != tensor.output().bytes())
                throw LoweringError("view: tensor '" + name + "' (" +
                                    dsl::to_string(tensor.output().shape) + ") is an alias of '" +
                                    placement.in +
                                    "' without being a view layer of the same bytes");
            continue;
        }
        const std::vector<int64_t> &outer = s.tensor(placement.in).shape.raw();
        const dsl::Box &box = placement.box;
        bool inside = box.start.size() == outer.size() && box.extent.size() == outer.size();
        for (size_t d = 0; inside && d < outer.size(); ++d)
            inside = box.start[d] >= 0 && box.start[d] + box.extent[d] <= outer[d];
        if (!inside || box.extent != tensor.output().shape.raw())
            throw LoweringError("view: tensor '" + name + "' (" +
                                dsl::to_string(tensor.output().shape) +
                                ") does not fit the box it is given in '" + placement.in + "'");
        const std::optional<dsl::ViewDef> &view = s.plan_of(name).view;
        if (view && view->kind == dsl::ViewDef::Kind::Window &&
            dsl::input_tensor(tensor, 0).name == placement.in)
            continue;
        const dsl::Layer in = s.graph.find(placement.in);
        if (in.is_input() || !s.plan_of(placement.in).view)
            throw LoweringError("view: tensor '" + name + "' is placed in '" + placement.in +
                                "', which is not a view layer");
        for (const dsl::Box *other : parts[placement.in])
            if (overlap(box, *other))
                throw LoweringError("view: part '" + name + "' overlaps another part of '" +
                                    placement.in + "'");
        parts[placement.in].push_back(&box);
    }
}

} // namespace vpuc::codegen
