// Properties of the DPU, DMA and SHAVE cost models, and their calibration against VPUNN.
#include <gtest/gtest.h>

#include <fstream>
#include <functional>
#include <sstream>

#include "vpu_target/timing_calibration.h"
#include "vpu_target/timing_model.h"

using namespace vpuc::target;

namespace {

const Target &vpu27() {
    static const Target t = load_target("vpu27");
    return t;
}

const Target &vpu20() {
    static const Target t = load_target("vpu20");
    return t;
}

DpuWorkload conv(int out_w, int out_h, int out_c, int in_c, int kernel, const char *mode) {
    DpuWorkload w;
    w.op = DpuOpKind::Conv;
    w.out_w = w.in_w = out_w;
    w.out_h = w.in_h = out_h;
    w.out_c = out_c;
    w.in_c = in_c;
    w.kernel_w = w.kernel_h = kernel;
    w.pad_top = w.pad_bottom = w.pad_left = w.pad_right = kernel / 2;
    w.mpe_mode = mode;
    return w;
}

DpuWorkload fp16(DpuWorkload w) {
    w.input_dtype = w.output_dtype = DType::F16;
    return w;
}

DmaTransfer transfer(DmaDirection direction, uint64_t bytes) {
    DmaTransfer t;
    t.direction = direction;
    t.line_bytes = bytes;
    return t;
}

std::string error_of(const std::function<void()> &f) {
    try {
        f();
    } catch (const std::exception &e) {
        return e.what();
    }
    return "";
}

} // namespace

TEST(DpuTimingModel, MoreMacsCostMoreCycles) {
    double base = dpu_workload_cycles(vpu27(), conv(28, 28, 64, 64, 3, "CUBOID_16x16"));
    EXPECT_GT(dpu_workload_cycles(vpu27(), conv(28, 28, 64, 128, 3, "CUBOID_16x16")), base);
    EXPECT_GT(dpu_workload_cycles(vpu27(), conv(28, 28, 128, 64, 3, "CUBOID_16x16")), base);
    EXPECT_GT(dpu_workload_cycles(vpu27(), conv(56, 28, 64, 64, 3, "CUBOID_16x16")), base);
    EXPECT_GT(dpu_workload_cycles(vpu27(), conv(28, 28, 64, 64, 5, "CUBOID_16x16")), base);
    double matrix = dpu_workload_cycles(vpu20(), conv(28, 28, 64, 64, 3, "MATRIX"));
    EXPECT_GT(dpu_workload_cycles(vpu20(), conv(28, 28, 64, 128, 3, "MATRIX")), matrix);
}

TEST(DpuTimingModel, LargeConvRunsNearPeak) {
    DpuWorkload w = conv(56, 56, 128, 128, 3, "CUBOID_16x16");
    double ideal = 56.0 * 56 * 128 * 128 * 9 / vpu27().int8_macs_per_cycle;
    double cycles = dpu_workload_cycles(vpu27(), w);
    EXPECT_GT(cycles, ideal);
    EXPECT_LT(cycles, ideal * 1.2);
}

TEST(DpuTimingModel, TinyWorkloadCostsAtLeastTheOverhead) {
    for (const Target *t : {&vpu27(), &vpu20()}) {
        DpuWorkload w = conv(1, 1, 16, 16, 1, t->mpe_modes[0].name.c_str());
        double cycles = dpu_workload_cycles(*t, w);
        EXPECT_GE(cycles, t->dpu_timing.workload_overhead_cycles) << t->name;
        EXPECT_LT(cycles, t->dpu_timing.workload_overhead_cycles + 100) << t->name;
    }
}

TEST(DpuTimingModel, Fp16IsSlowerThanInt8OnALargeConv) {
    DpuWorkload w = conv(56, 56, 64, 64, 3, "CUBOID_16x16");
    EXPECT_GT(dpu_workload_cycles(vpu27(), fp16(w)), 1.5 * dpu_workload_cycles(vpu27(), w));
    // vpu20 runs fp16 at a quarter of the int8 rate.
    double int8 = dpu_workload_cycles(vpu20(), conv(56, 56, 64, 64, 3, "MATRIX"));
    EXPECT_GT(dpu_workload_cycles(vpu20(), fp16(conv(56, 56, 64, 64, 3, "VECTOR_FP16"))), 3 * int8);
}

