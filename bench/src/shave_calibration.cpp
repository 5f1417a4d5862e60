// VPUNN's SHAVE kernel models against ours. docs/timing-model.md ("SHAVE") explains the model,
// the fit and the kernels.
#include "bench/shave_calibration.h"

#include <Halide.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <functional>
#include <map>

#include "codegen/shave_kernel.h"
#include "vpu_target/timing_model.h"

namespace vpuc::bench {

namespace {

using Halide::Expr;

// Launch sizes in fp16 output elements: small and large, multiples of a vector and odd ones,
// from a few vectors to a 112x112x16 activation.
const std::vector<int64_t> kSizes = {105,   1024,  3432,   6272,   16169,
                                     50176, 76800, 100352, 200704, 200711};

constexpr int kElementBytes = 2; // fp16

// VPUNN slopes above this (microseconds per output byte) are 10-1000 times those of the
// vectorised kernels: scalar reference code, not what a SHAVE's vector unit costs.
constexpr double kScalarSlopeUsPerByte = 0.002;

Expr half(double value) {
    return Expr(Halide::float16_t(value));
}

// Each kernel as Intel's computes it, in fp16 (half8 vectors): the formulas of Intel's SHAVE
// kernels for these activations, as docs/timing-model.md lists them. `p` is the layer's
// parameter where it has one (swish's beta, elu's alpha), a run-time value as in Intel's
// kernels: a constant 1 would fold away the multiply they execute.
struct KernelBody {
    std::function<Expr(Expr x, Expr p)> compute;
    bool has_parameter = false;
};

const std::map<std::string, KernelBody> &kernel_bodies() {
    using Halide::exp, Halide::max, Halide::min;
    static const std::map<std::string, KernelBody> bodies = {
        {"abs", {[](Expr x, Expr) { return Halide::abs(x); }}},
        {"exp", {[](Expr x, Expr) { return exp(x); }}},
        {"log", {[](Expr x, Expr) { return Halide::log(x); }}},
        {"sqrt", {[](Expr x, Expr) { return Halide::sqrt(x); }}},
        {"sigmoid", {[](Expr x, Expr) { return half(1) / (half(1) + exp(-x)); }}},
        {"tanh", {[](Expr x, Expr) { return Halide::tanh(x); }}},
        {"swish", {[](Expr x, Expr beta) { return x / (half(1) + exp(-beta * x)); }, true}},
        {"hswish",
         {[](Expr x, Expr) { return x * min(max(x + half(3), half(0)), half(6)) / half(6); }}},
        // The tanh approximation as Intel rewrites it: x / (1 + exp(x (a + b x^2))).
        {"gelu", {[](Expr x, Expr) {
             return x / (half(1) + exp(x * (half(-1.5957691216) + half(-0.0713548163) * x * x)));
         }}},
        {"elu",
         {[](Expr x, Expr alpha) {
              return max(x, half(0)) + alpha * (exp(min(x, half(0))) - half(1));
          },
          true}},
        {"mish", {[](Expr x, Expr) { return x * Halide::tanh(Halide::log(half(1) + exp(x))); }}},
        {"selu", {[](Expr x, Expr) {
             const Expr negative = half(1.6732632423) * (exp(min(x, half(0))) - half(1));
             return half(1.0507009873) * (max(x, half(0)) + negative);
         }}},
    };
    return bodies;
}

// The kernel's figures per output vector, counted on a large launch (tails do not weigh).
codegen::ShaveKernelCost kernel_cost(const std::string &name, const target::Target &target) {
    const KernelBody &body = kernel_bodies().at(name);
    Halide::ImageParam in(Halide::Float(16), 1, "in");
    Halide::Param<Halide::float16_t> parameter("parameter");
    Halide::Var x("x");
    Halide::Func out;
    out(x) = body.compute(in(x), parameter);
    std::vector<Halide::Argument> args = {in};
    if (body.has_parameter) args.push_back(parameter);
    return codegen::compile_shave_kernel("vpunn_" + name, out, args, target.shave_vector_bits,
                                         {kSizes.back() - kSizes.back() % 8})
        .per_vector;
}

// Our time for one launch on one SHAVE, in microseconds.
double our_microseconds(const target::Target &target, const codegen::ShaveKernelCost &cost,
                        int64_t elements) {
    target::ShaveWork work;
    work.output_elements = double(elements);
    work.vector_lanes = uint32_t(target.shave_vector_bits / (8 * kElementBytes));
    work.arith_ops_per_vector = cost.arith_ops;
    work.special_ops_per_vector = cost.special_ops;
    work.cmx_bytes_per_vector = cost.cmx_bytes;
    return target::shave_task_cycles(target, work) / target.shave_clock_mhz;
}

struct Compared {
    const target::VpunnShaveKernel *reference;
    codegen::ShaveKernelCost cost;
};

// Relative errors of `target` on `kernel` over the sizes.
std::vector<double> errors_of(const target::Target &target, const Compared &kernel) {
    std::vector<double> errors;
    for (int64_t n : kSizes) {
        const double theirs = kernel.reference->microseconds(n, kElementBytes);
        errors.push_back(std::abs(our_microseconds(target, kernel.cost, n) - theirs) / theirs);
    }
    return errors;
}

// The coefficients the fit kernels reveal: the launch cost, one SHAVE's CMX rate and the
// special-function instruction's cycles, minimising the squared log ratio of our times to
// VPUNN's over every fit kernel and size (Nelder-Mead on the logarithms).
target::ShaveTimingParams fit(target::Target target, const std::vector<Compared> &fit_kernels) {
    using Point = std::array<double, 3>;
    auto apply = [&](const Point &p) {
        target.shave_timing.launch_cycles = std::exp(p[0]);
        target.shave_timing.cmx_bytes_per_cycle = std::exp(p[1]);
        target.shave_timing.special_op_cycles = std::exp(p[2]);
    };
    auto cost = [&](const Point &p) {
        apply(p);
        double sum = 0;
        for (const Compared &k : fit_kernels)
            for (int64_t n : kSizes) {
                const double ratio = our_microseconds(target, k.cost, n) /
                                     k.reference->microseconds(n, kElementBytes);
                sum += std::log(ratio) * std::log(ratio);
            }
        return sum;
    };
    const target::ShaveTimingParams &start = target.shave_timing;
    std::array<Point, 4> simplex;
    simplex[0] = {std::log(start.launch_cycles), std::log(start.cmx_bytes_per_cycle),
                  std::log(start.special_op_cycles)};
    for (size_t i = 1; i < simplex.size(); ++i) {
        simplex[i] = simplex[0];
        simplex[i][i - 1] += 0.3;
    }
    std::array<double, 4> values;
    for (size_t i = 0; i < simplex.size(); ++i) values[i] = cost(simplex[i]);
    auto along = [](const Point &from, const Point &to, double t) {
        Point p;
        for (size_t d = 0; d < p.size(); ++d) p[d] = from[d] + t * (to[d] - from[d]);
        return p;
    };
    for (int iteration = 0; iteration < 2000; ++iteration) {
        std::array<size_t, 4> order = {0, 1, 2, 3};
        std::sort(order.begin(), order.end(),
                  [&](size_t a, size_t b) { return values[a] < values[b]; });
        const size_t best = order[0], worst = order[3], second_worst = order[2];
        if (values[worst] - values[best] < 1e-12) break;
        Point centroid = {0, 0, 0};
        for (size_t i : {order[0], order[1], order[2]})
            for (size_t d = 0; d < 3; ++d) centroid[d] += simplex[i][d] / 3;
        const Point reflected = along(centroid, simplex[worst], -1);
        const double reflected_value = cost(reflected);
        if (reflected_value < values[best]) {
            const Point expanded = along(centroid, simplex[worst], -2);
            const double expanded_value = cost(expanded);
            const bool expand = expanded_value < reflected_value;
            simplex[worst] = expand ? expanded : reflected;
            values[worst] = expand ? expanded_value : reflected_value;
        } else if (reflected_value < values[second_worst]) {
            simplex[worst] = reflected;
            values[worst] = reflected_value;
        } else {
            const Point contracted = along(centroid, simplex[worst], 0.5);
            const double contracted_value = cost(contracted);
            if (contracted_value < values[worst]) {
                simplex[worst] = contracted;
                values[worst] = contracted_value;
            } else {
                for (size_t i : {order[1], order[2], order[3]}) {
                    simplex[i] = along(simplex[best], simplex[i], 0.5);
                    values[i] = cost(simplex[i]);
                }
            }
        }
    }
    size_t best = 0;
    for (size_t i = 1; i < values.size(); ++i)
        if (values[i] < values[best]) best = i;
    apply(simplex[best]);
    return target.shave_timing;
}

const target::VpunnShaveKernel &find(const std::vector<target::VpunnShaveKernel> &reference,
                                     const std::string &origin, const std::string &name) {
    for (const auto &k : reference)
        if (k.name == name && k.inputs == 1) return k;
    throw target::CalibrationError(origin + ": no one-input kernel '" + name +
                                   "' (the SHAVE model is fitted and checked on it)");
}

std::string percent(double fraction) {
    char text[32];
    std::snprintf(text, sizeof text, "%.1f%%", 100 * fraction);
    return text;
}

} // namespace

const std::vector<std::string> &shave_fit_kernels() {
    static const std::vector<std::string> names = {"abs", "exp", "log", "sqrt"};
    return names;
}

const std::vector<std::string> &shave_check_kernels() {
    static const std::vector<std::string> names = {"sigmoid", "tanh", "swish", "hswish",
                                                   "gelu",    "elu",  "mish",  "selu"};
    return names;
}

ShaveCalibrationReport calibrate_shave_model(const std::vector<target::VpunnShaveKernel> &reference,
                                             const std::string &origin,
                                             const target::Target &target) {
    ShaveCalibrationReport report;
    report.reference = origin;
    report.timing_model = target::timing_model_label(target);
    report.sizes = kSizes;
    report.used = target.shave_timing;

    std::vector<Compared> fitted, checked;
    for (const auto &name : shave_fit_kernels())
        fitted.push_back({&find(reference, origin, name), kernel_cost(name, target)});
    for (const auto &name : shave_check_kernels())
        checked.push_back({&find(reference, origin, name), kernel_cost(name, target)});
    report.fitted = fit(target, fitted);

    std::vector<double> fit_medians, check_medians;
    auto add = [&](const Compared &k, ShaveKernelRole role, std::vector<double> &medians) {
        const std::vector<double> errors = errors_of(target, k);
        ShaveKernelResult r;
        r.name = k.reference->name;
        r.role = role;
        r.arith_ops = k.cost.arith_ops;
        r.special_ops = k.cost.special_ops;
        r.cmx_bytes = k.cost.cmx_bytes;
        r.median_error = target::error_stats(r.name, errors).median;
        r.max_error = *std::max_element(errors.begin(), errors.end());
        medians.push_back(r.median_error);
        report.kernels.push_back(r);
    };
    for (const Compared &k : fitted) add(k, ShaveKernelRole::Fit, fit_medians);
    for (const Compared &k : checked) add(k, ShaveKernelRole::Check, check_medians);
    report.fit_median = target::error_stats("fit", fit_medians).median;
    report.check_median = target::error_stats("check", check_medians).median;

    for (const auto &k : reference) {
        const bool compared =
            std::any_of(report.kernels.begin(), report.kernels.end(),
                        [&](const ShaveKernelResult &r) { return r.name == k.name; });
        if (compared) continue;
        (k.slope_us_per_byte > kScalarSlopeUsPerByte ? report.excluded_scalar
                                                     : report.excluded_unwritten)
            .push_back(k.name);
    }
    return report;
}

std::string format_shave_calibration(const ShaveCalibrationReport &report) {
    char line[256];
    std::string out = "reference: " + report.reference + " (VPUNN's SHAVE kernel models)\n";
    out += report.timing_model + "\n";
    std::snprintf(
        line, sizeof line,
        "relative error |ours - VPUNN| / VPUNN of one launch on one SHAVE, fp16, over %zu "
        "sizes (%lld to %lld elements)\n\n",
        report.sizes.size(), static_cast<long long>(report.sizes.front()),
        static_cast<long long>(report.sizes.back()));
    out += line;
    out += "               per output vector of 8\n";
    std::snprintf(line, sizeof line, "%-8s %-6s %6s %8s %6s %8s %8s\n", "kernel", "role", "ops",
                  "special", "bytes", "median", "max");
    out += line;
    for (const ShaveKernelResult &k : report.kernels) {
        std::snprintf(line, sizeof line, "%-8s %-6s %6.1f %8.1f %6.0f %8s %8s\n", k.name.c_str(),
                      k.role == ShaveKernelRole::Fit ? "fit" : "check", k.arith_ops, k.special_ops,
                      k.cmx_bytes, percent(k.median_error).c_str(), percent(k.max_error).c_str());
        out += line;
    }
    auto list = [](const std::vector<std::string> &names) {
        std::string text;
        for (const auto &n : names) text += (text.empty() ? "" : ", ") + n;
        return text;
    };
    std::snprintf(line, sizeof line,
                  "\nfitted on %s:\n  launch_cycles %.0f, cmx_bytes_per_cycle %.2f, "
                  "special_op_cycles %.2f\n",
                  list(shave_fit_kernels()).c_str(), report.fitted.launch_cycles,
                  report.fitted.cmx_bytes_per_cycle, report.fitted.special_op_cycles);
    out += line;
    std::snprintf(line, sizeof line,
                  "the target has:\n  launch_cycles %.0f, cmx_bytes_per_cycle %.2f, "
                  "special_op_cycles %.2f, arith_ops_per_cycle %.2f (not fitted)\n",
                  report.used.launch_cycles, report.used.cmx_bytes_per_cycle,
                  report.used.special_op_cycles, report.used.arith_ops_per_cycle);
    out += line;
    out += "not compared: scalar code (slope over 0.002 us/byte): " + list(report.excluded_scalar) +
           "\n";
    out += "not compared: not written as vpuc kernels: " + list(report.excluded_unwritten) + "\n";
    out += "\nfit median relative error: " + percent(report.fit_median) + "\n";
    out += "check median relative error: " + percent(report.check_median) + "\n";
    return out;
}

} // namespace vpuc::bench
