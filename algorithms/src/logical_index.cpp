#include "logical_index.h"

#include "common.h"

namespace vpuc::algorithms::detail {

std::vector<Halide::Expr> logical_coords(const dsl::TensorDesc &t, const Halide::Expr &c,
                                         const Halide::Expr &x, const Halide::Expr &y) {
    const std::vector<int64_t> shape = graph_tensor(t).shape.raw();
    // dsl::device_view's groups: [] -> none; [K] -> C; [N, K] -> C; [N, C, L] -> C, W;
    // [N, C, H, W]; [N, C, D, H, W] -> C, D*H, W.
    switch (shape.size()) {
    case 0:
        return {};
    case 1:
        return {c};
    case 2:
        return {Halide::Expr(), c};
    case 3:
        return {Halide::Expr(), c, x};
    case 4:
        return {Halide::Expr(), c, y, x};
    case 5:
        return {Halide::Expr(), c, y / int(shape[3]), y % int(shape[3]), x};
    default:
        break;
    }
    invalid("tensor '" + t.name + "'", "has rank " + std::to_string(shape.size()) +
                                           "; the device computes tensors of rank 0 to 5");
}

Halide::Expr read_logical(const Halide::Func &in, const dsl::TensorDesc &t,
                          const std::vector<Halide::Expr> &at) {
    const std::vector<int64_t> shape = graph_tensor(t).shape.raw();
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
    switch (shape.size()) {
    case 0:
        return in(0, 0, 0);
    case 1:
        return in(inside(0), 0, 0);
    case 2:
        return in(inside(1), 0, 0);
    case 3:
        return in(inside(1), inside(2), 0);
    case 4:
        return in(inside(1), inside(3), inside(2));
    case 5:
        return in(inside(1), inside(4), inside(2) * int(shape[3]) + inside(3));
    default:
        break;
    }
    invalid("tensor '" + t.name + "'", "has rank " + std::to_string(shape.size()) +
                                           "; the device computes tensors of rank 0 to 5");
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
