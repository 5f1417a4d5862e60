// `vpuc verify`: check a blob against a target (the checks of docs/blob.md).
// `vpuc inspect`: print what a blob holds, as text for people or as JSON for scripts
// (vpu_target/blob_printer.h).
#include <cstdio>
#include <iostream>
#include <sstream>
#include <stdexcept>

#include "command.h"
#include "options.h"
#include "vpu_target/blob_printer.h"
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

// The BLOB argument and the options.
struct Args {
    std::string blob;
    std::string target;
    bool json = false;
};

Args parse(const std::vector<std::string> &argv, bool takes_target, bool takes_json,
           const std::vector<files::FileKind> &reads) {
    const Options o = parse_options(
        argv, takes_target ? std::vector<std::string>{"--target"} : std::vector<std::string>{},
        takes_json ? std::vector<std::string>{"--json"} : std::vector<std::string>{}, reads);
    if (o.positional.empty()) throw std::runtime_error("expected a BLOB argument (see --help)");
    if (o.positional.size() > 1)
        throw std::runtime_error("expected one BLOB argument, got '" + o.positional[0] + "' and '" +
                                 o.positional[1] + "'");
    return {o.positional[0], o.get("--target"), o.has("--json")};
}

int verify_command(const std::vector<std::string> &argv) {
    Args args = parse(argv, true, false, kVerifyReads);
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

int inspect_command(const std::vector<std::string> &argv) {
    Args args = parse(argv, false, true, kInspectReads);
    std::vector<uint8_t> bytes = blob::read_file(args.blob);
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
     "usage: vpuc inspect BLOB [--json]\n\n"
     "Prints the header (format, target, network), whether the blob passes verification\n"
     "against its target (and the problems if not), the I/O tensors with shape, dtype,\n"
     "layout and quantization, section sizes, SHAVE kernels with their argument contracts,\n"
     "barriers with physical ids and counts, then every queue with its tasks: name, wait and\n"
     "update barriers, and a one-line description of the DMA, DPU or SHAVE work. Exits with\n"
     "status 1 when the blob fails verification, after printing what it holds.\n\n"
     "  --json  print the same as one JSON document (every field of every task)\n" +
         size_options_help(kInspectReads),
     inspect_command});

} // namespace

} // namespace vpuc::tools
