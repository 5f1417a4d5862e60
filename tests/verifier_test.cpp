// The blob verifier: a valid blob passes, every check rejects its malformed blob with a
// message naming the task (or header, barrier, kernel) and the field, and corrupted or hostile
// bytes only ever produce a BlobError.
#include <gtest/gtest.h>

#include <chrono>
#include <cstring>
#include <limits>
#include <random>

#include "codegen/shave_kernel.h"
#include "examples/conv_relu_shave.h"
#include "vpu_target/blob_writer.h"
#include "vpu_target/verifier.h"

using namespace vpuc::blob;
using vpuc::target::Target;

namespace {

const Target &vpu27() {
    static const Target target = vpuc::target::load_target("vpu27");
    return target;
}

// CMX layout of the test network on tile 0.
constexpr uint64_t kInAt = 0, kWeightsAt = 1024, kTableAt = 4096, kOutAt = 8192,
                   kShaveOutAt = 16384;
constexpr uint32_t kC = 16, kW = 8, kH = 8;
constexpr uint32_t kActivationBytes = kC * kW * kH;
constexpr uint32_t kWeightBytes = kC * 3 * 3 * kC;
constexpr uint32_t kTableBytes = 16 * kC;

// A valid vpu27 blob: DMA the input, weights and weight table into CMX tile 0 (barrier
// `loaded`), a 3x3 u8 convolution on the DPU (barrier `computed`), DMA the result out.
// Tests break one thing through blob() or the accessors, then look for the message.
struct ConvNet {
    BlobWriter w{vpuc::target::load_target("vpu27"), "conv"};
    uint32_t loaded = 0, computed = 0;

    ConvNet() {
        w.add_input("x", {1, kC, kH, kW}, DType::U8, Layout::NHWC);
        w.add_output("y", {1, kC, kH, kW}, DType::U8, Layout::NHWC);
        uint64_t weights = w.add_constant(std::vector<int8_t>(kWeightBytes, 1));
        uint64_t table = w.add_constant(std::vector<int32_t>(4 * kC, 0));
        loaded = w.add_barrier(0);
        computed = w.add_barrier(1);
        w.add_dma(0, "load_x", input_at(0), cmx_at(0, kInAt), kActivationBytes).update(loaded);
        w.add_dma(1, "load_w", constant_at(weights), cmx_at(0, kWeightsAt), kWeightBytes)
            .update(loaded);
        w.add_dma(1, "load_wt", constant_at(table), cmx_at(0, kTableAt), kTableBytes)
            .update(loaded);
        w.add_dpu(0, 0, "conv0", conv_task()).wait(loaded).update(computed);
        w.add_dma(0, "store_y", cmx_at(0, kOutAt), output_at(0), kActivationBytes).wait(computed);
    }

    static DpuTaskT conv_task() {
        DpuTaskT d;
        d.op = DpuOp::Conv;
        d.kernel_w = d.kernel_h = 3;
        d.pad_left = d.pad_right = d.pad_top = d.pad_bottom = 1;
        d.input = std::make_unique<TensorRefT>(nhwc(cmx_at(0, kInAt), DType::U8, kC, kW, kH));
        d.weights =
            std::make_unique<TensorRefT>(dense(cmx_at(0, kWeightsAt), DType::I8, {kC, 3, 3, kC}));
        d.weight_table =
            std::make_unique<TensorRefT>(dense(cmx_at(0, kTableAt), DType::I32, {4, kC}));
        d.output = std::make_unique<TensorRefT>(nhwc(cmx_at(0, kOutAt), DType::U8, kC, kW, kH));
        d.ppe = std::make_unique<PpeT>();
        d.variants.push_back(
            std::make_unique<DpuVariantT>(variant({0, 0, 0}, {8, 4, 16}, "CUBOID_16x16")));
        d.variants.push_back(
            std::make_unique<DpuVariantT>(variant({0, 4, 0}, {8, 8, 16}, "CUBOID_8x16")));
        return d;
    }

    // A SHAVE task of a real kernel: square(c, x, y, n) from in(c, x, y, n) and a scalar k,
    // reading its input where it writes its output.
    void add_shave_task() {
        static const KernelT square = [] {
            Halide::ImageParam in(Halide::UInt(8), 4, "in");
            Halide::Param<int32_t> k("k");
            Halide::Var c, x, y, n;
            Halide::Func out("square");
            Halide::Expr v = Halide::cast<int32_t>(in(c, x, y, n));
            out(c, x, y, n) = Halide::cast<uint8_t>(Halide::min(v * v / 255 + k, 255));
            return *vpuc::codegen::to_blob_kernel(
                vpuc::codegen::compile_shave_kernel("square", out, {in, k}, 128));
        }();
        ShaveTaskT s;
        s.kernel = w.add_kernel(square);
        s.shaves = 2;
        s.args.push_back(buffer_arg(nhwc(cmx_at(0, kOutAt), DType::U8, kC, kW, kH)));
        s.args.push_back(std::make_unique<ShaveArgT>());
        s.args.back()->int_value = 7;
        s.args.push_back(buffer_arg(nhwc(cmx_at(0, kShaveOutAt), DType::U8, kC, kW, kH)));
        w.add_shave(0, "square0", std::move(s)).wait(computed);
    }

    static std::unique_ptr<ShaveArgT> buffer_arg(TensorRefT tensor) {
        auto a = std::make_unique<ShaveArgT>();
        a->tensor = std::make_unique<TensorRefT>(std::move(tensor));
        return a;
    }

    TaskT &task(const std::string &name) {
        for (auto &q : w.blob().queues)
            for (auto &t : q->tasks)
                if (t->name == name) return *t;
        throw std::logic_error("no task " + name);
    }
    TaskHandle handle(const std::string &name) { return TaskHandle(task(name)); }
    DpuTaskT &conv() { return *task("conv0").kind.AsDpuTask(); }
    DmaTaskT &dma(const std::string &name) { return *task(name).kind.AsDmaTask(); }
    ShaveTaskT &shave() { return *task("square0").kind.AsShaveTask(); }
    KernelT &kernel() { return *w.blob().kernels.at(0); }
    std::vector<uint8_t> bytes(bool keep_barrier_counts = false) {
        return w.finish(keep_barrier_counts);
    }
};

void set_offset(Address &a, uint64_t offset) {
    a = Address(a.space(), a.index(), offset);
}
void set_index(Address &a, uint32_t index) {
    a = Address(a.space(), index, a.offset());
}

std::string error_of(const std::vector<uint8_t> &bytes, const Target &target = vpu27()) {
    try {
        verify(bytes, target);
    } catch (const BlobError &e) {
        return e.what();
    }
    return "";
}

::testing::AssertionResult rejected(const std::vector<uint8_t> &bytes, const std::string &text,
                                    const Target &target = vpu27()) {
    std::string error = error_of(bytes, target);
    if (error.empty()) return ::testing::AssertionFailure() << "accepted, expected: " << text;
    if (error.find(text) == std::string::npos)
        return ::testing::AssertionFailure() << "expected '" << text << "' in:\n" << error;
    return ::testing::AssertionSuccess();
}

} // namespace

// ---- Valid blobs ------------------------------------------------------------------------

TEST(Verifier, ValidBlobPasses) {
    ConvNet net;
    std::vector<uint8_t> bytes = net.bytes();
    const Blob &blob = verify(bytes, vpu27());
    EXPECT_EQ(blob.header()->name()->str(), "conv");
    EXPECT_EQ(blob.queues()->size(), 3u);
}

TEST(Verifier, ValidShaveTaskPasses) {
    ConvNet net;
    net.add_shave_task();
    EXPECT_EQ(error_of(net.bytes()), "");
}

TEST(Verifier, ExampleBlobsPassOnEveryTarget) {
    for (const char *name : {"vpu27", "vpu20"}) {
        Target target = vpuc::target::load_target(name);
        EXPECT_EQ(error_of(vpuc::examples::conv_relu_shave(target, 1).bytes, target), "") << name;
    }
}

TEST(Verifier, StructureOnlyReadsTheHeader) {
    ConvNet net;
    net.task("conv0").wait_barriers.push_back(99);
    EXPECT_EQ(verify_structure(net.bytes()).header()->target()->name()->str(), "vpu27");
}

