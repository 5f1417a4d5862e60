// The vpuc command as a user runs it: the built executable, its output and exit status.
// Needs the vpuc target built (ctest after a full build).
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <nlohmann/json.hpp>
#include <random>
#include <sstream>
#include <string>

#include "algorithms/registry.h"
#include "bench/shave_layers.h"
#include "codegen/lower.h"
#include "dsl/graph_text.h"
#include "examples/small_net.h"
#include "frontend/tensor_file.h"
#include "vpu_target/blob_printer.h"
#include "vpu_target/blob_writer.h"

#include "run_command.h"

namespace {

namespace fs = std::filesystem;
namespace blob = vpuc::blob;

using Outcome = vpuc::tests::CommandRun;

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
    return vpuc::tests::run_command(vpuc().string() + " " + args);
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
    blob::BlobWriter w(vpuc::target::load_target("vpu27"), "racy");
    w.add_input("x", {64}, blob::DType::U8, blob::Layout::ND);
    w.add_dma(0, "a", blob::input_at(0), blob::cmx_at(0, 0), 64);
    w.add_dma(1, "b", blob::input_at(0), blob::cmx_at(0, 0), 64);
    const fs::path file = scratch() / "racy.vpub";
    blob::write_file(file.string(), w.finish());
    const Outcome run = vpuc_run("verify " + file.string());
    EXPECT_EQ(run.status, 1);
    EXPECT_EQ(run.output, file.string() +
                              ": invalid blob:\n"
                              "  data races: tasks touch the same bytes, one writing, and neither "
                              "waits for the other (a missing dependency; results would depend on "
                              "timing):\n"
                              "  'b' (DMA queue 1) writes CMX of tile 0+0..64, which 'a' (DMA "
                              "queue 0) writes, and neither waits for the other\n");
}

// The lowering's notes reach the user: the softmax, not a DPU operation, runs on the SHAVEs.
TEST_F(Cli, DemoPrintsTheLoweringNotes) {
    const Outcome run = demo("");
    EXPECT_EQ(run.status, 0) << run.output;
    const std::string note = "note: SHAVE kernel for layer 'prob': output: combines 2 reductions";
    const size_t at = run.output.find(note);
    EXPECT_NE(at, std::string::npos) << run.output;
    EXPECT_EQ(run.output.find(note, at + 1), std::string::npos) << "printed once";
    EXPECT_EQ(run.output.find("pass build_tasks done"), std::string::npos) << run.output;
}

