// Pre-quantized models: QuantizeLinear / DequantizeLinear around Conv, MatMul, Gemm and Add
// (the QDQ form), and QLinearConv / QLinearMatMul, as the registry's int8 layers.
//
// An int8 activation is a u8/i8 layer carrying its dsl::Quant. DequantizeLinear of one is a
// dequantize layer (fp16), which a Conv, MatMul, Gemm or Add reading it looks through to the
// int8 tensor; an op without an int8 form computes in fp16 on it, and a QuantizeLinear of a
// float tensor that folds into no int8 layer is a quantize layer. DequantizeLinear of a
// constant folds to its exact real values (f64); the int8 layer recovers the integers and a
// scale per output channel from them. A Conv, MatMul, Gemm or Add of int8 tensors cannot know
// its output's scale until the QuantizeLinear after it: it becomes an "awaiting_quantize" layer
// (i32, the accumulator's scales per channel) around the int8 layer, which that QuantizeLinear
// rebuilds with the real requantization (Relu and Clip in between fuse into the PPE). Left without
// one, it fails to lower with an error naming the node.
#include <cmath>
#include <limits>
#include <optional>

#include "algorithms/layers.h"
#include "algorithms/registry.h"
#include "dsl/constant_values.h"
#include "onnx_internal.h"

