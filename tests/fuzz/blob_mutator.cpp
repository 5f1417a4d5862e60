#include "blob_mutator.h"

#include <flatbuffers/idl.h>
#include <flatbuffers/reflection.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iterator>
#include <stdexcept>

#include "json_tree.h"
#include "vpu_target/blob.h"

namespace vpuc::fuzz {

// vpu_target/schema/blob.fbs, embedded at build time (embed_text.cmake).
extern const char *const kBlobSchemaText;

namespace {

__extension__ typedef __int128 Int128;

using flatbuffers::BaseType;
using flatbuffers::Type;

// Attempts at a field mutation that packs back before giving up on a blob.
constexpr int kAttempts = 8;
// Vectors of more scalars than this (constants, kernel code, digests) are one site: a few of
// their elements change at a time.
constexpr size_t kListedScalarElements = 16;

// ---- Values ------------------------------------------------------------------------------

std::string to_text(Int128 value) {
    if (value == 0) return "0";
    bool negative = value < 0;
    std::string digits;
    while (value != 0) {
        int digit = int(value % 10);
        digits += char('0' + (negative ? -digit : digit));
        value /= 10;
    }
    if (negative) digits += '-';
    return std::string(digits.rbegin(), digits.rend());
}

std::optional<Int128> integer_of(const std::string &token) {
    if (token.empty()) return std::nullopt;
    size_t at = token[0] == '-' ? 1 : 0;
    if (at == token.size()) return std::nullopt;
    Int128 value = 0;
    for (; at < token.size(); ++at) {
        if (token[at] < '0' || token[at] > '9' || value > (Int128(1) << 100)) return std::nullopt;
        value = value * 10 + (token[at] - '0');
    }
    return token[0] == '-' ? -value : value;
}

struct Range {
    Int128 low, high;
};

Range range_of(BaseType type) {
    const int bits = 8 * int(flatbuffers::SizeOf(type));
    if (flatbuffers::IsUnsigned(type)) return {0, (Int128(1) << bits) - 1};
    return {-(Int128(1) << (bits - 1)), (Int128(1) << (bits - 1)) - 1};
}

class Draw {
  public:
    explicit Draw(std::mt19937_64 &rng) : rng_(rng) {}
    uint64_t below(uint64_t n) { return n ? rng_() % n : 0; }
    bool one_in(uint64_t n) { return below(n) == 0; }
    uint64_t bits() { return rng_(); }
    template <typename T> const T &pick(const std::vector<T> &from) {
        return from[below(from.size())];
    }

