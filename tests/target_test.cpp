#include <gtest/gtest.h>

#include "vpu_target/target.h"

using namespace vpuc::target;

namespace {

const char *kMinimal = R"({
  "name": "t", "description": "test target", "tiles": 2,
  "dpu": { "per_tile": 1, "int8_macs_per_cycle": 2048, "fp16_macs_per_cycle": 1024,
           "clock_mhz": 1300, "channel_alignment": 16, "max_stride": 8, "max_kernel": 11,
           "weight_table_entry_bytes": 16,
           "mpe_modes": [ { "name": "CUBOID_16x16", "block_w": 4, "block_h": 4, "block_c": 16,
                            "int8": true, "fp16": true } ] },
  "cmx": { "bytes_per_tile": 2097152, "usable_bytes": 1982464, "clock_mhz": 975 },
  "ddr": { "bytes": 536870912, "bandwidth_gbps": 27, "latency_ns": 500 },
  "shave": { "per_tile": 2, "shared": 0, "vector_bits": 128, "clock_mhz": 975 },
  "dma": { "engines": 2, "clock_mhz": 975, "engine_bytes_per_cycle": 32 },
  "barriers": 64,
  "timing": {
    "dpu": { "workload_overhead_cycles": 120, "channel_group_cycles": 10, "int8_efficiency": 0.9,
             "fp16_efficiency": 0.9, "word_bytes": 32, "weight_bytes_per_cycle": 100,
             "ppe_int8_elements_per_cycle": 32, "ppe_fp16_elements_per_cycle": 16,
             "cm_tap_cycles": 0.1, "cm_tap_cycles_per_input_byte": 0.01, "cm_fetch_factor": 1,
             "bottleneck_exponent": 4, "input_fetch": "per_tap",
             "modes": { "CUBOID_16x16": { "mac_efficiency": 1, "input_bytes_per_cycle": 80,
                                          "input_granule_bytes": 32, "reuse_w": 16,
                                          "reuse_h": 16, "reuse_c": 64 } } },
    "dma": { "ddr_to_cmx_latency_ns": 500, "cmx_to_ddr_latency_ns": 200,
             "cmx_to_cmx_latency_ns": 200, "burst_bytes": 64, "ddr_read_line_overhead_bytes": 0,
             "ddr_write_line_overhead_bytes": 40 },
    "shave": { "launch_cycles": 2500, "arith_ops_per_cycle": 1, "special_op_cycles": 6,
               "cmx_bytes_per_cycle": 12, "tile_cmx_bytes_per_cycle": 24 } }
})";

std::string replace(std::string text, const std::string &from, const std::string &to) {
    auto pos = text.find(from);
    EXPECT_NE(pos, std::string::npos) << from;
    return text.replace(pos, from.size(), to);
}

std::string error_of(const std::string &text) {
    try {
        parse_target(text, "t.json");
    } catch (const TargetError &e) {
        return e.what();
    }
    return "";
}

} // namespace

TEST(Target, BundledTargetsLoad) {
    Target a = load_target("vpu27");
    EXPECT_EQ(a.tiles, 2);
    EXPECT_EQ(a.int8_macs_per_cycle, 2048);
    EXPECT_EQ(a.dma_engines, 2);
    EXPECT_NE(a.find_mpe_mode("CUBOID_8x16"), nullptr);
    Target b = load_target("vpu20");
    EXPECT_EQ(b.tiles, 4);
    EXPECT_EQ(b.dpus_per_tile, 5);
    EXPECT_EQ(b.barriers, 32);
    EXPECT_FALSE(b.find_mpe_mode("VECTOR_FP16")->int8);
}

TEST(Target, MinimalParses) {
    EXPECT_EQ(parse_target(kMinimal, "t.json").name, "t");
}

TEST(Target, MissingFieldIsNamed) {
    std::string text = replace(kMinimal, R"("clock_mhz": 1300, )", "");
    EXPECT_EQ(error_of(text), "t.json: dpu.clock_mhz: missing field");
}

