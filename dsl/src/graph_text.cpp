#include "dsl/graph_text.h"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <cstring>
#include <map>
#include <sstream>

namespace vpuc::dsl {

namespace {

// A character a name may hold unquoted (std::strchr would also find the terminating NUL).
bool name_char(char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || (c != '\0' && std::strchr("_.:/-", c));
}

bool plain_name(const std::string &name) {
    return !name.empty() && std::all_of(name.begin(), name.end(), name_char);
}

// %name, or %"name" with \ and " escaped when the name holds other characters (ONNX names may).
std::string name_text(const std::string &name) {
    if (plain_name(name)) return "%" + name;
    return "%" + to_string(AttrValue(name));
}

std::string float_text(float v) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.9g", double(v));
    return buf;
}

const ElemType kElemTypes[] = {ElemType::U8,  ElemType::I8,  ElemType::F16,  ElemType::F32,
                               ElemType::I32, ElemType::I64, ElemType::Bool, ElemType::F64};

class LineReader {
  public:
    LineReader(const std::string &line, int number) : s_(line), line_(number) {}

    [[noreturn]] void fail(const std::string &why) const {
        throw GraphError("graph text line " + std::to_string(line_) + ", column " +
                         std::to_string(pos_ + 1) + ": " + why);
    }
    void skip_space() {
        while (pos_ < s_.size() && s_[pos_] == ' ') ++pos_;
    }
    bool at_end() {
        skip_space();
        return pos_ >= s_.size();
    }
    bool accept(const std::string &word) {
        skip_space();
        if (s_.compare(pos_, word.size(), word) != 0) return false;
        pos_ += word.size();
        return true;
    }
    void expect(const std::string &word) {
        if (!accept(word)) fail("expected '" + word + "'");
    }
    std::string word() {
        skip_space();
        const size_t start = pos_;
        while (pos_ < s_.size() && (std::isalnum(static_cast<unsigned char>(s_[pos_])) ||
                                    s_[pos_] == '_' || s_[pos_] == '.' || s_[pos_] == '-'))
            ++pos_;
        if (pos_ == start) fail("expected a word");
        return s_.substr(start, pos_ - start);
    }
    AttrValue value(const std::string &what) {
        skip_space();
        try {
            return parse_attr_value(s_, pos_, what);
        } catch (const AttrError &e) {
            fail(e.what());
        }
    }
    std::string quoted() {
        skip_space();
        if (pos_ >= s_.size() || s_[pos_] != '"') fail("expected a quoted string");
        return std::get<std::string>(value("string"));
    }
    std::string name() {
        expect("%");
        if (pos_ < s_.size() && s_[pos_] == '"') return quoted();
        const size_t start = pos_;
        while (pos_ < s_.size() && (std::isalnum(static_cast<unsigned char>(s_[pos_])) ||
                                    std::strchr("_.:/-", s_[pos_])))
            ++pos_;
        if (pos_ == start) fail("expected a name after '%'");
        return s_.substr(start, pos_ - start);
    }
    int64_t integer() {
        const AttrValue v = value("integer");
        if (type_of(v) != AttrType::Int) fail("expected an integer");
        return std::get<int64_t>(v);
    }
    double number() {
        const AttrValue v = value("number");
        if (type_of(v) == AttrType::Int) return double(std::get<int64_t>(v));
        if (type_of(v) != AttrType::Float) fail("expected a number");
        return std::get<double>(v);
    }