  private:
    std::mt19937_64 &rng_;
};

// Boundaries of the integer widths and sizes near powers of two.
constexpr Int128 kInterestingIntegers[] = {0,
                                           1,
                                           2,
                                           3,
                                           4,
                                           7,
                                           8,
                                           15,
                                           16,
                                           17,
                                           31,
                                           32,
                                           63,
                                           64,
                                           127,
                                           128,
                                           255,
                                           256,
                                           1023,
                                           1024,
                                           4095,
                                           4096,
                                           65535,
                                           65536,
                                           (Int128(1) << 31) - 1,
                                           Int128(1) << 31,
                                           (Int128(1) << 32) - 1,
                                           Int128(1) << 32,
                                           (Int128(1) << 63) - 1,
                                           Int128(1) << 63,
                                           (Int128(1) << 64) - 1,
                                           -1,
                                           -2,
                                           -128,
                                           -129,
                                           -32768,
                                           -(Int128(1) << 31),
                                           -(Int128(1) << 63)};

// Zeros, infinities, NaN, the float denormal, normal and maximum limits, the fp16 maximum and
// its rounding edge, the smallest fp16 normal, a double far outside float.
constexpr const char *kInterestingFloats[] = {"0.0",
                                              "-0.0",
                                              "1.0",
                                              "-1.0",
                                              "0.5",
                                              "2.0",
                                              "1e-45",
                                              "1.17549435e-38",
                                              "3.40282347e+38",
                                              "65504.0",
                                              "65520.0",
                                              "6.1e-05",
                                              "inf",
                                              "-inf",
                                              "nan",
                                              "1e+300",
                                              "-1e+300",
                                              "4294967296.0"};

// One of `current`'s neighbours, a boundary, or a value seen elsewhere in the blob.
Int128 interesting_integer(Draw &draw, Int128 current, const std::vector<Int128> &seen) {
    switch (draw.below(8)) {
    case 0:
    case 1:
        return kInterestingIntegers[draw.below(std::size(kInterestingIntegers))];
    case 2:
        return current + Int128(int64_t(draw.below(33))) - 16;
    case 3:
        return current * 2;
    case 4:
        return draw.one_in(2) ? current / 2 : -current;
    case 5:
        return seen.empty() ? current + 1 : draw.pick(seen) + Int128(int64_t(draw.below(3))) - 1;
    case 6:
        return Int128(int64_t(draw.bits()));
    default:
        return draw.one_in(2) ? Int128(1) << 80 : -(Int128(1) << 80); // the type's limits
    }
}

std::string interesting_float(Draw &draw, const std::string &current) {

    char *end = nullptr;
    double value = std::strtod(current.c_str(), &end);
    if (end == current.c_str() || draw.one_in(2))
        return kInterestingFloats[draw.below(std::size(kInterestingFloats))];
    switch (draw.below(3)) {
    case 0:
        value *= 2;
        break;
    case 1:
        value /= 2;
        break;
    default:
        value = -value;
        break;
    }
    if (!std::isfinite(value)) return kInterestingFloats[draw.below(std::size(kInterestingFloats))];
    char text[64];
    std::snprintf(text, sizeof text, "%.9g", value);
    std::string token = text;
    if (token.find_first_of(".en") == std::string::npos) token += ".0";
    return token;
}

// A string value changed: emptied, long, with control characters, another string of the blob,
// a character changed, doubled, halved, or a name that must never reach the file system.
std::string mutated_string(Draw &draw, const std::string &escaped,
                           const std::vector<std::string> &seen) {
    std::string raw = unescape(escaped).value_or(escaped);
    switch (draw.below(8)) {
    case 0:
        return "";
    case 1:
        return std::string(80 + draw.below(4000), 'A');
    case 2:
        return escape(raw + "\x01\x1f\x7f\"\\");
    case 3:
        return seen.empty() ? escaped : draw.pick(seen);
    case 4:
        if (raw.empty()) return "x";
        raw[draw.below(raw.size())] = char(' ' + draw.below(95));
        return escape(raw);
    case 5:
        return escape(raw + raw);
    case 6:
        return escape(raw.substr(0, raw.size() / 2));
    default: {
        static const std::vector<std::string> names = {
            "vpu27", "vpu20", "/dev/zero", "../../../../etc/passwd", "/proc/self", "CUBOID_16x16"};
        return escape(draw.pick(names));
    }
    }
}

// ---- Sites: the values of a tree with their schema types ---------------------------------

struct Site {
    JsonNode *container = nullptr;                // the object or array holding the value
    size_t index = 0;                             // the member or element in `container`
    const flatbuffers::FieldDef *field = nullptr; // in a table: the field
    Type type;
    bool absent = false; // `field` is missing from `container` and may be added

    JsonNode &value() const {
        return container->kind == JsonNode::Kind::Object ? container->members[index].second
                                                         : container->elements[index];
    }
    const std::string &key() const { return container->members[index].first; }
};

const flatbuffers::StructDef *union_member(const JsonNode &table, const std::string &key,
                                           const flatbuffers::EnumDef &def) {
    const JsonNode *type = table.member(key + flatbuffers::UnionTypeFieldSuffix());
    if (type == nullptr || type->kind != JsonNode::Kind::String) return nullptr;
    const flatbuffers::EnumVal *member = def.Lookup(type->text);
    return member ? member->union_type.struct_def : nullptr;
}

void collect(JsonNode &container, size_t index, const flatbuffers::FieldDef *field,
             const Type &type, std::vector<Site> &sites);

void collect_table(JsonNode &table, const flatbuffers::StructDef &def, std::vector<Site> &sites) {
    if (table.kind != JsonNode::Kind::Object) return;
    for (size_t i = 0; i < table.members.size(); ++i)
        if (const flatbuffers::FieldDef *field = def.fields.Lookup(table.members[i].first))
            collect(table, i, field, field->value.type, sites);
    for (const flatbuffers::FieldDef *field : def.fields.vec)
        if (!field->deprecated && table.member(field->name) == nullptr)
            sites.push_back(Site{&table, 0, field, field->value.type, true});
}

void collect(JsonNode &container, size_t index, const flatbuffers::FieldDef *field,
             const Type &type, std::vector<Site> &sites) {
    sites.push_back(Site{&container, index, field, type, false});
    JsonNode &value = sites.back().value();
    switch (type.base_type) {
    case flatbuffers::BASE_TYPE_STRUCT:
        if (type.struct_def) collect_table(value, *type.struct_def, sites);
        break;
    case flatbuffers::BASE_TYPE_UNION:
        if (type.enum_def && field)
            if (const auto *member = union_member(container, field->name, *type.enum_def))
                collect_table(value, *member, sites);
        break;
    case flatbuffers::BASE_TYPE_VECTOR:
        if (value.kind != JsonNode::Kind::Array) break;
        if (flatbuffers::IsScalar(type.element) && value.elements.size() > kListedScalarElements)
            break;
        for (size_t i = 0; i < value.elements.size(); ++i)
            collect(value, i, nullptr, type.VectorType(), sites);
        break;
    default:
        break;
    }
}

std::vector<Site> sites_of(JsonNode &root, const flatbuffers::StructDef &root_def) {
    std::vector<Site> sites;
    collect_table(root, root_def, sites);
    return sites;
}

// Every string and integer of a tree: replacements that mean something in this blob.
struct Seen {
    std::vector<std::string> strings;
    std::vector<Int128> integers;

