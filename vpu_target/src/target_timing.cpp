// The "timing" section of a target file: coefficients of the DPU and DMA cost models.
#include "json_fields.h"

namespace vpuc::target::detail {

void parse_timing_section(const FieldReader &timing, Target &t) {
    FieldReader dpu = timing.object("dpu");
    t.dpu_timing.workload_overhead_cycles = dpu.real("workload_overhead_cycles", 0, 1e5);
    t.dpu_timing.int8_efficiency = dpu.real("int8_efficiency", 0.01, 1.0);
    t.dpu_timing.fp16_efficiency = dpu.real("fp16_efficiency", 0.01, 1.0);
    t.dpu_timing.eltwise_bytes_per_cycle = dpu.real("eltwise_bytes_per_cycle", 1, 4096);
    t.dpu_timing.pool_efficiency = dpu.real("pool_efficiency", 0.01, 1.0);
    t.dpu_timing.activation_cycles_per_block = dpu.real("activation_cycles_per_block", 0, 1e3);

    FieldReader dma = timing.object("dma");
    t.dma_timing.ddr_to_cmx_latency_ns = dma.real("ddr_to_cmx_latency_ns", 0, 1e5);
    t.dma_timing.cmx_to_ddr_latency_ns = dma.real("cmx_to_ddr_latency_ns", 0, 1e5);
    t.dma_timing.cmx_to_cmx_latency_ns = dma.real("cmx_to_cmx_latency_ns", 0, 1e5);
    t.dma_timing.burst_bytes = dma.real("burst_bytes", 1, 4096);
    t.dma_timing.line_overhead_bytes = dma.real("line_overhead_bytes", 0, 4096);
}

}  // namespace vpuc::target::detail
