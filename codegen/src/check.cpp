#include "codegen/check.h"

#include <cmath>
#include <cstring>
#include <random>

#include "algorithms/reference.h"

namespace vpuc::codegen {

namespace {

std::vector<uint8_t> bytes_of(const Halide::Buffer<> &b) {
    const auto *p = static_cast<const uint8_t *>(b.raw_buffer()->host);
    return std::vector<uint8_t>(p, p + b.size_in_bytes());
}

// A float's bits as an integer that orders like the float, so ulps are differences.
int64_t ordered(uint64_t bits, int width) {
    const uint64_t sign = uint64_t(1) << (width - 1);
    return bits & sign ? -int64_t(bits & (sign - 1)) : int64_t(bits);
}

bool is_nan(uint64_t bits, int width) {
    const int mantissa = width == 16 ? 10 : 23;
    const uint64_t exponent = ((uint64_t(1) << (width - 1 - mantissa)) - 1) << mantissa;
    return (bits & exponent) == exponent && (bits & ((uint64_t(1) << mantissa) - 1)) != 0;
}

std::string hex(uint64_t v, int bytes) {
    char buf[24];
    std::snprintf(buf, sizeof buf, "0x%0*llx", bytes * 2, static_cast<unsigned long long>(v));
    return buf;
}

// Element `index` of a (c, x, y) or (c, x, y, n) buffer, c innermost, as coordinates.
std::string where(const dsl::TensorDesc &tensor, int64_t index) {
    const dsl::TensorDesc t = dsl::device_view(tensor);
    const int64_t c = t.shape[dsl::dims::C], w = t.shape[dsl::dims::W], h = t.shape[dsl::dims::H];
    const std::string image =
        t.shape[dsl::dims::N] > 1 ? "n " + std::to_string(index / (c * w * h)) + ", " : "";
    return image + "c " + std::to_string(index % c) + ", x " + std::to_string(index / c % w) +
           ", y " + std::to_string(index / (c * w) % h);
}

} // namespace

OutputCheck compare_output(const dsl::TensorDesc &t, const std::vector<uint8_t> &got,
                           const std::vector<uint8_t> &want, const Tolerance &tolerance) {
    OutputCheck check;
    check.name = t.name;
    const int bytes = dsl::bytes_of(t.type);
    check.elements = int64_t(want.size()) / bytes;
    if (got.size() != want.size()) {
        check.mismatches = check.elements;
        check.first_mismatch = std::to_string(got.size()) + " bytes simulated, " +
                               std::to_string(want.size()) + " expected";
        return check;
    }
    const bool is_float = t.type == dsl::ElemType::F16 || t.type == dsl::ElemType::F32;
    const int64_t allowed = t.type == dsl::ElemType::F16   ? tolerance.f16_ulp
                            : t.type == dsl::ElemType::F32 ? tolerance.f32_ulp
                                                           : 0;
    for (int64_t i = 0; i < check.elements; ++i) {
        uint64_t a = 0, b = 0;
        std::memcpy(&a, &got[size_t(i * bytes)], size_t(bytes));
        std::memcpy(&b, &want[size_t(i * bytes)], size_t(bytes));
        if (a == b) continue;
        int64_t ulps = INT64_MAX;
        if (is_float && !is_nan(a, bytes * 8) && !is_nan(b, bytes * 8))
            // +0 and -0 differ in their bits: one ulp apart, not zero.
            ulps = std::max<int64_t>(1, std::llabs(ordered(a, bytes * 8) - ordered(b, bytes * 8)));
        if (is_float && ulps != INT64_MAX) check.max_ulp = std::max(check.max_ulp, ulps);
        if (ulps <= allowed) continue;
        if (check.mismatches++ == 0)
            check.first_mismatch =
                where(t, i) + ": got " + hex(a, bytes) + ", expected " + hex(b, bytes) +
                (is_float && ulps != INT64_MAX ? " (" + std::to_string(ulps) + " ulp)" : "");
    }
    return check;
}

bool CheckResult::ok() const {
    for (const OutputCheck &o : outputs)
        if (o.mismatches) return false;
    return true;
}

std::string CheckResult::report() const {
    std::string text;
    for (const OutputCheck &o : outputs) {
        text += o.name + ": " + std::to_string(o.elements) + " elements, ";
        if (o.mismatches == 0)
            text += "all match";
        else
            text += std::to_string(o.mismatches) + " beyond the tolerance; first at " +
                    o.first_mismatch;
        if (o.max_ulp) text += " (largest difference " + std::to_string(o.max_ulp) + " ulp)";
        text += "\n";
    }
    return text;
}

Halide::Buffer<> random_buffer(const dsl::TensorDesc &tensor, uint32_t seed) {
    Halide::Buffer<> b = algorithms::make_buffer(tensor);
    std::mt19937 rng(seed);
    std::uniform_real_distribution<float> real(-4.0f, 4.0f);
    if (tensor.type == dsl::ElemType::F16) {
        Halide::Buffer<Halide::float16_t>(b).for_each_value(
            [&](Halide::float16_t &v) { v = Halide::float16_t(real(rng)); });
    } else if (tensor.type == dsl::ElemType::F32) {
        Halide::Buffer<float>(b).for_each_value([&](float &v) { v = real(rng); });
    } else {
        auto *bytes = static_cast<uint8_t *>(b.raw_buffer()->host);
        for (size_t i = 0; i < b.size_in_bytes(); ++i) bytes[i] = uint8_t(rng());
    }
    return b;
}

CheckResult check_against_reference(const dsl::Graph &graph, const target::Target &target,
                                    const CheckOptions &options) {
    std::vector<Halide::Buffer<>> inputs = options.inputs;
    if (inputs.empty()) {
        uint32_t seed = options.seed;
        for (const dsl::Layer &in : graph.inputs())
            inputs.push_back(random_buffer(in.output(), seed++));
    }
    CheckResult result;
    result.blob = lower(graph, target, options.lower);
    // The blob's sections hold each tensor in its memory order; buffers are (c, x, y, n).
    std::vector<std::vector<uint8_t>> input_bytes;
    for (size_t i = 0; i < inputs.size(); ++i)
        input_bytes.push_back(
            algorithms::to_memory_order(graph.inputs().at(i).output(), inputs[i]));
    const std::vector<Halide::Buffer<>> expected = algorithms::run_reference(graph, inputs);
    result.run = sim::Simulator(target, result.blob).run(input_bytes);
    for (size_t i = 0; i < expected.size(); ++i) {
        const dsl::TensorDesc &t = graph.outputs()[i].output();
        std::vector<uint8_t> got;
        if (i < result.run.outputs.size() &&
            int64_t(result.run.outputs[i].size()) == dsl::device_view(t).bytes())
            got = bytes_of(algorithms::from_memory_order(t, result.run.outputs[i]));
        else if (i < result.run.outputs.size())
            got = result.run.outputs[i]; // its size is the mismatch compare_output reports
        result.outputs.push_back(compare_output(t, got, bytes_of(expected[i]), options.tolerance));
    }
    return result;
}

} // namespace vpuc::codegen
