// pad: the input with pads added before and after each axis (ONNX's Pad): mode constant (the
// `value` outside), edge (the nearest element) or reflect (mirrored about the first and last
// elements, repeatedly for pads past the extent, as numpy.pad does); a negative pad removes
// elements. A SHAVE copy kernel; the batch (axis 0) is not padded.
#include "common.h"
#include "logical_index.h"

namespace vpuc::algorithms {

namespace {

// The output's shape: each extent plus its pads, checked to stay at least 1.
std::vector<int64_t> padded_shape(const std::string &what, const std::vector<int64_t> &shape,
                                  const std::vector<int64_t> &pads) {
    const size_t rank = shape.size();
    if (pads.size() != 2 * rank)
        detail::invalid(what, std::to_string(pads.size()) + " pads for a tensor of rank " +
                                  std::to_string(rank) + " (one before and one after each axis)");
    std::vector<int64_t> out(rank);
    for (size_t d = 0; d < rank; ++d) {
        out[d] = shape[d] + pads[d] + pads[d + rank];
        if (out[d] < 1)
            detail::invalid(what, "axis " + std::to_string(d) + " of extent " +
                                      std::to_string(shape[d]) + " padded by " +
                                      std::to_string(pads[d]) + " and " +
                                      std::to_string(pads[d + rank]) + " would be empty");
    }
    return out;
}

// The input index each of the `count` output indices of an axis of `extent` reads, `before`
// padded; -1 outside the input for mode constant.
Halide::Buffer<int32_t> sources(const std::string &mode, int64_t count, int64_t before,
                                int64_t extent) {
    Halide::Buffer<int32_t> table(static_cast<int>(count));
    for (int64_t i = 0; i < count; ++i) {
        int64_t at = i - before;
        if (mode == "constant") {
            if (at < 0 || at >= extent) at = -1;
        } else if (mode == "edge" || extent == 1) {
            at = std::clamp<int64_t>(at, 0, extent - 1);
        } else { // reflect: a period of 2 (extent - 1), mirrored in its second half
            const int64_t period = 2 * (extent - 1), m = ((at % period) + period) % period;
            at = m < extent ? m : period - m;
        }
        table(int(i)) = int32_t(at);
    }
    return table;
}

dsl::Layer build_pad(const std::string &name, const std::vector<dsl::Layer> &inputs,
                     const dsl::Attrs &attrs) {
    const std::string what = "pad '" + name + "'";
    const dsl::Layer &input = inputs.at(0);
    const detail::InputInfo in = detail::input_info(what, input, true);
    const dsl::TensorDesc t = detail::graph_tensor(input.output());
    const std::vector<int64_t> pads = attrs.get_ints("pads");
    const std::string mode = attrs.get_string("mode");
    dsl::TensorDesc out = input.output();
    out.name = name;
    out.shape = dsl::Shape(padded_shape(what, t.shape.raw(), pads));
    detail::require_same_batch(what, t, out);
    const size_t rank = size_t(t.shape.rank());
    // A constant pad is the value as the input stores it.
    const double value = attrs.get_float("value");
    const Halide::Expr stored =
        in.quantized ? detail::quantize(Halide::Expr(float(value)),
                                        dsl::Quant::per_tensor(in.scale, in.zero_point), in.type)
                     : Halide::cast(in.halide_type, Halide::Expr(value));
    // Computed at compile time per axis: the kernel looks each coordinate up.
    std::vector<Halide::Buffer<int32_t>> tables(rank);
    for (size_t d = size_t(detail::first_image_axis(t)); d < rank; ++d)
        tables[d] = sources(mode, out.shape.raw()[d], pads[d], t.shape.raw()[d]);
    dsl::Algorithm algorithm = [=](const std::vector<Halide::Func> &funcs) {
        const auto &v = dsl::act_vars();
        std::vector<Halide::Expr> at = detail::logical_coords(out, v.c, v.x, v.y);
        Halide::Expr inside = Halide::Internal::const_true();
        for (size_t d = size_t(detail::first_image_axis(t)); d < rank; ++d) {
            const int last = tables[d].number_of_elements() - 1;
            at[d] = tables[d](Halide::clamp(at[d], 0, last));
            inside = inside && at[d] >= 0;
        }
        Halide::Func f = detail::named_func(name);
        const Halide::Expr x = detail::read_logical(funcs.at(0), t, at);
        f(v.c, v.x, v.y) = mode == "constant" ? Halide::select(inside, x, stored) : x;
        return f;
    };
    return dsl::Layer::make("pad", out, {input}, algorithm);
}

} // namespace

void register_layer_pad(dsl::LayerRegistry &registry) {
    dsl::LayerDef def;
    def.op = "pad";
    def.doc = "pads added before and after each axis: constant, edge or reflect (SHAVE copy)";
    def.inputs = {"data"};
    def.attrs = {
        {"pads",
         dsl::AttrType::Ints,
         std::nullopt,
         "[before of each axis..., after of each axis...]; negative removes elements",
         {}},
        {"mode", dsl::AttrType::String, std::string("constant"), "constant, edge or reflect",
         [](const dsl::AttrValue &v) -> std::string {
             const std::string &mode = std::get<std::string>(v);
             return mode == "constant" || mode == "edge" || mode == "reflect"
                        ? ""
                        : "'" + mode + "' is not one of constant, edge, reflect";
         }},
        {"value", dsl::AttrType::Float, 0.0, "the constant mode's value, in real units", {}}};
    def.build = build_pad;
    // Reflected on odd extents, with a pad past the extent and a negative one.
    def.example = [](dsl::ElemType type) {
        dsl::Attrs a;
        a.set("pads", std::vector<int64_t>{0, 2, 1, 9, 0, 3, -2, 4});
        a.set("mode", std::string("reflect"));
        return layer_registry().build("pad", "pad", {detail::example_input("in", 9, 11, 7, type)},
                                      a);
    };
    registry.add(std::move(def));
}

} // namespace vpuc::algorithms
