#include "examples/zoo/zoo.h"

#include <Halide.h>
#include <onnx/onnx_pb.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <set>

#include "examples/zoo/opencv_reference.h"

namespace vpuc::zoo {

namespace {

// ONNX 1.12's IR version, which PyTorch writes for opsets 13 to 17.
constexpr int64_t kIrVersion = 8;
constexpr int64_t kOpset = 13;
// LayerNormalization is an op from opset 17 on.
constexpr int64_t kTransformerOpset = 17;
constexpr double kBatchNormEpsilon = 1e-5;

// Normal and uniform numbers that are the same with every standard library (the algorithm of
// std::normal_distribution is the library's choice): splitmix64 and Box-Muller.
class Random {
  public:
    explicit Random(uint64_t seed) : state_(seed) {}

    double uniform(double low, double high) { return low + (high - low) * unit(); }
    double normal(double stddev) {
        const double radius = std::sqrt(-2.0 * std::log(1.0 - unit()));
        return stddev * radius * std::cos(2.0 * M_PI * unit());
    }

  private:
    uint64_t next() {
        uint64_t z = (state_ += 0x9e3779b97f4a7c15ULL);
        z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
        z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
        return z ^ (z >> 31);
    }
    double unit() { return double(next() >> 11) * 0x1.0p-53; } // in [0, 1)

    uint64_t state_;
};

onnx::AttributeProto int_attr(const std::string &name, int64_t value) {
    onnx::AttributeProto a;
    a.set_name(name);
    a.set_type(onnx::AttributeProto::INT);
    a.set_i(value);
    return a;
}

onnx::AttributeProto ints_attr(const std::string &name, const std::vector<int64_t> &values) {
    onnx::AttributeProto a;
    a.set_name(name);
    a.set_type(onnx::AttributeProto::INTS);
    for (int64_t v : values) a.add_ints(v);
    return a;
}

onnx::AttributeProto float_attr(const std::string &name, double value) {
    onnx::AttributeProto a;
    a.set_name(name);
    a.set_type(onnx::AttributeProto::FLOAT);
    a.set_f(float(value));
    return a;
}

onnx::AttributeProto string_attr(const std::string &name, const std::string &value) {
    onnx::AttributeProto a;
    a.set_name(name);
    a.set_type(onnx::AttributeProto::STRING);
    a.set_s(value);
    return a;
}

// The scope PyTorch's exporter gives a module's nodes: "layer1.0.conv1" is
// "/layer1/layer1.0/conv1", a numbered child named with its container ("features.0.0" is
// "/features/features.0/features.0.0").
std::string scope_of(const std::string &module) {
    std::string scope, previous;
    size_t start = 0;
    while (start <= module.size()) {
        const size_t dot = std::min(module.find('.', start), module.size());
        const std::string part = module.substr(start, dot - start);
        const bool numbered = !part.empty() && std::isdigit(static_cast<unsigned char>(part[0]));
        previous = numbered && !previous.empty() ? previous + "." + part : part;
        scope += "/" + previous;
        start = dot + 1;
    }
    return scope;
}

// An ONNX graph built node by node, as PyTorch's exporter names things: a node "/scope/Op"
// (with "_1", "_2" for repeats) writes "/scope/Op_output_0"; parameters are initializers
// named after their module ("layer1.0.bn1.running_var").
class ModelBuilder {
  public:
    ModelBuilder(const std::string &graph_name, uint64_t seed, int64_t opset) : random_(seed) {
        model_.set_ir_version(kIrVersion);
        model_.set_producer_name("vpuc zoo");
        model_.set_producer_version("1");
        onnx::OperatorSetIdProto *set = model_.add_opset_import();
        set->set_domain("");
        set->set_version(opset);
        model_.mutable_graph()->set_name(graph_name);
    }

    Random &random() { return random_; }

    void input(const std::string &name, const std::vector<int64_t> &shape) {
        describe(model_.mutable_graph()->add_input(), name, shape);
    }
    void output(const std::string &name, const std::vector<int64_t> &shape) {
        describe(model_.mutable_graph()->add_output(), name, shape);
    }

    std::string floats(const std::string &name, const std::vector<int64_t> &dims,
                       const std::vector<float> &values) {
        return initializer(name, onnx::TensorProto::FLOAT, dims, values.data(),
                           values.size() * sizeof(float));
    }
    std::string int64s(const std::string &name, const std::vector<int64_t> &dims,
                       const std::vector<int64_t> &values) {
        return initializer(name, onnx::TensorProto::INT64, dims, values.data(),
                           values.size() * sizeof(int64_t));
    }
    // `count` values drawn by `draw`.
    std::string random_floats(const std::string &name, const std::vector<int64_t> &dims,
                              const std::function<double(Random &)> &draw) {
        int64_t count = 1;
        for (int64_t d : dims) count *= d;
        std::vector<float> values(static_cast<size_t>(count));
        for (float &v : values) v = float(draw(random_));
        return floats(name, dims, values);
    }

    // Adds node `op` in `scope` ("" for the top level) and returns its output's name, or
    // `output` when given (a graph output).
    std::string node(const std::string &op, const std::string &scope,
                     const std::vector<std::string> &inputs,
                     const std::vector<onnx::AttributeProto> &attributes = {},
                     const std::string &output = "") {
        std::string name = scope + "/" + op;
        for (int repeat = 1; !node_names_.insert(name).second; ++repeat)
            name = scope + "/" + op + "_" + std::to_string(repeat);
        onnx::NodeProto *n = model_.mutable_graph()->add_node();
        n->set_name(name);
        n->set_op_type(op);
        for (const std::string &in : inputs) n->add_input(in);
        n->add_output(output.empty() ? name + "_output_0" : output);
        for (const onnx::AttributeProto &a : attributes) *n->add_attribute() = a;
        return n->output(0);
    }

