// batch_matmul: ONNX's MatMul of two computed tensors, [..., M, K] x [..., K, N], on the SHAVEs,
// accumulating in float32 (attention's products). Both of rank 3 ([B, M, K], one matrix per
// image) or 4 ([B1, B2, M, K]: B2 matrices per image, on the device's C). The batch dimensions
// broadcast where one of them is 1. A matrix of rank 2 is not taken: on the device its rows are
// images, and an image cannot read another's.
#include "common.h"

namespace vpuc::algorithms {

namespace {

dsl::Layer build_batch_matmul(const std::string &name, const std::vector<dsl::Layer> &inputs,
                              const dsl::Attrs &) {
    const std::string what = "batch_matmul '" + name + "'";
    const dsl::Layer &a = inputs.at(0), &b = inputs.at(1);
    const dsl::Shape &as = a.output().logical_shape(), &bs = b.output().logical_shape();
    if (as.rank() != bs.rank() || (as.rank() != 3 && as.rank() != 4))
        detail::invalid(what, "inputs " + dsl::to_string(as) + " and " + dsl::to_string(bs) +
                                  " must both have rank 3 or both rank 4");
    const detail::InputInfo ai = detail::input_info(what, a), bi = detail::input_info(what, b);
    for (const detail::InputInfo *i : {&ai, &bi})
        if (i->quantized)
            detail::invalid(what, "an input is " + std::string(dsl::to_string(i->type)) +
                                      "; batch_matmul takes f16 or f32");
    const bool rank4 = as.rank() == 4;
    // Rank 3: the matrix of an image is (C = rows, W = columns); rank 4: (H = rows, W =
    // columns), one per C.
    const int64_t m = rank4 ? ai.h : ai.c, k = ai.w;
    const int64_t b_rows = rank4 ? bi.h : bi.c, n = bi.w;
    if (k != b_rows)
        detail::invalid(what, dsl::to_string(as) + " x " + dsl::to_string(bs) + ": " +
                                  std::to_string(k) + " columns times " + std::to_string(b_rows) +
                                  " rows");
    auto broadcast = [&](int64_t x, int64_t y, const char *dims) {
        if (x != y && x != 1 && y != 1)
            detail::invalid(what, dsl::to_string(as) + " x " + dsl::to_string(bs) + ": the " +
                                      dims + " (" + std::to_string(x) + " and " +
                                      std::to_string(y) + ") do not broadcast");
        return std::max(x, y);
    };
    broadcast(ai.n, bi.n, "batches");
    const int64_t groups = rank4 ? broadcast(ai.c, bi.c, "second batch dimensions") : 1;
    const bool a_shared = rank4 && ai.c == 1, b_shared = rank4 && bi.c == 1;
    dsl::Algorithm algorithm = [=](const std::vector<Halide::Func> &funcs) {
        const auto &v = dsl::act_vars();
        Halide::RDom r(0, int(k), detail::rdom_name(name + "_k"));
        // Rank 3: out(c = row, x = column); rank 4: out(c = matrix, x = column, y = row).
        Halide::Expr lhs, rhs;
        if (rank4) {
            lhs = funcs.at(0)(a_shared ? Halide::Expr(0) : Halide::Expr(v.c), r.x, v.y);
            rhs = funcs.at(1)(b_shared ? Halide::Expr(0) : Halide::Expr(v.c), v.x, r.x);
        } else {
            lhs = funcs.at(0)(v.c, r.x, 0);
            rhs = funcs.at(1)(r.x, v.x, 0);
        }
        Halide::Func acc = detail::named_func(name + "_acc");
        acc(v.c, v.x, v.y) = 0.0f;
        acc(v.c, v.x, v.y) += Halide::cast<float>(lhs) * Halide::cast<float>(rhs);
        Halide::Func out = detail::named_func(name);
        out(v.c, v.x, v.y) = Halide::cast(ai.halide_type, acc(v.c, v.x, v.y));
        return out;
    };
    // The output takes the batch of the input with the larger one.
    const dsl::Layer &like = ai.n >= bi.n ? a : b;
    const dsl::TensorDesc out = rank4 ? detail::output_desc(name, like, groups, n, m, ai.type, {})
                                      : detail::output_desc(name, like, m, n, 1, ai.type, {});
    return dsl::Layer::make("batch_matmul", out, {a, b}, algorithm);
}

} // namespace

void register_layer_batch_matmul(dsl::LayerRegistry &registry) {
    dsl::LayerDef def;
    def.op = "batch_matmul";
    def.doc = "[..., M, K] x [..., K, N] of two computed tensors of rank 3 or 4, float32 sums "
              "(SHAVE)";
    def.inputs = {"a", "b"};
    def.build = build_batch_matmul;
    def.example = [](dsl::ElemType type) {
        if (dsl::is_quantized_int(type)) return dsl::Layer();
        auto matrices = [type](const std::string &name, int64_t rows, int64_t columns) {
            dsl::TensorDesc t;
            t.name = name;
            t.shape = dsl::Shape({3, rows, columns});
            t.type = type;
            t.order = dsl::DimsOrder::identity(3);
            return dsl::Layer::input(t);
        };
        return layer_registry().build("batch_matmul", "batch_matmul",
                                      {matrices("a", 7, 19), matrices("b", 19, 5)}, {});
    };
    registry.add(std::move(def));
}

} // namespace vpuc::algorithms