TEST(DpuTimingModel, CuboidModeGranularity) {
    // One output row wastes three of the four rows of a 4x4 block; 4x16 (1x4 blocks) does not.
    auto cycles = [](int out_w, int out_h, const char *mode) {
        return dpu_workload_cycles(vpu27(), conv(out_w, out_h, 256, 256, 3, mode));
    };
    EXPECT_LT(cycles(64, 1, "CUBOID_4x16"), cycles(64, 1, "CUBOID_16x16"));
    // On a large square output the full blocks of 16x16 do best (VPUNN: 4x16 a few % slower).
    EXPECT_LT(cycles(56, 56, "CUBOID_16x16"), cycles(56, 56, "CUBOID_4x16"));
}

TEST(DpuTimingModel, Vpu20VectorModeWorksOn16WideRows) {
    auto cycles = [](int out_w) {
        return dpu_workload_cycles(vpu20(), conv(out_w, 8, 64, 64, 3, "VECTOR"));
    };
    EXPECT_NEAR(cycles(9), cycles(16), 0.01 * cycles(16));
    EXPECT_GT(cycles(17), 1.5 * cycles(16));
}

DpuWorkload with_relu(DpuWorkload w) {
    w.activation = true;
    return w;
}

DpuWorkload depthwise(int out_w, int out_c, int kernel, int stride, const char *mode) {
    DpuWorkload w = conv(out_w, out_w, out_c, out_c, kernel, mode);
    w.op = DpuOpKind::DepthwiseConv;
    w.stride_w = w.stride_h = stride;
    w.in_w = w.in_h = out_w * stride;
    return w;
}

TEST(DpuTimingModel, ReluCostsOnVpu20Only) {
    // VPUNN's vpu20 predicts ReLU workloads slower (about 1.5x on an int8 convolution, 1.25x
    // on an eltwise); its vpu27 does not.
    DpuWorkload c = conv(28, 28, 64, 64, 3, "VECTOR");
    double ratio = dpu_workload_cycles(vpu20(), with_relu(c)) / dpu_workload_cycles(vpu20(), c);
    EXPECT_GT(ratio, 1.4);
    EXPECT_LT(ratio, vpu20().dpu_timing.activation_int8.zmajor + 0.01);
    DpuWorkload add = conv(28, 28, 64, 64, 1, "VECTOR");
    add.op = DpuOpKind::Eltwise;
    double overhead = vpu20().dpu_timing.workload_overhead_cycles;
    EXPECT_NEAR((dpu_workload_cycles(vpu20(), with_relu(add)) - overhead) /
                    (dpu_workload_cycles(vpu20(), add) - overhead),
                vpu20().dpu_timing.activation_int8.other, 1e-9);
    for (const char *mode : {"CUBOID_16x16", "CUBOID_4x16"}) {
        DpuWorkload w = conv(28, 28, 64, 64, 3, mode);
        EXPECT_EQ(dpu_workload_cycles(vpu27(), with_relu(w)), dpu_workload_cycles(vpu27(), w));
    }
}

TEST(DpuTimingModel, Vpu20DepthwiseIsASlidingWindow) {
    // VPUNN prices vpu20 depthwise work per output pixel and 16 channels, the same in every
    // MPE mode, growing with the input columns each step brings in (kernel_h * stride_w).
    auto cycles = [](DpuWorkload w) { return dpu_workload_cycles(vpu20(), w); };
    EXPECT_EQ(cycles(depthwise(28, 64, 3, 1, "VECTOR")), cycles(depthwise(28, 64, 3, 1, "MATRIX")));
    EXPECT_GT(cycles(depthwise(28, 64, 3, 2, "VECTOR")), cycles(depthwise(28, 64, 3, 1, "VECTOR")));
    EXPECT_GT(cycles(depthwise(28, 64, 7, 1, "VECTOR")), cycles(depthwise(28, 64, 3, 1, "VECTOR")));
    // fp16 costs as its MACs do: a quarter of the int8 rate.
    double overhead = vpu20().dpu_timing.workload_overhead_cycles;
    EXPECT_NEAR((cycles(fp16(depthwise(28, 64, 3, 1, "VECTOR_FP16"))) - overhead) /
                    (cycles(depthwise(28, 64, 3, 1, "VECTOR")) - overhead),
                4.0, 0.05);
    // Max pooling has its own window: no weights to read.
    DpuWorkload pool = depthwise(28, 64, 3, 1, "VECTOR");
    pool.op = DpuOpKind::MaxPool;
    EXPECT_LT(cycles(pool), cycles(depthwise(28, 64, 3, 1, "VECTOR")));
    // A target without a window of its own for max pooling uses the depthwise one.
    Target one_window = vpu20();
    one_window.dpu_timing.max_pool_window.present = false;
    EXPECT_EQ(dpu_workload_cycles(one_window, pool),
              dpu_workload_cycles(one_window, depthwise(28, 64, 3, 1, "VECTOR")));
}

