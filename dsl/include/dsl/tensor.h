// What Halide does not carry about a tensor: logical shape, element type, quantization and
// memory layout.
#pragma once

#include <Halide.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "dsl/dims.h"
#include "vpu_target/error.h"

namespace vpuc::dsl {

// A layer, tensor or constant that cannot be defined as given (a shape, type, quantization or
// parameter that does not fit). The message names the layer or tensor.
class LayerError : public Error {
  public:
    using Error::Error;
};

// The element types of graph tensors: the device's (u8, i8, f16, f32, i32) and, for indices,
// masks and shape arithmetic, i64, bool and f64, which the device does not have. Those map to
// a device type at one checked point (to_device) or are folded away at compile time.
enum class ElemType { U8, I8, F16, F32, I32, I64, Bool, F64 };

const char *to_string(ElemType t);
int bytes_of(ElemType t);
Halide::Type halide_type(ElemType t);
// The element type of Halide type `t`; throws LayerError naming `what` for a type graph
// tensors do not have (u16, i16, u32, u64).
ElemType elem_type(const Halide::Type &t, const std::string &what);
bool is_quantized_int(ElemType t); // u8 / i8
bool is_device_type(ElemType t);   // u8, i8, f16, f32, i32
// The device type a graph type maps onto: i64 -> i32, bool -> u8, f64 -> f32; device types
// map onto themselves.
ElemType device_type(ElemType t);

// Affine quantization: real = scale * (stored - zero_point). One entry per tensor, or one
// per index of `axis` (per-channel, for weights).
struct Quant {
    std::vector<float> scale;
    std::vector<int32_t> zero_point;
    Dim axis = dims::C;

    static Quant none() { return {}; }
    static Quant per_tensor(float scale, int32_t zero_point) {
        return {{scale}, {zero_point}, dims::C};
    }
    static Quant per_channel(std::vector<float> scales, std::vector<int32_t> zero_points, Dim axis);

    bool empty() const { return scale.empty(); }
    bool per_channel() const { return scale.size() > 1; }
    float scale_at(int64_t index) const { return scale.at(per_channel() ? size_t(index) : 0); }
    int32_t zero_point_at(int64_t index) const {
        return zero_point.at(per_channel() ? size_t(index) : 0);
    }
};

struct TensorDesc {
    std::string name;
    Shape shape;
    ElemType type = ElemType::F32;
    Quant quant;
    DimsOrder order = DimsOrder::NCHW();
    // In a device view (device_view) of a tensor of a rank other than 4, the tensor's shape in
    // the graph (of rank 0 for a scalar); unset otherwise.
    std::optional<Shape> graph_shape;

    // The shape the graph knows the tensor by: graph_shape if set, else shape.
    const Shape &logical_shape() const { return graph_shape ? *graph_shape : shape; }
    int64_t bytes() const { return shape.elements() * bytes_of(type); }
    std::string describe() const; // "conv1: 1x64x56x56 u8 NHWC q(0.02, 128)"
};

// The highest rank of a graph tensor the device computes (as .npy files and blobs hold).
constexpr int kMaxRank = 8;

// Device tensors are 4-D (N, C, H, W) and computed image by image. A graph tensor of rank 0 to
// kMaxRank maps onto one, keeping the row-major order of its elements (a tensor of a rank
// other than 4 is stored in its logical order, DimsOrder::identity): [] (a scalar) ->
// [1, 1, 1, 1], [K] -> [1, K, 1, 1], [N, K] -> [N, K, 1, 1], [N, C, L] -> [N, C, 1, L], and from
// rank 5 on the dimensions between C and the last one share H: [N, C, D, H, W] ->
// [N, C, D*H, W], [N, C, A, B, H, W] -> [N, C, A*B*H, W]. The view of a 4-D tensor is the
// tensor. Throws LayerError naming the tensor for a rank above kMaxRank, or for a rank other
// than 4 in another order.
TensorDesc device_view(const TensorDesc &tensor);
// The logical axes each device dimension (N, C, H, W) holds, outermost first, for a rank of 0
// to kMaxRank: none for rank 0, {{}, {0}, {}, {}} for rank 1, {{0}, {1}, {2, 3, 4}, {5}} for
// rank 6.
std::vector<std::vector<int>> device_groups(int rank);
// The device dimension that holds logical axis `axis` of a tensor of shape `logical` and
// nothing else, or nullopt: the dimensions sharing H (rank 5 and above) hold one of them
// alone only where the others have extent 1.
std::optional<Dim> device_axis(const Shape &logical, int axis);
// The shape, of the rank of `like`, of the device tensor `device` that a layer computes from a
// tensor of shape `like` (the inverse of device_view), or nullopt when that rank cannot hold it.
std::optional<Shape> logical_shape(const Shape &like, const Shape &device);

// `values` (a buffer of `tensor`'s type, as algorithms::make_buffer lays it out) in
// device_type(tensor.type): i64 checked to fit in i32, bool as 0 or 1, f64 rounded to the
// nearest f32 and, when finite, checked to stay finite. Throws LayerError naming the tensor, the
// first element that does not fit and its value.
Halide::Buffer<> to_device(const TensorDesc &tensor, const Halide::Buffer<> &values);

} // namespace vpuc::dsl