    void add(const JsonNode &node) {
        if (node.kind == JsonNode::Kind::String) {
            strings.push_back(node.text);
        } else if (node.kind == JsonNode::Kind::Scalar) {
            if (auto value = integer_of(node.text)) integers.push_back(*value);
        }
        for (const auto &member : node.members) add(member.second);
        if (node.elements.size() <= kListedScalarElements)
            for (const auto &element : node.elements) add(element);
    }
};

// ---- Mutations ---------------------------------------------------------------------------

class Mutator {
  public:
    Mutator(Draw &draw, const Seen &seen) : draw_(draw), seen_(seen) {}

    // `node` (a scalar, or empty for an absent field) set to another value of `type`. False
    // when the type has none (an empty enum).
    bool scalar(const Type &type, JsonNode &node) {
        const BaseType base = type.base_type;
        if (base == flatbuffers::BASE_TYPE_BOOL) {
            node = JsonNode::scalar(node.text == "true" ? "false" : "true");
        } else if (flatbuffers::IsFloat(base)) {
            node = JsonNode::scalar(interesting_float(draw_, node.text));
        } else if (type.enum_def && draw_.one_in(2)) {
            const auto &values = type.enum_def->Vals();
            if (values.empty()) return false;
            node = JsonNode::string(draw_.pick(values)->name);
        } else {
            Range range = range_of(base);
            Int128 current = integer_of(node.text).value_or(0);
            Int128 value = type.enum_def && draw_.one_in(2)
                               ? Int128(type.enum_def->size()) + Int128(int64_t(draw_.below(3)))
                               : interesting_integer(draw_, current, seen_.integers);
            node = JsonNode::scalar(to_text(std::clamp(value, range.low, range.high)));
        }
        return true;
    }

    void string(JsonNode &node) {
        if (auto raw = unescape(node.text); raw && draw_.one_in(3))
            if (auto nested = parse_json(*raw); nested && nested->kind != JsonNode::Kind::Scalar) {
                untyped(*nested);
                node = JsonNode::string(print_json(*nested));
                return;
            }
        node.kind = JsonNode::Kind::String;
        node.text = mutated_string(draw_, node.text, seen_.strings);
    }

    // Elements removed, duplicated, swapped, cleared, truncated, reversed, or a few scalar
    // elements changed.
    bool vector(const Type &type, JsonNode &node) {
        if (node.kind != JsonNode::Kind::Array) return false;
        auto &e = node.elements;
        const size_t n = e.size();
        switch (draw_.below(n ? 7 : 1)) {
        case 0:
            if (n == 0) {
                JsonNode element;
                if (!flatbuffers::IsScalar(type.element) || !scalar(type.VectorType(), element))
                    return false;
                e.push_back(element);
            } else {
                e.erase(e.begin() + long(draw_.below(n)));
            }
            return true;
        case 1: {
            JsonNode copy = e[draw_.below(n)];
            e.insert(e.begin() + long(draw_.below(n + 1)), std::move(copy));
            return true;
        }
        case 2:
            std::swap(e[draw_.below(n)], e[draw_.below(n)]);
            return n > 1;
        case 3:
            e.clear();
            return true;
        case 4:
            e.resize(draw_.below(n));
            return true;
        case 5:
            std::reverse(e.begin(), e.end());
            return n > 1;
        default: {
            if (!flatbuffers::IsScalar(type.element)) return false;
            const size_t count = 1 + draw_.below(8);
            for (size_t i = 0; i < count; ++i)
                if (!scalar(type.VectorType(), e[draw_.below(n)])) return false;
            return true;
        }
        }
    }