TEST(Target, NonsensicalValueIsNamed) {
    std::string text = replace(kMinimal, R"("tiles": 2)", R"("tiles": 0)");
    EXPECT_EQ(error_of(text), "t.json: tiles: must be in [1, 64], got 0");
}

TEST(Target, WrongTypeIsNamed) {
    std::string text = replace(kMinimal, R"("bandwidth_gbps": 27)", R"("bandwidth_gbps": "fast")");
    EXPECT_EQ(error_of(text), "t.json: ddr.bandwidth_gbps: must be a number");
}

TEST(Target, InconsistentFieldsAreNamed) {
    std::string text =
        replace(kMinimal, R"("usable_bytes": 1982464)", R"("usable_bytes": 4194304)");
    EXPECT_EQ(error_of(text), "t.json: cmx.usable_bytes: must not exceed bytes_per_tile");
}

TEST(Target, MpeModeFieldIsNamedWithIndex) {
    std::string text = replace(kMinimal, R"("block_h": 4)", R"("block_h": -1)");
    EXPECT_EQ(error_of(text), "t.json: dpu.mpe_modes[0].block_h: must be in [1, 64], got -1");
}

TEST(Target, TimingFieldIsNamed) {
    std::string text = replace(kMinimal, R"("int8_efficiency": 0.9)", R"("int8_efficiency": 1.5)");
    EXPECT_EQ(error_of(text), "t.json: timing.dpu.int8_efficiency: must be in [0.01, 1], got 1.5");
}

TEST(Target, OptionalTimingFieldsAreCheckedWhenGiven) {
    // Without them (kMinimal) the input fetch prices depthwise and channel-major work, and an
    // activation costs nothing.
    Target minimal = parse_target(kMinimal, "t.json");
    EXPECT_FALSE(minimal.dpu_timing.depthwise_window.present);
    EXPECT_EQ(minimal.dpu_timing.activation_int8.zmajor, 1.0);
    const std::string fetch = R"("input_fetch": "per_tap",)";
    std::string window = replace(
        kMinimal, fetch,
        fetch +
            R"( "depthwise_window": { "pixel_cycles": 2, "row_cycles": 0, "column_cycles": 0.4 },)");
    Target t = parse_target(window, "t.json");
    EXPECT_TRUE(t.dpu_timing.depthwise_window.present);
    EXPECT_EQ(t.dpu_timing.depthwise_window.column_cycles, 0.4);
    EXPECT_EQ(error_of(replace(window, R"("row_cycles": 0)", R"("row_cycles": -1)")),
              "t.json: timing.dpu.depthwise_window.row_cycles: must be in [0, 10000], got -1");
    // A misspelt optional field would silently fall back to the default: it is refused.
    EXPECT_EQ(error_of(replace(window, "depthwise_window", "depthwise_windw")),
              "t.json: timing.dpu.depthwise_windw: unknown field");
    EXPECT_EQ(error_of(replace(window, "column_cycles", "colum_cycles")),
              "t.json: timing.dpu.depthwise_window.colum_cycles: unknown field");
    // The channel-major window replaces cm_fetch_factor: giving both is a mistake.
    std::string cm = replace(
        kMinimal, fetch,
        fetch +
            R"( "channel_major_window": { "pixel_cycles": 0, "row_cycles": 1, "column_cycles": 1 },)");
    EXPECT_EQ(error_of(cm),
              "t.json: timing.dpu.cm_fetch_factor: not used with channel_major_window: remove one");
    EXPECT_TRUE(parse_target(replace(cm, R"("cm_fetch_factor": 1,)", ""), "t.json")
                    .dpu_timing.channel_major_window.present);
    // An activation can only slow the DPU down.
    std::string relu =
        replace(kMinimal, fetch,
                fetch + R"( "activation_slowdown": { "int8": { "zmajor": 1.5, "other": 1.2 },
                                             "fp16": { "zmajor": 0.5, "other": 1.2 } },)");
    EXPECT_EQ(error_of(relu),
              "t.json: timing.dpu.activation_slowdown.fp16.zmajor: must be in [1, 100], got 0.5");
    EXPECT_EQ(parse_target(replace(relu, "0.5", "1.7"), "t.json").dpu_timing.activation_fp16.zmajor,
              1.7);
}

