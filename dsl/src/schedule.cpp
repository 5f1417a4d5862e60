#include "dsl/schedule.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <array>
#include <cctype>
#include <charconv>
#include <limits>
#include <string_view>

#include "vpu_target/printable.h"

namespace vpuc::dsl {

namespace {

// A schedule may come from a file: what of it goes into a message is escaped and cut
// (vpu_target/printable.h), the whole chain after kQuotedChainChars, the rest after
// kQuotedTextChars.
constexpr size_t kQuotedChainChars = 120;
constexpr size_t kQuotedTextChars = 200;

constexpr std::array<Directive::Kind, 15> kAllKinds = {
    Directive::Kind::Split,       Directive::Kind::Tile,      Directive::Kind::Reorder,
    Directive::Kind::Fuse,        Directive::Kind::Unroll,    Directive::Kind::Vectorize,
    Directive::Kind::ComputeRoot, Directive::Kind::ComputeAt, Directive::Kind::StoreIn,
    Directive::Kind::OnDpu,       Directive::Kind::OnShave,   Directive::Kind::Workloads,
    Directive::Kind::Distribute,  Directive::Kind::Prefetch,  Directive::Kind::Spill,
};
constexpr std::array<MemoryLevel, 2> kAllLevels = {MemoryLevel::CMX, MemoryLevel::DDR};
constexpr std::array<Strategy, 4> kAllStrategies = {
    Strategy::SplitOverHeight, Strategy::SplitOverKernel, Strategy::Clustering, Strategy::HKSwitch};

constexpr int kOneOrMore = -1;
enum class NameUse { None, Optional, Required };

// Which fields a directive kind uses. The printer, the JSON writer and reader and the shape
// check all read this one table, so they cannot disagree.
struct Fields {
    int loops = 0; // count, or kOneOrMore
    int factors = 0;
    NameUse name = NameUse::None;
    bool memory = false;
    bool strategy = false;
};

Fields fields_of(Directive::Kind kind) {
    using K = Directive::Kind;
    switch (kind) {
    case K::Split:
        return {3, kOneOrMore, NameUse::None, false, false};
    case K::Tile:
        return {6, 2, NameUse::None, false, false};
    case K::Reorder:
        return {kOneOrMore, 0, NameUse::None, false, false};
    case K::Fuse:
        return {3, 0, NameUse::None, false, false};
    case K::Unroll:
        return {1, 0, NameUse::None, false, false};
    case K::Vectorize:
        return {1, 1, NameUse::None, false, false};
    case K::ComputeRoot:
        return {0, 0, NameUse::None, false, false};
    case K::ComputeAt:
        return {1, 0, NameUse::Required, false, false};
    case K::StoreIn:
        return {0, 0, NameUse::None, true, false};
    case K::OnDpu:
        return {0, 0, NameUse::Optional, false, false};
    case K::OnShave:
        return {0, 0, NameUse::None, false, false};
    case K::Workloads:
        return {1, 1, NameUse::None, false, false};
    case K::Distribute:
        return {1, 1, NameUse::None, false, true};
    case K::Prefetch:
        return {0, 1, NameUse::None, false, false};
    case K::Spill:
        return {0, 0, NameUse::None, false, false};
    }
    return {0, 0, NameUse::None, false, false};
}

std::string plural(int n, const char *noun) {
    return std::to_string(n) + " " + noun + (n == 1 ? "" : "s");
}

std::string loops_rule(const Fields &f) {
    if (f.loops == kOneOrMore) return "'loops' must be a non-empty array of strings";
    return "'loops' must be an array of " + plural(f.loops, "string");
}

std::string factors_rule(const Fields &f) {
    if (f.factors == kOneOrMore) return "'factors' must be a non-empty array of integers";
    return "'factors' must be an array of " + plural(f.factors, "integer");
}

const char *name_rule(const Fields &f) {
    return f.name == NameUse::Required ? "'name' must be a non-empty string"
                                       : "'name' must be a string";
}

template <typename T, size_t N> std::string one_of(const std::array<T, N> &values) {
    std::string s;
    for (T v : values) s += (s.empty() ? "" : ", ") + std::string(to_string(v));
    return s;
}

// "" when `d` has the loops, factors and name its kind needs, else the rule it breaks.
std::string shape_error(const Directive &d) {
    Fields f = fields_of(d.kind);
    bool loops_ok = f.loops == kOneOrMore ? !d.loops.empty() : int(d.loops.size()) == f.loops;
    if (!loops_ok) return loops_rule(f);
    bool factors_ok =
        f.factors == kOneOrMore ? !d.factors.empty() : int(d.factors.size()) == f.factors;
    if (!factors_ok) return factors_rule(f);
    if (f.name == NameUse::Required && d.name.empty()) return name_rule(f);
    return "";
}

Directive make(Directive::Kind kind, std::vector<std::string> loops = {},
               std::vector<int64_t> factors = {}, std::string name = "") {
    Directive d;
    d.kind = kind;
    d.loops = std::move(loops);
    d.factors = std::move(factors);
    d.name = std::move(name);
    return d;
}

} // namespace

const char *to_string(MemoryLevel level) {
    switch (level) {
    case MemoryLevel::CMX:
        return "CMX";
    case MemoryLevel::DDR:
        return "DDR";
    }
    return "?";
}

const char *to_string(Strategy strategy) {
    switch (strategy) {
    case Strategy::SplitOverHeight:
        return "SOH";
    case Strategy::SplitOverKernel:
        return "SOK";
    case Strategy::Clustering:
        return "Clustering";
    case Strategy::HKSwitch:
        return "HKSwitch";
    }
    return "?";
}

const char *to_string(Directive::Kind kind) {
    using K = Directive::Kind;
    switch (kind) {
    case K::Split:
        return "split";
    case K::Tile:
        return "tile";
    case K::Reorder:
        return "reorder";
    case K::Fuse:
        return "fuse";
    case K::Unroll:
        return "unroll";
    case K::Vectorize:
        return "vectorize";
    case K::ComputeRoot:
        return "compute_root";
    case K::ComputeAt:
        return "compute_at";
    case K::StoreIn:
        return "store_in";
    case K::OnDpu:
        return "on_dpu";
    case K::OnShave:
        return "on_shave";
    case K::Workloads:
        return "workloads";
    case K::Distribute:
        return "distribute";
    case K::Prefetch:
        return "prefetch";
    case K::Spill:
        return "spill";
    }
    return "?";
}

bool Directive::operator==(const Directive &o) const {
    return kind == o.kind && loops == o.loops && factors == o.factors && name == o.name &&
           memory == o.memory && strategy == o.strategy;
}

// Arguments in the order the builder takes them: the consumer or MPE mode, loops, factors, then
// the memory level or strategy.
std::string Directive::to_string() const {
    Fields f = fields_of(kind);
    std::vector<std::string> args;
    if (f.name != NameUse::None && !name.empty()) args.push_back(name);
    args.insert(args.end(), loops.begin(), loops.end());
    if (kind == Kind::Split && factors.size() > 1) {
        std::string list;
        for (int64_t v : factors) list += (list.empty() ? "{" : ", ") + std::to_string(v);
        args.push_back(list + "}");
    } else {
        for (int64_t v : factors) args.push_back(std::to_string(v));
    }
    if (f.memory) args.push_back(dsl::to_string(memory));
    if (f.strategy) args.push_back(dsl::to_string(strategy));
    std::string s = std::string(dsl::to_string(kind)) + "(";
    for (size_t i = 0; i < args.size(); ++i) s += (i ? ", " : "") + args[i];
    return s + ")";
}

Schedule &Schedule::split(const std::string &loop, const std::string &outer,
                          const std::string &inner, int64_t factor) {
    return add(make(Directive::Kind::Split, {loop, outer, inner}, {factor}));
}

Schedule &Schedule::split(const std::string &loop, const std::string &outer,
                          const std::string &inner, const std::vector<int64_t> &extents) {
    return add(make(Directive::Kind::Split, {loop, outer, inner}, extents));
}

Schedule &Schedule::tile(const std::string &x, const std::string &y, const std::string &xo,
                         const std::string &yo, const std::string &xi, const std::string &yi,
                         int64_t fx, int64_t fy) {
    return add(make(Directive::Kind::Tile, {x, y, xo, yo, xi, yi}, {fx, fy}));
}

Schedule &Schedule::reorder(const std::vector<std::string> &innermost_first) {
    return add(make(Directive::Kind::Reorder, innermost_first));
}

Schedule &Schedule::fuse(const std::string &inner, const std::string &outer,
                         const std::string &fused) {
    return add(make(Directive::Kind::Fuse, {inner, outer, fused}));
}

Schedule &Schedule::unroll(const std::string &loop) {
    return add(make(Directive::Kind::Unroll, {loop}));
}

Schedule &Schedule::vectorize(const std::string &loop, int64_t factor) {
    return add(make(Directive::Kind::Vectorize, {loop}, {factor}));
}

Schedule &Schedule::compute_root() {
    return add(make(Directive::Kind::ComputeRoot));
}

Schedule &Schedule::compute_at(const std::string &consumer, const std::string &loop) {
    return add(make(Directive::Kind::ComputeAt, {loop}, {}, consumer));
}

Schedule &Schedule::store_in(MemoryLevel level) {
    Directive d = make(Directive::Kind::StoreIn);
    d.memory = level;
    return add(d);
}

Schedule &Schedule::on_dpu(const std::string &mpe_mode) {
    return add(make(Directive::Kind::OnDpu, {}, {}, mpe_mode));
}

Schedule &Schedule::on_shave() {
    return add(make(Directive::Kind::OnShave));
}

Schedule &Schedule::workloads(const std::string &loop, int64_t count) {
    return add(make(Directive::Kind::Workloads, {loop}, {count}));
}

Schedule &Schedule::distribute(const std::string &loop, int64_t tiles, Strategy strategy) {
    Directive d = make(Directive::Kind::Distribute, {loop}, {tiles});
    d.strategy = strategy;
    return add(d);
}

Schedule &Schedule::prefetch(int64_t depth) {
    return add(make(Directive::Kind::Prefetch, {}, {depth}));
}

Schedule &Schedule::spill() {
    return add(make(Directive::Kind::Spill));
}

// Fields the kind does not use are reset, so schedules that print alike compare equal and
// survive a JSON round trip.
Schedule &Schedule::add(Directive d) {
    std::string error = shape_error(d);
    if (!error.empty())
        throw ScheduleError("Schedule::add(" + std::string(dsl::to_string(d.kind)) + "): " + error);
    Fields f = fields_of(d.kind);
    if (f.name == NameUse::None) d.name.clear();
    if (!f.memory) d.memory = Directive{}.memory;
    if (!f.strategy) d.strategy = Directive{}.strategy;
    directives_.push_back(std::move(d));
    return *this;
}

Engine Schedule::engine() const {
    Engine engine = Engine::Auto;
    for (const Directive &d : directives_) {
        if (d.kind == Directive::Kind::OnDpu) engine = Engine::DPU;
        if (d.kind == Directive::Kind::OnShave) engine = Engine::SHAVE;
    }
    return engine;
}

std::string Schedule::to_string() const {
    std::string s;
    for (const Directive &d : directives_) s += (s.empty() ? "" : ".") + d.to_string();
    return s;
}

namespace {

// Reads a chain as Schedule::to_string prints it, e.g.
// "distribute(y, 2, SOH).split(y, yo, yi, {4, 12, 8, 4}).prefetch(1)": each directive's
// arguments are words (names, numbers, enum values) or one braced list of numbers, in the
// order to_string writes the fields. A name with spaces, commas, parentheses or braces does
// not read back; JSON carries any name.
class ChainReader {
  public:
    explicit ChainReader(const std::string &text) : text_(text) {}

