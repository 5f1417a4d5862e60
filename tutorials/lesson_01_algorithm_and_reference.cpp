// Lesson 1: a layer is a pure algorithm; the CPU reference runs it.
//
// In vpuc, as in Halide, *what* a layer computes is written apart from *how* it runs on the
// NPU (the schedule). This lesson writes only the what: a graph input, a layer written by hand
// in Halide, a layer from the library, and runs them on the CPU reference. It then checks the
// reference against the same arithmetic in plain C++.
//
// Build and run:  ninja -C build lesson_01_algorithm_and_reference
//                 ./build/tutorials/lesson_01_algorithm_and_reference

#include <Halide.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "algorithms/layers.h"
#include "algorithms/reference.h"
#include "codegen/dpu_match.h"
#include "dsl/graph.h"

using namespace vpuc;
using Halide::Expr;
using Halide::Func;

static int failures = 0;
#define CHECK(cond, ...)                                                                           \
    do {                                                                                           \
        if (!(cond) && ++failures <= 5) {                                                          \
            std::printf("MISMATCH: " __VA_ARGS__);                                                 \
            std::printf("\n");                                                                     \
        }                                                                                          \
    } while (0)

int main() {
    // ---- The graph input ---------------------------------------------------------------------
    //
    // A TensorDesc says what Halide does not know about a tensor. Its shape is *logical*,
    // indexed by dsl::Dim in the ONNX order N, C, H, W: here one image of 3 channels, 6 rows,
    // 8 columns. Its element type is u8, quantized per tensor: real = 0.02 * (stored - 128),
    // so stored 128 is real 0 (the zero point). Its DimsOrder says how the logical dims are
    // laid out in memory: NHWC puts C innermost, the layout the DPU reads. Positions in memory
    // are a different type, dsl::MemDim (outermost first): a Shape is indexed by Dim only, a
    // MemShape by MemDim only, and DimsOrder converts between them; mixing them does not
    // compile.
    const float in_scale = 0.02f;
    const int32_t in_zero_point = 128;
    dsl::TensorDesc image_desc;
    image_desc.name = "image";
    image_desc.shape = dsl::Shape{1, 3, 6, 8}; // N, C, H, W
    image_desc.type = dsl::ElemType::U8;
    image_desc.quant = dsl::Quant::per_tensor(in_scale, in_zero_point);
    image_desc.order = dsl::DimsOrder::NHWC();
    dsl::Layer image = dsl::Layer::input(image_desc);

    const int W = int(image_desc.shape[dsl::dims::W]), H = int(image_desc.shape[dsl::dims::H]);
    const dsl::MemShape mem = image_desc.order.to_mem(image_desc.shape);
    const dsl::MemStrides strides = image_desc.order.dense_strides(image_desc.shape);
    std::printf("%s; in memory (N, H, W, C):", image_desc.describe().c_str());
    for (int m = 0; m < mem.rank(); ++m) std::printf(" %lld", (long long)mem[dsl::MemDim(m)]);
    std::printf(", element strides");
    for (int m = 0; m < mem.rank(); ++m) std::printf(" %lld", (long long)strides[dsl::MemDim(m)]);
    std::printf("\n");

    // ---- (a) A layer written by hand: a 3x3 box blur -----------------------------------------
    //
    // An algorithm is a function from the layer's input Funcs to its output Func. Activations
    // are Funcs of (c, x, y) in Halide's order, innermost first: c is the channel (innermost,
    // as in NHWC), x the column (W), y the row (H); the batch is always 1 and is left out.
    // dsl::act_vars() holds the Vars c, x and y that every layer and schedule shares.
    //
    // The blur averages each channel over a 3x3 window, clamping coordinates at the edges
    // (an algorithm must not read outside its input's extent), and rounds to nearest: (sum + 4)
    // / 9. It works on stored values: the mean of values with one scale and zero point has the same
    // scale and zero point, so the output tensor is the input's, renamed.
    dsl::Algorithm blur_algorithm = [=](const std::vector<Func> &in) {
        const auto &v = dsl::act_vars();
        Expr sum = 0;
        for (int dy = -1; dy <= 1; ++dy)
            for (int dx = -1; dx <= 1; ++dx)
                sum += Halide::cast<int32_t>(in[0](v.c, Halide::clamp(v.x + dx, 0, W - 1),
                                                   Halide::clamp(v.y + dy, 0, H - 1)));
        Func blur("blur");
        blur(v.c, v.x, v.y) = Halide::cast<uint8_t>((sum + 4) / 9);
        return blur;
    };
    dsl::TensorDesc blur_desc = image_desc;
    blur_desc.name = "blur";
    dsl::Layer blur = dsl::Layer::make("box_blur", blur_desc, {image}, blur_algorithm);
    std::printf("%s\n", blur.output().describe().c_str());

    // ---- (b) A layer from the library: int8 conv + requantization + ReLU ---------------------
    //
    // algorithms::conv2d builds a conv in the DPU's arithmetic (vpu_target/dpu_arith.h):
    //   acc = bias + sum((x - x_zero_point) * (w - w_zero_point))       in int32
    // Subtracting the zero points makes each operand its real value over its scale, so acc is
    // the real result over in_scale * w_scale. Padding adds real zeros: stored x_zero_point.
    // The PPE then rescales acc to the output's scale with a 16-bit fixed-point multiplier,
    //   y = (acc * mult + 2^(shift-1)) >> shift      (rounding half up, in int64)
    // applies the fused ReLU (max(y, 0)), adds the output zero point and saturates to i8.
    // algorithms::fixed_point picks mult and shift for the real multiplier
    // in_scale * w_scale / out_scale. With an i8 output of zero point 0, the ReLU is visible:
    // negative results become 0 rather than negative stored values. The Halide
    // expression does these operations one for one, so the reference is bit-exact with the
    // DPU (and with the simulator, which runs the same C++ functions).
    const int IC = int(image_desc.shape[dsl::dims::C]), OC = 4;
    const float w_scale = 0.01f, out_scale = 0.01f;
    const int32_t out_zero_point = 0;
    std::mt19937 rng(1);
    auto uniform = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };

    algorithms::QuantWeights w;
    w.weights = Halide::Buffer<int8_t>(IC, 3, 3, OC); // dims (ic, kx, ky, oc)
    w.weights.for_each_value([&](int8_t &v) { v = int8_t(uniform(-20, 20)); });
    w.zero_point = 0; // symmetric int8 weights, the usual choice
    for (int oc = 0; oc < OC; ++oc) w.bias.push_back(uniform(-500, 500)); // in acc's units
    const double multiplier = double(in_scale) * w_scale / out_scale;
    const algorithms::FixedPoint rq = algorithms::fixed_point(multiplier);
    w.requant = {rq}; // one for all channels (per channel works too)
    w.output_type = dsl::ElemType::I8;
    w.output_quant = dsl::Quant::per_tensor(out_scale, out_zero_point);

    algorithms::Conv2dParams p;
    p.pad_left = p.pad_right = p.pad_top = p.pad_bottom = 1;
    p.activation = algorithms::Activation::relu();
    dsl::Layer conv = algorithms::conv2d("conv", blur, w, p);
    std::printf("%s; requant %g ~= %u / 2^%u\n", conv.output().describe().c_str(), multiplier,
                unsigned(rq.mult), unsigned(rq.shift));

    // ---- The graph and the CPU reference ---------------------------------------------------
    //
    // A Graph is named by its outputs; it finds the inputs and orders the layers itself.
    // run_reference chains each algorithm to its producers' Funcs, computes every layer whole
    // and JIT-compiles the pipeline. Buffers are (c, x, y) like the Funcs (make_buffer).
    dsl::Graph graph("lesson1", {blur, conv});
    Halide::Buffer<uint8_t> in = algorithms::make_buffer(image_desc);
    in.for_each_value([&](uint8_t &v) { v = uint8_t(uniform(0, 255)); });
    std::vector<Halide::Buffer<>> outs = algorithms::run_reference(graph, {in});
    Halide::Buffer<uint8_t> blur_out = outs[0];
    Halide::Buffer<int8_t> conv_out = outs[1];

    std::printf("image(c=0, x=0..4, y=0):");
    for (int x = 0; x < 5; ++x) std::printf(" %4d", in(0, x, 0));
    std::printf("\nblur (c=0, x=0..4, y=0):");
    for (int x = 0; x < 5; ++x) std::printf(" %4d", blur_out(0, x, 0));
    std::printf("\nconv (c=0, x=0..4, y=0):");
    for (int x = 0; x < 5; ++x) std::printf(" %4d", conv_out(0, x, 0));
    std::printf("  (real = 0.01 * stored)\n");

    // ---- Checking against plain C++ ---------------------------------------------------------
    //
    // The same arithmetic, written from the definitions above with no Halide at all.
    auto blur_at = [&](int c, int x, int y) {
        int sum = 0;
        for (int dy = -1; dy <= 1; ++dy)
            for (int dx = -1; dx <= 1; ++dx)
                sum += in(c, std::clamp(x + dx, 0, W - 1), std::clamp(y + dy, 0, H - 1));
        return (sum + 4) / 9;
    };
    auto conv_at = [&](int oc, int x, int y) {
        int32_t acc = w.bias[size_t(oc)];
        for (int ky = 0; ky < 3; ++ky)
            for (int kx = 0; kx < 3; ++kx)
                for (int ic = 0; ic < IC; ++ic) {
                    int ix = x + kx - 1, iy = y + ky - 1; // pad 1
                    bool inside = ix >= 0 && ix < W && iy >= 0 && iy < H;
                    int32_t xv = inside ? blur_at(ic, ix, iy) - in_zero_point : 0;
                    acc += xv * (w.weights(ic, kx, ky, oc) - w.zero_point);
                }
        int64_t y64 = (int64_t(acc) * rq.mult + (int64_t(1) << (rq.shift - 1))) >> rq.shift;
        y64 = std::max<int64_t>(y64, 0);                                  // ReLU
        return int(std::clamp<int64_t>(y64 + out_zero_point, -128, 127)); // saturate to i8
    };
    int checked = 0;
    for (int y = 0; y < H; ++y)
        for (int x = 0; x < W; ++x) {
            for (int c = 0; c < IC; ++c, ++checked)
                CHECK(blur_out(c, x, y) == blur_at(c, x, y), "blur(%d, %d, %d): %d, expected %d", c,
                      x, y, blur_out(c, x, y), blur_at(c, x, y));
            for (int c = 0; c < OC; ++c, ++checked)
                CHECK(conv_out(c, x, y) == conv_at(c, x, y), "conv(%d, %d, %d): %d, expected %d", c,
                      x, y, conv_out(c, x, y), conv_at(c, x, y));
        }
    std::printf("checked %d values against plain C++: %d mismatches\n", checked, failures);

    // ---- Where the algorithm goes next ------------------------------------------------------
    //
    // The definition is the only source of truth: the DPU matcher reads it to find a DPU
    // operation. The library's conv has the canonical form (algorithms/layers.h); the
    // hand-written blur does not, so it is work for the SHAVEs (the vector processors).
    std::string why;
    std::optional<codegen::DpuOpDesc> conv_op = codegen::try_match_dpu(conv);
    std::printf("DPU matcher: conv -> %s\n", conv_op ? conv_op->to_string().c_str() : "no match");
    std::printf("             blur -> %s\n",
                codegen::try_match_dpu(blur, &why) ? "matched" : why.c_str());
    return failures == 0 ? 0 : 1;
}
