// ONNX's BatchNormalization in inference mode, as the registry's batch_norm: the per-channel
// affine x * a + b, with a = scale / sqrt(var + epsilon) and b = B - mean * a computed once here
// in double precision (the graph pass fold_batch_norm then folds it into a preceding conv).
#include <cmath>
#include <string>
#include <vector>

#include "dsl/constant_values.h"
#include "onnx_internal.h"

namespace vpuc::frontend::detail {

std::vector<dsl::Layer> batch_normalization(NodeImport &node) {
    node.expect_int("training_mode", 0, "only inference is supported");
    for (int i = 1; i < node.node().output_size(); ++i)
        if (!node.node().output(i).empty())
            node.fail("the running mean and variance outputs exist in training mode only");
    // Momentum updates the running statistics during training only.
    node.attr_float("momentum", 0.9f);
    const double epsilon = node.attr_float("epsilon", 1e-5f);
    const dsl::Layer &x = node.input(0);
    const dsl::Shape &shape = x.output().shape;
    if (shape.rank() < 2) node.fail("the input needs a channel axis (rank 2 or more)");
    const int64_t channels = shape[dsl::dims::C];
    std::vector<std::vector<double>> values; // scale, B, mean, var
    const char *roles[] = {"scale", "B", "mean", "var"};
    for (size_t i = 1; i <= 4; ++i) {
        const dsl::ConstValues v =
            dsl::const_values(node.constant_input(i, roles[i - 1]), node.node().input(int(i)));
        if (v.shape.size() != 1 || v.elements() != channels)
            node.fail(std::string(roles[i - 1]) + " must hold one value per channel (" +
                      std::to_string(channels) + ")");
        values.push_back(v.is_float() ? v.reals
                                      : std::vector<double>(v.ints.begin(), v.ints.end()));
    }
    Halide::Buffer<float> a(static_cast<int>(channels)), b(static_cast<int>(channels));
    for (int c = 0; c < int(channels); ++c) {
        const double var = values[3][size_t(c)];
        if (!(var + epsilon > 0))
            node.fail("var + epsilon of channel " + std::to_string(c) + " is not positive");
        const double factor = values[0][size_t(c)] / std::sqrt(var + epsilon);
        a(c) = float(factor);
        b(c) = float(values[1][size_t(c)] - values[2][size_t(c)] * factor);
    }
    dsl::Attrs attrs;
    attrs.set("scale", a);
    attrs.set("bias", b);
    return {node.build("batch_norm", {x}, attrs)};
}

} // namespace vpuc::frontend::detail
