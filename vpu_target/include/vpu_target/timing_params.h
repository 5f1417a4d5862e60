// Coefficients of the DPU and DMA cost models, read from a target file's "timing" section.
#pragma once

namespace vpuc::target {

// DPU workload cost-model coefficients, fitted against the VPUNN reference (see
// docs/timing-model.md); the data file says where each came from.
struct DpuTimingParams {
    double workload_overhead_cycles = 0;  // fixed cost of one variant, DPU cycles
    double int8_efficiency = 1;           // sustained fraction of peak MACs on large convs
    double fp16_efficiency = 1;
    double eltwise_bytes_per_cycle = 0;   // eltwise is bound by CMX reads, not MACs
    double pool_efficiency = 1;           // max pool and depthwise relative to peak per channel
    double activation_cycles_per_block = 0;  // PPE cost where it does not overlap
};

struct DmaTimingParams {
    double ddr_to_cmx_latency_ns = 0;  // fixed cost of a DDR read transfer
    double cmx_to_ddr_latency_ns = 0;  // fixed cost of a DDR write transfer
    double cmx_to_cmx_latency_ns = 0;
    double burst_bytes = 64;            // lines shorter than this waste bus cycles
    double line_overhead_bytes = 0;     // per-line cost of strided transfers, in bytes of bus time
};

}  // namespace vpuc::target
