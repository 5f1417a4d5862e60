// `vpuc run`: simulate a blob. `vpuc demo`: build and run the bundled example.
#include <algorithm>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <random>
#include <stdexcept>

#include "algorithms/reference.h"
#include "codegen/lower.h"
#include "command.h"
#include "dsl/graph_text.h"
#include "examples/conv_relu_shave.h"
#include "examples/small_net.h"
#include "options.h"
#include "run_report.h"
#include "tensor_inputs.h"
#include "vpu_target/printable.h"
#include "vpu_target/verifier.h"

namespace vpuc::tools {

namespace {

// Files `vpuc run` reads besides its raw inputs, whose size the blob fixes.
const std::vector<files::FileKind> kRunReads = {files::FileKind::Blob, files::FileKind::Target,
                                                files::FileKind::Npy, files::FileKind::Image};
// Longer output names are cut in file names (NAME_MAX is 255).
constexpr size_t kMaxOutputNameChars = 200;

// The blob's inputs: tensors (.npy, .npz, images), or raw files each exactly the size of its
// input, or random bytes.
std::vector<std::vector<uint8_t>> make_inputs(const blob::Blob &b, const Options &o) {
    std::vector<std::vector<uint8_t>> inputs;
    const auto *ios = b.header()->inputs();
    std::vector<std::string> names;
    for (uint32_t i = 0; ios && i < ios->size(); ++i) names.push_back(ios->Get(i)->name()->str());
    if (tensor_inputs_given(o, names)) {
        std::vector<frontend::IoLayout> layouts;
        for (uint32_t i = 0; ios && i < ios->size(); ++i)
            layouts.push_back(frontend::io_layout(*ios->Get(i)));
        return frontend::blob_inputs(b, read_tensor_inputs(o, layouts));
    }
    auto files = o.all("--input");
    size_t count = ios ? ios->size() : 0;
    if (!files.empty() && files.size() != count)
        throw std::runtime_error("the blob has " + std::to_string(count) + " inputs, " +
                                 std::to_string(files.size()) + " --input files were given");
    std::mt19937 rng(uint32_t(integer_option("--seed", o.get("--seed", "1"), 0, UINT32_MAX)));
    for (size_t i = 0; i < count; ++i) {
        const auto *io = ios->Get(uint32_t(i));
        if (!files.empty()) {
            const std::string input = "input '" + printable(io->name()->string_view()) + "': ";
            try {
                inputs.push_back(
                    files::read_input_file(files[i], files::FileKind::RawInput, io->bytes()));
            } catch (const files::InputFileError &e) {
                throw std::runtime_error(input + e.what());
            }
            if (inputs.back().size() != io->bytes())
                throw std::runtime_error(input + "input file '" + files[i] + "' is " +
                                         std::to_string(inputs.back().size()) +
                                         " bytes, expected " + std::to_string(io->bytes()));
        } else {
            std::vector<uint8_t> data(io->bytes());
            for (auto &v : data) v = uint8_t(rng());
            inputs.push_back(std::move(data));
        }
    }
    return inputs;
}

// --output-dir must name an existing directory: a mistyped name fails before the run rather
// than after it, and nothing is created where the user did not ask.
void require_directory(const std::string &dir) {
    std::error_code error;
    const std::filesystem::file_status status = std::filesystem::status(dir, error);
    if (!std::filesystem::exists(status))
        throw std::runtime_error("--output-dir '" + dir + "': " +
                                 (error && error != std::errc::no_such_file_or_directory
                                      ? error.message()
                                      : "no such directory"));
    if (!std::filesystem::is_directory(status))
        throw std::runtime_error("--output-dir '" + dir + "': not a directory");
}

// The file an output goes to in DIR: NAME.bin with every character of the blob's name other
// than letters, digits, '.', '_' and '-' made '_', so that no name reaches outside DIR.
std::string output_file_name(const flatbuffers::String &name) {
    std::string file;
    for (char ch : name.string_view().substr(0, kMaxOutputNameChars))
        file += std::isalnum(static_cast<unsigned char>(ch)) || ch == '.' || ch == '_' || ch == '-'
                    ? ch
                    : '_';
    return file + ".bin";
}

void write_outputs(const blob::Blob &b, const sim::RunResult &result, const std::string &dir) {
    const auto *outs = b.header()->outputs();
    std::vector<std::string> written;
    for (uint32_t i = 0; i < result.outputs.size(); ++i) {
        const std::string name = printable(outs->Get(i)->name()->string_view());
        const std::string path = dir + "/" + output_file_name(*outs->Get(i)->name());
        if (std::find(written.begin(), written.end(), path) != written.end())
            throw std::runtime_error("output '" + name + "': " + path +
                                     " is already another output's file");
        std::ofstream out(path, std::ios::binary);
        out.write(reinterpret_cast<const char *>(result.outputs[i].data()),
                  std::streamsize(result.outputs[i].size()));
        if (!out)
            throw std::runtime_error("output '" + name + "': cannot write '" + path +
                                     "': " + std::strerror(errno));
        written.push_back(path);
        std::printf("output '%s': %s\n", name.c_str(), path.c_str());
    }
}

int run_command(const std::vector<std::string> &args) {
    std::vector<std::string> with_value = {
        "--target",  "--input", "--seed", "--trace", "--output-dir", "-o", "--kernel-time-limit",
        "--dump-all"};
    with_value.insert(with_value.end(), kImageOptions.begin(), kImageOptions.end());
    Options o = parse_options(args, with_value, {"--timing-only", kImageFlags[0]}, kRunReads);
    if (o.positional.size() != 1) throw std::runtime_error("expected one BLOB argument");
    const bool timing_only = o.has("--timing-only");
    for (const char *option : {"--input", "--output-dir", "-o", "--dump-all"})
        if (timing_only && !o.all(option).empty())
            throw std::runtime_error(std::string(option) +
                                     " has no use with --timing-only, which computes nothing");
    const std::string dir = o.get("--output-dir");
    if (!dir.empty()) require_directory(dir);
    auto bytes = blob::read_file(o.positional[0]);
    target::Target target = blob_target(blob::verify_structure(bytes), o.get("--target"));
    sim::Simulator simulator(std::move(target), std::move(bytes));
    sim::SandboxOptions sandbox;
    sandbox.task_time_limit_s =
        real_option("--kernel-time-limit", o.get("--kernel-time-limit", "10"), 0.001, 3600);
    simulator.set_sandbox_options(sandbox);
    auto inputs =
        timing_only ? std::vector<std::vector<uint8_t>>{} : make_inputs(simulator.blob(), o);
    auto result =
        simulator.run(inputs, timing_only ? sim::Mode::TimingOnly : sim::Mode::Functional);
    print_run_report(simulator, result);
    if (!dir.empty()) write_outputs(simulator.blob(), result, dir);
    if (!o.get("-o").empty()) {
        frontend::write_npz(o.get("-o"), frontend::blob_outputs(simulator.blob(), result.outputs));
        std::printf("outputs: %s\n", o.get("-o").c_str());
    }
    if (!o.get("--dump-all").empty()) {
        frontend::write_tensor_dir(o.get("--dump-all"),
                                   frontend::blob_outputs(simulator.blob(), result.outputs));
        std::printf("outputs: %s/\n", o.get("--dump-all").c_str());
    }
    if (!o.get("--trace").empty()) write_trace(result, o.positional[0], o.get("--trace"));
    return 0;
}

// The result bytes against the reference; prints the verdict and returns the exit code.
int compare(const std::vector<uint8_t> &got, const std::vector<uint8_t> &want) {
    size_t mismatches = 0;
    for (size_t i = 0; i < want.size(); ++i) mismatches += got.at(i) != want[i];
    if (mismatches) {
        std::printf("\nFAIL: %zu of %zu output bytes differ from the reference\n", mismatches,
                    want.size());
        return 1;
    }
    std::printf("\nresult: all %zu output bytes match the reference bit-exactly\n", want.size());
    return 0;
}

std::vector<uint8_t> bytes_of(const Halide::Buffer<> &b) {
    const auto *p = static_cast<const uint8_t *>(b.raw_buffer()->host);
    return std::vector<uint8_t>(p, p + b.size_in_bytes());
}

int demo_compiled(const target::Target &target, uint32_t seed, const Options &o) {
    examples::SmallNet net = examples::small_net(seed);
    std::printf("compiling small_net for %s with default schedules: conv 3x3 + ReLU -> max "
                "pool -> conv 1x1 -> softmax\n",
                target.name.c_str());
    // The pass log and the dump, or else the lowering's notes alone, go to stdout with the
    // rest of the report, in order.
    codegen::LowerOptions options;
    options.dump_after = o.get("--dump-after");
    (options.dump_after.empty() ? options.notes : options.log) = &std::cout;
    std::map<std::string, dsl::Schedule> schedules;
    options.schedules = &schedules;
    auto start = std::chrono::steady_clock::now();
    std::vector<uint8_t> blob = codegen::lower(net.graph, target, options);
    double ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    for (const auto &layer : net.graph.layers())
        std::printf("  %-6s %s\n", layer.name().c_str(),
                    schedules.at(layer.name()).to_string().c_str());
    std::string blob_path = o.get("--blob", "demo.vpub");
    blob::write_file(blob_path, blob);
    std::printf("blob: %s (%zu bytes, compiled in %.0f ms)\n\n", blob_path.c_str(), blob.size(),
                ms);
    sim::Simulator simulator(target, blob);
    std::vector<std::vector<uint8_t>> inputs;
    for (const auto &b : net.inputs) inputs.push_back(bytes_of(b));
    auto result = simulator.run(inputs);
    print_run_report(simulator, result);
    write_trace(result, "vpuc demo (" + target.name + ")", o.get("--trace", "demo.trace.json"));
    auto expected = algorithms::run_reference(net.graph, net.inputs);
    return compare(result.outputs.at(0), bytes_of(expected.at(0)));
}

int demo_hand_built(const target::Target &target, uint32_t seed, const Options &o) {
    std::printf("building a blob by hand for %s: on each of %d tiles, DMA in -> DPU 3x3 conv "
                "+ ReLU (int8) -> SHAVE kernel -> DMA out\n",
                target.name.c_str(), target.tiles);
    auto example = examples::conv_relu_shave(target, seed);
    std::string blob_path = o.get("--blob", "demo.vpub");
    blob::write_file(blob_path, example.bytes);
    std::printf("blob: %s (%zu bytes)\n\n", blob_path.c_str(), example.bytes.size());
    sim::Simulator simulator(target, example.bytes);
    auto result = simulator.run(example.inputs);
    print_run_report(simulator, result);
    write_trace(result, "vpuc demo (" + target.name + ")", o.get("--trace", "demo.trace.json"));
    return compare(result.outputs.at(0), example.expected.at(0));
}

int demo_command(const std::vector<std::string> &args) {
    Options o = parse_options(args, {"--target", "--seed", "--trace", "--blob", "--dump-after"},
                              {"--hand-built", "--list-passes", "--print-graph"},
                              {files::FileKind::Target});
    if (!o.positional.empty()) throw std::runtime_error("demo takes no positional arguments");
    if (o.has("--list-passes")) {
        for (const std::string &pass : codegen::pass_names()) std::printf("%s\n", pass.c_str());
        return 0;
    }
    const auto seed = uint32_t(integer_option("--seed", o.get("--seed", "1"), 0, UINT32_MAX));
    if (o.has("--print-graph")) {
        std::fputs(dsl::print_graph(examples::small_net(seed).graph).c_str(), stdout);
        return 0;
    }
    if (o.has("--hand-built") && !o.get("--dump-after").empty())
        throw std::runtime_error("--dump-after needs the compiled network; the --hand-built blob "
                                 "is not lowered");
    target::Target target = target::load_target(o.get("--target", "vpu27"));
    return o.has("--hand-built") ? demo_hand_built(target, seed, o)
                                 : demo_compiled(target, seed, o);
}

const bool registered_run = register_command(
    {"run", "simulate a blob: latency, engine busy time, per-layer table, trace",
     "usage: vpuc run BLOB [options]\n\n"
     "Verifies BLOB, then runs it on the simulator and prints latency, per-engine busy time\n"
     "and a per-layer table.\n\n"
     "options:\n"
     "  --target T|FILE    check that the blob was compiled for this target (a bundled\n"
     "                     name or a target file); by default it runs on the target\n"
     "                     description it carries\n"
     "  --input FILE       raw bytes of an input, once per blob input, in order, each file\n"
     "                     exactly the input's size (default: random bytes from --seed)\n" +
         std::string(kTensorInputHelp) +
         "  --seed N           seed for random inputs (default 1)\n"
         "  -o FILE.npz        write the outputs, named as the blob names them, to an .npz\n"
         "  --dump-all DIR     write every output as DIR/NAME.npy, with DIR/index.txt listing\n"
         "                     them in order; a blob compiled with --keep-all-layers has every\n"
         "                     layer's result among its outputs (compare it with the\n"
         "                     directory `vpuc reference --dump-all` writes)\n"
         "  --timing-only      skip functional execution (fast; no outputs; not with --input,\n"
         "                     -o, --dump-all or --output-dir)\n"
         "  --output-dir DIR   write each output's raw bytes to DIR/NAME.bin; DIR must exist,\n"
         "                     and characters of NAME other than letters, digits, '.', '_'\n"
         "                     and '-' become '_'\n"
         "  --trace FILE       write a Chrome trace-event JSON (Perfetto) to FILE\n"
         "  --kernel-time-limit S\n"
         "                     stop a SHAVE kernel that runs longer than S seconds of wall\n"
         "                     clock (default 10); kernels run in a sandboxed worker process\n"
         "                     (docs/RELIABILITY.md), and one that crashes, hangs or makes a\n"
         "                     forbidden system call is reported with its task and signal\n" +
         size_options_help(kRunReads) +
         "\n\nexit status: 0 when the run completes; 1 on an error (an invalid blob, a wrong "
         "input);\n3 when a SHAVE kernel fails in its sandbox (the blob's native code, which no\n"
         "verifier can check: the message names the task, the kernel and the signal)",
     run_command});

const bool registered_demo = register_command(
    {"demo", "compile and run the bundled example network, checked against its reference",
     "usage: vpuc demo [--target T] [--seed N] [--blob FILE] [--trace FILE]\n"
     "                 [--dump-after PASS] [--list-passes] [--print-graph] [--hand-built]\n\n"
     "Compiles a small network written with the DSL (conv 3x3 + ReLU -> max pool -> conv 1x1\n"
     "-> softmax) with default schedules, writes the blob to FILE (default demo.vpub), runs\n"
     "it and compares the result with the Halide CPU reference.\n\n"
     "options:\n"
     "  --hand-built       run the blob built by hand instead (DMA -> DPU conv + ReLU ->\n"
     "                     SHAVE kernel -> DMA on every tile, against its integer reference)\n"
     "  --target T|FILE    target (default vpu27)\n"
     "  --seed N           data seed (default 1)\n"
     "  --blob FILE        where to write the blob (default demo.vpub)\n"
     "  --trace FILE       where to write the trace (default demo.trace.json)\n"
     "  --dump-after PASS  print the lowering's pass log and the IR after PASS (an unknown\n"
     "                     pass is an error that lists them)\n"
     "  --list-passes      print the lowering's passes, in order, and exit\n"
     "  --print-graph      print the network in the graph text form (dsl/graph_text.h:\n"
     "                     one line per layer with its op, tensors and attributes) and exit\n" +
         size_options_help({files::FileKind::Target}),
     demo_command});

} // namespace

} // namespace vpuc::tools
