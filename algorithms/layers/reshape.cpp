// reshape: the same elements, in the same logical (row-major NCHW) order, in another shape
// (ONNX's Reshape: 0 copies the input's extent, -1 takes what is left). On the device a 4-D
// tensor keeps its batch and runs as a SHAVE kernel; a constant folds at compile time.
//
// Its forms that change the rank, flatten, squeeze and unsqueeze, fold at compile time only:
// device tensors are 4-D, so they serve shape arithmetic (an importer maps a flatten before a
// matmul onto a 4-D reshape).
#include "common.h"

namespace vpuc::algorithms {

namespace {

std::vector<int64_t> reshaped(const std::string &what, const std::vector<int64_t> &in,
                              const dsl::Attrs &attrs) {
    std::vector<int64_t> out = attrs.get_ints("shape");
    const bool allow_zero = attrs.get_int("allowzero") != 0;
    int64_t known = 1, infer = -1, elements = 1;
    for (int64_t e : in) elements *= e;
    for (size_t d = 0; d < out.size(); ++d) {
        if (out[d] == 0 && !allow_zero) {
            if (d >= in.size())
                detail::invalid(what, "shape[" + std::to_string(d) +
                                          "] = 0 copies an extent "
                                          "the input (rank " +
                                          std::to_string(in.size()) + ") does not have");
            out[d] = in[d];
        }
        if (out[d] == -1) {
            if (infer >= 0) detail::invalid(what, "more than one extent is -1");
            infer = int64_t(d);
        } else if (out[d] < 0) {
            detail::invalid(what, "shape[" + std::to_string(d) + "] = " + std::to_string(out[d]));
        } else {
            known *= out[d];
        }
    }
    if (infer >= 0 && known > 0 && elements % known == 0) out[size_t(infer)] = elements / known;
    int64_t total = 1;
    for (int64_t e : out) total *= e;
    if (total != elements || out.size() > 5) {
        std::string text;
        for (int64_t e : attrs.get_ints("shape"))
            text += (text.empty() ? "" : ",") + std::to_string(e);
        detail::invalid(what, "shape [" + text + "] does not hold the input's " +
                                  std::to_string(elements) + " elements in rank 1 to 5");
    }
    return out;
}

dsl::Layer build_reshape(const std::string &name, const std::vector<dsl::Layer> &inputs,
                         const dsl::Attrs &attrs) {
    const std::string what = "reshape '" + name + "'";
    const dsl::Layer &input = inputs.at(0);
    const detail::InputInfo in = detail::input_info(what, input);
    const std::vector<int64_t> out = reshaped(what, input.output().shape.raw(), attrs);
    if (out.size() != 4 || out[0] != in.n)
        detail::invalid(what, "reshapes " + dsl::to_string(input.output().shape) + " to " +
                                  dsl::to_string(dsl::Shape(out)) +
                                  "; on the device a reshape keeps 4-D and the batch");
    const int64_t oc = out[1], oh = out[2], ow = out[3];
    dsl::Algorithm algorithm = [=](const std::vector<Halide::Func> &funcs) {
        const auto &v = dsl::act_vars();
        // The element's index in the logical order of one image, then where the input has it.
        const Halide::Expr index = (v.c * int(oh) + v.y) * int(ow) + v.x;
        const Halide::Expr plane = int(in.h * in.w);
        const Halide::Expr ci = index / plane, rest = index % plane;
        // Any part of the output may read any part of the input, so each task reads it whole.
        // The blob states a kernel's reads per output bound; these depend on all three, so
        // bounds inference is told only "inside": the mask (a no-op on these non-negative
        // indices) hides the index's own bounds, and the clamp bounds it to the extent.
        auto inside = [](const Halide::Expr &e, int64_t extent) {
            return Halide::clamp(e & 0x7fffffff, 0, int(extent - 1));
        };
        Halide::Func f = detail::named_func(name);
        f(v.c, v.x, v.y) = funcs.at(0)(inside(ci, in.c), inside(rest % int(in.w), in.w),
                                       inside(rest / int(in.w), in.h));
        return f;
    };
    const dsl::TensorDesc &t = input.output();
    return dsl::Layer::make("reshape",
                            detail::output_desc(name, input, oc, ow, oh, t.type, t.quant), {input},
                            algorithm);
}

// A constant's elements in another shape.
Halide::Buffer<> with_shape(const dsl::Layer &constant, const std::string &what,
                            const std::vector<int64_t> &shape) {
    dsl::ConstValues v = dsl::const_values(constant);
    if (shape.size() > 5) detail::invalid(what, "the result would have a rank above 5");
    v.shape = shape;
    return dsl::const_buffer(v);
}

// An axis of a tensor of rank `rank`, negative counting from the end.
size_t axis_of(const std::string &what, int64_t axis, size_t rank) {
    const int64_t r = int64_t(rank);
    if (axis < -r || axis >= r)
        detail::invalid(what, "axis " + std::to_string(axis) + " outside [" + std::to_string(-r) +
                                  ", " + std::to_string(r) + ")");
    return size_t(axis < 0 ? axis + r : axis);
}

// ONNX's Flatten: [product of the extents before axis, product of the rest].
Halide::Buffer<> fold_flatten(const std::string &name, const std::vector<dsl::Layer> &inputs,
                              const dsl::Attrs &attrs) {
    const std::string what = "flatten '" + name + "'";
    const std::vector<int64_t> &in = inputs.at(0).output().shape.raw();
    const int64_t axis = attrs.get_int("axis"), rank = int64_t(in.size());
    if (axis < -rank || axis > rank)
        detail::invalid(what, "axis " + std::to_string(axis) + " outside [" +
                                  std::to_string(-rank) + ", " + std::to_string(rank) + "]");
    const size_t split = size_t(axis < 0 ? axis + rank : axis);
    int64_t outer = 1, inner = 1;
    for (size_t d = 0; d < in.size(); ++d) (d < split ? outer : inner) *= in[d];
    return with_shape(inputs.at(0), what, {outer, inner});
}

// ONNX's Squeeze: the unit dimensions at `axes` removed, or all of them without axes.
Halide::Buffer<> fold_squeeze(const std::string &name, const std::vector<dsl::Layer> &inputs,
                              const dsl::Attrs &attrs) {
    const std::string what = "squeeze '" + name + "'";
    const std::vector<int64_t> &in = inputs.at(0).output().shape.raw();
    std::vector<bool> drop(in.size(), !attrs.has("axes"));
    if (attrs.has("axes"))
        for (int64_t axis : attrs.get_ints("axes")) drop[axis_of(what, axis, in.size())] = true;
    std::vector<int64_t> out;
    for (size_t d = 0; d < in.size(); ++d) {
        if (drop[d] && in[d] != 1 && attrs.has("axes"))
            detail::invalid(what, "axis " + std::to_string(d) + " has extent " +
                                      std::to_string(in[d]) + ", not 1");
        if (!drop[d] || in[d] != 1) out.push_back(in[d]);
    }
    return with_shape(inputs.at(0), what, out);
}

// ONNX's Unsqueeze: unit dimensions inserted at `axes`, positions in the output.
Halide::Buffer<> fold_unsqueeze(const std::string &name, const std::vector<dsl::Layer> &inputs,
                                const dsl::Attrs &attrs) {
    const std::string what = "unsqueeze '" + name + "'";
    const std::vector<int64_t> &in = inputs.at(0).output().shape.raw();
    const std::vector<int64_t> axes = attrs.get_ints("axes");
    const size_t rank = in.size() + axes.size();
    std::vector<bool> unit(rank, false);
    for (int64_t axis : axes) {
        const size_t at = axis_of(what, axis, rank);
        if (unit[at]) detail::invalid(what, "axis " + std::to_string(axis) + " given twice");
        unit[at] = true;
    }
    std::vector<int64_t> out;
    auto next = in.begin();
    for (size_t d = 0; d < rank; ++d) out.push_back(unit[d] ? 1 : *next++);
    return with_shape(inputs.at(0), what, out);
}

// A form of reshape that changes the rank: folds constants, refuses computed inputs.
void add_rank_change(dsl::LayerRegistry &registry, const std::string &op, const std::string &doc,
                     std::vector<dsl::AttrSpec> attrs, std::vector<std::string> attr_inputs,
                     dsl::LayerDef::FoldFn fold) {
    dsl::LayerDef def;
    def.op = op;
    def.doc = doc + " (at compile time only)";
    def.inputs = {"data"};
    def.attr_inputs = std::move(attr_inputs);
    def.attrs = std::move(attrs);
    def.fold = std::move(fold);
    registry.add(std::move(def));
}

} // namespace

void register_layer_reshape(dsl::LayerRegistry &registry) {
    dsl::AttrSpec squeeze_axes{
        "axes", dsl::AttrType::Ints, std::nullopt, "unit dimensions to remove; absent: all", {}};
    squeeze_axes.optional = true;
    add_rank_change(registry, "flatten", "a constant as 2-D, split before axis",
                    {{"axis", dsl::AttrType::Int, int64_t(1), "negative counts from the end", {}}},
                    {}, fold_flatten);
    add_rank_change(registry, "squeeze", "a constant without unit dimensions", {squeeze_axes},
                    {"axes"}, fold_squeeze);
    add_rank_change(registry, "unsqueeze", "a constant with unit dimensions inserted",
                    {{"axes", dsl::AttrType::Ints, std::nullopt, "positions in the output", {}}},
                    {"axes"}, fold_unsqueeze);

    dsl::LayerDef def;
    def.op = "reshape";
    def.doc = "the same elements in another shape (a view or a SHAVE kernel; folded for constants)";
    def.inputs = {"data"};
    def.attr_inputs = {"shape"};
    def.attrs = {{"shape", dsl::AttrType::Ints, std::nullopt, "extents; 0 copies, -1 infers", {}},
                 {"allowzero", dsl::AttrType::Int, int64_t(0), "1: 0 is an extent of 0", {}}};
    def.build = build_reshape;
    // The same bytes when both tensors hold their elements in logical order (NCHW, or NHWC
    // with one channel or one pixel): a view of the input.
    def.view = [](const dsl::Layer &layer) -> std::optional<dsl::ViewDef> {
        for (const dsl::TensorDesc *t : {&layer.inputs().at(0).output(), &layer.output()}) {
            const std::vector<int64_t> seq = detail::memory_sequence(*t);
            if (!std::is_sorted(seq.begin(), seq.end())) return std::nullopt;
        }
        return dsl::ViewDef{dsl::ViewDef::Kind::Alias, {}};
    };
    // Any part of the output reads any part of the input: a task computes a whole image.
    def.unsplittable_dims = [](const dsl::Attrs &) {
        using namespace dsl::dims;
        return std::vector<dsl::Dim>{C, H, W};
    };
    def.fold = [](const std::string &name, const std::vector<dsl::Layer> &inputs,
                  const dsl::Attrs &attrs) {
        const std::string what = "reshape '" + name + "'";
        return with_shape(inputs.at(0), what,
                          reshaped(what, inputs.at(0).output().shape.raw(), attrs));
    };
    // 16 channels of 6x5 become 8 of 10x6: every output row gathers from two input rows.
    def.example = [](dsl::ElemType type) {
        dsl::Attrs a;
        a.set("shape", std::vector<int64_t>{1, 8, 10, -1});
        return layer_registry().build("reshape", "reshape",
                                      {detail::example_input("in", 16, 5, 6, type)}, a);
    };
    registry.add(std::move(def));
}

} // namespace vpuc::algorithms
