// ONNX tensors as Halide buffers: the element types graph tensors have, and the values of
// initializers and Constant nodes in any of the fields ONNX stores them in.
#include <cstring>
#include <limits>

#include "onnx_internal.h"

namespace vpuc::frontend::detail {

namespace {

using onnx::TensorProto;

const char *onnx_type_name(int32_t t) {
    return TensorProto::DataType_IsValid(t)
               ? TensorProto::DataType_Name(TensorProto::DataType(t)).c_str()
               : "an unknown type";
}

// The typed field holding values of `type` when raw_data is not used, as 64-bit words.
template <typename Field> std::vector<uint64_t> words(const Field &field) {
    std::vector<uint64_t> out;
    out.reserve(size_t(field.size()));
    for (auto v : field) {
        uint64_t w = 0;
        std::memcpy(&w, &v, sizeof(v));
        out.push_back(w);
    }
    return out;
}

// The values int32_data may hold for `type` (fp16 as its bits).
std::pair<int64_t, int64_t> int32_field_range(dsl::ElemType type) {
    switch (type) {
    case dsl::ElemType::U8:
        return {0, 255};
    case dsl::ElemType::I8:
        return {-128, 127};
    case dsl::ElemType::Bool:
        return {0, 1};
    case dsl::ElemType::F16:
        return {0, 65535};
    default:
        return {std::numeric_limits<int32_t>::min(), std::numeric_limits<int32_t>::max()};
    }
}

} // namespace

dsl::ElemType elem_type(int32_t onnx_type, const std::string &what) {
    switch (onnx_type) {
    case TensorProto::FLOAT:
        return dsl::ElemType::F32;
    case TensorProto::FLOAT16:
        return dsl::ElemType::F16;
    case TensorProto::DOUBLE:
        return dsl::ElemType::F64;
    case TensorProto::UINT8:
        return dsl::ElemType::U8;
    case TensorProto::INT8:
        return dsl::ElemType::I8;
    case TensorProto::INT32:
        return dsl::ElemType::I32;
    case TensorProto::INT64:
        return dsl::ElemType::I64;
    case TensorProto::BOOL:
        return dsl::ElemType::Bool;
    default:
        throw ModelError(what + ": element type " + onnx_type_name(onnx_type) +
                         " is not supported (supported: FLOAT, FLOAT16, DOUBLE, UINT8, INT8, "
                         "INT32, INT64, BOOL)");
    }
}

std::optional<uint64_t> tensor_bytes(int32_t onnx_type, uint64_t count) {
    uint64_t size = 0;
    switch (onnx_type) {
    case TensorProto::UINT8:
    case TensorProto::INT8:
    case TensorProto::BOOL:
        size = 1;
        break;
    case TensorProto::UINT16:
    case TensorProto::INT16:
    case TensorProto::FLOAT16:
    case TensorProto::BFLOAT16:
        size = 2;
        break;
    case TensorProto::FLOAT:
    case TensorProto::INT32:
    case TensorProto::UINT32:
        size = 4;
        break;
    case TensorProto::DOUBLE:
    case TensorProto::INT64:
    case TensorProto::UINT64:
    case TensorProto::COMPLEX64:
        size = 8;
        break;
    case TensorProto::COMPLEX128:
        size = 16;
        break;
    default:
        return std::nullopt;
    }
    if (count > std::numeric_limits<uint64_t>::max() / size) return std::nullopt;
    return count * size;
}

Halide::Buffer<> tensor_value(const TensorProto &t, const std::string &what) {
    const dsl::ElemType type = elem_type(t.data_type(), what);
    if (t.data_location() == TensorProto::EXTERNAL)
        throw ModelError(what + ": external data was not loaded");
    if (t.dims_size() > dsl::kMaxRank)
        throw ModelError(what + ": rank " + std::to_string(t.dims_size()) +
                         " (graph tensors have ranks up to " + std::to_string(dsl::kMaxRank) + ")");
    std::vector<int> extents;
    uint64_t count = 1;
    for (int i = t.dims_size() - 1; i >= 0; --i) {
        const int64_t d = t.dims(i);
        if (d < 0 || d > std::numeric_limits<int32_t>::max() ||
            (d > 0 && count > (uint64_t(1) << 40) / uint64_t(d)))
            throw ModelError(what + ": dimension " + std::to_string(i) + " of " +
                             std::to_string(d) + " is negative or too large");
        extents.push_back(int(d));
        count *= uint64_t(d);
    }
    const uint64_t elem_bytes = uint64_t(dsl::bytes_of(type));
    Halide::Buffer<> value(dsl::halide_type(type), extents);
    uint8_t *dst = static_cast<uint8_t *>(value.data());
    const uint64_t bytes = count * elem_bytes;
    if (t.has_raw_data()) {
        if (t.raw_data().size() != bytes)
            throw ModelError(what + ": raw_data holds " + std::to_string(t.raw_data().size()) +
                             " bytes; its dims and type take " + std::to_string(bytes));
        if (bytes) std::memcpy(dst, t.raw_data().data(), size_t(bytes));
        return value;
    }
    // Typed fields: FLOAT in float_data, DOUBLE in double_data, INT64 in int64_data, and the
    // narrower types (FLOAT16 as its bits) in int32_data.
    std::vector<uint64_t> v;
    switch (t.data_type()) {
    case TensorProto::FLOAT:
        v = words(t.float_data());
        break;
    case TensorProto::DOUBLE:
        v = words(t.double_data());
        break;
    case TensorProto::INT64:
        v = words(t.int64_data());
        break;
    default: {
        // Each value must fit its type: a u8 of 300 would otherwise wrap silently.
        const auto [low, high] = int32_field_range(type);
        for (int32_t x : t.int32_data())
            if (x < low || x > high)
                throw ModelError(what + ": int32_data holds " + std::to_string(x) +
                                 ", outside the range of " + dsl::to_string(type));
        v = words(t.int32_data());
        break;
    }
    }
    if (v.size() != count)
        throw ModelError(what + ": holds " + std::to_string(v.size()) + " values; its dims take " +
                         std::to_string(count));
    // Little-endian: an element's bytes are the low bytes of its word.
    for (uint64_t i = 0; i < count; ++i)
        std::memcpy(dst + i * elem_bytes, &v[size_t(i)], size_t(elem_bytes));
    return value;
}

} // namespace vpuc::frontend::detail
