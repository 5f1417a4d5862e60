#include "logical_index.h"

#include "common.h"

namespace vpuc::algorithms::detail {

namespace {

// The graph shape of `t`, checked to be one the device computes.
std::vector<int64_t> graph_extents(const dsl::TensorDesc &t) {
    const std::vector<int64_t> shape = graph_tensor(t).shape.raw();
    if (shape.size() > size_t(dsl::kMaxRank))
        invalid("tensor '" + t.name + "'", "has rank " + std::to_string(shape.size()) +
                                               "; the device computes tensors of rank 0 to " +
                                               std::to_string(dsl::kMaxRank));
    return shape;
}

} // namespace

std::vector<Halide::Expr> logical_coords(const dsl::TensorDesc &t, const Halide::Expr &c,
                                         const Halide::Expr &x, const Halide::Expr &y) {
    const std::vector<int64_t> shape = graph_extents(t);
    // dsl::device_view's groups: [] -> none; [K] -> C; [N, K] -> C; [N, C, L] -> C, W;
    // [N, C, H, W]; from rank 5 on, the axes between C and W share H, row-major.
    const std::vector<std::vector<int>> groups = dsl::device_groups(int(shape.size()));
    const Halide::Expr device[4] = {Halide::Expr(), c, y, x};
    std::vector<Halide::Expr> at(shape.size());
    for (size_t d = 1; d < groups.size(); ++d) {
        const std::vector<int> &group = groups[d];
        Halide::Expr rest = device[d];
        for (size_t i = group.size(); i-- > 1;) {
            const int extent = int(shape[size_t(group[i])]);
            at[size_t(group[i])] = rest % extent;
            rest = rest / extent;
        }
        if (!group.empty()) at[size_t(group[0])] = rest;
    }
    return at;
}

Halide::Expr read_logical(const Halide::Func &in, const dsl::TensorDesc &t,
                          const std::vector<Halide::Expr> &at) {
    const std::vector<int64_t> shape = graph_extents(t);
    // Each coordinate is looked up in a table of the extent's indices: bounds inference knows
    // nothing of a buffer's values, so it takes the clamp's bounds, the whole extent, whatever
    // the coordinate's arithmetic (a region the blob can state; a tighter one of several output
    // variables it cannot).
    auto inside = [&](size_t axis) {
        const int extent = int(shape[axis]);
        Halide::Buffer<int32_t> indices(extent);
        for (int i = 0; i < extent; ++i) indices(i) = i;
        return Halide::clamp(indices(Halide::clamp(at[axis], 0, extent - 1)), 0, extent - 1);
    };
    // Each device dimension (C, H, W) of one image: its axes' coordinates, row-major.
    const std::vector<std::vector<int>> groups = dsl::device_groups(int(shape.size()));
    Halide::Expr device[4];
    for (size_t d = 1; d < groups.size(); ++d) {
        device[d] = 0;
        for (size_t i = 0; i < groups[d].size(); ++i) {
            const size_t axis = size_t(groups[d][i]);
            device[d] = i == 0 ? inside(axis) : device[d] * int(shape[axis]) + inside(axis);
        }
    }
    return in(device[1], device[3], device[2]);
}

void require_same_batch(const std::string &what, const dsl::TensorDesc &in,
                        const dsl::TensorDesc &out) {
    const dsl::Shape from = graph_tensor(in).shape, to = graph_tensor(out).shape;
    if (from.rank() > 1 && to.rank() > 1 && from.raw()[0] == to.raw()[0]) return;
    if (from.rank() == 1 && to.rank() == 1) return;
    invalid(what, "the output " + dsl::to_string(to) +
                      " has another batch (first extent) than "
                      "the input " +
                      dsl::to_string(from) + "; on the device images are computed one at a time");
}

} // namespace vpuc::algorithms::detail
