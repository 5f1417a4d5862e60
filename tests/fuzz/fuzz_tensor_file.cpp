// Fuzzes the tensor file readers (frontend/tensor_file.h) with each input read both as a .npy
// file and as an .npz archive. The contract: a reader accepts the bytes or throws
// TensorFileError; what it accepts is written back and read again unchanged (types, extents,
// bytes, names). A violation aborts, so that libFuzzer keeps the input.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "frontend/tensor_file.h"

namespace {

using namespace vpuc::frontend;

[[noreturn]] void violation(const std::string &what) {
    std::fprintf(stderr, "CONTRACT VIOLATION: %s\n", what.c_str());
    std::abort();
}

std::vector<uint8_t> bytes_of(const Halide::Buffer<> &value) {
    const Halide::Buffer<> d = dense(value);
    const auto *p = static_cast<const uint8_t *>(d.raw_buffer()->host);
    return p ? std::vector<uint8_t>(p, p + d.size_in_bytes()) : std::vector<uint8_t>{};
}

void require_same(const Halide::Buffer<> &read, const Halide::Buffer<> &written,
                  const std::string &what) {
    bool same = read.type() == written.type() && read.dimensions() == written.dimensions();
    for (int d = 0; same && d < read.dimensions(); ++d)
        same = read.dim(d).extent() == written.dim(d).extent();
    if (!same || bytes_of(read) != bytes_of(written))
        violation(what + ": read back as another tensor");
}

// Written and read again, each tensor must come back as it was.
template <typename F> void require_round_trip(const char *what, F &&round_trip) {
    try {
        round_trip();
    } catch (const TensorFileError &e) {
        violation(std::string(what) +
                  ": what was accepted cannot be written and read back: " + e.what());
    }
}

void check_npy(const std::vector<uint8_t> &bytes) {
    Halide::Buffer<> value;
    try {
        value = parse_npy(bytes, "fuzz.npy");
    } catch (const TensorFileError &) {
        return;
    }
    require_round_trip(
        ".npy", [&] { require_same(parse_npy(serialize_npy(value), "again.npy"), value, ".npy"); });
}

void check_npz(const std::vector<uint8_t> &bytes) {
    std::vector<NamedTensor> tensors;
    try {
        tensors = parse_npz(bytes, "fuzz.npz");
    } catch (const TensorFileError &) {
        return;
    }
    require_round_trip(".npz", [&] {
        const std::vector<NamedTensor> again =
            parse_npz(serialize_npz(tensors, NpzCompression::Deflated), "again.npz");
        if (again.size() != tensors.size()) violation(".npz: another number of tensors");
        for (size_t i = 0; i < again.size(); ++i) {
            if (again[i].name != tensors[i].name) violation(".npz: a name changed");
            require_same(again[i].value, tensors[i].value, ".npz tensor " + std::to_string(i));
        }
    });
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const std::vector<uint8_t> bytes(data, data + size);
    check_npy(bytes);
    check_npz(bytes);
    return 0;
}
