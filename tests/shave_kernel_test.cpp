// SHAVE kernels end to end: Halide pipeline -> object in a blob -> checked by the verifier ->
// loaded by the sandboxed SHAVE worker -> called on views of its shared memory, compared
// bit-exactly with the same algorithm run by Halide's JIT. Kernels are compiled once per test
// binary (Halide compilation is the slow part). Then SHAVE layers through the lowering: schedules
// of the loops inside a task reach the kernel, and results match the CPU reference bit-exactly.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <random>
#include <unistd.h>

#include "../codegen/src/kernel_disk_cache.h"
#include "algorithms/layers.h"
#include "algorithms/reference.h"
#include "codegen/lower.h"
#include "codegen/shave_kernel.h"
#include "lowering_fixtures.h"
#include "vpu_target/blob_writer.h"
#include "vpu_target/shave_sandbox.h"
#include "vpu_target/simulator.h"
#include "vpu_target/verifier.h"

using namespace vpuc;
using codegen::ShaveKernelBinary;
using codegen::ShaveKernelCost;
using Halide::Buffer;
using Halide::Expr;
using Halide::Func;
using Halide::ImageParam;
using Halide::Var;
using vpuc::test::activation;

namespace {

constexpr int kVectorBits = 128;
// Not multiples of any vector width, so every kernel runs its vector tails.
constexpr int kW = 37, kH = 5, kC = 3;

// ---- Algorithms: a fresh, unscheduled pipeline per call ------------------------------------

struct Pipeline {
    Func output;
    std::vector<ImageParam> images;
    std::vector<Halide::Param<float>> scalars;

    // The kernel's inputs: images, then scalars.
    std::vector<Halide::Argument> arguments() const {
        std::vector<Halide::Argument> args(images.begin(), images.end());
        args.insert(args.end(), scalars.begin(), scalars.end());
        return args;
    }
};

Pipeline int8_add() {
    Var x, y, c;
    ImageParam a(Halide::Int(8), 3, "a"), b(Halide::Int(8), 3, "b");
    Func f("int8_add");
    f(x, y, c) = Halide::saturating_cast<int8_t>(Halide::cast<int16_t>(a(x, y, c)) + b(x, y, c));
    return {f, {a, b}, {}};
}

// gain * x through a sigmoid, computed in fp32 whatever the storage type.
Pipeline sigmoid(Halide::Type type, const std::string &name) {
    Var x, y, c;
    ImageParam in(type, 3, "in");
    Halide::Param<float> gain("gain");
    Func f(name);
    Expr v = gain * Halide::cast<float>(in(x, y, c));
    f(x, y, c) = Halide::cast(type, 1.0f / (1.0f + Halide::exp(-v)));
    return {f, {in}, {gain}};
}

// A producer computed in its own heap buffer: the kernel calls halide_malloc/halide_free.
Pipeline blur_x() {
    Var x, y, c;
    ImageParam in(Halide::Float(32), 3, "in");
    Func doubled("doubled"), f("blur_x");
    doubled(x, y, c) = in(x, y, c) * 2.0f;
    f(x, y, c) = doubled(x, y, c) + doubled(x + 1, y, c);
    doubled.compute_root().vectorize(x, 4, Halide::TailStrategy::GuardWithIf);
    f.vectorize(x, 4, Halide::TailStrategy::GuardWithIf);
    return {f, {in}, {}};
}

// A sum over 8 rows: its reduction loop runs 8 times per output vector.
Pipeline row_sum() {
    Var x;
    ImageParam in(Halide::Float(32), 2, "in");
    Halide::RDom r(0, 8, "r");
    Func f("row_sum");
    f(x) = 0.0f;
    f(x) += in(x, r);
    f.vectorize(x, 4, Halide::TailStrategy::GuardWithIf);
    f.update().vectorize(x, 4, Halide::TailStrategy::GuardWithIf);
    return {f, {in}, {}};
}

// Each row divided by its total: a reduction over a fixed domain (a whole input row, whatever
// the crop of the output) feeding a pointwise output, both left for the compiler to schedule.
Pipeline row_normalize() {
    Var x, y, c;
    ImageParam in(Halide::Float(32), 3, "in");
    Halide::RDom r(0, kW, "r");
    Func total("total"), f("row_normalize");
    total(y, c) = 0.0f;
    total(y, c) += in(r, y, c);
    f(x, y, c) = in(x, y, c) / total(y, c);
    return {f, {in}, {}};
}

// A kernel that would run a shell command: must never be linked.
Pipeline calls_system() {
    Var x;
    ImageParam in(Halide::Int(32), 1, "in");
    Func f("calls_system");
    Expr command = Halide::Internal::StringImm::make("echo from a SHAVE kernel");
    f(x) = in(x) + Halide::Internal::Call::make(Halide::Int(32), "system", {command},
                                                Halide::Internal::Call::Extern);
    return {f, {in}, {}};
}

ShaveKernelBinary compile(const Pipeline &p, const std::string &name) {
    return codegen::compile_shave_kernel(name, p.output, p.arguments(), kVectorBits);
}

// The JIT reference runs on the SHAVE kernels' instruction set: with the host's FMA, LLVM
// would fuse fp32 multiply-adds and round differently.
Halide::Target reference_target() {
    return codegen::shave_halide_target()
        .without_feature(Halide::Target::NoRuntime)
        .without_feature(Halide::Target::NoAsserts)
        .without_feature(Halide::Target::NoBoundsQuery);
}

const ShaveKernelBinary &int8_add_kernel() {
    static const ShaveKernelBinary k = compile(int8_add(), "int8_add");
    return k;
}
const ShaveKernelBinary &sigmoid_f32_kernel() {
    static const ShaveKernelBinary k =
        compile(sigmoid(Halide::Float(32), "sigmoid_f32"), "sigmoid_f32");
    return k;
}
const ShaveKernelBinary &sigmoid_f16_kernel() {
    static const ShaveKernelBinary k =
        compile(sigmoid(Halide::Float(16), "sigmoid_f16"), "sigmoid_f16");
    return k;
}
const ShaveKernelBinary &blur_x_kernel() {
    static const ShaveKernelBinary k = compile(blur_x(), "blur_x");
    return k;
}

// ---- Blobs ----------------------------------------------------------------------------------

// A blob for vpu27 holding `kernels` (and nothing else to run).
std::vector<uint8_t> make_blob(std::vector<std::unique_ptr<blob::KernelT>> kernels) {
    blob::BlobWriter w(target::load_target("vpu27"), "kernels");
    for (auto &k : kernels) w.add_kernel(std::move(*k));
    return w.finish();
}

std::vector<uint8_t> blob_of(const std::vector<const ShaveKernelBinary *> &kernels) {
    std::vector<std::unique_ptr<blob::KernelT>> out;
    for (const ShaveKernelBinary *k : kernels) out.push_back(codegen::to_blob_kernel(*k));
    return make_blob(std::move(out));
}

// The verifier's verdict on a blob of kernels: "" when it accepts them.
std::string kernel_error(const std::vector<uint8_t> &bytes) {
    try {
        blob::verify(bytes, target::load_target("vpu27"));
    } catch (const blob::BlobError &e) {
        return e.what();
    }
    return "";
}

// A buffer or a float scalar, as a kernel's argument.
struct Arg {
    const halide_buffer_t *buffer = nullptr;
    float scalar = 0;
};

// The kernels of a blob loaded by a SHAVE worker, with shared memory to run them on. Inputs are
// copied in, the output is read back; each run is one task (the worker's call or calls).
class Sandboxed {
  public:
    explicit Sandboxed(std::vector<uint8_t> bytes)
        : bytes_(std::move(bytes)), memory_(1 << 20),
          sandbox_(sim::KernelImages::of(*blob::GetBlob(bytes_.data())), memory_) {}

