#include "functional_runs.h"

#include <algorithm>
#include <random>

namespace vpuc::bench {

std::vector<std::vector<uint8_t>> random_inputs(const blob::Blob &blob, Precision precision) {
    std::mt19937 rng(1);
    std::vector<std::vector<uint8_t>> inputs;
    for (const auto *io : *blob.header()->inputs()) {
        std::vector<uint8_t> bytes(io->bytes());
        for (size_t i = 0; i < bytes.size(); ++i)
            bytes[i] = precision == Precision::Fp16 && i % 2 == 1
                           ? uint8_t(0x38 + rng() % 8) ^ uint8_t(rng() & 0x80)
                           : uint8_t(rng());
        inputs.push_back(std::move(bytes));
    }
    return inputs;
}

double median(std::vector<double> values) {
    std::sort(values.begin(), values.end());
    return values.empty() ? 0 : values[values.size() / 2];
}

} // namespace vpuc::bench