    std::vector<uint8_t> bytes() const {
        std::string text;
        if (!model_.SerializeToString(&text))
            throw std::logic_error("zoo: model '" + model_.graph().name() + "' does not serialize");
        return std::vector<uint8_t>(text.begin(), text.end());
    }

  private:
    static void describe(onnx::ValueInfoProto *value, const std::string &name,
                         const std::vector<int64_t> &shape) {
        value->set_name(name);
        onnx::TypeProto::Tensor *tensor = value->mutable_type()->mutable_tensor_type();
        tensor->set_elem_type(onnx::TensorProto::FLOAT);
        for (int64_t d : shape) tensor->mutable_shape()->add_dim()->set_dim_value(d);
    }

    std::string initializer(const std::string &name, int32_t type, const std::vector<int64_t> &dims,
                            const void *data, size_t bytes) {
        onnx::TensorProto *t = model_.mutable_graph()->add_initializer();
        t->set_name(name);
        t->set_data_type(type);
        for (int64_t d : dims) t->add_dims(d);
        t->set_raw_data(std::string(static_cast<const char *>(data), bytes));
        return name;
    }

    onnx::ModelProto model_;
    Random random_;
    std::set<std::string> node_names_;
};

// Layers as PyTorch's modules export them. A module path names both the scope of its nodes
// and its parameters.

// He-scaled weights (standard deviation gain * sqrt(2 / fan_in)), which keep the second
// moment through a ReLU; a bias when `bias`. Writes `output` when given (a graph output).
std::string conv(ModelBuilder &b, const std::string &module, const std::string &x,
                 int64_t in_channels, int64_t out_channels, int64_t kernel, int64_t stride,
                 int64_t groups = 1, bool bias = false, double gain = 1.0,
                 const std::string &output = "") {
    const int64_t fan_in = in_channels / groups * kernel * kernel;
    const double stddev = gain * std::sqrt(2.0 / double(fan_in));
    std::vector<std::string> inputs = {
        x, b.random_floats(module + ".weight", {out_channels, in_channels / groups, kernel, kernel},
                           [&](Random &r) { return r.normal(stddev); })};
    if (bias)
        inputs.push_back(b.random_floats(module + ".bias", {out_channels},
                                         [](Random &r) { return r.normal(0.05); }));
    const int64_t pad = kernel / 2;
    return b.node("Conv", scope_of(module), inputs,
                  {ints_attr("dilations", {1, 1}), int_attr("group", groups),
                   ints_attr("kernel_shape", {kernel, kernel}),
                   ints_attr("pads", {pad, pad, pad, pad}), ints_attr("strides", {stride, stride})},
                  output);
}

// Running statistics away from 0 and 1 and a scale in [gamma_low, gamma_high]: a residual
// branch's last batch norm gets a small scale, so that the sum grows slowly with depth.
std::string batch_norm(ModelBuilder &b, const std::string &module, const std::string &x,
                       int64_t channels, double gamma_low = 0.8, double gamma_high = 1.2) {
    const std::vector<int64_t> dims = {channels};
    const std::string scale = b.random_floats(
        module + ".weight", dims, [&](Random &r) { return r.uniform(gamma_low, gamma_high); });
    const std::string shift =
        b.random_floats(module + ".bias", dims, [](Random &r) { return r.normal(0.1); });
    const std::string mean =
        b.random_floats(module + ".running_mean", dims, [](Random &r) { return r.normal(0.2); });
    const std::string var = b.random_floats(module + ".running_var", dims,
                                            [](Random &r) { return r.uniform(0.6, 1.6); });
    return b.node("BatchNormalization", scope_of(module), {x, scale, shift, mean, var},
                  {float_attr("epsilon", kBatchNormEpsilon), float_attr("momentum", 0.9)});
}

std::string relu(ModelBuilder &b, const std::string &module, const std::string &x) {
    return b.node("Relu", scope_of(module), {x});
}

// GlobalAveragePool, Flatten and the classifier's Gemm (weights [classes, features], as
// nn.Linear stores them), writing "logits".
std::string classifier(ModelBuilder &b, const std::string &module, const std::string &x,
                       int64_t features) {
    constexpr int64_t kClasses = 1000;
    const std::string pooled = b.node("GlobalAveragePool", "", {x});
    const std::string flat = b.node("Flatten", "", {pooled}, {int_attr("axis", 1)});
    const double stddev = std::sqrt(1.0 / double(features));
    const std::string weight = b.random_floats(module + ".weight", {kClasses, features},
                                               [&](Random &r) { return r.normal(stddev); });
    const std::string bias =
        b.random_floats(module + ".bias", {kClasses}, [](Random &r) { return r.normal(0.05); });
    b.output("logits", {1, kClasses});
    return b.node("Gemm", scope_of(module), {flat, weight, bias},
                  {float_attr("alpha", 1.0), float_attr("beta", 1.0), int_attr("transB", 1)},
                  "logits");
}

// torchvision's ResNet stem: conv 7x7 stride 2, batch norm, ReLU, max pool 3x3 stride 2.
std::string resnet_stem(ModelBuilder &b) {
    b.input("input", {1, 3, 224, 224});
    std::string x = conv(b, "conv1", "input", 3, 64, 7, 2);
    x = relu(b, "relu", batch_norm(b, "bn1", x, 64));
    return b.node("MaxPool", scope_of("maxpool"), {x},
                  {int_attr("ceil_mode", 0), ints_attr("kernel_shape", {3, 3}),
                   ints_attr("pads", {1, 1, 1, 1}), ints_attr("strides", {2, 2})});
}

// The shortcut of a block: the input itself, or conv 1x1 + batch norm when the shape changes.
std::string shortcut(ModelBuilder &b, const std::string &block, const std::string &x,
                     int64_t in_channels, int64_t out_channels, int64_t stride) {
    if (stride == 1 && in_channels == out_channels) return x;
    const std::string down =
        conv(b, block + ".downsample.0", x, in_channels, out_channels, 1, stride);
    return batch_norm(b, block + ".downsample.1", down, out_channels);
}

// The residual branch's last batch norm scale: small, so that the sum grows slowly.
constexpr double kResidualGammaLow = 0.2, kResidualGammaHigh = 0.4;

std::string basic_block(ModelBuilder &b, const std::string &block, const std::string &x,
                        int64_t in_channels, int64_t channels, int64_t stride) {
    std::string y = conv(b, block + ".conv1", x, in_channels, channels, 3, stride);
    y = relu(b, block + ".relu", batch_norm(b, block + ".bn1", y, channels));
    y = conv(b, block + ".conv2", y, channels, channels, 3, 1);
    y = batch_norm(b, block + ".bn2", y, channels, kResidualGammaLow, kResidualGammaHigh);
    const std::string sum =
        b.node("Add", scope_of(block), {y, shortcut(b, block, x, in_channels, channels, stride)});
    return relu(b, block + ".relu", sum);
}

// torchvision's Bottleneck (ResNet v1.5: the stride on the 3x3 conv), expansion 4.
std::string bottleneck(ModelBuilder &b, const std::string &block, const std::string &x,
                       int64_t in_channels, int64_t width, int64_t stride) {
    const int64_t out_channels = width * 4;
    std::string y = conv(b, block + ".conv1", x, in_channels, width, 1, 1);
    y = relu(b, block + ".relu", batch_norm(b, block + ".bn1", y, width));
    y = conv(b, block + ".conv2", y, width, width, 3, stride);
    y = relu(b, block + ".relu", batch_norm(b, block + ".bn2", y, width));
    y = conv(b, block + ".conv3", y, width, out_channels, 1, 1);
    y = batch_norm(b, block + ".bn3", y, out_channels, kResidualGammaLow, kResidualGammaHigh);
    const std::string sum = b.node("Add", scope_of(block),
                                   {y, shortcut(b, block, x, in_channels, out_channels, stride)});
    return relu(b, block + ".relu", sum);
}

std::vector<uint8_t> resnet(const std::string &name, uint64_t seed, bool bottlenecks,
                            const std::vector<int> &blocks_per_stage) {
    ModelBuilder b(name, seed, kOpset);
    std::string x = resnet_stem(b);
    int64_t channels = 64;
    for (size_t stage = 0; stage < blocks_per_stage.size(); ++stage) {
        const int64_t width = int64_t(64) << stage;
        for (int i = 0; i < blocks_per_stage[stage]; ++i) {
            const std::string block = "layer" + std::to_string(stage + 1) + "." + std::to_string(i);
            const int64_t stride = stage > 0 && i == 0 ? 2 : 1;
            x = bottlenecks ? bottleneck(b, block, x, channels, width, stride)
                            : basic_block(b, block, x, channels, width, stride);
            channels = bottlenecks ? width * 4 : width;
        }
    }
    classifier(b, "fc", x, channels);
    return b.bytes();
}

// torchvision's Conv2dNormActivation with ReLU6, exported as Clip(0, 6).
std::string conv_bn_relu6(ModelBuilder &b, const std::string &module, const std::string &x,
                          int64_t in_channels, int64_t out_channels, int64_t kernel, int64_t stride,
                          int64_t groups = 1) {
    std::string y = conv(b, module + ".0", x, in_channels, out_channels, kernel, stride, groups);
    y = batch_norm(b, module + ".1", y, out_channels);
    return b.node("Clip", scope_of(module + ".2"), {y, "relu6.min", "relu6.max"});
}

// torchvision's InvertedResidual: expand 1x1 (when t > 1), depthwise 3x3, linear project 1x1.
std::string inverted_residual(ModelBuilder &b, const std::string &block, const std::string &x,
                              int64_t in_channels, int64_t out_channels, int64_t stride,
                              int64_t expand) {
    const int64_t hidden = in_channels * expand;
    const bool residual = stride == 1 && in_channels == out_channels;
    std::string y = x;
    int part = 0;
    const auto next = [&] { return block + ".conv." + std::to_string(part++); };
    if (expand != 1) y = conv_bn_relu6(b, next(), y, in_channels, hidden, 1, 1);
    y = conv_bn_relu6(b, next(), y, hidden, hidden, 3, stride, hidden);
    y = conv(b, next(), y, hidden, out_channels, 1, 1);
    y = residual ? batch_norm(b, next(), y, out_channels, kResidualGammaLow, kResidualGammaHigh)
                 : batch_norm(b, next(), y, out_channels);
    return residual ? b.node("Add", scope_of(block), {x, y}) : y;
}

std::vector<uint8_t> mobilenet_v2(uint64_t seed) {
    ModelBuilder b("mobilenet_v2", seed, kOpset);
    b.input("input", {1, 3, 224, 224});
    b.floats("relu6.min", {}, {0.0f});
    b.floats("relu6.max", {}, {6.0f});
    struct Stage {
        int64_t expand, channels, repeats, stride;
    };
    const std::vector<Stage> stages = {{1, 16, 1, 1}, {6, 24, 2, 2},  {6, 32, 3, 2}, {6, 64, 4, 2},
                                       {6, 96, 3, 1}, {6, 160, 3, 2}, {6, 320, 1, 1}};
    std::string x = conv_bn_relu6(b, "features.0", "input", 3, 32, 3, 2);
    int64_t channels = 32;
    int feature = 1;
    for (const Stage &s : stages)
        for (int64_t i = 0; i < s.repeats; ++i) {
            x = inverted_residual(b, "features." + std::to_string(feature++), x, channels,
                                  s.channels, i == 0 ? s.stride : 1, s.expand);
            channels = s.channels;
        }
    x = conv_bn_relu6(b, "features." + std::to_string(feature), x, channels, 1280, 1, 1);
    classifier(b, "classifier.1", x, 1280);
    return b.bytes();
}

// Conv, batch norm and SiLU (x * sigmoid(x), as YOLOv5 exports it).
std::string conv_bn_silu(ModelBuilder &b, const std::string &module, const std::string &x,
                         int64_t in_channels, int64_t out_channels, int64_t kernel,
                         int64_t stride) {
    std::string y = conv(b, module + ".conv", x, in_channels, out_channels, kernel, stride);
    y = batch_norm(b, module + ".bn", y, out_channels);
    const std::string gate = b.node("Sigmoid", scope_of(module + ".act"), {y});
    return b.node("Mul", scope_of(module + ".act"), {y, gate});
}

// A YOLO-style detector on 256x256: a backbone of four stride-2 stages (each a downsampling
// conv and a residual bottleneck), a neck that upsamples (nearest, x2) and concatenates with
// the backbone's features, and three 1x1 heads of 3 anchors x (5 + 80 classes) at strides 8,
// 16 and 32.
std::vector<uint8_t> yolo(uint64_t seed) {
    constexpr int64_t kSize = 256, kHeadChannels = 3 * (5 + 80);
    ModelBuilder b("yolo_tiny", seed, kOpset);
    b.input("input", {1, 3, kSize, kSize});
    b.floats("upsample.scales", {4}, {1.0f, 1.0f, 2.0f, 2.0f});
    std::string x = conv_bn_silu(b, "backbone.stem", "input", 3, 16, 3, 2);
    std::vector<std::string> features; // strides 8, 16, 32
    int64_t channels = 16;
    for (int stage = 1; stage <= 4; ++stage) {
        const std::string module = "backbone.stage" + std::to_string(stage);
        x = conv_bn_silu(b, module + ".0", x, channels, channels * 2, 3, 2);
        channels *= 2;
        std::string y = conv_bn_silu(b, module + ".1.cv1", x, channels, channels / 2, 1, 1);
        y = conv_bn_silu(b, module + ".1.cv2", y, channels / 2, channels, 3, 1);
        x = b.node("Add", scope_of(module + ".1"), {x, y});
        if (stage >= 2) features.push_back(x);
    }
    const auto upsample_and_fuse = [&](const std::string &level, const std::string &coarse,
                                       int64_t coarse_channels, const std::string &fine,
                                       int64_t fine_channels) {
        const std::string reduced =
            conv_bn_silu(b, "neck.reduce" + level, coarse, coarse_channels, fine_channels, 1, 1);
        const std::string up =
            b.node("Resize", scope_of("neck.upsample" + level), {reduced, "", "upsample.scales"},
                   {string_attr("coordinate_transformation_mode", "asymmetric"),
                    float_attr("cubic_coeff_a", -0.75), string_attr("mode", "nearest"),
                    string_attr("nearest_mode", "floor")});
        const std::string cat =
            b.node("Concat", scope_of("neck"), {up, fine}, {int_attr("axis", 1)});
        return conv_bn_silu(b, "neck.fuse" + level, cat, fine_channels * 2, fine_channels, 3, 1);
    };
    const std::string p5 = features[2];
    const std::string p4 = upsample_and_fuse("4", p5, 256, features[1], 128);
    const std::string p3 = upsample_and_fuse("3", p4, 128, features[0], 64);
    const std::vector<std::pair<std::string, int64_t>> heads = {{p3, 64}, {p4, 128}, {p5, 256}};
    for (size_t level = 0; level < heads.size(); ++level) {
        const std::string output = "p" + std::to_string(level + 3);
        const int64_t extent = kSize >> (level + 3);
        b.output(output, {1, kHeadChannels, extent, extent});
        // Heads are linear: gain sqrt(1/2) makes the weights' variance 1 / fan_in.
        conv(b, "head." + output, heads[level].first, heads[level].second, kHeadChannels, 1, 1, 1,
             true, std::sqrt(0.5), output);
    }
    return b.bytes();
}

// nn.Linear on a sequence as PyTorch exports it: MatMul by the weight stored transposed
// ([in, out]), then Add of the bias. Weights of standard deviation gain / sqrt(in).
std::string linear(ModelBuilder &b, const std::string &module, const std::string &x,
                   int64_t in_features, int64_t out_features, double gain = 1.0) {
    const double stddev = gain / std::sqrt(double(in_features));
    const std::string weight = b.random_floats(module + ".weight", {in_features, out_features},
                                               [&](Random &r) { return r.normal(stddev); });
    const std::string bias =
        b.random_floats(module + ".bias", {out_features}, [](Random &r) { return r.normal(0.05); });
    const std::string product = b.node("MatMul", scope_of(module), {x, weight});
    return b.node("Add", scope_of(module), {product, bias});
}

std::string layer_norm(ModelBuilder &b, const std::string &module, const std::string &x,
                       int64_t features, const std::string &output = "") {
    const std::string scale = b.random_floats(module + ".weight", {features},
                                              [](Random &r) { return r.uniform(0.8, 1.2); });
    const std::string shift =
        b.random_floats(module + ".bias", {features}, [](Random &r) { return r.normal(0.1); });
    return b.node("LayerNormalization", scope_of(module), {x, scale, shift},
                  {int_attr("axis", -1), float_attr("epsilon", kBatchNormEpsilon)}, output);
}

// nn.GELU() (exact, not tanh) as exported before opset 20: x * 0.5 * (1 + erf(x / sqrt(2))).
std::string gelu(ModelBuilder &b, const std::string &module, const std::string &x) {
    const std::string scope = scope_of(module);
    const std::string scaled = b.node("Div", scope, {x, "gelu.sqrt2"});
    const std::string erf = b.node("Erf", scope, {scaled});
    const std::string shifted = b.node("Add", scope, {erf, "gelu.one"});
    return b.node("Mul", scope, {b.node("Mul", scope, {x, shifted}), "gelu.half"});
}

// nn.TransformerEncoderLayer (post-norm, GELU) on one sequence of 64 tokens of 128 features:
// 4-head self-attention, residual, LayerNorm, MLP 128 -> 512 -> 128, residual, LayerNorm.
std::vector<uint8_t> transformer_encoder(uint64_t seed) {
    constexpr int64_t kTokens = 64, kFeatures = 128, kHeads = 4, kHeadSize = 32, kHidden = 512;
    ModelBuilder b("transformer_encoder", seed, kTransformerOpset);
    b.input("input", {1, kTokens, kFeatures});
    b.output("output", {1, kTokens, kFeatures});
    b.int64s("self_attn.heads_shape", {4}, {1, kTokens, kHeads, kHeadSize});
    b.int64s("self_attn.merged_shape", {3}, {1, kTokens, kFeatures});
    b.floats("self_attn.scale", {}, {float(std::sqrt(double(kHeadSize)))});
    b.floats("gelu.sqrt2", {}, {float(std::sqrt(2.0))});
    b.floats("gelu.one", {}, {1.0f});
    b.floats("gelu.half", {}, {0.5f});
    const std::string attention = scope_of("self_attn");
    // [1, tokens, features] -> [1, heads, tokens, head size], or with `perm` {0, 2, 3, 1} the
    // keys transposed, [1, heads, head size, tokens].
    const auto split_heads = [&](const std::string &x, const std::vector<int64_t> &perm) {
        const std::string heads = b.node("Reshape", attention, {x, "self_attn.heads_shape"});
        return b.node("Transpose", attention, {heads}, {ints_attr("perm", perm)});
    };
    const std::string q =
        split_heads(linear(b, "self_attn.q_proj", "input", kFeatures, kFeatures), {0, 2, 1, 3});
    const std::string k =
        split_heads(linear(b, "self_attn.k_proj", "input", kFeatures, kFeatures), {0, 2, 3, 1});
    const std::string v =
        split_heads(linear(b, "self_attn.v_proj", "input", kFeatures, kFeatures), {0, 2, 1, 3});
    const std::string scores = b.node("MatMul", attention, {q, k});
    const std::string scaled = b.node("Div", attention, {scores, "self_attn.scale"});
    const std::string weights = b.node("Softmax", attention, {scaled}, {int_attr("axis", -1)});
    const std::string context = b.node("MatMul", attention, {weights, v});
    const std::string merged =
        b.node("Reshape", attention,
               {b.node("Transpose", attention, {context}, {ints_attr("perm", {0, 2, 1, 3})}),
                "self_attn.merged_shape"});
    const std::string attended = linear(b, "self_attn.out_proj", merged, kFeatures, kFeatures);
    const std::string x1 =
        layer_norm(b, "norm1", b.node("Add", "", {"input", attended}), kFeatures);
    const std::string hidden =
        gelu(b, "activation", linear(b, "linear1", x1, kFeatures, kHidden, std::sqrt(2.0)));
    const std::string mlp = linear(b, "linear2", hidden, kHidden, kFeatures);
    layer_norm(b, "norm2", b.node("Add", "", {x1, mlp}), kFeatures, "output");
    return b.bytes();
}

// The pre-quantized (QDQ) form of a model, as ONNX Runtime's quantize_static writes it from the
// model with batch norms folded: QuantizeLinear + DequantizeLinear on every activation (uint8,
// per tensor, scale and zero point from the calibrated range), DequantizeLinear of int8
// weights (symmetric, one scale per output channel, axis 0), int32 biases of scale input
// scale x weight scale. A Relu or Clip right after a Conv, Gemm or Add has no QDQ between them
// (ONNX Runtime fuses it into the op).
namespace qdq {

constexpr int kCalibrationInputs = 4;
constexpr uint64_t kCalibrationSeed = 1000;

std::vector<float> floats_of(const onnx::TensorProto &t) {
    std::vector<float> values(t.raw_data().size() / sizeof(float));
    std::memcpy(values.data(), t.raw_data().data(), values.size() * sizeof(float));
    return values;
}

template <typename T>
void set_values(onnx::TensorProto &t, std::string name, int32_t type,
                const std::vector<int64_t> &dims, const std::vector<T> &values) {
    t.Clear();
    t.set_name(name);
    t.set_data_type(type);
    for (int64_t d : dims) t.add_dims(d);
    t.set_raw_data(
        std::string(reinterpret_cast<const char *>(values.data()), values.size() * sizeof(T)));
}

// An activation's uint8 quantization: the range widened to hold 0, over 255 steps.
struct ActivationQuant {
    float scale = 1;
    uint8_t zero_point = 0;
};

ActivationQuant activation_quant(double low, double high) {
    low = std::min(low, 0.0);
    high = std::max(high, 0.0);
    if (high == low) return {};
    const float scale = float((high - low) / 255);
    const double zero_point = std::clamp(std::nearbyint(-low / double(scale)), 0.0, 255.0);
    return {scale, uint8_t(zero_point)};
}

class QdqWriter {
  public:
    QdqWriter(const std::vector<uint8_t> &float_bytes, const ModelInfo &info) : info_(info) {
        if (!model_.ParseFromArray(float_bytes.data(), int(float_bytes.size())))
            throw std::logic_error("zoo: model '" + info.name + "' does not parse");
        for (const onnx::TensorProto &t : model_.graph().initializer()) constants_[t.name()] = t;
        fold_batch_norms();
        calibrate(float_bytes);
    }