    Schedule read() {
        Schedule schedule;
        skip_space();
        if (at_ == text_.size()) return schedule;
        while (true) {
            schedule.add(directive());
            skip_space();
            if (at_ == text_.size()) return schedule;
            expect('.');
        }
    }

  private:
    // One argument: a word, or the numbers of a braced list.
    struct Arg {
        std::string word;
        std::vector<std::string> list;
        bool is_list = false;
    };

    [[noreturn]] void fail(const std::string &what) const {
        throw ScheduleError("schedule '" + printable(text_, kQuotedChainChars) +
                            "', at character " + std::to_string(at_ + 1) +
                            (current_.empty() ? "" : " (" + printable(current_) + ")") + ": " +
                            printable(what, kQuotedTextChars));
    }

    void skip_space() {
        while (at_ < text_.size() && std::isspace((unsigned char)text_[at_])) ++at_;
    }

    void expect(char c) {
        skip_space();
        if (at_ == text_.size() || text_[at_] != c)
            fail(std::string("expected '") + c + "'" +
                 (at_ == text_.size() ? " at the end" : ", found '" + text_.substr(at_, 1) + "'"));
        ++at_;
    }

    bool next_is(char c) {
        skip_space();
        return at_ < text_.size() && text_[at_] == c;
    }

    // Anything up to a space or a delimiter, so that layer names such as "block1/conv.0" read.
    std::string word() {
        skip_space();
        const size_t begin = at_;
        while (at_ < text_.size() && !std::isspace((unsigned char)text_[at_]) &&
               std::string_view(",(){}").find(text_[at_]) == std::string_view::npos)
            ++at_;
        if (at_ == begin) fail("expected a name or a number");
        return text_.substr(begin, at_ - begin);
    }