TEST_F(Cli, DemoDumpsTheIrAfterAPass) {
    const Outcome run = demo("--dump-after build_tasks");
    EXPECT_EQ(run.status, 0) << run.output;
    // The pass log up to the pass, then the task program after it.
    EXPECT_NE(run.output.find("pass declare_tensors done\npass build_tasks done\n"
                              "IR after build_tasks:\nprogram small_net: "),
              std::string::npos)
        << run.output;
    EXPECT_NE(run.output.find("  task 0 "), std::string::npos) << run.output;
    EXPECT_NE(run.output.find("[SHAVE tile 0"), std::string::npos) << run.output;
    // The notes are in the pass log, each once, after the pass that made it.
    const std::string note = "pass select_engines done\nnote: SHAVE kernel for layer 'prob': ";
    const size_t at = run.output.find(note);
    EXPECT_NE(at, std::string::npos) << run.output;
    EXPECT_EQ(run.output.find("note: SHAVE kernel", at + note.size()), std::string::npos)
        << run.output;
    const std::string prefetch = "pass prefetch_weights done\nnote: prefetch_weights: ";
    const size_t prefetch_at = run.output.find(prefetch);
    EXPECT_NE(prefetch_at, std::string::npos) << run.output;
    EXPECT_EQ(run.output.find("note: prefetch_weights", prefetch_at + prefetch.size()),
              std::string::npos)
        << run.output;
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

// An ONNX model compiles to a blob that runs; what cannot be imported is a one-line error
// naming the file, the node and the op.
// test_operator_basic: five elementwise layers in a chain. Graph scheduling keeps the four
// intermediate ones in CMX on vpu27; --no-graph-scheduling leaves every default schedule alone.
TEST_F(Cli, CompileWithAndWithoutGraphScheduling) {
    const std::string model =
        "/usr/share/libonnx-testdata/data/pytorch-operator/test_operator_basic/model.onnx";
    const std::string blob = (scratch() / "basic.vpub").string();
    const Outcome on = vpuc_run("compile " + model + " -o " + blob + " --dump-after keep_in_cmx");
    ASSERT_EQ(on.status, 0) << on.output;
    EXPECT_NE(on.output.find("\n2: prefetch(1).store_in(CMX)\n"), std::string::npos) << on.output;
    EXPECT_NE(on.output.find("\n6: prefetch(1)\n"), std::string::npos) << on.output;
    const Outcome off = vpuc_run("compile " + model + " -o " + blob +
                                 " --dump-after keep_in_cmx --no-graph-scheduling");
    ASSERT_EQ(off.status, 0) << off.output;
    EXPECT_NE(off.output.find("\n2: prefetch(1)\n"), std::string::npos) << off.output;
    EXPECT_EQ(off.output.find("store_in(CMX)"), std::string::npos) << off.output;
}

TEST_F(Cli, CompileAnOnnxModel) {
    const std::string data = "/usr/share/libonnx-testdata/data/";
    const fs::path blob = scratch() / "conv.vpub";
    const Outcome compiled = vpuc_run("compile " + data +
                                      "pytorch-converted/test_Conv2d/model.onnx"
                                      " -o " +
                                      blob.string() + " --target vpu20");
    EXPECT_EQ(compiled.status, 0) << compiled.output;
    EXPECT_NE(compiled.output.find("note: upgraded from opset 6 to 13"), std::string::npos)
        << compiled.output;
    EXPECT_NE(compiled.output.find(blob.string() + ": 1 layers"), std::string::npos)
        << compiled.output;
    const Outcome run = vpuc_run("run " + blob.string());
    EXPECT_EQ(run.status, 0) << run.output;

    const Outcome unsupported =
        vpuc_run("compile " + data + "simple/test_sequence_model4/model.onnx -o " + blob.string());
    EXPECT_EQ(unsupported.status, 1);
    EXPECT_EQ(unsupported.output,
              "vpuc compile: error: " + data +
                  "simple/test_sequence_model4/model.onnx: node 'seq_1' (SequenceConstruct): op "
                  "SequenceConstruct is not supported (docs/onnx.md lists the supported ops)\n");
    const Outcome no_output = vpuc_run("compile " + data + "simple/test_sign_model/model.onnx");
    EXPECT_EQ(no_output.status, 1);
    EXPECT_NE(no_output.output.find("compile needs -o BLOB"), std::string::npos);
    const Outcome bad_shape = vpuc_run("compile x.onnx -o y --input-shape data=1x0");
    EXPECT_EQ(bad_shape.status, 1);
    EXPECT_NE(bad_shape.output.find("--input-shape needs an integer in 1.."), std::string::npos)
        << bad_shape.output;
}

// Processes share compiled SHAVE kernels through VPUC_KERNEL_CACHE_DIR. The cache changes
// compile time, never what a blob computes: a model compiled without it, into it, and from it
// gives the same bytes. A damaged cache file is compiled again and replaced.
TEST_F(Cli, TheKernelCacheOnDiskGivesTheSameBlob) {
    const std::string model =
        "/usr/share/libonnx-testdata/data/node/test_softmax_axis_1/model.onnx";
    const fs::path cache = scratch() / "kernel-cache";
    const auto compile = [&](const std::string &env, const std::string &blob) {
        const Outcome run = vpuc::tests::run_command(env + " " + vpuc().string() + " compile " +
                                                     model + " -o " + (scratch() / blob).string());
        EXPECT_EQ(run.status, 0) << run.output;
        EXPECT_EQ(run.output.find("warning"), std::string::npos) << run.output;
        std::ifstream in(scratch() / blob, std::ios::binary);
        return std::string(std::istreambuf_iterator<char>(in), {});
    };
    const auto cache_files = [&] {
        std::map<std::string, std::pair<ino_t, off_t>> files; // name -> inode, size
        for (const fs::directory_entry &entry : fs::directory_iterator(cache)) {
            struct stat status {};
            EXPECT_EQ(::stat(entry.path().c_str(), &status), 0);
            files[entry.path().filename().string()] = {status.st_ino, status.st_size};
        }
        return files;
    };
    const std::string with_cache = "VPUC_KERNEL_CACHE_DIR=" + cache.string();
    const std::string uncached = compile("env -u VPUC_KERNEL_CACHE_DIR", "uncached.vpub");
    ASSERT_FALSE(uncached.empty());
    EXPECT_EQ(compile(with_cache, "first.vpub"), uncached);
    const auto written = cache_files();
    ASSERT_EQ(written.size(), 1u); // one softmax kernel
    // Read, not compiled and written again (a write replaces the file: a new inode).
    EXPECT_EQ(compile(with_cache, "second.vpub"), uncached);
    EXPECT_EQ(cache_files(), written);

    const fs::path file = cache / written.begin()->first;
    fs::resize_file(file, fs::file_size(file) / 2);
    EXPECT_EQ(compile(with_cache, "damaged.vpub"), uncached);
    const auto rewritten = cache_files();
    ASSERT_EQ(rewritten.size(), 1u);
    EXPECT_EQ(rewritten.begin()->second.second, written.begin()->second.second);
}

TEST_F(Cli, ListPasses) {
    const Outcome run = vpuc_run("demo --list-passes");
    EXPECT_EQ(run.status, 0) << run.output;
    std::string expected;
    for (const std::string &name : vpuc::codegen::pass_names()) expected += name + "\n";
    EXPECT_EQ(run.output, expected);
}

TEST_F(Cli, LayersListsTheRegistry) {
    const Outcome run = vpuc_run("layers");
    EXPECT_EQ(run.status, 0) << run.output;
    for (const auto *def : vpuc::algorithms::layer_registry().all())
        EXPECT_NE(run.output.find(def->op + " "), std::string::npos) << def->op;
    const Outcome conv = vpuc_run("layers conv2d");
    EXPECT_EQ(conv.status, 0) << conv.output;
    EXPECT_NE(conv.output.find("weights            tensor  required"), std::string::npos)
        << conv.output;
    EXPECT_NE(conv.output.find("strides            ints    default [1,1]"), std::string::npos)
        << conv.output;
    EXPECT_NE(vpuc_run("layers softmax").output.find("may not split: C"), std::string::npos);
    expect_failure(vpuc_run("layers conv4d"), "no layer op 'conv4d' (registered: abs, acos,");
}

// docs/layers.md holds the table `vpuc layers --table` prints, so it lists every op with the
// types and engines the tests run.
TEST_F(Cli, LayersTableIsTheDocumented) {
    const Outcome run = vpuc_run("layers --table");
    EXPECT_EQ(run.status, 0) << run.output;
    EXPECT_NE(run.output.find("| conv2d | input | DPU: u8 i8 f16; SHAVE: f32 |"), std::string::npos)
        << run.output;
    std::ifstream doc(std::string(VPUC_SOURCE_DIR) + "/docs/layers.md");
    ASSERT_TRUE(doc) << "docs/layers.md";
    const std::string text((std::istreambuf_iterator<char>(doc)), std::istreambuf_iterator<char>());
    EXPECT_NE(text.find(run.output), std::string::npos)
        << "docs/layers.md does not hold the table `vpuc layers --table` prints; paste:\n"
        << run.output;
}

TEST_F(Cli, BenchLayersMeasuresEveryRegistryExample) {
    const Outcome run = vpuc_run("bench layers --registry --json");
    EXPECT_EQ(run.status, 0) << run.output;
    for (const auto *def : vpuc::algorithms::layer_registry().all()) {
        if (!def->example) continue; // runs at compile time only
        EXPECT_NE(run.output.find("\"op\": \"" + def->op + "\""), std::string::npos) << def->op;
    }
    EXPECT_EQ(run.output.find("\"error\""), std::string::npos) << run.output;
    expect_failure(vpuc_run("bench layers --registry --layer conv"), "it takes no --layer");
}

TEST_F(Cli, DemoPrintsItsGraph) {
    const Outcome run = vpuc_run("demo --print-graph");
    EXPECT_EQ(run.status, 0) << run.output;
    EXPECT_EQ(run.output, vpuc::dsl::print_graph(vpuc::examples::small_net(1).graph));
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
    EXPECT_NE(run.output.find("DDR 31.2 GB/s), timing model 3\n"), std::string::npos) << run.output;
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
    EXPECT_NE(json.output.find("\"timing_model_version\": 3"), std::string::npos) << json.output;
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

// ---- Bad input: every failure says what is wrong, names the file or option, and exits 1 --

namespace {

// A blob copying its 64-byte input to an output named `output_name`; with `valid` false the
// copy reads past the input, which the verifier rejects.
fs::path copy_blob(const std::string &file, const std::string &output_name, bool valid = true) {
    blob::BlobWriter w(vpuc::target::load_target("vpu27"), "copy");
    w.add_input("x", {64}, blob::DType::U8, blob::Layout::ND);
    w.add_output(output_name, {64}, blob::DType::U8, blob::Layout::ND);
    w.add_dma(0, "copy", blob::input_at(0, valid ? 0 : 32), blob::output_at(0), 64);
    const fs::path path = scratch() / file;
    blob::write_file(path.string(), w.finish());
    return path;
}

fs::path file_with(const std::string &name, const std::string &bytes) {
    const fs::path path = scratch() / name;
    std::ofstream(path, std::ios::binary) << bytes;
    return path;
}

// A group of commands without, or with an unknown, subcommand: status 2 and the subcommands.
void expect_subcommands_listed(const Outcome &run, const std::string &message) {
    EXPECT_EQ(run.status, 2) << run.output;
    EXPECT_NE(run.output.find(message), std::string::npos) << run.output;
    EXPECT_NE(run.output.find("  bench layers "), std::string::npos) << run.output;
    EXPECT_NE(run.output.find("  bench timing-model "), std::string::npos) << run.output;
}

} // namespace

// Every layer of `vpuc bench sandbox` runs, with its cost per task and the first run's start.
TEST_F(Cli, BenchSandboxMeasuresEveryLayer) {
    const Outcome run = vpuc_run("bench sandbox --runs 1");
    EXPECT_EQ(run.status, 0) << run.output;
    for (const char *expected :
         {"task us", "softmax 1000            int8", "softmax 1000            fp16",
          "sigmoid 40x40x48        fp16", "softmax 40x40x48        fp16",
          "sigmoid 112x112x64      fp16", "softmax 112x112x64      fp16",
          "the process's first run, which started the fork server: start "})
        EXPECT_NE(run.output.find(expected), std::string::npos) << expected << "\n" << run.output;
    EXPECT_EQ(run.output.find("error"), std::string::npos) << run.output;
    expect_failure(vpuc_run("bench sandbox --runs 0"),
                   "--runs needs an integer in 1..1000 (got '0')");
}

// `vpuc bench simulator` measures the DPU emulation on the layers asked for, under a header
// with the timing model's label; figures are the host's, so only their presence is checked.
TEST_F(Cli, BenchSimulatorMeasuresTheDpuEmulation) {
    const Outcome run = vpuc_run("bench simulator --layer conv3x3 --runs 1");
    EXPECT_EQ(run.status, 0) << run.output;
    for (const char *expected :
         {"vpuc bench simulator: functional DPU emulation on this host, one thread; vpu27, "
          "timing model ",
          "G work", "DPU ms", "G/s", "conv3x3 56x56x64->64     int8",
          "conv3x3 56x56x64->64     fp16"})
        EXPECT_NE(run.output.find(expected), std::string::npos) << expected << "\n" << run.output;
    EXPECT_EQ(run.output.find("conv1x1"), std::string::npos) << run.output;
    EXPECT_EQ(run.output.find("error"), std::string::npos) << run.output;
    const Outcome json = vpuc_run("bench simulator --layer add --runs 1 --json");
    EXPECT_EQ(json.status, 0) << json.output;
    EXPECT_NE(json.output.find("\"giga_per_second\": "), std::string::npos) << json.output;
    expect_failure(vpuc_run("bench simulator --runs 0"),
                   "--runs needs an integer in 1..1000 (got '0')");
    expect_failure(vpuc_run("bench simulator --layer conv2"),
                   "no layer's name starts with 'conv2' (layers: conv3x3 56x56x64->64, "
                   "conv1x1");
    expect_failure(vpuc_run("bench simulator extra"), "unexpected argument 'extra'");
}

TEST_F(Cli, BenchNeedsAKnownSubcommand) {
    expect_subcommands_listed(vpuc_run("bench"),
                              "vpuc: 'bench' needs a subcommand: layers, models, sandbox, "
                              "simulator, timing-model");
    expect_subcommands_listed(vpuc_run("bench foo"),
                              "vpuc: unknown command 'bench foo' (bench subcommands: layers, "
                              "models, sandbox, simulator, timing-model)");
    const Outcome help = vpuc_run("bench --help");
    EXPECT_EQ(help.status, 0) << help.output;
    EXPECT_NE(help.output.find("usage: vpuc bench SUBCOMMAND"), std::string::npos) << help.output;
}

// The SHAVE reference goes through the same command; it prices VPU_2_7 only.
TEST_F(Cli, BenchTimingModelComparesTheShaveModel) {
    const std::string csv =
        std::string(VPUC_SOURCE_DIR) + "/vpu_target/calibration/vpunn_shave_vpu27.csv";
    const Outcome run = vpuc_run("bench timing-model --reference " + csv);
    EXPECT_EQ(run.status, 0) << run.output;
    EXPECT_NE(run.output.find("fitted on abs, exp, log, sqrt:"), std::string::npos) << run.output;
    EXPECT_NE(run.output.find("\ncheck median relative error: "), std::string::npos) << run.output;
    expect_failure(vpuc_run("bench timing-model --target vpu20 --reference " + csv),
                   csv + ": VPUNN's SHAVE models are of VPU_2_7; target 'vpu20' is not modeled "
                         "on it (vpu27)");
}

// Every kernel of VPUNN's SHAVE file gets a row: the vpuc layer computing it, on one SHAVE
// against VPUNN's figure and on all four, or why there is none.
// One network of the zoo, both precisions: its latency, roofline and traffic as JSON.
TEST_F(Cli, BenchModelsMeasuresANetworkAgainstItsRoofline) {
    const Outcome run = vpuc_run("bench models --model mobilenet_v2 --target vpu27 --json");
    EXPECT_EQ(run.status, 0) << run.output;
    const size_t begin = run.output.find("{\n");
    ASSERT_NE(begin, std::string::npos) << run.output;
    const auto json = nlohmann::json::parse(run.output.substr(begin));
    ASSERT_EQ(json["runs"].size(), 2u) << run.output;
    for (const auto &r : json["runs"]) {
        const std::string what =
            r["model"].get<std::string>() + " " + r["dtype"].get<std::string>();
        ASSERT_FALSE(r.contains("error")) << what << ": " << r["error"];
        EXPECT_EQ(r["target"], "vpu27");
        const double latency = r["latency_us"], roofline = r["roofline_us"];
        EXPECT_GT(latency, roofline) << what;
        EXPECT_NEAR(r["fps"].get<double>(), 1e6 / latency, 1e-6 * r["fps"].get<double>());
        EXPECT_NEAR(r["roofline_share"].get<double>(), roofline / latency, 1e-9) << what;
        // MobileNet-V2 at batch 1 is bound by its weights' traffic.
        EXPECT_EQ(r["bound_by"], "DDR") << what;
        const auto &ddr = r["ddr_bytes"];
        EXPECT_GT(ddr["constants"].get<int64_t>(), 0) << what;
        EXPECT_GE(ddr["network_inputs"].get<int64_t>(), 3 * 224 * 224) << what;
        EXPECT_EQ(ddr["total"].get<int64_t>(), ddr["constants"].get<int64_t>() +
                                                   ddr["network_inputs"].get<int64_t>() +
                                                   ddr["activation_loads"].get<int64_t>() +
                                                   ddr["activation_stores"].get<int64_t>() +
                                                   ddr["network_outputs"].get<int64_t>());
        for (const char *busy : {"dpu_busy", "dma_busy"})
            EXPECT_TRUE(r[busy].get<double>() > 0 && r[busy].get<double>() <= 1) << what << busy;
        // The A/B: graph scheduling keeps tensors in CMX, so it moves fewer activations and
        // is faster.
        EXPECT_TRUE(r["graph_scheduling"].get<bool>()) << what;
        EXPECT_GT(r["latency_us_without_graph_scheduling"].get<double>(), latency) << what;
    }
    const Outcome off =
        vpuc_run("bench models --model mobilenet_v2 --target vpu27 --no-graph-scheduling");
    EXPECT_EQ(off.status, 0) << off.output;
    EXPECT_NE(off.output.find("graph scheduling off (gs us: on)"), std::string::npos) << off.output;
    expect_failure(vpuc_run("bench models --model resnet1000"), "resnet1000");
}

TEST_F(Cli, BenchLayersComparesTheShaveLayersWithVpunn) {
    const std::string csv =
        std::string(VPUC_SOURCE_DIR) + "/vpu_target/calibration/vpunn_shave_vpu27.csv";
    const std::string blobs = (scratch() / "shave_blobs").string();
    const Outcome run = vpuc_run("bench layers --json --shave " + csv + " --blob-dir " + blobs);
    EXPECT_EQ(run.status, 0) << run.output;
    // Each form's blobs, on one SHAVE and on all: the fp16 elu's kernel has its own counts.
    const Outcome inspect = vpuc_run("inspect " + blobs + "/elu_fp16_1shave.vpub");
    EXPECT_EQ(inspect.status, 0) << inspect.output;
    EXPECT_NE(inspect.output.find("per vector"), std::string::npos) << inspect.output;
    EXPECT_TRUE(std::filesystem::exists(blobs + "/elu.vpub"));
    // The output holds stderr's progress lines too, then the JSON document.
    const size_t begin = run.output.find("{\n");
    ASSERT_NE(begin, std::string::npos) << run.output;
    const auto json = nlohmann::json::parse(run.output.substr(begin));
    ASSERT_EQ(json["rows"].size(), vpuc::bench::shave_layer_specs().size());
    EXPECT_EQ(std::count_if(json["rows"].begin(), json["rows"].end(),
                            [](const auto &row) { return row.value("arithmetic", "") == "fp16"; }),
              5);
    for (const auto &row : json["rows"]) {
        const std::string kernel = row["vpunn_kernel"];
        ASSERT_TRUE(row.contains("vpunn_us")) << kernel;
        if (row["op"] == "") {
            EXPECT_EQ(row["error"], "no vpuc layer") << kernel;
        } else if (row.contains("error")) {
            // max and min run on the DPU (eltwise), not as SHAVE kernels.
            EXPECT_TRUE(kernel == "max" || kernel == "min") << kernel << ": " << row["error"];
        } else {
            EXPECT_EQ(row["shaves"], 4) << kernel;
            EXPECT_LT(row["one_shave_kernel_us"].get<double>(), row["one_shave_us"].get<double>())
                << kernel;
            EXPECT_GT(row["cmx_speedup"].get<double>(), 1) << kernel;
            EXPECT_LE(row["cmx_speedup"].get<double>(), 4.0 + 1e-9) << kernel;
            EXPECT_NEAR(row["ratio_to_vpunn"].get<double>(),
                        row["one_shave_kernel_us"].get<double>() / row["vpunn_us"].get<double>(),
                        1e-9)
                << kernel;
        }
    }
    expect_failure(vpuc_run("bench layers --registry --shave " + csv),
                   "--registry and --shave are two different runs; give one");
    expect_failure(vpuc_run("bench layers --shave " + csv + " --layer conv"),
                   "--shave measures layers of its own; it takes no --layer");
    expect_failure(vpuc_run("bench layers --target vpu20 --shave " + csv),
                   "VPUNN's SHAVE models are of VPU_2_7; target 'vpu20' is not modeled on it");
    const std::string dpu =
        std::string(VPUC_SOURCE_DIR) + "/vpu_target/calibration/vpunn_dpu_reference.csv";
    expect_failure(vpuc_run("bench layers --shave " + dpu), dpu + ": not VPUNN's SHAVE file");
}

TEST_F(Cli, FilesThatAreNotRegularAreNamed) {
    const std::string dir = scratch().string();
    expect_failure(vpuc_run("verify " + dir), "vpuc verify: error: blob file '" + dir +
                                                  "' is a directory, not a regular file");
    expect_failure(vpuc_run("inspect /dev/zero"),
                   "blob file '/dev/zero' is a character device, not a regular file");
    expect_failure(vpuc_run("verify /nonexistent"),
                   "cannot open blob file '/nonexistent': No such file or directory");
    expect_failure(vpuc_run("bench timing-model --reference " + dir),
                   "reference CSV file '" + dir + "' is a directory, not a regular file");
    expect_failure(vpuc_run("demo --target " + dir),
                   "target file '" + dir + "' is a directory, not a regular file");
}

TEST_F(Cli, SizeLimitsNameTheFileAndTheOption) {
    const fs::path blob = copy_blob("limited.vpub", "y");
    const std::string size = std::to_string(fs::file_size(blob));
    expect_failure(vpuc_run("verify --max-blob-size 1K " + blob.string()),
                   "blob file '" + blob.string() + "' is " + size +
                       " bytes, over the limit of 1 KiB for blob files (raise it with "
                       "--max-blob-size)");
    const Outcome raised = vpuc_run("verify --max-blob-size 1M " + blob.string());
    EXPECT_EQ(raised.status, 0) << raised.output;
    expect_failure(vpuc_run("verify --max-blob-size 4X " + blob.string()),
                   "--max-blob-size needs a size: a positive number of bytes, or of K, M or G "
                   "(KiB, MiB, GiB), e.g. 4G, at most 1024G (got '4X')");
    expect_failure(vpuc_run("bench timing-model --max-reference-size 0 --reference x.csv"),
                   "--max-reference-size needs a size");
}

TEST_F(Cli, OptionValuesMustBeGiven) {
    const fs::path blob = copy_blob("options.vpub", "y");
    expect_failure(vpuc_run("verify " + blob.string() + " --target ''"),
                   "vpuc verify: error: --target needs a value, got an empty one");
    expect_failure(vpuc_run("run " + blob.string() + " --seed"), "--seed needs a value");
    expect_failure(vpuc_run("run " + blob.string() + " --input --timing-only"),
                   "--input needs a value, got the option '--timing-only'");
    expect_failure(vpuc_run("bench layers --layer ''"), "--layer needs a value, got an empty one");
    expect_failure(vpuc_run("bench timing-model --reference ''"),
                   "--reference needs a value, got an empty one");
    expect_failure(vpuc_run("run " + blob.string() + " --seed 1 --seed 2"),
                   "--seed given more than once");
}

TEST_F(Cli, RunInputFilesAreNamedAndSized) {
    const fs::path blob = copy_blob("inputs.vpub", "y");
    expect_failure(vpuc_run("run " + blob.string() + " --input /nonexistent"),
                   "input 'x': cannot open input file '/nonexistent': No such file or directory");
    const fs::path small = file_with("small.bin", std::string(10, 'a'));
    expect_failure(vpuc_run("run " + blob.string() + " --input " + small.string()),
                   "input 'x': input file '" + small.string() + "' is 10 bytes, expected 64");
    const fs::path large = file_with("large.bin", std::string(100, 'a'));
    expect_failure(vpuc_run("run " + blob.string() + " --input " + large.string()),
                   "input 'x': input file '" + large.string() +
                       "' is 100 bytes, over the 64 bytes expected");
}

TEST_F(Cli, RunOutputDirMustExist) {
    const fs::path blob = copy_blob("outdir.vpub", "y");
    const fs::path missing = scratch() / "no_such_dir";
    expect_failure(vpuc_run("run " + blob.string() + " --output-dir " + missing.string()),
                   "--output-dir '" + missing.string() + "': no such directory");
    EXPECT_FALSE(fs::exists(missing));
    expect_failure(vpuc_run("run " + blob.string() + " --output-dir " + blob.string()),
                   "--output-dir '" + blob.string() + "': not a directory");
    expect_failure(
        vpuc_run("run " + blob.string() + " --timing-only --output-dir " + scratch().string()),
        "--output-dir has no use with --timing-only, which computes nothing");
}

// An output's name from the blob cannot lead its file out of --output-dir.
TEST_F(Cli, RunOutputFilesStayInTheDirectory) {
    const fs::path blob = copy_blob("escape.vpub", "../escape\n");
    const fs::path dir = scratch() / "outputs";
    fs::create_directories(dir);
    const fs::path input = file_with("input.bin", std::string(64, '\x07'));
    const Outcome run = vpuc_run("run " + blob.string() + " --input " + input.string() +
                                 " --output-dir " + dir.string());
    ASSERT_EQ(run.status, 0) << run.output;
    EXPECT_NE(run.output.find("output '../escape\\x0a': " + (dir / ".._escape_.bin").string()),
              std::string::npos)
        << run.output;
    EXPECT_EQ(fs::file_size(dir / ".._escape_.bin"), 64u);
    EXPECT_FALSE(fs::exists(scratch() / "escape\n.bin"));
}

TEST_F(Cli, TargetNumbersOutOfRangeAreReportedAsWritten) {
    std::ifstream in(std::string(VPUC_SOURCE_DIR) + "/vpu_target/targets/vpu27.json");
    std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    const std::string field = "\"bytes\": 536870912,";
    ASSERT_NE(text.find(field), std::string::npos);
    text.replace(text.find(field), field.size(), "\"bytes\": 9223372036854775808,");
    const fs::path target = file_with("huge_ddr.json", text);
    expect_failure(vpuc_run("demo --target " + target.string()),
                   target.string() +
                       ": ddr.bytes: must be in [1048576, 68719476736], got 9223372036854775808");
}

// Bytes from files are escaped in messages: a schedule read from a file, a CSV cell.
TEST_F(Cli, FileTextInMessagesIsEscaped) {
    const fs::path schedule = file_with("schedule.txt", "split(y, yo, yi, 8).\xff\x1b[2J\n");
    const Outcome bad_schedule =
        vpuc_run("bench layers --layer conv3x3 --schedule @" + schedule.string());
    expect_failure(bad_schedule, "schedule file '" + schedule.string() +
                                     "': schedule 'split(y, yo, yi, 8).\\xff\\x1b[2J\\x0a'");
    EXPECT_EQ(bad_schedule.output.find('\xff'), std::string::npos) << bad_schedule.output;
    EXPECT_EQ(bad_schedule.output.find('\x1b'), std::string::npos) << bad_schedule.output;

    const fs::path csv =
        file_with("reference.csv", "device,direction,bytes,num_planes,length,src_width,dst_width,"
                                   "src_stride,dst_stride,src_plane_stride,dst_plane_stride,"
                                   "cycles\n"
                                   "VPU\xc3\xa9,DDR2CMX,64,0,64,64,64,0,0,0,0,100\n");
    const Outcome bad_cell = vpuc_run("bench timing-model --reference " + csv.string());
    expect_failure(bad_cell, csv.string() + ":2: unknown device 'VPU\\xc3\\xa9'");
    EXPECT_EQ(bad_cell.output.find('\xc3'), std::string::npos) << bad_cell.output;

    // A schedule that reads but does not compile: the row's error quotes it, and JSON, which
    // must be UTF-8, still prints.
    const fs::path loop = file_with("loop.txt", "split(\xff, yo, yi, 8)");
    const Outcome table = vpuc_run("bench layers --layer conv3x3 --schedule @" + loop.string());
    expect_failure(table, "split(\\xff, yo, yi, 8): no loop '\\xff'");
    EXPECT_EQ(table.output.find('\xff'), std::string::npos) << table.output;
    expect_failure(vpuc_run("bench layers --json --layer conv3x3 --schedule @" + loop.string()),
                   "\"error\": \"compile: ");
}

TEST_F(Cli, ScheduleFromAFile) {
    const fs::path schedule =
        file_with("schedule.json", "[{\"directive\": \"split\", \"loops\": [\"y\", \"yo\", "
                                   "\"yi\"], \"factors\": [4, 52]}]\n");
    const Outcome run =
        vpuc_run("bench layers --json --layer conv3x3 --schedule @" + schedule.string());
    ASSERT_EQ(run.status, 0) << run.output;
    EXPECT_NE(run.output.find("\"schedule\": \"split(y, yo, yi, {4, 52})\""), std::string::npos)
        << run.output;
}

// A failure in one row still prints the table, and the exit status says it failed.
TEST_F(Cli, BenchLayersFailsWhenAScheduleDoesNotCompile) {
    const Outcome run = vpuc_run("bench layers --layer conv3x3 --schedule 'split(z, zo, zi, 8)'");
    EXPECT_EQ(run.status, 1) << run.output;
    EXPECT_NE(run.output.find("conv3x3 56x56x64->64     int8      2 error: "), std::string::npos)
        << run.output;
    EXPECT_NE(run.output.find("no loop 'z'"), std::string::npos) << run.output;
}

// inspect prints a blob the verifier rejects, with the verdict, and exits 1.
TEST_F(Cli, InspectFailsOnABlobThatFailsVerification) {
    const fs::path bad = copy_blob("bad.vpub", "y", false);
    const Outcome run = vpuc_run("inspect " + bad.string());
    EXPECT_EQ(run.status, 1) << run.output;
    EXPECT_NE(run.output.find("verification: FAILED"), std::string::npos) << run.output;
    EXPECT_NE(run.output.find("'copy'"), std::string::npos) << run.output;
    const Outcome json = vpuc_run("inspect --json " + bad.string());
    EXPECT_EQ(json.status, 1) << json.output;
    EXPECT_NE(json.output.find("\"ok\": false"), std::string::npos) << json.output;
    const Outcome good = vpuc_run("inspect " + copy_blob("good.vpub", "y").string());
    EXPECT_EQ(good.status, 0) << good.output;
}

// inspect prints what the blob printer of vpu_target prints, as text and as JSON.
TEST_F(Cli, InspectPrintsWhatTheBlobPrinterPrints) {
    const fs::path path = copy_blob("printed.vpub", "y");
    const std::vector<uint8_t> bytes = blob::read_file(path.string());
    std::ostringstream text, json;
    ASSERT_TRUE(blob::print_blob_text(text, path.string(), bytes));
    ASSERT_TRUE(blob::print_blob_json(json, path.string(), bytes));
    EXPECT_EQ(vpuc_run("inspect " + path.string()).output, text.str());
    EXPECT_EQ(vpuc_run("inspect --json " + path.string()).output, json.str());
}

// ---- vpuc compare: 0 when every tensor passes, 1 when one fails or is missing, 2 on an error --

namespace {

Halide::Buffer<> f32_values(const std::vector<float> &values) {
    Halide::Buffer<float> b(int(values.size()));
    std::copy(values.begin(), values.end(), b.data());
    return b;
}

std::string npz_with(const std::string &file,
                     const std::vector<vpuc::frontend::NamedTensor> &tensors) {
    const fs::path path = scratch() / file;
    vpuc::frontend::write_npz(path.string(), tensors);
    return path.string();
}

// The tensor files of the compare tests: A, and references that agree with it or not.
struct CompareFiles {
    std::string a, same, off, partial;
};

const CompareFiles &compare_files() {
    static const CompareFiles files = [] {
        Halide::Buffer<int32_t> n(2);
        n(0) = 7;
        n(1) = -7;
        const Halide::Buffer<> x = f32_values({1, 2, 3});
        CompareFiles f;
        f.a = npz_with("a.npz", {{"x", x}, {"n", n}});
        f.same = npz_with("same.npz", {{"extra", x}, {"n", n}, {"x", x}});
        f.off = npz_with("off.npz", {{"x", f32_values({1, 2, 3.5f})}, {"n", n}});
        f.partial = npz_with("partial.npz", {{"x", x}});
        return f;
    }();
    return files;
}

// An error: exit status 2 and one line on stderr.
void expect_compare_error(const Outcome &run, const std::string &message) {
    EXPECT_EQ(run.status, 2) << run.output;
    EXPECT_EQ(run.output, "vpuc compare: error: " + message + "\n");
}

} // namespace

TEST_F(Cli, ComparePassesWhenEveryTensorDoes) {
    const CompareFiles &f = compare_files();
    const Outcome run = vpuc_run("compare " + f.a + " " + f.same);
    EXPECT_EQ(run.status, 0) << run.output;
    EXPECT_NE(run.output.find("x       3                f32       1.000000  0          0          "
                              "pass\n"),
              std::string::npos)
        << run.output;
    EXPECT_NE(run.output.find("n       2                i32 "), std::string::npos) << run.output;
    EXPECT_NE(run.output.find("total: 2 compared, 2 pass, 0 fail; 1 of " + f.same + " not in " +
                              f.a + "\n"),
              std::string::npos)
        << run.output;
}

TEST_F(Cli, CompareFailsOnATensorOutOfTolerance) {
    const CompareFiles &f = compare_files();
    const Outcome run = vpuc_run("compare " + f.a + " " + f.off);
    EXPECT_EQ(run.status, 1) << run.output;
    EXPECT_NE(run.output.find("FAIL: 1 of 3 elements not within 0.01 + 0.01 * |reference|, the "
                              "first at [2]: 3 vs 3.5"),
              std::string::npos)
        << run.output;
    EXPECT_NE(run.output.find("total: 2 compared, 1 pass, 1 fails\n"), std::string::npos)
        << run.output;
    // Looser tolerances, or only the tensor that agrees, pass.
    EXPECT_EQ(vpuc_run("compare " + f.a + " " + f.off + " --atol 0.5 --cosine 0.9").status, 0);
    EXPECT_EQ(vpuc_run("compare " + f.a + " " + f.off + " --tensor n").status, 0);
    // --quiet prints the failures and the total only.
    const Outcome quiet = vpuc_run("compare --quiet " + f.a + " " + f.off);
    EXPECT_EQ(quiet.status, 1);
    EXPECT_EQ(quiet.output.find("pass\n"), std::string::npos) << quiet.output;
    EXPECT_NE(quiet.output.find("x       3 "), std::string::npos) << quiet.output;
}

TEST_F(Cli, CompareFailsOnATensorMissingInTheReference) {
    const CompareFiles &f = compare_files();
    const Outcome run = vpuc_run("compare " + f.a + " " + f.partial);
    EXPECT_EQ(run.status, 1) << run.output;
    EXPECT_NE(run.output.find("FAIL: not in " + f.partial), std::string::npos) << run.output;
    EXPECT_NE(run.output.find("total: 1 compared, 1 pass, 0 fail; 1 missing in " + f.partial),
              std::string::npos)
        << run.output;
}

// A .npy file holds one tensor named after the file; two .npy files compare whatever their
// names.
TEST_F(Cli, CompareReadsNpyFiles) {
    const CompareFiles &f = compare_files();
    const fs::path x = scratch() / "x.npy", other = scratch() / "other.npy";
    vpuc::frontend::write_npy(x.string(), f32_values({1, 2, 3}));
    vpuc::frontend::write_npy(other.string(), f32_values({1, 2, 3.001f}));
    EXPECT_EQ(vpuc_run("compare " + x.string() + " " + f.a).status, 0);
    EXPECT_EQ(vpuc_run("compare " + x.string() + " " + other.string()).status, 0);
    EXPECT_EQ(vpuc_run("compare " + other.string() + " " + f.a).status, 1); // 'other' not in A
}

TEST_F(Cli, CompareErrorsExitWithTwo) {
    const CompareFiles &f = compare_files();
    expect_compare_error(vpuc_run("compare " + f.a),
                         "compare takes two tensor files, A and B (see --help)");
    expect_compare_error(vpuc_run("compare " + f.a + " " + f.a + " --rtol -1"),
                         "--rtol needs a number in 0..1e+09 (got '-1')");
    expect_compare_error(vpuc_run("compare " + f.a + " " + f.a + " --tensor y"),
                         "--tensor y: " + f.a + " holds no such tensor");
    const std::string missing = (scratch() / "missing.npz").string();
    expect_compare_error(vpuc_run("compare " + f.a + " " + missing),
                         "cannot open .npy file '" + missing + "': No such file or directory");
    const std::string garbage = file_with("garbage.npz", "not a zip").string();
    expect_compare_error(vpuc_run("compare " + garbage + " " + f.a),
                         garbage + ": not a zip archive: Not a zip archive");
    const std::string text = file_with("values.txt", "1 2 3").string();
    expect_compare_error(vpuc_run("compare " + f.a + " " + text),
                         "'" + text +
                             "': not a tensor file: its name ends in neither .npy nor "
                             ".npz");
    expect_compare_error(vpuc_run("compare " + f.a + " " + f.a + " --max-npy-size 100"),
                         ".npy file '" + f.a + "' is " + std::to_string(fs::file_size(f.a)) +
                             " bytes, over the limit of 100 bytes for .npy files (raise it with "
                             "--max-npy-size)");
}

TEST_F(Cli, CompareHelpListsTheExitStatus) {
    const Outcome run = vpuc_run("compare --help");
    EXPECT_EQ(run.status, 0) << run.output;
    EXPECT_NE(run.output.find("exit status: 0 when every tensor compared passes; 1 when one fails "
                              "or a tensor of A\nis missing in B; 2 on a usage error"),
              std::string::npos)
        << run.output;
}

// A uint32 model: `vpuc reference -o` writes its output as u4, the model's type; `vpuc run -o`
// writes the blob's i32; `vpuc compare` finds them equal (integers of any width compare
// exactly). An input value i32 cannot hold is an error naming the input and the element.
TEST_F(Cli, ReferenceWritesOutputsInTheModelsType) {
    const std::string model = "/usr/share/libonnx-testdata/data/node/test_max_uint32/model.onnx";
    Halide::Buffer<uint32_t> a(3), b(3);
    a(0) = 3, a(1) = 2147483647u, a(2) = 1;
    b(0) = 1, b(1) = 4, b(2) = 4;
    const std::string inputs = npz_with("u32_in.npz", {{"data_0", a}, {"data_1", b}});
    const std::string expected = (scratch() / "u32_ref.npz").string();
    const Outcome reference =
        vpuc_run("reference " + model + " --input " + inputs + " -o " + expected);
    ASSERT_EQ(reference.status, 0) << reference.output;
    const std::vector<vpuc::frontend::NamedTensor> out = vpuc::frontend::read_npz(expected);
    ASSERT_EQ(out.size(), 1u);
    EXPECT_EQ(out[0].value.type(), Halide::UInt(32));
    const Halide::Buffer<uint32_t> result(out[0].value);
    EXPECT_EQ(result(0), 3u);
    EXPECT_EQ(result(1), 2147483647u);
    EXPECT_EQ(result(2), 4u);

    const std::string blob = (scratch() / "u32.vpub").string();
    ASSERT_EQ(vpuc_run("compile " + model + " -o " + blob + " --quiet").status, 0);
    const std::string ran = (scratch() / "u32_run.npz").string();
    ASSERT_EQ(vpuc_run("run " + blob + " --input " + inputs + " -o " + ran).status, 0);
    EXPECT_EQ(vpuc::frontend::read_npz(ran).at(0).value.type(), Halide::Int(32));
    const Outcome same = vpuc_run("compare " + ran + " " + expected + " --atol 0 --rtol 0");
    EXPECT_EQ(same.status, 0) << same.output;

    a(2) = 2147483648u;
    expect_failure(vpuc_run("run " + blob + " --input " +
                            npz_with("u32_big.npz", {{"data_0", a}, {"data_1", b}})),
                   "input 'data_0': element [2] is 2147483648, which is not exact in i32");
}

// ---- An ONNX model from compile to compare: run and reference on the same tensors agree ----

TEST_F(Cli, RunAndReferenceOfAnOnnxModelAgree) {
    const std::string model =
        "/usr/share/libonnx-testdata/data/pytorch-converted/test_Conv2d/model.onnx";
    const std::string blob = (scratch() / "conv2d.vpub").string();
    ASSERT_EQ(vpuc_run("compile " + model + " -o " + blob + " --quiet").status, 0);
    // Input '0' is 2x3x7x5 (numpy order): random real values.
    Halide::Buffer<float> x(5, 7, 3, 2);
    std::mt19937 rng(5);
    std::uniform_real_distribution<float> real(-2, 2);
    x.for_each_value([&](float &v) { v = real(rng); });
    const std::string inputs = npz_with("conv2d_in.npz", {{"0", x}});
    const std::string ran = (scratch() / "conv2d_run.npz").string();
    const std::string expected = (scratch() / "conv2d_ref.npz").string();
    const Outcome run = vpuc_run("run " + blob + " --input " + inputs + " -o " + ran);
    ASSERT_EQ(run.status, 0) << run.output;
    EXPECT_NE(run.output.find("latency"), std::string::npos) << run.output;
    const Outcome reference =
        vpuc_run("reference " + model + " --input " + inputs + " -o " + expected);
    ASSERT_EQ(reference.status, 0) << reference.output;
    // The fp16 convolution is bit-exact against its reference on the device's arithmetic.
    const Outcome same = vpuc_run("compare " + ran + " " + expected + " --atol 0 --rtol 0");
    EXPECT_EQ(same.status, 0) << same.output;
    EXPECT_NE(same.output.find("3 "), std::string::npos) << same.output; // the output '3'
    EXPECT_NE(same.output.find("total: 1 compared, 1 pass, 0 fail"), std::string::npos)
        << same.output;

    // Every layer's result in a directory, from the blob and from the reference, compared in
    // order.
    const std::string all = (scratch() / "conv2d_all.vpub").string();
    ASSERT_EQ(vpuc_run("compile " + model + " -o " + all + " --keep-all-layers --quiet").status, 0);
    const std::string run_dump = (scratch() / "conv2d_run").string();
    const std::string ref_dump = (scratch() / "conv2d_ref").string();
    ASSERT_EQ(vpuc_run("run " + all + " --input 0=" + inputs + " --dump-all " + run_dump).status,
              0);
    const Outcome dumped =
        vpuc_run("reference " + model + " --input 0=" + inputs + " --dump-all " + ref_dump);
    ASSERT_EQ(dumped.status, 0) << dumped.output;
    EXPECT_TRUE(fs::exists(ref_dump + "/index.txt"));
    const Outcome layers = vpuc_run("compare " + run_dump + " " + ref_dump + " --atol 0 --rtol 0");
    EXPECT_EQ(layers.status, 0) << layers.output;
    EXPECT_NE(layers.output.find("total: 1 compared, 1 pass"), std::string::npos) << layers.output;
    const Outcome parted =
        vpuc_run("compare " + ran + " " + npz_with("conv2d_off.npz", {{"3", x}}));
    EXPECT_EQ(parted.status, 1);
    EXPECT_NE(parted.output.find("first to fail, in "), std::string::npos) << parted.output;

    // Wrong tensors are errors that name the input.
    const std::string wrong = npz_with("conv2d_wrong.npz", {{"0", f32_values({1, 2})}});
    expect_failure(vpuc_run("run " + blob + " --input " + wrong),
                   "input '0': the tensor is 2, the input is 2x3x7x5");
    expect_failure(vpuc_run("run " + blob + " --input " + npz_with("conv2d_other.npz", {{"y", x}})),
                   "entry 'y' names no input");
}

// ---- vpuc profile and vpuc inspect --memory ----

TEST_F(Cli, ProfileAnOnnxModelAndItsBlob) {
    const std::string model =
        "/usr/share/libonnx-testdata/data/pytorch-converted/test_Conv2d/model.onnx";
    const Outcome profiled = vpuc_run("profile " + model + " --sort time");
    ASSERT_EQ(profiled.status, 0) << profiled.output;
    for (const char *expected : {"note: upgraded from opset 6 to 13", "latency: ", "DPU tile 0",
                                 "\nlayer  tasks", "\n3 "}) // the model's one node, '3'
        EXPECT_NE(profiled.output.find(expected), std::string::npos) << expected;

    const std::string blob = (scratch() / "profiled.vpub").string();
    ASSERT_EQ(vpuc_run("compile " + model + " -o " + blob + " --quiet").status, 0);
    const std::string trace = (scratch() / "profiled.trace.json").string();
    const Outcome json = vpuc_run("profile " + blob + " --json --trace " + trace);
    ASSERT_EQ(json.status, 0) << json.output;
    // The trace's note goes to stderr, in whatever order the pipe gets it.
    const size_t begin = json.output.find('{'), end = json.output.rfind('}');
    ASSERT_LT(begin, end) << json.output;
    const auto doc = nlohmann::json::parse(json.output.substr(begin, end + 1 - begin));
    EXPECT_GT(doc["latency_us"].get<double>(), 0);
    ASSERT_EQ(doc["layers"].size(), 1u);
    EXPECT_EQ(doc["layers"][0]["layer"], "3");
    EXPECT_TRUE(fs::exists(trace));

    // The timeline picture: a PNG 1650 pixels wide (its IHDR chunk), one row per engine.
    const std::string picture = (scratch() / "profiled.png").string();
    const Outcome drawn = vpuc_run("profile " + blob + " --timeline " + picture);
    ASSERT_EQ(drawn.status, 0) << drawn.output;
    EXPECT_NE(drawn.output.find("timeline: " + picture), std::string::npos) << drawn.output;
    const std::vector<uint8_t> bytes = blob::read_file(picture);
    const std::string png(bytes.begin(), bytes.end());
    ASSERT_GT(png.size(), 24u);
    EXPECT_EQ(png.substr(0, 8), std::string("\x89PNG\r\n\x1a\n", 8));
    EXPECT_EQ(png.substr(12, 4), "IHDR");
    EXPECT_EQ((uint8_t(png[18]) << 8) | uint8_t(png[19]), 1650);
    expect_failure(vpuc_run("profile " + blob + " --timeline " + picture + ".svg"),
                   "the picture is a PNG file");

    expect_failure(vpuc_run("profile " + blob + " --input-shape 0=1x3x7x5"),
                   "--input-shape applies to a model (MODEL.onnx)");
    expect_failure(vpuc_run("profile " + blob + " --sort size"),
                   "--sort 'size': expected start, time or busy");
}

TEST_F(Cli, InspectMemoryMapsCmxOverTime) {
    ASSERT_EQ(demo("").status, 0);
    const std::string blob = (scratch() / "demo.vpub").string();
    const Outcome text = vpuc_run("inspect " + blob + " --memory");
    ASSERT_EQ(text.status, 0) << text.output;
    for (const char *expected :
         {"memory over a timing-only run on vpu27", "CMX tile 0", "CMX tile 1", "peak bytes",
          "occupancy from 0 to", "live from us", "(conv1)"})
        EXPECT_NE(text.output.find(expected), std::string::npos) << expected << text.output;
    const Outcome json = vpuc_run("inspect --json --memory " + blob);
    ASSERT_EQ(json.status, 0) << json.output;
    const auto doc = nlohmann::json::parse(json.output);
    for (const auto &memory : doc["memories"]) {
        EXPECT_LE(memory["peak_bytes"].get<uint64_t>(), memory["capacity"].get<uint64_t>());
        for (const auto &b : memory["buffers"])
            EXPECT_LE(b["end"].get<uint64_t>(), memory["capacity"].get<uint64_t>());
    }
    expect_failure(vpuc_run("inspect --memory " + copy_blob("bad.vpub", "y", false).string()),
                   "vpuc inspect: error:");
}

TEST_F(Cli, Int8NeedsAPreQuantizedModel) {
    const std::string model =
        "/usr/share/libonnx-testdata/data/pytorch-converted/test_Conv2d/model.onnx";
    expect_failure(vpuc_run("compile " + model + " -o " + (scratch() / "q.vpub").string() +
                            " --precision int8"),
                   "calibration is not supported yet; give a pre-quantized (QDQ) model");
    expect_failure(vpuc_run("compile " + model + " -o x --precision int4"),
                   "--precision 'int4': fp16 or int8");
}