    std::vector<uint8_t> bytes() {
        onnx::GraphProto &graph = *model_.mutable_graph();
        graph.set_name(graph.name() + "_qdq");
        std::vector<onnx::NodeProto> nodes;
        add_qdq(nodes, info_.input_name);
        for (const onnx::NodeProto &original : graph.node()) {
            onnx::NodeProto node = original;
            for (int i = 0; i < node.input_size(); ++i) {
                const std::string &in = node.input(i);
                if (dequantized_.count(in)) node.set_input(i, dequantized_.at(in));
            }
            if (node.op_type() == "Conv" || node.op_type() == "Gemm")
                quantize_parameters(nodes, node, original.input(0));
            nodes.push_back(node);
            for (const std::string &out : node.output())
                if (quantized(out)) add_qdq(nodes, out);
        }
        graph.clear_node();
        for (onnx::NodeProto &n : nodes) *graph.add_node() = std::move(n);
        graph.clear_initializer();
        for (const std::string &name : used_constants(graph))
            *graph.add_initializer() = constants_.at(name);
        std::string text;
        if (!model_.SerializeToString(&text))
            throw std::logic_error("zoo: model '" + info_.name + "_qdq' does not serialize");
        return std::vector<uint8_t>(text.begin(), text.end());
    }

  private:
    // The nodes reading each tensor.
    std::map<std::string, std::vector<const onnx::NodeProto *>> readers() const {
        std::map<std::string, std::vector<const onnx::NodeProto *>> r;
        for (const onnx::NodeProto &n : model_.graph().node())
            for (const std::string &in : n.input()) r[in].push_back(&n);
        return r;
    }