    TensorDesc tensor(const std::string &name) {
        TensorDesc t;
        t.name = name;
        std::vector<int64_t> extents;
        do {
            const int64_t e = integer();
            if (e < 1 || e > (int64_t(1) << 31)) fail("a tensor extent must be in [1, 2^31]");
            extents.push_back(e);
        } while (accept("x"));
        if (extents.size() > 8) fail("a tensor of rank above 8");
        t.shape = Shape(extents);
        const std::string type = word();
        bool known = false;
        for (ElemType e : kElemTypes)
            if (type == to_string(e)) {
                t.type = e;
                known = true;
            }
        if (!known) fail("unknown element type '" + type + "'");
        const std::string order = word();
        if (order == "NCHW") {
            t.order = DimsOrder::NCHW();
        } else if (order == "NHWC") {
            t.order = DimsOrder::NHWC();
        } else if (order == "ND" + std::to_string(extents.size())) {
            t.order = DimsOrder::identity(int(extents.size()));
        } else {
            std::vector<Dim> dims;
            for (char c : order) {
                if (c < '0' || c >= char('0' + extents.size()))
                    fail("layout '" + order +
                         "' is not NCHW, NHWC, ND<rank> or a permutation of 0.." +
                         std::to_string(extents.size() - 1));
                dims.push_back(Dim(c - '0'));
            }
            try {
                t.order = DimsOrder(dims);
            } catch (const std::exception &e) {
                fail(std::string("layout '") + order + "': " + e.what());
            }
        }
        if (t.order.rank() != int(extents.size()))
            fail("layout " + order + " for a tensor of rank " + std::to_string(extents.size()));
        if (accept("q(")) {
            if (accept("axis=")) {
                const int64_t axis = integer();
                if (axis < 0 || axis >= int64_t(extents.size()))
                    fail("quantization axis out of range");
                t.quant.axis = Dim(int(axis));
                expect(",");
                for (double v : as_floats(value("scales"))) t.quant.scale.push_back(float(v));
                expect(",");
                const AttrValue zps = value("zero points");
                if (type_of(zps) != AttrType::Ints) fail("expected a list of integer zero points");
                for (int64_t z : std::get<std::vector<int64_t>>(zps))
                    t.quant.zero_point.push_back(int32_t(z));
                if (t.quant.scale.size() != t.quant.zero_point.size())
                    fail("as many zero points as scales expected");
            } else {
                t.quant.scale = {float(number())};
                expect(",");
                t.quant.zero_point = {int32_t(integer())};
            }
            expect(")");
        }
        return t;
    }

    std::vector<double> as_floats(const AttrValue &v) {
        if (const auto *i = std::get_if<std::vector<int64_t>>(&v))
            return std::vector<double>(i->begin(), i->end());
        if (const auto *f = std::get_if<std::vector<double>>(&v)) return *f;
        fail("expected a list of numbers");
    }

    const std::string &text() const { return s_; }
    size_t &pos() { return pos_; }
    int line() const { return line_; }

  private:
    const std::string &s_;
    int line_;
    size_t pos_ = 0;
};

} // namespace

std::string tensor_text(const TensorDesc &t) {
    std::string s = to_string(t.shape) + " " + to_string(t.type) + " " + t.order.name();
    if (t.quant.empty()) return s;
    if (!t.quant.per_channel())
        return s + " q(" + float_text(t.quant.scale[0]) + "," +
               std::to_string(t.quant.zero_point[0]) + ")";
    s += " q(axis=" + std::to_string(t.quant.axis.index()) + ",[";
    for (size_t i = 0; i < t.quant.scale.size(); ++i)
        s += (i ? "," : "") + float_text(t.quant.scale[i]);
    s += "],[";
    for (size_t i = 0; i < t.quant.zero_point.size(); ++i)
        s += (i ? "," : "") + std::to_string(t.quant.zero_point[i]);
    return s + "])";
}

