// A libFuzzer harness without libFuzzer: runs the harness's LLVMFuzzerTestOneInput on every file
// of a seed directory, then on a fixed number of byte mutations of them from a fixed random seed,
// so that the main build (gcc, no sanitizer, no coverage) checks each harness's contract on
// every change (docs/fuzzing.md, "What CI runs"). A contract violation aborts, failing the run.
//
//   usage: HARNESS_replay SEED_DIR MUTATIONS
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <random>
#include <string>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
// Defined by the harnesses that prepare something once.
extern "C" __attribute__((weak)) int LLVMFuzzerInitialize(int *argc, char ***argv);

namespace fs = std::filesystem;

namespace {

std::vector<uint8_t> read_bytes(const fs::path &path) {
    std::ifstream in(path, std::ios::binary);
    if (!in) throw std::runtime_error("cannot read " + path.string());
    return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// One to four edits, as libFuzzer's simplest mutators make them: a byte changed, a byte
// inserted, a byte erased, or the tail cut off.
std::vector<uint8_t> mutate(std::vector<uint8_t> bytes, std::mt19937 &rng) {
    const int edits = 1 + int(rng() % 4);
    for (int e = 0; e < edits; ++e) {
        const size_t at = bytes.empty() ? 0 : rng() % bytes.size();
        switch (rng() % 4) {
        case 0:
            if (!bytes.empty()) bytes[at] = uint8_t(rng());
            break;
        case 1:
            bytes.insert(bytes.begin() + std::ptrdiff_t(at), uint8_t(rng()));
            break;
        case 2:
            if (!bytes.empty()) bytes.erase(bytes.begin() + std::ptrdiff_t(at));
            break;
        default:
            bytes.resize(at);
        }
    }
    return bytes;
}

void run(const std::vector<uint8_t> &bytes) {
    // libFuzzer never passes a null pointer, even for an empty input.
    const uint8_t empty = 0;
    LLVMFuzzerTestOneInput(bytes.empty() ? &empty : bytes.data(), bytes.size());
}

} // namespace

int main(int argc, char **argv) {
    if (argc != 3) {
        std::fprintf(stderr, "usage: %s SEED_DIR MUTATIONS\n", argv[0]);
        return 2;
    }
    try {
        std::vector<fs::path> files;
        for (const auto &entry : fs::directory_iterator(argv[1]))
            if (entry.is_regular_file()) files.push_back(entry.path());
        std::sort(files.begin(), files.end());
        if (files.empty()) throw std::runtime_error(std::string("no seeds in ") + argv[1]);
        const long mutations = std::strtol(argv[2], nullptr, 10);
        if (LLVMFuzzerInitialize) LLVMFuzzerInitialize(&argc, &argv);
        std::vector<std::vector<uint8_t>> seeds;
        for (const fs::path &file : files) {
            seeds.push_back(read_bytes(file));
            run(seeds.back());
        }
        std::mt19937 rng(1);
        for (long i = 0; i < mutations; ++i) run(mutate(seeds[rng() % seeds.size()], rng));
        std::printf("%s: %zu seeds and %ld mutations of them, no contract violation\n", argv[0],
                    seeds.size(), mutations);
    } catch (const std::exception &e) {
        std::fprintf(stderr, "%s: %s\n", argv[0], e.what());
        return 1;
    }
    return 0;
}