    // Conv -> BatchNormalization as one Conv with the scaled weights and a bias.
    void fold_batch_norms() {
        onnx::GraphProto &graph = *model_.mutable_graph();
        std::map<std::string, onnx::NodeProto *> producer;
        for (onnx::NodeProto &n : *graph.mutable_node()) producer[n.output(0)] = &n;
        const auto read_by = readers();
        std::vector<onnx::NodeProto> kept;
        for (const onnx::NodeProto &bn : graph.node()) {
            if (bn.op_type() != "BatchNormalization") continue;
            onnx::NodeProto *conv = producer.at(bn.input(0));
            if (conv->op_type() != "Conv" || read_by.at(bn.input(0)).size() != 1)
                throw std::logic_error("zoo: a batch norm after something else than a conv");
            const std::vector<float> gamma = floats_of(constants_.at(bn.input(1)));
            const std::vector<float> beta = floats_of(constants_.at(bn.input(2)));
            const std::vector<float> mean = floats_of(constants_.at(bn.input(3)));
            const std::vector<float> var = floats_of(constants_.at(bn.input(4)));
            onnx::TensorProto &w = constants_.at(conv->input(1));
            std::vector<float> weights = floats_of(w);
            const size_t channels = gamma.size(), per_channel = weights.size() / channels;
            std::vector<float> bias(channels, 0.0f);
            if (conv->input_size() > 2) bias = floats_of(constants_.at(conv->input(2)));
            for (size_t c = 0; c < channels; ++c) {
                const double factor =
                    double(gamma[c]) / std::sqrt(double(var[c]) + kBatchNormEpsilon);
                for (size_t i = 0; i < per_channel; ++i)
                    weights[c * per_channel + i] = float(weights[c * per_channel + i] * factor);
                bias[c] = float((double(bias[c]) - mean[c]) * factor + beta[c]);
            }
            const std::vector<int64_t> dims(w.dims().begin(), w.dims().end());
            set_values(w, w.name(), onnx::TensorProto::FLOAT, dims, weights);
            const std::string bias_name = bn.input(2) + ".folded";
            set_values(constants_[bias_name], bias_name, onnx::TensorProto::FLOAT,
                       {int64_t(channels)}, bias);
            if (conv->input_size() > 2)
                conv->set_input(2, bias_name);
            else
                conv->add_input(bias_name);
            conv->set_output(0, bn.output(0));
        }
        for (const onnx::NodeProto &n : graph.node())
            if (n.op_type() != "BatchNormalization") kept.push_back(n);
        graph.clear_node();
        for (onnx::NodeProto &n : kept) *graph.add_node() = std::move(n);
    }

