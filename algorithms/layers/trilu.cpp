// trilu: the upper or lower triangle of the matrices of the last two axes (ONNX's Trilu): with
// upper, element (i, j) is kept where j - i >= k, else where j - i <= k; the others are 0 (the
// zero point of an int8 input). A SHAVE kernel. The rows must not be the batch: a matrix is
// one image (rank 3 or more; the importer gives a rank-2 input a leading unit dimension).
#include "common.h"
#include "logical_index.h"

namespace vpuc::algorithms {

namespace {

dsl::Layer build_trilu(const std::string &name, const std::vector<dsl::Layer> &inputs,
                       const dsl::Attrs &attrs) {
    const std::string what = "trilu '" + name + "'";
    const dsl::Layer &input = inputs.at(0);
    const detail::InputInfo in = detail::input_info(what, input, true);
    const dsl::TensorDesc t = detail::graph_tensor(input.output());
    const int rank = t.shape.rank();
    if (rank < 3)
        detail::invalid(what, "the input is " + dsl::to_string(t.shape) +
                                  "; the matrices' rows would be the batch (axis 0), which the "
                                  "device computes one image at a time: give it a leading unit "
                                  "dimension");
    const bool upper = attrs.get_int("upper") != 0;
    const int64_t k = attrs.get_int("k");
    dsl::TensorDesc out = input.output();
    out.name = name;
    const Halide::Expr zero = Halide::cast(in.halide_type, in.quantized ? in.zero_point : 0);
    dsl::Algorithm algorithm = [=](const std::vector<Halide::Func> &funcs) {
        const auto &v = dsl::act_vars();
        const std::vector<Halide::Expr> at = detail::logical_coords(t, v.c, v.x, v.y);
        // k beyond the matrix keeps all or nothing; clamped, it stays in int32.
        const int diagonal = int(std::clamp<int64_t>(k, -(int64_t(1) << 30), int64_t(1) << 30));
        const Halide::Expr offset = at[size_t(rank - 1)] - at[size_t(rank - 2)];
        const Halide::Expr keep = upper ? offset >= diagonal : offset <= diagonal;
        Halide::Func f = detail::named_func(name);
        f(v.c, v.x, v.y) = Halide::select(keep, funcs.at(0)(v.c, v.x, v.y), zero);
        return f;
    };
    return dsl::Layer::make("trilu", out, {input}, algorithm);
}

} // namespace

void register_layer_trilu(dsl::LayerRegistry &registry) {
    dsl::LayerDef def;
    def.op = "trilu";
    def.doc = "the upper or lower triangle of the last two axes' matrices (SHAVE)";
    def.inputs = {"input"};
    auto flag = [](const dsl::AttrValue &a) -> std::string {
        const int64_t v = std::get<int64_t>(a);
        return v == 0 || v == 1 ? "" : "must be 0 or 1";
    };
    def.attrs = {
        {"upper", dsl::AttrType::Int, int64_t(1), "1: upper triangle, 0: lower", flag},
        {"k", dsl::AttrType::Int, int64_t(0), "the diagonal: above the main one if > 0", {}}};
    def.build = build_trilu;
    // The lower triangle below the main diagonal of 11 x 7 matrices.
    def.example = [](dsl::ElemType type) {
        dsl::Attrs a;
        a.set("upper", int64_t(0));
        a.set("k", int64_t(-2));
        return layer_registry().build("trilu", "trilu",
                                      {detail::example_input("in", 9, 7, 11, type)}, a);
    };
    registry.add(std::move(def));
}

} // namespace vpuc::algorithms
