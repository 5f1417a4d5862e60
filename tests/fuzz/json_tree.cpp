#include "json_tree.h"

#include <cctype>
#include <cstdint>
#include <cstdio>

namespace vpuc::fuzz {

JsonNode JsonNode::scalar(std::string token) {
    JsonNode node;
    node.kind = Kind::Scalar;
    node.text = std::move(token);
    return node;
}

JsonNode JsonNode::string(const std::string &raw_bytes) {
    JsonNode node;
    node.kind = Kind::String;
    node.text = escape(raw_bytes);
    return node;
}

JsonNode *JsonNode::member(const std::string &key) {
    for (auto &[name, value] : members)
        if (name == key) return &value;
    return nullptr;
}

const JsonNode *JsonNode::member(const std::string &key) const {
    for (const auto &[name, value] : members)
        if (name == key) return &value;
    return nullptr;
}

namespace {

class Reader {
  public:
    Reader(const std::string &text, int max_depth) : text_(text), max_depth_(max_depth) {}

    std::optional<JsonNode> document() {
        std::optional<JsonNode> node = value(0);
        skip_space();
        if (!node || at_ != text_.size()) return std::nullopt;
        return node;
    }

  private:
    void skip_space() {
        while (at_ < text_.size() && std::isspace(static_cast<unsigned char>(text_[at_]))) ++at_;
    }

    bool take(char c) {
        skip_space();
        if (at_ < text_.size() && text_[at_] == c) {
            ++at_;
            return true;
        }
        return false;
    }

    // The contents of a string whose opening quote was just taken, escapes as written.
    std::optional<std::string> string_contents() {
        size_t start = at_;
        while (at_ < text_.size() && text_[at_] != '"') at_ += text_[at_] == '\\' ? 2 : 1;
        if (at_ >= text_.size()) return std::nullopt;
        return text_.substr(start, at_++ - start);
    }

    std::optional<JsonNode> value(int depth) {
        if (depth > max_depth_) return std::nullopt;
        skip_space();
        if (at_ >= text_.size()) return std::nullopt;
        JsonNode node;
        if (take('{')) {
            node.kind = JsonNode::Kind::Object;
            if (take('}')) return node;
            do {
                if (!take('"')) return std::nullopt;
                std::optional<std::string> key = string_contents();
                if (!key || !take(':')) return std::nullopt;
                std::optional<JsonNode> member = value(depth + 1);
                if (!member) return std::nullopt;
                node.members.emplace_back(std::move(*key), std::move(*member));
            } while (take(','));
            if (!take('}')) return std::nullopt;
        } else if (take('[')) {
            node.kind = JsonNode::Kind::Array;
            if (take(']')) return node;
            do {
                std::optional<JsonNode> element = value(depth + 1);
                if (!element) return std::nullopt;
                node.elements.push_back(std::move(*element));
            } while (take(','));
            if (!take(']')) return std::nullopt;
        } else if (take('"')) {
            node.kind = JsonNode::Kind::String;
            std::optional<std::string> contents = string_contents();
            if (!contents) return std::nullopt;
            node.text = std::move(*contents);
        } else {
            size_t start = at_;
            while (at_ < text_.size() &&
                   (std::isalnum(static_cast<unsigned char>(text_[at_])) || text_[at_] == '-' ||
                    text_[at_] == '+' || text_[at_] == '.' || text_[at_] == '_'))
                ++at_;
            if (at_ == start) return std::nullopt;
            node.text = text_.substr(start, at_ - start);
        }
        return node;
    }

