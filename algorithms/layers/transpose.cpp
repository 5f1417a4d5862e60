// transpose: the dimensions permuted (ONNX's Transpose: output dimension i is input dimension
// perm[i]; no perm reverses them), stored in the input's order or, for a rank-4 output, the
// order given (so that a permutation can keep the bytes where they are). On the device it keeps
// the batch in place (perm[0] = 0), and is a view where the bytes keep their order, else a
// SHAVE kernel (of any rank up to dsl::kMaxRank); a constant of any rank folds at compile time.
#include "common.h"
#include "logical_index.h"

namespace vpuc::algorithms {

namespace {

// perm, checked to be a permutation of [0, rank); the reverse when not given.
std::vector<int64_t> permutation(const std::string &what, size_t rank, const dsl::Attrs &attrs) {
    std::vector<int64_t> perm;
    if (attrs.has("perm")) {
        perm = attrs.get_ints("perm");
    } else {
        for (size_t d = rank; d-- > 0;) perm.push_back(int64_t(d));
    }
    std::vector<int64_t> sorted = perm;
    std::sort(sorted.begin(), sorted.end());
    bool ok = perm.size() == rank;
    for (size_t d = 0; ok && d < rank; ++d) ok = sorted[d] == int64_t(d);
    if (!ok) {
        std::string text;
        for (int64_t p : perm) text += (text.empty() ? "" : ",") + std::to_string(p);
        detail::invalid(what, "perm [" + text + "] is not a permutation of the " +
                                  std::to_string(rank) + " dimensions");
    }
    return perm;
}

dsl::Layer build_transpose(const std::string &name, const std::vector<dsl::Layer> &inputs,
                           const dsl::Attrs &attrs) {
    const std::string what = "transpose '" + name + "'";
    const dsl::Layer &input = inputs.at(0);
    detail::input_info(what, input);
    const dsl::TensorDesc &t = input.output();
    const int rank = t.shape.rank();
    const std::vector<int64_t> perm = permutation(what, size_t(rank), attrs);
    if (rank > 1 && perm[0] != 0)
        detail::invalid(what, "moves the batch; on the device images are computed one at a "
                              "time, so a transpose keeps axis 0 first");
    dsl::TensorDesc out = t;
    out.name = name;
    std::vector<int64_t> extents;
    for (int64_t p : perm) extents.push_back(t.shape.raw()[size_t(p)]);
    out.shape = dsl::Shape(extents);
    if (attrs.has("order")) {
        const std::string order = attrs.get_string("order");
        if (rank != 4 || (order != "NCHW" && order != "NHWC"))
            detail::invalid(what, "order '" + order + "' of a tensor of rank " +
                                      std::to_string(rank) +
                                      "; a rank-4 output is stored NCHW or NHWC");
        out.order = order == "NHWC" ? dsl::DimsOrder::NHWC() : dsl::DimsOrder::NCHW();
    }
    // Device dimension `from[d]` of the output is the input's device dimension d (C, H or W);
    // dimensions of extent 1 need no source. When an axis that moves shares the device's H
    // with others above 1 (rank 5 and above), no device dimension maps onto one: the kernel
    // then computes each element's logical coordinates, reading the whole image.
    std::vector<int> from(4, -1);
    bool by_device_dims = true;
    for (int axis = rank == 1 ? 0 : 1; axis < rank && by_device_dims; ++axis) {
        if (out.shape.raw()[size_t(axis)] == 1) continue;
        const std::optional<dsl::Dim> to = dsl::device_axis(out.shape, axis);
        const std::optional<dsl::Dim> at = dsl::device_axis(t.shape, int(perm[size_t(axis)]));
        if (to && at)
            from[size_t(to->index())] = at->index();
        else
            by_device_dims = false;
    }
    dsl::Algorithm algorithm = [=](const std::vector<Halide::Func> &funcs) {
        const auto &v = dsl::act_vars();
        Halide::Func f = detail::named_func(name);
        if (!by_device_dims) {
            const std::vector<Halide::Expr> here = detail::logical_coords(out, v.c, v.x, v.y);
            std::vector<Halide::Expr> at(here.size());
            for (int axis = 0; axis < rank; ++axis)
                at[size_t(perm[size_t(axis)])] = here[size_t(axis)];
            f(v.c, v.x, v.y) = detail::read_logical(funcs.at(0), t, at);
            return f;
        }
        // Halide's coordinates (c, x, y) are device C, W and H.
        const Halide::Expr here[4] = {0, v.c, v.y, v.x};
        Halide::Expr at[4] = {0, 0, 0, 0};
        for (int d = 1; d < 4; ++d)
            if (from[size_t(d)] >= 0) at[from[size_t(d)]] = here[d];
        f(v.c, v.x, v.y) = funcs.at(0)(at[1], at[3], at[2]);
        return f;
    };
    return dsl::Layer::make("transpose", out, {input}, algorithm);
}

Halide::Buffer<> fold_transpose(const std::string &name, const std::vector<dsl::Layer> &inputs,
                                const dsl::Attrs &attrs) {
    const dsl::ConstValues v = dsl::const_values(inputs.at(0));
    const size_t rank = v.shape.size();
    const std::vector<int64_t> perm = permutation("transpose '" + name + "'", rank, attrs);
    std::vector<int64_t> shape;
    for (int64_t p : perm) shape.push_back(v.shape[size_t(p)]);
    // Row-major strides of the input, read in the output's order.
    std::vector<int64_t> stride(rank, 1);
    for (size_t d = rank; d-- > 1;) stride[d - 1] = stride[d] * v.shape[d];
    return dsl::const_buffer(dsl::pick_elements(v, shape, [&](const std::vector<int64_t> &index) {
        int64_t from = 0;
        for (size_t d = 0; d < rank; ++d) from += index[d] * stride[size_t(perm[d])];
        return from;
    }));
}

} // namespace

void register_layer_transpose(dsl::LayerRegistry &registry) {
    dsl::LayerDef def;
    def.op = "transpose";
    def.doc = "dimensions permuted (a view or a SHAVE kernel, N first; folded for constants)";
    def.inputs = {"data"};
    dsl::AttrSpec perm{"perm",
                       dsl::AttrType::Ints,
                       std::nullopt,
                       "output dimension i is input dimension perm[i]; absent: reversed",
                       {}};
    perm.optional = true;
    dsl::AttrSpec order{"order",
                        dsl::AttrType::String,
                        std::nullopt,
                        "a rank-4 output's memory order, NCHW or NHWC; absent: the input's",
                        {}};
    order.optional = true;
    def.attrs = {perm, order};
    def.build = build_transpose;
    // The same bytes when the dimensions that move have extent 1 (in memory order): a view.
    def.view = [](const dsl::Layer &layer) -> std::optional<dsl::ViewDef> {
        const dsl::TensorDesc in = detail::graph_tensor(layer.inputs().at(0).output());
        const std::vector<int64_t> perm =
            permutation("transpose '" + layer.name() + "'", size_t(in.shape.rank()), layer.attrs());
        std::vector<int64_t> moved = detail::memory_sequence(detail::graph_tensor(layer.output()));
        for (int64_t &d : moved) d = perm.at(size_t(d));
        if (moved != detail::memory_sequence(in)) return std::nullopt;
        return dsl::ViewDef{dsl::ViewDef::Kind::Alias, {}};
    };
    def.fold = fold_transpose;
    // NCHW to NHWC's logical order, N C H W -> N H W C: odd extents everywhere.
    def.example = [](dsl::ElemType type) {
        dsl::Attrs a;
        a.set("perm", std::vector<int64_t>{0, 2, 3, 1});
        return layer_registry().build("transpose", "transpose",
                                      {detail::example_input("in", 19, 11, 7, type)}, a);
    };
    registry.add(std::move(def));
}

} // namespace vpuc::algorithms
