// Cost models of the hardware: DPU workload cycles, DMA transfer cost and SHAVE task cycles.
// Calibrated against Intel's VPUNN predictions (docs/timing-model.md); the simulator's timing
// uses nothing else.
#pragma once

#include <cstdint>
#include <string>

#include "vpu_target/target.h"

namespace vpuc::target {

// The blob's enum (schema/blob.fbs): one definition of the DPU's operations.
using DpuOpKind = blob::DpuOp;

// One DPU workload (a variant): an output region computed in one MPE mode.
struct DpuWorkload {
    DpuOpKind op = DpuOpKind::Conv;
    DType input_dtype = DType::I8;
    DType output_dtype = DType::I8;
    int in_w = 0, in_h = 0, in_c = 0;
    int out_w = 0, out_h = 0, out_c = 0;
    int kernel_w = 1, kernel_h = 1;
    int stride_w = 1, stride_h = 1;
    int pad_top = 0, pad_bottom = 0, pad_left = 0, pad_right = 0;
    std::string mpe_mode;
    bool activation = false; // a PPE activation is applied
};

// The timing model's version. Bumped with any change to its equations or to the bundled
// targets' timing coefficients, and only in a change of its own, with the errors against
// VPUNN before and after (docs/timing-model.md, "Versions"); every benchmark prints it, so
// that figures from different models are never compared by mistake.
constexpr int kTimingModelVersion = 3;

// "timing model 3" for a bundled target; with a target edited or written by hand, its
// description's SHA-256 follows, as its figures are not the bundled model's.
std::string timing_model_label(const Target &target);

// DPU clock cycles of one workload. Throws TargetError for an MPE mode the target lacks.
double dpu_workload_cycles(const Target &target, const DpuWorkload &w);

enum class DmaDirection { DdrToCmx, CmxToDdr, CmxToCmx, DdrToDdr };

// One DMA transfer: `lines` lines of `line_bytes` contiguous bytes each.
struct DmaTransfer {
    DmaDirection direction = DmaDirection::DdrToCmx;
    uint64_t line_bytes = 0;
    uint64_t lines = 1;
    bool src_contiguous = true; // lines follow each other at the source
    bool dst_contiguous = true;
};

// What a transfer costs, split so that the simulator can share DDR bandwidth between engines:
// a fixed latency, then `bus_bytes` (payload plus burst and line waste) moved at a rate
// limited by `max_bandwidth_gbps` and by the DDR bandwidth left by other transfers.
struct DmaCost {
    double latency_ns = 0;
    double bus_bytes = 0;
    double max_bandwidth_gbps = 0;
    bool uses_ddr = true;
};

DmaCost dma_transfer_cost(const Target &target, const DmaTransfer &t);

// Duration of a transfer alone on the device, in nanoseconds.
double dma_transfer_ns(const Target &target, const DmaTransfer &t);

// One SHAVE task: a kernel computing `output_elements` on `shaves` SHAVEs, each taking an
// equal share; the kernel's figures per output vector of `vector_lanes` elements come from its
// lowered code (blob.fbs, Kernel).
struct ShaveWork {
    double output_elements = 0;
    int shaves = 1;
    uint32_t vector_lanes = 1;
    double arith_ops_per_vector = 0;
    double special_ops_per_vector = 0;
    double cmx_bytes_per_vector = 0;
};

// SHAVE clock cycles of one task, launch included.
double shave_task_cycles(const Target &target, const ShaveWork &w);

} // namespace vpuc::target
