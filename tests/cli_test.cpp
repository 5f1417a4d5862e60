// The vpuc command as a user runs it: the built executable, its output and exit status.
// Needs the vpuc target built (ctest after a full build).
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <string>

#include "codegen/lower.h"
#include "vpu_target/blob_writer.h"

namespace {

namespace fs = std::filesystem;
namespace blob = vpuc::blob;

struct Outcome {
    int status = -1;    // exit status
    std::string output; // stdout and stderr
};

const fs::path &vpuc() {
    static const fs::path path = fs::path(VPUC_BINARY_DIR) / "tools" / "vpuc";
    return path;
}

// A directory of its own for the files a command writes.
const fs::path &scratch() {
    static const fs::path dir = [] {
        fs::path d = fs::temp_directory_path() / ("vpuc_cli_test_" + std::to_string(::getpid()));
        fs::create_directories(d);
        return d;
    }();
    return dir;
}

Outcome vpuc_run(const std::string &args) {
    Outcome run;
    const std::string command = vpuc().string() + " " + args + " 2>&1";
    FILE *pipe = ::popen(command.c_str(), "r");
    if (!pipe) return run;
    char buffer[4096];
    for (size_t n; (n = std::fread(buffer, 1, sizeof buffer, pipe)) > 0;)
        run.output.append(buffer, n);
    const int status = ::pclose(pipe);
    run.status = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    return run;
}

// `vpuc demo` writing its blob and trace to the scratch directory.
Outcome demo(const std::string &args) {
    return vpuc_run("demo --blob " + (scratch() / "demo.vpub").string() + " --trace " +
                    (scratch() / "demo.trace.json").string() + " " + args);
}

// The command failed (exit status 1) and said `message`.
void expect_failure(const Outcome &run, const std::string &message) {
    EXPECT_EQ(run.status, 1) << run.output;
    EXPECT_NE(run.output.find(message), std::string::npos) << run.output;
}

class Cli : public ::testing::Test {
  protected:
    void SetUp() override {
        if (!fs::exists(vpuc())) FAIL() << vpuc() << " is missing: build the vpuc target first";
    }
    static void TearDownTestSuite() { fs::remove_all(scratch()); }
};

TEST_F(Cli, VerifyReportsDataRaces) {
    blob::BlobWriter w("vpu27", "racy");
    w.add_input("x", {64}, blob::DType::U8, blob::Layout::ND);
    w.add_dma(0, "a", blob::input_at(0), blob::cmx_at(0, 0), 64);
    w.add_dma(1, "b", blob::input_at(0), blob::cmx_at(0, 0), 64);
    const fs::path file = scratch() / "racy.vpub";
    blob::write_file(file.string(), w.finish());
    const Outcome run = vpuc_run("verify " + file.string());
    EXPECT_EQ(run.status, 1);
    EXPECT_EQ(run.output, file.string() +
                              ": data races (tasks not ordered by barriers or queues):\n"
                              "  'b' (DMA queue 1) writes CMX of tile 0+0..64, which 'a' (DMA "
                              "queue 0) writes, and neither waits for the other\n");
}

TEST_F(Cli, DemoDumpsTheIrAfterAPass) {
    const Outcome run = demo("--dump-after build_tasks");
    EXPECT_EQ(run.status, 0) << run.output;
    // The pass log up to the pass, then the task program after it.
    EXPECT_NE(run.output.find("pass compile_shave_kernels done\npass build_tasks done\n"
                              "IR after build_tasks:\nprogram small_net: "),
              std::string::npos)
        << run.output;
    EXPECT_NE(run.output.find("  task 0 "), std::string::npos) << run.output;
    EXPECT_NE(run.output.find("[SHAVE tile 0"), std::string::npos) << run.output;
    // Only the pass asked for is dumped, and the demo still runs and checks its result.
    EXPECT_EQ(run.output.find("IR after allocate_cmx"), std::string::npos) << run.output;
    EXPECT_NE(run.output.find("match the reference bit-exactly"), std::string::npos) << run.output;
}

TEST_F(Cli, UnknownPassFailsListingThePasses) {
    const Outcome run = demo("--dump-after no_such_pass");
    EXPECT_EQ(run.status, 1) << run.output;
    std::string passes;
    for (const std::string &name : vpuc::codegen::pass_names())
        passes += (passes.empty() ? "" : ", ") + name;
    EXPECT_NE(run.output.find("vpuc demo: error: --dump-after no_such_pass: no such pass "
                              "(passes: " +
                              passes + ")"),
              std::string::npos)
        << run.output;
    EXPECT_EQ(run.output.find("IR after"), std::string::npos) << run.output;
}

TEST_F(Cli, ListPasses) {
    const Outcome run = vpuc_run("demo --list-passes");
    EXPECT_EQ(run.status, 0) << run.output;
    std::string expected;
    for (const std::string &name : vpuc::codegen::pass_names()) expected += name + "\n";
    EXPECT_EQ(run.output, expected);
}

TEST_F(Cli, DemoHelpDocumentsTheOptions) {
    const Outcome run = vpuc_run("demo --help");
    EXPECT_EQ(run.status, 0) << run.output;
    EXPECT_NE(run.output.find("--dump-after PASS"), std::string::npos) << run.output;
    EXPECT_NE(run.output.find("--list-passes"), std::string::npos) << run.output;
}

TEST_F(Cli, SeedMustBeAnUnsignedInteger) {
    expect_failure(demo("--seed abc"), "--seed needs an integer in 0..4294967295 (got 'abc')");
}

TEST_F(Cli, DumpAfterNeedsTheCompiledDemo) {
    expect_failure(demo("--hand-built --dump-after build_tasks"),
                   "--dump-after needs the compiled network");
}

} // namespace