// ---- Structure --------------------------------------------------------------------------

TEST(Verifier, RejectsWrongIdentifier) {
    std::vector<uint8_t> bytes = ConvNet().bytes();
    std::copy_n("ELF!", 4, bytes.begin() + 4);
    EXPECT_TRUE(rejected(bytes, "not a vpuc blob: file identifier 'ELF!', expected 'VPUB'"));
}

TEST(Verifier, RejectsTooShortFile) {
    EXPECT_TRUE(rejected({1, 2, 3}, "not a vpuc blob: 3 bytes is too short"));
}

TEST(Verifier, RejectsTruncatedBuffer) {
    std::vector<uint8_t> bytes = ConvNet().bytes();
    bytes.resize(bytes.size() / 2);
    EXPECT_TRUE(rejected(bytes, "malformed blob: FlatBuffers verification failed"));
}

TEST(Verifier, RejectsVersionMismatch) {
    ConvNet net;
    net.w.blob().header->version->major = kVersionMajor + 1;
    EXPECT_TRUE(rejected(net.bytes(), "header: version: blob format 4.0, this vpuc reads "
                                      "formats 3.0 to 3.0 (recompile the network)"));
    // Format 2 kernels carry one instruction count, not the figures the timing model reads.
    net.w.blob().header->version->major = 2;
    EXPECT_TRUE(rejected(net.bytes(), "header: version: blob format 2.0, this vpuc reads "
                                      "formats 3.0 to 3.0 (recompile the network)"));
    net.w.blob().header->version->major = kVersionMajor;
    net.w.blob().header->version->minor = kVersionMinor + 1;
    EXPECT_TRUE(rejected(net.bytes(), "header: version: blob format 3.1, this vpuc reads "
                                      "formats 3.0 to 3.0 (recompile the network)"));
}

TEST(Verifier, RejectsTargetMismatch) {
    vpuc::target::Target vpu20 = vpuc::target::load_target("vpu20");
    EXPECT_TRUE(rejected(ConvNet().bytes(),
                         "header: target: blob compiled for 'vpu27' (description sha256 ", vpu20));
    std::string vpu20_sha = hex(vpu20.description_sha256).substr(0, 16);
    EXPECT_TRUE(rejected(ConvNet().bytes(),
                         "), not for 'vpu20' (sha256 " + vpu20_sha +
                             "...): a blob runs on the target it was compiled for",
                         vpu20));
}

// ---- I/O tensors and DDR ----------------------------------------------------------------

TEST(Verifier, RejectsIoTensorOutsideItsOwnSection) {
    ConvNet net;
    *net.w.blob().header->inputs[0]->tensor->address = output_at(0);
    EXPECT_TRUE(rejected(net.bytes(), "input 0 'x': tensor: address must be its own section "
                                      "(Input 0), got Output 0"));
}

TEST(Verifier, RejectsIoTensorWithoutDims) {
    ConvNet net;
    net.w.blob().header->outputs[0]->tensor->dims.clear();
    EXPECT_TRUE(rejected(net.bytes(), "output 0 'y': tensor: rank 0 not in [1, 8]"));
}

TEST(Verifier, RejectsIoTensorLargerThanItsBytes) {
    ConvNet net;
    net.w.blob().header->inputs[0]->bytes = 1000;
    EXPECT_TRUE(rejected(net.bytes(), "input 0 'x': tensor: bytes [0, 1024) past the end of "
                                      "input 0 'x' (1000 bytes)"));
}

TEST(Verifier, RejectsPerChannelQuantOfWrongLength) {
    ConvNet net;
    net.w.blob().header->inputs[0]->quant = {Quant(1, 0), Quant(1, 0)};
    EXPECT_TRUE(rejected(net.bytes(), "input 0 'x': quant: 2 per-channel entries, shape[1] "
                                      "is 16"));
}

TEST(Verifier, RejectsMoreDdrThanTheTargetHas) {
    ConvNet net;
    net.w.set_scratch_bytes(uint64_t(1) << 40);
    EXPECT_TRUE(rejected(net.bytes(), "header: DDR: inputs, outputs, constants and scratch "
                                      "need 1099511632384 bytes, more than the 536870912 "
                                      "bytes of vpu27"));
}

// ---- Addresses --------------------------------------------------------------------------

TEST(Verifier, RejectsTensorPastTheEndOfCmx) {
    ConvNet net;
    set_offset(*net.conv().output->address, vpu27().cmx_usable_bytes - 512);
    EXPECT_TRUE(rejected(net.bytes(), "task 'conv0' (DPU queue tile 0 dpu 0): output: bytes "
                                      "[1981952, 1982976) past the end of CMX tile 0 "
                                      "(1982464 usable bytes)"));
}

TEST(Verifier, RejectsDmaPastTheEndOfTheConstantSection) {
    ConvNet net;
    set_offset(*net.dma("load_w").src, net.w.blob().constants.size() - 100);
    EXPECT_TRUE(rejected(net.bytes(), "task 'load_w' (DMA queue 1): src: bytes [2460, 4764) "
                                      "past the end of the constant section (2560 bytes)"));
}

TEST(Verifier, RejectsDmaPastTheEndOfScratch) {
    ConvNet net;
    net.w.set_scratch_bytes(512);
    net.dma("store_y").dst[0] = scratch_at(0);
    EXPECT_TRUE(rejected(net.bytes(), "task 'store_y' (DMA queue 0): dst[0]: bytes [0, 1024) "
                                      "past the end of DDR scratch (512 bytes)"));
}

TEST(Verifier, RejectsCmxOfMissingTile) {
    ConvNet net;
    net.dma("load_x").dst[0] = cmx_at(2, 0);
    EXPECT_TRUE(rejected(net.bytes(), "task 'load_x' (DMA queue 0): dst[0]: CMX tile 2 does "
                                      "not exist (vpu27 has 2 tiles)"));
}

TEST(Verifier, RejectsMissingInput) {
    ConvNet net;
    *net.dma("load_x").src = input_at(1);
    EXPECT_TRUE(rejected(net.bytes(), "task 'load_x' (DMA queue 0): src: input 1 does not "
                                      "exist (the blob has 1)"));
}

TEST(Verifier, RejectsNonZeroConstantIndex) {
    ConvNet net;
    set_index(*net.dma("load_w").src, 3);
    EXPECT_TRUE(rejected(net.bytes(), "task 'load_w' (DMA queue 1): src: index must be 0 for "
                                      "Constant, got 3"));
}

TEST(Verifier, RejectsUnknownMemorySpace) {
    ConvNet net;
    *net.dma("load_x").src = Address(static_cast<MemSpace>(9), 0, 0);
    EXPECT_TRUE(rejected(net.bytes(), "task 'load_x' (DMA queue 0): src: unknown memory "
                                      "space 9"));
}

TEST(Verifier, RejectsNegativeStrideBeforeTheSection) {
    ConvNet net;
    net.dma("load_x").dims = {DmaDim(2, -512, 512)};
    net.dma("load_x").line_bytes = 512;
    EXPECT_TRUE(rejected(net.bytes(), "task 'load_x' (DMA queue 0): src: bytes [-512, 512) "
                                      "start before input 0 'x'"));
}

TEST(Verifier, RejectsOverflowingStrides) {
    ConvNet net;
    net.conv().output->dims[2] = Dim(kH, std::numeric_limits<int64_t>::max() / 2);
    EXPECT_TRUE(rejected(net.bytes(), "task 'conv0' (DPU queue tile 0 dpu 0): output: dims: "
                                      "byte range overflows 64 bits"));
}

TEST(Verifier, RejectsHugeOffset) {
    ConvNet net;
    set_offset(*net.dma("load_x").src, ~uint64_t(0));
    EXPECT_TRUE(rejected(net.bytes(), "task 'load_x' (DMA queue 0): src: offset "
                                      "18446744073709551615: byte range overflows 64 bits"));
}

TEST(Verifier, RejectsEmptyTensorDimension) {
    ConvNet net;
    net.conv().input->dims[1] = Dim(0, kC);
    EXPECT_TRUE(rejected(net.bytes(), "task 'conv0' (DPU queue tile 0 dpu 0): input: dims[1]: "
                                      "extent 0 (empty tensor)"));
}

