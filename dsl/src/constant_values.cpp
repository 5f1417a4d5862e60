// Constants as plain numbers and back, for the layers that fold at compile time.
#include <numeric>
#include <type_traits>

#include "dsl/constant_values.h"

#include "dsl/registry.h"

namespace vpuc::dsl {

namespace {

template <typename T>
constexpr bool is_real = std::is_floating_point_v<T> || std::is_same_v<T, Halide::float16_t>;

// Weights run to millions of values: each loop below sizes once.
template <typename T> void read_all(const Halide::Buffer<> &dense, ConstValues &v) {
    const T *p = static_cast<const T *>(dense.data());
    const size_t elements = dense.number_of_elements();
    if constexpr (is_real<T>)
        v.reals.reserve(elements);
    else
        v.ints.reserve(elements);
    for (size_t i = 0; i < elements; ++i) {
        if constexpr (is_real<T>)
            v.reals.push_back(double(p[i]));
        else
            v.ints.push_back(int64_t(p[i]));
    }
}

template <typename T> void write_all(const ConstValues &v, Halide::Buffer<> &out) {
    T *p = static_cast<T *>(out.data());
    const int64_t elements = v.elements();
    for (int64_t i = 0; i < elements; ++i) {
        if constexpr (is_real<T>)
            p[i] = T(v.reals[size_t(i)]);
        else
            p[i] = T(v.ints[size_t(i)]);
    }
}

// Calls f with a value of the C++ type of `type`'s elements.
template <typename F> void with_element_type(ElemType type, F &&f) {
    switch (type) {
    case ElemType::U8:
        return f(uint8_t{});
    case ElemType::I8:
        return f(int8_t{});
    case ElemType::F16:
        return f(Halide::float16_t{});
    case ElemType::F32:
        return f(float{});
    case ElemType::I32:
        return f(int32_t{});
    case ElemType::I64:
        return f(int64_t{});
    case ElemType::Bool:
        return f(bool{});
    case ElemType::F64:
        return f(double{});
    }
}

} // namespace

bool ConstValues::is_float() const {
    return type == ElemType::F16 || type == ElemType::F32 || type == ElemType::F64;
}

int64_t ConstValues::elements() const {
    return std::accumulate(shape.begin(), shape.end(), int64_t(1), std::multiplies<int64_t>());
}

ConstValues const_values(const Halide::Buffer<> &value, const std::string &what) {
    ConstValues v;
    v.type = elem_type(value.type(), what);
    for (int d = value.dimensions() - 1; d >= 0; --d) v.shape.push_back(value.dim(d).extent());
    // Its elements in order: a copy unless they are already.
    bool dense = true;
    int64_t stride = 1;
    for (int d = 0; d < value.dimensions(); ++d) {
        dense = dense && (value.dim(d).extent() == 1 || value.dim(d).stride() == stride);
        stride *= value.dim(d).extent();
    }
    const Halide::Buffer<> ordered = dense ? value : value.copy();
    with_element_type(v.type, [&](auto element) { read_all<decltype(element)>(ordered, v); });
    return v;
}

ConstValues const_values(const Layer &constant) {
    return const_values(constant_value(constant), "constant '" + constant.name() + "'");
}

Halide::Buffer<> const_buffer(const ConstValues &v) {
    std::vector<int> extents(v.shape.rbegin(), v.shape.rend());
    Halide::Buffer<> out(halide_type(v.type), extents);
    with_element_type(v.type, [&](auto element) { write_all<decltype(element)>(v, out); });
    return out;
}

ConstValues pick_elements(const ConstValues &v, std::vector<int64_t> shape,
                          const std::function<int64_t(const std::vector<int64_t> &)> &source) {
    ConstValues out;
    out.type = v.type;
    out.shape = std::move(shape);
    std::vector<int64_t> index(out.shape.size(), 0);
    const int64_t elements = out.elements();
    const bool reals = v.is_float();
    if (reals)
        out.reals.reserve(size_t(elements));
    else
        out.ints.reserve(size_t(elements));
    for (int64_t e = 0; e < elements; ++e) {
        const size_t from = size_t(source(index));
        if (reals)
            out.reals.push_back(v.reals.at(from));
        else
            out.ints.push_back(v.ints.at(from));
        for (size_t d = index.size(); d-- > 0;) {
            if (++index[d] < out.shape[d]) break;
            index[d] = 0;
        }
    }
    return out;
}

} // namespace vpuc::dsl