    // Whether activation `tensor` gets a QuantizeLinear: all of them but the result of a Conv,
    // Gemm or Add whose one reader is a Relu or a Clip.
    bool quantized(const std::string &tensor) const { return ranges_.count(tensor) != 0; }

    // The range of every quantized activation over the calibration inputs (OpenCV, fp32).
    void calibrate(const std::vector<uint8_t> &float_bytes) {
        const auto read_by = readers();
        std::vector<std::string> names;
        for (const onnx::NodeProto &n : model_.graph().node()) {
            const auto r = read_by.find(n.output(0));
            const bool fused =
                (n.op_type() == "Conv" || n.op_type() == "Gemm" || n.op_type() == "Add") &&
                r != read_by.end() && r->second.size() == 1 &&
                (r->second[0]->op_type() == "Relu" || r->second[0]->op_type() == "Clip");
            if (!fused) names.push_back(n.output(0));
        }
        // OpenCV names a node's layer "onnx_node!" and the node's name, and reads a "." in a
        // requested name as "layer.output number": in the model it runs, each node and its
        // output are "t<index>".
        onnx::ModelProto renamed;
        renamed.ParseFromArray(float_bytes.data(), int(float_bytes.size()));
        std::map<std::string, std::string> alias;
        for (onnx::NodeProto &n : *renamed.mutable_graph()->mutable_node()) {
            for (int i = 0; i < n.input_size(); ++i)
                if (alias.count(n.input(i))) n.set_input(i, alias.at(n.input(i)));
            for (int i = 0; i < n.output_size(); ++i) {
                const std::string name = "t" + std::to_string(alias.size());
                alias[n.output(i)] = name;
                n.set_output(i, name);
            }
            n.set_name(n.output(0));
        }
        for (onnx::ValueInfoProto &v : *renamed.mutable_graph()->mutable_output())
            v.set_name(alias.at(v.name()));
        std::string text;
        renamed.SerializeToString(&text);
        const std::vector<uint8_t> renamed_bytes(text.begin(), text.end());
        std::vector<std::string> aliases;
        for (const std::string &name : names) aliases.push_back("onnx_node!" + alias.at(name));
        int64_t count = 1;
        for (int64_t d : info_.input_shape) count *= d;
        for (int i = 0; i < kCalibrationInputs; ++i) {
            Random random(kCalibrationSeed + uint64_t(i));
            std::vector<int> extents(info_.input_shape.rbegin(), info_.input_shape.rend());
            Halide::Buffer<float> input(extents);
            float *data = input.data();
            for (int64_t k = 0; k < count; ++k) data[k] = float(random.normal(1.0));
            widen(info_.input_name, input);
            const std::vector<frontend::NamedTensor> results = run_opencv_bytes(
                renamed_bytes, info_.name + ".onnx", {{info_.input_name, input}}, aliases);
            for (size_t k = 0; k < names.size(); ++k) widen(names[k], results.at(k).value);
        }
    }