// ---- Queues -----------------------------------------------------------------------------

TEST(Verifier, RejectsBadTile) {
    ConvNet net;
    net.w.add_dpu(2, 0, "far", ConvNet::conv_task());
    EXPECT_TRUE(rejected(net.bytes(), "queue 3 (DPU queue tile 2 dpu 0): tile: tile 2 does "
                                      "not exist (vpu27 has 2)"));
}

TEST(Verifier, RejectsBadDpuIndex) {
    ConvNet net;
    net.w.add_dpu(0, 1, "second_dpu", ConvNet::conv_task());
    EXPECT_TRUE(rejected(net.bytes(), "queue 3 (DPU queue tile 0 dpu 1): index: DPU 1 does "
                                      "not exist (vpu27 has 1)"));
}

TEST(Verifier, RejectsBadDmaEngine) {
    ConvNet net;
    net.w.add_dma(2, "third", input_at(0), cmx_at(0, 0), 16);
    EXPECT_TRUE(rejected(net.bytes(), "queue 3 (DMA queue 2): index: DMA engine 2 does not "
                                      "exist (vpu27 has 2)"));
}

TEST(Verifier, RejectsBadShaveTile) {
    ConvNet net;
    net.add_shave_task();
    net.w.blob().queues.back()->tile = 3;
    EXPECT_TRUE(rejected(net.bytes(), "queue 3 (SHAVE queue tile 3): tile: tile 3 does not "
                                      "exist (vpu27 has 2)"));
}

TEST(Verifier, RejectsDmaQueueWithTile) {
    ConvNet net;
    net.w.blob().queues[0]->tile = 1;
    EXPECT_TRUE(rejected(net.bytes(), "queue 0 (DMA queue 0): tile: must be 0 (DMA engines are "
                                      "shared by all tiles), got 1"));
}

TEST(Verifier, RejectsUnknownEngine) {
    ConvNet net;
    net.w.blob().queues[0]->engine = static_cast<EngineKind>(5);
    EXPECT_TRUE(rejected(net.bytes(), "queue 0 (queue ?): engine: unknown engine 5"));
}

TEST(Verifier, RejectsDuplicateQueue) {
    ConvNet net;
    auto copy = std::make_unique<TaskQueueT>();
    copy->engine = EngineKind::Dma;
    copy->index = 1;
    net.w.blob().queues.push_back(std::move(copy));
    EXPECT_TRUE(rejected(net.bytes(), "queue 3 (DMA queue 1): engine: same engine as queue 1"));
}

TEST(Verifier, RejectsTaskOnTheWrongEngine) {
    ConvNet net;
    TaskKindUnion kind;
    kind.Set(ConvNet::conv_task());
    net.w.add_task(QueueId::dma(1), "lost_conv", std::move(kind));
    EXPECT_TRUE(rejected(net.bytes(), "task 'lost_conv' (DMA queue 1): kind: a DpuTask on a DMA "
                                      "queue"));
}

// ---- DMA --------------------------------------------------------------------------------

TEST(Verifier, RejectsDmaWithoutDestination) {
    ConvNet net;
    net.dma("load_x").dst.clear();
    EXPECT_TRUE(rejected(net.bytes(), "task 'load_x' (DMA queue 0): dst: no destination"));
}

TEST(Verifier, RejectsDmaWithZeroLineBytes) {
    ConvNet net;
    net.dma("load_x").line_bytes = 0;
    EXPECT_TRUE(rejected(net.bytes(), "task 'load_x' (DMA queue 0): line_bytes: must be > 0"));
}

TEST(Verifier, RejectsDmaWithTooManyDims) {
    ConvNet net;
    net.dma("load_x").dims.assign(5, DmaDim(1, 0, 0));
    EXPECT_TRUE(rejected(net.bytes(), "task 'load_x' (DMA queue 0): dims: 5 dims, at most 4"));
}

TEST(Verifier, RejectsDmaWithZeroCount) {
    ConvNet net;
    net.dma("load_x").dims = {DmaDim(2, 16, 16), DmaDim(0, 16, 16)};
    EXPECT_TRUE(rejected(net.bytes(), "task 'load_x' (DMA queue 0): dims[1]: count must be > 0"));
}

TEST(Verifier, RejectsBroadcastToDdr) {
    ConvNet net;
    net.dma("store_y").dst.push_back(cmx_at(1, 0));
    EXPECT_TRUE(rejected(net.bytes(), "task 'store_y' (DMA queue 0): dst[0]: a broadcast (2 "
                                      "destinations) goes only to CMX, got Output"));
}

TEST(Verifier, AcceptsBroadcastToCmx) {
    ConvNet net;
    net.dma("load_w").dst.push_back(cmx_at(1, kWeightsAt));
    EXPECT_EQ(error_of(net.bytes()), "");
}

// ---- DPU --------------------------------------------------------------------------------

TEST(Verifier, RejectsUnknownDpuOp) {
    ConvNet net;
    net.conv().op = static_cast<DpuOp>(42);
    EXPECT_TRUE(rejected(net.bytes(), "task 'conv0' (DPU queue tile 0 dpu 0): op: unknown DPU "
                                      "op 42"));
}

TEST(Verifier, RejectsConvWithoutWeights) {
    ConvNet net;
    net.conv().weights.reset();
    EXPECT_TRUE(rejected(net.bytes(), "task 'conv0' (DPU queue tile 0 dpu 0): weights: missing "
                                      "(Conv needs weights)"));
}

TEST(Verifier, RejectsDpuChannelsNotInWholeGroups) {
    ConvNet net;
    DpuTaskT &d = net.conv();
    d.output = std::make_unique<TensorRefT>(nhwc(cmx_at(0, kOutAt), DType::U8, 8, kW, kH));
    d.weights =
        std::make_unique<TensorRefT>(dense(cmx_at(0, kWeightsAt), DType::I8, {kC, 3, 3, 8}));
    d.weight_table = std::make_unique<TensorRefT>(dense(cmx_at(0, kTableAt), DType::I32, {4, 8}));
    EXPECT_TRUE(rejected(net.bytes(), "task 'conv0' (DPU queue tile 0 dpu 0): output: C 8 is not "
                                      "a multiple of 16: the DPU reads and writes whole groups "
                                      "of 16 channels (pad the channels)"));
}

TEST(Verifier, ConvInputsOfFewerChannelsThanAGroupRunChannelMajor) {
    ConvNet net;
    DpuTaskT &d = net.conv();
    d.input = std::make_unique<TensorRefT>(nhwc(cmx_at(0, kInAt), DType::U8, 3, kW, kH));
    d.weights =
        std::make_unique<TensorRefT>(dense(cmx_at(0, kWeightsAt), DType::I8, {3, 3, 3, kC}));
    EXPECT_EQ(error_of(net.bytes()), "");
    // More than a group but not whole groups: padded, or rejected.
    ConvNet wide;
    DpuTaskT &w = wide.conv();
    w.input = std::make_unique<TensorRefT>(nhwc(cmx_at(0, kInAt), DType::U8, 24, kW, kH));
    w.weights =
        std::make_unique<TensorRefT>(dense(cmx_at(0, kWeightsAt), DType::I8, {24, 3, 3, kC}));
    EXPECT_TRUE(rejected(wide.bytes(), "input: C 24 is not a multiple of 16: the DPU reads and "
                                       "writes whole groups of 16 channels (pad the channels; "
                                       "fewer than 16 run channel-major)"));
    // A pool has no channel-major mode.
    ConvNet pool;
    DpuTaskT &p = pool.conv();
    p.op = DpuOp::MaxPool;
    p.weights.reset();
    p.weight_table.reset();
    p.input = std::make_unique<TensorRefT>(nhwc(cmx_at(0, kInAt), DType::U8, 3, kW, kH));
    EXPECT_TRUE(rejected(pool.bytes(), "input: C 3 is not a multiple of 16: the DPU reads and "
                                       "writes whole groups of 16 channels (pad the channels)"));
}

TEST(Verifier, RejectsConvWithoutWeightTable) {
    ConvNet net;
    net.conv().weight_table.reset();
    EXPECT_TRUE(rejected(net.bytes(), "task 'conv0' (DPU queue tile 0 dpu 0): weight_table: "
                                      "missing (Conv needs a weight table)"));
}

