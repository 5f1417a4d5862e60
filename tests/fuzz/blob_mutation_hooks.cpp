// libFuzzer's mutation hooks for the blob fuzzers: a third of the mutations change fields
// through the blob's JSON form (blob_mutator.h), the rest are libFuzzer's byte mutations;
// crossover grafts a value of one blob into the other where the types match.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <random>

#include "blob_mutator.h"

extern "C" size_t LLVMFuzzerMutate(uint8_t *data, size_t size, size_t max_size);

namespace {

const vpuc::fuzz::BlobMutator &mutator() {
    static const vpuc::fuzz::BlobMutator instance;
    return instance;
}

size_t copy_out(const std::vector<uint8_t> &bytes, uint8_t *out) {
    std::memcpy(out, bytes.data(), bytes.size());
    return bytes.size();
}

} // namespace

extern "C" size_t LLVMFuzzerCustomMutator(uint8_t *data, size_t size, size_t max_size,
                                          unsigned int seed) {
    std::mt19937_64 rng(seed);
    if (rng() % 3 == 0) {
        auto mutated = mutator().mutate_fields(std::vector<uint8_t>(data, data + size), rng);
        if (mutated && mutated->size() <= max_size) return copy_out(*mutated, data);
    }
    return LLVMFuzzerMutate(data, size, max_size);
}

extern "C" size_t LLVMFuzzerCustomCrossOver(const uint8_t *data1, size_t size1,
                                            const uint8_t *data2, size_t size2, uint8_t *out,
                                            size_t max_out_size, unsigned int seed) {
    std::mt19937_64 rng(seed);
    auto mixed = mutator().crossover(std::vector<uint8_t>(data1, data1 + size1),
                                     std::vector<uint8_t>(data2, data2 + size2), rng);
    if (mixed && mixed->size() <= max_out_size) return copy_out(*mixed, out);
    // Not two well-formed blobs with a type in common: the head of one, the tail of the other.
    const size_t head = std::min<size_t>(size1 ? rng() % (size1 + 1) : 0, max_out_size);
    const size_t from = size2 ? rng() % (size2 + 1) : 0;
    const size_t tail = std::min(size2 - from, max_out_size - head);
    std::memcpy(out, data1, head);
    std::memcpy(out + head, data2 + from, tail);
    return head + tail;
}
