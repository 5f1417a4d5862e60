#include "vpu_target/printable.h"

namespace vpuc {

std::string printable(std::string_view text, size_t max_chars) {
    static const char kHex[] = "0123456789abcdef";
    std::string out;
    for (char ch : text) {
        const auto byte = static_cast<unsigned char>(ch);
        const bool plain = byte >= 0x20 && byte < 0x7f;
        if (out.size() + (plain ? 1 : 4) > max_chars) return out + "...";
        if (plain) {
            out += ch;
        } else {
            out += "\\x";
            out += kHex[byte >> 4];
            out += kHex[byte & 15];
        }
    }
    return out;
}

} // namespace vpuc