TEST(Verifier, RejectsEltwiseWithoutSecondInput) {
    ConvNet net;
    DpuTaskT &d = net.conv();
    d.op = DpuOp::Eltwise;
    d.kernel_w = d.kernel_h = 1;
    d.pad_left = d.pad_right = d.pad_top = d.pad_bottom = 0;
    EXPECT_TRUE(rejected(net.bytes(), "task 'conv0' (DPU queue tile 0 dpu 0): input2: missing "
                                      "(Eltwise needs a second input)"));
}

TEST(Verifier, RejectsEltwiseSecondInputNotInWholeGroups) {
    ConvNet net;
    DpuTaskT &d = net.conv();
    d.op = DpuOp::Eltwise;
    d.kernel_w = d.kernel_h = 1;
    d.pad_left = d.pad_right = d.pad_top = d.pad_bottom = 0;
    d.input2 = std::make_unique<TensorRefT>(nhwc(cmx_at(0, kShaveOutAt), DType::U8, 8, kW, kH));
    EXPECT_TRUE(rejected(net.bytes(), "task 'conv0' (DPU queue tile 0 dpu 0): input2: C 8 is not "
                                      "a multiple of 16"));
}

TEST(Verifier, RejectsEltwiseShapeMismatch) {
    ConvNet net;
    DpuTaskT &d = net.conv();
    d.op = DpuOp::Eltwise;
    d.kernel_w = d.kernel_h = 1;
    d.pad_left = d.pad_right = d.pad_top = d.pad_bottom = 0;
    d.input2 = std::make_unique<TensorRefT>(nhwc(cmx_at(0, kWeightsAt), DType::U8, kC, kW, 4));
    EXPECT_TRUE(rejected(net.bytes(), "task 'conv0' (DPU queue tile 0 dpu 0): input2: shape "
                                      "(C 16, W 8, H 4) differs from input (C 16, W 8, H 8)"));
}

TEST(Verifier, RejectsActivationOfWrongRank) {
    ConvNet net;
    net.conv().input->dims.pop_back();
    EXPECT_TRUE(rejected(net.bytes(), "task 'conv0' (DPU queue tile 0 dpu 0): input: DPU "
                                      "activations need 4 dims (C, W, H, N), got 3"));
}

TEST(Verifier, RejectsNchwActivation) {
    ConvNet net;
    *net.conv().input = activation(cmx_at(0, kInAt), DType::U8, Layout::NCHW, kC, kW, kH);
    EXPECT_TRUE(rejected(net.bytes(), "task 'conv0' (DPU queue tile 0 dpu 0): input: C stride "
                                      "must be 1 (NHWC), got 64"));
}

TEST(Verifier, RejectsBatchOnTheDpu) {
    ConvNet net;
    *net.conv().input = nhwc(cmx_at(0, kInAt), DType::U8, kC, kW, kH, 2);
    EXPECT_TRUE(rejected(net.bytes(), "task 'conv0' (DPU queue tile 0 dpu 0): input: batch N "
                                      "is 2, the DPU takes 1"));
}

TEST(Verifier, RejectsDpuTensorInDdr) {
    ConvNet net;
    *net.conv().input->address = input_at(0);
    EXPECT_TRUE(rejected(net.bytes(), "task 'conv0' (DPU queue tile 0 dpu 0): input: in Input, "
                                      "the DPU reads and writes only CMX"));
}

TEST(Verifier, RejectsDpuInputOfAnotherTile) {
    ConvNet net;
    set_index(*net.conv().weights->address, 1);
    EXPECT_TRUE(rejected(net.bytes(), "task 'conv0' (DPU queue tile 0 dpu 0): weights: in CMX "
                                      "tile 1, the DPU of tile 0 reads only its own CMX"));
}

TEST(Verifier, RejectsUnsupportedInputDtype) {
    ConvNet net;
    net.conv().input->dtype = DType::F32;
    EXPECT_TRUE(rejected(net.bytes(), "task 'conv0' (DPU queue tile 0 dpu 0): input: dtype F32 "
                                      "not supported by the DPU (U8, I8 or F16)"));
}

TEST(Verifier, RejectsUnsupportedOutputDtype) {
    ConvNet net;
    net.conv().output->dtype = DType::I32;
    EXPECT_TRUE(rejected(net.bytes(), "task 'conv0' (DPU queue tile 0 dpu 0): output: dtype I32 "
                                      "not supported by the DPU (U8, I8 or F16)"));
    // Nor F32, which no DPU timing was ever calibrated for.
    net.conv().output->dtype = DType::F32;
    EXPECT_TRUE(rejected(net.bytes(), "task 'conv0' (DPU queue tile 0 dpu 0): output: dtype F32 "
                                      "not supported by the DPU (U8, I8 or F16)"));
}

TEST(Verifier, RejectsWeightsOfAnotherTypeClass) {
    ConvNet net;
    net.conv().weights->dtype = DType::F16;
    EXPECT_TRUE(rejected(net.bytes(), "task 'conv0' (DPU queue tile 0 dpu 0): weights: dtype "
                                      "F16 does not go with input U8"));
}

TEST(Verifier, RejectsKernelLargerThanTheTargetTakes) {
    ConvNet net;
    net.conv().kernel_w = 13;
    EXPECT_TRUE(rejected(net.bytes(), "task 'conv0' (DPU queue tile 0 dpu 0): kernel_w: 13 not "
                                      "in [1, 11]"));
}

TEST(Verifier, RejectsStrideLargerThanTheTargetTakes) {
    ConvNet net;
    net.conv().stride_h = 9;
    EXPECT_TRUE(rejected(net.bytes(), "task 'conv0' (DPU queue tile 0 dpu 0): stride_h: 9 not "
                                      "in [1, 8]"));
}

TEST(Verifier, RejectsPaddingNotSmallerThanTheKernel) {
    ConvNet net;
    net.conv().pad_top = 3;
    EXPECT_TRUE(rejected(net.bytes(), "task 'conv0' (DPU queue tile 0 dpu 0): pad_top: 3 must "
                                      "be < kernel_h 3"));
}

TEST(Verifier, RejectsInconsistentOutputExtents) {
    ConvNet net;
    net.conv().stride_w = 2;
    EXPECT_TRUE(rejected(net.bytes(), "task 'conv0' (DPU queue tile 0 dpu 0): output: W 8, "
                                      "expected (8 + 1 + 1 - 3) / 2 + 1 = 4"));
}

TEST(Verifier, RejectsInputSmallerThanTheKernel) {
    ConvNet net;
    DpuTaskT &d = net.conv();
    d.kernel_h = 11;
    d.pad_top = d.pad_bottom = 1;
    EXPECT_TRUE(rejected(net.bytes(), "task 'conv0' (DPU queue tile 0 dpu 0): input: H 8 "
                                      "padded by 1 + 1 is smaller than the kernel 11"));
}

TEST(Verifier, RejectsWeightsOfWrongDims) {
    ConvNet net;
    *net.conv().weights = dense(cmx_at(0, kWeightsAt), DType::I8, {kC, 3, 3, 8});
    EXPECT_TRUE(rejected(net.bytes(), "task 'conv0' (DPU queue tile 0 dpu 0): weights: dims "
                                      "(16, 3, 3, 8) must be (16, 3, 3, 16) = (IC, KW, KH, OC) "
                                      "for Conv"));
}

TEST(Verifier, RejectsDepthwiseWeightsOfWrongDims) {
    ConvNet net;
    net.conv().op = DpuOp::DepthwiseConv;
    EXPECT_TRUE(rejected(net.bytes(), "task 'conv0' (DPU queue tile 0 dpu 0): weights: dims "
                                      "(16, 3, 3, 16) must be (1, 3, 3, 16) = (1, KW, KH, C) "
                                      "for DepthwiseConv"));
}

TEST(Verifier, RejectsPoolChangingChannels) {
    ConvNet net;
    DpuTaskT &d = net.conv();
    d.op = DpuOp::MaxPool;
    *d.output = nhwc(cmx_at(0, kOutAt), DType::U8, 32, kW, kH);
    EXPECT_TRUE(rejected(net.bytes(), "task 'conv0' (DPU queue tile 0 dpu 0): output: C 32 "
                                      "must equal the input C 16 for MaxPool"));
}

