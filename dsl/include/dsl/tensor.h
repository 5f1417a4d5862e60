// What Halide does not carry about a tensor: logical shape, element type, quantization and
// memory layout.
#pragma once

#include <Halide.h>

#include <cstdint>
#include <string>
#include <vector>

#include "dsl/dims.h"
#include "vpu_target/error.h"

namespace vpuc::dsl {

// A layer, tensor or constant that cannot be defined as given (a shape, type, quantization or
// parameter that does not fit). The message names the layer or tensor.
class LayerError : public Error {
  public:
    using Error::Error;
};

// The element types of graph tensors: the device's (u8, i8, f16, f32, i32) and, for indices,
// masks and shape arithmetic, i64, bool and f64, which the device does not have. Those map to
// a device type at one checked point (to_device) or are folded away at compile time.
enum class ElemType { U8, I8, F16, F32, I32, I64, Bool, F64 };

const char *to_string(ElemType t);
int bytes_of(ElemType t);
Halide::Type halide_type(ElemType t);
// The element type of Halide type `t`; throws LayerError naming `what` for a type graph
// tensors do not have (u16, i16, u32, u64).
ElemType elem_type(const Halide::Type &t, const std::string &what);
bool is_quantized_int(ElemType t); // u8 / i8
bool is_device_type(ElemType t);   // u8, i8, f16, f32, i32
// The device type a graph type maps onto: i64 -> i32, bool -> u8, f64 -> f32; device types
// map onto themselves.
ElemType device_type(ElemType t);

// Affine quantization: real = scale * (stored - zero_point). One entry per tensor, or one
// per index of `axis` (per-channel, for weights).
struct Quant {
    std::vector<float> scale;
    std::vector<int32_t> zero_point;
    Dim axis = dims::C;

    static Quant none() { return {}; }
    static Quant per_tensor(float scale, int32_t zero_point) {
        return {{scale}, {zero_point}, dims::C};
    }
    static Quant per_channel(std::vector<float> scales, std::vector<int32_t> zero_points, Dim axis);

    bool empty() const { return scale.empty(); }
    bool per_channel() const { return scale.size() > 1; }
    float scale_at(int64_t index) const { return scale.at(per_channel() ? size_t(index) : 0); }
    int32_t zero_point_at(int64_t index) const {
        return zero_point.at(per_channel() ? size_t(index) : 0);
    }
};

struct TensorDesc {
    std::string name;
    Shape shape;
    ElemType type = ElemType::F32;
    Quant quant;
    DimsOrder order = DimsOrder::NCHW();

    int64_t bytes() const { return shape.elements() * bytes_of(type); }
    std::string describe() const; // "conv1: 1x64x56x56 u8 NHWC q(0.02, 128)"
};

// `values` (a buffer of `tensor`'s type, as algorithms::make_buffer lays it out) in
// device_type(tensor.type): i64 checked to fit in i32, bool as 0 or 1, f64 rounded to the
// nearest f32 and, when finite, checked to stay finite. Throws LayerError naming the tensor, the
// first element that does not fit and its value.
Halide::Buffer<> to_device(const TensorDesc &tensor, const Halide::Buffer<> &values);

} // namespace vpuc::dsl
