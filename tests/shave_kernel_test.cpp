// SHAVE kernels end to end: Halide pipeline -> object in a blob -> linked with the allow-list
// -> called on halide_buffer_t's, compared bit-exactly with the same algorithm run by Halide's
// JIT. Kernels are compiled once per test binary (Halide compilation is the slow part).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>

#include "codegen/shave_kernel.h"
#include "vpu_target/shave_linker.h"

using namespace vpuc;
using codegen::ShaveKernelBinary;
using Halide::Buffer;
using Halide::Expr;
using Halide::Func;
using Halide::ImageParam;
using Halide::Var;

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

// ---- Blobs ---------------------------------------------------------------------------------

std::vector<uint8_t> make_blob(std::vector<std::unique_ptr<blob::KernelT>> kernels) {
    blob::BlobT b;
    b.header = std::make_unique<blob::HeaderT>();
    b.header->version = std::make_unique<blob::VersionT>();
    b.header->version->major = blob::kVersionMajor;
    b.header->version->minor = blob::kVersionMinor;
    b.header->target = "vpu27";
    b.kernels = std::move(kernels);
    flatbuffers::FlatBufferBuilder builder;
    blob::FinishBlobBuffer(builder, blob::Blob::Pack(builder, &b));
    return {builder.GetBufferPointer(), builder.GetBufferPointer() + builder.GetSize()};
}

std::vector<uint8_t> blob_of(const std::vector<const ShaveKernelBinary *> &kernels) {
    std::vector<std::unique_ptr<blob::KernelT>> out;
    for (const ShaveKernelBinary *k : kernels) out.push_back(codegen::to_blob_kernel(*k));
    return make_blob(std::move(out));
}

// The blob of the kernels that run, linked once: index 0 int8_add, 1 sigmoid_f32,
// 2 sigmoid_f16, 3 blur_x.
const sim::LinkedKernels &linked() {
    static const std::vector<uint8_t> bytes = blob_of(
        {&int8_add_kernel(), &sigmoid_f32_kernel(), &sigmoid_f16_kernel(), &blur_x_kernel()});
    static const std::unique_ptr<sim::LinkedKernels> kernels =
        sim::LinkedKernels::link(*blob::GetBlob(bytes.data()));
    return *kernels;
}

