#include "dsl/tensor.h"

#include <sstream>

namespace vpuc::dsl {

const char *to_string(ElemType t) {
    switch (t) {
    case ElemType::U8:
        return "u8";
    case ElemType::I8:
        return "i8";
    case ElemType::F16:
        return "f16";
    case ElemType::F32:
        return "f32";
    case ElemType::I32:
        return "i32";
    }
    return "?";
}

int bytes_of(ElemType t) {
    switch (t) {
    case ElemType::U8:
    case ElemType::I8:
        return 1;
    case ElemType::F16:
        return 2;
    case ElemType::F32:
    case ElemType::I32:
        return 4;
    }
    return 0;
}

Halide::Type halide_type(ElemType t) {
    switch (t) {
    case ElemType::U8:
        return Halide::UInt(8);
    case ElemType::I8:
        return Halide::Int(8);
    case ElemType::F16:
        return Halide::Float(16);
    case ElemType::F32:
        return Halide::Float(32);
    case ElemType::I32:
        return Halide::Int(32);
    }
    return Halide::Float(32);
}

bool is_quantized_int(ElemType t) {
    return t == ElemType::U8 || t == ElemType::I8;
}

Quant Quant::per_channel(std::vector<float> scales, std::vector<int32_t> zero_points, Dim axis) {
    if (scales.size() != zero_points.size())
        throw LayerError("per-channel quantization: " + std::to_string(scales.size()) +
                         " scales but " + std::to_string(zero_points.size()) + " zero points");
    return {std::move(scales), std::move(zero_points), axis};
}

std::string TensorDesc::describe() const {
    std::ostringstream os;
    os << name << ": " << to_string(shape) << " " << to_string(type) << " " << order.name();
    if (!quant.empty()) {
        if (quant.per_channel())
            os << " q(per-channel x" << quant.scale.size() << ")";
        else
            os << " q(" << quant.scale[0] << ", " << quant.zero_point[0] << ")";
    }
    return os.str();
}

} // namespace vpuc::dsl
