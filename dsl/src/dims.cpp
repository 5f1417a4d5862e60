#include "dsl/dims.h"

#include "dsl/tensor.h"

#include <algorithm>

namespace vpuc::dsl {

std::string to_string(const Shape &shape) {
    std::string s;
    for (int64_t v : shape.raw()) s += (s.empty() ? "" : "x") + std::to_string(v);
    return s.empty() ? "scalar" : s;
}

DimsOrder::DimsOrder(std::vector<Dim> memory_to_logical, std::string name)
    : order_(std::move(memory_to_logical)), name_(std::move(name)) {
    std::vector<bool> seen(order_.size(), false);
    for (Dim d : order_) {
        if (d.index() < 0 || d.index() >= rank() || seen[size_t(d.index())])
            throw LayerError("DimsOrder: not a permutation");
        seen[size_t(d.index())] = true;
    }
    if (name_.empty())
        for (Dim d : order_) name_ += char('0' + d.index());
}

DimsOrder DimsOrder::NCHW() {
    return DimsOrder({dims::N, dims::C, dims::H, dims::W}, "NCHW");
}
DimsOrder DimsOrder::NHWC() {
    return DimsOrder({dims::N, dims::H, dims::W, dims::C}, "NHWC");
}

DimsOrder DimsOrder::identity(int rank) {
    std::vector<Dim> order;
    for (int i = 0; i < rank; ++i) order.emplace_back(i);
    return DimsOrder(order, "ND" + std::to_string(rank));
}

MemDim DimsOrder::to_mem(Dim d) const {
    for (size_t i = 0; i < order_.size(); ++i)
        if (order_[i] == d) return MemDim(int(i));
    throw std::out_of_range("DimsOrder " + name_ + ": no logical dim " + std::to_string(d.index()));
}

Dim DimsOrder::to_logical(MemDim m) const {
    return order_.at(size_t(m.index()));
}

MemShape DimsOrder::to_mem(const Shape &shape) const {
    std::vector<int64_t> v;
    for (Dim d : order_) v.push_back(shape[d]);
    return MemShape(v);
}

Shape DimsOrder::to_logical(const MemShape &shape) const {
    std::vector<int64_t> v(static_cast<size_t>(rank()));
    for (int i = 0; i < rank(); ++i) v[size_t(order_[size_t(i)].index())] = shape[MemDim(i)];
    return Shape(v);
}

MemStrides DimsOrder::dense_strides(const Shape &shape) const {
    MemShape mem = to_mem(shape);
    std::vector<int64_t> strides(static_cast<size_t>(rank()));
    int64_t stride = 1;
    for (int i = rank() - 1; i >= 0; --i) {
        strides[size_t(i)] = stride;
        stride *= mem[MemDim(i)];
    }
    return MemStrides(strides);
}

std::vector<int64_t> DimsOrder::logical_strides(const Shape &shape) const {
    MemStrides mem = dense_strides(shape);
    std::vector<int64_t> out(static_cast<size_t>(rank()));
    for (int i = 0; i < rank(); ++i) out[size_t(order_[size_t(i)].index())] = mem[MemDim(i)];
    return out;
}

} // namespace vpuc::dsl
