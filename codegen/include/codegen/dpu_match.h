// DPU matching: recognizes, from a layer's algorithm alone, a computation the DPU runs
// (conv, depthwise conv, max/avg pool, eltwise, matmul) with its stride, dilation, padding,
// zero points, constants, and the output stage the PPE can do (requantization, activation,
// clamp). Like Halide's tensorization: the definition is the only source of truth.
#pragma once

#include <Halide.h>

#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "dsl/layer.h"
#include "vpu_target/dpu_arith.h"
#include "vpu_target/error.h"
#include "vpu_target/timing_model.h"

namespace vpuc::codegen {

// What a DPU task needs to know about a layer, in logical terms (before layouts).
struct DpuOpDesc {
    target::DpuOpKind op = target::DpuOpKind::Conv;
    int kernel_w = 1, kernel_h = 1;
    int stride_w = 1, stride_h = 1;
    int dilation_w = 1, dilation_h = 1;
    int pad_left = 0, pad_right = 0, pad_top = 0, pad_bottom = 0;
    int groups = 1; // grouped conv: zero weights between groups (see build_tasks)

    // Which of the layer's inputs feed the DPU: the activation, and for eltwise the second.
    int input = 0;
    int input2 = -1;
    int32_t input_zero_point = 0, input2_zero_point = 0;

    // Conv / depthwise / matmul: weights as a buffer of dims (ic, kx, ky, oc) — for depthwise
    // (1, kx, ky, c) — and their zero point.
    Halide::Buffer<> weights;
    int32_t weights_zero_point = 0;

    // Output stage. int8: per output channel bias, multiplier and shift (size 1 = per tensor),
    // then the PPE below with the output zero point. fp16: per channel float scale and bias.
    std::vector<int32_t> bias;
    std::vector<uint16_t> mult;
    std::vector<uint8_t> shift;
    std::vector<float> fp_scale, fp_bias;
    dpu::IntPpe int_ppe;
    dpu::FloatPpe float_ppe;

    // Eltwise.
    blob::EltwiseOp eltwise = blob::EltwiseOp::Add;
    int32_t in1_mult = 1, in2_mult = 1;

    Halide::Type input_type, output_type;

    std::string to_string() const; // "conv 3x3 s1 p1,1,1,1 u8->u8 relu"
};

// A layer that cannot run on the DPU. The message names the layer and the part of its
// definition that does not fit, e.g. "layer 'c1': update definition: the reduction
// multiplies 3 terms; a DPU MAC multiplies an input by a weight".
class DpuMatchError : public Error {
  public:
    using Error::Error;
};

// Throws DpuMatchError when the layer's algorithm is not a DPU operation. An activation
// composed over the output stage (relu/clamp/leaky relu of a conv, as activation fusion builds
// it) folds into the PPE exactly, except a composed fp16 leaky relu: the reference rounds to
// f16 before and after it, the DPU once, so results may differ by one f16 ulp.
DpuOpDesc match_dpu(const dsl::Layer &layer);

// The same, without throwing: nullopt and the reason in `why`.
std::optional<DpuOpDesc> try_match_dpu(const dsl::Layer &layer, std::string *why = nullptr);

// Throws DpuMatchError, naming the layer and the limit, when `op` is beyond the DPU of
// `target`: a kernel window wider or taller than its dpu.max_kernel (a dilated kernel counts
// its span, (kernel - 1) * dilation + 1, which build_tasks runs with zero weights between
// the taps), or a stride over its dpu.max_stride.
void check_dpu_limits(const std::string &layer, const DpuOpDesc &op, const target::Target &target);

// match_dpu and try_match_dpu for a target: the DPU operation, if the target's DPU can run it
// (check_dpu_limits). The lowering matches with these, so engine Auto puts a layer beyond the
// DPU's limits on the SHAVEs, and on_dpu() on such a layer is an error.
DpuOpDesc match_dpu(const dsl::Layer &layer, const target::Target &target);
std::optional<DpuOpDesc> try_match_dpu(const dsl::Layer &layer, const target::Target &target,
                                       std::string *why = nullptr);

// The bytes of the constant weights and weight table as the DPU reads them on `target`:
// channels padded to whole groups of its channel alignment, one weight table entry per
// output channel; 0 for an operation without weights, or a layer the target's DPU cannot run. (A
// grouped convolution's tasks may read more input channels when its groups share a channel
// group; this counts each group's own.)
int64_t dpu_weight_bytes(const DpuOpDesc &op, const target::Target &target);
int64_t dpu_weight_bytes(const dsl::Layer &layer, const target::Target &target);

} // namespace vpuc::codegen
