// Logical and memory dimensions as distinct types, so mixing them does not compile.
//
// Logical dimensions are the order operations talk about (N, C, H, W for activations, the
// ONNX order); memory dimensions are positions in memory, outermost first. A DimsOrder is
// the permutation between them: NHWC puts logical C innermost in memory.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <stdexcept>
#include <string>
#include <vector>

namespace vpuc::dsl {

class Dim {
  public:
    constexpr explicit Dim(int index) : index_(index) {}
    constexpr int index() const { return index_; }
    constexpr bool operator==(Dim o) const { return index_ == o.index_; }
    constexpr bool operator!=(Dim o) const { return index_ != o.index_; }

  private:
    int index_;
};

class MemDim {
  public:
    constexpr explicit MemDim(int index) : index_(index) {}
    constexpr int index() const { return index_; }
    constexpr bool operator==(MemDim o) const { return index_ == o.index_; }
    constexpr bool operator!=(MemDim o) const { return index_ != o.index_; }

  private:
    int index_;
};

// The logical dimensions of 4-D activations.
namespace dims {
constexpr Dim N{0}, C{1}, H{2}, W{3};
} // namespace dims

// Extents indexed by one kind of dimension only.
template <typename DimT> class Extents {
  public:
    Extents() = default;
    Extents(std::initializer_list<int64_t> values) : values_(values) {}
    explicit Extents(std::vector<int64_t> values) : values_(std::move(values)) {}

    int rank() const { return int(values_.size()); }
    int64_t operator[](DimT d) const { return values_.at(size_t(d.index())); }
    int64_t &operator[](DimT d) { return values_.at(size_t(d.index())); }
    int64_t elements() const {
        int64_t n = 1;
        for (int64_t v : values_) n *= v;
        return n;
    }
    const std::vector<int64_t> &raw() const { return values_; }
    bool operator==(const Extents &o) const { return values_ == o.values_; }
    bool operator!=(const Extents &o) const { return values_ != o.values_; }

  private:
    std::vector<int64_t> values_;
};

using Shape = Extents<Dim>;         // logical shape
using MemShape = Extents<MemDim>;   // shape in memory order, outermost first
using MemStrides = Extents<MemDim>; // element strides in memory order

std::string to_string(const Shape &shape); // "1x16x56x56"

// A permutation from memory positions to logical dimensions.
class DimsOrder {
  public:
    // `memory_to_logical[i]` is the logical dimension stored at memory position i.
    explicit DimsOrder(std::vector<Dim> memory_to_logical, std::string name = "");

    static DimsOrder NCHW();
    static DimsOrder NHWC();
    static DimsOrder identity(int rank); // ND: memory order equals logical order

    int rank() const { return int(order_.size()); }
    MemDim to_mem(Dim d) const;
    Dim to_logical(MemDim m) const;
    MemShape to_mem(const Shape &shape) const;
    Shape to_logical(const MemShape &shape) const;
    // Dense strides (elements) for `shape` in this order.
    MemStrides dense_strides(const Shape &shape) const;
    // Dense strides (elements) indexed by logical dimension.
    std::vector<int64_t> logical_strides(const Shape &shape) const;

    const std::string &name() const { return name_; }
    bool operator==(const DimsOrder &o) const { return order_ == o.order_; }
    bool operator!=(const DimsOrder &o) const { return !(*this == o); }

  private:
    std::vector<Dim> order_;
    std::string name_;
};

} // namespace vpuc::dsl
