// Each ONNX op the importer knows, as the layer-registry layers it becomes (opset 13 to 17
// semantics: older models are upgraded first). Float weights take the precision's type (fp16)
// here; shape arithmetic on constants folds as the registry builds it.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <optional>
#include <stdexcept>
#include <utility>

#include "algorithms/registry.h"
#include "dsl/constant_values.h"
#include "onnx_internal.h"

namespace vpuc::frontend::detail {

namespace {

using Layers = std::vector<dsl::Layer>;

// The values of `value` in type `type` (floats rounded to nearest even).
Halide::Buffer<> converted(const Halide::Buffer<> &value, dsl::ElemType type,
                           const std::string &what) {
    dsl::ConstValues v = dsl::const_values(value, what);
    if (v.is_float() &&
        !(type == dsl::ElemType::F16 || type == dsl::ElemType::F32 || type == dsl::ElemType::F64))
        throw ModelError(what + ": float values where integers are needed");
    if (!v.is_float() &&
        (type == dsl::ElemType::F16 || type == dsl::ElemType::F32 || type == dsl::ElemType::F64))
        v.reals.assign(v.ints.begin(), v.ints.end());
    v.type = type;
    return dsl::const_buffer(v);
}

dsl::ElemType float_type(const NodeImport &node) {
    switch (node.options().precision) {
    case Precision::FP16:
        return dsl::ElemType::F16;
    case Precision::INT8:
        node.fail("calibration is not supported yet; give a pre-quantized (QDQ) model");
    }
    return dsl::ElemType::F16;
}

const dsl::Shape &shape_of(const dsl::Layer &layer) {
    return layer.output().shape;
}

} // namespace

namespace {

// The spatial dimensions of a conv's or pool's input: 1 (N, C, W) or 2 (N, C, H, W) for the
// DPU's layers; the float ones of rank 5 are conv3d and the 3-D pools (SHAVE), before this.
int window_dims(const NodeImport &node, const dsl::Layer &x) {
    const int rank = shape_of(x).rank();
    if (rank == 3 || rank == 4) return rank - 2;
    if (rank == 5)
        node.fail("a 3-D window (an input of rank 5) of int8 tensors is not supported; 3-D "
                  "windows compute in float on the SHAVEs");
    node.fail("the input has rank " + std::to_string(rank) +
              "; a window slides over the axes after N and C of an input of rank 3 to 5");
}

// The spatial dimensions of an input of rank 3 to 5, for the SHAVEs' windows of any rank.
int spatial_dims(const NodeImport &node, const dsl::Layer &x) {
    const int rank = shape_of(x).rank();
    if (rank < 3 || rank > 5)
        node.fail("the input has rank " + std::to_string(rank) +
                  "; a window slides over the axes after N and C of an input of rank 3 to 5");
    return rank - 2;
}

// An attribute of one entry per spatial dimension (`dims` of them), in ONNX's order.
std::vector<int64_t> spatial_attr(NodeImport &node, const std::string &name, int dims,
                                  std::vector<int64_t> default_value) {
    std::vector<int64_t> v = node.attr_ints(name, std::move(default_value));
    if (int(v.size()) != dims)
        node.fail(name + " must have " + std::to_string(dims) + " entries (a " +
                  std::to_string(dims) + "-D window)");
    return v;
}

// ONNX's pads [begin..., end...] over the spatial dimensions of `input`, from `pads` or the
// node's auto_pad; `kernel`, `strides` and `dilations` one per spatial dimension.
std::vector<int64_t> onnx_pads(NodeImport &node, const dsl::Shape &input,
                               const std::vector<int64_t> &kernel,
                               const std::vector<int64_t> &strides,
                               const std::vector<int64_t> &dilations) {
    const size_t dims = size_t(input.rank() - 2);
    const std::string auto_pad = node.attr_string("auto_pad", "NOTSET");
    std::vector<int64_t> pads =
        spatial_attr(node, "pads", int(2 * dims), std::vector<int64_t>(2 * dims, 0));
    if (auto_pad == "NOTSET") return pads;
    if (node.has_attr("pads")) node.fail("auto_pad " + auto_pad + " together with pads");
    if (auto_pad == "VALID") return std::vector<int64_t>(2 * dims, 0);
    if (auto_pad != "SAME_UPPER" && auto_pad != "SAME_LOWER")
        node.fail("auto_pad '" + auto_pad +
                  "' is not one of NOTSET, VALID, SAME_UPPER, SAME_LOWER");
    for (size_t d = 0; d < dims; ++d) {
        const int64_t in = input[dsl::Dim(int(d) + 2)];
        const int64_t out = (in + strides[d] - 1) / strides[d];
        const int64_t span = (kernel[d] - 1) * dilations[d] + 1;
        const int64_t total = std::max<int64_t>(0, (out - 1) * strides[d] + span - in);
        const int64_t small = total / 2, large = total - small;
        pads[d] = auto_pad == "SAME_UPPER" ? small : large;
        pads[d + dims] = auto_pad == "SAME_UPPER" ? large : small;
    }
    return pads;
}

} // namespace

// ONNX pads [begin..., end...] over the spatial dimensions as the registry's [top, left, bottom,
// right], from `pads` or the node's auto_pad; `kernel`, `strides` and `dilations` as (H, W).
std::vector<int64_t> window_pads(NodeImport &node, const dsl::Shape &input,
                                 const std::vector<int64_t> &kernel,
                                 const std::vector<int64_t> &strides,
                                 const std::vector<int64_t> &dilations) {
    if (input.rank() == 4) return onnx_pads(node, input, kernel, strides, dilations);
    // A 1-D window: W only, 1 high.
    const std::vector<int64_t> w =
        onnx_pads(node, input, {kernel[1]}, {strides[1]}, {dilations[1]});
    return {0, w[0], 0, w[1]};
}

// An attribute of one entry per spatial dimension (`dims` of them), as (H, W): a 1-D window is
// 1 high.
std::vector<int64_t> pair_attr(NodeImport &node, const std::string &name, int dims,
                               std::vector<int64_t> default_value) {
    std::vector<int64_t> v = spatial_attr(node, name, dims, std::move(default_value));
    if (dims == 1) v.insert(v.begin(), 1);
    return v;
}

dsl::Attrs conv_geometry(NodeImport &node, const dsl::Layer &x, const dsl::ConstValues &w,
                         bool &depthwise) {
    const int dims = window_dims(node, x);
    if (int(w.shape.size()) != dims + 2)
        node.fail("the weights must have rank " + std::to_string(dims + 2) + ", as the input");
    const int64_t oc = w.shape[0], icg = w.shape[1];
    const int64_t kh = dims == 2 ? w.shape[2] : 1, kw = w.shape.back();
    const int64_t groups = node.attr_int("group", 1);
    const int64_t channels = x.output().shape[dsl::dims::C];
    if (groups < 1 || channels != icg * groups || oc % groups != 0)
        node.fail("weights of " + std::to_string(icg) + " input channels per group x " +
                  std::to_string(groups) + " groups do not fit an input of " +
                  std::to_string(channels) + " channels and " + std::to_string(oc) + " outputs");
    const std::vector<int64_t> kernel = pair_attr(
        node, "kernel_shape", dims, std::vector<int64_t>(w.shape.begin() + 2, w.shape.end()));
    if (kernel != std::vector<int64_t>{kh, kw}) node.fail("kernel_shape differs from the weights");
    const std::vector<int64_t> ones(size_t(dims), 1);
    const std::vector<int64_t> strides = pair_attr(node, "strides", dims, ones);
    const std::vector<int64_t> dilations = pair_attr(node, "dilations", dims, ones);
    depthwise = groups > 1 && groups == channels && oc == channels;
    dsl::Attrs attrs;
    attrs.set("strides", strides);
    attrs.set("dilations", dilations);
    attrs.set("pads", window_pads(node, x.output().shape, kernel, strides, dilations));
    if (!depthwise) attrs.set("groups", groups);
    return attrs;
}

dsl::ConstValues conv_layout(const dsl::ConstValues &w) {
    const int64_t oc = w.shape[0], icg = w.shape[1];
    const int64_t kh = w.shape.size() == 4 ? w.shape[2] : 1, kw = w.shape.back();
    dsl::ConstValues out{w.type, {oc, kh, kw, icg}, {}, {}};
    // Loops of their own rather than pick_elements' call per element: a network's weights
    // are tens of millions of values.
    const auto reorder = [&](const auto &from, auto &to) {
        if (int64_t(from.size()) != out.elements())
            throw std::logic_error("conv_layout: the weights do not hold their shape's values");
        to.resize(from.size());
        size_t at = 0;
        for (int64_t o = 0; o < oc; ++o)
            for (int64_t y = 0; y < kh; ++y)
                for (int64_t x = 0; x < kw; ++x)
                    for (int64_t c = 0; c < icg; ++c)
                        to[at++] = from[size_t(((o * icg + c) * kh + y) * kw + x)];
    };
    if (w.is_float())
        reorder(w.reals, out.reals);
    else
        reorder(w.ints, out.ints);
    return out;
}

namespace {

void require_rank(const NodeImport &node, const dsl::Layer &in, int rank, const char *what) {
    if (shape_of(in).rank() != rank)
        node.fail(std::string(what) + " must have rank " + std::to_string(rank) + ", not " +
                  std::to_string(shape_of(in).rank()));
}

// A convolution's constant bias (input 2) of `count` values, f32, into `attrs`.
void set_conv_bias(NodeImport &node, int64_t count, dsl::Attrs &attrs) {
    if (!node.has_input(2)) return;
    const Halide::Buffer<> &bias = node.constant_input(2, "bias");
    if (bias.dimensions() != 1 || bias.dim(0).extent() != count)
        node.fail("the bias must have " + std::to_string(count) + " values");
    attrs.set("bias", converted(bias, dsl::ElemType::F32, node.node().input(2)));
}

// The weights of a conv3d or conv_transpose: ONNX's own layout, of the input's rank, whose
// kernel_shape (if given) they must have.
dsl::ConstValues window_weights(NodeImport &node, int dims) {
    const dsl::ConstValues w =
        dsl::const_values(node.constant_input(1, "weights"), node.node().input(1));
    if (int(w.shape.size()) != dims + 2)
        node.fail("the weights must have rank " + std::to_string(dims + 2) + ", as the input");
    const std::vector<int64_t> kernel(w.shape.begin() + 2, w.shape.end());
    if (spatial_attr(node, "kernel_shape", dims, kernel) != kernel)
        node.fail("kernel_shape differs from the weights");
    return w;
}

// A Conv over an input of rank 5: conv3d (SHAVE), the weights in ONNX's layout.
Layers conv3d(NodeImport &node) {
    const dsl::Layer &x = node.input(0);
    const dsl::ConstValues w = window_weights(node, 3);
    const int64_t oc = w.shape[0], icg = w.shape[1];
    const int64_t groups = node.attr_int("group", 1);
    const int64_t channels = shape_of(x)[dsl::dims::C];
    if (groups < 1 || channels != icg * groups || oc % groups != 0)
        node.fail("weights of " + std::to_string(icg) + " input channels per group x " +
                  std::to_string(groups) + " groups do not fit an input of " +
                  std::to_string(channels) + " channels and " + std::to_string(oc) + " outputs");
    const std::vector<int64_t> kernel(w.shape.begin() + 2, w.shape.end());
    const std::vector<int64_t> strides = spatial_attr(node, "strides", 3, {1, 1, 1});
    const std::vector<int64_t> dilations = spatial_attr(node, "dilations", 3, {1, 1, 1});
    dsl::Attrs attrs;
    attrs.set("weights", converted(dsl::const_buffer(w), float_type(node), node.node().input(1)));
    set_conv_bias(node, oc, attrs);
    attrs.set("strides", strides);
    attrs.set("dilations", dilations);
    attrs.set("pads", onnx_pads(node, shape_of(x), kernel, strides, dilations));
    attrs.set("groups", groups);
    return {node.build("conv3d", {x}, attrs)};
}

// The weights and bias of a convolution as the registry takes them: weights of dims
// (ic / groups, kw, kh, oc) in the float type, bias f32.
Layers conv(NodeImport &node) {
    const dsl::Layer &x = node.input(0);
    if (shape_of(x).rank() == 5) return conv3d(node);
    const std::string what = node.node().input(1);
    const dsl::ConstValues w = dsl::const_values(node.constant_input(1, "weights"), what);
    bool depthwise = false;
    dsl::Attrs attrs = conv_geometry(node, x, w, depthwise);
    attrs.set("weights", converted(dsl::const_buffer(conv_layout(w)), float_type(node), what));
    set_conv_bias(node, w.shape[0], attrs);
    return {node.build(depthwise ? "depthwise_conv2d" : "conv2d", {x}, attrs)};
}

// ConvTranspose over an input of rank 3 to 5: conv_transpose (SHAVE). Its pads come from
// `pads`, or from output_shape or auto_pad SAME_* (an output of in * stride): the total padding
// `natural - wanted` split as ONNX does, the odd one at the end for SAME_UPPER and at the
// beginning otherwise; an output larger than the natural one ends in output padding.
Layers conv_transpose(NodeImport &node) {
    const dsl::Layer &x = node.input(0);
    const int dims = spatial_dims(node, x);
    const dsl::ConstValues w = window_weights(node, dims);
    const int64_t ic = w.shape[0], ocg = w.shape[1];
    const int64_t groups = node.attr_int("group", 1);
    const int64_t channels = shape_of(x)[dsl::dims::C];
    if (groups < 1 || channels != ic || ic % groups != 0)
        node.fail("weights for " + std::to_string(ic) + " input channels in " +
                  std::to_string(groups) + " groups do not fit an input of " +
                  std::to_string(channels) + " channels");
    const std::vector<int64_t> kernel(w.shape.begin() + 2, w.shape.end());
    const std::vector<int64_t> ones(size_t(dims), 1), zeros(size_t(dims), 0);
    const std::vector<int64_t> strides = spatial_attr(node, "strides", dims, ones);
    const std::vector<int64_t> dilations = spatial_attr(node, "dilations", dims, ones);
    std::vector<int64_t> extra = spatial_attr(node, "output_padding", dims, zeros);
    const std::string auto_pad = node.attr_string("auto_pad", "NOTSET");
    if (auto_pad != "NOTSET" && auto_pad != "VALID" && auto_pad != "SAME_UPPER" &&
        auto_pad != "SAME_LOWER")
        node.fail("auto_pad '" + auto_pad +
                  "' is not one of NOTSET, VALID, SAME_UPPER, SAME_LOWER");
    std::vector<int64_t> wanted = node.attr_ints("output_shape", {});
    // A full output shape [N, C, spatial...] names the spatial extents last.
    if (wanted.size() == size_t(dims + 2)) wanted.erase(wanted.begin(), wanted.begin() + 2);
    if (!wanted.empty() && wanted.size() != size_t(dims))
        node.fail("output_shape must have " + std::to_string(dims) + " entries (a " +
                  std::to_string(dims) + "-D window)");
    const bool same = auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER";
    std::vector<int64_t> pads =
        spatial_attr(node, "pads", 2 * dims, std::vector<int64_t>(size_t(2 * dims), 0));
    if (auto_pad != "NOTSET" && node.has_attr("pads"))
        node.fail("auto_pad " + auto_pad + " together with pads");
    if (!wanted.empty() || same) {
        if (!wanted.empty() && node.has_attr("pads")) node.fail("output_shape together with pads");
        for (size_t d = 0; d < size_t(dims); ++d) {
            const int64_t in = shape_of(x)[dsl::Dim(int(d) + 2)];
            const int64_t natural =
                strides[d] * (in - 1) + extra[d] + (kernel[d] - 1) * dilations[d] + 1;
            const int64_t total = natural - (wanted.empty() ? in * strides[d] : wanted[d]);
            // A larger output than the natural one ends in more output padding.
            if (total < 0) extra[d] -= total;
            const int64_t padding = std::max<int64_t>(0, total);
            const int64_t begin = auto_pad == "SAME_UPPER" ? padding / 2 : padding - padding / 2;
            const int64_t end = padding - begin;
            pads[d] = begin;
            pads[d + size_t(dims)] = end;
        }
    } else if (auto_pad == "VALID") {
        pads.assign(size_t(2 * dims), 0);
    }
    dsl::Attrs attrs;
    attrs.set("weights", converted(dsl::const_buffer(w), float_type(node), node.node().input(1)));
    set_conv_bias(node, ocg * groups, attrs);
    attrs.set("strides", strides);
    attrs.set("dilations", dilations);
    attrs.set("pads", pads);
    attrs.set("output_padding", extra);
    attrs.set("groups", groups);
    return {node.build("conv_transpose", {x}, attrs)};
}

// Numpy broadcasting across ranks: the input of lower rank gets leading unit dimensions.
dsl::Layer with_rank(NodeImport &node, const dsl::Layer &in, int rank, const std::string &which) {
    const int missing = rank - shape_of(in).rank();
    if (missing <= 0) return in;
    std::vector<int64_t> axes;
    for (int i = 0; i < missing; ++i) axes.push_back(i);
    dsl::Attrs attrs;
    attrs.set("axes", axes);
    return node.build("unsqueeze", node.unique_name(node.name() + "." + which + "_rank"), {in},
                      attrs);
}

// Layer `op` of computed tensors (or of constants, folded) broadcast as numpy broadcasts,
// named `layer_name`.
dsl::Layer broadcasting(NodeImport &node, const std::string &op, const std::string &layer_name,
                        const Layers &inputs, const dsl::Attrs &attrs = {}) {
    int rank = 0;
    for (const dsl::Layer &in : inputs) rank = std::max(rank, shape_of(in).rank());
    Layers ranked;
    for (size_t i = 0; i < inputs.size(); ++i)
        ranked.push_back(with_rank(node, inputs[i], rank,
                                   inputs.size() == 2 ? std::string(i ? "b" : "a")
                                                      : "input" + std::to_string(i)));
    return node.build(op, layer_name, ranked, attrs);
}

dsl::Layer binary(NodeImport &node, const std::string &op, const std::string &layer_name,
                  const dsl::Layer &a, const dsl::Layer &b) {
    return broadcasting(node, op, layer_name, {a, b});
}

// Gemm and MatMul of an activation [M, K] by constant weights [K, N] (or [N, K] transposed),
// plus a bias C: the registry's matmul, weights of dims (k, n). A constant C of one value or
// one per column becomes the matmul's bias; any other C (one per row, a full [M, N], or a
// computed one) is added after it (a constant one, varying along the rows, the batch, on a
// leading unit dimension).
Layers fully_connected(NodeImport &node, const dsl::Layer &a, bool trans_b, float alpha,
                       float beta) {
    if (dsl::is_constant(a)) node.fail("input 0 must not be a constant");
    require_rank(node, a, 2, "input 0 (rows of features)");
    const std::string what = node.node().input(1);
    const dsl::ConstValues b = dsl::const_values(node.constant_input(1, "weights"), what);
    if (b.shape.size() != 2) node.fail("the weights must have rank 2");
    const int64_t m = shape_of(a)[dsl::Dim(0)];
    const int64_t k = trans_b ? b.shape[1] : b.shape[0], n = trans_b ? b.shape[0] : b.shape[1];
    if (shape_of(a)[dsl::Dim(1)] != k)
        node.fail("rows of " + std::to_string(shape_of(a)[dsl::Dim(1)]) +
                  " features times weights of " + std::to_string(k));
    // Logical (n, k): Halide dims (k, n).
    dsl::ConstValues weights = dsl::pick_elements(
        b, {n, k}, [&](const auto &i) { return trans_b ? i[0] * k + i[1] : i[1] * n + i[0]; });
    for (double &v : weights.reals) v *= alpha;
    dsl::Attrs attrs;
    attrs.set("weights", converted(dsl::const_buffer(weights), float_type(node), what));
    if (!node.has_input(2)) {
        if (beta != 1.0f) node.fail("beta without a bias");
        return {node.build("matmul", {a}, attrs)};
    }
    // C broadcasts to [M, N] as numpy broadcasts.
    const std::vector<int64_t> &c_shape = shape_of(node.input(2)).raw();
    const int64_t rows = c_shape.size() == 2 ? c_shape[0] : 1;
    const int64_t columns = c_shape.empty() ? 1 : c_shape.back();
    if (c_shape.size() > 2 || (rows != 1 && rows != m) || (columns != 1 && columns != n))
        node.fail("the bias C " + dsl::to_string(shape_of(node.input(2))) +
                  " does not broadcast to the output [" + std::to_string(m) + ", " +
                  std::to_string(n) + "]");
    const dsl::Layer &c_in = node.input(2);
    const bool known = c_in.is_input() && node.options().known_inputs.count(c_in.name()) > 0;
    if (rows == 1 && (dsl::is_constant(c_in) || known)) {
        dsl::ConstValues c =
            dsl::const_values(node.constant_input(2, "bias"), node.node().input(2));
        dsl::ConstValues bias =
            dsl::pick_elements(c, {n}, [&](const auto &i) { return columns == 1 ? 0 : i[0]; });
        if (!bias.is_float()) bias.reals.assign(bias.ints.begin(), bias.ints.end());
        for (double &v : bias.reals) v *= beta;
        bias.type = dsl::ElemType::F32;
        attrs.set("bias", dsl::const_buffer(bias));
        return {node.build("matmul", {a}, attrs)};
    }
    const dsl::Layer product =
        node.build("matmul", node.unique_name(node.name() + ".matmul"), {a}, attrs);
    if (dsl::is_constant(c_in)) {
        dsl::ConstValues c = dsl::const_values(c_in);
        if (!c.is_float()) c.reals.assign(c.ints.begin(), c.ints.end());
        for (double &v : c.reals) v *= beta;
        c.type = dsl::ElemType::F32;
        dsl::Attrs add;
        add.set("op", std::string("add"));
        add.set("constant", dsl::const_buffer(c));
        // Its rows are M > 1 (one row folded into the bias): it varies along axis 0.
        return {along_unit_batch(node, "constant_eltwise", node.name(), {product}, add)};
    }
    dsl::Layer bias = c_in;
    if (beta != 1.0f) {
        dsl::Attrs scale;
        scale.set("op", std::string("mul"));
        scale.set("constant", dsl::const_buffer({dsl::ElemType::F32, {}, {}, {double(beta)}}));
        bias =
            node.build("constant_eltwise", node.unique_name(node.name() + ".beta"), {c_in}, scale);
    }
    return {binary(node, "add", node.name(), product, bias)};
}

// With transA, A [K, M] is transposed to [M, K] first: a transpose moving axis 0, the rows
// (images) of A, so on a leading unit dimension.
Layers gemm(NodeImport &node) {
    dsl::Layer a = node.input(0);
    if (node.attr_int("transA", 0) != 0) {
        require_rank(node, a, 2, "input 0 (A, [K, M] transposed)");
        dsl::Attrs attrs;
        attrs.set("perm", std::vector<int64_t>{0, 2, 1});
        a = along_unit_batch(node, "transpose", node.unique_name(node.name() + ".a_transposed"),
                             {a}, attrs);
    }
    const bool trans_b = node.attr_int("transB", 0) != 0;
    const float alpha = node.attr_float("alpha", 1.0f), beta = node.attr_float("beta", 1.0f);
    return fully_connected(node, a, trans_b, alpha, beta);
}

// Constant (or known) rank-2 weights make a fully connected layer, or a linear one for an input
// of higher rank; anything else is a product of two computed tensors.
Layers matmul(NodeImport &node) {
    const dsl::Layer &b = node.input(1);
    const bool known = b.is_input() && node.options().known_inputs.count(b.name()) > 0;
    const bool rank2 = shape_of(node.input(0)).rank() == 2 && shape_of(node.input(1)).rank() == 2;
    if ((dsl::is_constant(b) || known) && rank2)
        return fully_connected(node, node.input(0), false, 1.0f, 1.0f);
    if (dsl::is_constant(b)) return import_linear(node);
    return import_batch_matmul(node);
}

// MaxPool with its Indices output: max_pool_indices (SHAVE, any rank 3 to 5), and a
// tuple_element per output.
Layers max_pool_with_indices(NodeImport &node) {
    const dsl::Layer &x = node.input(0);
    const int dims = spatial_dims(node, x);
    const std::vector<int64_t> ones(size_t(dims), 1);
    const std::vector<int64_t> kernel = spatial_attr(node, "kernel_shape", dims, {});
    const std::vector<int64_t> strides = spatial_attr(node, "strides", dims, ones);
    const std::vector<int64_t> dilations = spatial_attr(node, "dilations", dims, ones);
    dsl::Attrs attrs;
    attrs.set("kernel_shape", kernel);
    attrs.set("strides", strides);
    attrs.set("dilations", dilations);
    attrs.set("pads", onnx_pads(node, shape_of(x), kernel, strides, dilations));
    attrs.set("ceil_mode", node.attr_int("ceil_mode", 0));
    attrs.set("storage_order", node.attr_int("storage_order", 0));
    const dsl::Layer both = node.build("max_pool_indices", {x}, attrs);
    return node.outputs_of(both);
}

// A pool over an input of rank 5: max_pool3d or avg_pool3d (SHAVE), ONNX's attributes as they
// are.
Layers pool3d(NodeImport &node, const std::string &op) {
    const dsl::Layer &x = node.input(0);
    const std::vector<int64_t> kernel = spatial_attr(node, "kernel_shape", 3, {});
    const std::vector<int64_t> strides = spatial_attr(node, "strides", 3, {1, 1, 1});
    const std::vector<int64_t> dilations = spatial_attr(node, "dilations", 3, {1, 1, 1});
    node.expect_int("storage_order", 0, "row-major only");
    dsl::Attrs attrs;
    attrs.set("kernel_shape", kernel);
    attrs.set("strides", strides);
    attrs.set("pads", onnx_pads(node, shape_of(x), kernel, strides, dilations));
    attrs.set("ceil_mode", node.attr_int("ceil_mode", 0));
    if (op == "max_pool") {
        attrs.set("dilations", dilations);
    } else {
        if (dilations != std::vector<int64_t>{1, 1, 1})
            node.fail("dilated average pooling is not supported");
        attrs.set("count_include_pad", node.attr_int("count_include_pad", 0));
    }
    return {node.build(op + "3d", {x}, attrs)};
}

Layers pool(NodeImport &node, const std::string &op) {
    const dsl::Layer &x = node.input(0);
    if (node.node().output_size() > 1 && !node.node().output(1).empty())
        return max_pool_with_indices(node);
    if (shape_of(x).rank() == 5) return pool3d(node, op);
    const int dims = window_dims(node, x);
    dsl::Attrs attrs;
    const std::vector<int64_t> ones(size_t(dims), 1);
    const std::vector<int64_t> kernel = pair_attr(node, "kernel_shape", dims, {});
    const std::vector<int64_t> strides = pair_attr(node, "strides", dims, ones);
    const std::vector<int64_t> dilations = pair_attr(node, "dilations", dims, ones);
    node.expect_int("storage_order", 0, "row-major only");
    attrs.set("kernel_shape", kernel);
    attrs.set("strides", strides);
    attrs.set("pads", window_pads(node, shape_of(x), kernel, strides, dilations));
    attrs.set("ceil_mode", node.attr_int("ceil_mode", 0));
    if (op == "max_pool") {
        attrs.set("dilations", dilations);
    } else {
        if (dilations != std::vector<int64_t>{1, 1})
            node.fail("dilated average pooling is not supported");
        attrs.set("count_include_pad", node.attr_int("count_include_pad", 0));
    }
    return {node.build(op, {x}, attrs)};
}

Layers eltwise(NodeImport &node, const std::string &op) {
    if (node.input_count() != 2) node.fail("takes exactly 2 inputs here");
    if (dsl::is_constant(node.input(0)) != dsl::is_constant(node.input(1)))
        return import_constant_eltwise(node, op);
    return {binary(node, op, node.name(), node.input(0), node.input(1))};
}

// An op of computed tensors with numpy broadcasting; of constants only, it folds.
Layers computed_elementwise(NodeImport &node, const std::string &op, const dsl::Attrs &attrs = {}) {
    Layers inputs;
    size_t constants = 0;
    for (size_t i = 0; i < node.input_count(); ++i) {
        inputs.push_back(node.input(i));
        constants += dsl::is_constant(inputs.back()) ? 1 : 0;
    }
    if (constants > 0 && constants < inputs.size())
        node.fail("has constant and computed inputs; it takes computed tensors only (or "
                  "constants only, folded)");
    return {broadcasting(node, op, node.name(), inputs, attrs)};
}

// Pow, PRelu and the comparisons: with one constant operand, constant_eltwise carries it.
Layers elementwise_or_constant(NodeImport &node, const std::string &op) {
    if (node.input_count() == 2 &&
        dsl::is_constant(node.input(0)) != dsl::is_constant(node.input(1)))
        return import_constant_eltwise(node, op);
    return computed_elementwise(node, op);
}

// Div by a constant (or a divisor of a known value) keeps the quotient in float32 until its one
// rounding (constant_eltwise); of two computed tensors, or two constants, the div layer.
Layers division(NodeImport &node) {
    if (node.input_count() != 2) node.fail("takes exactly 2 inputs here");
    // A divisor of a known value is a constant to a float dividend; integers divide exactly on
    // the device.
    const dsl::ElemType dividend = node.input(0).output().type;
    const bool known_divisor = node.input(1).is_input() &&
                               node.options().known_inputs.count(node.input(1).name()) > 0 &&
                               (dividend == dsl::ElemType::F16 || dividend == dsl::ElemType::F32);
    if (dsl::is_constant(node.input(0)) != (dsl::is_constant(node.input(1)) || known_divisor))
        return import_constant_eltwise(node, "div");
    return computed_elementwise(node, "div");
}

// Constant `values` as a tensor of the type the device holds (floats the precision's, INT64
// i32, BOOL u8), copied from the blob's constants into a computation beside computed tensors;
// `role` names it in the layer's name and in errors, `what` is its ONNX value's name.
dsl::Layer device_constant(NodeImport &node, const dsl::ConstValues &values,
                           const std::string &role, const std::string &what) {
    for (int64_t v : values.ints)
        if (v < std::numeric_limits<int32_t>::min() || v > std::numeric_limits<int32_t>::max())
            node.fail("the constant " + role + " holds " + std::to_string(v) +
                      ", outside i32, the device's integers");
    const dsl::ElemType device =
        values.is_float() ? float_type(node) : dsl::device_type(values.type);
    return dsl::LayerRegistry::constant(node.unique_name(node.name() + "." + role),
                                        converted(dsl::const_buffer(values), device, what));
}

// Where of computed tensors; a constant beside them (X or Y, a zero or a one of NLL's masks) is
// a device constant. All constant: folded.
Layers where(NodeImport &node) {
    if (node.input_count() != 3) node.fail("takes exactly 3 inputs");
    bool all_constant = true;
    for (size_t i = 0; i < 3; ++i) all_constant = all_constant && dsl::is_constant(node.input(i));
    if (all_constant) return computed_elementwise(node, "where");
    static const char *const roles[] = {"condition", "x", "y"};
    Layers inputs;
    for (size_t i = 0; i < 3; ++i) {
        const dsl::Layer &in = node.input(i);
        inputs.push_back(dsl::is_constant(in) ? device_constant(node, dsl::const_values(in),
                                                                roles[i], node.node().input(int(i)))
                                              : in);
    }
    return {broadcasting(node, "where", node.name(), inputs)};
}

// OneHot: along a new axis of `depth` positions, values[1] where the index equals the position
// and values[0] elsewhere. As ONNX says, float indices and depth are cast to integers first
// (towards zero), an index in [-depth, 0) counts from the end, and one outside [-depth, depth)
// gives values[0] along the whole axis. Depth and values are constants. Of computed indices: i32
// indices, an unsqueeze for the new axis, `equal` to the constant positions 0..depth-1 or to
// -depth..-1 (broadcast along the new axis), `or`, and `where` of the two values; of constant
// indices, folded.
Layers one_hot(NodeImport &node) {
    if (node.input_count() != 3) node.fail("takes exactly 3 inputs");
    const dsl::ConstValues depth_in =
        dsl::const_values(node.constant_input(1, "depth"), node.node().input(1));
    if (depth_in.elements() != 1) node.fail("depth must be one value");
    const double depth_real =
        depth_in.is_float() ? std::trunc(depth_in.reals[0]) : double(depth_in.ints[0]);
    constexpr double kMaxDepth = double(1 << 24);
    if (!(depth_real >= 1 && depth_real <= kMaxDepth))
        node.fail("depth " +
                  (depth_in.is_float() ? std::to_string(depth_in.reals[0])
                                       : std::to_string(depth_in.ints[0])) +
                  " is not in [1, 2^24]");
    const int64_t depth = int64_t(depth_real);
    const dsl::ConstValues values =
        dsl::const_values(node.constant_input(2, "values"), node.node().input(2));
    if (values.elements() != 2) node.fail("values must be two: [off, on]");

    const dsl::Layer &indices = node.input(0);
    const int64_t rank = shape_of(indices).rank();
    if (rank + 1 > dsl::kMaxRank)
        node.fail("indices of rank " + std::to_string(rank) + ": the result's rank " +
                  std::to_string(rank + 1) + " is above " + std::to_string(dsl::kMaxRank));
    int64_t axis = node.attr_int("axis", -1);
    if (axis < -(rank + 1) || axis > rank)
        node.fail("axis " + std::to_string(axis) + " is outside the result's rank " +
                  std::to_string(rank + 1));
    if (axis < 0) axis += rank + 1;
    std::vector<int64_t> out_shape = shape_of(indices).raw();
    out_shape.insert(out_shape.begin() + axis, depth);
    double out_elements = 1;
    for (int64_t e : out_shape) out_elements *= double(e);
    if (out_elements > kMaxDepth)
        node.fail("a result of " + std::to_string(int64_t(out_elements)) +
                  " elements, more than 2^24");

    if (dsl::is_constant(indices)) {
        const dsl::ConstValues index = dsl::const_values(indices);
        const dsl::ConstValues result =
            dsl::pick_elements(values, out_shape, [&](const std::vector<int64_t> &i) -> int64_t {
                int64_t flat = 0; // i without the new axis, row-major in the indices
                for (size_t d = 0; d < i.size(); ++d)
                    if (int64_t(d) != axis) flat = flat * out_shape[d] + i[d];
                const double k = index.is_float() ? std::trunc(index.reals[size_t(flat)])
                                                  : double(index.ints[size_t(flat)]);
                const double wrapped = k < 0 ? k + double(depth) : k;
                return wrapped == double(i[size_t(axis)]) ? 1 : 0;
            });
        return {dsl::LayerRegistry::constant(node.name(), dsl::const_buffer(result))};
    }

    dsl::Layer as_int = indices;
    if (indices.output().type != dsl::ElemType::I32) {
        dsl::Attrs to;
        to.set("to", std::string(dsl::to_string(dsl::ElemType::I32)));
        as_int = node.build("cast", node.unique_name(node.name() + ".indices"), {indices}, to);
    }
    dsl::Attrs new_axis;
    new_axis.set("axes", std::vector<int64_t>{axis});
    const dsl::Layer along =
        node.build("unsqueeze", node.unique_name(node.name() + ".along"), {as_int}, new_axis);
    auto positions = [&](int64_t first, const std::string &role) {
        dsl::ConstValues p{dsl::ElemType::I64, std::vector<int64_t>(size_t(rank + 1), 1), {}, {}};
        p.shape[size_t(axis)] = depth;
        for (int64_t k = 0; k < depth; ++k) p.ints.push_back(first + k);
        return device_constant(node, p, role, node.name() + " " + role);
    };
    const dsl::Layer hot =
        node.build("or", node.unique_name(node.name() + ".hot"),
                   {binary(node, "equal", node.unique_name(node.name() + ".from_start"), along,
                           positions(0, "positions")),
                    binary(node, "equal", node.unique_name(node.name() + ".from_end"), along,
                           positions(-depth, "positions_from_end"))},
                   {});
    auto value = [&](size_t i, const std::string &role) {
        return device_constant(
            node, dsl::pick_elements(values, {}, [i](const auto &) { return int64_t(i); }), role,
            node.node().input(2));
    };
    return {broadcasting(node, "where", node.name(), {hot, value(1, "on"), value(0, "off")})};
}

Layers mod(NodeImport &node) {
    dsl::Attrs attrs;
    attrs.set("fmod", node.attr_int("fmod", 0));
    return computed_elementwise(node, "mod", attrs);
}

// BitShift shifts at the width of the model's unsigned type (u16, u32 and u64 values are i32
// on the device).
Layers bit_shift(NodeImport &node) {
    dsl::Attrs attrs;
    attrs.set("direction", node.attr_string("direction", ""));
    switch (node.input_onnx_type(0)) {
    case onnx::TensorProto::UINT16:
        attrs.set("bits", int64_t(16));
        break;
    case onnx::TensorProto::UINT32:
        attrs.set("bits", int64_t(32));
        break;
    case onnx::TensorProto::UINT64:
        attrs.set("bits", int64_t(64));
        break;
    default:
        break; // u8
    }
    return computed_elementwise(node, "bit_shift", attrs);
}

// Max, Min or Sum (Mean's sum) of any number of inputs: a chain of two-input layers of
// computed tensors, the last named `last_name`; one input is the result itself, and two, named
// after the node, may hold a constant as eltwise takes it.
dsl::Layer chain(NodeImport &node, const std::string &op, const std::string &last_name) {
    const size_t count = node.input_count();
    if (count == 0) node.fail("takes at least 1 input");
    if (count == 2 && last_name == node.name()) return eltwise(node, op).at(0);
    for (size_t i = 0; i < count; ++i)
        if (dsl::is_constant(node.input(i)))
            node.fail("input " + std::to_string(i) +
                      " is a constant; a chain of more than two inputs (or a Mean) takes "
                      "computed tensors only");
    dsl::Layer result = node.input(0);
    for (size_t i = 1; i < count; ++i)
        result = binary(node, op,
                        i + 1 == count ? last_name
                                       : node.unique_name(node.name() + "." + std::to_string(i)),
                        result, node.input(i));
    return result;
}

Layers variadic_eltwise(NodeImport &node, const std::string &op) {
    return {chain(node, op, node.name())};
}

// Mean: the sum divided by the number of inputs (in float32, rounded once).
Layers mean(NodeImport &node) {
    if (node.input_count() == 1) return {node.input(0)};
    const dsl::Layer sum = chain(node, "add", node.unique_name(node.name() + ".sum"));
    dsl::Attrs attrs;
    attrs.set("op", std::string("div"));
    attrs.set("constant",
              dsl::const_buffer({dsl::ElemType::F32, {}, {}, {double(node.input_count())}}));
    return {node.build("constant_eltwise", {sum}, attrs)};
}

Layers unary(NodeImport &node, const std::string &op, dsl::Attrs attrs = {}) {
    return {node.build(op, {node.input(0)}, attrs)};
}

// The importer of a unary layer whose float attributes are named as ONNX's: the node's values,
// else ONNX's defaults.
OpImporter unary_layer(const std::string &op,
                       const std::vector<std::pair<std::string, float>> &defaults = {}) {
    return [=](NodeImport &node) {
        dsl::Attrs attrs;
        for (const auto &[name, value] : defaults)
            attrs.set(name, double(node.attr_float(name, value)));
        return unary(node, op, attrs);
    };
}

double scalar_input(NodeImport &node, size_t i, const std::string &role, double default_value) {
    if (!node.has_input(i)) return default_value;
    const dsl::ConstValues v =
        dsl::const_values(node.constant_input(i, role), node.node().input(int(i)));
    if (v.elements() != 1) node.fail(role + " must be one value");
    return v.is_float() ? v.reals[0] : double(v.ints[0]);
}

Layers clip(NodeImport &node) {
    const double inf = std::numeric_limits<double>::infinity();
    dsl::Attrs attrs;
    attrs.set("low", scalar_input(node, 1, "min", -inf));
    attrs.set("high", scalar_input(node, 2, "max", inf));
    return unary(node, "clamp", attrs);
}

} // namespace

bool along_batch(const dsl::Layer &x, int64_t axis) {
    const int64_t rank = shape_of(x).rank();
    return !dsl::is_constant(x) && rank >= 2 && (axis == 0 || axis == -rank);
}

dsl::Layer along_unit_batch(NodeImport &node, const std::string &op, const std::string &name,
                            const Layers &inputs, const dsl::Attrs &attrs) {
    dsl::Attrs unit;
    unit.set("axes", std::vector<int64_t>{0});
    Layers unbatched;
    for (const dsl::Layer &in : inputs)
        unbatched.push_back(node.build(
            "unsqueeze", node.unique_name(name + "." + in.name() + "_unbatched"), {in}, unit));
    const dsl::Layer inner =
        node.build(op, node.unique_name(name + ".unbatched"), unbatched, attrs);
    return node.build("squeeze", name, {inner}, unit);
}

namespace {

Layers concat(NodeImport &node) {
    Layers inputs;
    for (size_t i = 0; i < node.input_count(); ++i) inputs.push_back(node.input(i));
    const int64_t axis = node.attr_int("axis", 1);
    dsl::Attrs attrs;
    const bool batch = std::any_of(inputs.begin(), inputs.end(),
                                   [&](const dsl::Layer &in) { return along_batch(in, axis); });
    attrs.set("axis", batch ? int64_t(1) : axis);
    if (batch) return {along_unit_batch(node, "concat", node.name(), inputs, attrs)};
    return {node.build("concat", inputs, attrs)};
}

// Softmax, LogSoftmax and Hardmax: `op` along one axis (opset-13 semantics); LpNormalization's
// p, an attribute of the same name, among `int_attrs` (each with its default).
OpImporter along_axis(const std::string &op,
                      const std::vector<std::pair<std::string, int64_t>> &int_attrs = {}) {
    return [op, int_attrs](NodeImport &node) -> Layers {
        const int64_t axis = node.attr_int("axis", -1);
        dsl::Attrs attrs;
        for (const auto &[name, value] : int_attrs) attrs.set(name, node.attr_int(name, value));
        const bool batch = along_batch(node.input(0), axis);
        attrs.set("axis", batch ? int64_t(1) : axis);
        if (batch) return {along_unit_batch(node, op, node.name(), {node.input(0)}, attrs)};
        return unary(node, op, attrs);
    };
}

// `axes` of input 0 in [0, rank), each once; fails on one outside the rank.
std::vector<int64_t> normalized_axes(const NodeImport &node, std::vector<int64_t> axes) {
    const int64_t rank = shape_of(node.input(0)).rank();
    for (int64_t &axis : axes) {
        if (axis < -rank || axis >= rank)
            node.fail("axis " + std::to_string(axis) + " is outside the input's rank " +
                      std::to_string(rank));
        if (axis < 0) axis += rank;
    }
    std::sort(axes.begin(), axes.end());
    if (std::adjacent_find(axes.begin(), axes.end()) != axes.end())
        node.fail("an axis is given twice");
    return axes;
}

// Layer `name`, `op` reducing `x` along `along`, which `attrs` names as `axes_attr` ("axes", or
// "axis" for one), keeping the reduced axes with extent 1; along the batch (axis 0) on a leading
// unit dimension.
dsl::Layer reduce_along(NodeImport &node, const std::string &op, const dsl::Layer &x,
                        std::vector<int64_t> along, const std::string &axes_attr, dsl::Attrs attrs,
                        const std::string &name) {
    const bool batch = along_batch(x, along.front());
    if (batch)
        for (int64_t &axis : along) ++axis;
    if (axes_attr == "axis")
        attrs.set("axis", along.front());
    else
        attrs.set("axes", along);
    return batch ? along_unit_batch(node, op, name, {x}, attrs) : node.build(op, name, {x}, attrs);
}

// The same along the batch of a 4-D tensor held NHWC, whose bytes are not in logical order (no
// unit dimension can lead them), when H and W are both reduced or both kept (or of extent 1): x as
// [N, C, H*W] (NAME.images, a SHAVE kernel keeping each image), reduced there (NAME.rows), and back
// in rank 4. Nullopt otherwise.
std::optional<dsl::Layer> reduce_images_along(NodeImport &node, const std::string &op,
                                              const dsl::Layer &x,
                                              const std::vector<int64_t> &along,
                                              const std::string &axes_attr, const dsl::Attrs &attrs,
                                              const std::string &name) {
    const std::vector<int64_t> shape = shape_of(x).raw();
    auto has = [&](int64_t axis) {
        return std::find(along.begin(), along.end(), axis) != along.end();
    };
    if (!along_batch(x, along.front()) || shape.size() != 4 ||
        x.output().order == dsl::DimsOrder::NCHW())
        return std::nullopt;
    // An axis of extent 1 is as good as reduced, and as kept.
    const bool reduced_pixels = (has(2) || shape[2] == 1) && (has(3) || shape[3] == 1);
    const bool kept_pixels = (!has(2) || shape[2] == 1) && (!has(3) || shape[3] == 1);
    if (!reduced_pixels && !kept_pixels) return std::nullopt;
    const dsl::Layer images = node.build(
        "reshape", node.unique_name(name + ".images"), {x},
        dsl::Attrs().set("shape", std::vector<int64_t>{shape[0], shape[1], shape[2] * shape[3]}));
    std::vector<int64_t> rows_along;
    for (int64_t axis : along)
        if (axis < 2) rows_along.push_back(axis);
    if (has(2) || has(3)) rows_along.push_back(2);
    const dsl::Layer rows = reduce_along(node, op, images, rows_along, axes_attr, attrs,
                                         node.unique_name(name + ".rows"));
    std::vector<int64_t> kept = shape;
    for (int64_t axis : along) kept[size_t(axis)] = 1;
    return node.build("reshape", name, {rows}, dsl::Attrs().set("shape", kept));
}

// A layer `op` reducing input 0 along `axes` (normalized_axes), which `attrs` names as
// `axes_attr` ("axes", or "axis" for one): with keepdims 1 of the input's rank, the reduced
// axes of extent 1; with keepdims 0 that result (NODE.kept) squeezed, over every axis to a
// scalar. Axes of extent 1 among others reduce nothing, and the layer leaves them out: a unit
// batch among them needs no computing along the batch.
Layers reduced(NodeImport &node, const std::string &op, const std::vector<int64_t> &axes,
               const std::string &axes_attr, const dsl::Attrs &attrs) {
    const dsl::Layer &x = node.input(0);
    const bool keep = node.attr_int("keepdims", 1) != 0;
    const std::string name = keep ? node.name() : node.unique_name(node.name() + ".kept");
    std::vector<int64_t> along;
    for (int64_t axis : axes)
        if (shape_of(x).raw()[size_t(axis)] > 1) along.push_back(axis);
    if (along.empty()) along = axes;
    const std::optional<dsl::Layer> images =
        reduce_images_along(node, op, x, along, axes_attr, attrs, name);
    const dsl::Layer kept =
        images ? *images : reduce_along(node, op, x, along, axes_attr, attrs, name);
    if (keep) return {kept};
    return {node.build("squeeze", {kept}, dsl::Attrs().set("axes", axes))};
}

// A reduce `attrs` of every axis of input 0, a tensor of rank 5 or more: several of its axes
// share the device's H (dsl::device_view), along which a layer computes only where the others
// have extent 1, so the reduce is of the tensor flattened (NODE.flat) to one axis, its result
// reshaped to the input's rank with keepdims, else squeezed to a scalar.
Layers reduced_everywhere(NodeImport &node, dsl::Attrs attrs) {
    const dsl::Layer &x = node.input(0);
    const int64_t rank = shape_of(x).rank();
    const bool keep = node.attr_int("keepdims", 1) != 0;
    const dsl::Layer flat =
        node.build("reshape", node.unique_name(node.name() + ".flat"), {x},
                   dsl::Attrs().set("shape", std::vector<int64_t>{shape_of(x).elements()}));
    attrs.set("axes", std::vector<int64_t>{0});
    const dsl::Layer one =
        node.build("reduce", node.unique_name(node.name() + ".all"), {flat}, attrs);
    if (!keep)
        return {node.build("squeeze", {one}, dsl::Attrs().set("axes", std::vector<int64_t>{0}))};
    return {node.build("reshape", {one},
                       dsl::Attrs().set("shape", std::vector<int64_t>(size_t(rank), 1)))};
}

// ReduceSum, ReduceMean, ...: the reduce layer of `kind`. No axes are all of them, or with
// noop_with_empty_axes (ReduceSum's) the input itself.
OpImporter reduction(const std::string &kind) {
    return [kind](NodeImport &node) -> Layers {
        const dsl::Layer &x = node.input(0);
        std::vector<int64_t> axes =
            node.has_input(1) ? node.constant_ints(1, "axes") : node.attr_ints("axes", {});
        if (axes.empty()) {
            if (node.attr_int("noop_with_empty_axes", 0) != 0) {
                node.attr_int("keepdims", 1); // nothing is reduced, so nothing is kept
                return {x};
            }
            for (int64_t d = 0; d < shape_of(x).rank(); ++d) axes.push_back(d);
        }
        dsl::Attrs attrs;
        attrs.set("kind", kind);
        axes = normalized_axes(node, axes);
        if (shape_of(x).rank() > 4 && int64_t(axes.size()) == shape_of(x).rank())
            return reduced_everywhere(node, attrs);
        return reduced(node, "reduce", axes, "axes", attrs);
    };
}

// ArgMax, ArgMin: i32 indices (INT64's device type, as TopK's).
OpImporter arg_extreme(const std::string &op) {
    return [op](NodeImport &node) -> Layers {
        dsl::Attrs attrs;
        attrs.set("select_last_index", node.attr_int("select_last_index", 0));
        return reduced(node, op, normalized_axes(node, {node.attr_int("axis", 0)}), "axis", attrs);
    };
}

// A transpose moving axis 0 keeps a leading unit dimension first instead.
Layers transpose(NodeImport &node) {
    const dsl::Layer &x = node.input(0);
    std::vector<int64_t> reversed; // ONNX's default
    for (int64_t d = shape_of(x).rank(); d-- > 0;) reversed.push_back(d);
    std::vector<int64_t> perm = node.attr_ints("perm", reversed);
    dsl::Attrs attrs;
    if (perm.empty() || perm[0] == 0 || !along_batch(x, 0)) {
        attrs.set("perm", perm);
        return {node.build("transpose", {x}, attrs)};
    }
    for (int64_t &p : perm)
        if (p >= 0) ++p;
    perm.insert(perm.begin(), 0);
    attrs.set("perm", perm);
    return {along_unit_batch(node, "transpose", node.name(), {x}, attrs)};
}

// Every step-th element of [starts, ends) along `axes` of `in`, ONNX's negative and
// out-of-range indices clamped as the slice layer does; one cutting axis 0 of a computed tensor
// (the batch) runs on a leading unit dimension.
Layers slice(NodeImport &node) {
    const dsl::Layer &x = node.input(0);
    const dsl::Shape &shape = shape_of(x);
    const std::vector<int64_t> starts = node.constant_ints(1, "starts"),
                               ends = node.constant_ints(2, "ends");
    std::vector<int64_t> axes;
    if (node.has_input(3)) {
        axes = node.constant_ints(3, "axes");
    } else {
        for (size_t i = 0; i < starts.size(); ++i) axes.push_back(int64_t(i));
    }
    const std::vector<int64_t> steps =
        node.has_input(4) ? node.constant_ints(4, "steps") : std::vector<int64_t>(axes.size(), 1);
    if (starts.size() != ends.size() || starts.size() != axes.size() || steps.size() != axes.size())
        node.fail("starts, ends, axes and steps differ in length");
    bool batch = false;
    for (size_t i = 0; i < axes.size(); ++i) {
        const int64_t rank = shape.rank();
        if (axes[i] < -rank || axes[i] >= rank) node.fail("axis out of range");
        if (axes[i] < 0) axes[i] += rank;
        if (axes[i] != 0 || !along_batch(x, 0)) continue;
        // Whether it keeps the batch whole: steps of 1 from at most 0 to at least its end.
        const int64_t extent = shape[dsl::Dim(0)];
        auto index = [&](int64_t v) { return v < 0 ? v + extent : v; };
        batch = steps[i] != 1 || index(starts[i]) > 0 || index(ends[i]) < extent;
    }
    if (batch)
        for (int64_t &axis : axes) ++axis;
    dsl::Attrs attrs;
    attrs.set("starts", starts);
    attrs.set("ends", ends);
    attrs.set("axes", axes);
    if (node.has_input(4)) attrs.set("steps", steps);
    if (batch) return {along_unit_batch(node, "slice", node.name(), {x}, attrs)};
    return {node.build("slice", {x}, attrs)};
}

Layers split(NodeImport &node) {
    const dsl::Layer &x = node.input(0);
    const int64_t rank = shape_of(x).rank();
    int64_t axis = node.attr_int("axis", 0);
    if (axis < -rank || axis >= rank) node.fail("axis out of range");
    if (axis < 0) axis += rank;
    const int64_t extent = shape_of(x)[dsl::Dim(axis)];
    const int64_t parts = node.node().output_size();
    std::vector<int64_t> sizes;
    if (node.has_input(1)) {
        sizes = node.constant_ints(1, "split");
    } else {
        if (extent % parts != 0)
            node.fail("an extent of " + std::to_string(extent) + " does not split evenly into " +
                      std::to_string(parts));
        sizes.assign(size_t(parts), extent / parts);
    }
    if (int64_t(sizes.size()) != parts) node.fail("split sizes differ from the outputs in number");
    const bool batch = parts > 1 && along_batch(x, axis);
    Layers outs;
    int64_t start = 0;
    for (int64_t i = 0; i < parts; ++i) {
        dsl::Attrs attrs;
        attrs.set("starts", std::vector<int64_t>{start});
        attrs.set("ends", std::vector<int64_t>{start + sizes[size_t(i)]});
        attrs.set("axes", std::vector<int64_t>{batch ? axis + 1 : axis});
        const std::string &out = node.node().output(int(i));
        const std::string name =
            node.unique_name(out.empty() ? node.name() + "." + std::to_string(i) : out);
        outs.push_back(batch ? along_unit_batch(node, "slice", name, {x}, attrs)
                             : node.build("slice", name, {x}, attrs));
        start += sizes[size_t(i)];
    }
    if (start != extent) node.fail("split sizes do not add up to the extent");
    return outs;
}

Layers constant(NodeImport &node) {
    Halide::Buffer<> value;
    if (node.has_attr("value")) {
        value = node.attr_tensor("value");
    } else if (node.has_attr("value_float")) {
        dsl::ConstValues v{dsl::ElemType::F32, {}, {}, {node.attr_float("value_float", 0)}};
        value = dsl::const_buffer(v);
    } else if (node.has_attr("value_int")) {
        value = dsl::const_buffer({dsl::ElemType::I64, {}, {node.attr_int("value_int", 0)}, {}});
    } else if (node.has_attr("value_ints")) {
        const std::vector<int64_t> ints = node.attr_ints("value_ints", {});
        value = dsl::const_buffer({dsl::ElemType::I64, {int64_t(ints.size())}, ints, {}});
    } else {
        node.fail("only value, value_float, value_int and value_ints are supported");
    }
    return {dsl::LayerRegistry::constant(node.name(), value)};
}

// EyeLike: a constant of input 0's shape (rank 2) and `dtype` (the input's type by default),
// 1 on the diagonal `k` places right of the main one (left for a negative k), 0 elsewhere; the
// input's values are not read.
Layers eye_like(NodeImport &node) {
    const std::vector<int64_t> shape = shape_of(node.input(0)).raw();
    if (shape.size() != 2)
        node.fail("input 0 has rank " + std::to_string(shape.size()) + "; EyeLike takes rank 2");
    if (shape[0] > (int64_t(1) << 28) / shape[1])
        node.fail("input 0's shape is too large for a constant (2^28 elements at most)");
    const int32_t onnx_type = int32_t(node.attr_int("dtype", node.input_onnx_type(0)));
    const dsl::ElemType type = elem_type(onnx_type, node.name() + ": dtype");
    const int64_t k = node.attr_int("k", 0);
    dsl::ConstValues eye{type, shape, {}, {}};
    const bool real =
        type == dsl::ElemType::F16 || type == dsl::ElemType::F32 || type == dsl::ElemType::F64;
    for (int64_t i = 0; i < shape[0]; ++i)
        for (int64_t j = 0; j < shape[1]; ++j) {
            const bool one = j - i == k;
            if (real)
                eye.reals.push_back(one ? 1.0 : 0.0);
            else
                eye.ints.push_back(one ? 1 : 0);
        }
    return {dsl::LayerRegistry::constant(node.name(), dsl::const_buffer(eye))};
}

// A constant `shape` filled with `value` (a one-element tensor, default f32 0).
Layers constant_of_shape(NodeImport &node) {
    const std::vector<int64_t> shape = node.constant_ints(0, "shape");
    dsl::ConstValues fill{dsl::ElemType::F32, {1}, {}, {0.0}};
    if (node.has_attr("value")) fill = dsl::const_values(node.attr_tensor("value"), "value");
    if (fill.elements() != 1) node.fail("value must hold one element");
    int64_t count = 1;
    for (int64_t d : shape) {
        if (d < 0 || (d > 0 && count > (int64_t(1) << 28) / d))
            node.fail("shape is negative or too large for a constant");
        count *= d;
    }
    const dsl::ConstValues filled = dsl::pick_elements(fill, shape, [](const auto &) { return 0; });
    return {dsl::LayerRegistry::constant(node.name(), dsl::const_buffer(filled))};
}

// Cast of constants folds; of an activation between float types it is the activation itself
// (the precision fixed its type), else the registry's cast to the target's device type (INT64 as
// i32, which holds every value of a device tensor).
Layers cast_to(NodeImport &node, dsl::ElemType to) {
    const dsl::Layer &x = node.input(0);
    if (dsl::is_constant(x))
        return {dsl::LayerRegistry::constant(
            node.name(), converted(dsl::constant_value(x), to, node.node().input(0)))};
    const bool to_float =
        to == dsl::ElemType::F32 || to == dsl::ElemType::F16 || to == dsl::ElemType::F64;
    const dsl::ElemType device = to_float ? float_type(node) : dsl::device_type(to);
    if (to == dsl::ElemType::Bool)
        node.fail("a cast of a computed tensor to bool is not supported");
    if (device == x.output().type) return {x};
    dsl::Attrs attrs;
    attrs.set("to", std::string(dsl::to_string(device)));
    return {node.build("cast", {x}, attrs)};
}

// A cast to BFLOAT16, which the graph holds in a float type: the value as a float (a constant
// in f32, a computed tensor in the precision's type), rounded to the nearest bfloat16.
Layers cast_to_bfloat16(NodeImport &node) {
    const dsl::Layer &x = node.input(0);
    dsl::Layer as_float = x;
    const std::string float_name = node.unique_name(node.name() + ".float");
    if (dsl::is_constant(x)) {
        as_float = dsl::LayerRegistry::constant(
            float_name,
            converted(dsl::constant_value(x), dsl::ElemType::F32, node.node().input(0)));
    } else if (x.output().type != float_type(node)) {
        dsl::Attrs attrs;
        attrs.set("to", std::string(dsl::to_string(float_type(node))));
        as_float = node.build("cast", float_name, {x}, attrs);
    }
    return {node.build("round_bf16", {as_float}, {})};
}

// The range of ONNX integer type `type`, or nullopt for another type.
std::optional<std::pair<double, double>> integer_range(int32_t type) {
    using onnx::TensorProto;
    switch (type) {
    case TensorProto::BOOL:
        return std::pair(0.0, 1.0);
    case TensorProto::UINT8:
        return std::pair(0.0, 255.0);
    case TensorProto::INT8:
        return std::pair(-128.0, 127.0);
    case TensorProto::UINT16:
        return std::pair(0.0, 65535.0);
    case TensorProto::INT16:
        return std::pair(-32768.0, 32767.0);
    case TensorProto::UINT32:
        return std::pair(0.0, std::ldexp(1.0, 32) - 1);
    case TensorProto::INT32:
        return std::pair(-std::ldexp(1.0, 31), std::ldexp(1.0, 31) - 1);
    case TensorProto::UINT64:
        return std::pair(0.0, std::ldexp(1.0, 64));
    case TensorProto::INT64:
        return std::pair(-std::ldexp(1.0, 63), std::ldexp(1.0, 63));
    default:
        return std::nullopt;
    }
}

Layers cast(NodeImport &node) {
    using onnx::TensorProto;
    const int32_t to = int32_t(node.attr_int("to", 0));
    if (to == TensorProto::BFLOAT16) return cast_to_bfloat16(node);
    // The device computes INT16, UINT16, UINT32 and UINT64 in i32, where a value outside the
    // type would not wrap as the model's does: a computed tensor of a type the target holds.
    const bool device_narrower = to == TensorProto::INT16 || to == TensorProto::UINT16 ||
                                 to == TensorProto::UINT32 || to == TensorProto::UINT64;
    if (device_narrower && !dsl::is_constant(node.input(0))) {
        const auto target = integer_range(to), source = integer_range(node.input_onnx_type(0));
        if (!source || source->first < target->first || source->second > target->second)
            node.fail("a cast of a computed tensor to " + model_type_name(to) +
                      " is supported only from an integer type all of whose values it holds "
                      "(the device computes it in i32, where other values would not wrap at " +
                      model_type_name(to) + "'s width)");
    }
    return cast_to(node, elem_type(to, "Cast's 'to'"));
}

// CastLike: a Cast to the element type of its second input (a computed float tensor holds the
// precision's type, as a Cast to a float type gives).
Layers cast_like(NodeImport &node) {
    if (node.input_onnx_type(1) == onnx::TensorProto::BFLOAT16) return cast_to_bfloat16(node);
    return cast_to(node, node.input(1).output().type);
}

// Identity passes its input on, as does Dropout when it drops nothing: in inference (the
// default), or in training with a ratio of 0. Its mask is then all true.
Layers pass_through(NodeImport &node) {
    if (node.node().op_type() != "Dropout") return {node.input(0)};
    node.attr_int("seed", 0);
    const bool training =
        node.has_input(2) && node.constant_ints(2, "training_mode") != std::vector<int64_t>{0};
    if (training) {
        const double ratio = scalar_input(node, 1, "ratio", 0.5);
        if (ratio != 0) {
            char text[32];
            std::snprintf(text, sizeof text, "%g", ratio);
            node.fail(std::string("training mode with ratio ") + text +
                      " drops random elements, which is not supported (only ratio 0 is)");
        }
    }
    const dsl::Layer &x = node.input(0);
    Layers outputs = {x};
    if (node.node().output_size() > 1 && !node.node().output(1).empty()) {
        dsl::ConstValues mask{dsl::ElemType::Bool, x.output().shape.raw(), {}, {}};
        mask.ints.assign(size_t(x.output().shape.elements()), 1);
        outputs.push_back(dsl::LayerRegistry::constant(node.unique_name(node.node().output(1)),
                                                       dsl::const_buffer(mask)));
    }
    return outputs;
}

Layers topk(NodeImport &node) {
    const std::vector<int64_t> k = node.constant_ints(1, "K");
    if (k.size() != 1) node.fail("K must be one value");
    dsl::Attrs attrs;
    attrs.set("k", k[0]);
    attrs.set("axis", node.attr_int("axis", -1));
    attrs.set("largest", node.attr_int("largest", 1));
    attrs.set("sorted", node.attr_int("sorted", 1));
    const dsl::Layer both = node.build("topk", {node.input(0)}, attrs);
    return node.outputs_of(both);
}

Layers shape(NodeImport &node) {
    const dsl::Layer whole = node.build("shape", {node.input(0)}, {});
    const int64_t rank = shape_of(node.input(0)).rank();
    int64_t start = node.attr_int("start", 0), end = node.attr_int("end", rank);
    auto clamped = [&](int64_t v) { return std::clamp<int64_t>(v < 0 ? v + rank : v, 0, rank); };
    start = clamped(start);
    end = std::max(start, clamped(end));
    if (start == 0 && end == rank) return {whole};
    dsl::ConstValues v = dsl::const_values(whole);
    v.ints = std::vector<int64_t>(v.ints.begin() + start, v.ints.begin() + end);
    v.shape = {end - start};
    return {dsl::LayerRegistry::constant(node.name(), dsl::const_buffer(v))};
}

// Range(start, limit, delta) of constants.
Layers range(NodeImport &node) {
    const double start = scalar_input(node, 0, "start", 0),
                 limit = scalar_input(node, 1, "limit", 0),
                 delta = scalar_input(node, 2, "delta", 1);
    if (delta == 0) node.fail("delta is 0");
    const double count = std::max(0.0, std::ceil((limit - start) / delta));
    if (count > double(1 << 24)) node.fail("too many elements for a constant");
    // The values take the type of `start` (checked to match limit and delta by ONNX).
    dsl::ConstValues v;
    v.type = dsl::const_values(node.constant_input(0, "start"), "start").type;
    v.shape = {int64_t(count)};
    for (int64_t i = 0; i < int64_t(count); ++i) {
        if (v.is_float())
            v.reals.push_back(start + double(i) * delta);
        else
            v.ints.push_back(int64_t(start) + i * int64_t(delta));
    }
    return {dsl::LayerRegistry::constant(node.name(), dsl::const_buffer(v))};
}

// The inputs and attributes of an op whose inputs map one to one onto a registry op's (and its
// attr_inputs), with the attributes named as the registry names them.
std::pair<Layers, dsl::Attrs> direct_arguments(NodeImport &node, const std::string &op,
                                               const std::vector<std::string> &int_attrs,
                                               const std::vector<std::string> &ints_attrs) {
    const dsl::LayerDef &def = algorithms::layer_registry().at(op);
    std::vector<dsl::Layer> inputs;
    for (size_t i = 0; i < node.input_count(); ++i) {
        if (!node.has_input(i)) continue;
        if (def.variadic || i < def.inputs.size()) {
            inputs.push_back(node.input(i));
            continue;
        }
        if (i >= def.inputs.size() + def.attr_inputs.size())
            node.fail("takes at most " +
                      std::to_string(def.inputs.size() + def.attr_inputs.size()) + " inputs");
        inputs.push_back(node.constant_layer(i, def.attr_inputs[i - def.inputs.size()]));
    }
    dsl::Attrs attrs;
    for (const std::string &name : int_attrs)
        if (node.has_attr(name)) attrs.set(name, node.attr_int(name, 0));
    for (const std::string &name : ints_attrs)
        if (node.has_attr(name)) attrs.set(name, node.attr_ints(name, {}));
    return {inputs, attrs};
}

OpImporter direct(const std::string &op, std::vector<std::string> int_attrs,
                  std::vector<std::string> ints_attrs = {}) {
    return [op, int_attrs, ints_attrs](NodeImport &node) -> Layers {
        const auto [inputs, attrs] = direct_arguments(node, op, int_attrs, ints_attrs);
        return {node.build(op, inputs, attrs)};
    };
}

// Gather by computed indices, from data of rank 1 (a lookup table): gather_elements along the
// indices' last axis, of the data as [1, ..., 1, K] (NODE.table, a view), whose extents of 1
// serve every index.
Layers gather_by_tensor(NodeImport &node) {
    const dsl::Layer &data = node.input(0), &indices = node.input(1);
    if (shape_of(data).rank() != 1)
        node.fail("the data is " + dsl::to_string(shape_of(data)) +
                  "; computed indices pick from data of rank 1 only (a lookup table)");
    const int64_t axis = node.attr_int("axis", 0);
    if (axis != 0 && axis != -1) node.fail("axis " + std::to_string(axis) + " of data of rank 1");
    const int rank = shape_of(indices).rank();
    if (rank < 1) node.fail("the indices have rank 0; computed indices need a rank of 1 or more");
    std::vector<int64_t> table(size_t(rank), 1);
    table.back() = shape_of(data)[dsl::Dim(0)];
    const dsl::Layer rows = rank == 1
                                ? data
                                : node.build("reshape", node.unique_name(node.name() + ".table"),
                                             {data}, dsl::Attrs().set("shape", table));
    return {node.build("gather_elements", {rows, indices},
                       dsl::Attrs().set("axis", int64_t(rank - 1)))};
}

// Gather by constant indices (computed ones: gather_by_tensor). Along axis 0 of a computed tensor
// it picks images, so on a leading unit dimension: of
// the data as rows [N, the rest] (a view of logical order, a SHAVE kernel keeping the batch for
// a tensor held NHWC), whose picked rows then take the output's shape (a view).
Layers gather(NodeImport &node) {
    const dsl::Layer &data = node.input(0);
    const dsl::Layer &picks = node.input(1);
    // A graph input of a known value is a constant, but to a lookup table.
    const bool known = picks.is_input() && node.options().known_inputs.count(picks.name()) > 0;
    if (!dsl::is_constant(picks) && (!known || shape_of(data).rank() == 1))
        return gather_by_tensor(node);
    if (!along_batch(data, node.attr_int("axis", 0))) return direct("gather", {"axis"})(node);
    const Halide::Buffer<> &indices = node.constant_input(1, "indices");
    dsl::Attrs attrs;
    attrs.set("axis", int64_t(1));
    attrs.set("indices", indices);
    const dsl::Shape &shape = shape_of(data);
    if (shape.rank() == 2) return {along_unit_batch(node, "gather", node.name(), {data}, attrs)};
    const int64_t n = shape[dsl::Dim(0)];
    const dsl::Layer rows =
        node.build("reshape", node.unique_name(node.name() + ".rows"), {data},
                   dsl::Attrs().set("shape", std::vector<int64_t>{n, shape.elements() / n}));
    const dsl::Layer picked =
        along_unit_batch(node, "gather", node.unique_name(node.name() + ".picked"), {rows}, attrs);
    std::vector<int64_t> out = dsl::const_values(indices, node.node().input(1)).shape;
    out.insert(out.end(), shape.raw().begin() + 1, shape.raw().end());
    return {node.build("reshape", {picked}, dsl::Attrs().set("shape", out))};
}

// `op` of `x`, on a leading unit dimension when `batch` (it moves elements along axis 0 of a
// computed tensor, the device's batch).
dsl::Layer maybe_unbatched(NodeImport &node, const std::string &op, const dsl::Layer &x, bool batch,
                           const dsl::Attrs &attrs) {
    if (batch) return along_unit_batch(node, op, node.name(), {x}, attrs);
    return node.build(op, {x}, attrs);
}

// `values` (one per axis) with a leading entry `first` when `batch`.
std::vector<int64_t> with_unit_batch(std::vector<int64_t> values, bool batch, int64_t first) {
    if (batch) values.insert(values.begin(), first);
    return values;
}

// Pad with constant pads (and constant value): pads along axis 0 of a computed tensor on a
// leading unit dimension.
Layers pad(NodeImport &node) {
    const dsl::Layer &x = node.input(0);
    const int64_t rank = shape_of(x).rank();
    std::vector<int64_t> pads = node.constant_ints(1, "pads");
    if (int64_t(pads.size()) != 2 * rank)
        node.fail(std::to_string(pads.size()) + " pads for an input of rank " +
                  std::to_string(rank));
    const bool batch = along_batch(x, 0) && (pads[0] != 0 || pads[size_t(rank)] != 0);
    if (batch) {
        pads.insert(pads.begin() + rank, 0);
        pads.insert(pads.begin(), 0);
    }
    dsl::Attrs attrs;
    attrs.set("pads", pads);
    attrs.set("mode", node.attr_string("mode", "constant"));
    attrs.set("value", scalar_input(node, 2, "constant_value", 0));
    return {maybe_unbatched(node, "pad", x, batch, attrs)};
}

// Tile along the batch of a 4-D tensor held NHWC, whose bytes no unit dimension can lead: the
// other axes tiled first (NODE.within), then each image as a row [N, C, H*W] (NODE.images, a
// SHAVE kernel keeping each image) tiled along N on a leading unit dimension (NODE.rows), and back
// in rank 4.
dsl::Layer tile_images(NodeImport &node, const dsl::Layer &x, std::vector<int64_t> repeats) {
    const int64_t batch_repeats = repeats[0];
    repeats[0] = 1;
    const dsl::Layer within =
        std::all_of(repeats.begin(), repeats.end(), [](int64_t r) { return r == 1; })
            ? x
            : node.build("tile", node.unique_name(node.name() + ".within"), {x},
                         dsl::Attrs().set("repeats", repeats));
    const std::vector<int64_t> shape = shape_of(within).raw();
    const dsl::Layer images = node.build(
        "reshape", node.unique_name(node.name() + ".images"), {within},
        dsl::Attrs().set("shape", std::vector<int64_t>{shape[0], shape[1], shape[2] * shape[3]}));
    const dsl::Layer rows =
        along_unit_batch(node, "tile", node.unique_name(node.name() + ".rows"), {images},
                         dsl::Attrs().set("repeats", std::vector<int64_t>{1, batch_repeats, 1, 1}));
    std::vector<int64_t> tiled = shape;
    tiled[0] *= batch_repeats;
    return node.build("reshape", node.name(), {rows}, dsl::Attrs().set("shape", tiled));
}

Layers tile(NodeImport &node) {
    const dsl::Layer &x = node.input(0);
    const std::vector<int64_t> repeats = node.constant_ints(1, "repeats");
    const bool batch = along_batch(x, 0) && !repeats.empty() && repeats[0] != 1;
    if (batch && repeats.size() == 4 && x.output().order == dsl::DimsOrder::NHWC())
        return {tile_images(node, x, repeats)};
    dsl::Attrs attrs;
    attrs.set("repeats", with_unit_batch(repeats, batch, 1));
    return {maybe_unbatched(node, "tile", x, batch, attrs)};
}

// Expand to a constant shape by numpy's rules: a shape longer than the input's rank gives the
// input leading unit dimensions first; one broadcasting axis 0 runs on a leading unit dimension.
Layers expand(NodeImport &node) {
    const std::vector<int64_t> to = node.constant_ints(1, "shape");
    const dsl::Layer x = with_rank(node, node.input(0), int(to.size()), "input");
    const std::vector<int64_t> &extents = shape_of(x).raw();
    const size_t skip = extents.size() - std::min(extents.size(), to.size());
    const bool batch = along_batch(x, 0) && skip == 0 && extents[0] == 1 && to[0] != 1;
    dsl::Attrs attrs;
    attrs.set("shape", to);
    return {maybe_unbatched(node, "expand", x, batch, attrs)};
}

// Trilu's matrices are the last two axes: of a rank-2 computed tensor the rows are the batch, so
// on a leading unit dimension.
Layers trilu(NodeImport &node) {
    const dsl::Layer &x = node.input(0);
    dsl::Attrs attrs;
    attrs.set("upper", node.attr_int("upper", 1));
    if (node.has_input(1)) {
        const std::vector<int64_t> k = node.constant_ints(1, "k");
        if (k.size() != 1) node.fail("k must be one value");
        attrs.set("k", k[0]);
    }
    return {maybe_unbatched(node, "trilu", x, along_batch(x, -2), attrs)};
}

// CumSum along a constant axis; along axis 0 of a computed tensor on a leading unit dimension.
Layers cumsum(NodeImport &node) {
    const dsl::Layer &x = node.input(0);
    const std::vector<int64_t> axis = node.constant_ints(1, "axis");
    if (axis.size() != 1) node.fail("axis must be one value");
    const bool batch = along_batch(x, axis[0]);
    dsl::Attrs attrs;
    attrs.set("axis", batch ? int64_t(1) : axis[0]);
    attrs.set("exclusive", node.attr_int("exclusive", 0));
    attrs.set("reverse", node.attr_int("reverse", 0));
    return {maybe_unbatched(node, "cumsum", x, batch, attrs)};
}

// GatherElements: the indices a tensor, computed or constant (a constant one checked to lie in
// [-extent, extent), then i32 as the device holds int64); data and indices of other batches, or
// picking along axis 0, run on a leading unit dimension.
Layers gather_elements(NodeImport &node) {
    const dsl::Layer &x = node.input(0);
    dsl::Layer indices = node.input(1);
    const int64_t rank = shape_of(x).rank();
    int64_t axis = node.attr_int("axis", 0);
    if (axis < -rank || axis >= rank) node.fail("axis out of range");
    if (axis < 0) axis += rank;
    if (shape_of(indices).rank() != rank)
        node.fail("the indices have rank " + std::to_string(shape_of(indices).rank()) +
                  ", the data " + std::to_string(rank) + "; they must have one rank");
    if (dsl::is_constant(indices)) {
        dsl::ConstValues values = dsl::const_values(indices);
        if (values.is_float()) node.fail("the indices must be integers");
        const int64_t extent = shape_of(x)[dsl::Dim(int(axis))];
        for (int64_t index : values.ints)
            if (index < -extent || index >= extent)
                node.fail("index " + std::to_string(index) + " outside [" +
                          std::to_string(-extent) + ", " + std::to_string(extent) + ")");
        values.type = dsl::ElemType::I32;
        indices = dsl::LayerRegistry::constant(node.unique_name(node.name() + ".indices"),
                                               dsl::const_buffer(values));
    }
    const bool batch = along_batch(x, 0) &&
                       (axis == 0 || shape_of(x)[dsl::Dim(0)] != shape_of(indices)[dsl::Dim(0)]);
    dsl::Attrs attrs;
    attrs.set("axis", batch ? axis + 1 : axis);
    if (batch) return {along_unit_batch(node, "gather_elements", node.name(), {x, indices}, attrs)};
    return {node.build("gather_elements", {x, indices}, attrs)};
}

// Reshape, Flatten, Squeeze and Unsqueeze. One changing the first extent (the batch) is a view
// of bytes in logical order; a computed 4-D tensor held NHWC with several channels and pixels
// is not, so it is first reshaped to [N, C*H*W] (a SHAVE kernel keeping the batch, whose
// result is in logical order), and that to the op's shape.
OpImporter reshaping(const std::string &op, std::vector<std::string> int_attrs) {
    return [op, int_attrs](NodeImport &node) -> Layers {
        auto [inputs, attrs] = direct_arguments(node, op, int_attrs, {});
        const dsl::Layer x = inputs.at(0);
        const dsl::TensorDesc &t = x.output();
        using namespace dsl::dims;
        const bool nhwc = !dsl::is_constant(x) && t.shape.rank() == 4 &&
                          t.order == dsl::DimsOrder::NHWC() && t.shape[C] > 1 &&
                          t.shape[H] * t.shape[W] > 1;
        if (!nhwc) return {node.build(op, inputs, attrs)};
        // The op's shape, from a stand-in of the input in logical order.
        dsl::TensorDesc logical = t;
        logical.order = dsl::DimsOrder::NCHW();
        inputs[0] = dsl::Layer::input(logical);
        const dsl::Shape shape = node.build(op, inputs, attrs).output().shape;
        if (shape.raw().at(0) == t.shape[N]) {
            inputs[0] = x;
            return {node.build(op, inputs, attrs)};
        }
        dsl::Attrs rows;
        rows.set("axis", int64_t(1));
        const dsl::Layer flat =
            node.build("flatten", node.unique_name(node.name() + ".rows"), {x}, rows);
        dsl::Attrs to;
        to.set("shape", shape.raw());
        return {node.build("reshape", {flat}, to)};
    };
}

} // namespace

const std::map<std::string, OpImporter> &op_importers() {
    static const std::map<std::string, OpImporter> importers = {
        {"Abs", unary_layer("abs")},
        {"Acos", unary_layer("acos")},
        {"Acosh", unary_layer("acosh")},
        {"Add",
         [](NodeImport &n) {
             // uint8 and int8 without a quantization are plain integers.
             return reads_quantized_int8(n) ? import_quant_add(n) : eltwise(n, "add");
         }},
        {"And", [](NodeImport &n) { return computed_elementwise(n, "and"); }},
        {"ArgMax", arg_extreme("argmax")},
        {"ArgMin", arg_extreme("argmin")},
        {"Asin", unary_layer("asin")},
        {"Asinh", unary_layer("asinh")},
        {"Atan", unary_layer("atan")},
        {"Atanh", unary_layer("atanh")},
        {"AveragePool", [](NodeImport &n) { return pool(n, "avg_pool"); }},
        {"BatchNormalization", batch_normalization},
        {"InstanceNormalization", instance_normalization},
        {"BitShift", bit_shift},
        {"Cast", cast},
        {"CastLike", cast_like},
        {"Ceil", unary_layer("ceil")},
        {"Celu", unary_layer("celu", {{"alpha", 1.0f}})},
        {"Clip",
         [](NodeImport &n) {
             return awaits_quantize(n.input(0)) ? import_quant_activation(n) : clip(n);
         }},
        {"Concat", concat},
        {"Constant", constant},
        {"ConstantOfShape", constant_of_shape},
        {"EyeLike", eye_like},
        {"Conv", [](NodeImport &n) { return reads_int8(n) ? import_quant_conv(n) : conv(n); }},
        {"ConvTranspose", conv_transpose},
        {"Cos", unary_layer("cos")},
        {"Cosh", unary_layer("cosh")},
        {"CumSum", cumsum},
        {"DepthToSpace",
         [](NodeImport &n) {
             dsl::Attrs a;
             a.set("blocksize", n.attr_int("blocksize", 0));
             a.set("mode", n.attr_string("mode", "DCR"));
             return unary(n, "depth_to_space", a);
         }},
        {"Div", division},
        {"Dropout", pass_through},
        {"Elu", unary_layer("elu", {{"alpha", 1.0f}})},
        {"Equal", [](NodeImport &n) { return elementwise_or_constant(n, "equal"); }},
        {"Erf", import_erf},
        {"Exp", unary_layer("exp")},
        {"Expand", expand},
        {"Flatten", reshaping("flatten", {"axis"})},
        {"Floor", unary_layer("floor")},
        {"Gather", gather},
        {"GatherElements", gather_elements},
        {"DequantizeLinear", import_dequantize_linear},
        {"Gemm",
         [](NodeImport &n) { return reads_int8(n) ? import_quant_fully_connected(n) : gemm(n); }},
        {"GlobalAveragePool", [](NodeImport &n) { return import_global_pool(n, false); }},
        {"GlobalMaxPool", [](NodeImport &n) { return import_global_pool(n, true); }},
        {"Greater", [](NodeImport &n) { return elementwise_or_constant(n, "greater"); }},
        {"GreaterOrEqual",
         [](NodeImport &n) { return elementwise_or_constant(n, "greater_or_equal"); }},
        {"Hardmax", along_axis("hardmax")},
        {"HardSigmoid",
         [](NodeImport &n) {
             dsl::Attrs a;
             a.set("alpha", double(n.attr_float("alpha", 0.2f)));
             a.set("beta", double(n.attr_float("beta", 0.5f)));
             return unary(n, "hard_sigmoid", a);
         }},
        {"HardSwish", unary_layer("hard_swish")},
        {"GatherND", import_gather_nd},
        {"GridSample", import_grid_sample},
        {"Identity", pass_through},
        {"LRN",
         [](NodeImport &n) {
             dsl::Attrs a;
             a.set("size", n.attr_int("size", 0));
             a.set("alpha", double(n.attr_float("alpha", 1e-4f)));
             a.set("beta", double(n.attr_float("beta", 0.75f)));
             a.set("bias", double(n.attr_float("bias", 1.0f)));
             return unary(n, "lrn", a);
         }},
        {"IsInf",
         [](NodeImport &n) {
             dsl::Attrs a;
             a.set("detect_negative", n.attr_int("detect_negative", 1));
             a.set("detect_positive", n.attr_int("detect_positive", 1));
             return unary(n, "is_inf", a);
         }},
        {"IsNaN", unary_layer("is_nan")},
        {"LayerNormalization", import_layer_norm},
        {"LeakyRelu",
         [](NodeImport &n) {
             dsl::Attrs a;
             a.set("alpha", double(n.attr_float("alpha", 0.01f)));
             return unary(n, "leaky_relu", a);
         }},
        {"Less", [](NodeImport &n) { return elementwise_or_constant(n, "less"); }},
        {"LessOrEqual", [](NodeImport &n) { return elementwise_or_constant(n, "less_or_equal"); }},
        {"Log", unary_layer("log")},
        {"LogSoftmax", along_axis("log_softmax")},
        {"LpNormalization", along_axis("lp_normalize", {{"p", 2}})},
        {"MatMul",
         [](NodeImport &n) { return reads_int8(n) ? import_quant_fully_connected(n) : matmul(n); }},
        {"Max", [](NodeImport &n) { return variadic_eltwise(n, "max"); }},
        {"MaxPool", [](NodeImport &n) { return pool(n, "max_pool"); }},
        {"MaxUnpool", import_max_unpool},
        {"Mean", mean},
        {"Min", [](NodeImport &n) { return variadic_eltwise(n, "min"); }},
        {"Mod", mod},
        {"Mul", [](NodeImport &n) { return eltwise(n, "mul"); }},
        {"Neg", unary_layer("neg")},
        {"Not", unary_layer("not")},
        {"OneHot", one_hot},
        {"Or", [](NodeImport &n) { return computed_elementwise(n, "or"); }},
        {"PRelu", [](NodeImport &n) { return elementwise_or_constant(n, "prelu"); }},
        {"Pad", pad},
        {"Pow", [](NodeImport &n) { return elementwise_or_constant(n, "pow"); }},
        {"QLinearConv", import_qlinear_conv},
        {"QLinearMatMul", import_qlinear_matmul},
        {"QuantizeLinear", import_quantize_linear},
        {"Range", range},
        {"Reciprocal", unary_layer("reciprocal")},
        {"ReduceL1", reduction("l1")},
        {"ReduceL2", reduction("l2")},
        {"ReduceLogSum", reduction("log_sum")},
        {"ReduceLogSumExp", reduction("log_sum_exp")},
        {"ReduceMax", reduction("max")},
        {"ReduceMean", reduction("mean")},
        {"ReduceMin", reduction("min")},
        {"ReduceProd", reduction("prod")},
        {"ReduceSum", reduction("sum")},
        {"ReduceSumSquare", reduction("sum_square")},
        {"Relu",
         [](NodeImport &n) {
             return awaits_quantize(n.input(0)) ? import_quant_activation(n) : unary(n, "relu");
         }},
        {"Reshape", reshaping("reshape", {"allowzero"})},
        {"Resize", import_resize},
        {"ReverseSequence", import_reverse_sequence},
        {"RoiAlign", import_roi_align},
        {"Round", unary_layer("round")},
        {"Selu", unary_layer("selu", {{"alpha", 1.67326319217681884765625f},
                                      {"gamma", 1.05070102214813232421875f}})},
        {"Shape", shape},
        {"Shrink", unary_layer("shrink", {{"bias", 0.0f}, {"lambd", 0.5f}})},
        {"Sigmoid", [](NodeImport &n) { return unary(n, "sigmoid"); }},
        {"Sign", unary_layer("sign")},
        {"Sin", unary_layer("sin")},
        {"Sinh", unary_layer("sinh")},
        {"Size", [](NodeImport &n) { return unary(n, "size"); }},
        {"Slice", slice},
        {"Softmax", along_axis("softmax")},
        {"Softplus", unary_layer("softplus")},
        {"Softsign", unary_layer("softsign")},
        {"SpaceToDepth", direct("space_to_depth", {"blocksize"})},
        {"Split", split},
        {"Sqrt", unary_layer("sqrt")},
        {"Squeeze", reshaping("squeeze", {})},
        {"Sub", [](NodeImport &n) { return eltwise(n, "sub"); }},
        {"Sum", [](NodeImport &n) { return variadic_eltwise(n, "add"); }},
        {"Tan", unary_layer("tan")},
        {"Tanh", unary_layer("tanh")},
        {"ThresholdedRelu", unary_layer("thresholded_relu", {{"alpha", 1.0f}})},
        {"Tile", tile},
        {"TopK", topk},
        {"Transpose", transpose},
        {"Trilu", trilu},
        {"Unsqueeze", reshaping("unsqueeze", {})},
        {"Scatter", import_scatter_elements},
        {"ScatterElements", import_scatter_elements},
        {"ScatterND", import_scatter_nd},
        {"Where", where},
        {"Xor", [](NodeImport &n) { return computed_elementwise(n, "xor"); }},
    };
    return importers;
}

} // namespace vpuc::frontend::detail