TEST(DpuTimingModel, UnknownOrUnsupportedModeThrowsNamingIt) {
    std::string e = error_of([] { dpu_workload_cycles(vpu27(), conv(8, 8, 16, 16, 1, "MATRIX")); });
    EXPECT_NE(e.find("unknown MPE mode 'MATRIX'"), std::string::npos) << e;
    EXPECT_NE(e.find("CUBOID_16x16"), std::string::npos) << e;
    EXPECT_THROW(dpu_workload_cycles(vpu27(), conv(8, 8, 16, 16, 1, "MATRIX")), TargetError);
    e = error_of([] { dpu_workload_cycles(vpu20(), fp16(conv(8, 8, 16, 16, 1, "MATRIX"))); });
    EXPECT_NE(e.find("MPE mode MATRIX does not take F16 inputs"), std::string::npos) << e;
}

TEST(DmaTimingModel, TimeGrowsWithBytes) {
    for (auto dir : {DmaDirection::DdrToCmx, DmaDirection::CmxToDdr, DmaDirection::CmxToCmx}) {
        double last = 0;
        for (uint64_t bytes = 64; bytes <= (1u << 22); bytes *= 4) {
            double ns = dma_transfer_ns(vpu27(), transfer(dir, bytes));
            EXPECT_GT(ns, last) << bytes;
            last = ns;
        }
    }
}

TEST(DmaTimingModel, SmallWriteToDdrIsCheaperThanARead) {
    EXPECT_LT(dma_transfer_ns(vpu27(), transfer(DmaDirection::CmxToDdr, 256)),
              dma_transfer_ns(vpu27(), transfer(DmaDirection::DdrToCmx, 256)));
}

TEST(DmaTimingModel, LargeTransfersAreBandwidthBound) {
    Target slow = vpu27();
    slow.ddr_bandwidth_gbps /= 2;
    DmaTransfer t = transfer(DmaDirection::DdrToCmx, 1 << 20);
    double latency = dma_transfer_cost(vpu27(), t).latency_ns;
    double fast_ns = dma_transfer_ns(vpu27(), t), slow_ns = dma_transfer_ns(slow, t);
    EXPECT_GT(slow_ns, fast_ns);
    EXPECT_NEAR((slow_ns - latency) / (fast_ns - latency), 2.0, 0.01);
    // CMX-to-CMX copies do not touch DDR.
    DmaTransfer c = transfer(DmaDirection::CmxToCmx, 1 << 20);
    EXPECT_FALSE(dma_transfer_cost(vpu27(), c).uses_ddr);
    EXPECT_DOUBLE_EQ(dma_transfer_ns(slow, c), dma_transfer_ns(vpu27(), c));
}

TEST(DmaTimingModel, ShortStridedLinesWasteBursts) {
    DmaTransfer strided = transfer(DmaDirection::CmxToDdr, 16);
    strided.lines = 4096;
    strided.dst_contiguous = false;
    DmaTransfer contiguous = transfer(DmaDirection::CmxToDdr, 16 * 4096);
    EXPECT_GT(dma_transfer_ns(vpu27(), strided), 2 * dma_transfer_ns(vpu27(), contiguous));
    DmaCost cost = dma_transfer_cost(vpu27(), strided);
    EXPECT_GT(cost.bus_bytes, 16.0 * 4096);
}