    // Copies a dense buffer into the memory; its argument keeps the buffer's mins.
    sim::ShaveArgument place(const halide_buffer_t &b, blob::ArgKind kind) {
        sim::ShaveArgument arg;
        arg.kind = kind;
        arg.dtype = dtype_of(b.type);
        arg.offset = used_;
        const size_t bytes = Halide::Runtime::Buffer<>(b).size_in_bytes();
        std::memcpy(memory_.data() + used_, b.host, bytes);
        used_ += (bytes + 63) / 64 * 64;
        for (int d = 0; d < b.dimensions; ++d)
            arg.dims.push_back({b.dim[d].min, b.dim[d].extent, b.dim[d].stride});
        return arg;
    }

    std::vector<sim::ShaveArgument> inputs(const std::vector<Arg> &args) {
        std::vector<sim::ShaveArgument> out;
        for (const Arg &a : args) {
            if (a.buffer) {
                out.push_back(place(*a.buffer, blob::ArgKind::InputBuffer));
            } else {
                sim::ShaveArgument scalar;
                scalar.kind = blob::ArgKind::ScalarFloat;
                scalar.dtype = blob::DType::F32;
                scalar.float_value = a.scalar;
                out.push_back(scalar);
            }
        }
        return out;
    }

    void run(uint32_t kernel, const std::vector<sim::ShaveArgument> &args, uint32_t shaves) {
        sandbox_.run(kernel, args, shaves, "test");
    }

    uint8_t *memory() { return memory_.data(); }

  private:
    static blob::DType dtype_of(halide_type_t t) {
        if (t.code == halide_type_float) return t.bits == 16 ? blob::DType::F16 : blob::DType::F32;
        if (t.code == halide_type_uint) return blob::DType::U8;
        return t.bits == 8 ? blob::DType::I8 : blob::DType::I32;
    }

