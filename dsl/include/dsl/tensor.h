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

enum class ElemType { U8, I8, F16, F32, I32 };

const char *to_string(ElemType t);
int bytes_of(ElemType t);
Halide::Type halide_type(ElemType t);
bool is_quantized_int(ElemType t); // u8 / i8

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

} // namespace vpuc::dsl
