// The "timing" section of a target file: coefficients of the DPU, DMA and SHAVE cost models.
#include "json_fields.h"

namespace vpuc::target {

const MpeModeTiming *DpuTimingParams::find_mode(const std::string &name) const {
    for (const auto &m : modes)
        if (m.mode == name) return &m;
    return nullptr;
}

namespace detail {

namespace {

InputFetch parse_input_fetch(const FieldReader &dpu) {
    std::string fetch = dpu.string("input_fetch");
    if (fetch == "per_tap") return InputFetch::PerTap;
    if (fetch == "per_block_window") return InputFetch::PerBlockWindow;
    dpu.fail("input_fetch", "must be \"per_tap\" or \"per_block_window\", got \"" + fetch + "\"");
}

// Optional: a target without it prices the operation by its input fetch.
SlidingWindowTiming parse_sliding_window(const FieldReader &dpu, const std::string &key) {
    SlidingWindowTiming window;
    if (!dpu.has(key)) return window;
    FieldReader w = dpu.object(key);
    w.only_keys({"pixel_cycles", "row_cycles", "column_cycles"});
    window.present = true;
    window.pixel_cycles = w.real("pixel_cycles", 0, 1e4);
    window.row_cycles = w.real("row_cycles", 0, 1e4);
    window.column_cycles = w.real("column_cycles", 0, 1e4);
    return window;
}

// Optional: without it only the byte rate limits the input fetch. It describes the per-tap
// fetch, so a target fetching per block window cannot use it.
InputIssueTiming parse_input_issue(const FieldReader &dpu, InputFetch fetch) {
    InputIssueTiming issue;
    if (!dpu.has("input_issue")) return issue;
    if (fetch != InputFetch::PerTap)
        dpu.fail("input_issue", "only used with \"input_fetch\": \"per_tap\"");
    FieldReader i = dpu.object("input_issue");
    i.only_keys({"block_tap_cycles", "pixel_cycles", "strided_pixel_cycles"});
    issue.present = true;
    issue.block_tap_cycles = i.real("block_tap_cycles", 0, 1e4);
    issue.pixel_cycles = i.real("pixel_cycles", 0, 1e4);
    issue.strided_pixel_cycles = i.real("strided_pixel_cycles", 0, 1e4);
    return issue;
}

ActivationSlowdown parse_activation_slowdown(const FieldReader &slowdown,
                                             const std::string &dtype) {
    FieldReader factors = slowdown.object(dtype);
    factors.only_keys({"zmajor", "other"});
    return {factors.real("zmajor", 1, 100), factors.real("other", 1, 100)};
}

// "modes" holds one object per MPE mode of the target, keyed by the mode's name.
void parse_mode_timing(const FieldReader &dpu, Target &t) {
    FieldReader modes = dpu.object("modes");
    for (const auto &mode : t.mpe_modes) {
        FieldReader m = modes.object(mode.name);
        MpeModeTiming mt;
        mt.mode = mode.name;
        mt.mac_efficiency = m.real("mac_efficiency", 0.01, 1.0);
        mt.input_bytes_per_cycle = m.real("input_bytes_per_cycle", 0.01, 4096);
        mt.input_granule_bytes = int(m.integer("input_granule_bytes", 1, 256));
        mt.reuse_w = int(m.integer("reuse_w", 1, 4096));
        mt.reuse_h = int(m.integer("reuse_h", 1, 4096));
        mt.reuse_c = int(m.integer("reuse_c", 1, 4096));
        t.dpu_timing.modes.push_back(mt);
    }
}

} // namespace

void parse_timing_section(const FieldReader &timing, Target &t) {
    FieldReader dpu = timing.object("dpu");
    dpu.only_keys({"workload_overhead_cycles",
                   "channel_group_cycles",
                   "int8_efficiency",
                   "fp16_efficiency",
                   "word_bytes",
                   "weight_bytes_per_cycle",
                   "mac_feed_bytes_per_cycle",
                   "ppe_int8_elements_per_cycle",
                   "ppe_fp16_elements_per_cycle",
                   "cm_tap_cycles",
                   "cm_tap_cycles_per_input_byte",
                   "cm_input_pack_bytes",
                   "cm_fetch_factor",
                   "output_block_cycles",
                   "bottleneck_exponent",
                   "input_fetch",
                   "input_issue",
                   "depthwise_window",
                   "max_pool_window",
                   "channel_major_window",
                   "activation_slowdown",
                   "modes"});
    DpuTimingParams &d = t.dpu_timing;
    d.workload_overhead_cycles = dpu.real("workload_overhead_cycles", 0, 1e5);
    d.channel_group_cycles = dpu.real("channel_group_cycles", 0, 1e4);
    d.int8_efficiency = dpu.real("int8_efficiency", 0.01, 1.0);
    d.fp16_efficiency = dpu.real("fp16_efficiency", 0.01, 1.0);
    d.word_bytes = int(dpu.integer("word_bytes", 1, 256));
    d.weight_bytes_per_cycle = dpu.real("weight_bytes_per_cycle", 0.01, 4096);
    d.ppe_int8_elements_per_cycle = dpu.real("ppe_int8_elements_per_cycle", 0.01, 4096);
    d.ppe_fp16_elements_per_cycle = dpu.real("ppe_fp16_elements_per_cycle", 0.01, 4096);
    d.cm_tap_cycles = dpu.real("cm_tap_cycles", 0, 1e3);
    d.cm_tap_cycles_per_input_byte = dpu.real("cm_tap_cycles_per_input_byte", 0, 1e3);
    d.bottleneck_exponent = dpu.real("bottleneck_exponent", 1, 64);
    d.input_fetch = parse_input_fetch(dpu);
    // Optional fields, so that the descriptions blobs carried before they were modelled still
    // parse.
    d.depthwise_window = parse_sliding_window(dpu, "depthwise_window");
    d.max_pool_window = parse_sliding_window(dpu, "max_pool_window");
    d.channel_major_window = parse_sliding_window(dpu, "channel_major_window");
    d.input_issue = parse_input_issue(dpu, d.input_fetch);
    if (dpu.has("cm_input_pack_bytes"))
        d.cm_input_pack_bytes = int(dpu.integer("cm_input_pack_bytes", 1, 256));
    if (dpu.has("mac_feed_bytes_per_cycle"))
        d.mac_feed_bytes_per_cycle = dpu.real("mac_feed_bytes_per_cycle", 0.01, 1e5);
    if (dpu.has("output_block_cycles"))
        d.output_block_cycles = dpu.real("output_block_cycles", 0, 1e4);
    // The window replaces the channel-major input fetch, and its factor with it.
    if (!d.channel_major_window.present)
        d.cm_fetch_factor = dpu.real("cm_fetch_factor", 0.01, 100);
    else if (dpu.has("cm_fetch_factor"))
        dpu.fail("cm_fetch_factor", "not used with channel_major_window: remove one");
    if (dpu.has("activation_slowdown")) {
        FieldReader slowdown = dpu.object("activation_slowdown");
        slowdown.only_keys({"int8", "fp16"});
        d.activation_int8 = parse_activation_slowdown(slowdown, "int8");
        d.activation_fp16 = parse_activation_slowdown(slowdown, "fp16");
    }
    parse_mode_timing(dpu, t);

    FieldReader dma = timing.object("dma");
    DmaTimingParams &m = t.dma_timing;
    m.ddr_to_cmx_latency_ns = dma.real("ddr_to_cmx_latency_ns", 0, 1e5);
    m.cmx_to_ddr_latency_ns = dma.real("cmx_to_ddr_latency_ns", 0, 1e5);
    m.cmx_to_cmx_latency_ns = dma.real("cmx_to_cmx_latency_ns", 0, 1e5);
    m.burst_bytes = dma.real("burst_bytes", 1, 4096);
    m.ddr_read_line_overhead_bytes = dma.real("ddr_read_line_overhead_bytes", 0, 1e5);
    m.ddr_write_line_overhead_bytes = dma.real("ddr_write_line_overhead_bytes", 0, 1e5);

    FieldReader shave = timing.object("shave");
    shave.only_keys({"launch_cycles", "arith_ops_per_cycle", "special_op_cycles",
                     "cmx_bytes_per_cycle", "tile_cmx_bytes_per_cycle"});
    ShaveTimingParams &s = t.shave_timing;
    s.launch_cycles = shave.real("launch_cycles", 0, 1e6);
    s.arith_ops_per_cycle = shave.real("arith_ops_per_cycle", 0.01, 64);
    s.special_op_cycles = shave.real("special_op_cycles", 0.01, 1e4);
    s.cmx_bytes_per_cycle = shave.real("cmx_bytes_per_cycle", 0.01, 4096);
    s.tile_cmx_bytes_per_cycle = shave.real("tile_cmx_bytes_per_cycle", 0.01, 65536);
}

} // namespace detail

} // namespace vpuc::target