std::string link_error(const std::vector<uint8_t> &bytes) {
    try {
        sim::LinkedKernels::link(*blob::GetBlob(bytes.data()));
    } catch (const blob::BlobError &e) {
        return e.what();
    }
    return "(linked)";
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

// Runs a kernel on the whole output, then again as two SHAVEs on the two halves of dimension
// `split`; both must equal the reference.
template <typename T>
void run_and_compare(sim::KernelEntry entry, std::vector<void *> inputs,
                     const Buffer<T> &reference) {
    Buffer<T> whole(kW, kH, kC);
    std::vector<void *> argv = inputs;
    argv.push_back(whole.raw_buffer());
    ASSERT_EQ(entry(argv.data()), 0);
    expect_equal(reference, whole);

    for (int split = 0; split < 3; ++split) {
        SCOPED_TRACE("split across two SHAVEs along dimension " + std::to_string(split));
        Buffer<T> halves(kW, kH, kC);
        halves.fill(T(0));
        const int extent = halves.dim(split).extent(), first = extent / 2;
        for (Halide::Runtime::Buffer<T> crop :
             {halves.get()->cropped(split, 0, first),
              halves.get()->cropped(split, first, extent - first)}) {
            argv.back() = crop.raw_buffer();
            ASSERT_EQ(entry(argv.data()), 0);
        }
        expect_equal(reference, halves);
    }
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
    // Two loads, one saturating add, one store.
    EXPECT_FLOAT_EQ(add.ops_per_vector, 4);

    EXPECT_EQ(sigmoid_f32_kernel().vector_lanes, 4u);
    EXPECT_EQ(sigmoid_f16_kernel().vector_lanes, 8u);
    EXPECT_GT(sigmoid_f32_kernel().ops_per_vector, add.ops_per_vector + 10);
    // fp16 stores 8 lanes per vector but computes in fp32, two vectors of 4.
    EXPECT_GT(sigmoid_f16_kernel().ops_per_vector, sigmoid_f32_kernel().ops_per_vector);
    // The producer (load, multiply, store) and the consumer (2 loads, add, store).
    EXPECT_FLOAT_EQ(blur_x_kernel().ops_per_vector, 7);
    // Initialisation (store), then 8 times (2 loads, add, store).
    EXPECT_FLOAT_EQ(compile(row_sum(), "row_sum").ops_per_vector, 33);
}

TEST(ShaveKernel, Int8AddMatchesJit) {
    auto a = random_buffer<int8_t>(kW, kH, kC, 1, 1.0f);
    auto b = random_buffer<int8_t>(kW, kH, kC, 2, 1.0f);
    Pipeline reference = int8_add();
    reference.images[0].set(a);
    reference.images[1].set(b);
    Buffer<int8_t> expected = reference.output.realize({kW, kH, kC}, reference_target());

    ASSERT_EQ(linked().size(), 4u);
    run_and_compare(linked().entry(0), {a.raw_buffer(), b.raw_buffer()}, expected);
}

template <typename T> void check_sigmoid(uint32_t kernel_index, Halide::Type type) {
    auto in = random_buffer<T>(kW, kH, kC, 3, 1.0f / 16);
    float gain = 1.5f;
    Pipeline reference = sigmoid(type, "reference");
    reference.images[0].set(in);
    reference.scalars[0].set(gain);
    Buffer<T> expected = reference.output.realize({kW, kH, kC}, reference_target());

    run_and_compare(linked().entry(kernel_index), {in.raw_buffer(), &gain}, expected);
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

    run_and_compare(linked().entry(3), {in.raw_buffer()}, expected);
}

TEST(ShaveKernel, ForbiddenSymbolIsRefused) {
    // Compiling works: the allow-list is enforced where native code enters the simulator.
    const ShaveKernelBinary bad = compile(calls_system(), "calls_system");
    const std::string error = link_error(blob_of({&int8_add_kernel(), &bad}));
    EXPECT_NE(error.find("kernel 'calls_system': references symbol 'system', which is not in "
                         "the SHAVE allow-list (allowed: halide_malloc, "),
              std::string::npos)
        << error;
}

TEST(ShaveKernel, GarbageObjectIsRefused) {
    auto garbage = codegen::to_blob_kernel(int8_add_kernel());
    garbage->name = "garbage";
    const std::string text = "this is not an object file";
    garbage->object.assign(text.begin(), text.end());
    std::vector<std::unique_ptr<blob::KernelT>> kernels;
    kernels.push_back(std::move(garbage));
    const std::string error = link_error(make_blob(std::move(kernels)));
    EXPECT_NE(error.find("kernel 'garbage': object is not a valid ELF object"), std::string::npos)
        << error;
}

TEST(ShaveKernel, TruncatedObjectIsRefused) {
    auto truncated = codegen::to_blob_kernel(int8_add_kernel());
    truncated->object.resize(truncated->object.size() / 2);
    std::vector<std::unique_ptr<blob::KernelT>> kernels;
    kernels.push_back(std::move(truncated));
    const std::string error = link_error(make_blob(std::move(kernels)));
    EXPECT_NE(error.find("kernel 'int8_add': object is malformed: section table: "),
              std::string::npos)
        << error;
}

TEST(ShaveKernel, CorruptObjectsNeverCrashTheLinker) {
    // A few bytes of a valid object overwritten, many times over: each object links or is
    // refused with a BlobError. (The linked ones are never run: their code may be corrupt.)
    uint32_t state = 7;
    auto next = [&] { return (state = state * 1664525u + 1013904223u) >> 8; };
    int refused = 0;
    for (int i = 0; i < 300; ++i) {
        auto corrupt = codegen::to_blob_kernel(sigmoid_f32_kernel());
        for (uint32_t n = 1 + next() % 4; n > 0; --n)
            corrupt->object[next() % corrupt->object.size()] = uint8_t(next());
        std::vector<std::unique_ptr<blob::KernelT>> kernels;
        kernels.push_back(std::move(corrupt));
        if (link_error(make_blob(std::move(kernels))) != "(linked)") ++refused;
    }
    EXPECT_GT(refused, 50);
}

TEST(ShaveKernel, MissingEntryIsRefused) {
    auto wrong_entry = codegen::to_blob_kernel(int8_add_kernel());
    wrong_entry->entry = "int8_add_main";
    std::vector<std::unique_ptr<blob::KernelT>> kernels;
    kernels.push_back(std::move(wrong_entry));
    const std::string error = link_error(make_blob(std::move(kernels)));
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

TEST(ShaveKernel, AllowList) {
    const auto &allowed = sim::LinkedKernels::allowed_symbols();
    for (const char *name : {"halide_malloc", "halide_free", "memcpy", "tanhf"})
        EXPECT_NE(std::find(allowed.begin(), allowed.end(), name), allowed.end()) << name;
    for (const char *name : {"system", "getenv", "dlopen", "halide_do_par_for"})
        EXPECT_EQ(std::find(allowed.begin(), allowed.end(), name), allowed.end()) << name;
}

} // namespace
