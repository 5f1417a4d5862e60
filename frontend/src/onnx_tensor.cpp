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

// The values int32_data may hold for `onnx_type` (FLOAT16 and BFLOAT16 as their bits).
std::pair<int64_t, int64_t> int32_field_range(int32_t onnx_type) {
    switch (onnx_type) {
    case TensorProto::UINT8:
        return {0, 255};
    case TensorProto::INT8:
        return {-128, 127};
    case TensorProto::BOOL:
        return {0, 1};
    case TensorProto::INT16:
        return {-32768, 32767};
    case TensorProto::UINT16:
    case TensorProto::FLOAT16:
    case TensorProto::BFLOAT16:
        return {0, 65535};
    default:
        return {std::numeric_limits<int32_t>::min(), std::numeric_limits<int32_t>::max()};
    }
}

// Whether the graph holds `onnx_type` in another representation than ONNX stores it: the
// 16-bit and unsigned 32/64-bit integers as i64, bfloat16 as f32.
bool widened(int32_t onnx_type) {
    switch (onnx_type) {
    case TensorProto::INT16:
    case TensorProto::UINT16:
    case TensorProto::UINT32:
    case TensorProto::UINT64:
    case TensorProto::BFLOAT16:
        return true;
    default:
        return false;
    }
}

// Element `i` of a widened type, stored in the low bytes of `word`, into `dst` (i64 or f32).
// A uint64 above INT64_MAX, which no i64 holds, is an error naming the tensor.
void store_widened(int32_t onnx_type, uint64_t word, uint64_t i, void *dst,
                   const std::string &what) {
    int64_t value = 0;
    switch (onnx_type) {
    case TensorProto::BFLOAT16: {
        // A bfloat16 is the high half of the float32 of the same value.
        const uint32_t bits = uint32_t(uint16_t(word)) << 16;
        std::memcpy(static_cast<float *>(dst) + i, &bits, sizeof bits);
        return;
    }
    case TensorProto::INT16:
        value = int16_t(uint16_t(word));
        break;
    case TensorProto::UINT16:
        value = uint16_t(word);
        break;
    case TensorProto::UINT32:
        value = uint32_t(word);
        break;
    default: // UINT64
        if (word > uint64_t(std::numeric_limits<int64_t>::max()))
            throw ModelError(what + ": element " + std::to_string(i) + " (" + std::to_string(word) +
                             ") is above 2^63 - 1: graph tensors hold uint64 values as i64");
        value = int64_t(word);
    }
    static_cast<int64_t *>(dst)[i] = value;
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
    // Held widened: every value of these fits (uint64 up to 2^63 - 1, checked where read).
    case TensorProto::INT16:
    case TensorProto::UINT16:
    case TensorProto::UINT32:
    case TensorProto::UINT64:
        return dsl::ElemType::I64;
    case TensorProto::BFLOAT16:
        return dsl::ElemType::F32;
    default:
        throw ModelError(what + ": element type " + onnx_type_name(onnx_type) +
                         " is not supported (supported: FLOAT, FLOAT16, BFLOAT16, DOUBLE, UINT8, "
                         "INT8, UINT16, INT16, UINT32, INT32, UINT64, INT64, BOOL)");
    }
}

std::string model_type_name(int32_t onnx_type) {
    switch (onnx_type) {
    case TensorProto::INT16:
        return "i16";
    case TensorProto::UINT16:
        return "u16";
    case TensorProto::UINT32:
        return "u32";
    case TensorProto::UINT64:
        return "u64";
    case TensorProto::BFLOAT16:
        return "bf16";
    default:
        return dsl::to_string(elem_type(onnx_type, "element type"));
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
    const uint64_t stored_bytes = *tensor_bytes(t.data_type(), 1);
    const bool widen = widened(t.data_type());
    Halide::Buffer<> value(dsl::halide_type(type), extents);
    uint8_t *dst = static_cast<uint8_t *>(value.data());
    std::vector<uint64_t> v;
    if (t.has_raw_data()) {
        const uint64_t bytes = count * stored_bytes;
        if (t.raw_data().size() != bytes)
            throw ModelError(what + ": raw_data holds " + std::to_string(t.raw_data().size()) +
                             " bytes; its dims and type take " + std::to_string(bytes));
        if (!widen) {
            if (bytes) std::memcpy(dst, t.raw_data().data(), size_t(bytes));
            return value;
        }
        v.assign(size_t(count), 0);
        for (uint64_t i = 0; i < count; ++i)
            std::memcpy(&v[size_t(i)], t.raw_data().data() + i * stored_bytes,
                        size_t(stored_bytes));
    } else {
        // Typed fields: FLOAT in float_data, DOUBLE in double_data, INT64 in int64_data,
        // UINT32 and UINT64 in uint64_data, and the narrower types (FLOAT16 and BFLOAT16 as
        // their bits) in int32_data.
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
        case TensorProto::UINT32:
        case TensorProto::UINT64:
            for (uint64_t x : t.uint64_data())
                if (t.data_type() == TensorProto::UINT32 &&
                    x > std::numeric_limits<uint32_t>::max())
                    throw ModelError(what + ": uint64_data holds " + std::to_string(x) +
                                     ", outside the range of UINT32");
            v = words(t.uint64_data());
            break;
        default: {
            // Each value must fit its type: a u8 of 300 would otherwise wrap silently.
            const auto [low, high] = int32_field_range(t.data_type());
            for (int32_t x : t.int32_data())
                if (x < low || x > high)
                    throw ModelError(what + ": int32_data holds " + std::to_string(x) +
                                     ", outside the range of " + onnx_type_name(t.data_type()));
            v = words(t.int32_data());
            break;
        }
        }
        if (v.size() != count)
            throw ModelError(what + ": holds " + std::to_string(v.size()) +
                             " values; its dims take " + std::to_string(count));
    }
    for (uint64_t i = 0; i < count; ++i) {
        if (widen)
            store_widened(t.data_type(), v[size_t(i)], i, dst, what);
        else // little-endian: an element's bytes are the low bytes of its word
            std::memcpy(dst + i * elem_bytes, &v[size_t(i)], size_t(elem_bytes));
    }
    return value;
}

} // namespace vpuc::frontend::detail