ShaveWork shave_work(double elements, double arith, double special, double bytes, int shaves = 1) {
    ShaveWork w;
    w.output_elements = elements;
    w.shaves = shaves;
    w.vector_lanes = 8;
    w.arith_ops_per_vector = arith;
    w.special_ops_per_vector = special;
    w.cmx_bytes_per_vector = bytes;
    return w;
}

// A target whose SHAVE coefficients are round numbers, so the expected cycles are plain.
Target round_shave_target() {
    Target t = vpu27();
    t.shave_timing.launch_cycles = 1000;
    t.shave_timing.arith_ops_per_cycle = 1;
    t.shave_timing.special_op_cycles = 6;
    t.shave_timing.cmx_bytes_per_cycle = 16;
    t.shave_timing.tile_cmx_bytes_per_cycle = 24;
    return t;
}

TEST(ShaveTimingModel, TheSlowerOfIssueAndMemorySetsThePace) {
    const Target t = round_shave_target();
    // 800 elements: 100 vectors. 1 instruction against 32 bytes (2 cycles): memory-bound.
    EXPECT_DOUBLE_EQ(shave_task_cycles(t, shave_work(800, 1, 0, 32)), 1000 + 100 * 2);
    // 2 instructions and an exp: issue-bound, 2 + 6 cycles.
    EXPECT_DOUBLE_EQ(shave_task_cycles(t, shave_work(800, 2, 1, 32)), 1000 + 100 * 8);
    // A partial vector costs a whole one; the launch is paid even for nothing.
    EXPECT_DOUBLE_EQ(shave_task_cycles(t, shave_work(801, 1, 0, 32)), 1000 + 101 * 2);
    EXPECT_DOUBLE_EQ(shave_task_cycles(t, shave_work(0, 1, 0, 32)), 1000);
}

TEST(ShaveTimingModel, ShavesShareTheTilePort) {
    const Target t = round_shave_target();
    // Two SHAVEs, 50 vectors each. Issue-bound work scales: 50 * 8 cycles.
    EXPECT_DOUBLE_EQ(shave_task_cycles(t, shave_work(800, 2, 1, 32, 2)), 1000 + 50 * 8);
    // Memory-bound work: each SHAVE alone would take 50 * 2 cycles, but the tile's port moves
    // 100 * 32 bytes at 24 per cycle.
    EXPECT_DOUBLE_EQ(shave_task_cycles(t, shave_work(800, 1, 0, 32, 2)), 1000 + 100 * 32 / 24.0);
}

TEST(TimingParams, MissingModeEntryIsNamed) {
    std::ifstream in(std::string(VPUC_SOURCE_DIR) + "/vpu_target/targets/vpu27.json");
    std::stringstream text;
    text << in.rdbuf();
    std::string json = text.str();
    auto pos = json.find("\"CUBOID_8x16\":  {");
    ASSERT_NE(pos, std::string::npos);
    json.replace(pos, 14, "\"CUBOID_8x17\":");
    std::string e = error_of([&] { parse_target(json, "t.json"); });
    EXPECT_EQ(e, "t.json: timing.dpu.modes.CUBOID_8x16: missing field");
}

TEST(TimingCalibration, CsvErrorsNameTheLine) {
    auto error = [](const std::string &csv) {
        std::istringstream in(csv);
        return error_of([&] { calibrate_timing_model(in, "ref.csv"); });
    };
    const std::string dma_header =
        "device,direction,bytes,num_planes,length,src_width,dst_width,"
        "src_stride,dst_stride,src_plane_stride,dst_plane_stride,cycles\n";
    EXPECT_EQ(error(dma_header + "VPU_2_7,DDR2CMX,64,0,64,64,64,0,0,0,0,686\n"
                                 "VPU_2_7,DDR2CMX,64,0,64,64,64,0,0,0,0\n"),
              "ref.csv:3: expected 12 fields, got 11");
    EXPECT_EQ(error(dma_header + "VPU_2_7,DDR2CMX,64,0,64,64,64,0,0,0,0,fast\n"),
              "ref.csv:2: column 'cycles': not an integer: 'fast'");
    EXPECT_EQ(error("device,direction,colour\n"), "ref.csv:1: unknown column 'colour'");
    EXPECT_EQ(error("device,op,cycles\n"), "ref.csv:1: missing column 'in_dtype'");
}

