// Windows over the spatial axes of inputs of rank 3 to 5, for the SHAVE layers that slide them
// (conv3d, max_pool3d, avg_pool3d, max_pool_indices, conv_transpose). The device holds
// [N, C, L] as (C, W = L, H = 1), [N, C, H, W] as it is and [N, C, D, H, W] with D and H
// together in its H (dsl::device_view): these layers take every input as (D, H, W), the axes
// it does not have of extent 1, and read device row y = d * H + h.
#pragma once

#include <array>
#include <limits>

#include "common.h"

namespace vpuc::algorithms::window_nd {

// Extents, or one attribute's values, along (D, H, W).
using Axes = std::array<int64_t, 3>;
using Coords = std::array<Halide::Expr, 3>;

// The spatial extents of a tensor of logical rank 3 to 5, as (D, H, W).
inline Axes spatial_extents(const std::string &what, const dsl::Shape &shape) {
    const int rank = shape.rank();
    if (rank < 3 || rank > 5)
        detail::invalid(what, "the input is " + dsl::to_string(shape) +
                                  "; a window slides over the axes after N and C of a tensor "
                                  "of rank 3 to 5");
    Axes extents = {1, 1, 1};
    for (int i = 2; i < rank; ++i) extents[size_t(3 - rank + i)] = shape[dsl::Dim(i)];
    return extents;
}

// Attribute `name`: one value per spatial axis of `rank` (`fill` each when absent), as
// (D, H, W) with `fill` for the axes the input does not have.
inline Axes per_axis(const std::string &what, const dsl::Attrs &attrs, const std::string &name,
                     int rank, int64_t fill) {
    const int dims = rank - 2;
    Axes v = {fill, fill, fill};
    if (!attrs.has(name)) return v;
    const std::vector<int64_t> given = attrs.get_ints(name);
    if (int(given.size()) != dims)
        detail::invalid(what, name + " has " + std::to_string(given.size()) + " values; a " +
                                  std::to_string(dims) + "-D window takes " + std::to_string(dims));
    for (int i = 0; i < dims; ++i) v[size_t(3 - dims + i)] = given[size_t(i)];
    return v;
}

// `pads` [begin..., end...] over the spatial axes of `rank` as begin and end (D, H, W).
inline std::pair<Axes, Axes> pads(const std::string &what, const dsl::Attrs &attrs, int rank) {
    const int dims = rank - 2;
    std::pair<Axes, Axes> p = {{0, 0, 0}, {0, 0, 0}};
    if (!attrs.has("pads")) return p;
    const std::vector<int64_t> given = attrs.get_ints("pads");
    if (int(given.size()) != 2 * dims)
        detail::invalid(what, "pads has " + std::to_string(given.size()) + " values; a " +
                                  std::to_string(dims) + "-D window takes " +
                                  std::to_string(2 * dims));
    for (int i = 0; i < dims; ++i) {
        p.first[size_t(3 - dims + i)] = given[size_t(i)];
        p.second[size_t(3 - dims + i)] = given[size_t(dims + i)];
    }
    return p;
}

// An attribute of 1 to 3 values (`per_end` 1), or of begins and ends (`per_end` 2), each at
// least `min`.
inline dsl::AttrSpec axes_spec(const std::string &name, int64_t min, int per_end,
                               const std::string &doc) {
    dsl::AttrSpec spec{
        name, dsl::AttrType::Ints, std::nullopt, doc,
        [min, per_end](const dsl::AttrValue &a) -> std::string {
            const auto &v = std::get<std::vector<int64_t>>(a);
            if (v.empty() || v.size() > size_t(3 * per_end) || v.size() % size_t(per_end) != 0)
                return per_end == 1 ? "must have 1 to 3 values" : "must have 2, 4 or 6 values";
            for (int64_t x : v)
                if (x < min || x > 65535)
                    return "each value must be in [" + std::to_string(min) + ", 65535]";
            return "";
        }};
    spec.optional = true;
    return spec;
}

// The output of a window layer on `like`: [N, channels, out...] of like's rank, in its order.
inline dsl::TensorDesc output_desc(const std::string &name, const dsl::Layer &like,
                                   int64_t channels, const Axes &out, dsl::ElemType type,
                                   dsl::Quant quant) {
    const dsl::TensorDesc &in = like.output();
    const int rank = in.shape.rank();
    std::vector<int64_t> shape = {in.shape[dsl::Dim(0)], channels};
    for (int i = 2; i < rank; ++i) shape.push_back(out[size_t(3 - rank + i)]);
    dsl::TensorDesc t;
    t.name = name;
    t.shape = dsl::Shape(shape);
    t.type = type;
    t.quant = std::move(quant);
    t.order = in.order;
    return t;
}

// The spatial position (d, h, w) of output element (x, y) of an output of extents `out`.
inline Coords output_coords(const Axes &out) {
    const auto &v = dsl::act_vars();
    const Halide::Expr rows = int(out[1]);
    return {out[0] == 1 ? Halide::Expr(0) : v.y / rows,
            out[0] == 1 ? Halide::Expr(v.y) : v.y % rows, v.x};
}

// Whether spatial position `at` lies inside the input of extents `in`.
inline Halide::Expr inside(const Coords &at, const Axes &in) {
    Halide::Expr e = Halide::Internal::const_true();
    for (size_t a = 0; a < 3; ++a) e = e && at[a] >= 0 && at[a] < int(in[a]);
    return e;
}

// The input's stored element of channel `c` at spatial position `at`, clamped into the input
// (a read outside it is then discarded by `inside`).
inline Halide::Expr read(const Halide::Func &input, const Halide::Expr &c, const Coords &at,
                         const Axes &in) {
    Coords clamped;
    for (size_t a = 0; a < 3; ++a) clamped[a] = Halide::clamp(at[a], 0, int(in[a] - 1));
    return input(c, clamped[2], clamped[0] * int(in[1]) + clamped[1]);
}

// Extent of a window along one axis: as window_extent; with `ceil_mode` rounded up, less a
// last window that would start in the padding after the input (as max_pool and avg_pool).
inline int64_t pool_extent(const std::string &what, int64_t in, int64_t pad_a, int64_t pad_b,
                           int64_t kernel, int64_t stride, int64_t dilation, bool ceil_mode) {
    const int64_t floor_out = detail::window_extent(what, in, int(pad_a), int(pad_b), int(kernel),
                                                    int(stride), int(dilation));
    if (!ceil_mode) return floor_out;
    const int64_t span = (kernel - 1) * dilation + 1;
    int64_t out = (in + pad_a + pad_b - span + stride - 1) / stride + 1;
    if ((out - 1) * stride >= in + pad_a) --out;
    return out;
}

// The weights attribute in ONNX's layout [outer, inner, kernel...] of the input's rank (Halide
// dims reversed: kw first), f16 or f32, as a dense 5-D buffer (kw, kh, kd, inner, outer).
inline Halide::Buffer<> weights_5d(const std::string &what, const dsl::Attrs &attrs, int rank) {
    const Halide::Buffer<> &given = attrs.get_tensor("weights");
    const Halide::Type t = given.type();
    if (given.dimensions() != rank || !(t == Halide::Float(16) || t == Halide::Float(32)))
        detail::invalid(what, "weights must be f16 or f32 of rank " + std::to_string(rank) +
                                  ", as the input");
    const Halide::Buffer<> dense = given.copy();
    std::vector<int> sizes(5, 1);
    for (int d = 0; d < rank - 2; ++d) sizes[size_t(d)] = dense.dim(d).extent();
    sizes[3] = dense.dim(rank - 2).extent();
    sizes[4] = dense.dim(rank - 1).extent();
    Halide::Buffer<> w(t, sizes);
    std::copy(static_cast<const uint8_t *>(dense.data()),
              static_cast<const uint8_t *>(dense.data()) + dense.size_in_bytes(),
              static_cast<uint8_t *>(w.data()));
    return w;
}

// The bias attribute, f32 of `count` values, or zeros.
inline Halide::Buffer<float> bias(const std::string &what, const dsl::Attrs &attrs, int64_t count) {
    Halide::Buffer<float> b(static_cast<int>(count));
    b.fill(0.0f);
    if (!attrs.has("bias")) return b;
    const Halide::Buffer<float> given = detail::tensor_as<float>(attrs, "bias");
    if (given.dimensions() != 1 || given.dim(0).extent() != count)
        detail::invalid(what, "bias must have " + std::to_string(count) + " values");
    for (int i = 0; i < int(count); ++i) b(i) = given(given.dim(0).min() + i);
    return b;
}

// A graph input for a registry example: [1, c, d, h, w], row-major (a tensor of rank 5 is held
// in its logical order).
inline dsl::Layer example_input_5d(int64_t c, int64_t d, int64_t h, int64_t w, dsl::ElemType type) {
    dsl::TensorDesc t;
    t.name = "in";
    t.shape = dsl::Shape({1, c, d, h, w});
    t.type = type;
    if (dsl::is_quantized_int(type)) t.quant = dsl::Quant::per_tensor(0.05f, 120);
    t.order = dsl::DimsOrder::identity(5);
    return dsl::Layer::input(t);
}

} // namespace vpuc::algorithms::window_nd