TEST(Verifier, RejectsWeightTableOfWrongDtype) {
    ConvNet net;
    net.conv().weight_table->dtype = DType::F32;
    EXPECT_TRUE(rejected(net.bytes(), "task 'conv0' (DPU queue tile 0 dpu 0): weight_table: "
                                      "dtype must be I32, got F32"));
}

TEST(Verifier, RejectsWeightTableOfWrongDims) {
    ConvNet net;
    *net.conv().weight_table = dense(cmx_at(0, kTableAt), DType::I32, {4, 8});
    EXPECT_TRUE(rejected(net.bytes(), "task 'conv0' (DPU queue tile 0 dpu 0): weight_table: "
                                      "dims (4, 8) must be (4, 16): 4 values per output "
                                      "channel"));
}

TEST(Verifier, RejectsDpuTaskWithoutVariants) {
    ConvNet net;
    net.conv().variants.clear();
    EXPECT_TRUE(rejected(net.bytes(), "task 'conv0' (DPU queue tile 0 dpu 0): variants: none"));
}

TEST(Verifier, RejectsVariantWithoutThreeValues) {
    ConvNet net;
    net.conv().variants[0]->start = {0, 0};
    EXPECT_TRUE(rejected(net.bytes(), "task 'conv0' (DPU queue tile 0 dpu 0): variants[0]: "
                                      "start and end need 3 values (x, y, c), got 2 and 3"));
}

TEST(Verifier, RejectsEmptyVariant) {
    ConvNet net;
    net.conv().variants[1]->end = {8, 4, 16};
    EXPECT_TRUE(rejected(net.bytes(), "task 'conv0' (DPU queue tile 0 dpu 0): variants[1]: "
                                      "empty region (0, 4, 0)-(8, 4, 16): start must be < end"));
}

TEST(Verifier, RejectsVariantBeyondTheOutput) {
    ConvNet net;
    net.conv().variants[1]->end = {8, 8, 32};
    EXPECT_TRUE(rejected(net.bytes(), "task 'conv0' (DPU queue tile 0 dpu 0): variants[1]: "
                                      "region (0, 4, 0)-(8, 8, 32) exceeds the output (W 8, H 8, "
                                      "C 16)"));
}

TEST(Verifier, RejectsUnknownMpeMode) {
    ConvNet net;
    net.conv().variants[0]->mpe_mode = "MATRIX";
    EXPECT_TRUE(rejected(net.bytes(), "task 'conv0' (DPU queue tile 0 dpu 0): variants[0]: "
                                      "mpe_mode 'MATRIX' is not an MPE mode of vpu27 "
                                      "(CUBOID_16x16, CUBOID_8x16, CUBOID_4x16)"));
}

TEST(Verifier, RejectsMpeModeNotTakingTheInputType) {
    Target fp16_only = vpu27();
    fp16_only.mpe_modes[1].int8 = false;
    EXPECT_TRUE(rejected(ConvNet().bytes(),
                         "task 'conv0' (DPU queue tile 0 dpu 0): variants[1]: "
                         "mpe_mode CUBOID_8x16 does not take U8 inputs",
                         fp16_only));
}

TEST(Verifier, RejectsOverlappingVariants) {
    ConvNet net;
    net.conv().variants[1]->start = {4, 3, 0};
    EXPECT_TRUE(rejected(net.bytes(), "task 'conv0' (DPU queue tile 0 dpu 0): variants[0]: "
                                      "region (0, 0, 0)-(8, 4, 16) overlaps variants[1] "
                                      "(4, 3, 0)-(8, 8, 16)"));
}

TEST(Verifier, RejectsUnknownPpeActivation) {
    ConvNet net;
    net.conv().ppe->activation = static_cast<Activation>(9);
    EXPECT_TRUE(rejected(net.bytes(), "task 'conv0' (DPU queue tile 0 dpu 0): ppe.activation: "
                                      "unknown activation 9"));
}

TEST(Verifier, RejectsPpeShiftBeyondSixBits) {
    ConvNet net;
    net.conv().ppe->shift = 64;
    net.conv().ppe->leaky_shift = 200;
    std::vector<uint8_t> bytes = net.bytes();
    EXPECT_TRUE(rejected(bytes, "task 'conv0' (DPU queue tile 0 dpu 0): ppe.shift: 64 > 63"));
    EXPECT_TRUE(
        rejected(bytes, "task 'conv0' (DPU queue tile 0 dpu 0): ppe.leaky_shift: 200 > 63"));
}

// ---- SHAVE ------------------------------------------------------------------------------

TEST(Verifier, RejectsMissingKernel) {
    ConvNet net;
    net.add_shave_task();
    net.shave().kernel = 1;
    EXPECT_TRUE(rejected(net.bytes(), "task 'square0' (SHAVE queue tile 0): kernel: index 1 "
                                      "but the blob has 1 kernels"));
}

TEST(Verifier, RejectsWrongArgumentCount) {
    ConvNet net;
    net.add_shave_task();
    net.shave().args.pop_back();
    EXPECT_TRUE(rejected(net.bytes(), "task 'square0' (SHAVE queue tile 0): args: 2 given, "
                                      "kernel 'square' takes 3"));
}

TEST(Verifier, RejectsBufferArgumentWithoutTensor) {
    ConvNet net;
    net.add_shave_task();
    net.shave().args[2]->tensor.reset();
    EXPECT_TRUE(rejected(net.bytes(), "task 'square0' (SHAVE queue tile 0): args[2] 'square': a "
                                      "buffer argument needs a tensor"));
}

TEST(Verifier, RejectsScalarArgumentWithTensor) {
    ConvNet net;
    net.add_shave_task();
    net.shave().args[1]->tensor =
        std::make_unique<TensorRefT>(dense(cmx_at(0, 0), DType::I32, {1}));
    EXPECT_TRUE(rejected(net.bytes(), "task 'square0' (SHAVE queue tile 0): args[1] 'k': a "
                                      "scalar argument must not have a tensor"));
}

TEST(Verifier, RejectsBufferOfWrongRank) {
    ConvNet net;
    net.add_shave_task();
    *net.shave().args[0]->tensor = dense(cmx_at(0, kOutAt), DType::U8, {kActivationBytes});
    EXPECT_TRUE(rejected(net.bytes(), "task 'square0' (SHAVE queue tile 0): args[0] 'in': rank "
                                      "1, the kernel takes 4"));
}

TEST(Verifier, RejectsBufferOfWrongDtype) {
    ConvNet net;
    net.add_shave_task();
    net.shave().args[0]->tensor->dtype = DType::I8;
    EXPECT_TRUE(rejected(net.bytes(), "task 'square0' (SHAVE queue tile 0): args[0] 'in': dtype "
                                      "I8, the kernel takes U8"));
}

TEST(Verifier, RejectsBufferWithStridedRows) {
    ConvNet net;
    net.add_shave_task();
    *net.shave().args[0]->tensor =
        activation(cmx_at(0, kOutAt), DType::U8, Layout::NCHW, kC, kW, kH);
    EXPECT_TRUE(rejected(net.bytes(), "task 'square0' (SHAVE queue tile 0): args[0] 'in': "
                                      "innermost stride 64, kernels take dense rows (stride 1)"));
}

TEST(Verifier, RejectsTooManyShaves) {
    ConvNet net;
    net.add_shave_task();
    net.shave().shaves = 3;
    EXPECT_TRUE(rejected(net.bytes(), "task 'square0' (SHAVE queue tile 0): shaves: 3 not in "
                                      "[1, 2]"));
    net.shave().shaves = 0;
    EXPECT_TRUE(rejected(net.bytes(), "task 'square0' (SHAVE queue tile 0): shaves: 0 not in "
                                      "[1, 2]"));
}

TEST(Verifier, RejectsKernelWithoutCode) {
    ConvNet net;
    net.add_shave_task();
    net.kernel().object.clear();
    net.kernel().entry.clear();
    std::vector<uint8_t> bytes = net.bytes();
    EXPECT_TRUE(rejected(bytes, "kernel 0 'square': object: empty"));
    EXPECT_TRUE(rejected(bytes, "kernel 0 'square': entry: empty"));
}