    Arg arg() {
        Arg a;
        if (!next_is('{')) {
            a.word = word();
            return a;
        }
        expect('{');
        a.is_list = true;
        while (true) {
            a.list.push_back(word());
            if (!next_is(',')) break;
            expect(',');
        }
        expect('}');
        return a;
    }

    int64_t number(const std::string &w) const {
        int64_t v = 0;
        const auto [end, error] = std::from_chars(w.data(), w.data() + w.size(), v);
        if (error == std::errc::result_out_of_range && end == w.data() + w.size())
            fail("'" + w + "' is out of range (a 64-bit integer)");
        if (error != std::errc() || end != w.data() + w.size())
            fail("'" + w + "' is not an integer");
        return v;
    }

    template <typename T, size_t N>
    T enum_value(const std::string &w, const std::array<T, N> &all) {
        for (T v : all)
            if (w == to_string(v)) return v;
        fail("'" + w + "' is not one of " + one_of(all));
    }

    Directive directive() {
        // Directive names are identifiers, so the word stops before the '.' that chains.
        skip_space();
        const size_t begin = at_;
        while (at_ < text_.size() && (std::isalnum((unsigned char)text_[at_]) || text_[at_] == '_'))
            ++at_;
        const std::string name = text_.substr(begin, at_ - begin);
        current_ = name;
        Directive d;
        bool known = false;
        for (Directive::Kind k : kAllKinds)
            if (name == to_string(k)) {
                d.kind = k;
                known = true;
            }
        if (!known)
            fail(name.empty()
                     ? "expected a directive (" + one_of(kAllKinds) + ")"
                     : "unknown directive '" + name + "' (legal: " + one_of(kAllKinds) + ")");
        expect('(');
        std::vector<Arg> args;
        if (!next_is(')'))
            while (true) {
                args.push_back(arg());
                if (!next_is(',')) break;
                expect(',');
            }
        expect(')');
        assign(d, args);
        current_.clear();
        return d;
    }

