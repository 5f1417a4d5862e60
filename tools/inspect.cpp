// `vpuc verify`: check a blob against a target (the checks of docs/blob.md).
// `vpuc inspect`: print what a blob holds, as text for people or as JSON for scripts
// (vpu_target/blob_printer.h), or, with --memory, its memory map over a run
// (vpu_target/memory_map.h).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <iostream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <stdexcept>

#include "command.h"
#include "options.h"
#include "vpu_target/blob_printer.h"
#include "vpu_target/memory_map.h"
#include "vpu_target/printable.h"
#include "vpu_target/verifier.h"

namespace vpuc::tools {

namespace {

using blob::Blob;

template <typename T> uint32_t size_of(const flatbuffers::Vector<T> *v) {
    return v ? v->size() : 0;
}

uint64_t task_count(const Blob &b) {
    uint64_t n = 0;
    for (uint32_t q = 0; q < size_of(b.queues()); ++q) n += b.queues()->Get(q)->tasks()->size();
    return n;
}

const std::vector<files::FileKind> kVerifyReads = {files::FileKind::Blob, files::FileKind::Target};
const std::vector<files::FileKind> kInspectReads = {files::FileKind::Blob};

// The memory map's analysis, like the verifier's, may do work in proportion to the blob's
// size, so that no blob makes it run without end.
constexpr uint64_t kMemoryMapBudgetPerByte = 64;
constexpr uint64_t kMemoryMapBudgetFloor = uint64_t(1) << 24;
// Columns of the occupancy timeline, and its characters for no bytes live, then for up to
// each ninth of the capacity.
constexpr int kTimelineColumns = 60;
constexpr char kOccupancyLevels[] = " .:-=+*#%@";

// The BLOB argument and the options.
struct Args {
    std::string blob;
    std::string target;
    bool json = false;
    bool memory = false;
};

Args parse(const std::vector<std::string> &argv, bool takes_target,
           const std::vector<std::string> &flags, const std::vector<files::FileKind> &reads) {
    const Options o = parse_options(
        argv, takes_target ? std::vector<std::string>{"--target"} : std::vector<std::string>{},
        flags, reads);
    if (o.positional.empty()) throw std::runtime_error("expected a BLOB argument (see --help)");
    if (o.positional.size() > 1)
        throw std::runtime_error("expected one BLOB argument, got '" + o.positional[0] + "' and '" +
                                 o.positional[1] + "'");
    return {o.positional[0], o.get("--target"), o.has("--json"), o.has("--memory")};
}

int verify_command(const std::vector<std::string> &argv) {
    Args args = parse(argv, true, {}, kVerifyReads);
    std::vector<uint8_t> bytes = blob::read_file(args.blob);
    try {
        target::Target target = blob_target(blob::verify_structure(bytes), args.target);
        const Blob &b = blob::verify(bytes, target);
        std::printf("%s: ok (%llu tasks, %u barriers, target %s)\n", args.blob.c_str(),
                    static_cast<unsigned long long>(task_count(b)), size_of(b.barriers()),
                    printable(target.name).c_str());
        return 0;
    } catch (const blob::BlobError &e) {
        std::fprintf(stderr, "%s: invalid blob:\n", args.blob.c_str());
        std::istringstream in(e.what());
        for (std::string line; std::getline(in, line);)
            std::fprintf(stderr, "  %s\n", line.c_str());
        return 1;
    }
}

// Per column of the timeline over [0, latency), the most bytes live in its time.
std::vector<uint64_t> timeline_columns(const sim::MemoryUse &use, double latency_ns) {
    std::vector<uint64_t> columns(kTimelineColumns, 0);
    const auto &steps = use.occupancy;
    for (size_t i = 0; i < steps.size() && latency_ns > 0; ++i) {
        const double end_ns = i + 1 < steps.size() ? steps[i + 1].first : latency_ns;
        if (steps[i].second == 0 || end_ns <= steps[i].first) continue;
        const int first = int(steps[i].first / latency_ns * kTimelineColumns);
        // A step ending on a column's start leaves that column out.
        const int last = int(std::ceil(end_ns / latency_ns * kTimelineColumns)) - 1;
        for (int c = std::max(first, 0); c <= std::min(last, kTimelineColumns - 1); ++c)
            columns[size_t(c)] = std::max(columns[size_t(c)], steps[i].second);
    }
    return columns;
}

std::string timeline(const sim::MemoryUse &use, double latency_ns) {
    std::string line;
    for (uint64_t live : timeline_columns(use, latency_ns)) {
        const int levels = int(sizeof kOccupancyLevels) - 2; // the characters after ' '
        const int level =
            live == 0 ? 0
                      : std::clamp(int(std::ceil(double(live) / double(use.capacity) * levels)), 1,
                                   levels);
        line += live > use.capacity ? '!' : kOccupancyLevels[level];
    }
    return line;
}

void print_memory_map(const std::string &path, const target::Target &target,
                      const sim::MemoryMap &map) {
    std::printf("%s: memory over a timing-only run on %s, latency %.3f us\n", path.c_str(),
                printable(target.name).c_str(), map.latency_ns / 1000.0);
    std::printf("\n%-12s %12s %12s %7s %13s %8s\n", "memory", "peak bytes", "capacity", "peak %",
                "peak at us", "buffers");
    for (const sim::MemoryUse &use : map.memories)
        std::printf("%-12s %12llu %12llu %6.1f%% %13.3f %8zu\n", use.name.c_str(),
                    static_cast<unsigned long long>(use.peak_bytes),
                    static_cast<unsigned long long>(use.capacity),
                    use.capacity ? 100.0 * double(use.peak_bytes) / double(use.capacity) : 0.0,
                    use.peak_at_ns / 1000.0, use.buffers.size());
    std::printf("\noccupancy from 0 to %.3f us, %d columns, each the most bytes live in its time "
                "against the capacity ('%s': none, then up to each ninth; '!': over):\n",
                map.latency_ns / 1000.0, kTimelineColumns, kOccupancyLevels);
    for (const sim::MemoryUse &use : map.memories)
        std::printf("%-12s |%s|\n", use.name.c_str(), timeline(use, map.latency_ns).c_str());
    std::printf("\n%-12s %-23s %10s %12s %12s  %s\n", "memory", "offsets", "bytes", "live from us",
                "live to us", "writer (layer)");
    for (const sim::MemoryUse &use : map.memories)
        for (const sim::MemoryBuffer &b : use.buffers) {
            const std::string offsets = std::to_string(b.begin) + ".." + std::to_string(b.end);
            const std::string writer = "'" + printable(b.writer) + "'" +
                                       (b.layer.empty() ? "" : " (" + printable(b.layer) + ")");
            std::printf("%-12s %-23s %10llu %12.3f %12.3f  %s\n", use.name.c_str(), offsets.c_str(),
                        static_cast<unsigned long long>(b.bytes), b.live_from_ns / 1000.0,
                        b.live_to_ns / 1000.0, writer.c_str());
        }
}

std::string memory_map_json(const std::string &path, const target::Target &target,
                            const sim::MemoryMap &map) {
    using nlohmann::json;
    json memories = json::array();
    for (const sim::MemoryUse &use : map.memories) {
        json occupancy = json::array(), buffers = json::array();
        for (const auto &[time_ns, bytes] : use.occupancy)
            occupancy.push_back({time_ns / 1000.0, bytes});
        for (const sim::MemoryBuffer &b : use.buffers)
            buffers.push_back({{"begin", b.begin},
                               {"end", b.end},
                               {"bytes", b.bytes},
                               {"writer", b.writer},
                               {"layer", b.layer},
                               {"queue", b.queue},
                               {"position", b.position},
                               {"live_from_us", b.live_from_ns / 1000.0},
                               {"live_to_us", b.live_to_ns / 1000.0}});
        memories.push_back({{"memory", use.name},
                            {"capacity", use.capacity},
                            {"peak_bytes", use.peak_bytes},
                            {"peak_at_us", use.peak_at_ns / 1000.0},
                            {"occupancy_us_bytes", occupancy},
                            {"buffers", buffers}});
    }
    const json doc = {{"blob", path},
                      {"target", target.name},
                      {"latency_us", map.latency_ns / 1000.0},
                      {"memories", memories}};
    // Names come from the blob: invalid UTF-8 is replaced rather than thrown on.
    return doc.dump(1, ' ', false, json::error_handler_t::replace) + "\n";
}

// The blob verified against the target it carries, run timing only, and its memory map.
int inspect_memory(const Args &args, std::vector<uint8_t> bytes) {
    const uint64_t budget = kMemoryMapBudgetPerByte * bytes.size() + kMemoryMapBudgetFloor;
    target::Target target = blob_target(blob::verify_structure(bytes), "");
    sim::Simulator simulator(std::move(target), std::move(bytes));
    const sim::RunResult run = simulator.run({}, sim::Mode::TimingOnly);
    const sim::MemoryMap map =
        sim::memory_map(simulator.blob(), simulator.target(), run.tasks, budget);
    if (args.json)
        std::fputs(memory_map_json(args.blob, simulator.target(), map).c_str(), stdout);
    else
        print_memory_map(args.blob, simulator.target(), map);
    return 0;
}

int inspect_command(const std::vector<std::string> &argv) {
    Args args = parse(argv, false, {"--json", "--memory"}, kInspectReads);
    std::vector<uint8_t> bytes = blob::read_file(args.blob);
    if (args.memory) return inspect_memory(args, std::move(bytes));
    const bool verified = args.json ? blob::print_blob_json(std::cout, args.blob, bytes)
                                    : blob::print_blob_text(std::cout, args.blob, bytes);
    return verified ? 0 : 1;
}

const bool registered_verify = register_command(
    {"verify", "check a blob against its target (structure, memory, barriers, deadlock, races)",
     "usage: vpuc verify BLOB [--target NAME|FILE]\n\n"
     "Checks BLOB the way the simulator does before running it: the FlatBuffers structure,\n"
     "format version, every address inside its memory, DPU/DMA/SHAVE task parameters against\n"
     "the target, barrier counts, no deadlock, physical barriers reused only after release\n"
     "(docs/blob.md lists every check). Then looks for data races: two tasks touching the\n"
     "same bytes, one writing, with neither ordered before the other (the simulator would\n"
     "run such a blob, with results that depend on timing).\n\n"
     "  --target NAME|FILE  also check that the blob was compiled for this target (a\n"
     "                      bundled name such as vpu27, or a target file); by default the\n"
     "                      blob is checked against the target description it carries\n" +
         size_options_help(kVerifyReads) +
         "\n\n"
         "Prints 'BLOB: ok (N tasks, M barriers, target T)', or every problem found (one per\n"
         "line, naming the task and field; races naming both tasks and the memory) on stderr\n"
         "and exits with status 1.",
     verify_command});

const bool registered_inspect = register_command(
    {"inspect", "print a blob's contents: I/O, sections, kernels, barriers, task queues",
     "usage: vpuc inspect BLOB [--json] [--memory]\n\n"
     "Prints the header (format, target, network), whether the blob passes verification\n"
     "against its target (and the problems if not), the I/O tensors with shape, dtype,\n"
     "layout and quantization, section sizes, SHAVE kernels with their argument contracts,\n"
     "barriers with physical ids and counts, then every queue with its tasks: name, wait and\n"
     "update barriers, and a one-line description of the DMA, DPU or SHAVE work. Exits with\n"
     "status 1 when the blob fails verification, after printing what it holds.\n\n"
     "  --json    print the same as one JSON document (every field of every task)\n"
     "  --memory  print the memory map instead: the blob, verified, runs timing only, and\n"
     "            each task's writes to CMX and DDR scratch become buffers, live from the\n"
     "            writer's start to the end of the last task reading them before they are\n"
     "            overwritten. Per memory: the peak bytes live and when, against the\n"
     "            capacity, and an occupancy timeline; then every buffer with its offsets,\n"
     "            bytes, lifetime, writer task and layer (with --json, as JSON; an invalid\n"
     "            blob is an error)\n" +
         size_options_help(kInspectReads),
     inspect_command});

} // namespace

} // namespace vpuc::tools