std::string print_graph(const Graph &graph, const GraphPrintOptions &options) {
    std::ostringstream os;
    os << "graph " << to_string(AttrValue(graph.name())) << "\n";
    for (const Layer &in : graph.inputs())
        os << "input " << name_text(in.name()) << " : " << tensor_text(in.output()) << "\n";
    for (const Layer &layer : graph.layers()) {
        os << name_text(layer.name()) << " = " << layer.op() << "(";
        for (size_t i = 0; i < layer.inputs().size(); ++i)
            os << (i ? ", " : "") << name_text(layer.inputs()[i].name());
        os << ") {";
        const auto &entries = layer.attrs().entries();
        for (size_t i = 0; i < entries.size(); ++i)
            os << (i ? ", " : "") << entries[i].first << "="
               << to_string(entries[i].second, options.tensor_data);
        os << "} :";
        for (size_t i = 0; i < layer.outputs().size(); ++i)
            os << (i ? ", " : " ") << tensor_text(layer.outputs()[i]);
        if (options.schedules && !layer.schedule().empty())
            os << " schedule " << layer.schedule().to_string();
        os << "\n";
    }
    os << "output";
    for (size_t i = 0; i < graph.outputs().size(); ++i)
        os << (i ? ", " : " ") << name_text(graph.outputs()[i].name());
    os << "\n";
    return os.str();
}

Graph read_graph(const std::string &text, const LayerRegistry &registry) {
    std::map<std::string, Layer> layers;
    std::string graph_name;
    std::vector<Layer> outputs;
    bool have_header = false;
    std::istringstream lines(text);
    std::string line;
    int number = 0;
    while (std::getline(lines, line)) {
        ++number;
        LineReader r(line, number);
        if (r.at_end()) continue;
        if (!have_header) {
            r.expect("graph");
            graph_name = r.quoted();
            have_header = true;
        } else if (r.accept("input ")) {
            const std::string name = r.name();
            r.expect(":");
            if (layers.count(name)) r.fail("a second layer named '" + name + "'");
            layers.emplace(name, Layer::input(r.tensor(name)));
        } else if (r.accept("output")) {
            do {
                const std::string name = r.name();
                auto it = layers.find(name);
                if (it == layers.end()) r.fail("output '" + name + "' is not defined above");
                outputs.push_back(it->second);
            } while (r.accept(","));
        } else {
            const std::string name = r.name();
            if (layers.count(name)) r.fail("a second layer named '" + name + "'");
            r.expect("=");
            const std::string op = r.word();
            r.expect("(");
            std::vector<Layer> inputs;
            while (!r.accept(")")) {
                if (!inputs.empty()) r.expect(",");
                const std::string in = r.name();
                auto it = layers.find(in);
                if (it == layers.end())
                    r.fail("layer '" + name + "' reads '" + in + "', not defined above");
                inputs.push_back(it->second);
            }
            r.expect("{");
            Attrs attrs;
            while (!r.accept("}")) {
                if (!attrs.empty()) r.expect(",");
                const std::string attr = r.word();
                r.expect("=");
                attrs.set(attr, r.value("attribute '" + attr + "'"));
            }
            r.expect(":");
            std::vector<TensorDesc> said = {r.tensor(name)};
            while (r.accept(",")) said.push_back(r.tensor(output_name(name, said.size())));
            Layer layer;
            try {
                layer = registry.build(op, name, inputs, attrs);
            } catch (const Error &e) {
                r.fail(e.what());
            } catch (const std::invalid_argument &e) {
                r.fail(e.what());
            }
            std::string produced, text;
            for (size_t i = 0; i < layer.outputs().size(); ++i)
                produced += (i ? ", " : "") + tensor_text(layer.outputs()[i]);
            for (size_t i = 0; i < said.size(); ++i) text += (i ? ", " : "") + tensor_text(said[i]);
            if (produced != text)
                r.fail(op + " '" + name + "' produces " + produced + "; the text says " + text);
            if (r.accept("schedule ")) {
                try {
                    layer.schedule() = Schedule::parse(r.text().substr(r.pos()));
                } catch (const ScheduleError &e) {
                    r.fail(e.what());
                }
                r.pos() = r.text().size();
            }
            layers.emplace(name, layer);
        }
        if (!r.at_end()) r.fail("unexpected text after the line's end");
    }
    if (!have_header) throw GraphError("graph text: empty (expected 'graph \"name\"')");
    if (outputs.empty()) throw GraphError("graph text: no 'output' line");
    Graph graph(graph_name, outputs);
    graph.verify(&registry);
    return graph;
}

} // namespace vpuc::dsl
