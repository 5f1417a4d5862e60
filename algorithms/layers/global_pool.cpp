// global_pool: the mean or the maximum of each channel over H and W, in float32 on the SHAVEs.
// ONNX's GlobalAveragePool and GlobalMaxPool where the image is larger than the DPU's pooling
// window (dpu.max_kernel); smaller images pool on the DPU as avg_pool and max_pool. int8
// results keep the input's quantization: a mean or a maximum stays in the input's range.
#include <limits>

#include "common.h"

namespace vpuc::algorithms {

namespace {

dsl::Layer build_global_pool(const std::string &name, const std::vector<dsl::Layer> &inputs,
                             const dsl::Attrs &attrs) {
    const std::string what = "global_pool '" + name + "'";
    const dsl::Layer &input = inputs.at(0);
    const detail::InputInfo in = detail::spatial_input_info(what, input);
    const bool is_max = attrs.get_string("mode") == "max";
    const dsl::Quant q = input.output().quant;
    const float area = float(in.w * in.h);
    dsl::Algorithm algorithm = [=](const std::vector<Halide::Func> &funcs) {
        const auto &v = dsl::act_vars();
        Halide::RDom r({{0, int(in.w)}, {0, int(in.h)}}, detail::rdom_name(name));
        const Halide::Expr x = detail::dequantize(funcs.at(0)(v.c, r.x, r.y), in);
        Halide::Func acc = detail::named_func(name + "_acc");
        acc(v.c) =
            is_max ? Halide::Expr(-std::numeric_limits<float>::infinity()) : Halide::Expr(0.0f);
        if (is_max)
            acc(v.c) = Halide::max(acc(v.c), x);
        else
            acc(v.c) += x;
        const Halide::Expr y = is_max ? acc(v.c) : acc(v.c) / area;
        Halide::Func out = detail::named_func(name);
        out(v.c, v.x, v.y) =
            in.quantized ? detail::quantize(y, q, in.type) : Halide::cast(in.halide_type, y);
        return out;
    };
    return dsl::Layer::make("global_pool", detail::output_desc(name, input, in.c, 1, 1, in.type, q),
                            {input}, algorithm);
}

} // namespace

void register_layer_global_pool(dsl::LayerRegistry &registry) {
    dsl::LayerDef def;
    def.op = "global_pool";
    def.doc = "mean or maximum of each channel over H and W, in float32, on the SHAVEs";
    def.inputs = {"input"};
    def.attrs = {{"mode", dsl::AttrType::String, std::string("average"), "average or max",
                  [](const dsl::AttrValue &a) -> std::string {
                      const std::string &mode = std::get<std::string>(a);
                      return mode == "average" || mode == "max" ? "" : "must be 'average' or 'max'";
                  }}};
    def.build = build_global_pool;
    // Every output element reads the whole image.
    def.unsplittable_dims = [](const dsl::Layer &) {
        return std::vector<dsl::Dim>{dsl::dims::H, dsl::dims::W};
    };
    def.example = [](dsl::ElemType type) {
        return layer_registry().build("global_pool", "global_pool",
                                      {detail::example_input("in", 19, 17, 13, type)}, {});
    };
    registry.add(std::move(def));
}

} // namespace vpuc::algorithms
