// The message of what a call throws, for tests of error messages.
#pragma once

#include <exception>
#include <functional>
#include <string>

namespace vpuc::testing {

// What `f` throws (its what()), or "" when it returns.
inline std::string error_of(const std::function<void()> &f) {
    try {
        f();
    } catch (const std::exception &e) {
        return e.what();
    }
    return "";
}

} // namespace vpuc::testing
