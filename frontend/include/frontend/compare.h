// Comparing a tensor with its reference, as `vpuc compare` does for tensor files and as a
// conformance test does for a network's outputs.
//
// Two tensors of the same numpy shape are compared element by element, in order. When both
// have integer (or bool) types they must be equal, whatever their widths. Otherwise, when one
// or both are floats, every element must be close, |a - b| <= atol + rtol * |b| with b the
// reference's (numpy.isclose's rule), an infinity only close to the same infinity and a NaN on
// either side never close (two NaNs included); and their cosine similarity must be at least
// min_cosine.
#pragma once

#include <Halide.h>

#include <cstdint>
#include <string>

namespace vpuc::frontend {

struct Tolerance {
    double atol = 1e-2;
    double rtol = 1e-2;
    double min_cosine = 0.99; // floats only
    // A NaN is close to a NaN at the same element (numpy.testing.assert_allclose's rule, which
    // ONNX's backend test runner uses); otherwise a NaN is never close.
    bool nan_equals_nan = false;
};

struct TensorComparison {
    bool shapes_match = false;
    bool exact = false; // integers, compared for equality
    int64_t elements = 0;
    // Elements that are not equal (integers) or not close (floats), and the flat index, in C
    // order, of the first of them (-1 for none).
    int64_t mismatches = 0;
    int64_t first_mismatch = -1;
    // Cosine similarity of the two tensors as vectors: 1 when both are all zeros, 0 when only
    // one is (it has no direction to match), NaN when either holds a NaN or an infinity. NaN
    // when the shapes differ, as are the errors.
    double cosine = 0;
    // Of |a - b| over the elements (0 where a == b, infinities included): NaN when any element
    // is NaN on either side, 0 for no elements.
    double max_abs_error = 0;
    double mean_abs_error = 0;
    bool passed = false;
    // Why it failed, for people ("3 of 10 elements not within 0.01 + 0.01 * |reference|, the
    // first at [0, 4]: 0.52 vs 0.48"); empty when it passed.
    std::string reason;
};

// `actual` against `reference`. Their types may differ (an fp16 result against an fp32
// reference); their layouts and mins do not matter, only their extents. Throws
// TensorFileError for a type without a numpy dtype (frontend/tensor_file.h).
TensorComparison compare_tensors(const Halide::Buffer<> &actual, const Halide::Buffer<> &reference,
                                 const Tolerance &tolerance = {});

} // namespace vpuc::frontend
