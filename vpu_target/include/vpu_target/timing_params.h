// Coefficients of the DPU, DMA and SHAVE cost models, read from a target file's "timing"
// section.
// docs/timing-model.md gives the equations and where each coefficient came from.
#pragma once

#include <string>
#include <vector>

namespace vpuc::target {

// How the DPU's input data unit moves activations from CMX into the MAC array.
enum class InputFetch {
    PerTap,         // streams the input pixels once per kernel tap (vpu27)
    PerBlockWindow, // fetches each output block's input window once (vpu20)
};

// Per-MPE-mode coefficients: the mode decides how activations and weights are reused.
struct MpeModeTiming {
    std::string mode;                 // the MPE mode these apply to
    double mac_efficiency = 1;        // the mode's share of the MAC array's sustained rate
    double input_bytes_per_cycle = 1; // activation fetch rate
    int input_granule_bytes = 16;     // a pixel's channels are fetched in units of this size
    int reuse_w = 1, reuse_h = 1;     // output tile that shares one fetch of the weights
    int reuse_c = 1;                  // output channels that share one fetch of the activations
};

// An operation that slides its kernel along the output rows: each step brings in kernel_h
// rows of stride_w new input columns. Cycles per output pixel and 16 channels, with 8-bit
// inputs, are pixel_cycles + kernel_h * (row_cycles + column_cycles * stride_w); other input
// types cost as their MACs do.
struct SlidingWindowTiming {
    bool present = false;
    double pixel_cycles = 0;
    double row_cycles = 0;
    double column_cycles = 0;
};

// How fast the input data unit can issue reads, whatever their width (per_tap fetch only): it
// reads one kernel tap of one output block at a time, block_tap_cycles per such read plus
// pixel_cycles per pixel in it, and strided_pixel_cycles more per pixel for each step of
// stride_w beyond 1 (the pixels of neighbouring outputs no longer sit side by side in CMX).
// The byte rate (input_bytes_per_cycle) binds instead once the pixels are wide.
struct InputIssueTiming {
    bool present = false;
    double block_tap_cycles = 0;
    double pixel_cycles = 0;
    double strided_pixel_cycles = 0;
};

struct ActivationSlowdown {
    double zmajor = 1;
    double other = 1;
};

struct DpuTimingParams {
    double workload_overhead_cycles = 0;    // fixed cost of one variant
    double channel_group_cycles = 0;        // per 16 output channels (weight table, PPE setup)
    double int8_efficiency = 1;             // sustained fraction of peak MACs, 8-bit inputs
    double fp16_efficiency = 1;             // same for fp16 inputs
    int word_bytes = 16;                    // data-path word: channels pad to it (MACs, PPE)
    double weight_bytes_per_cycle = 1;      // weight fetch rate
    double ppe_int8_elements_per_cycle = 1; // output elements the PPE writes per cycle
    double ppe_fp16_elements_per_cycle = 1;
    // Channel-major convolution (fewer input channels than the alignment): MAC-array cycles per
    // output pixel, kernel tap and 16 output channels = tap_cycles + per_input_byte * in bytes,
    // the input bytes of a pixel padded to cm_input_pack_bytes.
    double cm_tap_cycles = 0;
    double cm_tap_cycles_per_input_byte = 0;
    int cm_input_pack_bytes = 1;
    double cm_fetch_factor = 1; // channel-major input fetch cost relative to Z-major
    // Depthwise convolution and average pooling, max pooling (no weights; the depthwise window
    // if absent), and channel-major convolution as a sliding window (vpu20); absent where the
    // input fetch prices them (vpu27).
    SlidingWindowTiming depthwise_window;
    SlidingWindowTiming max_pool_window;
    SlidingWindowTiming channel_major_window;
    // The output data unit writes each output block of the MPE mode (block_w x block_h pixels,
    // block_c channels) as one CMX write of at least this many cycles; 0 where it never limits
    // (vpu20).
    double output_block_cycles = 0;
    // Rate at which the MAC array takes in each output block's input window, once per block_c
    // output channels (Z-major convolution); 0 where it never limits (vpu20).
    double mac_feed_bytes_per_cycle = 0;
    InputIssueTiming input_issue;   // absent: the byte rate alone limits the input fetch
    double bottleneck_exponent = 1; // p of the p-norm that overlaps the pipeline stages
    // A PPE activation (ReLU) slows a Z-major convolution's MAC array and input fetch by one
    // factor and every other stage (PPE, depthwise, pooling, channel-major) by another, per
    // input type; 1 where it costs nothing (vpu27).
    ActivationSlowdown activation_int8, activation_fp16;
    InputFetch input_fetch = InputFetch::PerTap;
    std::vector<MpeModeTiming> modes;

    const MpeModeTiming *find_mode(const std::string &name) const;
};

struct DmaTimingParams {
    double ddr_to_cmx_latency_ns = 0; // fixed cost of a DDR read transfer
    double cmx_to_ddr_latency_ns = 0; // fixed cost of a DDR write transfer
    double cmx_to_cmx_latency_ns = 0;
    double burst_bytes = 64; // DDR is accessed in bursts: a line's bytes round up to these
    // Extra bus bytes per line when the DDR side is strided (line breaks cost DDR cycles).
    double ddr_read_line_overhead_bytes = 0;
    double ddr_write_line_overhead_bytes = 0;
};

// A SHAVE runs a kernel as a VLIW core: per output vector it issues the kernel's vector
// instructions while its load/store units move the kernel's CMX bytes; the slower of the two
// sets the pace. Special-function instructions (exp, log, sqrt, tanh, division) take several
// cycles each. The SHAVEs a task is split across share their tile's CMX port.
struct ShaveTimingParams {
    double launch_cycles = 0;            // fixed cost of a kernel launch
    double arith_ops_per_cycle = 1;      // vector arithmetic instructions issued per cycle
    double special_op_cycles = 1;        // issue cycles of one special-function instruction
    double cmx_bytes_per_cycle = 16;     // one SHAVE's CMX load/store rate
    double tile_cmx_bytes_per_cycle = 0; // the CMX rate the SHAVEs of one task share
};

} // namespace vpuc::target
