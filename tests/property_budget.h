// How long a property test searches. By default a fixed number of cases per kind, the same on
// every run. VPUC_PROPERTY_SCHEDULES=N asks for N cases per kind; VPUC_PROPERTY_MINUTES=M
// gives the test executable M minutes (fractions allowed), split evenly across its kinds,
// each running cases until its share is spent (`make test-long`). Either way case i of a kind
// is the same case, so a failure found after a long search is reproduced with
// VPUC_PROPERTY_SCHEDULES=i+1, and the failure message says so.
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>

namespace vpuc::test {

class PropertyBudget {
  public:
    // Starts the kind's share of the time, when there is a time budget.
    PropertyBudget(int default_cases, size_t kinds) : cases_(default_cases) {
        const char *count = std::getenv("VPUC_PROPERTY_SCHEDULES");
        const char *minutes = std::getenv("VPUC_PROPERTY_MINUTES");
        const bool by_count = count && *count, by_time = minutes && *minutes;
        if (by_count && by_time) {
            ADD_FAILURE() << "set VPUC_PROPERTY_SCHEDULES or VPUC_PROPERTY_MINUTES, not both";
        } else if (by_count) {
            char *end = nullptr;
            const long n = std::strtol(count, &end, 10);
            if (*end != '\0' || n < 1 || n > (1 << 30))
                ADD_FAILURE() << "VPUC_PROPERTY_SCHEDULES=" << count << ": not a positive integer";
            else
                cases_ = int(n);
        } else if (by_time) {
            char *end = nullptr;
            const double m = std::strtod(minutes, &end);
            if (*end != '\0' || !(m > 0 && m <= 1e6)) {
                ADD_FAILURE() << "VPUC_PROPERTY_MINUTES=" << minutes
                              << ": not a positive number of minutes";
            } else {
                timed_ = true;
                deadline_ =
                    Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                       std::chrono::duration<double>(m * 60 / double(kinds)));
            }
        }
    }

    // Whether case `index` (from 0) runs: the first always, the others while the count or
    // the kind's share of the time lasts.
    bool runs(int index) const {
        if (timed_) return index == 0 || Clock::now() < deadline_;
        return index < cases_;
    }

    // Printed to the failure: how to run the same cases up to `index` again.
    std::string reproduce(int index) const {
        return "reproduce with VPUC_PROPERTY_SCHEDULES=" + std::to_string(index + 1);
    }

    // One line per kind on stdout, "property conv3x3: 120 schedules, 0 failed", which
    // `make test-long` collects.
    static void report(const std::string &kind, int run, const char *what, int failed) {
        std::printf("property %s: %d %s, %d failed\n", kind.c_str(), run, what, failed);
        std::fflush(stdout);
    }

  private:
    using Clock = std::chrono::steady_clock;
    int cases_;
    bool timed_ = false;
    Clock::time_point deadline_{};
};

} // namespace vpuc::test
