// Independent jobs run on every core: the compiler's embarrassingly parallel steps (SHAVE
// kernels, lookup tables, conformance tests), each a Halide compilation that takes a core for
// tenths of a second. Halide compiles on several threads at once.
#pragma once

#include <cstddef>
#include <functional>

namespace vpuc {

// Runs job(0) to job(count - 1) on `threads` threads (0: one per core), the calling thread
// among them, each index once, and returns when all have finished. Jobs must not depend on each
// other's order. When jobs throw, the others still run, and the exception of the lowest index
// is rethrown: the error a serial loop would have reported first.
void run_in_parallel(size_t count, const std::function<void(size_t)> &job, unsigned threads = 0);

} // namespace vpuc
