#include "dsl/attrs.h"

#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace vpuc::dsl {

const char *type_name(const Halide::Type &t) {
    if (t.is_float()) return t.bits() == 16 ? "f16" : t.bits() == 32 ? "f32" : "f64";
    if (t.is_bool()) return "bool";
    const bool u = t.is_uint();
    switch (t.bits()) {
    case 8:
        return u ? "u8" : "i8";
    case 16:
        return u ? "u16" : "i16";
    case 32:
        return u ? "u32" : "i32";
    case 64:
        return u ? "u64" : "i64";
    }
    return "?";
}

namespace {

bool parse_type_name(const std::string &s, Halide::Type &out) {
    static const std::pair<const char *, Halide::Type> known[] = {
        {"bool", Halide::Bool()},   {"i8", Halide::Int(8)},     {"u8", Halide::UInt(8)},
        {"i16", Halide::Int(16)},   {"u16", Halide::UInt(16)},  {"i32", Halide::Int(32)},
        {"u32", Halide::UInt(32)},  {"i64", Halide::Int(64)},   {"u64", Halide::UInt(64)},
        {"f16", Halide::Float(16)}, {"f32", Halide::Float(32)}, {"f64", Halide::Float(64)},
    };
    for (const auto &[name, type] : known)
        if (s == name) {
            out = type;
            return true;
        }
    return false;
}

bool dense_from_zero(const Halide::Buffer<> &b) {
    int64_t stride = 1;
    for (int d = 0; d < b.dimensions(); ++d) {
        if (b.dim(d).min() != 0 || b.dim(d).stride() != stride) return false;
        stride *= b.dim(d).extent();
    }
    return true;
}

std::string float_text(double v) {
    if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
    if (std::isnan(v)) return "nan";
    char buf[40];
    std::snprintf(buf, sizeof buf, "%.17g", v);
    // A float that reads back as an Int would change the attribute's type.
    if (!std::strpbrk(buf, ".eE")) std::strcat(buf, ".0");
    return buf;
}

std::string tensor_text(const Halide::Buffer<> &b, bool with_data) {
    std::string s = std::string("tensor<") + type_name(b.type()) + ":";
    for (int d = 0; d < b.dimensions(); ++d)
        s += (d ? "x" : "") + std::to_string(b.dim(d).extent());
    s += ">";
    if (!with_data) return s;
    static const char hex[] = "0123456789abcdef";
    const auto *bytes = static_cast<const uint8_t *>(b.raw_buffer()->host);
    s += "(";
    for (size_t i = 0; i < b.size_in_bytes(); ++i) {
        s += hex[bytes[i] >> 4];
        s += hex[bytes[i] & 15];
    }
    return s + ")";
}

class ValueParser {
  public:
    ValueParser(const std::string &text, size_t &pos, const std::string &what)
        : text_(text), pos_(pos), what_(what) {}

    AttrValue value() {
        skip_space();
        if (pos_ >= text_.size()) fail("expected a value");
        const char c = text_[pos_];
        if (c == '"') return string();
        if (c == '[') return list();
        if (text_.compare(pos_, 7, "tensor<") == 0) return tensor();
        bool is_float = false;
        const std::string token = number(is_float);
        if (is_float) return std::strtod(token.c_str(), nullptr);
        return int64_t(std::strtoll(token.c_str(), nullptr, 10));
    }

  private:
    [[noreturn]] void fail(const std::string &why) const {
        throw AttrError(what_ + ": " + why + " at column " + std::to_string(pos_ + 1));
    }
    void skip_space() {
        while (pos_ < text_.size() && std::isspace(static_cast<unsigned char>(text_[pos_]))) ++pos_;
    }
    void expect(char c) {
        skip_space();
        if (pos_ >= text_.size() || text_[pos_] != c) fail(std::string("expected '") + c + "'");
        ++pos_;
    }

    // A decimal integer or float, or inf, -inf, nan.
    std::string number(bool &is_float) {
        const size_t start = pos_;
        if (pos_ < text_.size() && (text_[pos_] == '-' || text_[pos_] == '+')) ++pos_;
        for (const char *word : {"inf", "nan"})
            if (text_.compare(pos_, 3, word) == 0) {
                pos_ += 3;
                is_float = true;
                return text_.substr(start, pos_ - start);
            }
        size_t digits = 0;
        while (pos_ < text_.size()) {
            const char c = text_[pos_];
            if (std::isdigit(static_cast<unsigned char>(c))) {
                ++digits;
            } else if (c == '.' || c == 'e' || c == 'E' ||
                       ((c == '-' || c == '+') &&
                        (text_[pos_ - 1] == 'e' || text_[pos_ - 1] == 'E'))) {
                is_float = true;
            } else {
                break;
            }
            ++pos_;
        }
        if (digits == 0) {
            pos_ = start;
            fail("expected a number, a string, a list or a tensor");
        }
        const std::string token = text_.substr(start, pos_ - start);
        char *end = nullptr;
        errno = 0;
        if (is_float)
            std::strtod(token.c_str(), &end);
        else
            std::strtoll(token.c_str(), &end, 10);
        if (*end != '\0' || errno == ERANGE) {
            pos_ = start;
            fail("malformed or out-of-range number '" + token + "'");
        }
        return token;
    }