TEST(Target, ShaveTimingIsReadAndChecked) {
    const Target t = parse_target(kMinimal, "t.json");
    EXPECT_EQ(t.shave_timing.launch_cycles, 2500);
    EXPECT_EQ(t.shave_timing.special_op_cycles, 6);
    EXPECT_EQ(t.shave_timing.cmx_bytes_per_cycle, 12);
    EXPECT_EQ(t.shave_timing.tile_cmx_bytes_per_cycle, 24);
    EXPECT_EQ(
        error_of(replace(kMinimal, R"("cmx_bytes_per_cycle": 12)", R"("cmx_bytes_per_cycle": 0)")),
        "t.json: timing.shave.cmx_bytes_per_cycle: must be in [0.01, 4096], got 0");
    EXPECT_EQ(error_of(replace(kMinimal, R"("special_op_cycles": 6,)", "")),
              "t.json: timing.shave.special_op_cycles: missing field");
    // The SHAVE's timing lives in "timing.shave": the fields older files had in "shave" are
    // refused, not silently ignored.
    EXPECT_EQ(error_of(replace(kMinimal, R"("vector_bits": 128, "clock_mhz": 975 })",
                               R"("vector_bits": 128, "clock_mhz": 975, "ops_per_cycle": 1 })")),
              "t.json: shave.ops_per_cycle: unknown field");
}

TEST(Target, FetchFeedAndWriteFieldsAreCheckedWhenGiven) {
    // Without them (kMinimal) only the byte rate limits the input fetch, the MAC feed and the
    // output writes never limit, and channel-major input bytes are not packed.
    Target minimal = parse_target(kMinimal, "t.json");
    EXPECT_FALSE(minimal.dpu_timing.input_issue.present);
    EXPECT_EQ(minimal.dpu_timing.mac_feed_bytes_per_cycle, 0.0);
    EXPECT_EQ(minimal.dpu_timing.output_block_cycles, 0.0);
    EXPECT_EQ(minimal.dpu_timing.cm_input_pack_bytes, 1);
    const std::string fetch = R"("input_fetch": "per_tap",)";
    std::string given = replace(
        kMinimal, fetch, fetch + R"( "input_issue": { "block_tap_cycles": 0.4, "pixel_cycles": 0.3,
                                     "strided_pixel_cycles": 0.08 },
                    "mac_feed_bytes_per_cycle": 128, "output_block_cycles": 1.6,
                    "cm_input_pack_bytes": 4,)");
    Target t = parse_target(given, "t.json");
    EXPECT_TRUE(t.dpu_timing.input_issue.present);
    EXPECT_EQ(t.dpu_timing.input_issue.strided_pixel_cycles, 0.08);
    EXPECT_EQ(t.dpu_timing.mac_feed_bytes_per_cycle, 128.0);
    EXPECT_EQ(t.dpu_timing.output_block_cycles, 1.6);
    EXPECT_EQ(t.dpu_timing.cm_input_pack_bytes, 4);
    EXPECT_EQ(error_of(replace(given, "\"pixel_cycles\": 0.3", "\"pixel_cycle\": 0.3")),
              "t.json: timing.dpu.input_issue.pixel_cycle: unknown field");
    EXPECT_EQ(error_of(replace(given, "\"block_tap_cycles\": 0.4", "\"block_tap_cycles\": -1")),
              "t.json: timing.dpu.input_issue.block_tap_cycles: must be in [0, 10000], got -1");
    EXPECT_EQ(error_of(replace(given, "\"mac_feed_bytes_per_cycle\": 128",
                               "\"mac_feed_bytes_per_cycle\": 0")),
              "t.json: timing.dpu.mac_feed_bytes_per_cycle: must be in [0.01, 100000], got 0");
    EXPECT_EQ(
        error_of(replace(given, "\"cm_input_pack_bytes\": 4", "\"cm_input_pack_bytes\": 2.5")),
        "t.json: timing.dpu.cm_input_pack_bytes: must be an integer in [1, 256], got 2.5");
    EXPECT_EQ(
        error_of(replace(given, "\"output_block_cycles\": 1.6", "\"output_block_cyles\": 1.6")),
        "t.json: timing.dpu.output_block_cyles: unknown field");
    // The issue rate describes the per-tap fetch; a per-block-window fetch cannot use it.
    EXPECT_EQ(error_of(replace(given, "\"per_tap\"", "\"per_block_window\"")),
              "t.json: timing.dpu.input_issue: only used with \"input_fetch\": \"per_tap\"");
}