    std::vector<uint8_t> bytes_;
    sim::SharedMemory memory_;
    sim::ShaveSandbox sandbox_;
    uint64_t used_ = 0;
};

// The kernels that run, loaded once: index 0 int8_add, 1 sigmoid_f32, 2 sigmoid_f16, 3 blur_x.
Sandboxed &sandboxed() {
    static Sandboxed kernels(blob_of(
        {&int8_add_kernel(), &sigmoid_f32_kernel(), &sigmoid_f16_kernel(), &blur_x_kernel()}));
    return kernels;
}

// ---- Data ----------------------------------------------------------------------------------

// Deterministic pseudo-random values: signed bytes (the whole int8 range, so int8 kernels
// saturate) times `scale`.
template <typename T> Buffer<T> random_buffer(int w, int h, int c, uint32_t seed, float scale) {
    Buffer<T> b(w, h, c);
    uint32_t state = seed;
    b.for_each_value([&](T &v) {
        state = state * 1664525u + 1013904223u;
        const int byte = int8_t(state >> 24);
        v = T(float(byte) * scale);
    });
    return b;
}

template <typename T> void expect_equal(const Buffer<T> &expected, const Buffer<T> &actual) {
    int mismatches = 0;
    expected.for_each_element([&](int x, int y, int c) {
        T e = expected(x, y, c), a = actual(x, y, c);
        if (std::memcmp(&e, &a, sizeof(T)) != 0 && ++mismatches <= 5)
            ADD_FAILURE() << "at (" << x << ", " << y << ", " << c << "): expected " << double(e)
                          << ", got " << double(a);
    });
    EXPECT_EQ(mismatches, 0);
}

// Runs a kernel on the whole output, then as two calls on the two halves of each dimension
// (as two SHAVEs would), then split by the worker across two SHAVEs; all must equal the
// reference.
template <typename T>
void run_and_compare(Sandboxed &kernels, uint32_t kernel, const std::vector<Arg> &inputs,
                     const Buffer<T> &reference) {
    Buffer<T> zeros(kW, kH, kC);
    zeros.fill(T(0));
    auto result = [&](const sim::ShaveArgument &out) {
        Buffer<T> got(kW, kH, kC);
        std::memcpy(got.data(), kernels.memory() + out.offset, got.size_in_bytes());
        return got;
    };
    std::vector<sim::ShaveArgument> args = kernels.inputs(inputs);
    args.push_back(kernels.place(*zeros.raw_buffer(), blob::ArgKind::OutputBuffer));
    kernels.run(kernel, args, 1);
    expect_equal(reference, result(args.back()));

    for (int split = 0; split < 3; ++split) {
        SCOPED_TRACE("two calls on the halves of dimension " + std::to_string(split));
        args.back() = kernels.place(*zeros.raw_buffer(), blob::ArgKind::OutputBuffer);
        const sim::ShaveArgument whole = args.back();
        const int32_t extent = whole.dims[size_t(split)].extent, first = extent / 2;
        for (auto [begin, size] :
             {std::make_pair(0, first), std::make_pair(first, extent - first)}) {
            sim::ShaveArgument crop = whole;
            crop.dims[size_t(split)].min = begin;
            crop.dims[size_t(split)].extent = size;
            crop.offset += uint64_t(begin) * uint64_t(whole.dims[size_t(split)].stride) * sizeof(T);
            args.back() = crop;
            kernels.run(kernel, args, 1);
        }
        expect_equal(reference, result(whole));
    }
    SCOPED_TRACE("split by the worker across two SHAVEs");
    args.back() = kernels.place(*zeros.raw_buffer(), blob::ArgKind::OutputBuffer);
    kernels.run(kernel, args, 2);
    expect_equal(reference, result(args.back()));
}

// ---- Tests ---------------------------------------------------------------------------------

TEST(ShaveKernel, ArgumentContract) {
    const ShaveKernelBinary &k = sigmoid_f32_kernel();
    EXPECT_EQ(k.entry, "sigmoid_f32_argv");
    ASSERT_EQ(k.args.size(), 3u);
    EXPECT_EQ(k.args[0].name, "in");
    EXPECT_EQ(k.args[0].kind, codegen::KernelArgKind::InputBuffer);
    EXPECT_EQ(k.args[0].dtype, target::DType::F32);
    EXPECT_EQ(k.args[0].rank, 3);
    EXPECT_EQ(k.args[1].name, "gain");
    EXPECT_EQ(k.args[1].kind, codegen::KernelArgKind::ScalarFloat);
    EXPECT_EQ(k.args[1].rank, 0);
    EXPECT_EQ(k.args[2].name, "sigmoid_f32");
    EXPECT_EQ(k.args[2].kind, codegen::KernelArgKind::OutputBuffer);

    const auto blob_kernel = codegen::to_blob_kernel(k);
    EXPECT_EQ(blob_kernel->entry, k.entry);
    EXPECT_EQ(blob_kernel->object, k.object);
    ASSERT_EQ(blob_kernel->args.size(), 3u);
    EXPECT_EQ(blob_kernel->args[1]->kind, blob::ArgKind::ScalarFloat);
    EXPECT_EQ(blob_kernel->args[2]->kind, blob::ArgKind::OutputBuffer);
    EXPECT_EQ(blob_kernel->args[2]->dtype, blob::DType::F32);
    EXPECT_EQ(blob_kernel->args[2]->rank, 3);
}

TEST(ShaveKernel, OperationCounts) {
    const ShaveKernelBinary &add = int8_add_kernel();
    EXPECT_EQ(add.vector_lanes, 16u);
    // One saturating add; two vectors loaded, one stored.
    EXPECT_DOUBLE_EQ(add.per_vector.arith_ops, 1);
    EXPECT_DOUBLE_EQ(add.per_vector.special_ops, 0);
    EXPECT_DOUBLE_EQ(add.per_vector.cmx_bytes, 3 * 16);

    // 1 / (1 + exp(-gain * x)) in fp32, 4 lanes: an exp and a divide per vector.
    const ShaveKernelCost &f32 = sigmoid_f32_kernel().per_vector;
    EXPECT_EQ(sigmoid_f32_kernel().vector_lanes, 4u);
    EXPECT_DOUBLE_EQ(f32.special_ops, 2);
    EXPECT_DOUBLE_EQ(f32.cmx_bytes, 2 * 16);
    // fp16 stores 8 lanes per vector but computes in fp32, two vectors of 4: twice the
    // instructions, and as many bytes.
    const ShaveKernelCost &f16 = sigmoid_f16_kernel().per_vector;
    EXPECT_EQ(sigmoid_f16_kernel().vector_lanes, 8u);
    EXPECT_DOUBLE_EQ(f16.special_ops, 4);
    EXPECT_GT(f16.arith_ops, 2 * f32.arith_ops);
    EXPECT_DOUBLE_EQ(f16.cmx_bytes, 2 * 16);
    // Counted for the nominal 64 x 4 x 4 output, per row of 16 vectors: the producer covers 65
    // columns, 16 vectors of (load, multiply, store) and a predicated tail vector that also
    // computes its predicate for the load and for the store (3 instructions); the consumer 16
    // vectors of (2 loads, add, store).
    EXPECT_DOUBLE_EQ(blur_x_kernel().per_vector.arith_ops, (16 + 3 + 16) / 16.0);
    EXPECT_DOUBLE_EQ(blur_x_kernel().per_vector.cmx_bytes, (17 * 2 * 16 + 16 * 3 * 16) / 16.0);
    // Initialisation (a store), then 8 times (2 loads, add, store).
    const ShaveKernelCost row = compile(row_sum(), "row_sum").per_vector;
    EXPECT_DOUBLE_EQ(row.arith_ops, 8);
    EXPECT_DOUBLE_EQ(row.cmx_bytes, 16 + 8 * 3 * 16);
}

// A table lookup, out(x) = table(in(x)) on u8: the SHAVE's vector loads read consecutive
// elements, so the table is read by one scalar load per lane, from indices widened to int32 in
// the vector unit; a load of consecutive elements (the input) costs bytes only.
TEST(ShaveKernel, AGatherCostsALoadPerLane) {
    Var x;
    ImageParam in(Halide::UInt(8), 1, "in"), table(Halide::UInt(8), 1, "table");
    Func f("lookup");
    f(x) = table(Halide::cast<int32_t>(in(x)));
    const ShaveKernelCost cost = compile({f, {in, table}, {}}, "lookup").per_vector;
    // 16 lanes: 16 scalar loads, and the index's widening to int32 and the subtraction of the
    // table's origin, each in 4 vectors of 4 lanes.
    EXPECT_DOUBLE_EQ(cost.arith_ops, 16 + 4 + 4);
    EXPECT_DOUBLE_EQ(cost.special_ops, 0);
    EXPECT_DOUBLE_EQ(cost.cmx_bytes, 3 * 16);
}

// out(x) = in(x / 2 - 1) + in(x / 2), as a transposed convolution of stride 2 gathers: Halide
// simplifies the bounds to (min - 2) / 2 and max / 2, quotients of different shifts, which the
// blob states as floor_div(v, 2) - 1 and floor_div(v, 2).
TEST(ShaveKernel, AQuotientLessWholeStepsIsOneReadBound) {
    Var x;
    ImageParam in(Halide::Float(32), 1, "in");
    Func f("halves");
    f(x) = in(x / 2 - 1) + in(x / 2);
    const ShaveKernelBinary k = compile({f, {in}, {}}, "halves");
    ASSERT_EQ(k.args.at(0).reads.size(), 1u);
    const blob::ReadBound &r = k.args[0].reads[0];
    EXPECT_EQ(r.scale(), 1);
    EXPECT_EQ(r.divisor(), 2);
    EXPECT_EQ(r.shift() + 2 * r.min_offset(), -2);
    EXPECT_EQ(r.shift() + 2 * r.max_offset(), 0);
}

TEST(ShaveKernel, Int8AddMatchesJit) {
    auto a = random_buffer<int8_t>(kW, kH, kC, 1, 1.0f);
    auto b = random_buffer<int8_t>(kW, kH, kC, 2, 1.0f);
    Pipeline reference = int8_add();
    reference.images[0].set(a);
    reference.images[1].set(b);
    Buffer<int8_t> expected = reference.output.realize({kW, kH, kC}, reference_target());

    run_and_compare(sandboxed(), 0, {{a.raw_buffer()}, {b.raw_buffer()}}, expected);
}

template <typename T> void check_sigmoid(uint32_t kernel_index, Halide::Type type) {
    auto in = random_buffer<T>(kW, kH, kC, 3, 1.0f / 16);
    float gain = 1.5f;
    Pipeline reference = sigmoid(type, "reference");
    reference.images[0].set(in);
    reference.scalars[0].set(gain);
    Buffer<T> expected = reference.output.realize({kW, kH, kC}, reference_target());

    run_and_compare(sandboxed(), kernel_index, {{in.raw_buffer()}, {nullptr, gain}}, expected);
}

TEST(ShaveKernel, SigmoidF32MatchesJit) {
    check_sigmoid<float>(1, Halide::Float(32));
}
TEST(ShaveKernel, SigmoidF16MatchesJit) {
    check_sigmoid<Halide::float16_t>(2, Halide::Float(16));
}

TEST(ShaveKernel, HeapProducerMatchesJit) {
    auto in = random_buffer<float>(kW + 1, kH, kC, 4, 0.25f);
    Pipeline reference = blur_x();
    reference.images[0].set(in);
    Buffer<float> expected = reference.output.realize({kW, kH, kC}, reference_target());

    run_and_compare(sandboxed(), 3, {{in.raw_buffer()}}, expected);
}

TEST(ShaveKernel, ForbiddenSymbolIsRefused) {
    // Compiling works: the allow-list is enforced where native code enters the simulator.
    const ShaveKernelBinary bad = compile(calls_system(), "calls_system");
    const std::string error = kernel_error(blob_of({&int8_add_kernel(), &bad}));
    EXPECT_NE(error.find("kernel 'calls_system': references symbol 'system', which is not in "
                         "the SHAVE allow-list (allowed: halide_malloc, "),
              std::string::npos)
        << error;
    for (const char *allowed : {"memcpy", "tanhf", "halide_error_access_out_of_bounds"})
        EXPECT_NE(error.find(std::string(allowed) + ","), std::string::npos) << allowed;
    for (const char *refused : {"getenv", "dlopen", "halide_do_par_for"})
        EXPECT_EQ(error.find(refused), std::string::npos) << refused;
}

TEST(ShaveKernel, GarbageObjectIsRefused) {
    auto garbage = codegen::to_blob_kernel(int8_add_kernel());
    garbage->name = "garbage";
    const std::string text = "this is not an object file";
    garbage->object.assign(text.begin(), text.end());
    std::vector<std::unique_ptr<blob::KernelT>> kernels;
    kernels.push_back(std::move(garbage));
    const std::string error = kernel_error(make_blob(std::move(kernels)));
    EXPECT_NE(error.find("kernel 'garbage': object is not a valid ELF object"), std::string::npos)
        << error;
}

TEST(ShaveKernel, TruncatedObjectIsRefused) {
    auto truncated = codegen::to_blob_kernel(int8_add_kernel());
    truncated->object.resize(truncated->object.size() / 2);
    std::vector<std::unique_ptr<blob::KernelT>> kernels;
    kernels.push_back(std::move(truncated));
    const std::string error = kernel_error(make_blob(std::move(kernels)));
    EXPECT_NE(error.find("kernel 'int8_add': object is malformed: section table: "),
              std::string::npos)
        << error;
}

TEST(ShaveKernel, CorruptObjectsAreRefusedOrLoad) {
    // A few bytes of a valid object overwritten, many times over (and the kernel's hash made to
    // match, as by someone who meant it): each object is refused by the verifier with a
    // BlobError, or the worker loads it. (Loaded ones are not run: their code may be corrupt.)
    uint32_t state = 7;
    auto next = [&] { return (state = state * 1664525u + 1013904223u) >> 8; };
    int refused = 0;
    for (int i = 0; i < 300; ++i) {
        auto corrupt = codegen::to_blob_kernel(sigmoid_f32_kernel());
        for (uint32_t n = 1 + next() % 4; n > 0; --n)
            corrupt->object[next() % corrupt->object.size()] = uint8_t(next());
        std::vector<std::unique_ptr<blob::KernelT>> kernels;
        kernels.push_back(std::move(corrupt));
        const std::vector<uint8_t> bytes = make_blob(std::move(kernels));
        if (!kernel_error(bytes).empty()) {
            ++refused;
            continue;
        }
        sim::SharedMemory memory(4096);
        EXPECT_NO_THROW(
            sim::ShaveSandbox(sim::KernelImages::of(*blob::GetBlob(bytes.data())), memory)
                .wait_for_kernels())
            << "object " << i;
    }
    EXPECT_GT(refused, 50);
}

template <typename T> T read_at(const std::vector<uint8_t> &bytes, uint64_t at) {
    T value;
    std::memcpy(&value, bytes.data() + at, sizeof value);
    return value;
}

// Where the addend of the first PC-relative relocation (R_X86_64_PC32 or PLT32) of an x86-64
// ELF object is. (Offsets from the ELF-64 specification: <elf.h> clashes with Halide.h.)
uint64_t first_pc_relative_addend(const std::vector<uint8_t> &object) {
    constexpr uint32_t kRela = 4, kPc32 = 2, kPlt32 = 4;
    constexpr uint64_t kRelaBytes = 24;
    const auto section_table = read_at<uint64_t>(object, 0x28);
    const auto section_count = read_at<uint16_t>(object, 0x3c);
    for (uint64_t i = 0; i < section_count; ++i) {
        const uint64_t section = section_table + 64 * i;
        if (read_at<uint32_t>(object, section + 4) != kRela) continue;
        const auto offset = read_at<uint64_t>(object, section + 0x18);
        const auto size = read_at<uint64_t>(object, section + 0x20);
        for (uint64_t r = offset; r + kRelaBytes <= offset + size; r += kRelaBytes) {
            const auto type = uint32_t(read_at<uint64_t>(object, r + 8));
            if (type == kPc32 || type == kPlt32) return r + 16;
        }
    }
    return 0;
}

TEST(ShaveKernel, PcRelativeRelocationsOutOfRangeAreRefused) {
    // The fuzzers found an addend near 2^63, which overflowed the range check's arithmetic.
    for (const int64_t addend : {std::numeric_limits<int64_t>::max() - 3,
                                 std::numeric_limits<int64_t>::min(), int64_t(1) << 31}) {
        auto kernel = codegen::to_blob_kernel(sigmoid_f32_kernel());
        const uint64_t at = first_pc_relative_addend(kernel->object);
        ASSERT_NE(at, 0u);
        std::memcpy(kernel->object.data() + at, &addend, sizeof addend);
        std::vector<std::unique_ptr<blob::KernelT>> kernels;
        kernels.push_back(std::move(kernel));
        const std::string error = kernel_error(make_blob(std::move(kernels)));
        EXPECT_NE(error.find("object has a 32-bit PC-relative relocation out of range"),
                  std::string::npos)
            << addend << ": " << error;
    }
}

TEST(ShaveKernel, CorruptedKernelIsCaughtByItsHash) {
    auto kernel = codegen::to_blob_kernel(int8_add_kernel());
    blob::BlobWriter w(target::load_target("vpu27"), "kernels");
    w.add_kernel(*kernel);
    w.blob().kernels[0]->object[100] ^= 1;
    EXPECT_NE(kernel_error(w.finish())
                  .find("kernel 0 'int8_add': sha256: does not match the "
                        "kernel's entry, contract and object: the kernel is "
                        "corrupted"),
              std::string::npos);
}

TEST(ShaveKernel, MissingEntryIsRefused) {
    auto wrong_entry = codegen::to_blob_kernel(int8_add_kernel());
    wrong_entry->entry = "int8_add_main";
    std::vector<std::unique_ptr<blob::KernelT>> kernels;
    kernels.push_back(std::move(wrong_entry));
    const std::string error = kernel_error(make_blob(std::move(kernels)));
    EXPECT_NE(error.find("kernel 'int8_add': object does not define its entry point "
                         "'int8_add_main'"),
              std::string::npos)
        << error;
}

TEST(ShaveKernel, ParallelLoopsAreRefused) {
    Pipeline p = int8_add();
    p.output.parallel(p.output.args()[2]);
    try {
        compile(p, "int8_add_parallel");
        FAIL() << "a parallel kernel compiled";
    } catch (const codegen::ShaveKernelError &e) {
        EXPECT_NE(std::string(e.what()).find("SHAVE kernel 'int8_add_parallel': Func '"),
                  std::string::npos)
            << e.what();
        EXPECT_NE(std::string(e.what()).find("has a parallel loop over"), std::string::npos)
            << e.what();
    }
}

std::string compile_error(const Func &f, const std::vector<Halide::Argument> &inputs,
                          const std::string &name) {
    try {
        codegen::compile_shave_kernel(name, f, inputs, kVectorBits);
    } catch (const codegen::ShaveKernelError &e) {
        return e.what();
    }
    return "(compiled)";
}

TEST(ShaveKernel, BadPipelinesAreRefused) {
    Pipeline add = int8_add();
    EXPECT_EQ(compile_error(add.output, add.arguments(), "int8-add"),
              "SHAVE kernel 'int8-add': the name must be a C identifier");

    try {
        codegen::compile_shave_kernel("int8_add", add.output, add.arguments(), kVectorBits, {4, 4});
        ADD_FAILURE() << "compiled with 2 extents for a 3-D output";
    } catch (const codegen::ShaveKernelError &e) {
        EXPECT_EQ(std::string(e.what()),
                  "SHAVE kernel 'int8_add': the extents to count ops for must be 3 positive "
                  "int32 values, one per output dimension");
    }

    const std::string missing = compile_error(add.output, {add.images[0]}, "int8_add");
    EXPECT_NE(missing.find("SHAVE kernel 'int8_add': Halide: "), std::string::npos) << missing;

    Var x;
    ImageParam in(Halide::Int(16), 1, "in");
    Func wide("wide");
    wide(x) = in(x);
    EXPECT_EQ(compile_error(wide, {in}, "wide"),
              "SHAVE kernel 'wide': argument 'in' has type int16; kernel arguments are uint8, "
              "int8, float16, float32 or int32");
}

// ---- Multi-stage kernels --------------------------------------------------------------------

TEST(ShaveKernel, ReductionsAreComputedOncePerKernel) {
    auto cost = [](const std::vector<int64_t> &extents) {
        Pipeline p = row_normalize();
        return codegen::compile_shave_kernel("row_normalize", p.output, p.arguments(), kVectorBits,
                                             extents)
            .per_vector;
    };
    // An output of 32 x 4 x 2 (64 vectors of 4 floats). `total`, computed once at root over
    // its 4 x 2 points, vectorized along y: 2 vector stores to initialise, then per c and per
    // r of 37 a load, a gathered load of the input column, an add and a store. The output:
    // per vector a load, a divide (a special-function instruction), a store, and the total
    // broadcast from a scalar load.
    const ShaveKernelCost large = cost({32, 4, 2});
    EXPECT_DOUBLE_EQ(large.arith_ops, 2 * 37 / 64.0);
    EXPECT_DOUBLE_EQ(large.special_ops, 1);
    EXPECT_DOUBLE_EQ(large.cmx_bytes, (2 * 16 + 2 * 37 * 3 * 16 + 64 * (2 * 16 + 4)) / 64.0);
    // The same reduction serves an output of 4 x 4 x 2 (8 vectors): it weighs 8 times more
    // per vector. Inlined, it would be recomputed for every output element instead.
    const ShaveKernelCost small = cost({4, 4, 2});
    EXPECT_DOUBLE_EQ(small.arith_ops, 2 * 37 / 8.0);
    EXPECT_DOUBLE_EQ(small.special_ops, 1);
    EXPECT_DOUBLE_EQ(small.cmx_bytes, (2 * 16 + 2 * 37 * 3 * 16 + 8 * (2 * 16 + 4)) / 8.0);
}

TEST(ShaveKernel, ReductionAtRootMatchesJit) {
    Pipeline kernel_pipeline = row_normalize();
    const ShaveKernelBinary k = compile(kernel_pipeline, "row_normalize");

    auto in = random_buffer<float>(kW, kH, kC, 5, 0.5f);
    // Rows of positive values, so that no total is near 0.
    in.for_each_value([](float &v) { v = std::abs(v) + 1.0f; });
    Pipeline reference = row_normalize();
    reference.images[0].set(in);
    Buffer<float> expected = reference.output.realize({kW, kH, kC}, reference_target());

    // Every crop, along x too, reads whole input rows.
    Sandboxed own(blob_of({&k}));
    run_and_compare(own, 0, {{in.raw_buffer()}}, expected);
}

TEST(ShaveKernel, ShaveShareIsTheSimulatorsLargestSlice) {
    using V = std::vector<int64_t>;
    EXPECT_EQ(codegen::shave_share({16, 14, 7}, 2), (V{16, 14, 4}));
    EXPECT_EQ(codegen::shave_share({1000, 1, 1}, 2), (V{500, 1, 1}));
    EXPECT_EQ(codegen::shave_share({1001, 1, 1}, 2), (V{501, 1, 1}));
    EXPECT_EQ(codegen::shave_share({3, 1, 1}, 16), (V{1, 1, 1}));
    EXPECT_EQ(codegen::shave_share({1, 1, 1}, 2), (V{1, 1, 1}));
}

// ---- SHAVE layers through the lowering -----------------------------------------------------

// Compiles `graph` for vpu27, runs it and compares its output with the CPU reference
// bit-exactly. Returns the blob.
std::vector<uint8_t> compile_and_check(const dsl::Graph &graph) {
    return test::compile_and_check(graph, "vpu27").blob;
}

const dsl::Quant kProbability = dsl::Quant::per_tensor(1.0f / 256, 0);

TEST(ShaveLowering, SplitLoopsInsideATaskVectorizeAndUnroll) {
    const dsl::Layer in = dsl::Layer::input(activation("in", 32, 9, 10));
    // c in tasks of 16 channels, each again in tasks of 8: the kernel's c loop is cii.
    dsl::Layer by_8 = algorithms::sigmoid("by_8", in, kProbability);
    by_8.schedule()
        .on_shave()
        .split("c", "co", "ci", 16)
        .split("ci", "cio", "cii", 8)
        .vectorize("cii", 8);
    // A short loop from a split unrolled whole, another one vectorized with a tail.
    dsl::Layer rows = algorithms::sigmoid("rows", by_8, kProbability);
    rows.schedule()
        .on_shave()
        .split("y", "yo", "yi", 4)
        .split("x", "xo", "xi", 5)
        .unroll("yi")
        .vectorize("xi", 4)
        .vectorize("c", 16);
    // Distributed over the tiles, then split; the loop left inside the task unrolled.
    dsl::Layer tiles = algorithms::sigmoid("tiles", rows, kProbability);
    tiles.schedule()
        .on_shave()
        .distribute("y", 2, dsl::Strategy::SplitOverHeight)
        .split("y", "yo", "yi", 3)
        .unroll("yi")
        .unroll("c");
    // Two loops inside the task fused into one, then vectorized.
    dsl::Layer fused = algorithms::sigmoid("fused", tiles, kProbability);
    fused.schedule().on_shave().split("y", "yo", "yi", 2).fuse("c", "x", "cx").vectorize("cx", 16);
    // The loops inside the task in another order: y innermost, vectorized.
    dsl::Layer reordered = algorithms::sigmoid("reordered", fused, kProbability);
    reordered.schedule()
        .on_shave()
        .split("y", "yo", "yi", 5)
        .reorder({"yi", "c"})
        .vectorize("yi", 4);
    compile_and_check(dsl::Graph("split_loops", {reordered}));
}

// A reorder alone reaches the kernel too: its loops run in the schedule's order (the default
// vectorization then goes to the new innermost loop), with the same results.
TEST(ShaveLowering, AReorderAloneReachesTheKernel) {
    const dsl::Layer in = dsl::Layer::input(activation("in", 32, 9, 10));
    dsl::Layer plain = algorithms::sigmoid("plain", in, kProbability);
    plain.schedule().on_shave().split("y", "yo", "yi", 5);
    dsl::Layer turned = algorithms::sigmoid("turned", in, kProbability);
    turned.schedule().on_shave().split("y", "yo", "yi", 5).reorder({"yi", "c"});
    const std::vector<uint8_t> blob = compile_and_check(dsl::Graph("orders", {plain, turned}));
    std::vector<std::vector<uint8_t>> objects;
    for (const auto *kernel : *blob::GetBlob(blob.data())->kernels())
        objects.emplace_back(kernel->object()->begin(), kernel->object()->end());
    ASSERT_EQ(objects.size(), 2u);
    EXPECT_NE(objects[0], objects[1]);
}

TEST(ShaveLowering, VectorizeReachesTheKernel) {
    const dsl::Layer in = dsl::Layer::input(activation("in", 32, 9, 10));
    dsl::Layer narrow = algorithms::sigmoid("narrow", in, kProbability);
    narrow.schedule().on_shave().split("c", "co", "ci", 16).vectorize("ci", 4);
    dsl::Layer wide = algorithms::sigmoid("wide", narrow, kProbability);
    wide.schedule().on_shave().split("c", "co", "ci", 16);
    const std::vector<uint8_t> blob = compile_and_check(dsl::Graph("widths", {wide}));
    // The same arithmetic per element; 4 lanes of u8 take as many loads and stores per 16
    // lanes as 16 lanes do in one.
    EXPECT_GT(test::kernel_ops(blob, "narrow"), test::kernel_ops(blob, "wide"));
}

TEST(ShaveLowering, SoftmaxReductionsAreNotRecomputed) {
    const dsl::Layer in = dsl::Layer::input(activation("in", 1000, 1, 1));
    const dsl::Layer soft = algorithms::softmax("soft", in, dsl::dims::C, kProbability);
    const std::vector<uint8_t> blob = compile_and_check(dsl::Graph("softmax", {soft}));
    // Each of the two SHAVEs computes 500 outputs (32 vectors of 16) and, once, the max and
    // the sum over all 1000 channels: at least 2 * 1000 ops, counted over its 32 vectors.
    // Recomputed for every output element, they would cost over 16 * 2 * 1000 per vector.
    EXPECT_GT(test::kernel_ops(blob, "soft"), 2 * 1000 / 32.0f);
    EXPECT_LT(test::kernel_ops(blob, "soft"), 2000.0f);
}

TEST(ShaveLowering, SoftmaxSchedulesMatch) {
    const dsl::Layer in = dsl::Layer::input(activation("in", 40, 7, 6));
    dsl::Layer channels = algorithms::softmax("channels", in, dsl::dims::C, kProbability);
    channels.schedule().on_shave().split("y", "yo", "yi", 2).unroll("yi").vectorize("c", 8);
    dsl::Layer rows = algorithms::softmax("rows", channels, dsl::dims::H, kProbability);
    rows.schedule().on_shave().split("c", "co", "ci", 16).vectorize("ci", 16).unroll("x");
    compile_and_check(dsl::Graph("softmaxes", {rows}));

    const dsl::Layer half = dsl::Layer::input(activation("half", 24, 5, 3, dsl::ElemType::F16));
    const dsl::Layer width = algorithms::softmax("width", half, dsl::dims::W);
    compile_and_check(dsl::Graph("fp16", {width}));
}

TEST(ShaveLowering, UnsupportedLoopNamesLayerAndDirective) {
    // An algorithm over its own variables, not dsl::act_vars(): the kernel has no loop c.
    const dsl::Layer in = dsl::Layer::input(activation("in", 16, 4, 4));
    dsl::Algorithm own_vars = [](const std::vector<Func> &inputs) {
        Var ch("ch"), col("col"), row("row");
        Func out("own_vars");
        out(ch, col, row) = inputs.at(0)(ch, col, row);
        return out;
    };
    dsl::Layer odd = dsl::Layer::make("copy", activation("odd", 16, 4, 4), {in}, own_vars);
    odd.schedule().on_shave().split("c", "co", "ci", 8).vectorize("ci", 4);
    try {
        codegen::lower(dsl::Graph("g", {odd}), target::load_target("vpu27"));
        FAIL() << "compiled";
    } catch (const codegen::LoweringError &e) {
        const std::string what = e.what();
        EXPECT_EQ(what.rfind("layer 'odd': vectorize(ci, 4): Halide: ", 0), 0u) << what;
        EXPECT_NE(what.find("(loops inside a task, which SHAVE kernels vectorize, unroll and "
                            "fuse: ci, x, y)"),
                  std::string::npos)
            << what;
    }
}

} // namespace