    // The arguments in to_string's order: name, loops, factors, memory, strategy.
    void assign(Directive &d, const std::vector<Arg> &args) {
        const Fields f = fields_of(d.kind);
        size_t next = 0;
        auto take_word = [&](const char *what) {
            if (next == args.size()) fail(std::string("missing ") + what);
            if (args[next].is_list) fail(std::string("expected ") + what + ", found a {list}");
            return args[next++].word;
        };
        if (f.name == NameUse::Required || (f.name == NameUse::Optional && !args.empty()))
            d.name = take_word("the name");
        const size_t loops = f.loops == kOneOrMore ? args.size() - next : size_t(f.loops);
        for (size_t k = 0; k < loops; ++k) d.loops.push_back(take_word("a loop name"));
        if (f.factors == kOneOrMore && next < args.size() && args[next].is_list) {
            for (const std::string &w : args[next++].list) d.factors.push_back(number(w));
        } else {
            const int factors = f.factors == kOneOrMore ? 1 : f.factors;
            for (int k = 0; k < factors; ++k) d.factors.push_back(number(take_word("a number")));
        }
        if (f.memory) d.memory = enum_value(take_word("the memory level"), kAllLevels);
        if (f.strategy) d.strategy = enum_value(take_word("the strategy"), kAllStrategies);
        if (next != args.size())
            fail("too many arguments (" + std::to_string(args.size()) + ", expected " +
                 std::to_string(next) + ")");
        const std::string error = shape_error(d);
        if (!error.empty()) fail(error);
    }

    const std::string &text_;
    size_t at_ = 0;
    std::string current_; // the directive being read
};

} // namespace

Schedule Schedule::parse(const std::string &chain) {
    return ChainReader(chain).read();
}

// One directive per line, keys in a fixed order, so stored schedules diff well.
std::string Schedule::to_json() const {
    if (directives_.empty()) return "[]";
    std::string text = "[\n";
    for (size_t i = 0; i < directives_.size(); ++i) {
        const Directive &d = directives_[i];
        Fields f = fields_of(d.kind);
        nlohmann::ordered_json entry;
        entry["directive"] = dsl::to_string(d.kind);
        if (f.loops != 0) entry["loops"] = d.loops;
        if (f.factors != 0) entry["factors"] = d.factors;
        if (f.name != NameUse::None) entry["name"] = d.name;
        if (f.memory) entry["memory"] = dsl::to_string(d.memory);
        if (f.strategy) entry["strategy"] = dsl::to_string(d.strategy);
        // JSON strings are UTF-8: other bytes in a name (a chain may hold any) become U+FFFD.
        text += "  " + entry.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) +
                (i + 1 < directives_.size() ? ",\n" : "\n");
    }
    return text + "]";
}

