#include "options.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <stdexcept>

#include "command.h"

namespace vpuc::tools {

namespace {

constexpr uint64_t kMaxSize = uint64_t(1) << 40;

bool contains(const std::vector<std::string> &list, const std::string &item) {
    return std::find(list.begin(), list.end(), item) != list.end();
}

// "--name", or a short "-o" (a dash and a letter: "-1" is a value).
bool is_option(const std::string &arg) {
    return arg.rfind("--", 0) == 0 ||
           (arg.size() == 2 && arg[0] == '-' && std::isalpha(static_cast<unsigned char>(arg[1])));
}

} // namespace

std::string Options::get(const std::string &name, const std::string &fallback) const {
    const std::vector<std::string> given = all(name);
    if (given.size() > 1) throw std::runtime_error(name + " given more than once");
    return given.empty() ? fallback : given[0];
}

std::vector<std::string> Options::all(const std::string &name) const {
    std::vector<std::string> out;
    for (const auto &[k, v] : values)
        if (k == name) out.push_back(v);
    return out;
}

bool Options::has(const std::string &flag) const {
    return contains(flags, flag);
}

Options parse_options(const std::vector<std::string> &args, std::vector<std::string> with_value,
                      const std::vector<std::string> &flags,
                      const std::vector<files::FileKind> &read_kinds) {
    for (files::FileKind kind : read_kinds)
        with_value.push_back(files::file_kind_info(kind).size_option);
    Options o;
    for (size_t i = 0; i < args.size(); ++i) {
        const std::string &a = args[i];
        if (!is_option(a)) {
            o.positional.push_back(a);
        } else if (contains(with_value, a)) {
            if (i + 1 >= args.size()) throw std::runtime_error(a + " needs a value");
            const std::string &value = args[++i];
            if (value.empty()) throw std::runtime_error(a + " needs a value, got an empty one");
            if (is_option(value))
                throw std::runtime_error(a + " needs a value, got the option '" + value + "'");
            o.values.emplace_back(a, value);
        } else if (contains(flags, a)) {
            o.flags.push_back(a);
        } else {
            throw std::runtime_error("unknown option '" + a + "' (see --help)");
        }
    }
    for (files::FileKind kind : read_kinds) {
        const std::string option = files::file_kind_info(kind).size_option;
        const std::string value = o.get(option);
        if (!value.empty()) files::set_size_limit(kind, size_option(option, value));
    }
    return o;
}

std::string size_options_help(const std::vector<files::FileKind> &read_kinds) {
    std::vector<std::string> names;
    size_t width = 0;
    for (files::FileKind kind : read_kinds) {
        names.push_back(std::string(files::file_kind_info(kind).size_option) + " SIZE");
        width = std::max(width, names.back().size());
    }
    std::string help = "\nsize limits of the files read (SIZE: bytes, or with a K, M or G suffix "
                       "for KiB, MiB, GiB):";
    for (size_t i = 0; i < read_kinds.size(); ++i) {
        const files::FileKindInfo &info = files::file_kind_info(read_kinds[i]);
        help += "\n  " + names[i] + std::string(width + 2 - names[i].size(), ' ') + info.name +
                " files (default " + files::size_text(info.default_limit) + ")";
    }
    return help;
}

uint64_t size_option(const std::string &option, const std::string &text) {
    uint64_t number = 0;
    const char *begin = text.data(), *end = text.data() + text.size();
    const auto [unit_begin, error] = std::from_chars(begin, end, number);
    const std::string unit(unit_begin, end);
    uint64_t scale = 0;
    if (unit.empty())
        scale = 1;
    else if (unit == "K" || unit == "KiB" || unit == "k")
        scale = uint64_t(1) << 10;
    else if (unit == "M" || unit == "MiB" || unit == "m")
        scale = uint64_t(1) << 20;
    else if (unit == "G" || unit == "GiB" || unit == "g")
        scale = uint64_t(1) << 30;
    if (error != std::errc() || scale == 0 || number == 0 || number > kMaxSize / scale)
        throw std::runtime_error(option +
                                 " needs a size: a positive number of bytes, or of K, M or G "
                                 "(KiB, MiB, GiB), e.g. 4G, at most 1024G (got '" +
                                 text + "')");
    return number * scale;
}

std::pair<std::string, std::vector<int64_t>> input_shape_option(const std::string &text) {
    const size_t eq = text.rfind('=');
    const std::string bad = "--input-shape '" + text + "': expected NAME=1x3x224x224";
    if (eq == std::string::npos || eq == 0 || eq + 1 == text.size()) throw std::runtime_error(bad);
    std::vector<int64_t> extents;
    size_t at = eq + 1;
    while (at <= text.size()) {
        const size_t x = std::min(text.find('x', at), text.size());
        extents.push_back(integer_option("--input-shape", text.substr(at, x - at), 1, 1 << 30));
        at = x + 1;
    }
    return {text.substr(0, eq), extents};
}

} // namespace vpuc::tools
