// Text from a file or a blob made safe to put in a message: such text may hold anything, and a
// hostile name must not flood or drive the terminal that shows the message.
#pragma once

#include <cstddef>
#include <limits>
#include <string>
#include <string_view>

namespace vpuc {

constexpr size_t kPrintableChars = 80;
constexpr size_t kWholeText = std::numeric_limits<size_t>::max(); // as max_chars: no cut

// `text` with control characters, DEL and bytes >= 0x80 written as \xNN, cut after
// `max_chars` characters of output with "..." appended. Its output is printable ASCII, so
// applying it again (a message quoting a message) changes nothing but the length.
std::string printable(std::string_view text, size_t max_chars = kPrintableChars);

} // namespace vpuc
