// Constants as plain numbers and back, for the layers that fold at compile time.
#include <numeric>
#include <type_traits>

#include "common.h"

namespace vpuc::algorithms::detail {

namespace {

template <typename T>
constexpr bool is_real = std::is_floating_point_v<T> || std::is_same_v<T, Halide::float16_t>;

template <typename T> void read_all(const Halide::Buffer<> &dense, ConstValues &v) {
    const T *p = static_cast<const T *>(dense.data());
    for (size_t i = 0; i < dense.number_of_elements(); ++i) {
        if constexpr (is_real<T>)
            v.reals.push_back(double(p[i]));
        else
            v.ints.push_back(int64_t(p[i]));
    }
}

template <typename T> void write_all(const ConstValues &v, Halide::Buffer<> &out) {
    T *p = static_cast<T *>(out.data());
    for (int64_t i = 0; i < v.elements(); ++i) {
        if constexpr (is_real<T>)
            p[i] = T(v.reals[size_t(i)]);
        else
            p[i] = T(v.ints[size_t(i)]);
    }
}

} // namespace

bool ConstValues::is_float() const {
    return type == dsl::ElemType::F16 || type == dsl::ElemType::F32 || type == dsl::ElemType::F64;
}

int64_t ConstValues::elements() const {
    return std::accumulate(shape.begin(), shape.end(), int64_t(1), std::multiplies<int64_t>());
}

ConstValues const_values(const dsl::Layer &constant) {
    const Halide::Buffer<> dense = dsl::constant_value(constant).copy();
    ConstValues v;
    v.type = constant.output().type;
    v.shape = constant.output().shape.raw();
    switch (v.type) {
    case dsl::ElemType::U8:
        read_all<uint8_t>(dense, v);
        break;
    case dsl::ElemType::I8:
        read_all<int8_t>(dense, v);
        break;
    case dsl::ElemType::F16:
        read_all<Halide::float16_t>(dense, v);
        break;
    case dsl::ElemType::F32:
        read_all<float>(dense, v);
        break;
    case dsl::ElemType::I32:
        read_all<int32_t>(dense, v);
        break;
    case dsl::ElemType::I64:
        read_all<int64_t>(dense, v);
        break;
    case dsl::ElemType::Bool:
        read_all<bool>(dense, v);
        break;
    case dsl::ElemType::F64:
        read_all<double>(dense, v);
        break;
    }
    return v;
}

Halide::Buffer<> const_buffer(const ConstValues &v) {
    std::vector<int> extents(v.shape.rbegin(), v.shape.rend());
    Halide::Buffer<> out(dsl::halide_type(v.type), extents);
    switch (v.type) {
    case dsl::ElemType::U8:
        write_all<uint8_t>(v, out);
        break;
    case dsl::ElemType::I8:
        write_all<int8_t>(v, out);
        break;
    case dsl::ElemType::F16:
        write_all<Halide::float16_t>(v, out);
        break;
    case dsl::ElemType::F32:
        write_all<float>(v, out);
        break;
    case dsl::ElemType::I32:
        write_all<int32_t>(v, out);
        break;
    case dsl::ElemType::I64:
        write_all<int64_t>(v, out);
        break;
    case dsl::ElemType::Bool:
        write_all<bool>(v, out);
        break;
    case dsl::ElemType::F64:
        write_all<double>(v, out);
        break;
    }
    return out;
}

} // namespace vpuc::algorithms::detail
