// Pieces shared by the layer constructors: tensor facts, the MAC's input operand, the padded
// input Func, output descriptions and argument checks.
#pragma once

#include <Halide.h>

#include <stdexcept>
#include <string>
#include <vector>

#include "dsl/layer.h"

namespace vpuc::algorithms::detail {

// What an algorithm needs to know about one input tensor.
struct InputInfo {
    int64_t c = 0, w = 0, h = 0;
    dsl::ElemType type = dsl::ElemType::F32;
    Halide::Type halide_type;
    bool quantized = false; // u8/i8
    float scale = 1;
    int32_t zero_point = 0;
};

// Throws std::invalid_argument naming `what` (e.g. "conv2d 'c1'") on a non-4-D, batched or
// per-channel-quantized input.
InputInfo input_info(const std::string &what, const dsl::Layer &input);

// A Func with a name unique in the process, so composed algorithms never collide.
Halide::Func named_func(const std::string &name);

// The value the DPU's MAC takes from a stored element: i32(v) - zero point, or f32(v).
Halide::Expr mac_operand(const Halide::Expr &stored, const InputInfo &in);

// P(c, x, y) = mac_operand(in(c, clamp(x), clamp(y))) inside the image, `outside` elsewhere.
Halide::Func padded_input(const std::string &name, const Halide::Func &in, const InputInfo &info,
                          const Halide::Expr &outside);

// v * stride + k * dilation - pad, with unit factors and zero pad left out.
Halide::Expr window_coord(const Halide::Expr &v, int stride, const Halide::Expr &k, int dilation,
                          int pad);

// Output extent of a window: (in + pads - dilated kernel) / stride + 1; throws if < 1.
int64_t window_extent(const std::string &what, int64_t in, int pad_a, int pad_b, int kernel,
                      int stride, int dilation);

dsl::TensorDesc output_desc(const std::string &name, const dsl::Layer &like, int64_t c, int64_t w,
                            int64_t h, dsl::ElemType type, dsl::Quant quant);

[[noreturn]] inline void invalid(const std::string &what, const std::string &why) {
    throw std::invalid_argument(what + ": " + why);
}

} // namespace vpuc::algorithms::detail
