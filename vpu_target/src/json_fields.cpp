#include "json_fields.h"

#include <limits>
#include <sstream>

#include "vpu_target/printable.h"

namespace vpuc::target::detail {

std::string FieldReader::field_path(const std::string &key) const {
    return path_.empty() ? key : path_ + "." + key;
}

void FieldReader::fail(const std::string &key, const std::string &what) const {
    throw TargetError(origin_ + ": " + printable(field_path(key) + ": " + what, kMessageTextChars));
}

const nlohmann::json &FieldReader::get(const std::string &key) const {
    auto it = node_.find(key);
    if (it == node_.end()) fail(key, "missing field");
    return *it;
}

void FieldReader::only_keys(std::initializer_list<const char *> known) const {
    for (const auto &item : node_.items()) {
        bool found = false;
        for (const char *k : known) found = found || item.key() == k;
        if (!found) fail(item.key(), "unknown field");
    }
}

FieldReader FieldReader::object(const std::string &key) const {
    const auto &v = get(key);
    if (!v.is_object()) fail(key, "must be an object");
    return FieldReader(v, field_path(key), origin_);
}

const nlohmann::json &FieldReader::array(const std::string &key) const {
    const auto &v = get(key);
    if (!v.is_array() || v.empty()) fail(key, "must be a non-empty array");
    return v;
}

FieldReader FieldReader::element(size_t index) const {
    const auto &v = node_.at(index);
    std::string path = path_ + "[" + std::to_string(index) + "]";
    if (!v.is_object())
        throw TargetError(origin_ + ": " + printable(path, kMessageTextChars) +
                          ": must be an object");
    return FieldReader(v, path, origin_);
}

std::string FieldReader::string(const std::string &key) const {
    const auto &v = get(key);
    if (!v.is_string() || v.get<std::string>().empty()) fail(key, "must be a non-empty string");
    return v.get<std::string>();
}

bool FieldReader::boolean(const std::string &key) const {
    const auto &v = get(key);
    if (!v.is_boolean()) fail(key, "must be true or false");
    return v.get<bool>();
}

int64_t FieldReader::integer(const std::string &key, int64_t min, int64_t max) const {
    const auto &v = get(key);
    if (!v.is_number()) fail(key, "must be an integer");
    // nlohmann::json keeps non-negative integers unsigned: one beyond int64_t must not wrap.
    const bool integral = v.is_number_integer() &&
                          !(v.is_number_unsigned() &&
                            v.get<uint64_t>() > uint64_t(std::numeric_limits<int64_t>::max()));
    if (!integral || v.get<int64_t>() < min || v.get<int64_t>() > max) {
        std::ostringstream os;
        os << "must be " << (v.is_number_integer() ? "" : "an integer ") << "in [" << min << ", "
           << max << "], got " << v.dump();
        fail(key, os.str());
    }
    return v.get<int64_t>();
}

double FieldReader::real(const std::string &key, double min, double max) const {
    const auto &v = get(key);
    if (!v.is_number()) fail(key, "must be a number");
    double value = v.get<double>();
    if (!(value >= min && value <= max)) {
        std::ostringstream os;
        os << "must be in [" << min << ", " << max << "], got " << v.dump();
        fail(key, os.str());
    }
    return value;
}

} // namespace vpuc::target::detail