    const std::string &text_;
    const int max_depth_;
    size_t at_ = 0;
};

void print(const JsonNode &node, std::string &out) {
    switch (node.kind) {
    case JsonNode::Kind::Object:
        out += '{';
        for (size_t i = 0; i < node.members.size(); ++i) {
            if (i) out += ',';
            out += '"';
            out += node.members[i].first;
            out += "\":";
            print(node.members[i].second, out);
        }
        out += '}';
        break;
    case JsonNode::Kind::Array:
        out += '[';
        for (size_t i = 0; i < node.elements.size(); ++i) {
            if (i) out += ',';
            print(node.elements[i], out);
        }
        out += ']';
        break;
    case JsonNode::Kind::String:
        out += '"';
        out += node.text;
        out += '"';
        break;
    case JsonNode::Kind::Scalar:
        out += node.text;
        break;
    }
}

constexpr size_t kLineChars = 100;

bool is_leaf(const JsonNode &node) {
    return node.kind == JsonNode::Kind::String || node.kind == JsonNode::Kind::Scalar;
}

void print_indented(const JsonNode &node, size_t indent, std::string &out) {
    const std::string inner(indent + 2, ' ');
    if (node.kind == JsonNode::Kind::Object && !node.members.empty()) {
        out += "{\n";
        for (size_t i = 0; i < node.members.size(); ++i) {
            out += inner + '"' + node.members[i].first + "\": ";
            print_indented(node.members[i].second, indent + 2, out);
            out += i + 1 < node.members.size() ? ",\n" : "\n";
        }
        out += std::string(indent, ' ') + '}';
    } else if (node.kind == JsonNode::Kind::Array && !node.elements.empty()) {
        bool leaves = true;
        for (const JsonNode &e : node.elements) leaves = leaves && is_leaf(e);
        if (leaves && print_json(node).size() + indent < kLineChars / 2) {
            for (size_t i = 0; i < node.elements.size(); ++i)
                out += (i ? ", " : "[") + print_json(node.elements[i]);
            out += ']';
            return;
        }
        out += "[\n" + inner;
        size_t column = inner.size();
        for (size_t i = 0; i < node.elements.size(); ++i) {
            std::string element;
            if (leaves)
                element = print_json(node.elements[i]);
            else
                print_indented(node.elements[i], indent + 2, element);
            const bool last = i + 1 == node.elements.size();
            if (i && (!leaves || column + element.size() + 2 > kLineChars)) {
                out += "\n" + inner;
                column = inner.size();
            } else if (i) {
                out += ' ';
                ++column;
            }
            out += element + (last ? "" : ",");
            column += element.size() + 1;
        }
        out += '\n' + std::string(indent, ' ') + ']';
    } else {
        print(node, out);
    }
}

void append_utf8(uint32_t code, std::string &out) {
    if (code < 0x80) {
        out += char(code);
    } else if (code < 0x800) {
        out += char(0xC0 | (code >> 6));
        out += char(0x80 | (code & 0x3F));
    } else if (code < 0x10000) {
        out += char(0xE0 | (code >> 12));
        out += char(0x80 | ((code >> 6) & 0x3F));
        out += char(0x80 | (code & 0x3F));
    } else {
        out += char(0xF0 | (code >> 18));
        out += char(0x80 | ((code >> 12) & 0x3F));
        out += char(0x80 | ((code >> 6) & 0x3F));
        out += char(0x80 | (code & 0x3F));
    }
}

} // namespace

std::optional<JsonNode> parse_json(const std::string &text, int max_depth) {
    return Reader(text, max_depth).document();
}

std::string print_json(const JsonNode &node) {
    std::string out;
    print(node, out);
    return out;
}

std::string print_json_indented(const JsonNode &node) {
    std::string out;
    print_indented(node, 0, out);
    return out + '\n';
}

std::optional<std::string> unescape(const std::string &escaped) {
    std::string out;
    for (size_t i = 0; i < escaped.size(); ++i) {
        if (escaped[i] != '\\') {
            out += escaped[i];
            continue;
        }
        if (++i >= escaped.size()) return std::nullopt;
        switch (escaped[i]) {
        case '"':
            out += '"';
            break;
        case '\\':
            out += '\\';
            break;
        case '/':
            out += '/';
            break;
        case 'b':
            out += '\b';
            break;
        case 'f':
            out += '\f';
            break;
        case 'n':
            out += '\n';
            break;
        case 'r':
            out += '\r';
            break;
        case 't':
            out += '\t';
            break;
        case 'u': {
            if (i + 4 >= escaped.size()) return std::nullopt;
            uint32_t code = 0;
            for (int k = 1; k <= 4; ++k) {
                char c = escaped[i + k];
                if (!std::isxdigit(static_cast<unsigned char>(c))) return std::nullopt;
                code = code * 16 + uint32_t(std::isdigit(static_cast<unsigned char>(c))
                                                ? c - '0'
                                                : std::tolower(c) - 'a' + 10);
            }
            i += 4;
            append_utf8(code, out);
            break;
        }
        default:
            return std::nullopt;
        }
    }
    return out;
}

std::string escape(const std::string &raw_bytes) {
    std::string out;
    for (char c : raw_bytes) {
        if (c == '"' || c == '\\') {
            out += '\\';
            out += c;
        } else if (static_cast<unsigned char>(c) < 0x20) {
            char code[8];
            std::snprintf(code, sizeof code, "\\u%04x", static_cast<unsigned char>(c));
            out += code;
        } else {
            out += c;
        }
    }
    return out;
}

} // namespace vpuc::fuzz