    void widen(const std::string &name, const Halide::Buffer<> &tensor) {
        const Halide::Buffer<float> values(tensor);
        auto [it, added] = ranges_.try_emplace(name, values.data()[0], values.data()[0]);
        for (int64_t k = 0; k < int64_t(values.number_of_elements()); ++k) {
            it->second.first = std::min(it->second.first, double(values.data()[k]));
            it->second.second = std::max(it->second.second, double(values.data()[k]));
        }
    }

    ActivationQuant quant_of(const std::string &tensor) const {
        const auto &[low, high] = ranges_.at(tensor);
        return activation_quant(low, high);
    }

    // QuantizeLinear and DequantizeLinear after `tensor`; readers take the DequantizeLinear's
    // output. A graph output keeps its name on the DequantizeLinear.
    void add_qdq(std::vector<onnx::NodeProto> &nodes, const std::string &tensor) {
        const ActivationQuant q = quant_of(tensor);
        set_values(constants_[tensor + "_scale"], tensor + "_scale", onnx::TensorProto::FLOAT, {},
                   std::vector<float>{q.scale});
        set_values(constants_[tensor + "_zero_point"], tensor + "_zero_point",
                   onnx::TensorProto::UINT8, {}, std::vector<uint8_t>{q.zero_point});
        const bool graph_output =
            std::count(info_.output_names.begin(), info_.output_names.end(), tensor) != 0;
        std::string source = tensor;
        if (graph_output) {
            source = tensor + "_QuantizeLinear_Input";
            nodes.back().set_output(0, source);
        }
        onnx::NodeProto &quantize = nodes.emplace_back();
        quantize.set_name(tensor + "_QuantizeLinear");
        quantize.set_op_type("QuantizeLinear");
        for (const std::string &in : {source, tensor + "_scale", tensor + "_zero_point"})
            quantize.add_input(in);
        quantize.add_output(tensor + "_QuantizeLinear_Output");
        onnx::NodeProto &dequantize = nodes.emplace_back();
        dequantize.set_name(tensor + "_DequantizeLinear");
        dequantize.set_op_type("DequantizeLinear");
        for (const std::string &in :
             {tensor + "_QuantizeLinear_Output", tensor + "_scale", tensor + "_zero_point"})
            dequantize.add_input(in);
        dequantize.add_output(graph_output ? tensor : tensor + "_DequantizeLinear_Output");
        if (!graph_output) dequantized_[tensor] = dequantize.output(0);
    }

