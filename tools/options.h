// Command-line options of the vpuc commands: one parser, so that every command treats a
// missing, empty or repeated value alike, and the --max-*-size options that set the size
// limits of the files a command reads (vpu_target/input_file.h).
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "vpu_target/input_file.h"

namespace vpuc::tools {

struct Options {
    std::vector<std::string> positional;
    std::vector<std::pair<std::string, std::string>> values; // "--name value", in order
    std::vector<std::string> flags;

    // The value of an option given at most once, or `fallback` when absent; throws naming the
    // option when it was given more than once.
    std::string get(const std::string &name, const std::string &fallback = "") const;
    // Every value of an option that may be repeated, in order.
    std::vector<std::string> all(const std::string &name) const;
    bool has(const std::string &flag) const;
};

// Reads "--name value" pairs (names in `with_value`, or the size option of a kind in
// `read_kinds`) and flags (in `flags`), in any order; other arguments are positional. Throws
// std::runtime_error naming the option for an unknown option and for a value that is
// missing, empty or another option. Sets the size limits the --max-*-size options give.
Options parse_options(const std::vector<std::string> &args, std::vector<std::string> with_value,
                      const std::vector<std::string> &flags,
                      const std::vector<files::FileKind> &read_kinds = {});

// The size options of `read_kinds`, a paragraph to end a command's usage text with (it
// starts with a blank line and ends without a newline):
//   "  --max-blob-size SIZE    blob files (default 1 GiB)"
std::string size_options_help(const std::vector<files::FileKind> &read_kinds);

// The value of `option` read as a size: a positive number of bytes, or of K, M or G
// (KiB, MiB, GiB), at most 1024G; throws std::runtime_error naming the option otherwise.
uint64_t size_option(const std::string &option, const std::string &text);

// The value of --input-shape, "data=1x3x224x224", as the input's name and its extents; throws
// std::runtime_error quoting the value otherwise.
std::pair<std::string, std::vector<int64_t>> input_shape_option(const std::string &text);

} // namespace vpuc::tools
