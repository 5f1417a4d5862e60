// space_to_depth: blocksize x blocksize pixels moved into channels (ONNX's SpaceToDepth, the
// inverse of depth_to_space's DCR): [N, C, H, W] to [N, C·b², H / b, W / b], output channel
// (i·b + j)·C + c from input channel c at pixel (i, j) of its block. A SHAVE copy kernel.
#include "common.h"

namespace vpuc::algorithms {

namespace {

dsl::Layer build_space_to_depth(const std::string &name, const std::vector<dsl::Layer> &inputs,
                                const dsl::Attrs &attrs) {
    const std::string what = "space_to_depth '" + name + "'";
    const dsl::Layer &input = inputs.at(0);
    detail::input_info(what, input, true);
    const dsl::TensorDesc t = detail::graph_tensor(input.output());
    if (t.shape.rank() != 4)
        detail::invalid(what, "the input is " + dsl::to_string(t.shape) + "; it must have rank 4");
    const int64_t b = attrs.get_int("blocksize");
    const std::vector<int64_t> &in = t.shape.raw();
    if (in[2] % b != 0 || in[3] % b != 0)
        detail::invalid(what, "H and W of " + dsl::to_string(t.shape) +
                                  " are not multiples of the blocksize " + std::to_string(b));
    const int64_t channels = in[1];
    dsl::TensorDesc out = input.output();
    out.name = name;
    out.shape = dsl::Shape({in[0], channels * b * b, in[2] / b, in[3] / b});
    // A rank-4 tensor is its own device view, (C, W, H) per image. The pixel of the block an
    // output channel takes is looked up in a table of the channels: bounds inference knows
    // nothing of a buffer's values and takes the clamp's bounds, so each output row reads its b
    // input rows whatever its channels (a region the blob states; the arithmetic's bounds
    // follow the channels).
    Halide::Buffer<int32_t> block_row(int(channels * b * b)), block_column(int(channels * b * b));
    for (int c = 0; c < block_row.width(); ++c) {
        block_row(c) = c / int(channels) / int(b);
        block_column(c) = c / int(channels) % int(b);
    }
    dsl::Algorithm algorithm = [=](const std::vector<Halide::Func> &funcs) {
        const auto &v = dsl::act_vars();
        const int last = int(b) - 1;
        const Halide::Expr i = Halide::clamp(block_row(v.c), 0, last);
        const Halide::Expr j = Halide::clamp(block_column(v.c), 0, last);
        Halide::Func f = detail::named_func(name);
        f(v.c, v.x, v.y) = funcs.at(0)(v.c % int(channels), v.x * int(b) + j, v.y * int(b) + i);
        return f;
    };
    return dsl::Layer::make("space_to_depth", out, {input}, algorithm);
}

} // namespace

void register_layer_space_to_depth(dsl::LayerRegistry &registry) {
    dsl::LayerDef def;
    def.op = "space_to_depth";
    def.doc = "blocks of pixels moved into channels (SHAVE copy)";
    def.inputs = {"input"};
    def.attrs = {{"blocksize", dsl::AttrType::Int, std::nullopt, "the block's side",
                  [](const dsl::AttrValue &v) -> std::string {
                      return std::get<int64_t>(v) >= 1 ? "" : "must be at least 1";
                  }}};
    def.build = build_space_to_depth;
    def.example = [](dsl::ElemType type) {
        dsl::Attrs a;
        a.set("blocksize", int64_t(3));
        return layer_registry().build("space_to_depth", "space_to_depth",
                                      {detail::example_input("in", 5, 9, 15, type)}, a);
    };
    registry.add(std::move(def));
}

} // namespace vpuc::algorithms
