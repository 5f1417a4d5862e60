// A layer's attributes as data: op-specific values (strides, pads, axes, activation) and
// constant tensors (weights, bias, requantization), by name, in the order they were set.
// Graph passes and the ONNX importer read and rewrite them; the layer registry
// (dsl/registry.h) rebuilds the layer's algorithm from them.
#pragma once

#include <Halide.h>

#include <cstdint>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "vpu_target/error.h"

namespace vpuc::dsl {

enum class AttrType { Int, Float, Ints, Floats, String, Tensor };

const char *to_string(AttrType t);
// "i8", "u16", "f32", "bool", ... as tensor attributes print their element type.
const char *type_name(const Halide::Type &t);

// Tensor values are dense buffers whose every dimension starts at 0.
using AttrValue = std::variant<int64_t, double, std::vector<int64_t>, std::vector<double>,
                               std::string, Halide::Buffer<>>;

AttrType type_of(const AttrValue &v);

// An attribute that is missing, of the wrong type or out of range. The message names the layer
// (or op) and the attribute.
class AttrError : public Error {
  public:
    using Error::Error;
};

class Attrs {
  public:
    // Sets `name`, keeping its position if it was set before. Throws AttrError on a tensor
    // that is undefined, not dense, or does not start at 0.
    Attrs &set(const std::string &name, AttrValue value);

    bool has(const std::string &name) const;
    const AttrValue &at(const std::string &name) const; // throws AttrError when absent
    void erase(const std::string &name);

    // Typed reads; throw AttrError naming `name` when absent or of another type.
    int64_t get_int(const std::string &name) const;
    double get_float(const std::string &name) const; // an Int reads as a Float too
    std::vector<int64_t> get_ints(const std::string &name) const;
    std::vector<double> get_floats(const std::string &name) const;
    const std::string &get_string(const std::string &name) const;
    const Halide::Buffer<> &get_tensor(const std::string &name) const;

    const std::vector<std::pair<std::string, AttrValue>> &entries() const { return entries_; }
    bool empty() const { return entries_.empty(); }

    // Same names, order and values (tensors compared by type, shape and bytes).
    bool operator==(const Attrs &o) const;
    bool operator!=(const Attrs &o) const { return !(*this == o); }

  private:
    std::vector<std::pair<std::string, AttrValue>> entries_;
};

// The printed form of a value, as the graph printer writes it: 3, 0.5, [1,1], [0.5,2],
// "relu" (with \\, \", \n and \r escaped), and tensors as tensor<i8:16x3x3x32> followed,
// with `tensor_data`, by their bytes in hex in parentheses. Floats print with enough digits to
// read back exactly.
std::string to_string(const AttrValue &v, bool tensor_data = false);

// Reads one printed value at text[pos], advancing pos past it; throws AttrError naming
// `what` on malformed text.
AttrValue parse_attr_value(const std::string &text, size_t &pos, const std::string &what);

} // namespace vpuc::dsl
