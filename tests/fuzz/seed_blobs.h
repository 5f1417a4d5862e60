// Seed blobs for the fuzzers, the mutation campaign and the blob contract test: small networks
// compiled by vpuc itself, so that the seeds follow the blob format as it changes.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "dsl/graph.h"

namespace vpuc::fuzz {

// "small_net" (the demo network: conv, max pool, conv, softmax), "softmax" and "sigmoid" (SHAVE
// kernels), "depthwise" (a 3x3 depthwise conv) and "conv" (a 3x3 conv on the DPU alone).
const std::vector<std::string> &seed_network_names();

// A fresh graph of the network `name` (lowering schedules its layers in place).
dsl::Graph seed_network(const std::string &name);

struct SeedBlob {
    std::string name; // "softmax-vpu27"
    std::vector<uint8_t> bytes;
};

// Each network of `names` compiled for each target of `targets`, networks outermost.
std::vector<SeedBlob> compile_seed_blobs(const std::vector<std::string> &names,
                                         const std::vector<std::string> &targets);

} // namespace vpuc::fuzz
