// The contract the schedule fuzzers and regression inputs hold Schedule to: text is accepted
// or rejected with a ScheduleError (anything else escapes: a finding), and an accepted
// schedule round-trips through JSON exactly unless a name is not UTF-8, and through its printed
// chain unless a name is one the chain syntax cannot hold (dsl/schedule.h).
#pragma once

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "dsl/schedule.h"

namespace vpuc::fuzz {

// Well-formed UTF-8: no stray continuation bytes, overlong forms, surrogates or code points
// past U+10FFFF.
inline bool is_utf8(const std::string &text) {
    for (size_t i = 0; i < text.size();) {
        const auto byte = [&](size_t k) { return i + k < text.size() ? uint8_t(text[i + k]) : 0; };
        const uint8_t lead = byte(0);
        if (lead < 0x80) {
            ++i;
            continue;
        }
        size_t length = 0;
        uint8_t low = 0x80, high = 0xBF; // the range of the second byte
        if (lead >= 0xC2 && lead <= 0xDF) {
            length = 2;
        } else if (lead >= 0xE0 && lead <= 0xEF) {
            length = 3;
            if (lead == 0xE0) low = 0xA0;
            if (lead == 0xED) high = 0x9F;
        } else if (lead >= 0xF0 && lead <= 0xF4) {
            length = 4;
            if (lead == 0xF0) low = 0x90;
            if (lead == 0xF4) high = 0x8F;
        } else {
            return false;
        }
        if (byte(1) < low || byte(1) > high) return false;
        for (size_t k = 2; k < length; ++k)
            if (byte(k) < 0x80 || byte(k) > 0xBF) return false;
        i += length;
    }
    return true;
}

// Whether every name of the schedule passes `ok`.
template <typename Predicate> bool all_names(const dsl::Schedule &schedule, Predicate ok) {
    for (const dsl::Directive &d : schedule.directives()) {
        if (!ok(d.name)) return false;
        for (const std::string &loop : d.loops)
            if (!ok(loop)) return false;
    }
    return true;
}

// How an accepted schedule fails to round-trip, or an empty string.
inline std::string round_trip_violation(const dsl::Schedule &schedule) {
    try {
        const dsl::Schedule again = dsl::Schedule::from_json(schedule.to_json());
        if (again != schedule && all_names(schedule, is_utf8))
            return "from_json(to_json()) differs";
    } catch (const dsl::ScheduleError &e) {
        return std::string("from_json(to_json()) throws: ") + e.what();
    }
    // A chain cannot hold an empty loop name (on_dpu's empty name prints as on_dpu()), nor a
    // name with white space or the chain's punctuation.
    bool chain_can_hold = all_names(schedule, [](const std::string &name) {
        return name.find_first_of(" \t\n\v\f\r,(){}") == std::string::npos;
    });
    for (const dsl::Directive &d : schedule.directives())
        for (const std::string &loop : d.loops) chain_can_hold = chain_can_hold && !loop.empty();
    if (!chain_can_hold) return "";
    const std::string chain = schedule.to_string();
    try {
        if (dsl::Schedule::parse(chain) != schedule) return "parse(to_string()) differs: " + chain;
    } catch (const dsl::ScheduleError &e) {
        return "parse(to_string()) throws: " + std::string(e.what()) + "; chain: " + chain;
    }
    return "";
}

// A libFuzzer input read by `read` (Schedule::parse or Schedule::from_json) and held to the
// contract; a violation aborts, so that libFuzzer keeps the input.
inline int fuzz_schedule(const uint8_t *data, size_t size,
                         dsl::Schedule (*read)(const std::string &)) {
    dsl::Schedule schedule;
    try {
        schedule = read(std::string(reinterpret_cast<const char *>(data), size));
    } catch (const dsl::ScheduleError &) {
        return 0;
    }
    const std::string violation = round_trip_violation(schedule);
    if (!violation.empty()) {
        std::fprintf(stderr, "CONTRACT VIOLATION: %s\nschedule: %s\n", violation.c_str(),
                     schedule.to_json().c_str());
        std::abort();
    }
    return 0;
}

} // namespace vpuc::fuzz
