// What the DPU pipelines (dpu_generators.cpp, compiled ahead of time) and the simulator that
// calls them (src/sim_dpu.cpp) agree on, beyond their signatures.
#pragma once

namespace vpuc::dpu_kernels {

// Every call computes an output of at least kTileChannels channels and the op's tile columns:
// the pipelines split their output into tiles of this size without a tail (Halide's
// ShiftInwards), and the simulator computes a smaller box into a scratch buffer of this size.
constexpr int kTileChannels = 16;
constexpr int kConvTileColumns = 2; // conv, matmul and depthwise
constexpr int kPoolTileColumns = 2;

// Eltwise ops, numbered as blob::EltwiseOp: Add, Sub, Mul, Max, Min.
constexpr int kEltwiseOps = 5;

// The `ppe` buffer: the task's post-processing, one int32 each (floats as their bits). The
// activation and the eltwise op, which choose code paths, are scalar arguments.
enum PpeField {
    kReluxMax,
    kLeakyMult,
    kLeakyShift,
    kClampLow,
    kClampHigh,
    kOutZeroPoint,
    kOutMin, // the output type's range
    kOutMax,
    kFpReluxMax,
    kFpLeakyAlpha,
    kFpClampLow,
    kFpClampHigh,
    kIn1Mult, // eltwise: each input, minus its zero point, times its multiplier
    kIn2Mult,
    kPpeFields
};

// The `channels` buffer, (channel, field): each output channel's scaling.
enum ChannelField {
    kBias,  // int32; fp16: the float's bits (-0.0, which adds nothing, for pools and eltwise)
    kMult,  // requantization multiplier
    kShift, // requantization shift
    kScale, // float bits: fp16 outputs
    kChannelFields
};

} // namespace vpuc::dpu_kernels
