// cumsum: running sums along one axis (ONNX's CumSum): element i is the sum of elements 0 to i
// (exclusive: to i - 1; reverse: from the last down to i). Floats sum in float32, in numpy's
// order, and round once to the output's type; i32 sums exactly (wrapping around as numpy's do).
// A SHAVE kernel (a scan, each sum one addition to the one before), along any axis but the batch.
#include "common.h"
#include "logical_index.h"

namespace vpuc::algorithms {

namespace {

dsl::Layer build_cumsum(const std::string &name, const std::vector<dsl::Layer> &inputs,
                        const dsl::Attrs &attrs) {
    const std::string what = "cumsum '" + name + "'";
    const dsl::Layer &input = inputs.at(0);
    const detail::InputInfo in = detail::input_info(what, input, true);
    if (in.quantized)
        detail::invalid(what, "input '" + input.name() + "' is " + dsl::to_string(in.type) +
                                  "; cumsum takes f16, f32 or i32");
    const dsl::TensorDesc t = detail::graph_tensor(input.output());
    const int64_t rank = t.shape.rank();
    int64_t axis = attrs.get_int("axis");
    if (axis < -rank || axis >= rank)
        detail::invalid(what, "axis " + std::to_string(axis) + " of a tensor of rank " +
                                  std::to_string(rank));
    if (axis < 0) axis += rank;
    if (axis < detail::first_image_axis(t))
        detail::invalid(what, "sums along axis 0, the batch; on the device images are computed "
                              "one at a time");
    const bool exclusive = attrs.get_int("exclusive") != 0, reverse = attrs.get_int("reverse") != 0;
    const int extent = int(t.shape.raw()[size_t(axis)]);
    dsl::TensorDesc out = input.output();
    out.name = name;
    const Halide::Type sum_type =
        in.type == dsl::ElemType::I32 ? Halide::Int(32) : Halide::Float(32);
    dsl::Algorithm algorithm = [=](const std::vector<Halide::Func> &funcs) {
        const auto &v = dsl::act_vars();
        // The running sums, a scan along the axis, over the image's logical coordinates with
        // the axis last: its update's first argument is then a pure variable, whose points the
        // SHAVE computes in vector lanes, each in the axis's order.
        std::vector<Halide::Expr> pure;
        for (int64_t d = detail::first_image_axis(t); d < rank; ++d)
            if (d != axis)
                pure.push_back(
                    Halide::Var(Halide::Internal::unique_name(dsl::halide_name(name) + "_d")));
        pure.push_back(
            Halide::Var(Halide::Internal::unique_name(dsl::halide_name(name) + "_along")));
        // The scan's arguments for logical coordinates `at`, and back.
        auto args_of = [&](const std::vector<Halide::Expr> &at) {
            std::vector<Halide::Expr> args;
            for (int64_t d = detail::first_image_axis(t); d < rank; ++d)
                if (d != axis) args.push_back(at[size_t(d)]);
            args.push_back(at[size_t(axis)]);
            return args;
        };
        auto coords_of = [&](const std::vector<Halide::Expr> &args) {
            std::vector<Halide::Expr> at(static_cast<size_t>(rank));
            size_t next = 0;
            for (int64_t d = detail::first_image_axis(t); d < rank; ++d)
                if (d != axis) at[size_t(d)] = args[next++];
            at[size_t(axis)] = args.back();
            return at;
        };
        auto element = [&](const std::vector<Halide::Expr> &args) {
            return Halide::cast(sum_type, detail::read_logical(funcs.at(0), t, coords_of(args)));
        };
        // Summed in numpy's order, as ONNX's reference does: from the first element on, or,
        // reversed, from the last one down.
        Halide::Func sums = detail::named_func(name + "_sums");
        sums(pure) = element(pure);
        if (extent > 1) {
            Halide::RDom r(0, extent - 1, detail::rdom_name(name));
            const Halide::Expr at = reverse ? extent - 2 - r.x : r.x + 1;
            const Halide::Expr previous = reverse ? at + 1 : at - 1;
            std::vector<Halide::Expr> lhs(pure.begin(), pure.end() - 1), from = lhs;
            lhs.push_back(at);
            from.push_back(previous);
            sums(lhs) = sums(from) + element(lhs);
        }
        std::vector<Halide::Expr> args = args_of(detail::logical_coords(t, v.c, v.x, v.y));
        const Halide::Expr here = args.back();
        Halide::Expr value;
        if (!exclusive) {
            value = sums(args);
        } else {
            // The neighbour's sum, before (after, reversed) this element; none at the end.
            const Halide::Expr neighbour = reverse ? here + 1 : here - 1;
            args.back() = Halide::clamp(neighbour, 0, extent - 1);
            const Halide::Expr none = reverse ? here == extent - 1 : here == 0;
            value = Halide::select(none, Halide::cast(sum_type, 0), sums(args));
        }
        Halide::Func f = detail::named_func(name);
        f(v.c, v.x, v.y) = Halide::cast(in.halide_type, value);
        return f;
    };
    return dsl::Layer::make("cumsum", out, {input}, algorithm);
}

} // namespace

void register_layer_cumsum(dsl::LayerRegistry &registry) {
    dsl::LayerDef def;
    def.op = "cumsum";
    def.doc = "running sums along an axis, exclusive and reverse too (SHAVE, float32 sums)";
    def.inputs = {"input"};
    auto flag = [](const dsl::AttrValue &a) -> std::string {
        const int64_t v = std::get<int64_t>(a);
        return v == 0 || v == 1 ? "" : "must be 0 or 1";
    };
    def.attrs = {{"axis", dsl::AttrType::Int, std::nullopt, "negative counts from the end", {}},
                 {"exclusive", dsl::AttrType::Int, int64_t(0), "1: leaves the element out", flag},
                 {"reverse", dsl::AttrType::Int, int64_t(0), "1: sums from the end", flag}};
    def.build = build_cumsum;
    // Exclusive and reversed along H of odd extent; int8 tensors are not summed.
    def.example = [](dsl::ElemType type) {
        if (type != dsl::ElemType::F16) return dsl::Layer();
        dsl::Attrs a;
        a.set("axis", int64_t(2));
        a.set("exclusive", int64_t(1));
        a.set("reverse", int64_t(1));
        return layer_registry().build("cumsum", "cumsum",
                                      {detail::example_input("in", 5, 9, 13, type)}, a);
    };
    registry.add(std::move(def));
}

} // namespace vpuc::algorithms