    // DequantizeLinear of the int8 weights and the int32 bias of `node` (reading `input`).
    void quantize_parameters(std::vector<onnx::NodeProto> &nodes, onnx::NodeProto &node,
                             const std::string &input) {
        const onnx::TensorProto w = constants_.at(node.input(1));
        const std::vector<float> weights = floats_of(w);
        const int64_t channels = w.dims(0);
        const size_t per_channel = weights.size() / size_t(channels);
        std::vector<int8_t> ints(weights.size());
        std::vector<float> scales(static_cast<size_t>(channels));
        for (size_t c = 0; c < size_t(channels); ++c) {
            float largest = 0;
            for (size_t i = 0; i < per_channel; ++i)
                largest = std::max(largest, std::abs(weights[c * per_channel + i]));
            scales[c] = largest > 0 ? largest / 127 : 1.0f;
            for (size_t i = 0; i < per_channel; ++i)
                ints[c * per_channel + i] = int8_t(
                    std::clamp(std::nearbyint(double(weights[c * per_channel + i]) / scales[c]),
                               -127.0, 127.0));
        }
        const std::vector<int64_t> dims(w.dims().begin(), w.dims().end());
        const std::string name = w.name();
        set_values(constants_[name + "_quantized"], name + "_quantized", onnx::TensorProto::INT8,
                   dims, ints);
        set_values(constants_[name + "_scale"], name + "_scale", onnx::TensorProto::FLOAT,
                   {channels}, scales);
        set_values(constants_[name + "_zero_point"], name + "_zero_point", onnx::TensorProto::INT8,
                   {channels}, std::vector<int8_t>(size_t(channels), 0));
        node.set_input(1, dequantize(nodes, name, "_quantized"));
        if (node.input_size() < 3) return;
        const std::vector<float> bias = floats_of(constants_.at(node.input(2)));
        const float input_scale = quant_of(input).scale;
        std::vector<int32_t> bias_ints;
        std::vector<float> bias_scales;
        for (size_t c = 0; c < size_t(channels); ++c) {
            bias_scales.push_back(input_scale * scales[c]);
            bias_ints.push_back(int32_t(std::nearbyint(double(bias[c]) / bias_scales.back())));
        }
        const std::string bias_name = node.input(2);
        set_values(constants_[bias_name + "_quantized"], bias_name + "_quantized",
                   onnx::TensorProto::INT32, {channels}, bias_ints);
        set_values(constants_[bias_name + "_scale"], bias_name + "_scale", onnx::TensorProto::FLOAT,
                   {channels}, bias_scales);
        set_values(constants_[bias_name + "_zero_point"], bias_name + "_zero_point",
                   onnx::TensorProto::INT32, {channels}, std::vector<int32_t>(size_t(channels), 0));
        node.set_input(2, dequantize(nodes, bias_name, "_quantized"));
    }

