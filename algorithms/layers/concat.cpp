// concat: inputs of one rank joined along an axis (ONNX's Concat); on the device, any axis but
// the batch. Stored in DDR it is a view: each producer writes its part of the output in place
// (or a DMA copies the part there); computed in CMX, a SHAVE copy kernel. Every part keeps its
// values, so the inputs must share the output's element type and quantization.
#include "common.h"

namespace vpuc::algorithms {

namespace {

dsl::Layer build_concat(const std::string &name, const std::vector<dsl::Layer> &inputs,
                        const dsl::Attrs &attrs) {
    const std::string what = "concat '" + name + "'";
    for (const dsl::Layer &in : inputs)
        if (in.output().shape.rank() != inputs.front().output().shape.rank())
            detail::invalid(
                what, "input '" + in.name() + "' is " + dsl::to_string(in.output().shape) +
                          ", input '" + inputs.front().name() + "' " +
                          dsl::to_string(inputs.front().output().shape) + ": they have one rank");
    const int dim = detail::halide_dim(
        detail::device_axis_of(what, inputs.front().output(), attrs.get_int("axis")));
    std::vector<detail::InputInfo> parts;
    std::vector<int64_t> offsets;
    int64_t extent[3] = {0, 0, 0};
    for (const dsl::Layer &in : inputs) {
        parts.push_back(detail::input_info(what, in));
        const detail::InputInfo &p = parts.back();
        const int64_t e[3] = {p.c, p.w, p.h};
        const detail::InputInfo &first = parts.front();
        const int64_t f[3] = {first.c, first.w, first.h};
        bool same = p.n == first.n;
        for (int d = 0; d < 3; ++d) same &= d == dim || e[d] == f[d];
        if (!same)
            detail::invalid(what, "input '" + in.name() + "' is " +
                                      dsl::to_string(in.output().shape) + ", input '" +
                                      inputs.front().name() + "' " +
                                      dsl::to_string(inputs.front().output().shape) +
                                      ": they may differ along the axis only");
        if (in.output().type != inputs.front().output().type ||
            in.output().quant.scale != inputs.front().output().quant.scale ||
            in.output().quant.zero_point != inputs.front().output().quant.zero_point)
            detail::invalid(what, "input '" + in.name() +
                                      "' has another element type or quantization than '" +
                                      inputs.front().name() +
                                      "'; requantize it first (a concat copies values)");
        offsets.push_back(extent[dim]);
        for (int d = 0; d < 3; ++d) extent[d] = d == dim ? extent[d] + e[d] : e[d];
    }
    dsl::Algorithm algorithm = [=](const std::vector<Halide::Func> &funcs) {
        const auto &v = dsl::act_vars();
        const Halide::Var vars[3] = {v.c, v.x, v.y};
        // The last part, then each earlier one where the coordinate falls before its end: each
        // read is clamped into its part, so every input is read inside.
        Halide::Expr value;
        for (size_t k = parts.size(); k-- > 0;) {
            const int64_t e[3] = {parts[k].c, parts[k].w, parts[k].h};
            std::vector<Halide::Expr> at = {v.c, v.x, v.y};
            at[size_t(dim)] = Halide::clamp(vars[dim] - int(offsets[k]), 0, int(e[dim] - 1));
            Halide::Expr read = funcs.at(k)(at);
            value = value.defined()
                        ? Halide::select(vars[dim] < int(offsets[k] + e[dim]), read, value)
                        : read;
        }
        Halide::Func out = detail::named_func(name);
        out(v.c, v.x, v.y) = value;
        return out;
    };
    const dsl::TensorDesc &first = inputs.front().output();
    return dsl::Layer::make("concat",
                            detail::output_desc(name, inputs.front(), extent[0], extent[1],
                                                extent[2], first.type, first.quant),
                            inputs, algorithm);
}

// Constants of any rank joined at compile time (shape arithmetic).
Halide::Buffer<> fold_concat(const std::string &name, const std::vector<dsl::Layer> &inputs,
                             const dsl::Attrs &attrs) {
    const std::string what = "concat '" + name + "'";
    std::vector<dsl::ConstValues> parts;
    for (const dsl::Layer &in : inputs) parts.push_back(dsl::const_values(in));
    const dsl::ConstValues &first = parts.front();
    const int64_t rank = int64_t(first.shape.size());
    int64_t axis = attrs.get_int("axis");
    if (axis < -rank || axis >= rank)
        detail::invalid(what, "axis " + std::to_string(axis) + " of constants of rank " +
                                  std::to_string(rank));
    if (axis < 0) axis += rank;
    dsl::ConstValues out = first;
    out.shape[size_t(axis)] = 0;
    for (size_t k = 0; k < parts.size(); ++k) {
        std::vector<int64_t> shape = parts[k].shape;
        if (shape.size() == first.shape.size()) shape[size_t(axis)] = first.shape[size_t(axis)];
        if (shape != first.shape || parts[k].type != first.type)
            detail::invalid(what, "constant '" + inputs[k].name() + "' is " +
                                      dsl::to_string(inputs[k].output().shape) + " " +
                                      dsl::to_string(parts[k].type) + ", '" + inputs[0].name() +
                                      "' " + dsl::to_string(inputs[0].output().shape) + " " +
                                      dsl::to_string(first.type) +
                                      ": they may differ along the axis only");
        out.shape[size_t(axis)] += parts[k].shape[size_t(axis)];
    }
    int64_t outer = 1;
    for (int64_t d = 0; d < axis; ++d) outer *= first.shape[size_t(d)];
    out.ints.clear();
    out.reals.clear();
    for (int64_t o = 0; o < outer; ++o)
        for (const dsl::ConstValues &p : parts) {
            const int64_t run = p.elements() / outer;
            if (p.is_float())
                out.reals.insert(out.reals.end(), p.reals.begin() + o * run,
                                 p.reals.begin() + (o + 1) * run);
            else
                out.ints.insert(out.ints.end(), p.ints.begin() + o * run,
                                p.ints.begin() + (o + 1) * run);
        }
    return dsl::const_buffer(out);
}

} // namespace

void register_layer_concat(dsl::LayerRegistry &registry) {
    dsl::LayerDef def;
    def.op = "concat";
    def.doc = "inputs joined along an axis (a view, or a SHAVE copy)";
    def.inputs = {"inputs"};
    def.variadic = true;
    def.attrs = {{"axis",
                  dsl::AttrType::Int,
                  int64_t(1),
                  "not the batch on the device; any axis of constants; negative counts from "
                  "the end",
                  {}}};
    def.build = build_concat;
    def.fold = fold_concat;
    // Each part is a box of the output along the axis, which has a device dimension of its own.
    def.view = [](const dsl::Layer &layer) {
        const std::string what = "concat '" + layer.name() + "'";
        const dsl::Dim axis =
            detail::device_axis_of(what, layer.output(), layer.attrs().get_int("axis"));
        dsl::ViewDef view{dsl::ViewDef::Kind::Parts, {}};
        int64_t offset = 0;
        for (const dsl::Layer &in : layer.inputs()) {
            const dsl::Shape device = dsl::device_view(in.output()).shape;
            dsl::Box box{std::vector<int64_t>(4, 0), device.raw()};
            box.start[size_t(axis.index())] = offset;
            offset += device[axis];
            view.boxes.push_back(std::move(box));
        }
        return view;
    };
    // Three parts along the channels, the last two at offsets 16 and 21: a part at an offset
    // that is not a whole channel group.
    def.example = [](dsl::ElemType type) {
        return layer_registry().build("concat", "concat",
                                      {detail::example_input("a", 16, 7, 5, type),
                                       detail::example_input("b", 5, 7, 5, type),
                                       detail::example_input("c", 19, 7, 5, type)},
                                      {});
    };
    registry.add(std::move(def));
}

} // namespace vpuc::algorithms