// The benchmark table, with its blobs in a directory the command creates.
TEST_F(Cli, BenchLayersWritesBlobsToANewDirectory) {
    const fs::path dir = scratch() / "bench" / "blobs";
    const Outcome run = vpuc_run("bench layers --layer conv3x3 --blob-dir " + dir.string());
    ASSERT_EQ(run.status, 0) << run.output;
    EXPECT_NE(run.output.find("conv3x3 56x56x64->64"), std::string::npos) << run.output;
    EXPECT_TRUE(fs::exists(dir / "conv3x3_56x56x64_64_int8_2t.vpub"));
    const Outcome verify =
        vpuc_run("verify " + (dir / "conv3x3_56x56x64_64_int8_2t.vpub").string());
    EXPECT_EQ(verify.status, 0) << verify.output;
}

// A schedule of one's own, as printed or as JSON, for the layers --layer selects: no one-tile
// run and no speedup then.
TEST_F(Cli, BenchLayersRunsAGivenSchedule) {
    const std::string chain = "distribute(y, 2, SOH).split(y, yo, yi, {4, 8, 8, 8}).prefetch(1)";
    const Outcome run = vpuc_run("bench layers --layer conv3x3 --schedule '" + chain + "'");
    ASSERT_EQ(run.status, 0) << run.output;
    EXPECT_NE(run.output.find("schedule: " + chain), std::string::npos) << run.output;
    EXPECT_NE(run.output.find("conv3x3 56x56x64->64     int8      2"), std::string::npos)
        << run.output;
    EXPECT_EQ(run.output.find("conv1x1"), std::string::npos) << run.output;
    EXPECT_EQ(run.output.find("tiles over 1"), std::string::npos) << run.output;

    const Outcome json = vpuc_run(
        "bench layers --json --layer conv3x3 --schedule "
        "'[{\"directive\":\"split\",\"loops\":[\"y\",\"yo\",\"yi\"],\"factors\":[4,52]}]'");
    ASSERT_EQ(json.status, 0) << json.output;
    EXPECT_NE(json.output.find("\"schedule\": \"split(y, yo, yi, {4, 52})\""), std::string::npos)
        << json.output;
}

// Another height: the layer is named after its shape, and gets its own default schedule.
TEST_F(Cli, BenchLayersAtAnotherHeight) {
    const Outcome run = vpuc_run("bench layers --json --layer conv3x3 --height 36");
    ASSERT_EQ(run.status, 0) << run.output;
    EXPECT_NE(run.output.find("\"layer\": \"conv3x3 56x36x64->64\""), std::string::npos)
        << run.output;
    EXPECT_NE(run.output.find("split(y, yo, yi, {4, 12, 2})"), std::string::npos) << run.output;
    EXPECT_EQ(run.output.find("speedup_over_one_tile"), std::string::npos) << run.output;
    expect_failure(vpuc_run("bench layers --height 0"),
                   "--height needs an integer in 1..1048576 (got '0')");
}

TEST_F(Cli, BenchLayersRejectsUnknownLayersAndBadSchedules) {
    expect_failure(vpuc_run("bench layers --layer conv2"),
                   "no standard layer's name starts with 'conv2' (layers: conv3x3 56x56x64->64, "
                   "conv1x1");
    expect_failure(vpuc_run("bench layers --layer softmax --schedule 'split(y, yo, yi'"),
                   "expected ')' at the end");
}
