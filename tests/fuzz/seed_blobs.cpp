#include "seed_blobs.h"

#include <random>
#include <stdexcept>

#include "algorithms/layers.h"
#include "codegen/lower.h"
#include "examples/small_net.h"

namespace vpuc::fuzz {

namespace {

// A u8 NHWC activation, small enough for a functional run to take milliseconds.
dsl::Layer u8_input(int64_t c, int64_t w, int64_t h) {
    dsl::TensorDesc t;
    t.name = "x";
    t.shape = dsl::Shape({1, c, h, w});
    t.type = dsl::ElemType::U8;
    t.quant = dsl::Quant::per_tensor(0.05f, 120);
    t.order = dsl::DimsOrder::NHWC();
    return dsl::Layer::input(t);
}

algorithms::QuantWeights weights(std::vector<int> sizes, int oc, uint32_t seed) {
    std::mt19937 rng(seed);
    algorithms::QuantWeights w;
    w.weights = Halide::Buffer<int8_t>(sizes);
    w.weights.for_each_value([&](int8_t &v) { v = int8_t(int(rng() % 201) - 100); });
    for (int c = 0; c < oc; ++c) {
        w.bias.push_back(int(rng() % 4001) - 2000);
        w.requant.push_back(algorithms::fixed_point(0.002 + 0.0002 * c));
    }
    w.output_type = dsl::ElemType::U8;
    w.output_quant = dsl::Quant::per_tensor(0.05f, 10);
    return w;
}

algorithms::Conv2dParams same_3x3() {
    algorithms::Conv2dParams p;
    p.pad_left = p.pad_right = p.pad_top = p.pad_bottom = 1;
    p.activation = algorithms::Activation::relu();
    return p;
}

} // namespace

const std::vector<std::string> &seed_network_names() {
    static const std::vector<std::string> names = {"small_net", "softmax", "depthwise", "sigmoid",
                                                   "conv"};
    return names;
}

dsl::Graph seed_network(const std::string &name) {
    if (name == "small_net") return examples::small_net(1).graph;
    if (name == "softmax")
        return dsl::Graph("softmax", {algorithms::softmax("prob", u8_input(16, 5, 3))});
    if (name == "sigmoid")
        return dsl::Graph("sigmoid", {algorithms::sigmoid("sig", u8_input(16, 6, 4))});
    if (name == "depthwise")
        return dsl::Graph(
            "depthwise", {algorithms::depthwise_conv2d("dw", u8_input(16, 8, 6),
                                                       weights({1, 3, 3, 16}, 16, 2), same_3x3())});
    if (name == "conv") {
        dsl::Layer conv = algorithms::conv2d("conv", u8_input(16, 8, 8),
                                             weights({16, 3, 3, 32}, 32, 3), same_3x3());
        conv.schedule().split("y", "yo", "yi", 4).on_dpu();
        return dsl::Graph("conv", {conv});
    }
    throw std::invalid_argument("no seed network '" + name + "'");
}

std::vector<SeedBlob> compile_seed_blobs(const std::vector<std::string> &names,
                                         const std::vector<std::string> &targets) {
    std::vector<SeedBlob> seeds;
    for (const std::string &name : names)
        for (const std::string &target : targets)
            seeds.push_back({name + "-" + target,
                             codegen::lower(seed_network(name), target::load_target(target))});
    return seeds;
}

} // namespace vpuc::fuzz
