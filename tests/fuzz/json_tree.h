// An editable JSON document, as FlatBuffers prints a buffer (strict JSON plus the bare tokens
// inf, -inf and nan) or as a target description is written. Scalars and strings keep their
// text as written, so printing an unedited tree gives back what was parsed, numbers exact.
#pragma once

#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace vpuc::fuzz {

struct JsonNode {
    enum class Kind { Object, Array, String, Scalar };
    Kind kind = Kind::Scalar;
    // Scalar: the token (123, -4.5e3, true, null, inf). String: the contents between the
    // quotes, escapes kept as written.
    std::string text;
    std::vector<std::pair<std::string, JsonNode>> members; // Object, keys as written
    std::vector<JsonNode> elements;                        // Array

    static JsonNode scalar(std::string token);
    static JsonNode string(const std::string &raw_bytes); // escapes `raw_bytes`

    JsonNode *member(const std::string &key);
    const JsonNode *member(const std::string &key) const;
};

// Parses `text` (one value, surrounding whitespace allowed); nullopt when it is not JSON of
// the kind above or nests deeper than `max_depth`.
std::optional<JsonNode> parse_json(const std::string &text, int max_depth = 64);

// Compact JSON text.
std::string print_json(const JsonNode &node);
// Indented JSON text for people to read and diff: a member per line, scalars of an array
// packed into lines of up to 100 characters.
std::string print_json_indented(const JsonNode &node);

// The bytes a string node stands for (escapes resolved, \u as UTF-8); nullopt on a bad escape.
std::optional<std::string> unescape(const std::string &escaped);
// Escaped for a JSON string: quote, backslash and control characters as escapes.
std::string escape(const std::string &raw_bytes);

} // namespace vpuc::fuzz
