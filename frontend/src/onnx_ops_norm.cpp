// ONNX's BatchNormalization. In inference mode the registry's batch_norm: the per-channel affine
// x * a + b, with a = scale / sqrt(var + epsilon) and b = B - mean * a computed once here in
// double precision (the graph pass fold_batch_norm then folds it into a preceding conv). In
// training mode (training_mode 1) the batch's own statistics, built from registry layers in
// float32: x as [1, N, C, rest] (the batch one image, its channels along the device's H), the
// mean and the population variance reduced over N and rest, x normalized by them and back in
// x's shape, then batch_norm applies scale and B; the running mean and variance, when asked
// for, are batch_norm's affine of the batch's ones (input * momentum + batch * (1 - momentum)).
// InstanceNormalization: layer_norm over each image's pixels, then batch_norm's affine.
#include <cmath>
#include <string>
#include <vector>

#include "dsl/constant_values.h"
#include "onnx_internal.h"

namespace vpuc::frontend::detail {

namespace {

using Layers = std::vector<dsl::Layer>;

// Input `i`, a constant of one value per channel, in double precision.
std::vector<double> channel_values(NodeImport &node, size_t i, const std::string &role,
                                   int64_t channels) {
    const dsl::ConstValues v =
        dsl::const_values(node.constant_input(i, role), node.node().input(int(i)));
    if (v.shape.size() != 1 || v.elements() != channels)
        node.fail(role + " must hold one value per channel (" + std::to_string(channels) + ")");
    return v.is_float() ? v.reals : std::vector<double>(v.ints.begin(), v.ints.end());
}

Halide::Buffer<> float_buffer(const std::vector<double> &values) {
    Halide::Buffer<float> b(static_cast<int>(values.size()));
    for (size_t i = 0; i < values.size(); ++i) b(int(i)) = float(values[i]);
    return b;
}

// The per-channel affine x * a + b of `x` (channels on axis 1) as batch_norm `name`.
dsl::Layer channel_affine(NodeImport &node, const std::string &name, const dsl::Layer &x,
                          const std::vector<double> &a, const std::vector<double> &b) {
    dsl::Attrs attrs;
    attrs.set("scale", float_buffer(a));
    attrs.set("bias", float_buffer(b));
    return node.build("batch_norm", name, {x}, attrs);
}

Layers inference(NodeImport &node, const dsl::Layer &x, int64_t channels, double epsilon) {
    for (int i = 1; i < node.node().output_size(); ++i)
        if (!node.node().output(i).empty())
            node.fail("the running mean and variance outputs exist in training mode only");
    // Momentum updates the running statistics during training only.
    node.attr_float("momentum", 0.9f);
    const std::vector<double> scale = channel_values(node, 1, "scale", channels);
    const std::vector<double> bias = channel_values(node, 2, "B", channels);
    const std::vector<double> mean = channel_values(node, 3, "mean", channels);
    const std::vector<double> var = channel_values(node, 4, "var", channels);
    std::vector<double> a, b;
    for (size_t c = 0; c < size_t(channels); ++c) {
        if (!(var[c] + epsilon > 0))
            node.fail("var + epsilon of channel " + std::to_string(c) + " is not positive");
        a.push_back(scale[c] / std::sqrt(var[c] + epsilon));
        b.push_back(bias[c] - mean[c] * a.back());
    }
    return {channel_affine(node, node.name(), x, a, b)};
}

Layers training(NodeImport &node, const dsl::Layer &x, int64_t channels, double epsilon) {
    const double momentum = node.attr_float("momentum", 0.9f);
    const std::vector<double> scale = channel_values(node, 1, "scale", channels);
    const std::vector<double> bias = channel_values(node, 2, "B", channels);
    const std::vector<int64_t> shape = x.output().shape.raw();
    const int64_t batch = shape[0];
    int64_t rest = 1;
    for (size_t d = 2; d < shape.size(); ++d) rest *= shape[d];
    const int64_t count = batch * rest; // the elements each channel's statistics cover
    const std::string type = dsl::to_string(x.output().type);

    auto layer = [&](const std::string &op, const std::string &suffix,
                     const std::vector<dsl::Layer> &inputs, const dsl::Attrs &attrs) {
        return node.build(op, node.unique_name(node.name() + suffix), inputs, attrs);
    };
    auto reshaped = [&](const std::string &suffix, const dsl::Layer &in,
                        const std::vector<int64_t> &to) {
        return layer("reshape", suffix, {in}, dsl::Attrs().set("shape", to));
    };
    auto with_constant = [&](const std::string &suffix, const dsl::Layer &in, const std::string &op,
                             double value) {
        const dsl::ConstValues c{dsl::ElemType::F32, {1}, {}, {value}};
        return layer("constant_eltwise", suffix, {in},
                     dsl::Attrs()
                         .set("op", op)
                         .set("constant", dsl::const_buffer(c))
                         .set("constant_first", int64_t(0)));
    };
    auto cast = [&](const std::string &name, const dsl::Layer &in, const std::string &to) {
        return node.build("cast", name, {in}, dsl::Attrs().set("to", to));
    };
    auto reduced = [&](const std::string &suffix, const dsl::Layer &in, const std::string &kind) {
        return layer("reduce", suffix, {in},
                     dsl::Attrs().set("kind", kind).set("axes", std::vector<int64_t>{1, 3}));
    };

    // [N, C, rest] keeps the batch (a SHAVE kernel for a 4-D tensor held NHWC, else a view);
    // [1, N, C, rest] makes the batch one image (a view of logical order).
    const dsl::Layer images =
        shape.size() == 3 ? x : reshaped(".images", x, {batch, channels, rest});
    const dsl::Layer rows = cast(node.unique_name(node.name() + ".f32"),
                                 reshaped(".rows", images, {1, batch, channels, rest}), "f32");
    const dsl::Layer mean = reduced(".mean", rows, "mean");
    const dsl::Layer centered = layer("sub", ".centered", {rows, mean}, {});
    const dsl::Layer var =
        with_constant(".var", reduced(".sum_square", centered, "sum_square"), "div", double(count));
    const dsl::Layer std_dev =
        layer("sqrt", ".std_dev", {with_constant(".var_epsilon", var, "add", epsilon)}, {});
    const dsl::Layer normalized = layer(
        "mul", ".normalized", {centered, layer("reciprocal", ".inv_std_dev", {std_dev}, {})}, {});
    const dsl::Layer normalized_images =
        reshaped(".normalized_images",
                 cast(node.unique_name(node.name() + ".normalized_" + type), normalized, type),
                 {batch, channels, rest});
    const dsl::Layer back = shape.size() == 3
                                ? normalized_images
                                : reshaped(".normalized_input", normalized_images, shape);
    Layers outputs = {channel_affine(node, node.name(), back, scale, bias)};

    // running = input * momentum + batch * (1 - momentum): batch_norm on [1, C].
    const char *suffixes[] = {".running_mean", ".running_var"};
    const dsl::Layer statistics[] = {mean, var};
    for (int i = 0; i < 2; ++i) {
        if (i + 1 >= node.node().output_size() || node.node().output(i + 1).empty()) continue;
        const std::vector<double> input =
            channel_values(node, size_t(3 + i), i == 0 ? "input_mean" : "input_var", channels);
        std::vector<double> a(size_t(channels), 1 - momentum), b;
        for (double v : input) b.push_back(v * momentum);
        const std::string name = node.node().output(i + 1);
        const dsl::Layer running = channel_affine(
            node, node.unique_name(name + ".f32"),
            reshaped(std::string(suffixes[i]) + "_rows", statistics[i], {1, channels}), a, b);
        outputs.resize(size_t(i + 1));
        outputs.push_back(reshaped(std::string(suffixes[i]),
                                   cast(node.unique_name(name + "." + type), running, type),
                                   {channels}));
    }
    return outputs;
}

} // namespace

Layers batch_normalization(NodeImport &node) {
    const bool train = node.attr_int("training_mode", 0) != 0;
    const double epsilon = node.attr_float("epsilon", 1e-5f);
    const dsl::Layer &x = node.input(0);
    const dsl::Shape &shape = x.output().shape;
    if (shape.rank() < 2) node.fail("the input needs a channel axis (rank 2 or more)");
    const int64_t channels = shape[dsl::dims::C];
    return train ? training(node, x, channels, epsilon) : inference(node, x, channels, epsilon);
}

// InstanceNormalization: each channel of each image normalized over its own pixels, then scaled
// and shifted per channel. The image's pixels are the last axis of [N, C, rest] (NODE.rows: a
// view, or a SHAVE kernel for a 4-D tensor held NHWC), which layer_norm normalizes in float32
// (NODE.normalized); back in the input's shape (NODE.pixels), batch_norm applies scale and B.
Layers instance_normalization(NodeImport &node) {
    const dsl::Layer &x = node.input(0);
    const std::vector<int64_t> shape = x.output().shape.raw();
    if (shape.size() < 3) node.fail("the input needs a channel axis and pixels (rank 3 or more)");
    const int64_t channels = shape[1];
    int64_t pixels = 1;
    for (size_t d = 2; d < shape.size(); ++d) pixels *= shape[d];
    const std::vector<double> scale = channel_values(node, 1, "scale", channels);
    const std::vector<double> bias = channel_values(node, 2, "B", channels);
    auto reshaped = [&](const std::string &suffix, const dsl::Layer &in,
                        const std::vector<int64_t> &to) {
        return node.build("reshape", node.unique_name(node.name() + suffix), {in},
                          dsl::Attrs().set("shape", to));
    };
    const bool flat = shape.size() == 3;
    const dsl::Layer rows = flat ? x : reshaped(".rows", x, {shape[0], channels, pixels});
    const dsl::Layer normalized =
        node.build("layer_norm", node.unique_name(node.name() + ".normalized"), {rows},
                   dsl::Attrs().set("epsilon", double(node.attr_float("epsilon", 1e-5f))));
    const dsl::Layer back = flat ? normalized : reshaped(".pixels", normalized, shape);
    return {channel_affine(node, node.name(), back, scale, bias)};
}

} // namespace vpuc::frontend::detail
