// A small network written with the DSL and the layer library, compiled by vpuc: the main
// job of `vpuc demo`. conv 3x3 + ReLU -> max pool -> conv 1x1 -> softmax over channels.
#pragma once

#include <Halide.h>

#include <cstdint>
#include <vector>

#include "dsl/graph.h"

namespace vpuc::examples {

struct SmallNet {
    dsl::Graph graph;
    std::vector<Halide::Buffer<>> inputs; // random, from the seed
};

SmallNet small_net(uint32_t seed);

} // namespace vpuc::examples
