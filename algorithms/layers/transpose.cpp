// transpose: the dimensions permuted (ONNX's Transpose: output dimension i is input dimension
// perm[i]; no perm reverses them). On the device a 4-D tensor keeps its batch in place
// (perm[0] = 0) and runs as a SHAVE kernel; a constant of any rank folds at compile time.
#include "common.h"

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
    detail::input_info(what, input); // 4-D
    const std::vector<int64_t> perm = permutation(what, 4, attrs);
    if (perm[0] != 0)
        detail::invalid(what, "moves the batch; on the device images are computed one at a "
                              "time, so a transpose keeps N first");
    const std::vector<int64_t> &shape = input.output().shape.raw();
    const int64_t oc = shape[size_t(perm[1])], oh = shape[size_t(perm[2])],
                  ow = shape[size_t(perm[3])];
    dsl::Algorithm algorithm = [=](const std::vector<Halide::Func> &funcs) {
        const auto &v = dsl::act_vars();
        // Logical output dimension i (C, H, W) is input dimension perm[i]; Halide's
        // coordinates (c, x, y) are logical C, W and H.
        Halide::Expr at[4];
        at[perm[1]] = v.c;
        at[perm[2]] = v.y;
        at[perm[3]] = v.x;
        Halide::Func f = detail::named_func(name);
        f(v.c, v.x, v.y) = funcs.at(0)(at[1], at[3], at[2]);
        return f;
    };
    const dsl::TensorDesc &t = input.output();
    return dsl::Layer::make("transpose",
                            detail::output_desc(name, input, oc, ow, oh, t.type, t.quant), {input},
                            algorithm);
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
    def.attrs = {perm};
    def.build = build_transpose;
    // The same bytes when the dimensions that move have extent 1 (in memory order): a view.
    def.view = [](const dsl::Layer &layer) -> std::optional<dsl::ViewDef> {
        if (!layer.attrs().has("perm")) return std::nullopt; // reversed: moves the batch
        const std::vector<int64_t> perm = layer.attrs().get_ints("perm");
        std::vector<int64_t> moved = detail::memory_sequence(layer.output());
        for (int64_t &d : moved) d = perm.at(size_t(d));
        if (moved != detail::memory_sequence(layer.inputs().at(0).output())) return std::nullopt;
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
