// Pieces shared by the layer constructors: tensor facts, the MAC's input operand, the padded
// input Func, output descriptions and argument checks.
#pragma once

#include <Halide.h>

#include <optional>
#include <stdexcept>
#include <string>
#include <tuple>
#include <vector>

#include "algorithms/arith.h"
#include "algorithms/layers.h"
#include "algorithms/registry.h"
#include "dsl/constant_values.h"
#include "dsl/layer.h"
#include "dsl/registry.h"

namespace vpuc::algorithms::detail {

// What an algorithm needs to know about one input tensor.
struct InputInfo {
    int64_t n = 1, c = 0, w = 0, h = 0; // n: images in the batch, computed one at a time
    dsl::ElemType type = dsl::ElemType::F32;
    Halide::Type halide_type;
    bool quantized = false; // u8/i8
    float scale = 1;
    int32_t zero_point = 0;
};

// The facts of the input's device view (dsl::device_view: n, c, h and w of any rank 0 to
// dsl::kMaxRank). Throws LayerError naming `what` (e.g. "conv2d 'c1'") on a rank the device
// does not have, an empty extent, or a per-channel-quantized input.
// `takes_i32`: the layer also computes on i32 tensors (eltwise's exact integer arithmetic).
InputInfo input_info(const std::string &what, const dsl::Layer &input, bool takes_i32 = false);
// input_info of an input that may also be quantized per index of an axis (a layer reading the
// quantization's tables itself): scale and zero_point are then index 0's.
InputInfo per_axis_input_info(const std::string &what, const dsl::Layer &input);
// The device dimension (C, H or W) of logical axis `axis` of tensor `t` (negative counts from
// the end), for a layer computing along it. Throws LayerError naming `what` when the axis is
// outside the rank, is the batch (images are computed one at a time), or shares its device
// dimension with other axes above 1 (those sharing H from rank 5 on).
dsl::Dim device_axis_of(const std::string &what, const dsl::TensorDesc &t, int64_t axis);
// The dimension of Halide's (c, x, y) holding device dimension C, W or H.
int halide_dim(dsl::Dim device);
// `t` as the graph knows it: a device view (the lowering's tensors) back in its graph shape and
// logical order; any other tensor as it is. Views and axes are defined on this tensor.
dsl::TensorDesc graph_tensor(const dsl::TensorDesc &t);
// `box` of a tensor of shape `logical`, in the 4-D coordinates of its device view; nullopt when
// it is not a box there (it cuts an axis sharing H while an axis inside it is not whole).
std::optional<dsl::Box> device_box(const dsl::Shape &logical, const dsl::Box &box);

// input_info of the input of a window (a conv or a pool): 4-D, or 3-D (N, C, W) as a
// 1-D window over W.
InputInfo spatial_input_info(const std::string &what, const dsl::Layer &input);

// Element `flat` of one image of `input` (in [0, c * h * w), its logical row-major order), for an
// output element that may read any element of it (a gather of constant indices): the mask, a
// no-op on those non-negative values, hides the index from bounds inference, so each task reads
// the image whole, and the clamp keeps the read inside it.
Halide::Expr any_image_element(const Halide::Func &input, const InputInfo &in,
                               const Halide::Expr &flat);
// A Func with a name unique in the process, so composed algorithms never collide.
Halide::Func named_func(const std::string &name);
// A unique name for a reduction domain of layer `name` (Halide's own splits of a domain break
// on a '.' in its name, and importers name layers "y.kept").
std::string rdom_name(const std::string &name);

// The value the DPU's MAC takes from a stored element: i32(v) - zero point, or f32(v).
Halide::Expr mac_operand(const Halide::Expr &stored, const InputInfo &in);

// P(c, x, y) = mac_operand(in(c, clamp(x), clamp(y))) inside the image, `outside` elsewhere.
Halide::Func padded_input(const std::string &name, const Halide::Func &in, const InputInfo &info,
                          const Halide::Expr &outside);

// v * stride + k * dilation - pad, with unit factors and zero pad left out.
Halide::Expr window_coord(const Halide::Expr &v, int stride, const Halide::Expr &k, int dilation,
                          int pad);

// Output extent of a window: (in + pads - dilated kernel) / stride + 1; throws if < 1.
int64_t window_extent(const std::string &what, int64_t in, int pad_a, int pad_b, int kernel,
                      int stride, int dilation);

// The logical dimensions of `t` of extent above 1, in memory order (outermost first): two
// tensors with the same elements in the same sequence share their bytes (a reshape or a
// transpose that is a view).
std::vector<int64_t> memory_sequence(const dsl::TensorDesc &t);

// The output of a layer computing each image of `like`'s batch, of extents c, w and h on the
// device: of `like`'s rank (dsl::logical_shape) and memory order. Throws LayerError naming the
// layer when that rank cannot hold it.
dsl::TensorDesc output_desc(const std::string &name, const dsl::Layer &like, int64_t c, int64_t w,
                            int64_t h, dsl::ElemType type, dsl::Quant quant);

// Attribute schemas and conversions shared by the registry entries (registry.cpp lists them).
// The fused activation: activation ("none", "relu", "leaky_relu"), alpha, clamp_low,
// clamp_high, in real units.
std::vector<dsl::AttrSpec> activation_specs();
void set_activation(dsl::Attrs &attrs, const Activation &act);
Activation activation_of(const dsl::Attrs &attrs);
// ONNX's order: strides [h, w], pads [top, left, bottom, right].
dsl::AttrSpec pair_spec(const std::string &name, int64_t min, const std::string &doc);
dsl::AttrSpec pads_spec();
// Reads them back: a pair as {h, w}, pads as {top, left, bottom, right}.
std::tuple<int, int> pair_of(const dsl::Attrs &attrs, const std::string &name);
std::tuple<int, int, int, int> pads_of(const dsl::Attrs &attrs);
// An int8 output's type and per-tensor quantization: output_type ("u8"/"i8"), output_scale,
// output_zero_point, all optional.
std::vector<dsl::AttrSpec> output_quant_specs();
void set_output_quant(dsl::Attrs &attrs, dsl::ElemType type, const dsl::Quant &quant);
// The output's type and quantization if the attributes give them.
bool output_quant_of(const dsl::Attrs &attrs, dsl::ElemType &type, dsl::Quant &quant);
// A tensor attribute as a typed buffer; throws AttrError naming the attribute on another type.
template <typename T>
Halide::Buffer<T> tensor_as(const dsl::Attrs &attrs, const std::string &name) {
    const Halide::Buffer<> &b = attrs.get_tensor(name);
    if (b.type() != Halide::type_of<T>())
        throw dsl::AttrError("attribute '" + name + "' holds " + dsl::to_string(dsl::AttrValue(b)) +
                             "; expected " + dsl::type_name(Halide::type_of<T>()) + " elements");
    return Halide::Buffer<T>(b);
}
template <typename T>
std::vector<T> tensor_values(const dsl::Attrs &attrs, const std::string &name) {
    if (!attrs.has(name)) return {};
    Halide::Buffer<T> b = tensor_as<T>(attrs, name);
    return std::vector<T>(b.data(), b.data() + b.number_of_elements());
}
template <typename T> Halide::Buffer<> vector_tensor(const std::vector<T> &values) {
    Halide::Buffer<T> b(static_cast<int>(values.size()));
    std::copy(values.begin(), values.end(), b.data());
    return b;
}

// fp16 arithmetic (attribute `arithmetic` fp16 of elu, selu, swish, mish and sigmoid): every
// operation on fp16 vectors, as Intel's half8 kernels compute, within the error bound
// docs/layers.md states. The attribute's spec; whether `attrs` ask for it; an error naming
// `what` unless `input` is f16.
dsl::AttrSpec arithmetic_spec();
bool fp16_arithmetic(const dsl::Attrs &attrs);
void check_fp16_arithmetic(const std::string &what, const dsl::Layer &input);
// `value` in the type of `x` (a float literal would make Halide compute in float32).
Halide::Expr constant_like(const Halide::Expr &x, double value);
// `y`, or x where x is NaN: Halide 14 rounds each fp16 operation's float32 result to fp16 with
// bit arithmetic that stores NaN as an infinity, so a NaN passes only as x itself.
Halide::Expr nan_as_x(const Halide::Expr &x, const Halide::Expr &y);

// Float32 SHAVE layers on int8 tensors: the stored value in real units, and a real value
// stored as `type` with `q` (rounded half to even, saturated).
Halide::Expr dequantize(const Halide::Expr &stored, const InputInfo &in);
Halide::Expr quantize(const Halide::Expr &value, const dsl::Quant &q, dsl::ElemType type);
// A rounded real value plus its zero point, saturated to `type` and cast to it.
Halide::Expr saturate(const Halide::Expr &stored, dsl::ElemType type);
// 1 / scale when, for every fp16 value x but NaN, round(x * (1 / scale)) plus the zero point and
// saturated to `type` is what round(x / scale) gives (checked on all 65,536): the SHAVE has no
// vector divide, and a division costs a reciprocal and a multiply per vector. nullopt when some
// x rounds the other way (1.0703125 / 0.017125 rounds to 63, 1.0703125 * fl(1 / 0.017125) to
// 62: quant_import_test).
std::optional<float> exact_f16_reciprocal(float scale, int32_t zero_point, dsl::ElemType type);
// Fewer instructions for the same integers, where the check on all 65,536 fp16 values allows:
// x is first clamped to [low, high] in fp16, the fp16 values nearest the type's range, so the
// result needs no saturation; x * reciprocal plus 1.5 * 2^23 rounds half to even into the low
// bits of its float32 word (every |x * reciprocal| < 2^22), which are the integer modulo 256;
// the zero point is added to that byte. 21 vector instructions per 16 values where
// exact_f16_reciprocal's form takes 28.
struct Fp16QuantizeByBits {
    float reciprocal = 0;
    Halide::float16_t low, high;
};
std::optional<Fp16QuantizeByBits> fp16_quantize_by_bits(float scale, int32_t zero_point,
                                                        dsl::ElemType type);
// The float32 constant whose low mantissa bits take a value below 2^22 rounded half to even.
constexpr float kRoundingBias = 12582912.0f; // 1.5 * 2^23
// A float32 result stored as `type`, an fp16 NaN as the quiet NaN 0x7e00 (Halide's conversion
// to f16 makes a NaN an infinity) (eltwise.cpp).
Halide::Expr stored_as(const Halide::Expr &value, const Halide::Type &type);
// ONNX's comparisons (op equal, greater, greater_or_equal, less or less_or_equal) of two values
// of one type: floats with IEEE semantics, a NaN unequal and unordered (eltwise.cpp).
Halide::Expr compare(const std::string &op, const Halide::Expr &a, const Halide::Expr &b);
// ONNX's Pow in float32: a negative base to an integer power takes the sign of an odd one, to
// any other power NaN (eltwise.cpp).
Halide::Expr onnx_pow(const Halide::Expr &base, const Halide::Expr &exponent);
// a / b: floats in float32; integers truncated toward zero, as C, ONNX Runtime and ONNX's
// reference implementation divide them (Halide's integer division is Euclidean: its remainder is
// never negative, and x / 0 = 0) (eltwise.cpp).
Halide::Expr quotient(const Halide::Expr &a, const Halide::Expr &b);
// The output quantization of an int8 layer whose results lie in [0, 1] (sigmoid, softmax):
// `given`, else the type's 256 steps over [0, 1].
dsl::Quant probability_quant(const InputInfo &in, const std::optional<dsl::Quant> &given);
// Its attributes: output_scale and output_zero_point, both optional.
std::vector<dsl::AttrSpec> probability_specs();
void set_probability_quant(dsl::Attrs &a, const std::optional<dsl::Quant> &q);
std::optional<dsl::Quant> probability_quant_of(const dsl::Attrs &a);

// Each layer family adds its entries (conv.cpp, pool.cpp, eltwise.cpp, activation.cpp).
void register_conv_layers(dsl::LayerRegistry &r);
void register_pool_layers(dsl::LayerRegistry &r);
void register_eltwise_layers(dsl::LayerRegistry &r);
void register_activation_layers(dsl::LayerRegistry &r);
// The layers of algorithms/layers/, one file each (generated: layer_files.cpp.in).
void register_layer_files(dsl::LayerRegistry &r);

// A graph input for a registry example: 1 x c x h x w NHWC, u8 quantized (0.05, 120) or f16.
dsl::Layer example_input(const std::string &name, int64_t c, int64_t w, int64_t h,
                         dsl::ElemType type);
// Deterministic constants for registry examples: int8 weights in [-100, 100] with per-channel
// bias and requantization to u8 (0.05, 10); fp16 weights in about [-0.3, 0.3] with per-channel
// bias and scale. `dims` as the op's weights.
QuantWeights example_quant_weights(const std::vector<int> &dims, int out_channels);
FloatWeights example_float_weights(const std::vector<int> &dims, int out_channels);

[[noreturn]] inline void invalid(const std::string &what, const std::string &why) {
    throw dsl::LayerError(what + ": " + why);
}

} // namespace vpuc::algorithms::detail
