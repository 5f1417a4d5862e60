#include "dsl/tensor.h"

#include <cmath>
#include <cstdint>
#include <sstream>

namespace vpuc::dsl {

const char *to_string(ElemType t) {
    switch (t) {
    case ElemType::U8:
        return "u8";
    case ElemType::I8:
        return "i8";
    case ElemType::F16:
        return "f16";
    case ElemType::F32:
        return "f32";
    case ElemType::I32:
        return "i32";
    case ElemType::I64:
        return "i64";
    case ElemType::Bool:
        return "bool";
    case ElemType::F64:
        return "f64";
    }
    return "?";
}

int bytes_of(ElemType t) {
    switch (t) {
    case ElemType::U8:
    case ElemType::I8:
    case ElemType::Bool:
        return 1;
    case ElemType::F16:
        return 2;
    case ElemType::F32:
    case ElemType::I32:
        return 4;
    case ElemType::I64:
    case ElemType::F64:
        return 8;
    }
    return 0;
}

Halide::Type halide_type(ElemType t) {
    switch (t) {
    case ElemType::U8:
        return Halide::UInt(8);
    case ElemType::I8:
        return Halide::Int(8);
    case ElemType::F16:
        return Halide::Float(16);
    case ElemType::F32:
        return Halide::Float(32);
    case ElemType::I32:
        return Halide::Int(32);
    case ElemType::I64:
        return Halide::Int(64);
    case ElemType::Bool:
        return Halide::Bool();
    case ElemType::F64:
        return Halide::Float(64);
    }
    return Halide::Float(32);
}

ElemType elem_type(const Halide::Type &t, const std::string &what) {
    for (ElemType e : {ElemType::U8, ElemType::I8, ElemType::F16, ElemType::F32, ElemType::I32,
                       ElemType::I64, ElemType::Bool, ElemType::F64})
        if (halide_type(e) == t) return e;
    std::ostringstream type;
    type << t;
    throw LayerError(what + ": element type " + type.str() +
                     " is not one of u8, i8, f16, f32, i32, i64, bool, f64");
}

bool is_quantized_int(ElemType t) {
    return t == ElemType::U8 || t == ElemType::I8;
}

bool is_device_type(ElemType t) {
    return t != ElemType::I64 && t != ElemType::Bool && t != ElemType::F64;
}

ElemType device_type(ElemType t) {
    switch (t) {
    case ElemType::I64:
        return ElemType::I32;
    case ElemType::Bool:
        return ElemType::U8;
    case ElemType::F64:
        return ElemType::F32;
    default:
        return t;
    }
}

namespace {

template <typename From, typename To, typename Check>
Halide::Buffer<> convert(const TensorDesc &tensor, const Halide::Buffer<> &values, Check fits) {
    Halide::Buffer<From> in(values);
    std::vector<int> sizes;
    for (int d = 0; d < in.dimensions(); ++d) sizes.push_back(in.dim(d).extent());
    Halide::Buffer<To> out(sizes);
    const From *src = in.data();
    To *dst = out.data();
    for (size_t i = 0; i < in.number_of_elements(); ++i) {
        if (!fits(src[i])) {
            std::ostringstream value;
            value << +src[i];
            throw LayerError("tensor '" + tensor.name + "': element " + std::to_string(i) + " (" +
                             value.str() + ") does not fit in " +
                             to_string(device_type(tensor.type)));
        }
        dst[i] = To(src[i]);
    }
    return out;
}

} // namespace

Halide::Buffer<> to_device(const TensorDesc &tensor, const Halide::Buffer<> &values) {
    if (values.type() != halide_type(tensor.type))
        throw LayerError("tensor '" + tensor.name + "': values of another type than " +
                         to_string(tensor.type));
    switch (tensor.type) {
    case ElemType::I64:
        return convert<int64_t, int32_t>(
            tensor, values, [](int64_t v) { return v >= INT32_MIN && v <= INT32_MAX; });
    case ElemType::Bool:
        return convert<bool, uint8_t>(tensor, values, [](bool) { return true; });
    case ElemType::F64:
        return convert<double, float>(tensor, values, [](double v) {
            return std::isnan(v) || std::isinf(v) || std::isfinite(float(v));
        });
    default:
        return values;
    }
}

std::vector<std::vector<int>> device_groups(int rank) {
    switch (rank) {
    case 0:
        return {{}, {}, {}, {}}; // one element
    case 1:
        return {{}, {0}, {}, {}};
    case 2:
        return {{0}, {1}, {}, {}};
    case 3:
        return {{0}, {1}, {}, {2}};
    default:
        break;
    }
    std::vector<int> middle;
    for (int d = 2; d < rank - 1; ++d) middle.push_back(d);
    return {{0}, {1}, middle, {rank - 1}};
}

TensorDesc device_view(const TensorDesc &tensor) {
    const int rank = tensor.shape.rank();
    if (rank > kMaxRank)
        throw LayerError("tensor '" + tensor.name + "' is " + to_string(tensor.shape) +
                         ": the device computes tensors of rank 0 to " + std::to_string(kMaxRank));
    if (tensor.order.rank() != rank)
        throw LayerError("tensor '" + tensor.name + "' is " + to_string(tensor.shape) +
                         " with the order " + tensor.order.name() + " of rank " +
                         std::to_string(tensor.order.rank()));
    if (rank == 4 || tensor.graph_shape) return tensor; // 4-D, or a view already
    if (tensor.order != DimsOrder::identity(rank))
        throw LayerError("tensor '" + tensor.name + "' is " + to_string(tensor.shape) + " in " +
                         tensor.order.name() +
                         ": a tensor of a rank other than 4 is stored in its logical order "
                         "(DimsOrder::identity)");
    TensorDesc view = tensor;
    std::vector<int64_t> extents;
    for (const std::vector<int> &group : device_groups(rank)) {
        int64_t extent = 1;
        for (int d : group) extent *= tensor.shape[Dim(d)];
        extents.push_back(extent);
    }
    view.shape = Shape(extents);
    view.order = DimsOrder::NCHW();
    view.graph_shape = tensor.shape;
    if (tensor.quant.per_channel()) {
        const std::optional<Dim> axis = device_axis(tensor.shape, tensor.quant.axis.index());
        if (!axis)
            throw LayerError("tensor '" + tensor.name + "' is quantized per index of axis " +
                             std::to_string(tensor.quant.axis.index()) +
                             ", which shares its device dimension");
        view.quant.axis = *axis;
    }
    return view;
}

std::optional<Dim> device_axis(const Shape &logical, int axis) {
    const int rank = logical.rank();
    if (rank < 1 || rank > kMaxRank || axis < 0 || axis >= rank) return std::nullopt;
    const std::vector<std::vector<int>> groups = device_groups(rank);
    for (size_t d = 0; d < groups.size(); ++d) {
        bool holds = false, alone = true;
        for (int member : groups[d]) {
            if (member == axis)
                holds = true;
            else if (logical[Dim(member)] != 1)
                alone = false;
        }
        if (holds) return alone ? std::optional<Dim>(Dim(int(d))) : std::nullopt;
    }
    return std::nullopt;
}

std::optional<Shape> logical_shape(const Shape &like, const Shape &device) {
    const int rank = like.rank();
    if (device.rank() != 4 || rank > kMaxRank) return std::nullopt;
    if (rank == 4) return device;
    std::vector<int64_t> extents(size_t(rank), 1);
    const std::vector<std::vector<int>> groups = device_groups(rank);
    for (size_t d = 0; d < groups.size(); ++d) {
        const int64_t extent = device[Dim(int(d))];
        const std::vector<int> &group = groups[d];
        if (group.empty()) {
            if (extent != 1) return std::nullopt;
            continue;
        }
        // The dimensions sharing H (rank 5 and above): as `like` splits them, or the one above
        // 1 in `like` takes the whole extent (the last one when all are 1).
        int64_t product = 1;
        std::vector<int> above_one;
        for (int member : group) {
            product *= like[Dim(member)];
            if (like[Dim(member)] != 1) above_one.push_back(member);
        }
        if (product == extent) {
            for (int member : group) extents[size_t(member)] = like[Dim(member)];
        } else if (above_one.size() <= 1) {
            extents[size_t(above_one.empty() ? group.back() : above_one[0])] = extent;
        } else {
            return std::nullopt;
        }
    }
    return Shape(extents);
}

Quant Quant::per_channel(std::vector<float> scales, std::vector<int32_t> zero_points, Dim axis) {
    if (scales.size() != zero_points.size())
        throw LayerError("per-channel quantization: " + std::to_string(scales.size()) +
                         " scales but " + std::to_string(zero_points.size()) + " zero points");
    return {std::move(scales), std::move(zero_points), axis};
}

std::string TensorDesc::describe() const {
    std::ostringstream os;
    os << name << ": " << to_string(shape) << " " << to_string(type) << " " << order.name();
    if (!quant.empty()) {
        if (quant.per_channel())
            os << " q(per-channel x" << quant.scale.size() << ")";
        else
            os << " q(" << quant.scale[0] << ", " << quant.zero_point[0] << ")";
    }
    return os.str();
}

} // namespace vpuc::dsl