TEST(Target, InvalidJsonIsReported) {
    EXPECT_NE(error_of("{ not json").find("t.json: not valid JSON"), std::string::npos);
}

TEST(Target, UnknownTargetListsBundled) {
    try {
        load_target("vpu99");
        FAIL();
    } catch (const TargetError &e) {
        EXPECT_NE(std::string(e.what()).find("vpu20, vpu27"), std::string::npos) << e.what();
    }
}

// Numbers beyond what a field holds are reported as written, with the legal range.
TEST(Target, HugeIntegerIsReportedAsWritten) {
    std::string text =
        replace(kMinimal, R"("bytes": 536870912)", R"("bytes": 9223372036854775808)");
    EXPECT_EQ(error_of(text),
              "t.json: ddr.bytes: must be in [1048576, 68719476736], got 9223372036854775808");
    text = replace(kMinimal, R"("bytes": 536870912)", R"("bytes": 18446744073709551616)");
    EXPECT_EQ(error_of(text), "t.json: ddr.bytes: must be an integer in [1048576, 68719476736], "
                              "got 1.8446744073709552e+19");
}

TEST(Target, NegativeAndFractionalIntegersAreReportedAsWritten) {
    std::string text = replace(kMinimal, R"("tiles": 2)", R"("tiles": -9223372036854775809)");
    EXPECT_EQ(error_of(text), "t.json: tiles: must be an integer in [1, 64], got "
                              "-9.223372036854776e+18");
    text = replace(kMinimal, R"("tiles": 2)", R"("tiles": 2.5)");
    EXPECT_EQ(error_of(text), "t.json: tiles: must be an integer in [1, 64], got 2.5");
    text = replace(kMinimal, R"("tiles": 2)", R"("tiles": 2.0)");
    EXPECT_EQ(error_of(text), "t.json: tiles: must be an integer in [1, 64], got 2.0");
}

TEST(Target, RealOutOfRangeIsReportedAsWritten) {
    std::string text = replace(kMinimal, R"("latency_ns": 500)", R"("latency_ns": 1e300)");
    EXPECT_EQ(error_of(text), "t.json: ddr.latency_ns: must be in [0, 1e+06], got 1e+300");
}

// JSON has no NaN or infinity; a number too large for a double is a JSON error.
TEST(Target, NumberBeyondADoubleIsInvalidJson) {
    std::string text = replace(kMinimal, R"("latency_ns": 500)", R"("latency_ns": 1e400)");
    EXPECT_NE(error_of(text).find("t.json: not valid JSON: "), std::string::npos);
    EXPECT_NE(error_of(text).find("1e400"), std::string::npos) << error_of(text);
    text = replace(kMinimal, R"("latency_ns": 500)", R"("latency_ns": NaN)");
    EXPECT_NE(error_of(text).find("t.json: not valid JSON: "), std::string::npos);
}

// Text from the file is escaped in messages: a key made of an MPE mode's name, and what the
// JSON parser quotes.
TEST(Target, FileTextInMessagesIsEscaped) {
    std::string text = replace(kMinimal, R"("name": "CUBOID_16x16", "block_w")",
                               R"("name": "CUBOID_\u001b[31m\u00e9", "block_w")");
    EXPECT_EQ(error_of(text), "t.json: timing.dpu.modes.CUBOID_\\x1b[31m\\xc3\\xa9: missing field");
    const std::string invalid = error_of("{ \"name\": \x01\xff }");
    EXPECT_NE(invalid.find("t.json: not valid JSON: "), std::string::npos) << invalid;
    EXPECT_EQ(invalid.find('\x01'), std::string::npos) << invalid;
    EXPECT_EQ(invalid.find('\xff'), std::string::npos) << invalid;
}
