// linear: ONNX's MatMul of an activation [..., M, K] of rank 3 to 5 by constant weights [K, N]
// (a transformer's projections), on the SHAVEs, summing in float32 in the order of k; the
// kernel carries the weights. The last axis of such a tensor is the device's W (rows along C or
// H), where the DPU's matmul takes features along C: the importer gives an fp16 tensor of one
// image to the DPU's matmul instead, through views that relabel its bytes
// (frontend/src/onnx_ops_nn.cpp, linear_on_dpu), and leaves this layer the batches and f32.
#include "common.h"

namespace vpuc::algorithms {

namespace {

dsl::Layer build_linear(const std::string &name, const std::vector<dsl::Layer> &inputs,
                        const dsl::Attrs &attrs) {
    const std::string what = "linear '" + name + "'";
    const dsl::Layer &input = inputs.at(0);
    const detail::InputInfo in = detail::input_info(what, input);
    if (in.quantized)
        detail::invalid(what, "input '" + input.output().name + "' is " + dsl::to_string(in.type) +
                                  "; linear takes f16 or f32");
    const dsl::Shape &shape = input.output().logical_shape();
    if (shape.rank() < 3)
        detail::invalid(what, "input " + dsl::to_string(shape) +
                                  " has rank below 3; rows of features are the DPU's matmul");
    if (detail::device_axis_of(what, input.output(), -1) != dsl::dims::W)
        detail::invalid(what,
                        "the last axis of " + dsl::to_string(shape) + " is not the device's W");
    const Halide::Buffer<> &weights = attrs.get_tensor("weights");
    const Halide::Type wt = weights.type();
    if (weights.dimensions() != 2 || !(wt == Halide::Float(16) || wt == Halide::Float(32)))
        detail::invalid(what, "weights must be a 2-D buffer of f16 or f32, dims (k, n)");
    if (weights.dim(0).min() != 0 || weights.dim(1).min() != 0)
        detail::invalid(what, "weights must start at index 0");
    if (weights.dim(0).extent() != in.w)
        detail::invalid(what, "weights have " + std::to_string(weights.dim(0).extent()) +
                                  " rows; the input has " + std::to_string(in.w) + " features");
    const int64_t k = in.w, n = weights.dim(1).extent();
    // A dense copy, whatever the attribute's strides.
    const Halide::Buffer<> w = weights.copy();
    dsl::Algorithm algorithm = [=](const std::vector<Halide::Func> &funcs) {
        const auto &v = dsl::act_vars();
        Halide::RDom r(0, int(k), detail::rdom_name(name + "_k"));
        Halide::Func acc = detail::named_func(name + "_acc");
        acc(v.c, v.x, v.y) = 0.0f;
        acc(v.c, v.x, v.y) +=
            Halide::cast<float>(funcs.at(0)(v.c, r.x, v.y)) * Halide::cast<float>(w(r.x, v.x));
        Halide::Func out = detail::named_func(name);
        out(v.c, v.x, v.y) = Halide::cast(in.halide_type, acc(v.c, v.x, v.y));
        return out;
    };
    return dsl::Layer::make("linear", detail::output_desc(name, input, in.c, n, in.h, in.type, {}),
                            {input}, algorithm);
}

} // namespace

void register_layer_linear(dsl::LayerRegistry &registry) {
    dsl::LayerDef def;
    def.op = "linear";
    def.doc = "[..., M, K] x constant [K, N] for ranks 3 to 5, float32 sums (SHAVE)";
    def.inputs = {"input"};
    def.attrs = {{"weights",
                  dsl::AttrType::Tensor,
                  std::nullopt,
                  "f16 or f32 of dims (k, n): K rows of N columns",
                  {}}};
    def.build = build_linear;
    def.example = [](dsl::ElemType type) {
        if (dsl::is_quantized_int(type)) return dsl::Layer();
        dsl::TensorDesc t;
        t.name = "in";
        t.shape = dsl::Shape({3, 7, 19});
        t.type = type;
        t.order = dsl::DimsOrder::identity(3);
        dsl::Attrs a;
        a.set("weights", Halide::Buffer<>(detail::example_float_weights({19, 5}, 5).weights));
        return layer_registry().build("linear", "linear", {dsl::Layer::input(t)}, a);
    };
    registry.add(std::move(def));
}

} // namespace vpuc::algorithms
