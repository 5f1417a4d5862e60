// reshape: the same elements, in the same logical (row-major) order, in another shape (ONNX's
// Reshape: 0 copies the input's extent, -1 takes what is left), and its forms flatten, squeeze
// and unsqueeze. On the device it is a view of its input when both hold their elements in
// logical order, else a SHAVE kernel keeping the batch; one changing the batch (the first
// extent) moves whole images and is a view only. A constant folds at compile time.
#include <algorithm>
#include <functional>

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
    if (total != elements || out.size() > size_t(dsl::kMaxRank)) {
        std::string text;
        for (int64_t e : attrs.get_ints("shape"))
            text += (text.empty() ? "" : ",") + std::to_string(e);
        detail::invalid(what, "shape [" + text + "] does not hold the input's " +
                                  std::to_string(elements) + " elements in rank 0 to " +
                                  std::to_string(dsl::kMaxRank));
    }
    return out;
}

// `input`'s elements in logical (row-major) order as a tensor of shape `out`, as op `op`. The
// device views of both keep the elements' order, so the kernel maps one image's flat index;
// when the batch changes the layer is a view (algorithms::moves_images), which the kernel
// does not describe.
dsl::Layer reshape_to(const std::string &op, const std::string &name, const dsl::Layer &input,
                      const std::vector<int64_t> &out) {
    const std::string what = op + " '" + name + "'";
    // Moving elements needs no arithmetic: i32 tensors (indices) too.
    const detail::InputInfo in = detail::input_info(what, input, true);
    const dsl::TensorDesc &t = input.output();
    dsl::TensorDesc result = t;
    result.name = name;
    result.shape = dsl::Shape(out);
    if (out.size() > size_t(dsl::kMaxRank))
        detail::invalid(what, "the output " + dsl::to_string(result.shape) + " has rank " +
                                  std::to_string(out.size()) +
                                  "; the device computes tensors of rank 0 to " +
                                  std::to_string(dsl::kMaxRank));
    if (result.shape.rank() != t.shape.rank())
        result.order = result.shape.rank() == 4 ? dsl::DimsOrder::NCHW()
                                                : dsl::DimsOrder::identity(result.shape.rank());
    if (dsl::device_view(result).shape[dsl::dims::N] != in.n) {
        // Whole images move from one batch to another, which no per-image kernel computes: a
        // view of the input's bytes (algorithms::moves_images), so both must be in logical
        // order.
        if (result.shape.rank() == 4) result.order = dsl::DimsOrder::NCHW();
        const std::vector<int64_t> seq = detail::memory_sequence(t);
        if (!std::is_sorted(seq.begin(), seq.end()))
            detail::invalid(what, "reshapes " + dsl::to_string(t.shape) + " to " +
                                      dsl::to_string(result.shape) +
                                      ", changing the batch (the first extent): on the device "
                                      "that is a view of the input's bytes, and '" +
                                      t.name + "' is held " + t.order.name() +
                                      ", not in logical order");
    }
    const dsl::Shape device = dsl::device_view(result).shape;
    const int64_t oh = device[dsl::dims::H], ow = device[dsl::dims::W];
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
    return dsl::Layer::make(op, result, {input}, algorithm);
}