    std::string string() {
        expect('"');
        std::string s;
        while (pos_ < text_.size() && text_[pos_] != '"') {
            if (text_[pos_] == '\\' && pos_ + 1 < text_.size()) {
                const char escaped = text_[++pos_];
                s += escaped == 'n' ? '\n' : escaped == 'r' ? '\r' : escaped;
                ++pos_;
                continue;
            }
            s += text_[pos_++];
        }
        expect('"');
        return s;
    }

    AttrValue list() {
        expect('[');
        std::vector<int64_t> ints;
        std::vector<double> floats;
        bool any_float = false;
        skip_space();
        while (pos_ < text_.size() && text_[pos_] != ']') {
            if (!ints.empty() || !floats.empty()) expect(',');
            skip_space();
            bool is_float = false;
            const std::string token = number(is_float);
            any_float |= is_float;
            floats.push_back(std::strtod(token.c_str(), nullptr));
            ints.push_back(is_float ? 0 : std::strtoll(token.c_str(), nullptr, 10));
            skip_space();
        }
        expect(']');
        if (any_float) return floats;
        return ints;
    }

    AttrValue tensor() {
        pos_ += 7; // "tensor<"
        const size_t colon = text_.find(':', pos_);
        if (colon == std::string::npos) fail("expected ':' after the tensor's element type");
        Halide::Type type;
        if (!parse_type_name(text_.substr(pos_, colon - pos_), type))
            fail("unknown element type '" + text_.substr(pos_, colon - pos_) + "'");
        pos_ = colon + 1;
        std::vector<int> extents;
        int64_t elements = 1;
        while (pos_ < text_.size() && text_[pos_] != '>') {
            if (!extents.empty()) expect('x');
            bool is_float = false;
            const std::string token = number(is_float);
            const long long extent = std::strtoll(token.c_str(), nullptr, 10);
            if (is_float || extent < 1 || extent > (1 << 30) || elements > (int64_t(1) << 32))
                fail("tensor extent '" + token + "' is not a positive integer below 2^30");
            extents.push_back(int(extent));
            elements *= extent;
        }
        expect('>');
        if (elements > (int64_t(1) << 32)) fail("tensor of more than 2^32 elements");
        expect('(');
        const int64_t bytes = elements * type.bytes();
        if (int64_t(text_.size() - pos_) < 2 * bytes + 1)
            fail("tensor data shorter than its shape");
        Halide::Buffer<> b(type, extents);
        auto *out = static_cast<uint8_t *>(b.raw_buffer()->host);
        for (int64_t i = 0; i < bytes; ++i) {
            int v = 0;
            for (int k = 0; k < 2; ++k) {
                const char c = char(std::tolower(static_cast<unsigned char>(text_[pos_++])));
                const char *at = std::strchr("0123456789abcdef", c);
                if (c == '\0' || !at) fail("tensor data is not hex");
                v = v * 16 + int(at - "0123456789abcdef");
            }
            out[i] = uint8_t(v);
        }
        expect(')');
        return b;
    }

    const std::string &text_;
    size_t &pos_;
    const std::string &what_;
};

} // namespace

const char *to_string(AttrType t) {
    switch (t) {
    case AttrType::Int:
        return "int";
    case AttrType::Float:
        return "float";
    case AttrType::Ints:
        return "ints";
    case AttrType::Floats:
        return "floats";
    case AttrType::String:
        return "string";
    case AttrType::Tensor:
        return "tensor";
    }
    return "?";
}

AttrType type_of(const AttrValue &v) {
    return static_cast<AttrType>(v.index());
}

Attrs &Attrs::set(const std::string &name, AttrValue value) {
    if (auto *b = std::get_if<Halide::Buffer<>>(&value)) {
        if (!b->defined()) throw AttrError("attribute '" + name + "': an undefined tensor");
        if (!dense_from_zero(*b))
            throw AttrError("attribute '" + name +
                            "': a tensor must be dense, every dimension starting at 0");
    }
    for (auto &[n, v] : entries_)
        if (n == name) {
            v = std::move(value);
            return *this;
        }
    entries_.emplace_back(name, std::move(value));
    return *this;
}