namespace {

// A blob whose kernel says it reads its input 7 columns to the right of where it does (its
// hash recomputed to match, as a hostile author would): the verifier accepts a window there,
// and the kernel's own bounds check refuses the call. Native code can lie; it cannot read
// outside its windows.
TEST(ShaveKernel, AKernelThatLiesAboutItsReadsFailsItsOwnCheck) {
    auto kernel = codegen::to_blob_kernel(int8_add_kernel());
    ASSERT_EQ(kernel->args[0]->reads.size(), 3u);
    blob::ReadBound &x = kernel->args[0]->reads[0];
    x = blob::ReadBound(x.source(), x.scale(), x.divisor(), x.shift(), x.min_offset() + 7,
                        x.max_offset() + 7, x.min_lo(), x.min_hi(), x.max_lo(), x.max_hi());
    blob::BlobWriter w(target::load_target("vpu27"), "lying");
    blob::ShaveTaskT task;
    task.kernel = w.add_kernel(std::move(*kernel));
    auto buffer = [](uint64_t at, int32_t x_min) {
        auto arg = std::make_unique<blob::ShaveArgT>();
        arg->tensor = std::make_unique<blob::TensorRefT>(
            blob::dense(blob::cmx_at(0, at), blob::DType::I8, {16, 2, 2}));
        arg->mins = {x_min, 0, 0};
        return arg;
    };
    task.args.push_back(buffer(0, 7));
    task.args.push_back(buffer(1024, 0));
    task.args.push_back(buffer(2048, 0));
    w.add_shave(0, "add", std::move(task));
    const std::vector<uint8_t> bytes = w.finish();
    ASSERT_EQ(kernel_error(bytes), "");
    sim::Simulator simulator(target::load_target("vpu27"), bytes);
    try {
        simulator.run({});
        FAIL() << "the kernel read outside its window";
    } catch (const blob::BlobError &e) {
        EXPECT_EQ(std::string(e.what()), "task 'add': kernel 'int8_add' failed (status -4): "
                                         "Input buffer a: dimension 0 is read at 0..15, outside "
                                         "its window 7..22");
    }
}

// ---- The kernel cache on disk -----------------------------------------------------------------

namespace fs = std::filesystem;

fs::path fresh_cache_dir(const std::string &name) {
    const fs::path dir = fs::temp_directory_path() /
                         ("vpuc_kernel_cache_" + name + "_" + std::to_string(::getpid()));
    fs::remove_all(dir);
    return dir;
}

std::string file_bytes(const fs::path &path) {
    std::ifstream in(path, std::ios::binary);
    return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

void write_bytes(const fs::path &path, const std::string &bytes) {
    std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
}

void expect_same_kernel(const ShaveKernelBinary &a, const ShaveKernelBinary &b) {
    EXPECT_EQ(a.entry, b.entry);
    EXPECT_EQ(a.object, b.object);
    EXPECT_EQ(a.vector_lanes, b.vector_lanes);
    // Op counts are doubles the timing model reads: stored to the bit.
    EXPECT_EQ(a.per_vector.arith_ops, b.per_vector.arith_ops);
    EXPECT_EQ(a.per_vector.special_ops, b.per_vector.special_ops);
    EXPECT_EQ(a.per_vector.cmx_bytes, b.per_vector.cmx_bytes);
    ASSERT_EQ(a.args.size(), b.args.size());
    for (size_t i = 0; i < a.args.size(); ++i) {
        EXPECT_EQ(a.args[i].name, b.args[i].name);
        EXPECT_EQ(a.args[i].kind, b.args[i].kind);
        EXPECT_EQ(a.args[i].dtype, b.args[i].dtype);
        EXPECT_EQ(a.args[i].rank, b.args[i].rank);
        ASSERT_EQ(a.args[i].reads.size(), b.args[i].reads.size());
        for (size_t d = 0; d < a.args[i].reads.size(); ++d)
            EXPECT_EQ(
                0, std::memcmp(&a.args[i].reads[d], &b.args[i].reads[d], sizeof(blob::ReadBound)));
    }
}

TEST(KernelDiskCache, StoresAndReadsBackAKernelExactly) {
    // A blur reads a window (reads with offsets); its op counts are fractions.
    const ShaveKernelBinary kernel = compile(blur_x(), "cached_blur");
    ASSERT_FALSE(kernel.args.at(0).reads.empty());
    const fs::path dir = fresh_cache_dir("round_trip");
    ASSERT_EQ(codegen::detail::write_cached_kernel(dir.string(), "the key", kernel), "");
    const std::optional<ShaveKernelBinary> read =
        codegen::detail::read_cached_kernel(dir.string(), "the key");
    ASSERT_TRUE(read.has_value());
    expect_same_kernel(*read, kernel);
    EXPECT_FALSE(codegen::detail::read_cached_kernel(dir.string(), "another key").has_value());
    // Written again (another process compiling it too), it is replaced whole.
    ASSERT_EQ(codegen::detail::write_cached_kernel(dir.string(), "the key", kernel), "");
    EXPECT_EQ(std::distance(fs::directory_iterator(dir), fs::directory_iterator()), 1);
    fs::remove_all(dir);
}

// A cache file is untrusted: cut short, holding another key (a hash collision), or noise, it is
// a miss and never a wrong kernel nor a crash.
TEST(KernelDiskCache, ATruncatedForeignOrGarbageFileIsAMiss) {
    const ShaveKernelBinary kernel = compile(int8_add(), "cached_add");
    const fs::path dir = fresh_cache_dir("damaged");
    ASSERT_EQ(codegen::detail::write_cached_kernel(dir.string(), "key A", kernel), "");
    const fs::path file_a = codegen::detail::kernel_cache_file(dir.string(), "key A");
    const std::string whole = file_bytes(file_a);
    ASSERT_GT(whole.size(), kernel.object.size());
    const auto read_a = [&] { return codegen::detail::read_cached_kernel(dir.string(), "key A"); };
    for (size_t size = 0; size < whole.size(); size += size < 512 ? 1 : 61) {
        write_bytes(file_a, whole.substr(0, size));
        EXPECT_FALSE(read_a().has_value()) << "cut to " << size << " bytes";
    }
    write_bytes(file_a, whole + "x");
    EXPECT_FALSE(read_a().has_value()) << "a byte too many";

    // Key B's file under key A's name.
    ASSERT_EQ(codegen::detail::write_cached_kernel(dir.string(), "key B", kernel), "");
    write_bytes(file_a, file_bytes(codegen::detail::kernel_cache_file(dir.string(), "key B")));
    EXPECT_FALSE(read_a().has_value());

    // Any byte changed, the object's included: the file's checksum no longer holds.
    std::mt19937 random(7);
    for (int trial = 0; trial < 200; ++trial) {
        std::string damaged = whole;
        const size_t at = random() % damaged.size();
        damaged[at] = char(damaged[at] ^ (1 + random() % 255));
        write_bytes(file_a, damaged);
        EXPECT_FALSE(read_a().has_value()) << "byte " << at << " changed";
    }
    write_bytes(file_a, whole);
    EXPECT_TRUE(read_a().has_value());
    fs::remove_all(dir);
}

TEST(KernelDiskCache, TheKeyNamesTheCompilersSources) {
    // 64 hex digits of SHA-256, generated from codegen's sources at build time.
    const std::string digest = codegen::detail::codegen_source_digest();
    EXPECT_EQ(digest.size(), 64u);
    EXPECT_EQ(digest.find_first_not_of("0123456789abcdef"), std::string::npos);
}

} // namespace
