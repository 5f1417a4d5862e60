#include "examples/conv_relu_shave.h"

#include <algorithm>
#include <random>

#include "codegen/shave_kernel.h"
#include "vpu_target/blob_writer.h"
#include "vpu_target/dpu_arith.h"

namespace vpuc::examples {

using namespace vpuc::blob;

namespace {

constexpr uint32_t C = kExampleC, W = kExampleW, H = kExampleH, K = 3;
constexpr int32_t kInputZeroPoint = 128;

// The SHAVE stage, as Halide and as the integer reference: a soft square, x^2/255 + x/4.
uint8_t shave_reference(uint8_t x) {
    return uint8_t(std::min<int>(x * x / 255 + x / 4, 255));
}

codegen::ShaveKernelBinary soft_square_kernel(int vector_bits) {
    Halide::ImageParam in(Halide::UInt(8), 3, "in");
    Halide::Var c("c"), x("x"), y("y");
    Halide::Func out("soft_square");
    Halide::Expr v = Halide::cast<uint16_t>(in(c, x, y));
    out(c, x, y) = Halide::cast<uint8_t>(Halide::min(v * v / 255 + v / 4, 255));
    return codegen::compile_shave_kernel("soft_square", out, {in}, vector_bits);
}

struct Data {
    std::vector<uint8_t> input;  // NHWC
    std::vector<int8_t> weights; // OC, KH, KW, IC
    std::vector<int32_t> bias;   // per output channel
    std::vector<uint16_t> mult;
    std::vector<uint8_t> shift;
};

Data random_data(uint32_t seed) {
    std::mt19937 rng(seed);
    auto uniform = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
    Data d;
    d.input.resize(C * W * H);
    for (auto &v : d.input) v = uint8_t(uniform(0, 255));
    d.weights.resize(C * K * K * C);
    for (auto &v : d.weights) v = int8_t(uniform(-128, 127));
    for (uint32_t oc = 0; oc < C; ++oc) {
        d.bias.push_back(uniform(-20000, 20000));
        d.mult.push_back(uint16_t(uniform(100, 400)));
        d.shift.push_back(uint8_t(uniform(15, 17)));
    }
    return d;
}

// The integer reference: written from the definition, not from the simulator's loops.
std::vector<uint8_t> reference(const Data &d) {
    dpu::IntPpe ppe;
    ppe.activation = dpu::Activation::Relu;
    ppe.out_min = 0;
    ppe.out_max = 255;
    std::vector<uint8_t> out(C * W * H);
    for (uint32_t y = 0; y < H; ++y)
        for (uint32_t x = 0; x < W; ++x)
            for (uint32_t oc = 0; oc < C; ++oc) {
                int32_t acc = d.bias[oc];
                for (uint32_t ky = 0; ky < K; ++ky)
                    for (uint32_t kx = 0; kx < K; ++kx) {
                        int iy = int(y + ky) - 1, ix = int(x + kx) - 1;
                        if (iy < 0 || iy >= int(H) || ix < 0 || ix >= int(W)) continue;
                        for (uint32_t ic = 0; ic < C; ++ic) {
                            int32_t xv = d.input[(uint32_t(iy) * W + uint32_t(ix)) * C + ic];
                            int32_t wv = d.weights[((oc * K + ky) * K + kx) * C + ic];
                            acc += (xv - kInputZeroPoint) * wv;
                        }
                    }
                int32_t conv = dpu::requantize(acc, d.mult[oc], d.shift[oc], ppe);
                out[(y * W + x) * C + oc] = shave_reference(uint8_t(conv));
            }
    return out;
}

// CMX plan of every tile (bytes).
constexpr uint64_t kWeightsAt = 0, kTableAt = 4096, kInputAt = 8192, kConvAt = 16384,
                   kShaveAt = 24576;

} // namespace

ExampleBlob conv_relu_shave(const target::Target &target, uint32_t seed) {
    Data d = random_data(seed);
    BlobWriter w(target, "conv_relu_shave");
    w.add_input("input", {1, C, H, W}, DType::U8, Layout::NHWC, {Quant(1.0f, kInputZeroPoint)});
    w.add_output("output", {1, C, H, W}, DType::U8, Layout::NHWC);

    // Weights in the DPU's layout, and the weight table pointing at each channel's set.
    const uint32_t per_channel = K * K * C;
    uint64_t weights_at = w.add_constant(d.weights);
    std::vector<int32_t> table;
    for (uint32_t oc = 0; oc < C; ++oc)
        table.insert(table.end(),
                     {int32_t(oc * per_channel), 0,
                      int32_t(dpu::pack_requant(d.mult[oc], d.shift[oc])), d.bias[oc]});
    uint64_t table_at = w.add_constant(table);

    const uint32_t tiles = uint32_t(target.tiles);
    std::vector<Address> weight_dsts, table_dsts;
    for (uint32_t t = 0; t < tiles; ++t) {
        weight_dsts.push_back(cmx_at(t, kWeightsAt));
        table_dsts.push_back(cmx_at(t, kTableAt));
    }
    uint32_t params_ready = w.add_barrier(0);
    w.add_dma(0, "weights.bcast", constant_at(weights_at), weight_dsts, uint32_t(d.weights.size()),
              {})
        .update(params_ready)
        .layer("conv");
    w.add_dma(0, "table.bcast", constant_at(table_at), table_dsts, uint32_t(table.size() * 4), {})
        .update(params_ready)
        .layer("conv");

    uint32_t kernel =
        w.add_kernel(*codegen::to_blob_kernel(soft_square_kernel(target.shave_vector_bits)));
    const std::string mode = [&] {
        for (const auto &m : target.mpe_modes)
            if (m.int8) return m.name;
        return target.mpe_modes.front().name;
    }();

    struct WriteBack {
        uint32_t tile, r0, r1, engine, ready;
    };
    std::vector<WriteBack> outputs;
    uint16_t physical = 1;
    const uint32_t row_bytes = W * C;
    for (uint32_t t = 0; t < tiles; ++t) {
        const uint32_t r0 = H * t / tiles, r1 = H * (t + 1) / tiles;
        const uint32_t i0 = r0 == 0 ? 0 : r0 - 1, i1 = std::min(H, r1 + 1);
        const uint32_t engine = t % uint32_t(target.dma_engines);
        const std::string tile = ".t" + std::to_string(t);
        uint32_t input_ready = w.add_barrier(physical++);
        uint32_t conv_done = w.add_barrier(physical++);
        uint32_t shave_done = w.add_barrier(physical++);

        w.add_dma(engine, "input" + tile, input_at(0, i0 * row_bytes), cmx_at(t, kInputAt),
                  (i1 - i0) * row_bytes)
            .update(input_ready)
            .layer("conv");

        DpuTaskT conv;
        conv.op = DpuOp::Conv;
        conv.kernel_w = conv.kernel_h = K;
        conv.pad_left = conv.pad_right = 1;
        conv.pad_top = r0 == 0 ? 1 : 0;
        conv.pad_bottom = r1 == H ? 1 : 0;
        conv.input = std::make_unique<TensorRefT>(
            nhwc(cmx_at(t, kInputAt), DType::U8, C, W, i1 - i0, 1, kInputZeroPoint));
        conv.weights =
            std::make_unique<TensorRefT>(dense(cmx_at(t, kWeightsAt), DType::I8, {C, K, K, C}));
        conv.weight_table =
            std::make_unique<TensorRefT>(dense(cmx_at(t, kTableAt), DType::I32, {4, C}));
        conv.output =
            std::make_unique<TensorRefT>(nhwc(cmx_at(t, kConvAt), DType::U8, C, W, r1 - r0));
        conv.ppe = std::make_unique<PpeT>();
        conv.ppe->activation = Activation::Relu;
        // Two workloads per tile: the channel halves.
        for (uint32_t half = 0; half < 2; ++half)
            conv.variants.push_back(std::make_unique<DpuVariantT>(
                variant({0, 0, half * C / 2}, {W, r1 - r0, (half + 1) * C / 2}, mode)));
        w.add_dpu(t, 0, "conv" + tile, std::move(conv))
            .wait(params_ready)
            .wait(input_ready)
            .update(conv_done)
            .layer("conv");

        ShaveTaskT shave;
        shave.kernel = kernel;
        for (uint64_t at : {kConvAt, kShaveAt}) {
            auto arg = std::make_unique<ShaveArgT>();
            arg->tensor =
                std::make_unique<TensorRefT>(dense(cmx_at(t, at), DType::U8, {C, W, r1 - r0}));
            shave.args.push_back(std::move(arg));
        }
        shave.shaves = uint8_t(std::min(target.shaves_available(int(t)), 2));
        w.add_shave(t, "soft_square" + tile, std::move(shave))
            .wait(conv_done)
            .update(shave_done)
            .layer("soft_square");

        outputs.push_back({t, r0, r1, engine, shave_done});
    }
    // Write-backs queue after every input load, so no tile's load waits for another's result.
    for (const auto &o : outputs)
        w.add_dma(o.engine, "output.t" + std::to_string(o.tile), cmx_at(o.tile, kShaveAt),
                  output_at(0, o.r0 * row_bytes), (o.r1 - o.r0) * row_bytes)
            .wait(o.ready)
            .layer("soft_square");

    ExampleBlob example;
    example.bytes = w.finish();
    example.inputs = {d.input};
    example.expected = {reference(d)};
    return example;
}

} // namespace vpuc::examples
