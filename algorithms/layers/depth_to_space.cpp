// depth_to_space: blocks of channels moved into blocksize x blocksize pixels (ONNX's
// DepthToSpace): [N, C, H, W] to [N, C / b², H·b, W·b]. Mode DCR takes output channel c of
// pixel (i, j) of a block from input channel (i·b + j)·C/b² + c, mode CRD from c·b² + i·b + j.
// A SHAVE copy kernel.
#include "common.h"
#include "logical_index.h"

namespace vpuc::algorithms {

namespace {

dsl::Layer build_depth_to_space(const std::string &name, const std::vector<dsl::Layer> &inputs,
                                const dsl::Attrs &attrs) {
    const std::string what = "depth_to_space '" + name + "'";
    const dsl::Layer &input = inputs.at(0);
    detail::input_info(what, input, true);
    const dsl::TensorDesc t = detail::graph_tensor(input.output());
    if (t.shape.rank() != 4)
        detail::invalid(what, "the input is " + dsl::to_string(t.shape) + "; it must have rank 4");
    const int64_t b = attrs.get_int("blocksize");
    const bool dcr = attrs.get_string("mode") == "DCR";
    const std::vector<int64_t> &in = t.shape.raw();
    if (in[1] % (b * b) != 0)
        detail::invalid(what, std::to_string(in[1]) + " channels are not a multiple of " +
                                  std::to_string(b * b) + " (the blocksize squared)");
    const int64_t channels = in[1] / (b * b);
    dsl::TensorDesc out = input.output();
    out.name = name;
    out.shape = dsl::Shape({in[0], channels, in[2] * b, in[3] * b});
    dsl::Algorithm algorithm = [=](const std::vector<Halide::Func> &funcs) {
        const auto &v = dsl::act_vars();
        const Halide::Expr i = v.y % int(b), j = v.x % int(b);
        const Halide::Expr block = i * int(b) + j;
        const Halide::Expr from = dcr ? block * int(channels) + v.c : v.c * int(b * b) + block;
        Halide::Func f = detail::named_func(name);
        f(v.c, v.x, v.y) = detail::read_logical(funcs.at(0), t,
                                                {Halide::Expr(), from, v.y / int(b), v.x / int(b)});
        return f;
    };
    return dsl::Layer::make("depth_to_space", out, {input}, algorithm);
}

} // namespace

void register_layer_depth_to_space(dsl::LayerRegistry &registry) {
    dsl::LayerDef def;
    def.op = "depth_to_space";
    def.doc = "blocks of channels moved into pixels, DCR or CRD (SHAVE copy)";
    def.inputs = {"input"};
    def.attrs = {{"blocksize", dsl::AttrType::Int, std::nullopt, "the block's side",
                  [](const dsl::AttrValue &v) -> std::string {
                      return std::get<int64_t>(v) >= 1 ? "" : "must be at least 1";
                  }},
                 {"mode", dsl::AttrType::String, std::string("DCR"), "DCR or CRD",
                  [](const dsl::AttrValue &v) -> std::string {
                      const std::string &mode = std::get<std::string>(v);
                      return mode == "DCR" || mode == "CRD" ? "" : "must be DCR or CRD";
                  }}};
    def.build = build_depth_to_space;
    def.example = [](dsl::ElemType type) {
        dsl::Attrs a;
        a.set("blocksize", int64_t(3));
        a.set("mode", std::string("CRD"));
        return layer_registry().build("depth_to_space", "depth_to_space",
                                      {detail::example_input("in", 18, 5, 7, type)}, a);
    };
    registry.add(std::move(def));
}

} // namespace vpuc::algorithms