TEST(Verifier, RejectsKernelBufferArgumentWithoutRank) {
    ConvNet net;
    net.add_shave_task();
    net.kernel().args[0]->rank = 0;
    EXPECT_TRUE(rejected(net.bytes(), "kernel 0 'square': args[0] 'in': buffer rank 0 not in "
                                      "[1, 8]"));
}

// ---- Task barrier lists -----------------------------------------------------------------

TEST(Verifier, RejectsMissingBarrier) {
    ConvNet net;
    net.handle("store_y").update(7);
    EXPECT_TRUE(rejected(net.bytes(), "task 'store_y' (DMA queue 0): update_barriers[0]: "
                                      "barrier 7 does not exist (the blob has 2)"));
}

TEST(Verifier, RejectsTaskWaitingOnWhatItUpdates) {
    ConvNet net;
    net.handle("conv0").wait(net.computed);
    EXPECT_TRUE(rejected(net.bytes(), "task 'conv0' (DPU queue tile 0 dpu 0): update_barriers: "
                                      "barrier 1 is also in wait_barriers"));
}

TEST(Verifier, RejectsBarrierListedTwice) {
    ConvNet net;
    net.handle("conv0").wait(net.loaded);
    EXPECT_TRUE(rejected(net.bytes(), "task 'conv0' (DPU queue tile 0 dpu 0): wait_barriers: "
                                      "barrier 0 listed more than once"));
}

// ---- Barriers ---------------------------------------------------------------------------

TEST(Verifier, RejectsPhysicalIdBeyondTheTarget) {
    ConvNet net;
    net.w.blob().barriers[1]->physical_id = 64;
    EXPECT_TRUE(rejected(net.bytes(), "barrier 1 (physical 64): physical_id: 64 but vpu27 has "
                                      "64 barriers"));
}

TEST(Verifier, RejectsWrongBarrierCounts) {
    ConvNet net;
    net.bytes(); // derives the counts
    net.w.blob().barriers[0]->producer_count = 2;
    net.w.blob().barriers[1]->consumer_count = 0;
    std::vector<uint8_t> bytes = net.bytes(/*keep_barrier_counts=*/true);
    EXPECT_TRUE(rejected(bytes, "barrier 0 (physical 0): producer_count: 2 but 3 tasks update "
                                "it"));
    EXPECT_TRUE(rejected(bytes, "barrier 1 (physical 1): consumer_count: 0 but 1 tasks wait on "
                                "it"));
}

TEST(Verifier, RejectsConsumerWithoutProducer) {
    ConvNet net;
    uint32_t orphan = net.w.add_barrier(2);
    net.handle("store_y").wait(orphan);
    EXPECT_TRUE(rejected(net.bytes(), "barrier 2 (physical 2): no task updates it, so it is "
                                      "never released, but 'store_y' (DMA queue 0) waits on it"));
}

// ---- Deadlock ---------------------------------------------------------------------------

TEST(Verifier, RejectsTwoQueuesWaitingOnEachOther) {
    BlobWriter w(vpuc::target::load_target("vpu27"), "deadlock");
    w.add_input("x", {64}, DType::U8, Layout::ND);
    uint32_t a_done = w.add_barrier(0), b_done = w.add_barrier(1);
    w.add_dma(0, "a", input_at(0), cmx_at(0, 0), 64).wait(b_done).update(a_done);
    w.add_dma(1, "b", input_at(0), cmx_at(1, 0), 64).wait(a_done).update(b_done);
    EXPECT_TRUE(rejected(w.finish(), "deadlock: tasks wait on each other in a cycle: 'a' (DMA "
                                     "queue 0) updates barrier 0 -> 'b' (DMA queue 1) updates "
                                     "barrier 1 -> 'a'"));
}

TEST(Verifier, RejectsWaitOnALaterTaskOfTheSameQueue) {
    BlobWriter w(vpuc::target::load_target("vpu27"), "deadlock");
    w.add_input("x", {64}, DType::U8, Layout::ND);
    uint32_t late = w.add_barrier(0);
    w.add_dma(0, "first", input_at(0), cmx_at(0, 0), 64).wait(late);
    w.add_dma(0, "second", input_at(0), cmx_at(0, 64), 64).update(late);
    EXPECT_TRUE(rejected(w.finish(), "deadlock: tasks wait on each other in a cycle: 'first' "
                                     "(DMA queue 0) precedes in its queue -> 'second' (DMA queue "
                                     "0) updates barrier 0 -> 'first'"));
}

// ---- Physical barrier reuse -------------------------------------------------------------

TEST(Verifier, RejectsPhysicalReuseBeforeRelease) {
    ConvNet net;
    // 'early' runs on DMA queue 1 right after the loads: nothing orders it after conv0, the
    // consumer of barrier 0, yet it updates barrier 2 on the same physical barrier 0.
    uint32_t reused = net.w.add_barrier(0);
    net.w.add_dma(1, "early", input_at(0), cmx_at(1, 0), 64).update(reused);
    net.handle("store_y").wait(reused);
    EXPECT_TRUE(rejected(net.bytes(), "barrier 2 (physical 0): reuses physical barrier 0 before "
                                      "barrier 0 is consumed: its producer 'early' (DMA queue 1) "
                                      "is not ordered after consumer 'conv0' (DPU queue tile 0 "
                                      "dpu 0) of barrier 0"));
}

TEST(Verifier, AcceptsPhysicalReuseAfterRelease) {
    ConvNet net;
    uint32_t reused = net.w.add_barrier(0);
    net.w.add_dma(1, "late", input_at(0), cmx_at(1, 0), 64).wait(net.computed).update(reused);
    net.handle("store_y").wait(reused);
    EXPECT_EQ(error_of(net.bytes()), "");
}

TEST(Verifier, RejectsReuseOfABarrierNobodyWaitsOnBeforeItsProducersFinish) {
    BlobWriter w(vpuc::target::load_target("vpu27"), "reuse");
    w.add_input("x", {64}, DType::U8, Layout::ND);
    uint32_t first = w.add_barrier(5), second = w.add_barrier(5);
    w.add_dma(0, "a", input_at(0), cmx_at(0, 0), 64).update(first);
    w.add_dma(1, "b", input_at(0), cmx_at(1, 0), 64).update(second);
    EXPECT_TRUE(rejected(w.finish(), "barrier 1 (physical 5): reuses physical barrier 5 before "
                                     "barrier 0 is released: its producer 'b' (DMA queue 1) is "
                                     "not ordered after producer 'a' (DMA queue 0) of barrier 0"));
}

// A long pipeline over two DMA queues, one virtual barrier per step, physical barriers reused
// round-robin: the deadlock and reuse checks must stay fast on 100k tasks.
TEST(Verifier, LargePipelineVerifiesQuickly) {
    constexpr uint32_t kTasks = 100000;
    BlobWriter w(vpuc::target::load_target("vpu27"), "pipeline");
    w.add_input("x", {64}, DType::U8, Layout::ND);
    for (uint32_t i = 0; i < kTasks; ++i) {
        uint32_t done = w.add_barrier(uint16_t(i % 64));
        TaskHandle t = w.add_dma(i % 2, "t" + std::to_string(i), input_at(0),
                                 cmx_at(i % 2, 64 * (i % 100)), 64);
        if (i > 0) t.wait(done - 1);
        t.update(done);
    }
    std::vector<uint8_t> bytes = w.finish();
    auto start = std::chrono::steady_clock::now();
    EXPECT_EQ(error_of(bytes), "");
    double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    EXPECT_LT(seconds, 10.0);
}

// ---- Limits and robustness --------------------------------------------------------------

TEST(Verifier, StopsAfterFiftyProblems) {
    ConvNet net;
    for (uint32_t i = 0; i < 100; ++i) net.handle("store_y").update(100 + i);
    std::string error = error_of(net.bytes());
    EXPECT_EQ(std::count(error.begin(), error.end(), '\n'), 50) << error;
    EXPECT_NE(error.find("stopped after 50 problems"), std::string::npos);
}

