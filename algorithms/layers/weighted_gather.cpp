// weighted_gather: out[p] = sum over k of weights[p, k] * data[indices[p, k]], the data read in
// its logical row-major order, an index of -1 reading nothing (a zero outside the data). Indices
// and weights are constants: the importer's sampling ops whose sample points are known at compile
// time (GridSample of a constant grid, RoiAlign of constant boxes) are each one weighted gather
// of the flattened input. A SHAVE kernel carrying both tables: the products are summed in
// float32 (the weights are float32) and rounded once to the data's float type.
#include "common.h"

namespace vpuc::algorithms {

namespace {

// The checked tables: [points][taps] indices in [-1, elements) and their weights.
struct WeightedTaps {
    int64_t points = 0, taps = 0;
    std::vector<int64_t> indices;
    std::vector<double> weights;
};

WeightedTaps weighted_taps(const std::string &what, int64_t elements, const dsl::Attrs &attrs) {
    const dsl::ConstValues indices = dsl::const_values(attrs.get_tensor("indices"), what);
    const dsl::ConstValues weights = dsl::const_values(attrs.get_tensor("weights"), what);
    if (indices.is_float()) detail::invalid(what, "indices must be integers");
    if (!weights.is_float()) detail::invalid(what, "weights must be floats");
    if (indices.shape.size() != 2 || indices.shape != weights.shape)
        detail::invalid(what, "indices and weights must both be [points, taps]");
    WeightedTaps t;
    t.points = indices.shape[0];
    t.taps = indices.shape[1];
    if (t.points < 1 || t.taps < 1) detail::invalid(what, "no points or no taps");
    for (size_t i = 0; i < indices.ints.size(); ++i)
        if (indices.ints[i] < -1 || indices.ints[i] >= elements)
            detail::invalid(what, "index " + std::to_string(indices.ints[i]) + " (entry " +
                                      std::to_string(i) + ") outside [-1, " +
                                      std::to_string(elements) + ")");
    t.indices = indices.ints;
    t.weights = weights.reals;
    return t;
}

// The output's description: [points] of the data's float type.
dsl::TensorDesc points_desc(const std::string &name, const dsl::TensorDesc &data, int64_t points) {
    dsl::TensorDesc out;
    out.name = name;
    out.shape = dsl::Shape({points});
    out.type = data.type;
    out.order = dsl::DimsOrder::identity(1);
    return out;
}

Halide::Buffer<> fold_weighted_gather(const std::string &name,
                                      const std::vector<dsl::Layer> &inputs,
                                      const dsl::Attrs &attrs) {
    const std::string what = "weighted_gather '" + name + "'";
    const dsl::ConstValues data = dsl::const_values(inputs.at(0));
    if (!data.is_float()) detail::invalid(what, "the data must be floats");
    const WeightedTaps t = weighted_taps(what, data.elements(), attrs);
    dsl::ConstValues out{data.type, {t.points}, {}, std::vector<double>(size_t(t.points), 0.0)};
    for (int64_t p = 0; p < t.points; ++p) {
        float sum = 0; // float32, as the kernel sums
        for (int64_t k = 0; k < t.taps; ++k) {
            const size_t entry = size_t(p * t.taps + k);
            if (t.indices[entry] >= 0)
                sum += float(t.weights[entry]) * float(data.reals[size_t(t.indices[entry])]);
        }
        out.reals[size_t(p)] = sum;
    }
    return dsl::const_buffer(out);
}

dsl::Layer build_weighted_gather(const std::string &name, const std::vector<dsl::Layer> &inputs,
                                 const dsl::Attrs &attrs) {
    const std::string what = "weighted_gather '" + name + "'";
    const dsl::Layer &input = inputs.at(0);
    const detail::InputInfo in = detail::input_info(what, input);
    if (in.quantized) detail::invalid(what, "the data must be f16 or f32, not int8");
    if (in.n != 1)
        detail::invalid(what, "the data " + dsl::to_string(input.output().shape) +
                                  " has a batch of " + std::to_string(in.n) +
                                  "; it is read as one image (flatten it first)");
    const WeightedTaps t = weighted_taps(what, input.output().shape.elements(), attrs);
    Halide::Buffer<int32_t> indices(int(t.taps), int(t.points));
    Halide::Buffer<float> weights(int(t.taps), int(t.points));
    for (int64_t p = 0; p < t.points; ++p)
        for (int64_t k = 0; k < t.taps; ++k) {
            const size_t entry = size_t(p * t.taps + k);
            indices(int(k), int(p)) = int32_t(t.indices[entry]);
            weights(int(k), int(p)) = float(t.weights[entry]);
        }
    const dsl::TensorDesc out = points_desc(name, input.output(), t.points);
    const dsl::Shape device = dsl::device_view(out).shape;
    const int64_t oh = device[dsl::dims::H], ow = device[dsl::dims::W];
    const Halide::Type type = in.halide_type;
    dsl::Algorithm algorithm = [=](const std::vector<Halide::Func> &funcs) {
        const auto &v = dsl::act_vars();
        const Halide::Expr point =
            Halide::clamp((v.c * int(oh) + v.y) * int(ow) + v.x, 0, int(t.points - 1));
        Halide::RDom k(0, int(t.taps), detail::rdom_name(name + "_k"));
        const Halide::Expr from = indices(k, point);
        // A -1 reads element 0, which the select leaves out.
        const Halide::Expr value = detail::any_image_element(funcs.at(0), in, Halide::max(from, 0));
        Halide::Func f = detail::named_func(name);
        f(v.c, v.x, v.y) = Halide::cast(
            type, Halide::sum(Halide::select(
                      from >= 0, weights(k, point) * Halide::cast<float>(value), 0.0f)));
        return f;
    };
    return dsl::Layer::make("weighted_gather", out, {input}, algorithm);
}

} // namespace

void register_layer_weighted_gather(dsl::LayerRegistry &registry) {
    dsl::LayerDef def;
    def.op = "weighted_gather";
    def.doc = "sums of data elements times weights, both picked by constant tables (SHAVE; "
              "folded for constants)";
    def.inputs = {"data"};
    def.attrs = {{"indices",
                  dsl::AttrType::Tensor,
                  std::nullopt,
                  "integers [points, taps]: elements of the data in logical row-major order, "
                  "-1 for none",
                  {}},
                 {"weights",
                  dsl::AttrType::Tensor,
                  std::nullopt,
                  "floats [points, taps], each tap's weight (float32)",
                  {}}};
    def.build = build_weighted_gather;
    def.fold = fold_weighted_gather;
    // Bilinear-like points of odd weights reading across channels and rows, a -1 among them.
    def.example = [](dsl::ElemType type) {
        if (dsl::is_quantized_int(type)) return dsl::Layer();
        const int64_t points = 13, taps = 4, elements = 5 * 7 * 3;
        dsl::ConstValues indices{dsl::ElemType::I64, {points, taps}, {}, {}};
        dsl::ConstValues weights{dsl::ElemType::F32, {points, taps}, {}, {}};
        for (int64_t p = 0; p < points; ++p)
            for (int64_t k = 0; k < taps; ++k) {
                indices.ints.push_back(p == 4 && k == 2 ? -1 : (p * 17 + k * 29) % elements);
                weights.reals.push_back(double(k + 1) * 0.1875 - double(p % 3) * 0.3);
            }
        dsl::Attrs a;
        a.set("indices", dsl::const_buffer(indices));
        a.set("weights", dsl::const_buffer(weights));
        return layer_registry().build("weighted_gather", "weighted_gather",
                                      {detail::example_input("in", 5, 3, 7, type)}, a);
    };
    registry.add(std::move(def));
}

} // namespace vpuc::algorithms
