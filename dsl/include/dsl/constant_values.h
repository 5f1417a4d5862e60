// A constant's value as plain numbers, for folding at compile time (dsl/registry.h: constants
// and LayerDef::fold).
#pragma once

#include <Halide.h>

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "dsl/layer.h"

namespace vpuc::dsl {

// Its logical shape (outermost first) and its elements in order, the last dimension fastest,
// as int64 (integer and bool types) or double (float types).
struct ConstValues {
    ElemType type = ElemType::I64;
    std::vector<int64_t> shape;
    std::vector<int64_t> ints;
    std::vector<double> reals;
    bool is_float() const;
    int64_t elements() const;
};

// The values of a dense buffer (dim 0 the last logical dimension); throws LayerError naming
// `what` on an element type graph tensors do not have.
ConstValues const_values(const Halide::Buffer<> &value, const std::string &what);
// The values of a constant layer (throws LayerError when it is not one).
ConstValues const_values(const Layer &constant);
Halide::Buffer<> const_buffer(const ConstValues &values);
// Values of `shape` and v's type whose element at each index (outermost first) is v's element
// number source(index): a rearrangement of v (a transpose, a slice).
ConstValues pick_elements(const ConstValues &v, std::vector<int64_t> shape,
                          const std::function<int64_t(const std::vector<int64_t> &)> &source);

} // namespace vpuc::dsl
