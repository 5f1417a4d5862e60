#include "bench/layers.h"

#include <algorithm>
#include <chrono>
#include <exception>
#include <functional>
#include <map>
#include <optional>
#include <random>
#include <set>

#include "algorithms/layers.h"
#include "codegen/dpu_match.h"
#include "codegen/lower.h"
#include "schedules/default_schedule.h"
#include "vpu_target/simulator.h"

namespace vpuc::bench {

namespace {

// Weights (ic, k, k, oc) with per-channel bias and requantization, as a trained int8 layer.
algorithms::QuantWeights quant_weights(int64_t ic, int k, int64_t oc, std::mt19937 &rng) {
    std::uniform_int_distribution<int> weight(-100, 100), bias(-2000, 2000);
    algorithms::QuantWeights qw;
    qw.weights = Halide::Buffer<int8_t>(int(ic), k, k, int(oc));
    qw.weights.for_each_value([&](int8_t &v) { v = int8_t(weight(rng)); });
    for (int64_t c = 0; c < oc; ++c) {
        qw.bias.push_back(bias(rng));
        qw.requant.push_back(algorithms::fixed_point(0.004 + 0.0001 * double(c % 16)));
    }
    qw.output_type = dsl::ElemType::U8;
    qw.output_quant = dsl::Quant::per_tensor(0.05f, 10);
    return qw;
}

algorithms::FloatWeights float_weights(int64_t ic, int k, int64_t oc, std::mt19937 &rng) {
    std::uniform_real_distribution<float> weight(-1, 1);
    algorithms::FloatWeights fw;
    fw.weights = Halide::Buffer<Halide::float16_t>(int(ic), k, k, int(oc));
    fw.weights.for_each_value([&](Halide::float16_t &v) { v = Halide::float16_t(weight(rng)); });
    for (int64_t c = 0; c < oc; ++c) fw.bias.push_back(weight(rng));
    return fw;
}

int64_t bytes_per_element(Precision precision) {
    return precision == Precision::Int8 ? 1 : 2;
}

// The layer's name in graphs: an identifier, unlike the spec's display name.
const char *layer_name(LayerSpec::Kind kind) {
    switch (kind) {
    case LayerSpec::Kind::Conv:
        return "conv";
    case LayerSpec::Kind::Depthwise:
        return "dwconv";
    case LayerSpec::Kind::Softmax:
        return "softmax";
    case LayerSpec::Kind::Sigmoid:
        return "sigmoid";
    }
    return "layer";
}

} // namespace

dsl::TensorDesc activation(const std::string &name, int64_t c, int64_t w, int64_t h,
                           Precision precision) {
    dsl::TensorDesc t;
    t.name = name;
    t.shape = dsl::Shape({1, c, h, w});
    t.order = dsl::DimsOrder::NHWC();
    if (precision == Precision::Int8) {
        t.type = dsl::ElemType::U8;
        t.quant = dsl::Quant::per_tensor(0.05f, 120);
    } else {
        t.type = dsl::ElemType::F16;
    }
    return t;
}

const char *to_string(Precision precision) {
    return precision == Precision::Int8 ? "int8" : "fp16";
}

int64_t LayerSpec::out_w() const {
    return (in_w + 2 * pad - kernel) / stride + 1;
}

int64_t LayerSpec::out_h() const {
    return (in_h + 2 * pad - kernel) / stride + 1;
}

int64_t LayerSpec::macs() const {
    const int64_t taps = int64_t(kernel) * kernel;
    switch (kind) {
    case Kind::Conv:
        return out_w() * out_h() * out_c * in_c * taps;
    case Kind::Depthwise:
        return out_w() * out_h() * in_c * taps;
    case Kind::Softmax:
    case Kind::Sigmoid:
        return 0;
    }
    return 0;
}

int64_t LayerSpec::weight_elements() const {
    const int64_t taps = int64_t(kernel) * kernel;
    switch (kind) {
    case Kind::Conv:
        return out_c * in_c * taps;
    case Kind::Depthwise:
        return in_c * taps;
    case Kind::Softmax:
    case Kind::Sigmoid:
        return 0;
    }
    return 0;
}

namespace {

// "conv3x3 56x56x64->64": the kind and kernel (and stride), then width x height x channels of
// the input, and the output channels of a convolution; a softmax over one pixel gives its
// channels alone.
std::string shape_name(const LayerSpec &spec) {
    const std::string kernel = std::to_string(spec.kernel) + "x" + std::to_string(spec.kernel) +
                               (spec.stride > 1 ? "/" + std::to_string(spec.stride) : "");
    const std::string input = std::to_string(spec.in_w) + "x" + std::to_string(spec.in_h) + "x" +
                              std::to_string(spec.in_c);
    switch (spec.kind) {
    case LayerSpec::Kind::Conv:
        return "conv" + kernel + " " + input + "->" + std::to_string(spec.out_c);
    case LayerSpec::Kind::Depthwise:
        return "dwconv" + kernel + " " + input;
    case LayerSpec::Kind::Softmax:
        return "softmax " + (spec.in_w == 1 && spec.in_h == 1 ? std::to_string(spec.in_c) : input);
    case LayerSpec::Kind::Sigmoid:
        return "sigmoid " + input;
    }
    return "?";
}

} // namespace

LayerSpec named(LayerSpec spec) {
    spec.name = shape_name(spec);
    return spec;
}

const std::vector<LayerSpec> &standard_layers() {
    using K = LayerSpec::Kind;
    static const std::vector<LayerSpec> layers = {
        named({"", K::Conv, 64, 56, 56, 64, 3, 1, 1}),
        named({"", K::Conv, 256, 28, 28, 512, 1, 1, 0}),
        named({"", K::Depthwise, 32, 112, 112, 32, 3, 1, 1}),
        named({"", K::Conv, 3, 224, 224, 64, 7, 2, 3}),
        named({"", K::Softmax, 1000, 1, 1, 1000, 1, 1, 0}),
    };
    return layers;
}

LayerSpec with_height(const LayerSpec &spec, int64_t height) {
    LayerSpec taller = spec;
    taller.in_h = height;
    return named(taller);
}

const LayerSpec &scaling_layer() {
    return standard_layers().front();
}

dsl::Graph build_graph(const LayerSpec &spec, Precision precision) {
    // A fixed seed per shape: the same layer gets the same constants in every run.
    std::mt19937 rng(uint32_t(spec.in_c * 7919 + spec.out_c * 104729 + spec.kernel));
    dsl::Layer in =
        dsl::Layer::input(activation("input", spec.in_c, spec.in_w, spec.in_h, precision));
    const std::string name = layer_name(spec.kind);
    algorithms::Conv2dParams p;
    p.stride_w = p.stride_h = spec.stride;
    p.pad_left = p.pad_right = p.pad_top = p.pad_bottom = spec.pad;
    p.activation = algorithms::Activation::relu();
    const bool int8 = precision == Precision::Int8;
    dsl::Layer layer;
    switch (spec.kind) {
    case LayerSpec::Kind::Conv:
        layer = int8 ? algorithms::conv2d(name, in,
                                          quant_weights(spec.in_c, spec.kernel, spec.out_c, rng), p)
                     : algorithms::conv2d(
                           name, in, float_weights(spec.in_c, spec.kernel, spec.out_c, rng), p);
        break;
    case LayerSpec::Kind::Depthwise:
        layer = int8 ? algorithms::depthwise_conv2d(
                           name, in, quant_weights(1, spec.kernel, spec.in_c, rng), p)
                     : algorithms::depthwise_conv2d(
                           name, in, float_weights(1, spec.kernel, spec.in_c, rng), p);
        break;
    case LayerSpec::Kind::Softmax:
        layer = algorithms::softmax(name, in);
        break;
    case LayerSpec::Kind::Sigmoid:
        layer = algorithms::sigmoid(name, in);
        break;
    }
    return dsl::Graph(spec.name, {layer});
}

int64_t ddr_bytes(const LayerSpec &spec, Precision precision) {
    const int64_t out_c = spec.kind == LayerSpec::Kind::Conv ? spec.out_c : spec.in_c;
    const int64_t elements = spec.in_c * spec.in_w * spec.in_h + spec.weight_elements() +
                             out_c * spec.out_w() * spec.out_h();
    return elements * bytes_per_element(precision);
}

Roofline roofline(const LayerSpec &spec, Precision precision, const target::Target &target) {
    const int macs_per_cycle = target.macs_per_cycle(
        precision == Precision::Int8 ? target::DType::I8 : target::DType::F16);
    const double peak_macs_per_cycle = double(macs_per_cycle) * target.dpus_per_tile * target.tiles;
    Roofline r;
    r.compute_ns = double(spec.macs()) / peak_macs_per_cycle * 1e3 / target.dpu_clock_mhz;
    r.ddr_ns = double(ddr_bytes(spec, precision)) / target.ddr_bandwidth_gbps; // B / (B/ns)
    return r;
}

double ms_since(std::chrono::steady_clock::time_point start) {
    return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
        .count();
}

int64_t graph_ddr_bytes(const dsl::Graph &graph) {
    int64_t bytes = 0;
    for (const dsl::Layer &in : graph.inputs()) bytes += in.output().bytes();
    for (const dsl::Layer &out : graph.outputs()) bytes += out.output().bytes();
    for (const dsl::Layer &layer : graph.layers())
        for (const auto &[name, value] : layer.attrs().entries())
            if (const auto *t = std::get_if<Halide::Buffer<>>(&value))
                bytes += int64_t(t->size_in_bytes());
    return bytes;
}

Measurement measure_graph(const dsl::Graph &graph, const target::Target &target) {
    Measurement m;
    const dsl::Layer layer = graph.outputs().front();
    std::vector<uint8_t> blob;
    std::map<std::string, dsl::Schedule> schedules; // as compiled, defaults included
    try {
        const auto start = std::chrono::steady_clock::now();
        codegen::LowerOptions options;
        options.schedules = &schedules;
        blob = codegen::lower(graph, target, options);
        m.compile_ms = ms_since(start);
    } catch (const std::exception &e) {
        m.error = std::string("compile: ") + e.what();
        return m;
    }
    m.schedule = schedules.at(layer.name()).to_string();
    m.blob = blob;
    try {
        sim::Simulator simulator(target, std::move(blob));
        const sim::RunResult result = simulator.run({}, sim::Mode::TimingOnly);
        m.latency_ns = result.latency_ns;
        m.latency_cycles = result.latency_dpu_cycles;
        std::set<uint32_t> tiles_used;
        if (const auto *queues = simulator.blob().queues())
            for (uint32_t i = 0; i < queues->size(); ++i) {
                const auto *q = queues->Get(i);
                // The simulator reports one engine per queue, in the queues' order.
                const double busy_ns = result.engines.at(i).busy_ns;
                if (q->engine() == blob::EngineKind::Dma) {
                    m.dma_busy_ns = std::max(m.dma_busy_ns, busy_ns);
                    continue;
                }
                if (q->engine() == blob::EngineKind::Shave)
                    m.shave_busy_ns = std::max(m.shave_busy_ns, busy_ns);
                if (q->tasks()->size() > 0) tiles_used.insert(q->tile());
            }
        m.tiles_used = int(tiles_used.size());
    } catch (const std::exception &e) {
        m.error = std::string("simulate: ") + e.what();
    }
    return m;
}

namespace {

// Builds the layer, lets `schedule_layer` set its schedule (or leave it to lower()), compiles
// and simulates it.
Measurement measure_scheduled(const LayerSpec &spec, Precision precision,
                              const target::Target &target,
                              const std::function<void(dsl::Layer &)> &schedule_layer) {
    std::optional<dsl::Graph> graph;
    try {
        graph = build_graph(spec, precision);
        dsl::Layer layer = graph->outputs().front();
        schedule_layer(layer);
    } catch (const std::exception &e) {
        Measurement m;
        m.error = std::string("build: ") + e.what();
        return m;
    }
    return measure_graph(*graph, target);
}

} // namespace

Measurement measure(const LayerSpec &spec, Precision precision, const target::Target &target,
                    int tiles) {
    return measure_scheduled(spec, precision, target, [&](dsl::Layer &layer) {
        if (tiles > 0)
            layer.schedule() = schedules::default_schedule(
                layer, target, tiles, codegen::dpu_weight_bytes(layer, target));
    });
}

Measurement measure(const LayerSpec &spec, Precision precision, const target::Target &target,
                    const dsl::Schedule &schedule) {
    return measure_scheduled(spec, precision, target,
                             [&](dsl::Layer &layer) { layer.schedule() = schedule; });
}

} // namespace vpuc::bench
