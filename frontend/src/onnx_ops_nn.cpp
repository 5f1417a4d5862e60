// ONNX ops onto the SHAVE layers of algorithms/layers/: Resize, LayerNormalization, Erf, MatMul
// of two computed tensors or of a tensor of rank 3 or more by constant weights, eltwise ops with
// one constant operand, and global pools too large for the DPU's window.
#include <algorithm>
#include <cmath>
#include <limits>

#include "algorithms/registry.h"
#include "dsl/constant_values.h"
#include "onnx_internal.h"
#include "vpu_target/target.h"

namespace vpuc::frontend::detail {

namespace {

using Layers = std::vector<dsl::Layer>;

// The largest pooling window the DPU of every bundled target takes (dpu.max_kernel): a model
// compiles for any of them.
int64_t dpu_window_limit() {
    static const int64_t limit = [] {
        int64_t smallest = std::numeric_limits<int64_t>::max();
        for (const std::string &name : target::bundled_target_names())
            smallest = std::min<int64_t>(smallest, target::load_target(name).max_kernel);
        return smallest;
    }();
    return limit;
}

void require_rank4(const NodeImport &node, const dsl::Layer &x) {
    if (x.output().shape.rank() != 4)
        node.fail("the input is " + dsl::to_string(x.output().shape) +
                  "; only 4-D inputs (N, C, H, W) are supported");
}

// The float values of constant input `i`, or an empty list for an absent or empty input.
std::vector<double> constant_reals(NodeImport &node, size_t i, const std::string &role) {
    if (!node.has_input(i)) return {};
    const dsl::ConstValues v =
        dsl::const_values(node.constant_input(i, role), node.node().input(int(i)));
    if (!v.is_float()) return std::vector<double>(v.ints.begin(), v.ints.end());
    return v.reals;
}

} // namespace

Layers import_global_pool(NodeImport &node, bool is_max) {
    const dsl::Layer &x = node.input(0);
    require_rank4(node, x);
    const int64_t h = x.output().shape[dsl::dims::H], w = x.output().shape[dsl::dims::W];
    dsl::Attrs attrs;
    if (h <= dpu_window_limit() && w <= dpu_window_limit()) {
        attrs.set("kernel_shape", std::vector<int64_t>{h, w});
        return {node.build(is_max ? "max_pool" : "avg_pool", {x}, attrs)};
    }
    attrs.set("mode", std::string(is_max ? "max" : "average"));
    return {node.build("global_pool", {x}, attrs)};
}

// Resize of H and W by scales or sizes (N and C kept); roi only matters to tf_crop_and_resize,
// whose crop must keep N and C whole. The layer checks the modes.
Layers import_resize(NodeImport &node) {
    const dsl::Layer &x = node.input(0);
    require_rank4(node, x);
    const std::string mode = node.attr_string("mode", "nearest");
    const std::string coordinates =
        node.attr_string("coordinate_transformation_mode", "half_pixel");
    const std::string nearest = node.attr_string("nearest_mode", "round_prefer_floor");
    dsl::Attrs attrs;
    attrs.set("exclude_outside", node.attr_int("exclude_outside", 0));
    attrs.set("cubic_coeff_a", double(node.attr_float("cubic_coeff_a", -0.75f)));
    attrs.set("extrapolation_value", double(node.attr_float("extrapolation_value", 0.0f)));
    if (coordinates == "tf_crop_and_resize") {
        const std::vector<double> roi = constant_reals(node, 1, "roi");
        if (roi.size() != 8 || roi[0] != 0 || roi[1] != 0 || roi[4] != 1 || roi[5] != 1)
            node.fail("roi must have 8 entries [starts, ends] that keep N and C whole (0 to 1); "
                      "only H and W are cropped");
        attrs.set("roi", std::vector<double>{roi[2], roi[3], roi[6], roi[7]});
    }
    const dsl::Shape &shape = x.output().shape;
    const std::vector<double> scales = constant_reals(node, 2, "scales");
    const bool by_sizes = node.has_input(3);
    if (by_sizes == !scales.empty())
        node.fail("give either scales or sizes (input 2 or 3), not both or neither");
    std::vector<int64_t> sizes;
    if (by_sizes) {
        sizes = node.constant_ints(3, "sizes");
        if (sizes.size() != 4 || sizes[0] != shape[dsl::dims::N] || sizes[1] != shape[dsl::dims::C])
            node.fail("sizes must have 4 entries and keep N and C; only H and W resize");
        sizes.erase(sizes.begin(), sizes.begin() + 2);
    } else {
        if (scales.size() != 4 || scales[0] != 1 || scales[1] != 1)
            node.fail("scales must have 4 entries with 1 for N and C; only H and W resize");
        for (size_t d = 2; d < 4; ++d) {
            if (!(scales[d] > 0 && scales[d] < 1e6)) node.fail("scales must be positive, finite");
            // ONNX's output extent: the input's times the scale, rounded down.
            sizes.push_back(int64_t(std::floor(double(shape[dsl::Dim(d)]) * scales[d])));
        }
        attrs.set("scales", std::vector<double>{scales[2], scales[3]});
    }
    attrs.set("sizes", sizes);
    attrs.set("mode", mode);
    attrs.set("coordinate_transformation_mode", coordinates);
    attrs.set("nearest_mode", nearest);
    return {node.build("resize", {x}, attrs)};
}

// LayerNormalization over the axes from `axis` on, scale and bias constant (f32 for the
// kernel). layer_norm normalizes the last axis; over several, the input is reshaped to
// [N, the extents between N and axis, the normalized ones] (over axis 0 too, [1, 1, all of
// them]: the batch is one row) and the result back (views of the same bytes). Mean and InvStdDev
// come from layer_norm_stats, in ONNX's shape: the input's with the normalized axes 1.
Layers import_layer_norm(NodeImport &node) {
    node.expect_int("stash_type", 1, "statistics are computed in float32");
    const dsl::Layer &x = node.input(0);
    const std::vector<int64_t> shape = x.output().shape.raw();
    const int64_t rank = int64_t(shape.size());
    int64_t axis = node.attr_int("axis", -1);
    if (axis < -rank || axis >= rank)
        node.fail("axis " + std::to_string(axis) + " is outside the input's rank " +
                  std::to_string(rank));
    if (axis < 0) axis += rank;
    const bool several_axes = axis < rank - 1;
    int64_t between = 1, normalized = 1;
    for (int64_t d = 0; d < rank; ++d) {
        if (d >= axis)
            normalized *= shape[size_t(d)];
        else if (d > 0)
            between *= shape[size_t(d)];
    }
    auto reshaped = [&](const dsl::Layer &layer, const std::string &name,
                        const std::vector<int64_t> &to) {
        return node.build("reshape", node.unique_name(name), {layer},
                          dsl::Attrs().set("shape", to));
    };
    // Over axis 0 the whole batch is one row: each image as one row first (a view of logical
    // order, a SHAVE kernel keeping the batch for a tensor held NHWC), then the images as one.
    const bool across_batch = several_axes && axis == 0 && shape[0] != 1;
    const dsl::Layer images =
        across_batch ? reshaped(x, node.name() + ".images", {shape[0], 1, normalized / shape[0]})
                     : x;
    const dsl::Layer rows = several_axes
                                ? reshaped(images, node.name() + ".rows",
                                           {across_batch ? 1 : shape[0], between, normalized})
                                : x;
    dsl::Attrs attrs;
    attrs.set("epsilon", double(node.attr_float("epsilon", 1e-5f)));
    const dsl::Attrs stats_attrs = attrs;
    for (size_t i = 1; i <= 2; ++i) {
        if (!node.has_input(i)) continue;
        const std::string role = i == 1 ? "scale" : "bias";
        std::vector<double> values = constant_reals(node, i, role);
        if (values.size() == 1) values.assign(size_t(normalized), values[0]);
        if (int64_t(values.size()) != normalized)
            node.fail(role + " holds " + std::to_string(values.size()) +
                      " values; the normalized axes have " + std::to_string(normalized));
        std::vector<float> floats(values.begin(), values.end());
        Halide::Buffer<float> b(int(floats.size()));
        std::copy(floats.begin(), floats.end(), b.data());
        attrs.set(role, Halide::Buffer<>(b));
    }
    Layers outputs;
    if (several_axes) {
        const dsl::Layer y =
            node.build("layer_norm", node.unique_name(node.name() + ".normalized"), {rows}, attrs);
        outputs.push_back(reshaped(y, node.name(), shape));
    } else {
        outputs.push_back(node.build("layer_norm", {rows}, attrs));
    }
    bool wants_statistics = false;
    for (int i = 1; i < node.node().output_size(); ++i)
        wants_statistics = wants_statistics || !node.node().output(i).empty();
    if (!wants_statistics) return outputs;
    const dsl::Layer stats = node.build(
        "layer_norm_stats", node.unique_name(node.name() + ".statistics"), {rows}, stats_attrs);
    std::vector<int64_t> stats_shape = shape;
    std::fill(stats_shape.begin() + axis, stats_shape.end(), 1);
    const char *suffixes[] = {".mean", ".inv_std_dev"};
    for (int i = 0; i < 2; ++i) {
        // Named as ONNX names the output, or after the node when the output is absent.
        const bool named = i + 1 < node.node().output_size() && !node.node().output(i + 1).empty();
        const std::string name = named ? node.node().output(i + 1) : node.name() + suffixes[i];
        if (several_axes)
            outputs.push_back(
                reshaped(dsl::LayerRegistry::output_of(node.unique_name(name + ".rows"), stats, i),
                         name, stats_shape));
        else
            outputs.push_back(dsl::LayerRegistry::output_of(node.unique_name(name), stats, i));
    }
    return outputs;
}

Layers import_erf(NodeImport &node) {
    return {node.build("erf", {node.input(0)}, {})};
}

// MatMul of two computed tensors: the lower rank gets leading unit dimensions (numpy's
// broadcasting), then batch_matmul.
Layers import_batch_matmul(NodeImport &node) {
    std::vector<dsl::Layer> operands = {node.input(0), node.input(1)};
    for (size_t i = 0; i < 2; ++i) {
        if (dsl::is_constant(operands[i]))
            node.fail("input " + std::to_string(i) +
                      " is a constant; a product with constant weights takes a rank-2 input 0 "
                      "and rank-2 weights as input 1");
        if (operands[i].output().shape.rank() < 2)
            node.fail("input " + std::to_string(i) +
                      " has rank 1; 1-D products are not "
                      "supported");
    }
    const int rank = std::max(operands[0].output().shape.rank(), operands[1].output().shape.rank());
    for (size_t i = 0; i < 2; ++i) {
        const int missing = rank - operands[i].output().shape.rank();
        if (missing <= 0) continue;
        std::vector<int64_t> axes;
        for (int a = 0; a < missing; ++a) axes.push_back(a);
        dsl::Attrs attrs;
        attrs.set("axes", axes);
        operands[i] = node.build("unsqueeze",
                                 node.unique_name(node.name() + (i == 0 ? ".a_rank" : ".b_rank")),
                                 {operands[i]}, attrs);
    }
    return {node.build("batch_matmul", operands, {})};
}

namespace {

// `shape` as a reshape's attributes.
dsl::Attrs reshape_to(const std::vector<int64_t> &shape) {
    dsl::Attrs attrs;
    attrs.set("shape", shape);
    attrs.set("allowzero", int64_t(0));
    return attrs;
}

// The linear layer of `a` [1, ..., M, K] on the DPU: its bytes, rows of K features, are the
// matmul's input (1, K, 1, M) stored NHWC (features along C, rows along W), and the matmul's
// output (1, N, 1, M) NHWC is [1, ..., M, N] row-major. So a reshape and a transpose that keep
// the bytes where they are (views) lead there and back.
dsl::Layer linear_on_dpu(NodeImport &node, const dsl::Layer &a, const dsl::Attrs &weights) {
    const std::vector<int64_t> &shape = a.output().logical_shape().raw();
    int64_t rows = 1;
    for (size_t d = 1; d + 1 < shape.size(); ++d) rows *= shape[d];
    const int64_t k = shape.back();
    const dsl::Layer as_rows = node.build("reshape", node.unique_name(node.name() + ".rows"), {a},
                                          reshape_to({1, rows, 1, k}));
    // Rows and features swapped, stored in `order`: NHWC keeps the rows' bytes as the matmul's
    // input, NCHW its output's as rows again.
    auto swapped = [&](const std::string &suffix, const dsl::Layer &in, const char *order) {
        dsl::Attrs attrs;
        attrs.set("perm", std::vector<int64_t>{0, 3, 2, 1});
        attrs.set("order", std::string(order));
        return node.build("transpose", node.unique_name(node.name() + suffix), {in}, attrs);
    };
    const dsl::Layer product = node.build("matmul", node.unique_name(node.name() + ".matmul"),
                                          {swapped(".features", as_rows, "NHWC")}, weights);
    const dsl::Layer out_rows = swapped(".out_rows", product, "NCHW");
    std::vector<int64_t> out_shape = shape;
    out_shape.back() = product.output().shape[dsl::dims::C];
    return node.build("reshape", node.name(), {out_rows}, reshape_to(out_shape));
}

} // namespace

// MatMul of [..., M, K] (rank 3 to 5) by constant weights [K, N], the weights in fp16 as the
// DPU's matmul takes them, of dims (k, n): the DPU's matmul for an fp16 input with one image
// (linear_on_dpu), else linear on the SHAVEs.
Layers import_linear(NodeImport &node) {
    const dsl::Layer &a = node.input(0);
    if (dsl::is_constant(a)) node.fail("input 0 must not be a constant");
    const std::string what = node.node().input(1);
    const dsl::ConstValues b = dsl::const_values(node.constant_input(1, "weights"), what);
    if (b.shape.size() != 2)
        node.fail("constant weights must have rank 2, not " + std::to_string(b.shape.size()));
    const int64_t k = b.shape[0], n = b.shape[1];
    // Logical (n, k): Halide dims (k, n), from ONNX's row-major [K, N].
    dsl::ConstValues weights =
        dsl::pick_elements(b, {n, k}, [&](const auto &i) { return i[1] * n + i[0]; });
    if (!weights.is_float()) weights.reals.assign(weights.ints.begin(), weights.ints.end());
    weights.type = dsl::ElemType::F16;
    dsl::Attrs attrs;
    attrs.set("weights", dsl::const_buffer(weights));
    const dsl::Shape &shape = a.output().logical_shape();
    if (a.output().type == dsl::ElemType::F16 && shape.rank() >= 3 && shape[dsl::Dim(0)] == 1 &&
        shape[dsl::Dim(shape.rank() - 1)] == k)
        return {linear_on_dpu(node, a, attrs)};
    return {node.build("linear", {a}, attrs)};
}

// Add, Sub, Mul, Div, Max or Min (`op`) with one constant operand, kept in float32 (an integer
// one of integers as it is): the kernel computes in float32 and rounds once, to the output's type
// (integers exactly); a constant varying along axis 0 on a leading unit dimension. Div also takes a
// divisor that is a graph input of a known value (ImportOptions::known_inputs).
Layers import_constant_eltwise(NodeImport &node, const std::string &op) {
    if (node.input_count() != 2) node.fail("takes exactly 2 inputs here");
    const bool known_divisor = op == "div" && node.input(1).is_input() &&
                               node.options().known_inputs.count(node.input(1).name()) > 0;
    const bool constant_first = dsl::is_constant(node.input(0));
    if (constant_first == (dsl::is_constant(node.input(1)) || known_divisor))
        node.fail("needs one computed and one constant operand");
    const size_t constant_at = constant_first ? 0 : 1;
    dsl::ConstValues value = dsl::const_values(node.constant_input(constant_at, "operand"),
                                               node.node().input(int(constant_at)));
    const dsl::Layer &x = node.input(constant_first ? 1 : 0);
    const dsl::ElemType type = x.output().type;
    // An integer constant of an integer x (ONNX's int64 held as i32) stays as it is: the layer
    // computes exactly in i32, refusing a value outside it.
    const bool integers =
        type != dsl::ElemType::F16 && type != dsl::ElemType::F32 && x.output().quant.empty();
    if (!integers || value.is_float()) {
        if (!value.is_float()) value.reals.assign(value.ints.begin(), value.ints.end());
        value.type = dsl::ElemType::F32;
    }
    dsl::Attrs attrs;
    attrs.set("op", op);
    attrs.set("constant", dsl::const_buffer(value));
    attrs.set("constant_first", int64_t(constant_first ? 1 : 0));
    // A constant varying along axis 0 differs from image to image: on a leading unit dimension
    // of x it varies along axis 1 (the constant broadcasts to it as it is).
    if (along_batch(x, 0) && value.shape.size() == size_t(x.output().shape.rank()) &&
        value.shape[0] != 1)
        return {along_unit_batch(node, "constant_eltwise", node.name(), {x}, attrs)};
    return {node.build("constant_eltwise", {x}, attrs)};
}

} // namespace vpuc::frontend::detail
