// Reads typed, range-checked fields out of a JSON document; every error names the field's
// full path (e.g. "vpu27.json: dpu.clock_mhz: must be > 0, got -5").
#pragma once

#include <initializer_list>
#include <nlohmann/json.hpp>
#include <string>

#include "vpu_target/target.h"

namespace vpuc::target::detail {

// Text from the file (keys, values, the JSON parser's report) goes into messages escaped and
// cut after this many characters (vpu_target/printable.h).
constexpr size_t kMessageTextChars = 200;

class FieldReader {
  public:
    FieldReader(const nlohmann::json &node, std::string path, std::string origin)
        : node_(node), path_(std::move(path)), origin_(std::move(origin)) {}

    bool has(const std::string &key) const { return node_.contains(key); }
    // Fails on a key not in `known`, so that a misspelt optional field is not silently ignored.
    void only_keys(std::initializer_list<const char *> known) const;
    FieldReader object(const std::string &key) const;
    const nlohmann::json &array(const std::string &key) const;
    std::string string(const std::string &key) const;
    bool boolean(const std::string &key) const;
    // Integers and reals with an inclusive range; out-of-range values are nonsensical. A value
    // outside it (however large, fractional for an integer) is reported as written in the file.
    int64_t integer(const std::string &key, int64_t min, int64_t max) const;
    double real(const std::string &key, double min, double max) const;
    FieldReader element(size_t index) const;

    [[noreturn]] void fail(const std::string &key, const std::string &what) const;
    std::string field_path(const std::string &key) const;

  private:
    const nlohmann::json &get(const std::string &key) const;

    const nlohmann::json &node_;
    std::string path_;
    std::string origin_;
};

// Fills the timing-model coefficients from the "timing" section.
void parse_timing_section(const FieldReader &timing, Target &target);

} // namespace vpuc::target::detail
