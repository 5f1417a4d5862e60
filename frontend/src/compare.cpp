#include "frontend/compare.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <string>
#include <type_traits>
#include <vector>

#include "frontend/tensor_file.h"

namespace vpuc::frontend {

namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
// Elements are converted a chunk at a time, so that the type dispatch stays out of the loops.
constexpr int64_t kChunk = 4096;

// An integer of any width, exactly: uint64 values above INT64_MAX fit no int64. Equal values
// of different types are equal here.
struct ExactInt {
    bool negative;
    uint64_t bits;
    bool operator==(const ExactInt &other) const {
        return negative == other.negative && bits == other.bits;
    }
    std::string text() const {
        return negative ? std::to_string(int64_t(bits)) : std::to_string(bits);
    }
};

template <typename T> ExactInt exact_int(T value) {
    if constexpr (std::is_signed_v<T>) return {value < 0, uint64_t(int64_t(value))};
    return {false, uint64_t(value)};
}

// Elements [start, start + count) of a buffer in C order, as doubles and, for integer types,
// exactly.
class Elements {
  public:
    explicit Elements(const Halide::Buffer<> &buffer) : buffer_(dense(buffer)) {}

    void load(int64_t start, int64_t count) {
        reals_.resize(size_t(count));
        ints_.resize(size_t(count));
        visit_element_type(buffer_.type(), [&](auto element) {
            using T = decltype(element);
            const T *p = static_cast<const T *>(buffer_.data()) + start;
            for (int64_t i = 0; i < count; ++i) {
                reals_[size_t(i)] = double(p[i]);
                if constexpr (std::is_integral_v<T>) ints_[size_t(i)] = exact_int(p[i]);
            }
        });
    }

    double real(int64_t i) const { return reals_[size_t(i)]; }
    const ExactInt &integer(int64_t i) const { return ints_[size_t(i)]; }

  private:
    Halide::Buffer<> buffer_;
    std::vector<double> reals_;
    std::vector<ExactInt> ints_;
};

bool same_extents(const Halide::Buffer<> &a, const Halide::Buffer<> &b) {
    if (a.dimensions() != b.dimensions()) return false;
    for (int d = 0; d < a.dimensions(); ++d)
        if (a.dim(d).extent() != b.dim(d).extent()) return false;
    return true;
}

// The numpy index of flat element `flat`: "[0, 4]".
std::string index_text(const Halide::Buffer<> &buffer, int64_t flat) {
    std::vector<int64_t> index(size_t(buffer.dimensions()));
    for (int d = 0; d < buffer.dimensions(); ++d) {
        index[size_t(d)] = flat % buffer.dim(d).extent();
        flat /= buffer.dim(d).extent();
    }
    std::string text = "[";
    for (size_t i = index.size(); i-- > 0;) text += std::to_string(index[i]) + (i ? ", " : "");
    return text + "]";
}

std::string real_text(double value) {
    char text[32];
    std::snprintf(text, sizeof text, "%.7g", value);
    return text;
}

// Cosine similarity, with each side scaled by its largest magnitude so that no sum overflows.
double cosine_similarity(Elements &a, Elements &b, int64_t elements) {
    double max_a = 0, max_b = 0;
    for (int64_t start = 0; start < elements; start += kChunk) {
        const int64_t count = std::min(kChunk, elements - start);
        a.load(start, count);
        b.load(start, count);
        for (int64_t i = 0; i < count; ++i) {
            if (!std::isfinite(a.real(i)) || !std::isfinite(b.real(i))) return kNaN;
            max_a = std::max(max_a, std::abs(a.real(i)));
            max_b = std::max(max_b, std::abs(b.real(i)));
        }
    }
    if (max_a == 0 || max_b == 0) return max_a == max_b ? 1 : 0;
    double dot = 0, norm_a = 0, norm_b = 0;
    for (int64_t start = 0; start < elements; start += kChunk) {
        const int64_t count = std::min(kChunk, elements - start);
        a.load(start, count);
        b.load(start, count);
        for (int64_t i = 0; i < count; ++i) {
            const double x = a.real(i) / max_a, y = b.real(i) / max_b;
            dot += x * y;
            norm_a += x * x;
            norm_b += y * y;
        }
    }
    return std::clamp(dot / std::sqrt(norm_a * norm_b), -1.0, 1.0);
}

} // namespace

TensorComparison compare_tensors(const Halide::Buffer<> &actual, const Halide::Buffer<> &reference,
                                 const Tolerance &tolerance) {
    TensorComparison c;
    c.cosine = c.max_abs_error = c.mean_abs_error = kNaN;
    c.exact = !actual.type().is_float() && !reference.type().is_float();
    c.shapes_match = same_extents(actual, reference);
    if (!c.shapes_match) {
        c.reason = "shape " + shape_text(actual) + " differs from the reference's " +
                   shape_text(reference);
        return c;
    }
    Elements a(actual), b(reference);
    c.elements = int64_t(actual.number_of_elements());

    double max_error = 0, sum_error = 0;
    bool any_nan = false;
    std::string first_values;
    for (int64_t start = 0; start < c.elements; start += kChunk) {
        const int64_t count = std::min(kChunk, c.elements - start);
        a.load(start, count);
        b.load(start, count);
        for (int64_t i = 0; i < count; ++i) {
            const double x = a.real(i), y = b.real(i);
            // Equal infinities differ by nothing; otherwise a NaN or an infinity propagates.
            const double error = x == y ? 0 : std::abs(x - y);
            if (std::isnan(error)) {
                any_nan = true;
            } else {
                max_error = std::max(max_error, error);
                sum_error += error;
            }
            bool close;
            if (c.exact)
                close = a.integer(i) == b.integer(i);
            else if (std::isinf(x) || std::isinf(y))
                close = x == y;
            else if (std::isnan(x) && std::isnan(y))
                close = tolerance.nan_equals_nan;
            else // false for a NaN
                close = error <= tolerance.atol + tolerance.rtol * std::abs(y);
            if (close) continue;
            if (c.mismatches++ == 0) {
                c.first_mismatch = start + i;
                first_values = c.exact ? a.integer(i).text() + " vs " + b.integer(i).text()
                                       : real_text(x) + " vs " + real_text(y);
            }
        }
    }
    c.max_abs_error = any_nan ? kNaN : max_error;
    c.mean_abs_error = any_nan ? kNaN : c.elements ? sum_error / double(c.elements) : 0;
    c.cosine = cosine_similarity(a, b, c.elements);

    std::vector<std::string> reasons;
    if (c.mismatches) {
        const std::string how = c.exact ? "differ"
                                        : "not within " + real_text(tolerance.atol) + " + " +
                                              real_text(tolerance.rtol) + " * |reference|";
        reasons.push_back(std::to_string(c.mismatches) + " of " + std::to_string(c.elements) +
                          " elements " + how + ", the first at " +
                          index_text(actual, c.first_mismatch) + ": " + first_values);
    }
    if (!c.exact && !(c.cosine >= tolerance.min_cosine))
        reasons.push_back(std::isnan(c.cosine) ? "cosine undefined (a NaN or an infinity)"
                                               : "cosine " + real_text(c.cosine) + " below " +
                                                     real_text(tolerance.min_cosine));
    for (const std::string &r : reasons) c.reason += (c.reason.empty() ? "" : "; ") + r;
    c.passed = reasons.empty();
    return c;
}

} // namespace vpuc::frontend