TEST(Verifier, NeutralizesControlCharactersInNames) {
    ConvNet net;
    net.task("store_y").name = "evil\x1b[2J" + std::string(200, 'x');
    net.handle("evil\x1b[2J" + std::string(200, 'x')).update(9);
    std::string error = error_of(net.bytes());
    EXPECT_EQ(error.find('\x1b'), std::string::npos);
    EXPECT_NE(error.find("task 'evil\\x1b[2Jxxx"), std::string::npos) << error;
    EXPECT_LT(error.size(), 300u);
}

// One task referenced from many places of the task list, with a long wait list: tiny on disk,
// huge once expanded. The verifier must give up with an error, not run for hours.
TEST(Verifier, SharedTablesExhaustTheBudget) {
    constexpr uint32_t kBarriers = 30000, kRefs = 10000;
    flatbuffers::FlatBufferBuilder fbb;
    auto version = CreateVersion(fbb, kVersionMajor, kVersionMinor);
    const Target vpu27 = vpuc::target::load_target("vpu27");
    auto description = CreateTargetDescription(
        fbb, fbb.CreateString(vpu27.name), fbb.CreateString(vpu27.description_json),
        fbb.CreateVector(vpu27.description_sha256.data(), vpu27.description_sha256.size()));
    auto header = CreateHeader(fbb, version, description);
    auto barrier = CreateBarrier(fbb, 0, 0, 0);
    std::vector<flatbuffers::Offset<Barrier>> barriers(kBarriers, barrier);
    std::vector<uint32_t> waits(kBarriers);
    for (uint32_t i = 0; i < kBarriers; ++i) waits[i] = i;
    Address src(MemSpace::Cmx, 0, 0);
    std::vector<Address> dst{Address(MemSpace::Cmx, 1, 0)};
    auto dma = CreateDmaTask(fbb, &src, fbb.CreateVectorOfStructs(dst), 16);
    auto task = CreateTask(fbb, fbb.CreateString("shared"), 0, fbb.CreateVector(waits), 0,
                           TaskKind::DmaTask, dma.Union());
    std::vector<flatbuffers::Offset<Task>> tasks(kRefs, task);
    auto queue = CreateTaskQueue(fbb, EngineKind::Dma, 0, 0, fbb.CreateVector(tasks));
    std::vector<flatbuffers::Offset<TaskQueue>> queues{queue};
    FinishBlobBuffer(
        fbb, CreateBlob(fbb, header, 0, 0, fbb.CreateVector(barriers), fbb.CreateVector(queues)));
    std::vector<uint8_t> bytes(fbb.GetBufferPointer(), fbb.GetBufferPointer() + fbb.GetSize());
    EXPECT_TRUE(rejected(bytes, "blob: verification budget exhausted"));
}

// Random byte flips and truncations of a valid blob: verify either accepts or throws
// BlobError; anything else (another exception, a crash, a hang) fails the test.
TEST(Verifier, SurvivesRandomCorruption) {
    ConvNet net;
    net.add_shave_task();
    const std::vector<uint8_t> valid = net.bytes();
    std::mt19937 rng(1234);
    int rejected_count = 0;
    for (int iteration = 0; iteration < 3000; ++iteration) {
        std::vector<uint8_t> bytes = valid;
        int flips = 1 + int(rng() % 4);
        for (int f = 0; f < flips; ++f) bytes[rng() % bytes.size()] ^= uint8_t(1 + rng() % 255);
        if (iteration % 10 == 0) bytes.resize(rng() % bytes.size());
        try {
            verify(bytes, vpu27());
        } catch (const BlobError &) {
            ++rejected_count;
        }
    }
    EXPECT_GT(rejected_count, 1000);
}

// Extreme values in the fields the semantic checks compute with: offsets, extents, strides,
// counts. Nearly all are invalid; none may overflow into acceptance or crash.
TEST(Verifier, SurvivesExtremeFieldValues) {
    const int64_t strides[] = {0,
                               1,
                               -1,
                               std::numeric_limits<int64_t>::max(),
                               std::numeric_limits<int64_t>::min(),
                               1LL << 40,
                               -(1LL << 40)};
    const uint32_t extents[] = {0, 1, 0xffffffffu, 1u << 31};
    const uint64_t offsets[] = {0, ~uint64_t(0), uint64_t(1) << 63, (uint64_t(1) << 63) - 1};
    std::mt19937 rng(99);
    auto pick = [&](const auto &values) { return values[rng() % std::size(values)]; };
    int rejected_count = 0;
    for (int iteration = 0; iteration < 500; ++iteration) {
        ConvNet net;
        DpuTaskT &d = net.conv();
        TensorRefT *tensors[] = {d.input.get(), d.output.get(), d.weights.get()};
        TensorRefT &t = *tensors[rng() % 3];
        set_offset(*t.address, pick(offsets));
        t.dims[rng() % t.dims.size()] = Dim(pick(extents), pick(strides));
        DmaTaskT &dma = net.dma("load_x");
        dma.dims = {DmaDim(pick(extents), pick(strides), pick(strides))};
        dma.line_bytes = pick(extents);
        try {
            verify(net.bytes(), vpu27());
        } catch (const BlobError &) {
            ++rejected_count;
        }
    }
    EXPECT_GT(rejected_count, 400);
}

// ---- What running needs: every fault run would meet is the verifier's ---------------------

TEST(Verifier, RejectsZeroPointsOutsideTheirType) {
    ConvNet net;
    net.conv().input->zero_point = std::numeric_limits<int32_t>::min();
    net.conv().weights_zero_point = 200;
    const std::vector<uint8_t> bytes = net.bytes();
    EXPECT_TRUE(rejected(bytes, "task 'conv0' (DPU queue tile 0 dpu 0): input: zero point "
                                "-2147483648 not in [0, 255] for U8"));
    EXPECT_TRUE(rejected(bytes, "task 'conv0' (DPU queue tile 0 dpu 0): weights_zero_point: zero "
                                "point 200 not in [-128, 127] for I8"));
}

TEST(Verifier, RejectsPpeFieldsTheArithmeticCannotTake) {
    ConvNet net;
    net.conv().ppe->mult = 70000;
    net.conv().ppe->relux_max = -1;
    net.conv().ppe->clamp_low = 10;
    net.conv().ppe->clamp_high = 5;
    net.conv().ppe->fp_clamp_low = std::numeric_limits<float>::quiet_NaN();
    net.conv().ppe->fp_scale = std::numeric_limits<float>::infinity();
    const std::vector<uint8_t> bytes = net.bytes();
    const std::string conv = "task 'conv0' (DPU queue tile 0 dpu 0): ";
    EXPECT_TRUE(rejected(bytes, conv + "ppe.mult: 70000 not in [0, 65535]"));
    EXPECT_TRUE(rejected(bytes, conv + "ppe.relux_max: -1 is negative"));
    EXPECT_TRUE(rejected(bytes, conv + "ppe.clamp_low: 10 above clamp_high 5"));
    EXPECT_TRUE(rejected(bytes, conv + "ppe.fp_clamp_low: nan is not at most fp_clamp_high"));
    EXPECT_TRUE(rejected(bytes, conv + "ppe.fp_scale: inf is not finite"));
}

TEST(Verifier, RejectsADmaMovingMoreThanATaskMay) {
    ConvNet net;
    // Stride 0 keeps every line inside memory; the count makes the copy endless.
    net.dma("load_x").dims = {DmaDim(1u << 20, 0, 0), DmaDim(1u << 20, 0, 0)};
    net.dma("load_x").line_bytes = 16;
    EXPECT_TRUE(rejected(net.bytes(), "task 'load_x' (DMA queue 0): dims: the copy moves more "
                                      "than a DMA task may (16777216 lines and 1073741824 bytes "
                                      "over all destinations)"));
}