    // A value of an untyped tree (JSON held in a string): numbers to boundaries, strings
    // changed, members removed, duplicated or renamed, values of another JSON type.
    void untyped(JsonNode &root) {
        std::vector<JsonNode *> nodes;
        gather(root, nodes);
        JsonNode &node = *nodes[draw_.below(nodes.size())];
        switch (node.kind) {
        case JsonNode::Kind::Scalar:
            if (draw_.one_in(8)) {
                node = draw_.one_in(2) ? JsonNode::string("1") : JsonNode::scalar("null");
            } else if (node.text.find_first_of(".eE") != std::string::npos) {
                node.text = interesting_float(draw_, node.text);
            } else if (auto value = integer_of(node.text)) {
                Int128 changed = interesting_integer(draw_, *value, seen_.integers);
                node.text = to_text(std::clamp(changed, -(Int128(1) << 64), Int128(1) << 64));
            } else {
                node.text = node.text == "true" ? "false" : "true";
            }
            break;
        case JsonNode::Kind::String:
            if (draw_.one_in(8))
                node = JsonNode::scalar("1");
            else
                node.text = mutated_string(draw_, node.text, seen_.strings);
            break;
        case JsonNode::Kind::Array:
            if (node.elements.empty() || draw_.one_in(8)) {
                node = JsonNode{};
                node.kind = JsonNode::Kind::Object;
            } else {
                auto &e = node.elements;
                switch (draw_.below(3)) {
                case 0:
                    e.erase(e.begin() + long(draw_.below(e.size())));
                    break;
                case 1:
                    e.push_back(e[draw_.below(e.size())]);
                    break;
                default:
                    std::swap(e[draw_.below(e.size())], e[draw_.below(e.size())]);
                    break;
                }
            }
            break;
        case JsonNode::Kind::Object:
            if (node.members.empty()) {
                node.kind = JsonNode::Kind::Array;
            } else {
                auto &m = node.members;
                const size_t at = draw_.below(m.size());
                switch (draw_.below(3)) {
                case 0:
                    m.erase(m.begin() + long(at));
                    break;
                case 1: // the same key twice
                    m.push_back(m[at]);
                    break;
                default:
                    m[at].first += m[at].first.empty() ? "x" : m[at].first.substr(0, 1);
                    break;
                }
            }
            break;
        }
    }

  private:
    static void gather(JsonNode &node, std::vector<JsonNode *> &nodes) {
        nodes.push_back(&node);
        for (auto &member : node.members) gather(member.second, nodes);
        for (auto &element : node.elements) gather(element, nodes);
    }