namespace vpuc::frontend::detail {

namespace {

using Layers = std::vector<dsl::Layer>;

constexpr const char *kAwaitingQuantize = "awaiting_quantize";

bool is_int8(const dsl::Layer &layer) {
    return dsl::is_quantized_int(layer.output().type);
}

// The tensor an int8 layer reads for `layer`: the int8 input of a dequantize layer (the
// DequantizeLinear folds into the reader), or the layer itself.
const dsl::Layer &int8_source(const dsl::Layer &layer) {
    return layer.op() == "dequantize" ? layer.inputs().at(0) : layer;
}

// NodeImport::fail's text, for an error raised later (when the graph is lowered).
std::string failure_text(const NodeImport &node, const std::string &what) {
    try {
        node.fail(what);
    } catch (const ModelError &e) {
        return e.what();
    }
}

// A scale or zero-point input: one value, or one per element of an axis.
dsl::ConstValues quant_values(NodeImport &node, size_t i, const std::string &role) {
    return dsl::const_values(node.constant_input(i, role), node.node().input(int(i)));
}

double real_at(const dsl::ConstValues &v, int64_t i) {
    const size_t at = v.elements() == 1 ? 0 : size_t(i);
    return v.is_float() ? v.reals.at(at) : double(v.ints.at(at));
}

// The quantization of an activation from inputs `scale_input` and `zp_input` (optional: zero
// point 0 of u8), and the stored type the zero point's type gives: per tensor, or, for the
// tensor `per_axis_of`, one scale and zero point per index of its logical axis `axis`.
struct ActivationQuant {
    dsl::ElemType type = dsl::ElemType::U8;
    dsl::Quant quant;
};

ActivationQuant activation_quant(NodeImport &node, size_t scale_input, size_t zp_input,
                                 const dsl::Layer *per_axis_of = nullptr, int64_t axis = 0) {
    const dsl::ConstValues scale = quant_values(node, scale_input, "scale");
    const int64_t count = scale.elements();
    if (!scale.is_float() || (count != 1 && !per_axis_of))
        node.fail("the scale of an activation must be one float (per-tensor quantization)");
    int64_t at = 0;
    if (count != 1) {
        const dsl::Shape &shape = per_axis_of->output().shape;
        const int64_t rank = shape.rank();
        at = axis < 0 ? axis + rank : axis;
        if (at < 0 || at >= rank)
            node.fail("axis " + std::to_string(axis) + " is outside the input's rank " +
                      std::to_string(rank));
        if (scale.shape.size() != 1 || count != shape[dsl::Dim(int(at))])
            node.fail("the scale must be one float or a 1-D tensor of one per index of axis " +
                      std::to_string(at) + " (" + std::to_string(shape[dsl::Dim(int(at))]) + ")");
    }
    std::vector<float> scales;
    for (double s : scale.reals) {
        if (!(s > 0) || !std::isfinite(s)) node.fail("the scale must be positive and finite");
        scales.push_back(float(s));
    }
    ActivationQuant q;
    std::vector<int32_t> zero_points(scales.size(), 0);
    if (node.has_input(zp_input)) {
        const dsl::ConstValues zp = quant_values(node, zp_input, "zero point");
        if (zp.elements() != count)
            node.fail(count == 1 ? "the zero point of an activation must be one value"
                                 : "the zero point and the scale differ in count");
        if (zp.type != dsl::ElemType::U8 && zp.type != dsl::ElemType::I8)
            node.fail("the zero point must be uint8 or int8 (int8 layers store u8 or i8)");
        q.type = zp.type;
        zero_points.assign(zp.ints.begin(), zp.ints.end());
    }
    q.quant = dsl::Quant::per_channel(scales, zero_points, dsl::Dim(int(at)));
    return q;
}

// The elements of `shape` (row-major) after the axis of `q`: one per tensor, where the index
// along the axis is (element / this) % scales.
int64_t inner_elements(const std::vector<int64_t> &shape, const dsl::Quant &q) {
    int64_t inner = 1;
    if (q.per_channel())
        for (size_t d = size_t(q.axis.index()) + 1; d < shape.size(); ++d) inner *= shape[d];
    return inner;
}

bool same_quant(const dsl::TensorDesc &t, const ActivationQuant &q) {
    return t.type == q.type && !t.quant.empty() && t.quant.scale == q.quant.scale &&
           t.quant.zero_point == q.quant.zero_point &&
           (!q.quant.per_channel() || t.quant.axis == q.quant.axis);
}

// "scale 0.5 and zero point 3", or "scales and zero points per index of axis 1".
std::string quant_text(const dsl::Quant &q) {
    if (q.per_channel())
        return "scales and zero points per index of axis " + std::to_string(q.axis.index());
    return "scale " + std::to_string(q.scale[0]) + " and zero point " +
           std::to_string(q.zero_point[0]);
}

// Graph input `input` stored as `q`: `vpuc run` users give it as integers of that type.
dsl::Layer quantized_input(const dsl::Layer &input, const ActivationQuant &q) {
    dsl::TensorDesc t = input.output();
    t.type = q.type;
    t.quant = q.quant;
    return dsl::Layer::input(t);
}

// Input 0 of a QLinear op or a DequantizeLinear as an int8 activation quantized as `q`: a
// computed int8 tensor of the same quantization, or a graph input that takes it.
dsl::Layer int8_activation(NodeImport &node, const dsl::Layer &x, const ActivationQuant &q) {
    if (x.op() == kAwaitingQuantize)
        node.fail("input '" + x.name() + "' is a float result, not yet quantized");
    if (x.is_input() && x.output().type == q.type && x.output().quant.empty())
        return quantized_input(x, q);
    if (!is_int8(x) || !same_quant(x.output(), q))
        node.fail("input '" + x.name() + "' is " + x.output().describe() + "; expected the " +
                  dsl::to_string(q.type) + " tensor of " + quant_text(q.quant) +
                  " a QuantizeLinear gives");
    return x;
}

// Weights as integers (q - zero point) in the registry's logical order, output channel
// outermost, with one scale per output channel.
struct IntegerWeights {
    dsl::ConstValues values; // I64
    std::vector<double> scales;
};

// The integers n and a scale s with values[i] = n[i] * s for one output channel's values (DQ
// folds them exactly), |n| <= 127 when such a scale exists, else <= 255: the smallest grid
// step that reproduces every value.
bool integer_grid(const double *values, int64_t count, int64_t *ints, double &scale) {
    double largest = 0;
    for (int64_t i = 0; i < count; ++i) largest = std::max(largest, std::abs(values[i]));
    if (largest == 0) {
        scale = 1;
        std::fill(ints, ints + count, 0);
        return true;
    }
    const auto fits = [&](int k) {
        const double step = largest / k;
        for (int64_t i = 0; i < count; ++i) {
            const double n = values[i] / step;
            if (std::abs(n - std::nearbyint(n)) > 1e-6) return false;
            ints[i] = int64_t(std::nearbyint(n));
        }
        scale = step;
        return true;
    };
    for (int k = 127; k >= 1; --k)
        if (fits(k)) return true;
    for (int k = 128; k <= 255; ++k)
        if (fits(k)) return true;
    return false;
}

// Real weights (DequantizeLinear of int8 ones), logical, output channel outermost.
IntegerWeights recovered_weights(NodeImport &node, const dsl::ConstValues &reals, int64_t oc) {
    IntegerWeights w;
    w.values.type = dsl::ElemType::I64;
    w.values.shape = reals.shape;
    w.values.ints.resize(reals.reals.size());
    const int64_t per_channel = reals.elements() / oc;
    for (int64_t c = 0; c < oc; ++c) {
        double scale = 1;
        if (!integer_grid(reals.reals.data() + c * per_channel, per_channel,
                          w.values.ints.data() + c * per_channel, scale))
            node.fail("the weights of output channel " + std::to_string(c) +
                      " are not int8 values times one scale (DequantizeLinear of int8 weights)");
        w.scales.push_back(scale);
    }
    return w;
}

// Integer weights with zero points per output channel (or one), logical as above.
IntegerWeights offset_weights(NodeImport &node, dsl::ConstValues q,
                              const dsl::ConstValues &zero_points, const dsl::ConstValues &scales,
                              int64_t oc) {
    if (q.is_float()) node.fail("the weights must be integers");
    for (const auto *v : {&zero_points, &scales})
        if (v->elements() != 1 && v->elements() != oc)
            node.fail("a weight scale or zero point must be one value or one per output "
                      "channel (" +
                      std::to_string(oc) + ")");
    const int64_t per_channel = q.elements() / oc;
    IntegerWeights w{std::move(q), {}};
    for (int64_t c = 0; c < oc; ++c) {
        const double scale = real_at(scales, c);
        if (!(scale > 0) || !std::isfinite(scale)) node.fail("a weight scale is not positive");
        w.scales.push_back(scale);
        const int64_t zero_point = int64_t(real_at(zero_points, c));
        for (int64_t i = 0; i < per_channel; ++i)
            w.values.ints[size_t(c * per_channel + i)] -= zero_point;
    }
    return w;
}

// The registry's int8 weights: the integers shifted by one zero point into int8.
void set_int8_weights(NodeImport &node, dsl::Attrs &attrs, IntegerWeights w) {
    const auto [low, high] = std::minmax_element(w.values.ints.begin(), w.values.ints.end());
    int64_t zero_point = 0;
    if (*low < -128 || *high > 127) {
        if (*high - *low > 255) node.fail("the weights span more than 256 integers");
        zero_point = -128 - *low;
    }
    for (int64_t &v : w.values.ints) v += zero_point;
    w.values.type = dsl::ElemType::I8;
    attrs.set("weights", dsl::const_buffer(w.values));
    attrs.set("weight_zero_point", zero_point);
}

// The bias in the accumulator's units (input scale x weight scale per channel), rounded.
void set_int32_bias(NodeImport &node, dsl::Attrs &attrs, const std::vector<double> &reals) {
    dsl::ConstValues bias{dsl::ElemType::I32, {int64_t(reals.size())}, {}, {}};
    for (double v : reals) {
        const double rounded = std::nearbyint(v);
        if (!(std::abs(rounded) <= double(std::numeric_limits<int32_t>::max())))
            node.fail("the bias does not fit int32 in the accumulator's units");
        bias.ints.push_back(int64_t(rounded));
    }
    attrs.set("bias", dsl::const_buffer(bias));
}

// Bias input `i` divided by the accumulator's scale of each of the `oc` channels.
std::vector<double> bias_in_accumulator_units(NodeImport &node, size_t i,
                                              const std::vector<double> &acc_scales) {
    const dsl::ConstValues b = quant_values(node, i, "bias");
    if (b.elements() != 1 && b.elements() != int64_t(acc_scales.size()))
        node.fail("the bias must be one value or " + std::to_string(acc_scales.size()));
    std::vector<double> units;
    for (size_t c = 0; c < acc_scales.size(); ++c)
        units.push_back(real_at(b, int64_t(c)) / acc_scales[c]);
    return units;
}

// Per-channel requantization of a conv or matmul, as the registry takes it.
void set_channel_requant(dsl::Attrs &attrs, const std::vector<algorithms::FixedPoint> &requant) {
    Halide::Buffer<uint16_t> mults(int(requant.size()));
    Halide::Buffer<uint8_t> shifts(int(requant.size()));
    for (size_t c = 0; c < requant.size(); ++c) {
        mults(int(c)) = requant[c].mult;
        shifts(int(c)) = requant[c].shift;
    }
    attrs.set("requant_mult", Halide::Buffer<>(mults));
    attrs.set("requant_shift", Halide::Buffer<>(shifts));
}

// A placeholder output stage, replaced when the output quantization is known.
void set_pending_output(dsl::Attrs &attrs, bool per_channel) {
    if (per_channel) {
        set_channel_requant(attrs, {algorithms::FixedPoint{}});
    } else {
        attrs.set("requant_mult", int64_t(1));
        attrs.set("requant_shift", int64_t(0));
    }
    attrs.set("output_type", std::string("i8"));
}

dsl::Layer awaiting_quantize(NodeImport &node, const dsl::Layer &int8_layer,
                             const std::vector<double> &acc_scales) {
    dsl::TensorDesc t = int8_layer.output();
    t.name = node.unique_name(node.name() + ".unquantized");
    t.type = dsl::ElemType::I32;
    t.quant = {};
    for (double s : acc_scales) {
        t.quant.scale.push_back(float(s));
        t.quant.zero_point.push_back(0);
    }
    const std::string message =
        failure_text(node, "its float result needs a QuantizeLinear: an int8 layer's output is "
                           "quantized (docs/onnx.md, \"Quantized models\")");
    dsl::Algorithm unquantized = [message](const std::vector<Halide::Func> &) -> Halide::Func {
        throw ModelError(message);
    };
    return dsl::Layer::make(kAwaitingQuantize, t, {int8_layer}, unquantized);
}

// `int8_layer` rebuilt to store `out`: per-channel requantization acc_scale / out_scale for
// a conv or matmul, the eltwise's and pools' own rules otherwise.
dsl::Layer with_output_quant(NodeImport &node, const dsl::Layer &int8_layer,
                             const std::vector<float> &acc_scales, const ActivationQuant &out) {
    dsl::Attrs attrs = int8_layer.attrs();
    const std::string &op = int8_layer.op();
    const double out_scale = out.quant.scale[0];
    const dsl::Quant &in_quant = int8_layer.inputs().at(0).output().quant;
    try {
        if (op == "conv2d" || op == "depthwise_conv2d" || op == "matmul") {
            std::vector<algorithms::FixedPoint> requant;
            for (float acc_scale : acc_scales)
                requant.push_back(algorithms::fixed_point(acc_scale / out_scale));
            set_channel_requant(attrs, requant);
        } else if (op == "add") {
            const algorithms::QuantEltwise q = algorithms::quant_eltwise(
                algorithms::EltwiseOp::Add, in_quant, int8_layer.inputs().at(1).output().quant,
                out.type, out.quant);
            attrs.set("in1_mult", int64_t(q.in1_mult));
            attrs.set("in2_mult", int64_t(q.in2_mult));
            attrs.set("requant_mult", int64_t(q.out.requant.mult));
            attrs.set("requant_shift", int64_t(q.out.requant.shift));
        } else if (op == "max_pool" || op == "avg_pool") {
            attrs =
                algorithms::int8_pool_attrs(int8_layer, in_quant.scale_at(0), out.type, out.quant);
        } else {
            node.fail("requantizing the output of " + op + " '" + int8_layer.name() +
                      "' to another scale is not supported");
        }
    } catch (const dsl::LayerError &e) {
        node.fail(e.what());
    }
    attrs.set("output_type", std::string(dsl::to_string(out.type)));
    attrs.set("output_scale", out_scale);
    attrs.set("output_zero_point", int64_t(out.quant.zero_point[0]));
    return node.build(op, int8_layer.name(), int8_layer.inputs(), attrs);
}

dsl::Layer quantized(NodeImport &node, const dsl::Layer &awaiting, const ActivationQuant &out) {
    return with_output_quant(node, awaiting.inputs().at(0), awaiting.output().quant.scale, out);
}

// [K, N] (or [N, K] transposed) as the registry's logical (n, k).
dsl::ConstValues matmul_layout(NodeImport &node, const dsl::Layer &a, const dsl::ConstValues &b,
                               bool trans_b) {
    if (a.output().shape.rank() != 2) node.fail("input 0 must have rank 2 (rows of features)");
    if (b.shape.size() != 2) node.fail("the weights must have rank 2");
    const int64_t k = trans_b ? b.shape[1] : b.shape[0], n = trans_b ? b.shape[0] : b.shape[1];
    if (a.output().shape[dsl::Dim(1)] != k)
        node.fail("rows of " + std::to_string(a.output().shape[dsl::Dim(1)]) +
                  " features times weights of " + std::to_string(k));
    return dsl::pick_elements(
        b, {n, k}, [&](const auto &i) { return trans_b ? i[0] * k + i[1] : i[1] * n + i[0]; });
}

// An int8 conv or matmul of `x` by `w`, awaiting its output quantization; the bias, if any,
// from input `bias`: real values, or integers in the accumulator's units (`bias_is_int32`).
struct Int8Product {
    dsl::Layer layer;
    std::vector<double> acc_scales;
};

Int8Product int8_product(NodeImport &node, const std::string &op, const std::string &name,
                         const dsl::Layer &x, dsl::Attrs attrs, const IntegerWeights &w,
                         std::optional<size_t> bias, bool bias_is_int32) {
    Int8Product p;
    for (double s : w.scales) p.acc_scales.push_back(double(x.output().quant.scale_at(0)) * s);
    set_int8_weights(node, attrs, w);
    if (bias && node.has_input(*bias)) {
        if (bias_is_int32) {
            const dsl::ConstValues b = quant_values(node, *bias, "bias");
            if (b.is_float() || b.elements() != int64_t(w.scales.size()))
                node.fail("the bias must be " + std::to_string(w.scales.size()) + " integers");
            set_int32_bias(node, attrs, std::vector<double>(b.ints.begin(), b.ints.end()));
        } else {
            set_int32_bias(node, attrs, bias_in_accumulator_units(node, *bias, p.acc_scales));
        }
    }
    set_pending_output(attrs, true);
    p.layer = node.build(op, name, {x}, attrs);
    return p;
}

} // namespace

bool reads_int8(const NodeImport &node) {
    return node.has_input(0) && is_int8(int8_source(node.input(0)));
}

bool reads_quantized_int8(const NodeImport &node) {
    return reads_int8(node) && !int8_source(node.input(0)).output().quant.empty();
}

bool awaits_quantize(const dsl::Layer &layer) {
    return layer.op() == kAwaitingQuantize;
}

// The weights of input `i`, a DequantizeLinear of integers quantized per tensor or along
// `channel_axis` (their output channels), as those integers: nothing to recover from reals.
// Null for weights of another origin, or of scales that are not positive.
const DequantizedConstant *dequantized_weights(NodeImport &node, size_t i, int64_t channel_axis) {
    const DequantizedConstant *dq = node.dequantized(node.constant_layer(i, "weights"));
    if (!dq || (dq->scale.elements() != 1 && dq->axis != channel_axis)) return nullptr;
    // Zero or negative scales (legal, if odd) take the general path, which recovers a grid.
    for (int64_t c = 0; c < dq->scale.elements(); ++c)
        if (!(real_at(dq->scale, c) > 0) || !std::isfinite(real_at(dq->scale, c))) return nullptr;
    return dq;
}

Layers import_quant_conv(NodeImport &node) {
    const dsl::Layer &x = int8_source(node.input(0));
    const DequantizedConstant *dq = dequantized_weights(node, 1, 0);
    const dsl::ConstValues w =
        dq ? dsl::const_values(dq->integers)
           : dsl::const_values(node.constant_input(1, "weights"), node.node().input(1));
    bool depthwise = false;
    dsl::Attrs attrs = conv_geometry(node, x, w, depthwise);
    if (!dq && !w.is_float()) node.fail("the weights must be DequantizeLinear'd int8 values");
    const IntegerWeights iw =
        dq ? offset_weights(node, conv_layout(w), dq->zero_point, dq->scale, w.shape[0])
           : recovered_weights(node, conv_layout(w), w.shape[0]);
    const Int8Product p = int8_product(node, depthwise ? "depthwise_conv2d" : "conv2d", node.name(),
                                       x, attrs, iw, 2, false);
    return {awaiting_quantize(node, p.layer, p.acc_scales)};
}

Layers import_quant_fully_connected(NodeImport &node) {
    const bool gemm = node.node().op_type() == "Gemm";
    if (gemm) {
        node.expect_int("transA", 0, "A must be rows of features");
        if (node.attr_float("alpha", 1.0f) != 1.0f || node.attr_float("beta", 1.0f) != 1.0f)
            node.fail("alpha and beta other than 1 are not supported on int8 tensors");
    }
    const bool trans_b = gemm && node.attr_int("transB", 0) != 0;
    const dsl::Layer &a = int8_source(node.input(0));
    // Output channels are B's rows when transposed, else its columns.
    const DequantizedConstant *dq = dequantized_weights(node, 1, trans_b ? 0 : 1);
    const dsl::ConstValues b =
        dq ? dsl::const_values(dq->integers)
           : dsl::const_values(node.constant_input(1, "weights"), node.node().input(1));
    if (!dq && !b.is_float()) node.fail("the weights must be DequantizeLinear'd int8 values");
    const dsl::ConstValues logical = matmul_layout(node, a, b, trans_b);
    const IntegerWeights iw =
        dq ? offset_weights(node, logical, dq->zero_point, dq->scale, logical.shape[0])
           : recovered_weights(node, logical, logical.shape[0]);
    const Int8Product p = int8_product(node, "matmul", node.name(), a, {}, iw,
                                       gemm ? std::optional<size_t>(2) : std::nullopt, false);
    return {awaiting_quantize(node, p.layer, p.acc_scales)};
}

Layers import_quant_add(NodeImport &node) {
    const dsl::Layer &a = int8_source(node.input(0)), &b = int8_source(node.input(1));
    if (!is_int8(b) || a.output().quant.empty() || b.output().quant.empty())
        node.fail("an Add of int8 tensors takes two quantized (DequantizeLinear'd) tensors");
    if (a.output().shape != b.output().shape)
        node.fail("an Add of int8 tensors of different shapes is not supported");
    const algorithms::QuantEltwise placeholder =
        algorithms::quant_eltwise(algorithms::EltwiseOp::Add, a.output().quant, b.output().quant,
                                  dsl::ElemType::I8, a.output().quant);
    dsl::Attrs attrs;
    attrs.set("in1_mult", int64_t(placeholder.in1_mult));
    attrs.set("in2_mult", int64_t(placeholder.in2_mult));
    set_pending_output(attrs, false);
    return {awaiting_quantize(node, node.build("add", {a, b}, attrs), {})};
}

// Relu or Clip between an int8 layer and its QuantizeLinear: a clamp in its output stage.
Layers import_quant_activation(NodeImport &node) {
    const dsl::Layer &awaiting = node.input(0);
    const dsl::Layer &int8_layer = awaiting.inputs().at(0);
    double low = 0, high = std::numeric_limits<double>::infinity();
    if (node.node().op_type() == "Clip") {
        for (size_t i : {size_t(1), size_t(2)}) {
            if (!node.has_input(i)) continue;
            const dsl::ConstValues bound = quant_values(node, i, i == 1 ? "min" : "max");
            if (bound.elements() != 1) node.fail("min and max must be one value each");
            (i == 1 ? low : high) = real_at(bound, 0);
        }
        if (!node.has_input(1)) low = -std::numeric_limits<double>::infinity();
    }
    dsl::Attrs attrs = int8_layer.attrs();
    if (attrs.get_string("activation") != "none")
        node.fail("a second activation after " + int8_layer.name() + "'s is not supported");
    low = std::max(low, attrs.get_float("clamp_low"));
    high = std::min(high, attrs.get_float("clamp_high"));
    if (!(low <= high)) node.fail("the clamp bounds leave no values");
    attrs.set("clamp_low", low);
    attrs.set("clamp_high", high);
    const dsl::Layer rebuilt =
        node.build(int8_layer.op(), int8_layer.name(), int8_layer.inputs(), attrs);
    std::vector<double> acc_scales(awaiting.output().quant.scale.begin(),
                                   awaiting.output().quant.scale.end());
    return {awaiting_quantize(node, rebuilt, acc_scales)};
}

Layers import_quantize_linear(NodeImport &node) {
    const dsl::Layer &x = node.input(0);
    const ActivationQuant q = activation_quant(node, 1, 2, &x, node.attr_int("axis", 1));
    const dsl::Quant &quant = q.quant;
    if (dsl::is_constant(x)) {
        // Round half to even, as ONNX does, then saturate.
        const dsl::ConstValues v = dsl::const_values(x);
        dsl::ConstValues stored{q.type, v.shape, {}, {}};
        const double lo = q.type == dsl::ElemType::U8 ? 0 : -128;
        const double hi = q.type == dsl::ElemType::U8 ? 255 : 127;
        const int64_t inner = inner_elements(v.shape, quant);
        for (int64_t i = 0; i < v.elements(); ++i) {
            const int64_t at = (i / inner) % int64_t(quant.scale.size());
            stored.ints.push_back(int64_t(std::clamp(
                std::nearbyint(real_at(v, i) / quant.scale_at(at)) + quant.zero_point_at(at), lo,
                hi)));
        }
        return {dsl::LayerRegistry::constant(node.name(), dsl::const_buffer(stored))};
    }
    if (same_quant(int8_source(x).output(), q)) return {int8_source(x)};
    if (quant.per_channel() && (awaits_quantize(x) || is_int8(x)))
        node.fail("input '" + x.name() +
                  "' is an int8 layer's result, which is requantized per tensor only");
    if (awaits_quantize(x)) return {quantized(node, x, q)};
    if (is_int8(x)) return {with_output_quant(node, x, {}, q)};
    dsl::Attrs attrs;
    attrs.set("output_type", std::string(dsl::to_string(q.type)));
    if (quant.per_channel()) {
        attrs.set("axis", int64_t(quant.axis.index()));
        const int64_t count = int64_t(quant.scale.size());
        attrs.set("output_scales",
                  dsl::const_buffer({dsl::ElemType::F32,
                                     {count},
                                     {},
                                     std::vector<double>(quant.scale.begin(), quant.scale.end())}));
        attrs.set("output_zero_points",
                  dsl::const_buffer({dsl::ElemType::I32,
                                     {count},
                                     {quant.zero_point.begin(), quant.zero_point.end()},
                                     {}}));
    } else {
        attrs.set("output_scale", double(quant.scale[0]));
        attrs.set("output_zero_point", int64_t(quant.zero_point[0]));
    }
    return {node.build("quantize", {x}, attrs)};
}

Layers import_dequantize_linear(NodeImport &node) {
    const dsl::Layer &x = node.input(0);
    const int64_t axis = node.attr_int("axis", 1);
    if (dsl::is_constant(x)) {
        const dsl::ConstValues q = dsl::const_values(x);
        if (q.is_float()) node.fail("the input must be integers");
        const dsl::ConstValues scale = quant_values(node, 1, "scale");
        dsl::ConstValues zp{q.type, {1}, {0}, {}};
        if (node.has_input(2)) zp = quant_values(node, 2, "zero point");
        const int64_t rank = int64_t(q.shape.size());
        const int64_t a = axis < 0 ? axis + rank : axis;
        const bool per_axis = scale.elements() != 1;
        if (per_axis && (a < 0 || a >= rank || scale.elements() != q.shape[size_t(a)]))
            node.fail("the scale must be one value or one per element of axis " +
                      std::to_string(axis));
        if (zp.elements() != 1 && zp.elements() != scale.elements())
            node.fail("the zero point and the scale differ in count");
        // Runs of `inner` elements share a scale and zero point (per tensor: one run).
        const int64_t elements = q.elements(), channels = per_axis ? q.shape[size_t(a)] : 1;
        int64_t inner = std::max<int64_t>(elements, 1);
        if (per_axis) {
            inner = 1;
            for (int64_t d = a + 1; d < rank; ++d) inner *= q.shape[size_t(d)];
        }
        // Exact in double: a 9-bit integer times a float's 24-bit mantissa. Written in place:
        // a network's weights are tens of millions of values.
        Halide::Buffer<double> reals(std::vector<int>(q.shape.rbegin(), q.shape.rend()));
        double *out = reals.data();
        for (int64_t i = 0; i < elements; i += inner) {
            const int64_t channel = (i / inner) % channels;
            const double zero = real_at(zp, channel), step = real_at(scale, channel);
            for (int64_t j = i; j < std::min(i + inner, elements); ++j)
                out[j] = (double(q.ints[size_t(j)]) - zero) * step;
        }
        const dsl::Layer constant = dsl::LayerRegistry::constant(node.name(), reals);
        node.record_dequantized(constant, {x, scale, zp, per_axis ? a : 0});
        return {constant};
    }
    return {node.build("dequantize",
                       {int8_activation(node, x, activation_quant(node, 1, 2, &x, axis))}, {})};
}

Layers import_qlinear_conv(NodeImport &node) {
    const dsl::Layer x = int8_activation(node, node.input(0), activation_quant(node, 1, 2));
    const dsl::ConstValues w =
        dsl::const_values(node.constant_input(3, "weights"), node.node().input(3));
    bool depthwise = false;
    dsl::Attrs attrs = conv_geometry(node, x, w, depthwise);
    dsl::ConstValues zero_points{dsl::ElemType::I64, {1}, {0}, {}};
    if (node.has_input(5)) zero_points = quant_values(node, 5, "weight zero point");
    const IntegerWeights iw = offset_weights(node, conv_layout(w), zero_points,
                                             quant_values(node, 4, "weight scale"), w.shape[0]);
    const Int8Product p = int8_product(node, depthwise ? "depthwise_conv2d" : "conv2d", node.name(),
                                       x, attrs, iw, 8, true);
    const std::vector<float> acc_scales(p.acc_scales.begin(), p.acc_scales.end());
    return {with_output_quant(node, p.layer, acc_scales, activation_quant(node, 6, 7))};
}

// [..., M, K] x [K, N]: A of rank 3 or more is rows [prod(...) * M, K] for the int8 matmul (its
// rows are images: a view of logical order) and the product [..., M, N] again. Weights of rank 3
// or more must repeat one matrix over batch dimensions that A has (numpy broadcasting then gives
// every batch that product).
Layers import_qlinear_matmul(NodeImport &node) {
    const dsl::Layer a = int8_activation(node, node.input(0), activation_quant(node, 1, 2));
    const dsl::ConstValues b =
        dsl::const_values(node.constant_input(3, "weights"), node.node().input(3));
    const std::vector<int64_t> a_shape = a.output().shape.raw();
    const size_t a_rank = a_shape.size(), b_rank = b.shape.size();
    if (a_rank < 2 || b_rank < 2 || b_rank > a_rank)
        node.fail("input 0 of rank " + std::to_string(a_rank) + " times weights of rank " +
                  std::to_string(b_rank) +
                  ": both need rank 2 or more, the weights no more than input 0");
    const int64_t k = b.shape[b_rank - 2], n = b.shape[b_rank - 1];
    for (size_t d = 0; d + 2 < b_rank; ++d) {
        const int64_t extent = b.shape[d], of_a = a_shape[a_rank - b_rank + d];
        if (extent != 1 && extent != of_a)
            node.fail("the weights' batch dimension " + std::to_string(d) + " (" +
                      std::to_string(extent) + ") does not broadcast to input 0's (" +
                      std::to_string(of_a) + ")");
    }
    if (b.is_float()) node.fail("the weights must be integers");
    // The first matrix; the others must equal it.
    dsl::ConstValues matrix{b.type, {k, n}, {}, {}};
    matrix.ints.assign(b.ints.begin(), b.ints.begin() + k * n);
    for (size_t i = 0; i < b.ints.size(); ++i)
        if (b.ints[i] != matrix.ints[i % size_t(k * n)])
            node.fail("weights of rank " + std::to_string(b_rank) +
                      " with different matrices per batch are not supported (only one matrix "
                      "repeated)");
    const int64_t k_of_a = a_shape.back();
    int64_t rows = 1;
    for (size_t d = 0; d + 1 < a_rank; ++d) rows *= a_shape[d];
    auto reshaped = [&](const std::string &suffix, const dsl::Layer &in,
                        const std::vector<int64_t> &to) {
        return node.build("reshape", node.unique_name(node.name() + suffix), {in},
                          dsl::Attrs().set("shape", to));
    };
    // Rank 4 and 5 first as [N, rows of an image, K], keeping the batch (a SHAVE kernel for a
    // 4-D tensor held NHWC, else a view), so that the rows are a view of logical order.
    const dsl::Layer images =
        a_rank > 3 ? reshaped(".images", a, {a_shape[0], rows / a_shape[0], k_of_a}) : a;
    const dsl::Layer x = a_rank == 2 ? a : reshaped(".rows", images, {rows, k_of_a});
    const dsl::ConstValues logical = matmul_layout(node, x, matrix, false);
    dsl::ConstValues zero_points{dsl::ElemType::I64, {1}, {0}, {}};
    if (node.has_input(5)) zero_points = quant_values(node, 5, "weight zero point");
    const IntegerWeights iw = offset_weights(
        node, logical, zero_points, quant_values(node, 4, "weight scale"), logical.shape[0]);
    const std::string name = a_rank == 2 ? node.name() : node.unique_name(node.name() + ".product");
    const Int8Product p = int8_product(node, "matmul", name, x, {}, iw, std::nullopt, true);
    const std::vector<float> acc_scales(p.acc_scales.begin(), p.acc_scales.end());
    const dsl::Layer product =
        with_output_quant(node, p.layer, acc_scales, activation_quant(node, 6, 7));
    if (a_rank == 2) return {product};
    std::vector<int64_t> shape = a_shape;
    shape.back() = n;
    return {node.build("reshape", {product}, dsl::Attrs().set("shape", shape))};
}

} // namespace vpuc::frontend::detail