// A constant's elements in another shape.
Halide::Buffer<> with_shape(const dsl::Layer &constant, const std::string &what,
                            const std::vector<int64_t> &shape) {
    dsl::ConstValues v = dsl::const_values(constant);
    if (shape.size() > size_t(dsl::kMaxRank))
        detail::invalid(what,
                        "the result would have a rank above " + std::to_string(dsl::kMaxRank));
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
std::vector<int64_t> flattened(const std::string &what, const std::vector<int64_t> &in,
                               const dsl::Attrs &attrs) {
    const int64_t axis = attrs.get_int("axis"), rank = int64_t(in.size());
    if (axis < -rank || axis > rank)
        detail::invalid(what, "axis " + std::to_string(axis) + " outside [" +
                                  std::to_string(-rank) + ", " + std::to_string(rank) + "]");
    const size_t split = size_t(axis < 0 ? axis + rank : axis);
    int64_t outer = 1, inner = 1;
    for (size_t d = 0; d < in.size(); ++d) (d < split ? outer : inner) *= in[d];
    return {outer, inner};
}

// ONNX's Squeeze: the unit dimensions at `axes` removed, or all of them without axes.
std::vector<int64_t> squeezed(const std::string &what, const std::vector<int64_t> &in,
                              const dsl::Attrs &attrs) {
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
    return out;
}

// ONNX's Unsqueeze: unit dimensions inserted at `axes`, positions in the output.
std::vector<int64_t> unsqueezed(const std::string &what, const std::vector<int64_t> &in,
                                const dsl::Attrs &attrs) {
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
    return out;
}

using ShapeFn = std::function<std::vector<int64_t>(
    const std::string &what, const std::vector<int64_t> &in, const dsl::Attrs &attrs)>;

// What reshape and its forms that change the rank share: the output's shape from `shape_of`,
// folded for a constant; on the device a view where the bytes allow, else a SHAVE kernel.
dsl::LayerDef reshape_def(const std::string &op, const std::string &doc, ShapeFn shape_of) {
    dsl::LayerDef def;
    def.op = op;
    def.doc = doc + " (a view or a SHAVE kernel; folded for constants)";
    def.inputs = {"data"};
    def.build = [op, shape_of](const std::string &name, const std::vector<dsl::Layer> &inputs,
                               const dsl::Attrs &attrs) {
        const std::string what = op + " '" + name + "'";
        return reshape_to(op, name, inputs.at(0),
                          shape_of(what, inputs.at(0).output().shape.raw(), attrs));
    };
    def.fold = [op, shape_of](const std::string &name, const std::vector<dsl::Layer> &inputs,
                              const dsl::Attrs &attrs) {
        const std::string what = op + " '" + name + "'";
        return with_shape(inputs.at(0), what,
                          shape_of(what, inputs.at(0).output().shape.raw(), attrs));
    };
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
    def.unsplittable_dims = [](const dsl::Layer &) {
        using namespace dsl::dims;
        return std::vector<dsl::Dim>{C, H, W};
    };
    return def;
}

} // namespace

void register_layer_reshape(dsl::LayerRegistry &registry) {
    // Examples from NHWC tensors of odd extents, whose bytes are not in logical order (so SHAVE
    // kernels): to 2-D, a unit height squeezed to 3-D, and a unit dimension added to make 5-D.
    dsl::LayerDef flatten = reshape_def("flatten", "2-D, split before axis", flattened);
    flatten.attrs = {{"axis", dsl::AttrType::Int, int64_t(1), "negative counts from the end", {}}};
    flatten.example = [](dsl::ElemType type) {
        return layer_registry().build("flatten", "flatten",
                                      {detail::example_input("in", 19, 5, 3, type)}, {});
    };
    registry.add(std::move(flatten));

    dsl::LayerDef squeeze = reshape_def("squeeze", "without unit dimensions", squeezed);
    dsl::AttrSpec squeeze_axes{
        "axes", dsl::AttrType::Ints, std::nullopt, "unit dimensions to remove; absent: all", {}};
    squeeze_axes.optional = true;
    squeeze.attrs = {squeeze_axes};
    squeeze.attr_inputs = {"axes"};
    squeeze.example = [](dsl::ElemType type) {
        dsl::Attrs a;
        a.set("axes", std::vector<int64_t>{2});
        return layer_registry().build("squeeze", "squeeze",
                                      {detail::example_input("in", 21, 9, 1, type)}, a);
    };
    registry.add(std::move(squeeze));

    dsl::LayerDef unsqueeze = reshape_def("unsqueeze", "with unit dimensions inserted", unsqueezed);
    unsqueeze.attrs = {{"axes", dsl::AttrType::Ints, std::nullopt, "positions in the output", {}}};
    unsqueeze.attr_inputs = {"axes"};
    unsqueeze.example = [](dsl::ElemType type) {
        dsl::Attrs a;
        a.set("axes", std::vector<int64_t>{2});
        return layer_registry().build("unsqueeze", "unsqueeze",
                                      {detail::example_input("in", 21, 9, 7, type)}, a);
    };
    registry.add(std::move(unsqueeze));

    dsl::LayerDef def = reshape_def("reshape", "the same elements in another shape", reshaped);
    def.attr_inputs = {"shape"};
    def.attrs = {{"shape", dsl::AttrType::Ints, std::nullopt, "extents; 0 copies, -1 infers", {}},
                 {"allowzero", dsl::AttrType::Int, int64_t(0), "1: 0 is an extent of 0", {}}};
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