    Draw &draw_;
    const Seen &seen_;
};

bool is_union_type_field(const Type &type) {
    return type.base_type == flatbuffers::BASE_TYPE_UTYPE;
}

// Another value of `site`'s type among `donors` (not the site itself); null when none.
const Site *donor_for(Draw &draw, const Site &site, const std::vector<Site> &donors) {
    std::vector<const Site *> candidates;
    for (const Site &donor : donors)
        if (!donor.absent && donor.type == site.type &&
            (site.absent || &donor.value() != &site.value()))
            candidates.push_back(&donor);
    return candidates.empty() ? nullptr : candidates[draw.below(candidates.size())];
}

// Sets `site` (present or absent) to `value`; for a union also its type, `type_value`.
void assign(const Site &site, JsonNode value, const JsonNode *type_value) {
    JsonNode &table = *site.container;
    if (type_value) {
        const std::string key = site.absent ? site.field->name : site.key();
        const std::string type_key = key + flatbuffers::UnionTypeFieldSuffix();
        if (JsonNode *existing = table.member(type_key))
            *existing = *type_value;
        else
            table.members.emplace_back(type_key, *type_value);
    }
    if (site.absent)
        table.members.emplace_back(site.field->name, std::move(value));
    else
        site.value() = std::move(value);
}

// Copies the donor's value (and union type) into `site`.
void graft(const Site &site, const Site &donor) {
    JsonNode value = donor.value();
    std::optional<JsonNode> type_value;
    if (site.type.base_type == flatbuffers::BASE_TYPE_UNION)
        if (const JsonNode *t =
                donor.container->member(donor.key() + flatbuffers::UnionTypeFieldSuffix()))
            type_value = *t;
    assign(site, std::move(value), type_value ? &*type_value : nullptr);
}

// One mutation at a random site of `sites`; values of the same type are taken from `donors`.
bool mutate_one(Draw &draw, const std::vector<Site> &sites, const std::vector<Site> &donors,
                const Seen &seen) {
    if (sites.empty()) return false;
    const Site &site = sites[draw.below(sites.size())];
    if (is_union_type_field(site.type)) return false; // changed with its union value
    Mutator mutate(draw, seen);
    const BaseType base = site.type.base_type;
    if (site.absent) {
        if (const Site *donor = donor_for(draw, site, donors)) {
            graft(site, *donor);
            return true;
        }
        JsonNode value;
        if (base == flatbuffers::BASE_TYPE_STRING)
            value = JsonNode::string("x");
        else if (base == flatbuffers::BASE_TYPE_VECTOR)
            value.kind = JsonNode::Kind::Array;
        else if (!flatbuffers::IsScalar(base) || !mutate.scalar(site.type, value))
            return false;
        assign(site, std::move(value), nullptr);
        return true;
    }
    JsonNode &value = site.value();
    switch (base) {
    case flatbuffers::BASE_TYPE_STRING:
        mutate.string(value);
        return true;
    case flatbuffers::BASE_TYPE_VECTOR:
        if (draw.one_in(4))
            if (const Site *donor = donor_for(draw, site, donors)) {
                graft(site, *donor);
                return true;
            }
        return mutate.vector(site.type, value);
    case flatbuffers::BASE_TYPE_STRUCT:
    case flatbuffers::BASE_TYPE_UNION:
        // Optional tables go away now and then; otherwise another of the same type.
        if (site.field && !site.field->IsRequired() && draw.one_in(4)) {
            auto &members = site.container->members;
            const std::string type_key = site.key() + flatbuffers::UnionTypeFieldSuffix();
            members.erase(members.begin() + long(site.index));
            if (base == flatbuffers::BASE_TYPE_UNION)
                members.erase(std::remove_if(members.begin(), members.end(),
                                             [&](const auto &m) { return m.first == type_key; }),
                              members.end());
            return true;
        }
        if (const Site *donor = donor_for(draw, site, donors)) {
            graft(site, *donor);
            return true;
        }
        return false;
    default:
        return flatbuffers::IsScalar(base) && mutate.scalar(site.type, value);
    }
}

// ---- Blob to tree ------------------------------------------------------------------------

// The JSON tree of a verified FlatBuffer, as FlatBuffers' text printer would print it with
// every scalar (defaults too), read with the reflection schema. Faster than printing the text
// and parsing it (the printer formats each number through a string stream), and bounded: a few
// bytes that reference one large value from many places would print far larger than the file,
// so the tree stops at a budget of nodes and characters.
class TreeBuilder {
  public:
    TreeBuilder(const reflection::Schema &schema, int64_t budget)
        : schema_(schema), budget_(budget) {}

    std::optional<JsonNode> root(const uint8_t *buffer) {
        JsonNode tree;
        if (!table(*schema_.root_table(), *flatbuffers::GetAnyRoot(buffer), tree, 0))
            return std::nullopt;
        return tree;
    }

  private:
    bool spend(int64_t amount) { return (budget_ -= amount) >= 0; }

    static std::vector<const reflection::Field *> in_schema_order(const reflection::Object &o) {
        std::vector<const reflection::Field *> fields(o.fields()->begin(), o.fields()->end());
        // The schema's order puts a union's type field before its value, as the parser wants.
        std::sort(fields.begin(), fields.end(),
                  [](const auto *a, const auto *b) { return a->id() < b->id(); });
        return fields;
    }

    JsonNode integer(const reflection::Type &type, reflection::BaseType base, int64_t value) {
        if (base == reflection::Bool) return JsonNode::scalar(value ? "true" : "false");
        if (type.index() >= 0)
            if (const auto *member =
                    schema_.enums()->Get(uint32_t(type.index()))->values()->LookupByKey(value))
                return JsonNode::string(member->name()->str());
        return JsonNode::scalar(base == reflection::ULong ? std::to_string(uint64_t(value))
                                                          : std::to_string(value));
    }

    static JsonNode real(reflection::BaseType base, double value) {
        if (std::isnan(value)) return JsonNode::scalar("nan");
        if (std::isinf(value)) return JsonNode::scalar(value > 0 ? "inf" : "-inf");
        char text[32];
        std::snprintf(text, sizeof text, base == reflection::Float ? "%.9g" : "%.17g", value);
        return JsonNode::scalar(text);
    }

    // A scalar at `data` of `base` type; `type` gives its enum.
    JsonNode scalar_at(const reflection::Type &type, reflection::BaseType base,
                       const uint8_t *data) {
        if (base == reflection::Float || base == reflection::Double)
            return real(base, flatbuffers::GetAnyValueF(base, data));
        return integer(type, base, flatbuffers::GetAnyValueI(base, data));
    }