bool Attrs::has(const std::string &name) const {
    for (const auto &e : entries_)
        if (e.first == name) return true;
    return false;
}

const AttrValue &Attrs::at(const std::string &name) const {
    for (const auto &e : entries_)
        if (e.first == name) return e.second;
    throw AttrError("no attribute '" + name + "'");
}

void Attrs::erase(const std::string &name) {
    for (auto it = entries_.begin(); it != entries_.end(); ++it)
        if (it->first == name) {
            entries_.erase(it);
            return;
        }
}

namespace {
template <typename T> const T &typed(const Attrs &a, const std::string &name, AttrType want) {
    const AttrValue &v = a.at(name);
    if (const T *t = std::get_if<T>(&v)) return *t;
    throw AttrError("attribute '" + name + "' is " + to_string(type_of(v)) + ", not " +
                    to_string(want));
}
} // namespace

int64_t Attrs::get_int(const std::string &name) const {
    return typed<int64_t>(*this, name, AttrType::Int);
}
double Attrs::get_float(const std::string &name) const {
    if (const auto *i = std::get_if<int64_t>(&at(name))) return double(*i);
    return typed<double>(*this, name, AttrType::Float);
}
std::vector<int64_t> Attrs::get_ints(const std::string &name) const {
    return typed<std::vector<int64_t>>(*this, name, AttrType::Ints);
}
std::vector<double> Attrs::get_floats(const std::string &name) const {
    if (const auto *i = std::get_if<std::vector<int64_t>>(&at(name)))
        return std::vector<double>(i->begin(), i->end());
    return typed<std::vector<double>>(*this, name, AttrType::Floats);
}
const std::string &Attrs::get_string(const std::string &name) const {
    return typed<std::string>(*this, name, AttrType::String);
}
const Halide::Buffer<> &Attrs::get_tensor(const std::string &name) const {
    return typed<Halide::Buffer<>>(*this, name, AttrType::Tensor);
}

bool Attrs::operator==(const Attrs &o) const {
    if (entries_.size() != o.entries_.size()) return false;
    for (size_t i = 0; i < entries_.size(); ++i) {
        const auto &[na, va] = entries_[i];
        const auto &[nb, vb] = o.entries_[i];
        if (na != nb || va.index() != vb.index()) return false;
        if (const auto *ta = std::get_if<Halide::Buffer<>>(&va)) {
            const auto &tb = std::get<Halide::Buffer<>>(vb);
            if (ta->type() != tb.type() || ta->dimensions() != tb.dimensions()) return false;
            for (int d = 0; d < ta->dimensions(); ++d)
                if (ta->dim(d).extent() != tb.dim(d).extent()) return false;
            if (std::memcmp(ta->raw_buffer()->host, tb.raw_buffer()->host, ta->size_in_bytes()))
                return false;
        } else if (to_string(va) != to_string(vb)) {
            // Printed forms compare floats bit for bit, NaN included.
            return false;
        }
    }
    return true;
}

std::string to_string(const AttrValue &v, bool tensor_data) {
    struct Printer {
        bool data;
        std::string operator()(int64_t i) const { return std::to_string(i); }
        std::string operator()(double d) const { return float_text(d); }
        std::string operator()(const std::vector<int64_t> &l) const {
            std::string s = "[";
            for (size_t i = 0; i < l.size(); ++i) s += (i ? "," : "") + std::to_string(l[i]);
            return s + "]";
        }
        std::string operator()(const std::vector<double> &l) const {
            std::string s = "[";
            for (size_t i = 0; i < l.size(); ++i) s += (i ? "," : "") + float_text(l[i]);
            return s + "]";
        }
        std::string operator()(const std::string &s) const {
            std::string out = "\"";
            // Line breaks escaped too: the graph text is read line by line.
            for (char c : s) {
                if (c == '\n' || c == '\r') {
                    out += c == '\n' ? "\\n" : "\\r";
                    continue;
                }
                if (c == '"' || c == '\\') out += '\\';
                out += c;
            }
            return out + "\"";
        }
        std::string operator()(const Halide::Buffer<> &b) const { return tensor_text(b, data); }
    };
    return std::visit(Printer{tensor_data}, v);
}

AttrValue parse_attr_value(const std::string &text, size_t &pos, const std::string &what) {
    return ValueParser(text, pos, what).value();
}

} // namespace vpuc::dsl
