#include "examples/small_net.h"

#include <random>

#include "algorithms/layers.h"
#include "algorithms/reference.h"

namespace vpuc::examples {

namespace {

algorithms::QuantWeights random_weights(int ic, int k, int oc, double scale, std::mt19937 &rng) {
    auto uni = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
    algorithms::QuantWeights w;
    w.weights = Halide::Buffer<int8_t>(ic, k, k, oc);
    w.weights.for_each_value([&](int8_t &v) { v = int8_t(uni(-127, 127)); });
    for (int c = 0; c < oc; ++c) {
        w.bias.push_back(uni(-4000, 4000));
        w.requant.push_back(algorithms::fixed_point(scale));
    }
    w.output_type = dsl::ElemType::U8;
    w.output_quant = dsl::Quant::per_tensor(0.05f, 0);
    return w;
}

} // namespace

SmallNet small_net(uint32_t seed) {
    std::mt19937 rng(seed);
    dsl::TensorDesc image;
    image.name = "image";
    image.shape = dsl::Shape({1, 32, 28, 28});
    image.type = dsl::ElemType::U8;
    image.quant = dsl::Quant::per_tensor(1.0f / 255, 0);
    image.order = dsl::DimsOrder::NHWC();
    dsl::Layer in = dsl::Layer::input(image);

    algorithms::Conv2dParams same;
    same.pad_left = same.pad_right = same.pad_top = same.pad_bottom = 1;
    same.activation = algorithms::Activation::relu();
    dsl::Layer conv1 =
        algorithms::conv2d("conv1", in, random_weights(32, 3, 64, 0.0008, rng), same);
    algorithms::PoolParams pool;
    pool.kernel_w = pool.kernel_h = pool.stride_w = pool.stride_h = 2;
    dsl::Layer pool1 = algorithms::max_pool("pool1", conv1, pool);
    dsl::Layer conv2 = algorithms::conv2d("conv2", pool1, random_weights(64, 1, 16, 0.002, rng));
    dsl::Layer prob =
        algorithms::softmax("prob", conv2, dsl::dims::C, dsl::Quant::per_tensor(1.0f / 256, 0));

    Halide::Buffer<uint8_t> pixels = algorithms::make_buffer(image);
    pixels.for_each_value([&](uint8_t &v) { v = uint8_t(rng()); });
    return {dsl::Graph("small_net", {prob}), {pixels}};
}

} // namespace vpuc::examples