namespace {

using Json = nlohmann::json;

// Reads one JSON entry into a Directive; each failure names the entry and the field.
class EntryReader {
  public:
    EntryReader(const Json &entry, size_t index) : entry_(entry), index_(index) {}

    Directive read() {
        if (!entry_.is_object())
            fail("not an object (each entry is {\"directive\": \"split\", ...})");
        Directive d;
        d.kind = read_kind();
        fields_ = fields_of(d.kind);
        context_ = " (" + std::string(to_string(d.kind)) + ")";
        reject_unknown_fields();
        if (fields_.loops != 0) d.loops = read_loops();
        if (fields_.factors != 0) d.factors = read_factors();
        if (fields_.name != NameUse::None) d.name = read_string("name", name_rule(fields_));
        if (fields_.memory) d.memory = read_enum("memory", kAllLevels);
        if (fields_.strategy) d.strategy = read_enum("strategy", kAllStrategies);
        std::string error = shape_error(d);
        if (!error.empty()) fail(error);
        return d;
    }

  private:
    [[noreturn]] void fail(const std::string &what) const {
        throw ScheduleError("schedule JSON entry " + std::to_string(index_) + context_ + ": " +
                            printable(what, kQuotedTextChars));
    }

    Directive::Kind read_kind() const {
        std::string name = read_string("directive", "'directive' must be a string");
        for (Directive::Kind k : kAllKinds)
            if (name == to_string(k)) return k;
        fail("unknown directive '" + name + "' (legal: " + one_of(kAllKinds) + ")");
    }

    void reject_unknown_fields() const {
        std::vector<std::string> used = {"directive"};
        if (fields_.loops != 0) used.push_back("loops");
        if (fields_.factors != 0) used.push_back("factors");
        if (fields_.name != NameUse::None) used.push_back("name");
        if (fields_.memory) used.push_back("memory");
        if (fields_.strategy) used.push_back("strategy");
        for (const auto &item : entry_.items()) {
            if (std::find(used.begin(), used.end(), item.key()) != used.end()) continue;
            std::string list;
            for (const std::string &u : used) list += (list.empty() ? "" : ", ") + u;
            fail("unexpected field '" + item.key() + "' (fields: " + list + ")");
        }
    }

    std::string read_string(const char *key, const std::string &rule) const {
        auto it = entry_.find(key);
        if (it == entry_.end() || !it->is_string()) fail(rule);
        return it->get<std::string>();
    }

    std::vector<std::string> read_loops() const {
        auto it = entry_.find("loops");
        if (it == entry_.end() || !it->is_array()) fail(loops_rule(fields_));
        std::vector<std::string> loops;
        for (const Json &v : *it) {
            if (!v.is_string()) fail(loops_rule(fields_));
            loops.push_back(v.get<std::string>());
        }
        return loops;
    }

    std::vector<int64_t> read_factors() const {
        auto it = entry_.find("factors");
        if (it == entry_.end() || !it->is_array()) fail(factors_rule(fields_));
        std::vector<int64_t> factors;
        for (const Json &v : *it) {
            bool fits = v.is_number_integer() &&
                        !(v.is_number_unsigned() &&
                          v.get<uint64_t>() > uint64_t(std::numeric_limits<int64_t>::max()));
            if (!fits) fail(factors_rule(fields_));
            factors.push_back(v.get<int64_t>());
        }
        return factors;
    }

    template <typename T, size_t N>
    T read_enum(const char *key, const std::array<T, N> &values) const {
        std::string rule = "'" + std::string(key) + "' must be one of " + one_of(values);
        std::string text = read_string(key, rule);
        for (T v : values)
            if (text == to_string(v)) return v;
        fail(rule);
    }

    const Json &entry_;
    size_t index_;
    Fields fields_;
    std::string context_;
};

} // namespace

Schedule Schedule::from_json(const std::string &text) {
    Json root;
    try {
        root = Json::parse(text);
    } catch (const Json::exception &e) { // a syntax error, or a number out of range
        throw ScheduleError("schedule JSON: " + printable(e.what(), kQuotedTextChars));
    }
    if (!root.is_array()) throw ScheduleError("schedule JSON: not an array of directives");
    Schedule schedule;
    for (size_t i = 0; i < root.size(); ++i) schedule.add(EntryReader(root[i], i).read());
    return schedule;
}

} // namespace vpuc::dsl