// docs/timing-model.md: every vpu20 group of the DPU reference within 10% median.
TEST(TimingCalibration, Vpu20GroupsStayWithin10Percent) {
    std::string path =
        std::string(VPUC_SOURCE_DIR) + "/vpu_target/calibration/vpunn_dpu_reference.csv";
    CalibrationReport r = calibrate_timing_model_file(path, "vpu20");
    ASSERT_EQ(r.groups.size(), 18u);
    for (const ErrorStats &g : r.groups) EXPECT_LE(g.median, 0.10) << g.name;
    for (const ErrorStats &g : r.by_activation) EXPECT_LE(g.median, 0.10) << g.name;
}

// The errors of this version of the model (docs/timing-model.md, "Versions"). A change to the
// equations or to a bundled target's coefficients moves them: bump kTimingModelVersion, and
// record the new errors here and in the docs, in a change of its own.
TEST(TimingCalibration, ErrorsOfThisModelVersion) {
    ASSERT_EQ(kTimingModelVersion, 3);
    auto median = [](const char *file, const char *target) {
        std::string path = std::string(VPUC_SOURCE_DIR) + "/vpu_target/calibration/" + file;
        return calibrate_timing_model_file(path, target).overall.median;
    };
    EXPECT_NEAR(median("vpunn_dpu_reference.csv", "vpu27"), 0.060317, 1e-4);
    EXPECT_NEAR(median("vpunn_dpu_reference.csv", "vpu20"), 0.044667, 1e-4);
    EXPECT_NEAR(median("vpunn_dma_reference.csv", "vpu27"), 0.064869, 1e-4);
}

TEST(TimingCalibration, EveryBenchmarkNamesTheModel) {
    EXPECT_EQ(timing_model_label(vpu27()), "timing model 3");
    Target edited = vpu27();
    std::string json = edited.description_json;
    const std::string exponent = "\"bottleneck_exponent\":4.3";
    auto pos = json.find(exponent);
    ASSERT_NE(pos, std::string::npos);
    edited = parse_target(json.replace(pos, exponent.size(), "\"bottleneck_exponent\":4.5"),
                          "edited.json");
    EXPECT_EQ(timing_model_label(edited).rfind("timing model 3 with target 'vpu27' not as bundled "
                                               "(sha256 ",
                                               0),
              0u)
        << timing_model_label(edited);
    std::string csv =
        std::string(VPUC_SOURCE_DIR) + "/vpu_target/calibration/vpunn_dma_reference.csv";
    std::string text = format_calibration_report(calibrate_timing_model_file(csv));
    EXPECT_NE(text.find("\ntiming model 3\n"), std::string::npos) << text;
}

TEST(TimingCalibration, ErrorStatistics) {
    ErrorStats s = error_stats("g", {0.4, 0.1, 0.3, 0.2, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0});
    EXPECT_EQ(s.rows, 10u);
    EXPECT_DOUBLE_EQ(s.median, 0.55);
    EXPECT_DOUBLE_EQ(s.p90, 0.9);
}

// The committed coefficients must keep following VPUNN (docs/timing-model.md has the tables).
TEST(TimingCalibration, CommittedReferencesStayUnder15Percent) {
    for (const char *file : {"vpunn_dpu_reference.csv", "vpunn_dma_reference.csv"}) {
        std::string path = std::string(VPUC_SOURCE_DIR) + "/vpu_target/calibration/" + file;
        ASSERT_TRUE(std::ifstream(path).good()) << path << " is missing";
        CalibrationReport r = calibrate_timing_model_file(path);
        EXPECT_LT(r.overall.median, 0.15) << file;
        EXPECT_GE(r.overall.rows, 300u) << file;
        std::string text = format_calibration_report(r);
        std::string last = text.substr(text.rfind('\n', text.size() - 2) + 1);
        EXPECT_EQ(last.rfind("overall median relative error: ", 0), 0u) << last;
    }
}
