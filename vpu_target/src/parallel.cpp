#include "vpu_target/parallel.h"

#include <algorithm>
#include <atomic>
#include <exception>
#include <thread>
#include <vector>

namespace vpuc {

void run_in_parallel(size_t count, const std::function<void(size_t)> &job, unsigned threads) {
    if (threads == 0) threads = std::max(1u, std::thread::hardware_concurrency());
    std::atomic<size_t> next{0};
    std::vector<std::exception_ptr> errors(count);
    const auto work = [&] {
        for (size_t i = next++; i < count; i = next++) {
            try {
                job(i);
            } catch (...) {
                errors[i] = std::current_exception();
            }
        }
    };
    std::vector<std::thread> workers;
    for (size_t t = 1; t < std::min(count, size_t(threads)); ++t) workers.emplace_back(work);
    work();
    for (std::thread &worker : workers) worker.join();
    for (const std::exception_ptr &error : errors)
        if (error) std::rethrow_exception(error);
}

} // namespace vpuc
