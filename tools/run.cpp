// `vpuc run`: simulate a blob. `vpuc demo`: build and run the bundled example.
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <iostream>
#include <random>
#include <stdexcept>

#include "algorithms/reference.h"
#include "codegen/lower.h"
#include "command.h"
#include "examples/conv_relu_shave.h"
#include "examples/small_net.h"
#include "run_report.h"
#include "vpu_target/verifier.h"

namespace vpuc::tools {

namespace {

// Minimal option parsing: "--name value" pairs and flags, in any order.
struct Options {
    std::vector<std::string> positional;
    std::vector<std::pair<std::string, std::string>> values;
    std::vector<std::string> flags;

    std::string get(const std::string &name, const std::string &fallback = "") const {
        for (const auto &[k, v] : values)
            if (k == name) return v;
        return fallback;
    }
    std::vector<std::string> all(const std::string &name) const {
        std::vector<std::string> out;
        for (const auto &[k, v] : values)
            if (k == name) out.push_back(v);
        return out;
    }
    bool has(const std::string &flag) const {
        for (const auto &f : flags)
            if (f == flag) return true;
        return false;
    }
};

Options parse(const std::vector<std::string> &args, const std::vector<std::string> &with_value,
              const std::vector<std::string> &known_flags) {
    Options o;
    for (size_t i = 0; i < args.size(); ++i) {
        const std::string &a = args[i];
        if (a.rfind("--", 0) != 0) {
            o.positional.push_back(a);
        } else if (std::find(with_value.begin(), with_value.end(), a) != with_value.end()) {
            if (i + 1 >= args.size()) throw std::runtime_error(a + " needs a value");
            o.values.emplace_back(a, args[++i]);
        } else if (std::find(known_flags.begin(), known_flags.end(), a) != known_flags.end()) {
            o.flags.push_back(a);
        } else {
            throw std::runtime_error("unknown option '" + a + "' (see --help)");
        }
    }
    return o;
}

std::vector<std::vector<uint8_t>> make_inputs(const blob::Blob &b, const Options &o) {
    std::vector<std::vector<uint8_t>> inputs;
    const auto *ios = b.header()->inputs();
    auto files = o.all("--input");
    size_t count = ios ? ios->size() : 0;
    if (!files.empty() && files.size() != count)
        throw std::runtime_error("the blob has " + std::to_string(count) + " inputs, " +
                                 std::to_string(files.size()) + " --input files were given");
    std::mt19937 rng(uint32_t(integer_option("--seed", o.get("--seed", "1"), 0, UINT32_MAX)));
    for (size_t i = 0; i < count; ++i) {
        const auto *io = ios->Get(uint32_t(i));
        if (!files.empty()) {
            inputs.push_back(blob::read_file(files[i]));
            if (inputs.back().size() != io->bytes())
                throw std::runtime_error("input '" + io->name()->str() + "' (" + files[i] +
                                         "): expected " + std::to_string(io->bytes()) +
                                         " bytes, the file has " +
                                         std::to_string(inputs.back().size()));
        } else {
            std::vector<uint8_t> data(io->bytes());
            for (auto &v : data) v = uint8_t(rng());
            inputs.push_back(std::move(data));
        }
    }
    return inputs;
}

int run_command(const std::vector<std::string> &args) {
    Options o = parse(args, {"--target", "--input", "--seed", "--trace", "--output-dir"},
                      {"--timing-only"});
    if (o.positional.size() != 1) throw std::runtime_error("expected one BLOB argument");
    auto bytes = blob::read_file(o.positional[0]);
    std::string target_name =
        o.get("--target", blob::verify_structure(bytes).header()->target()->str());
    sim::Simulator simulator(target::load_target(target_name), std::move(bytes));
    const bool timing_only = o.has("--timing-only");
    auto inputs =
        timing_only ? std::vector<std::vector<uint8_t>>{} : make_inputs(simulator.blob(), o);
    auto result =
        simulator.run(inputs, timing_only ? sim::Mode::TimingOnly : sim::Mode::Functional);
    print_run_report(simulator, result);
    std::string dir = o.get("--output-dir");
    if (!dir.empty() && !timing_only) {
        const auto *outs = simulator.blob().header()->outputs();
        for (uint32_t i = 0; i < result.outputs.size(); ++i) {
            std::string path = dir + "/" + outs->Get(i)->name()->str() + ".bin";
            blob::write_file(path, result.outputs[i]);
            std::printf("output '%s': %s\n", outs->Get(i)->name()->c_str(), path.c_str());
        }
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
    // The pass log and the dump go to stdout with the rest of the report, in order.
    codegen::LowerOptions options;
    options.dump_after = o.get("--dump-after");
    if (!options.dump_after.empty()) options.log = &std::cout;
    auto start = std::chrono::steady_clock::now();
    std::vector<uint8_t> blob = codegen::lower(net.graph, target, options);
    double ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    for (const auto &layer : net.graph.layers())
        std::printf("  %-6s %s\n", layer.name().c_str(), layer.schedule().to_string().c_str());
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
    Options o = parse(args, {"--target", "--seed", "--trace", "--blob", "--dump-after"},
                      {"--hand-built", "--list-passes"});
    if (!o.positional.empty()) throw std::runtime_error("demo takes no positional arguments");
    if (o.has("--list-passes")) {
        for (const std::string &pass : codegen::pass_names()) std::printf("%s\n", pass.c_str());
        return 0;
    }
    if (o.has("--hand-built") && !o.get("--dump-after").empty())
        throw std::runtime_error("--dump-after needs the compiled network; the --hand-built blob "
                                 "is not lowered");
    target::Target target = target::load_target(o.get("--target", "vpu27"));
    const auto seed = uint32_t(integer_option("--seed", o.get("--seed", "1"), 0, UINT32_MAX));
    return o.has("--hand-built") ? demo_hand_built(target, seed, o)
                                 : demo_compiled(target, seed, o);
}

const bool registered_run = register_command(
    {"run", "simulate a blob: latency, engine busy time, per-layer table, trace",
     "usage: vpuc run BLOB [options]\n\n"
     "Verifies BLOB, then runs it on the simulator and prints latency, per-engine busy time\n"
     "and a per-layer table.\n\n"
     "options:\n"
     "  --target T|FILE    target to run on (default: the one named in the blob)\n"
     "  --input FILE       raw bytes of an input, once per blob input, in order\n"
     "                     (default: random bytes from --seed)\n"
     "  --seed N           seed for random inputs (default 1)\n"
     "  --timing-only      skip functional execution (fast; no outputs)\n"
     "  --output-dir DIR   write each output's raw bytes to DIR/NAME.bin\n"
     "  --trace FILE       write a Chrome trace-event JSON (Perfetto) to FILE",
     run_command});

const bool registered_demo = register_command(
    {"demo", "compile and run the bundled example network, checked against its reference",
     "usage: vpuc demo [--target T] [--seed N] [--blob FILE] [--trace FILE]\n"
     "                 [--dump-after PASS] [--list-passes] [--hand-built]\n\n"
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
     "  --list-passes      print the lowering's passes, in order, and exit",
     demo_command});

} // namespace

} // namespace vpuc::tools