TEST(Verifier, RejectsADpuTaskComputingMoreThanATaskMay) {
    ConvNet net;
    // Channels aliased with stride 0 fit in CMX, and make 2^20 x 64 outputs of 2^20 MACs.
    DpuTaskT &conv = net.conv();
    conv.kernel_w = conv.kernel_h = 1;
    conv.pad_left = conv.pad_right = conv.pad_top = conv.pad_bottom = 0;
    conv.input->dims = {Dim(1u << 20, 0), Dim(8, 0), Dim(8, 0), Dim(1, 0)};
    conv.output->dims = {Dim(1u << 20, 0), Dim(8, 0), Dim(8, 0), Dim(1, 0)};
    conv.weights->dims = {Dim(1u << 20, 0), Dim(1, 0), Dim(1, 0), Dim(1u << 20, 0)};
    conv.weight_table->dims = {Dim(4, 1), Dim(1u << 20, 0)};
    conv.variants.clear();
    conv.variants.push_back(
        std::make_unique<DpuVariantT>(variant({0, 0, 0}, {8, 8, 1u << 20}, "CUBOID_16x16")));
    EXPECT_TRUE(rejected(net.bytes(), "task 'conv0' (DPU queue tile 0 dpu 0): variants: the task "
                                      "computes 70368744177664 multiply-accumulates, more than a "
                                      "task may (2147483648)"));
}

TEST(Verifier, RejectsKernelFiguresTheTimingModelCannotTake) {
    const float nan = std::numeric_limits<float>::quiet_NaN();
    const float inf = std::numeric_limits<float>::infinity();
    for (float bad : {nan, inf, 1e38f, -1.0f}) {
        ConvNet net;
        net.add_shave_task();
        net.kernel().arith_ops_per_vector = bad;
        net.kernel().special_ops_per_vector = bad;
        net.kernel().cmx_bytes_per_vector = bad;
        net.kernel().vector_lanes = 0;
        const std::vector<uint8_t> bytes = net.bytes();
        EXPECT_TRUE(rejected(bytes, "kernel 0 'square': arith_ops_per_vector: ")) << bad;
        EXPECT_TRUE(rejected(bytes, "kernel 0 'square': special_ops_per_vector: ")) << bad;
        EXPECT_TRUE(rejected(bytes, "kernel 0 'square': cmx_bytes_per_vector: ")) << bad;
        EXPECT_TRUE(rejected(bytes, "kernel 0 'square': vector_lanes: 0 not in [1, 16]")) << bad;
    }
    // No instructions is a figure (a copy); no bytes is not: every kernel stores its output.
    ConvNet net;
    net.add_shave_task();
    net.kernel().arith_ops_per_vector = 0;
    net.kernel().special_ops_per_vector = 0;
    net.kernel().cmx_bytes_per_vector = 0;
    const std::vector<uint8_t> bytes = net.bytes();
    EXPECT_TRUE(rejected(bytes, "kernel 0 'square': cmx_bytes_per_vector: 0 not in (0, 1e+09]"));
    const std::string error = error_of(bytes, vpu27());
    EXPECT_EQ(error.find("arith_ops_per_vector"), std::string::npos) << error;
    EXPECT_EQ(error.find("special_ops_per_vector"), std::string::npos) << error;
}

TEST(Verifier, RejectsMinsPastTheLargestCoordinate) {
    ConvNet net;
    net.add_shave_task();
    net.shave().args[0]->mins = {std::numeric_limits<int32_t>::max(),
                                 std::numeric_limits<int32_t>::max(),
                                 std::numeric_limits<int32_t>::max(), 0};
    EXPECT_TRUE(rejected(net.bytes(), "task 'square0' (SHAVE queue tile 0): args[0] 'in': "
                                      "mins[0]: 2147483647 + extent 16 passes the largest "
                                      "coordinate (2^31 - 1)"));
}

// A window shifted against the output reads other bytes than the kernel's input: its own
// checks would fail the call, so the verifier refuses it first.
TEST(Verifier, RejectsAnInputWindowThatMissesWhatTheKernelReads) {
    ConvNet net;
    net.add_shave_task();
    net.shave().args[0]->mins = {0, 7, 0, 0};
    EXPECT_TRUE(rejected(net.bytes(), "task 'square0' (SHAVE queue tile 0): args[0] 'in': the "
                                      "kernel reads 0..7 of dimension 1 for its output, outside "
                                      "the window 7..14"));
    net.shave().args[0]->mins.clear();
    net.shave().args[2]->mins = {0, 0, 1, 0};
    EXPECT_TRUE(rejected(net.bytes(), "args[0] 'in': the kernel reads 1..8 of dimension 2 for "
                                      "its output, outside the window 0..7"));
}

TEST(Verifier, RejectsScalarsOutsideTheirType) {
    ConvNet net;
    net.add_shave_task();
    net.shave().args[1]->int_value = int64_t(1) << 32;
    EXPECT_TRUE(rejected(net.bytes(), "task 'square0' (SHAVE queue tile 0): args[1] 'k': "
                                      "int_value 4294967296 not in [-2147483648, 2147483647] for "
                                      "I32"));
}

TEST(Verifier, RejectsMalformedReadBounds) {
    ConvNet net;
    net.add_shave_task();
    ASSERT_EQ(net.kernel().args[0]->reads.size(), 4u);
    net.kernel().args[0]->reads[1] = ReadBound(9, 1, 0, 0, 0, 0, 0, 0, 0, 0);
    EXPECT_TRUE(rejected(net.bytes(), "kernel 0 'square': args[0] 'in' reads[1]: source 9, "
                                      "scale 1, divisor 0"));
    net.kernel().args[0]->reads.pop_back();
    EXPECT_TRUE(rejected(net.bytes(), "kernel 0 'square': args[0] 'in': reads: 3 bounds; an "
                                      "input buffer has one per dimension (or none)"));
}

TEST(Verifier, RejectsACorruptedTargetDescription) {
    ConvNet net;
    net.w.blob().header->target->json[10] ^= 1;
    EXPECT_TRUE(rejected(net.bytes(), "header: target: sha256 does not match the description it "
                                      "carries (corrupted blob)"));
}

TEST(Verifier, TheBlobCarriesItsTarget) {
    // A target of one's own, as a file would give it: the blob runs on its description.
    std::string json = vpu27().description_json;
    const std::string name = "\"name\":\"vpu27\"";
    json.replace(json.find(name), name.size(), "\"name\":\"mine\"");
    const Target mine = vpuc::target::parse_target(json, "mine.json");
    BlobWriter w(mine, "own");
    w.add_input("x", {64}, DType::U8, Layout::ND);
    w.add_dma(0, "load", input_at(0), cmx_at(0, 0), 64);
    const std::vector<uint8_t> bytes = w.finish();
    const Target carried = embedded_target(verify_structure(bytes));
    EXPECT_EQ(carried.name, "mine");
    EXPECT_EQ(carried.description_sha256, mine.description_sha256);
    EXPECT_EQ(error_of(bytes, carried), "");
    EXPECT_TRUE(rejected(bytes, "header: target: blob compiled for 'mine'", vpu27()));
}

// ---- Weight tables ---------------------------------------------------------------------------

TEST(Verifier, RejectsAWeightOffsetOutsideCmx) {
    ConvNet net;
    std::vector<uint8_t> &constants = net.w.blob().constants;
    const uint64_t table = (kWeightBytes + 63) / 64 * 64;
    const int32_t offset = 0x7ffffff0;
    std::memcpy(&constants[table + 5 * 16], &offset, 4);
    EXPECT_TRUE(rejected(net.bytes(), "task 'conv0' (DPU queue tile 0 dpu 0): weight_table: "
                                      "entry 5: weights offset 2147483632 puts the 144 bytes of "
                                      "the channel's weights past the end of CMX tile 0 "
                                      "(2097152 bytes)"));
}

TEST(Verifier, RejectsAWeightTableNotCopiedFromTheConstants) {
    ConvNet net;
    // The table loaded from the input instead: its contents are not known.
    net.dma("load_wt").src = std::make_unique<Address>(input_at(0));
    EXPECT_TRUE(rejected(net.bytes(), "task 'conv0' (DPU queue tile 0 dpu 0): weight_table: "
                                      "entry 0: its weights offset is not a copy of the constant "
                                      "section when the task runs (last written by 'load_wt' "
                                      "(DMA queue 1))"));
    ConvNet never;
    never.dma("load_wt").dst[0] = cmx_at(0, kTableAt + 8192);
    EXPECT_TRUE(rejected(never.bytes(), "entry 0: its weights offset is not a copy of the "
                                        "constant section when the task runs (nothing wrote it)"));
}
