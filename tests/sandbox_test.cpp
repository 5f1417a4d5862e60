// The SHAVE sandbox holds whatever a kernel does: a crash, an endless loop, a forbidden system
// call, code written into data, a stack or heap overflow each become a BlobError naming the
// task, the kernel and the signal, and the simulator goes on running blobs. The kernels are the
// hostile objects of hostile_kernels/hostile_kernels.c, which pass the verifier.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <fstream>
#include <iterator>

#include "vpu_target/blob_writer.h"
#include "vpu_target/simulator.h"
#include "vpu_target/verifier.h"

using namespace vpuc;

namespace {

const target::Target &vpu27() {
    static const target::Target target = target::load_target("vpu27");
    return target;
}

std::vector<uint8_t> hostile_object() {
    std::ifstream in(VPUC_HOSTILE_KERNELS, std::ios::binary);
    EXPECT_TRUE(in) << "missing " << VPUC_HOSTILE_KERNELS;
    return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// A blob whose one SHAVE task runs `entry` of the hostile object, writing 64 bytes of CMX.
std::vector<uint8_t> blob_running(const std::string &entry) {
    blob::BlobWriter w(vpu27(), entry);
    blob::KernelT kernel;
    kernel.name = entry;
    kernel.entry = entry + "_argv";
    kernel.object = hostile_object();
    auto out = std::make_unique<blob::KernelArgT>();
    out->name = "out";
    out->kind = blob::ArgKind::OutputBuffer;
    out->dtype = blob::DType::U8;
    out->rank = 1;
    kernel.args.push_back(std::move(out));
    kernel.vector_lanes = 16;
    kernel.arith_ops_per_vector = 1;
    kernel.cmx_bytes_per_vector = 32;
    blob::ShaveTaskT task;
    task.kernel = w.add_kernel(std::move(kernel));
    auto arg = std::make_unique<blob::ShaveArgT>();
    arg->tensor =
        std::make_unique<blob::TensorRefT>(blob::dense(blob::cmx_at(0, 0), blob::DType::U8, {64}));
    task.args.push_back(std::move(arg));
    w.add_shave(0, "shave", std::move(task));
    return w.finish();
}

// The error a functional run of the blob gives; "" when it runs.
std::string run_error(const std::string &entry, double time_limit_s = 10) {
    sim::Simulator simulator(vpu27(), blob_running(entry));
    sim::SandboxOptions options;
    options.task_time_limit_s = time_limit_s;
    simulator.set_sandbox_options(options);
    try {
        simulator.run({});
    } catch (const blob::BlobError &e) {
        return e.what();
    }
    return "";
}

std::string crashed(const std::string &entry, const std::string &how) {
    return "task 'shave': kernel '" + entry + "' did not finish: " + how;
}

const std::string kSegfault = "it crashed with SIGSEGV (Segmentation fault)";
const std::string kForbidden =
    "it made a system call the sandbox forbids (SIGSYS (Bad system call))";

TEST(Sandbox, HostileKernelsPassTheVerifier) {
    for (const char *entry : {"benign", "null_write", "open_file", "open_descriptors"})
        EXPECT_NO_THROW(blob::verify(blob_running(entry), vpu27())) << entry;
}

TEST(Sandbox, ABenignKernelRunsAndIsCounted) {
    sim::Simulator simulator(vpu27(), blob_running("benign"));
    const sim::RunResult result = simulator.run({});
    EXPECT_EQ(result.sandbox.tasks, 1u);
    EXPECT_GT(result.sandbox.start_ns, 0);
    EXPECT_GE(result.sandbox.blocked_ns, result.sandbox.start_ns);
}

TEST(Sandbox, CrashesAreReportedWithTheirSignal) {
    EXPECT_EQ(run_error("null_write"), crashed("null_write", kSegfault));
    EXPECT_EQ(run_error("stack_overflow"), crashed("stack_overflow", kSegfault));
    EXPECT_EQ(run_error("heap_overflow"), crashed("heap_overflow", kSegfault));
}

TEST(Sandbox, DataIsNotCode) {
    // Code written into writable memory does not run, and memory cannot be made executable.
    EXPECT_EQ(run_error("run_written_code"), crashed("run_written_code", kSegfault));
    EXPECT_EQ(run_error("make_executable"), crashed("make_executable", kForbidden));
}

TEST(Sandbox, SystemCallsBeyondTheWorkAreForbidden) {
    EXPECT_EQ(run_error("open_file"), crashed("open_file", kForbidden));
    EXPECT_EQ(run_error("parent_pid"), crashed("parent_pid", kForbidden));
}

TEST(Sandbox, AnEndlessKernelIsStoppedAtTheTimeLimit) {
    EXPECT_EQ(run_error("endless", 0.5),
              "task 'shave': kernel 'endless' ran longer than the time limit of 0.5 s and was "
              "stopped");
}

TEST(Sandbox, NoDescriptorOfTheSimulatorReachesTheKernel) {
    // A descriptor the simulator holds without close-on-exec, as a careless library might.
    const int leaked = ::open(VPUC_HOSTILE_KERNELS, O_RDONLY);
    ASSERT_GE(leaked, 0);
    EXPECT_EQ(run_error("open_descriptors"), "");
    ::close(leaked);
}

TEST(Sandbox, TheSimulatorGoesOnAfterAKernelCrashes) {
    sim::Simulator crashing(vpu27(), blob_running("null_write"));
    EXPECT_THROW(crashing.run({}), blob::BlobError);
    // The same simulator again (a new worker), then another blob.
    EXPECT_THROW(crashing.run({}), blob::BlobError);
    EXPECT_EQ(run_error("benign"), "");
}

} // namespace
