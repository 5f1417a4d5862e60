// slice: every step-th element of [starts, ends) along the axes given (ONNX's Slice; a negative
// step walks from starts down to ends). With steps of 1, on the device (the batch whole) stored
// in DDR it is a view of its input that moves no data; computed in CMX, a SHAVE copy kernel.
// With other steps it is a SHAVE gather kernel. A constant of any rank folds at compile time
// (shape arithmetic: the spatial part of a Shape, or an empty part of one).
#include "common.h"
#include "logical_index.h"

namespace vpuc::algorithms {

namespace {

// What a slice takes along each axis of its input: `count` elements from `start`, `step` apart.
struct SlicePlan {
    std::vector<int64_t> start, step, count;

    bool unit_steps() const {
        return std::all_of(step.begin(), step.end(), [](int64_t s) { return s == 1; });
    }
    dsl::Box box() const { return {start, count}; }
};

// The plan of a slice of `input`, after ONNX's rules: negative indices count from the end; both
// are clamped to the extent, for a negative step to [0, extent - 1] and [-1, extent - 1]. An
// empty range is an error unless `allow_empty` (constants: shape arithmetic takes empty
// prefixes of a shape; the device has no tensor of an extent 0).
SlicePlan slice_plan(const std::string &what, const dsl::TensorDesc &input, const dsl::Attrs &attrs,
                     bool allow_empty = false) {
    const auto starts = attrs.get_ints("starts"), ends = attrs.get_ints("ends"),
               axes = attrs.get_ints("axes");
    const std::vector<int64_t> steps =
        attrs.has("steps") ? attrs.get_ints("steps") : std::vector<int64_t>(axes.size(), 1);
    if (starts.size() != axes.size() || ends.size() != axes.size() || steps.size() != axes.size())
        detail::invalid(what, "starts, ends, axes and steps must have one entry per axis");
    const size_t rank = input.shape.raw().size();
    SlicePlan plan{std::vector<int64_t>(rank, 0), std::vector<int64_t>(rank, 1), input.shape.raw()};
    std::vector<bool> seen(rank, false);
    for (size_t i = 0; i < axes.size(); ++i) {
        if (axes[i] >= int64_t(rank))
            detail::invalid(what, "axis " + std::to_string(axes[i]) + " of a tensor of rank " +
                                      std::to_string(rank));
        const size_t axis = size_t(axes[i]);
        if (seen[axis]) detail::invalid(what, "axis " + std::to_string(axes[i]) + " given twice");
        seen[axis] = true;
        const int64_t size = input.shape.raw()[axis], step = steps[i];
        if (step == 0) detail::invalid(what, "axis " + std::to_string(axes[i]) + ": a step of 0");
        const int64_t low = step > 0 ? 0 : -1, high = step > 0 ? size : size - 1;
        auto index = [&](int64_t v, int64_t lowest) {
            return std::clamp(v < 0 ? v + size : v, lowest, high);
        };
        const int64_t b = index(starts[i], 0), e = index(ends[i], low);
        const int64_t span = step > 0 ? e - b : b - e, stride = step > 0 ? step : -step;
        if (span <= 0 && !allow_empty)
            detail::invalid(what, "axis " + std::to_string(axes[i]) + ": [" +
                                      std::to_string(starts[i]) + ", " + std::to_string(ends[i]) +
                                      ") in steps of " + std::to_string(step) + " of " +
                                      std::to_string(size) + " is empty");
        plan.start[axis] = b;
        plan.step[axis] = step;
        plan.count[axis] = std::max<int64_t>(0, (span + stride - 1) / stride);
    }
    return plan;
}

// `box` of a tensor of graph shape `shape` on the device: the batch whole, in 4-D coordinates.
dsl::Box device_slice_box(const std::string &what, const dsl::Shape &shape, const dsl::Box &box) {
    if (shape.rank() > 1 && box.extent[0] != shape.raw()[0])
        detail::invalid(what, "cuts the batch (axis 0); on the device images are computed one "
                              "at a time");
    const std::optional<dsl::Box> device = detail::device_box(shape, box);
    if (!device)
        detail::invalid(what, "cuts " + dsl::to_string(shape) +
                                  " along an axis sharing the device's H while an axis inside "
                                  "it is not whole; on the device they are one dimension");
    return *device;
}

dsl::Layer build_slice(const std::string &name, const std::vector<dsl::Layer> &inputs,
                       const dsl::Attrs &attrs) {
    const std::string what = "slice '" + name + "'";
    const dsl::Layer &input = inputs.at(0);
    detail::input_info(what, input);
    const dsl::TensorDesc t = detail::graph_tensor(input.output());
    const SlicePlan plan = slice_plan(what, t, attrs);
    dsl::TensorDesc out = input.output();
    out.name = name;
    out.shape = dsl::Shape(plan.count);
    if (!plan.unit_steps()) {
        if (t.shape.rank() > 1 && (plan.step[0] != 1 || plan.count[0] != t.shape.raw()[0]))
            detail::invalid(what, "cuts the batch (axis 0); on the device images are computed "
                                  "one at a time");
        dsl::Algorithm algorithm = [=](const std::vector<Halide::Func> &funcs) {
            const auto &v = dsl::act_vars();
            std::vector<Halide::Expr> at = detail::logical_coords(out, v.c, v.x, v.y);
            for (size_t d = size_t(detail::first_image_axis(t)); d < at.size(); ++d)
                at[d] = int(plan.start[d]) + at[d] * int(plan.step[d]);
            Halide::Func f = detail::named_func(name);
            f(v.c, v.x, v.y) = detail::read_logical(funcs.at(0), t, at);
            return f;
        };
        return dsl::Layer::make("slice", out, {input}, algorithm);
    }
    const dsl::Box box = device_slice_box(what, t.shape, plan.box());
    using namespace dsl::dims;
    // Halide dims (c, x, y) are device C, W, H.
    const int64_t start[3] = {box.start[size_t(C.index())], box.start[size_t(W.index())],
                              box.start[size_t(H.index())]};
    dsl::Algorithm algorithm = [=](const std::vector<Halide::Func> &funcs) {
        const auto &v = dsl::act_vars();
        Halide::Func f = detail::named_func(name);
        f(v.c, v.x, v.y) =
            funcs.at(0)(v.c + int(start[0]), v.x + int(start[1]), v.y + int(start[2]));
        return f;
    };
    return dsl::Layer::make("slice", out, {input}, algorithm);
}

} // namespace

void register_layer_slice(dsl::LayerRegistry &registry) {
    dsl::LayerDef def;
    def.op = "slice";
    def.doc = "every step-th element of [starts, ends) along axes (a view, or a SHAVE copy)";
    def.inputs = {"input"};
    auto axes_check = [](const dsl::AttrValue &v) -> std::string {
        for (int64_t axis : std::get<std::vector<int64_t>>(v))
            if (axis < 0 || axis > 4) return "each axis must be in [0, 4]";
        return "";
    };
    dsl::AttrSpec steps{"steps",
                        dsl::AttrType::Ints,
                        std::nullopt,
                        "step per axis, nonzero (negative walks down); absent: 1",
                        {}};
    steps.optional = true;
    def.attrs = {{"starts", dsl::AttrType::Ints, std::nullopt, "first index per axis", {}},
                 {"ends", dsl::AttrType::Ints, std::nullopt, "end index (excluded) per axis", {}},
                 {"axes", dsl::AttrType::Ints, std::vector<int64_t>{1}, "logical axes", axes_check},
                 steps};
    def.build = build_slice;
    def.fold = [](const std::string &name, const std::vector<dsl::Layer> &inputs,
                  const dsl::Attrs &attrs) {
        const dsl::ConstValues v = dsl::const_values(inputs.at(0));
        const SlicePlan plan =
            slice_plan("slice '" + name + "'", inputs.at(0).output(), attrs, true);
        return dsl::const_buffer(
            dsl::pick_elements(v, plan.count, [&](const std::vector<int64_t> &index) {
                int64_t from = 0;
                for (size_t d = 0; d < index.size(); ++d)
                    from = from * v.shape[d] + plan.start[d] + index[d] * plan.step[d];
                return from;
            }));
    };
    def.view = [](const dsl::Layer &layer) -> std::optional<dsl::ViewDef> {
        const std::string what = "slice '" + layer.name() + "'";
        const dsl::TensorDesc t = detail::graph_tensor(layer.inputs().at(0).output());
        const SlicePlan plan = slice_plan(what, t, layer.attrs());
        if (!plan.unit_steps()) return std::nullopt;
        return dsl::ViewDef{dsl::ViewDef::Kind::Window,
                            {device_slice_box(what, t.shape, plan.box())}};
    };
    // Every other channel, and W walked backwards in steps of 3, of odd extents.
    def.example = [](dsl::ElemType type) {
        dsl::Attrs a;
        a.set("starts", std::vector<int64_t>{3, 1, -1})
            .set("ends", std::vector<int64_t>{20, 6, -100})
            .set("steps", std::vector<int64_t>{2, 1, -3});
        a.set("axes", std::vector<int64_t>{1, 2, 3});
        return layer_registry().build("slice", "slice",
                                      {detail::example_input("in", 23, 11, 7, type)}, a);
    };
    registry.add(std::move(def));
}

std::vector<dsl::Layer> split(const std::vector<std::string> &names, const dsl::Layer &input,
                              int64_t axis, const std::vector<int64_t> &sizes) {
    const std::string what = "split of '" + input.name() + "'";
    if (names.size() != sizes.size())
        detail::invalid(what, std::to_string(names.size()) + " names for " +
                                  std::to_string(sizes.size()) + " parts");
    const int64_t rank = input.output().shape.rank();
    if (axis < 0 || axis >= rank)
        detail::invalid(what, "axis " + std::to_string(axis) + " is outside the rank " +
                                  std::to_string(rank));
    const int64_t extent = input.output().shape.raw()[size_t(axis)];
    int64_t total = 0;
    for (int64_t size : sizes) total += size;
    if (total != extent)
        detail::invalid(what, "parts of " + std::to_string(total) + " elements for the " +
                                  std::to_string(extent) + " along axis " + std::to_string(axis));
    std::vector<dsl::Layer> parts;
    int64_t start = 0;
    for (size_t i = 0; i < sizes.size(); ++i) {
        dsl::Attrs a;
        a.set("starts", std::vector<int64_t>{start})
            .set("ends", std::vector<int64_t>{start + sizes[i]})
            .set("axes", std::vector<int64_t>{axis});
        parts.push_back(layer_registry().build("slice", names[i], {input}, a));
        start += sizes[i];
    }
    return parts;
}

} // namespace vpuc::algorithms
