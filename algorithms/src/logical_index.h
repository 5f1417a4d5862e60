// Layers that move elements between logical positions of any rank (pad, tile, expand, strided
// slice, depth_to_space, trilu, cumsum, gather_elements): an output element's logical
// coordinates, and the read of an input at logical coordinates. On the device a tensor of rank
// 1 to dsl::kMaxRank is (c, x, y) of one image (dsl::device_view); these hide that mapping.
#pragma once

#include <Halide.h>

#include <string>
#include <vector>

#include "dsl/layer.h"

namespace vpuc::algorithms::detail {

// The logical coordinates, one per axis of `t`, of the element at Halide's (c, x, y) of one image
// of `t`. Axis 0 of a tensor of rank 2 or more is the batch, which a kernel does not see: its
// entry is an undefined Expr, and a layer keeps axis 0 in place.
std::vector<Halide::Expr> logical_coords(const dsl::TensorDesc &t, const Halide::Expr &c,
                                         const Halide::Expr &x, const Halide::Expr &y);

// The element of `in` (a Func over the device's (c, x, y) of tensor `t`) at logical coordinates
// `at` (one per axis; the batch's entry is ignored), each clamped into its extent. Bounds
// inference sees the whole image read, as any output element may read any input element.
Halide::Expr read_logical(const Halide::Func &in, const dsl::TensorDesc &t,
                          const std::vector<Halide::Expr> &at);

// The first axis a kernel computes along: 1, or 0 for a tensor of rank 1 (one image).
inline int first_image_axis(const dsl::TensorDesc &t) {
    return t.shape.rank() == 1 ? 0 : 1;
}

// A layer of `what` whose output `out` has another batch than its input `in` (their first
// extents, for a rank of 2 or more): refused, as the device computes images one at a time.
void require_same_batch(const std::string &what, const dsl::TensorDesc &in,
                        const dsl::TensorDesc &out);

} // namespace vpuc::algorithms::detail