    bool structure(const reflection::Object &object, const uint8_t *data, JsonNode &out) {
        out.kind = JsonNode::Kind::Object;
        for (const reflection::Field *field : in_schema_order(object)) {
            if (!spend(16)) return false;
            const reflection::Type &type = *field->type();
            JsonNode value;
            if (type.base_type() == reflection::Obj) {
                if (!structure(*schema_.objects()->Get(uint32_t(type.index())),
                               data + field->offset(), value))
                    return false;
            } else if (flatbuffers::IsScalar(flatbuffers::BaseType(type.base_type()))) {
                value = scalar_at(type, type.base_type(), data + field->offset());
            } else {
                return false; // fixed-size arrays: not in the blob schema
            }
            out.members.emplace_back(field->name()->str(), std::move(value));
        }
        return true;
    }

    bool string(const flatbuffers::String *s, JsonNode &out) {
        if (!spend(16 + 2 * int64_t(s->size()))) return false;
        out = JsonNode::string(s->str());
        return true;
    }

    bool vector(const reflection::Type &type, const flatbuffers::VectorOfAny &v, int depth,
                JsonNode &out) {
        out.kind = JsonNode::Kind::Array;
        if (!spend(16 * int64_t(v.size()))) return false;
        const reflection::BaseType element = type.element();
        out.elements.resize(v.size());
        for (uint32_t i = 0; i < v.size(); ++i) {
            JsonNode &e = out.elements[i];
            if (element == reflection::String) {
                if (!string(flatbuffers::GetAnyVectorElemPointer<const flatbuffers::String>(&v, i),
                            e))
                    return false;
            } else if (element == reflection::Obj) {
                const reflection::Object &object = *schema_.objects()->Get(uint32_t(type.index()));
                if (object.is_struct()) {
                    if (!structure(object, v.Data() + size_t(object.bytesize()) * i, e))
                        return false;
                } else if (!table(object,
                                  *flatbuffers::GetAnyVectorElemPointer<const flatbuffers::Table>(
                                      &v, i),
                                  e, depth + 1)) {
                    return false;
                }
            } else if (flatbuffers::IsScalar(flatbuffers::BaseType(element))) {
                e = scalar_at(type, element, v.Data() + flatbuffers::GetTypeSize(element) * i);
            } else {
                return false; // vectors of unions: not in the blob schema
            }
        }
        return true;
    }

    bool table(const reflection::Object &object, const flatbuffers::Table &t, JsonNode &out,
               int depth) {
        if (depth > 64) return false;
        out.kind = JsonNode::Kind::Object;
        for (const reflection::Field *field : in_schema_order(object)) {
            if (field->deprecated()) continue;
            if (!spend(16)) return false;
            const reflection::Type &type = *field->type();
            const reflection::BaseType base = type.base_type();
            JsonNode value;
            if (flatbuffers::IsScalar(flatbuffers::BaseType(base))) {
                if (field->optional() && !t.CheckField(field->offset())) continue;
                value = base == reflection::Float || base == reflection::Double
                            ? real(base, flatbuffers::GetAnyFieldF(t, *field))
                            : integer(type, base, flatbuffers::GetAnyFieldI(t, *field));
            } else if (!t.CheckField(field->offset())) {
                continue;
            } else if (base == reflection::String) {
                if (!string(flatbuffers::GetFieldS(t, *field), value)) return false;
            } else if (base == reflection::Vector) {
                if (!vector(type, *flatbuffers::GetFieldAnyV(t, *field), depth, value))
                    return false;
            } else if (base == reflection::Obj) {
                const reflection::Object &child = *schema_.objects()->Get(uint32_t(type.index()));
                if (child.is_struct()) {
                    if (!structure(child, t.GetStruct<const uint8_t *>(field->offset()), value))
                        return false;
                } else if (!table(child, *flatbuffers::GetFieldT(t, *field), value, depth + 1)) {
                    return false;
                }
            } else if (base == reflection::Union) {
                const reflection::Field *type_field = object.fields()->LookupByKey(
                    (field->name()->str() + flatbuffers::UnionTypeFieldSuffix()).c_str());
                if (type_field == nullptr) return false;
                const auto *member = schema_.enums()
                                         ->Get(uint32_t(type.index()))
                                         ->values()
                                         ->LookupByKey(flatbuffers::GetAnyFieldI(t, *type_field));
                if (member == nullptr || member->union_type() == nullptr ||
                    member->union_type()->index() < 0)
                    return false;
                if (!table(*schema_.objects()->Get(uint32_t(member->union_type()->index())),
                           *flatbuffers::GetFieldT(t, *field), value, depth + 1))
                    return false;
            } else {
                return false;
            }
            out.members.emplace_back(field->name()->str(), std::move(value));
        }
        return true;
    }