    // DequantizeLinear of constant NAME + `suffix` along axis 0; returns its output.
    std::string dequantize(std::vector<onnx::NodeProto> &nodes, const std::string &name,
                           const std::string &suffix) {
        onnx::NodeProto &n = nodes.emplace_back();
        n.set_name(name + "_DequantizeLinear");
        n.set_op_type("DequantizeLinear");
        for (const std::string &in : {name + suffix, name + "_scale", name + "_zero_point"})
            n.add_input(in);
        n.add_output(name + "_DequantizeLinear_Output");
        *n.add_attribute() = int_attr("axis", 0);
        return n.output(0);
    }

    // The constants the nodes read, in the order of first use.
    std::vector<std::string> used_constants(const onnx::GraphProto &graph) const {
        std::vector<std::string> names;
        std::set<std::string> seen;
        for (const onnx::NodeProto &n : graph.node())
            for (const std::string &in : n.input())
                if (constants_.count(in) && seen.insert(in).second) names.push_back(in);
        return names;
    }

    const ModelInfo &info_;
    onnx::ModelProto model_;
    std::map<std::string, onnx::TensorProto> constants_;
    std::map<std::string, std::pair<double, double>> ranges_; // low, high
    std::map<std::string, std::string> dequantized_;          // tensor -> its DequantizeLinear's
};

} // namespace qdq

} // namespace

const std::vector<ModelInfo> &models() {
    static const std::vector<ModelInfo> all = {
        {"resnet18",
         "torchvision's ResNet-18: basic blocks [2, 2, 2, 2]",
         "input",
         {1, 3, 224, 224},
         {"logits"},
         true},
        {"resnet50",
         "torchvision's ResNet-50: bottlenecks [3, 4, 6, 3]",
         "input",
         {1, 3, 224, 224},
         {"logits"},
         true},
        {"mobilenet_v2",
         "torchvision's MobileNet-V2: inverted residuals, depthwise, ReLU6",
         "input",
         {1, 3, 224, 224},
         {"logits"},
         true},
        {"yolo_tiny",
         "a YOLO-style detector: conv backbone, upsample + concat neck, 3 heads",
         "input",
         {1, 3, 256, 256},
         {"p3", "p4", "p5"},
         true},
        {"transformer_encoder",
         "a transformer encoder layer: 4-head attention, LayerNorm, GELU MLP, on 64x128",
         "input",
         {1, 64, 128},
         {"output"}},
    };
    return all;
}

const ModelInfo &model_info(const std::string &name) {
    std::string names;
    for (const ModelInfo &m : models()) {
        if (m.name == name) return m;
        names += (names.empty() ? "" : ", ") + m.name;
    }
    throw ZooError("no model '" + name + "' in the zoo (models: " + names + ")");
}

std::vector<uint8_t> model_bytes(const std::string &name) {
    // One seed per model, so that models share no weights.
    const std::map<std::string, std::function<std::vector<uint8_t>()>> builders = {
        {"resnet18",
         [] {
             return resnet("resnet18", 18, false, {2, 2, 2, 2});
         }},
        {"resnet50",
         [] {
             return resnet("resnet50", 50, true, {3, 4, 6, 3});
         }},
        {"mobilenet_v2", [] { return mobilenet_v2(2); }},
        {"yolo_tiny", [] { return yolo(3); }},
        {"transformer_encoder", [] { return transformer_encoder(4); }},
    };
    return builders.at(model_info(name).name)();
}

std::vector<uint8_t> qdq_model_bytes(const std::string &name) {
    const ModelInfo &info = model_info(name);
    if (!info.has_qdq_form) {
        std::string names;
        for (const ModelInfo &m : models())
            if (m.has_qdq_form) names += (names.empty() ? "" : ", ") + m.name;
        throw ZooError("model '" + name +
                       "' has no pre-quantized (QDQ) form (models with one: " + names + ")");
    }
    return qdq::QdqWriter(model_bytes(name), info).bytes();
}

namespace {

std::string write_bytes(const std::vector<uint8_t> &bytes, const std::string &dir,
                        const std::string &file) {
    const std::string path = (std::filesystem::path(dir) / file).string();
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out.write(reinterpret_cast<const char *>(bytes.data()), std::streamsize(bytes.size()));
    out.close();
    if (!out) throw ZooError("cannot write '" + path + "': " + std::strerror(errno));
    return path;
}

} // namespace

std::string write_model(const std::string &name, const std::string &dir) {
    return write_bytes(model_bytes(name), dir, model_info(name).name + ".onnx");
}

std::string write_qdq_model(const std::string &name, const std::string &dir) {
    return write_bytes(qdq_model_bytes(name), dir, model_info(name).name + "_qdq.onnx");
}

} // namespace vpuc::zoo