    const reflection::Schema &schema_;
    int64_t budget_;
};

} // namespace

// ---- BlobMutator -------------------------------------------------------------------------

struct BlobMutator::Impl {
    flatbuffers::IDLOptions options;
    flatbuffers::Parser schema;      // the type of every field
    std::vector<uint8_t> reflection; // the schema as a reflection buffer, for verification

    Impl() : options(printing_options()), schema(options) {
        if (!schema.Parse(kBlobSchemaText))
            throw std::logic_error("the embedded blob schema does not parse: " + schema.error_);
        schema.Serialize();
        reflection.assign(schema.builder_.GetBufferPointer(),
                          schema.builder_.GetBufferPointer() + schema.builder_.GetSize());
    }

    static flatbuffers::IDLOptions printing_options() {
        flatbuffers::IDLOptions o;
        o.strict_json = true;
        return o;
    }

    // The blob's JSON tree; nullopt when it is not a well-formed FlatBuffer of the schema, or
    // its tree would be more than a few times its size.
    std::optional<JsonNode> tree_of(const std::vector<uint8_t> &blob) const {
        // The generated verifier, which vpuc relies on: FlatBuffers' reflection verifier (in
        // the packaged library, built without sanitizers) reads far out of bounds on some
        // blobs with a byte changed (tests/fuzz/regressions/mutator/).
        flatbuffers::Verifier verifier(blob.data(), blob.size());
        if (blob.size() < 8 || !blob::VerifyBlobBuffer(verifier)) return std::nullopt;
        const reflection::Schema &s = *reflection::GetSchema(reflection.data());
        return TreeBuilder(s, 65536 + 16 * int64_t(blob.size())).root(blob.data());
    }
};

BlobMutator::BlobMutator() : impl_(std::make_unique<Impl>()) {}
BlobMutator::~BlobMutator() = default;

std::optional<std::string> BlobMutator::to_json(const std::vector<uint8_t> &blob) const {
    std::optional<JsonNode> tree = impl_->tree_of(blob);
    if (!tree) return std::nullopt;
    return print_json_indented(*tree);
}

std::optional<std::vector<uint8_t>> BlobMutator::from_json(const std::string &json,
                                                           std::string *error) const {
    flatbuffers::Parser parser(impl_->options);
    if (!parser.Parse(kBlobSchemaText) || !parser.Parse(json.c_str())) {
        if (error) *error = parser.error_;
        return std::nullopt;
    }
    const uint8_t *bytes = parser.builder_.GetBufferPointer();
    return std::vector<uint8_t>(bytes, bytes + parser.builder_.GetSize());
}

std::optional<std::vector<uint8_t>> BlobMutator::mutate_fields(const std::vector<uint8_t> &blob,
                                                               std::mt19937_64 &rng,
                                                               Digests digests) const {
    std::optional<JsonNode> original = impl_->tree_of(blob);
    if (!original) return std::nullopt;
    Seen seen;
    seen.add(*original);
    Draw draw(rng);
    for (int attempt = 0; attempt < kAttempts; ++attempt) {
        JsonNode tree = *original;
        bool changed = false;
        const int mutations = draw.one_in(4) ? 2 + int(draw.below(3)) : 1;
        for (int i = 0; i < mutations; ++i) {
            // Sites point into the tree: collected afresh after every change.
            std::vector<Site> sites = sites_of(tree, *impl_->schema.root_struct_def_);
            changed |= mutate_one(draw, sites, sites, seen);
        }
        if (!changed) continue;
        std::optional<std::vector<uint8_t>> packed = from_json(print_json(tree));
        if (!packed || *packed == blob) continue;
        // Forged, mostly: a stale digest only exercises the digest check.
        if (digests == Digests::Kept || draw.one_in(8)) return *packed;
        return with_digests_recomputed(*packed);
    }
    return std::nullopt;
}

std::optional<std::vector<uint8_t>> BlobMutator::crossover(const std::vector<uint8_t> &a,
                                                           const std::vector<uint8_t> &b,
                                                           std::mt19937_64 &rng) const {
    std::optional<JsonNode> first = impl_->tree_of(a);
    std::optional<JsonNode> second = impl_->tree_of(b);
    if (!first || !second) return std::nullopt;
    const flatbuffers::StructDef &root = *impl_->schema.root_struct_def_;
    std::vector<Site> donors = sites_of(*second, root);
    Draw draw(rng);
    for (int attempt = 0; attempt < kAttempts; ++attempt) {
        JsonNode tree = *first;
        std::vector<Site> sites = sites_of(tree, root);
        const Site &site = sites[draw.below(sites.size())];
        if (is_union_type_field(site.type)) continue;
        const Site *donor = donor_for(draw, site, donors);
        if (donor == nullptr) continue;
        graft(site, *donor);
        std::optional<std::vector<uint8_t>> packed = from_json(print_json(tree));
        if (!packed || *packed == a) continue;
        return with_digests_recomputed(*packed);
    }
    return std::nullopt;
}

// ---- Bytes -------------------------------------------------------------------------------

std::vector<uint8_t> mutate_bytes(const std::vector<uint8_t> &blob, std::mt19937_64 &rng) {
    static const uint64_t interesting_words[] = {
        0,      1,      2,       0x7F,       0x80,       0xFF,       0x100,       0x7FFF,
        0x8000, 0xFFFF, 0x10000, 0x7FFFFFFF, 0x80000000, 0xFFFFFFFF, ~uint64_t(0)};
    Draw draw(rng);
    std::vector<uint8_t> out = blob;
    const int mutations = 1 + int(draw.below(4));
    for (int i = 0; i < mutations; ++i) {
        if (out.empty()) {
            out.push_back(uint8_t(draw.bits()));
            continue;
        }
        const size_t size = out.size();
        size_t at = draw.below(size);
        const size_t chunk = 1 + draw.below(std::min<size_t>(64, size));
        switch (draw.below(8)) {
        case 0:
            out[at] ^= uint8_t(1u << draw.below(8));
            break;
        case 1:
            out[at] = uint8_t(interesting_words[draw.below(std::size(interesting_words))]);
            break;
        case 2: { // a little-endian word of 2, 4 or 8 bytes at its alignment
            const size_t width = size_t(2) << draw.below(3);
            at -= at % width;
            if (at + width > size) break;
            uint64_t word = draw.one_in(4)
                                ? size + draw.below(16)
                                : interesting_words[draw.below(std::size(interesting_words))];
            if (draw.one_in(4)) word = ~word;
            for (size_t k = 0; k < width; ++k) out[at + k] = uint8_t(word >> (8 * k));
            break;
        }
        case 3: { // a small step of a 4-byte word: offsets, counts, sizes
            at -= at % 4;
            if (at + 4 > size) break;
            uint32_t word;
            std::memcpy(&word, &out[at], 4);
            word += uint32_t(int32_t(draw.below(33)) - 16);
            std::memcpy(&out[at], &word, 4);
            break;
        }
        case 4: { // a chunk copied over another place
            const size_t from = draw.below(size - chunk + 1), to = draw.below(size - chunk + 1);
            std::memmove(&out[to], &out[from], chunk);
            break;
        }
        case 5: { // a chunk of the blob inserted
            const size_t from = draw.below(size - chunk + 1);
            std::vector<uint8_t> copy(out.begin() + long(from), out.begin() + long(from + chunk));
            out.insert(out.begin() + long(at), copy.begin(), copy.end());
            break;
        }
        case 6:
            out.erase(out.begin() + long(at), out.begin() + long(std::min(size, at + chunk)));
            break;
        default:
            out.resize(at + (size - at) / 2);
            break;
        }
    }
    return out;
}

std::vector<uint8_t> with_digests_recomputed(const std::vector<uint8_t> &blob) {
    flatbuffers::Verifier verifier(blob.data(), blob.size());
    if (!blob::VerifyBlobBuffer(verifier)) return blob;
    std::unique_ptr<blob::BlobT> unpacked = blob::UnPackBlob(blob.data());
    for (auto &kernel : unpacked->kernels) {
        blob::Sha256 digest = blob::kernel_digest(*kernel);
        kernel->sha256.assign(digest.begin(), digest.end());
    }
    if (unpacked->header && unpacked->header->target) {
        blob::TargetDescriptionT &target = *unpacked->header->target;
        blob::Sha256 digest = blob::sha256(target.json.data(), target.json.size());
        target.sha256.assign(digest.begin(), digest.end());
    }
    flatbuffers::FlatBufferBuilder builder;
    blob::FinishBlobBuffer(builder, blob::Blob::Pack(builder, unpacked.get()));
    return std::vector<uint8_t>(builder.GetBufferPointer(),
                                builder.GetBufferPointer() + builder.GetSize());
}

} // namespace vpuc::fuzz
