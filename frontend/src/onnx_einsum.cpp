// Einsum of one or two operands as the ONNX ops that compute it: an operand's diagonal (an index
// repeated in it) as a Transpose, a Reshape and a Slice with a step, a ReduceSum of the indices
// only one operand has and the result drops, Transposes that put each operand's indices in the
// order [batch, kept, contracted] or [batch, contracted, kept], Reshapes to three axes, a MatMul
// (the registry's batch_matmul) and back to the result's indices. The nodes replace the Einsum
// before the importer takes the graph, so each is imported with its own limits.
#include <algorithm>
#include <cctype>
#include <limits>
#include <map>
#include <set>

#include "onnx_internal.h"
#include "vpu_target/printable.h"

namespace vpuc::frontend::detail {

namespace {

bool is_einsum(const onnx::NodeProto &node) {
    return node.op_type() == "Einsum" && is_onnx_domain(node.domain());
}

// The indices of each operand and of the result, one letter each.
struct Equation {
    std::vector<std::string> operands;
    std::string result;
    bool implicit = false; // no "->": the result is worked out (with_indices)
};

class EinsumLowering {
  public:
    EinsumLowering(onnx::GraphProto &graph, const std::string &path)
        : graph_(graph), path_(path), names_(value_names(graph)) {
        for (const auto *infos : {&graph.input(), &graph.output(), &graph.value_info()})
            for (const onnx::ValueInfoProto &v : *infos)
                if (v.type().has_tensor_type() && v.type().tensor_type().has_shape())
                    shapes_[v.name()] = v.type().tensor_type().shape();
        for (const onnx::TensorProto &t : graph.initializer()) {
            onnx::TensorShapeProto shape;
            for (int64_t d : t.dims()) shape.add_dim()->set_dim_value(d);
            shapes_[t.name()] = shape;
        }
        for (const onnx::NodeProto &node : graph.node()) names_.insert(node.name());
    }

    void run() {
        google::protobuf::RepeatedPtrField<onnx::NodeProto> nodes;
        for (const onnx::NodeProto &node : graph_.node()) {
            if (is_einsum(node))
                lower(node, nodes);
            else
                *nodes.Add() = node;
        }
        graph_.mutable_node()->Swap(&nodes);
    }

  private:
    using Nodes = google::protobuf::RepeatedPtrField<onnx::NodeProto>;

    [[noreturn]] void fail(const std::string &what) const {
        throw ModelError(path_ + ": node '" + printable(base_) + "' (Einsum): " + what);
    }

    std::string fresh(const std::string &wanted) {
        std::string name = base_ + "/" + wanted;
        for (int k = 1; !names_.insert(name).second; ++k)
            name = base_ + "/" + wanted + "_" + std::to_string(k);
        return name;
    }

    // The operands' and the result's terms as written, an ellipsis ("...") left in place.
    Equation parse(std::string text) const {
        text.erase(std::remove(text.begin(), text.end(), ' '), text.end());
        Equation e;
        const size_t arrow = text.find("->");
        const std::string inputs = text.substr(0, arrow);
        for (size_t start = 0;;) {
            const size_t comma = inputs.find(',', start);
            e.operands.push_back(inputs.substr(start, comma - start));
            if (comma == std::string::npos) break;
            start = comma + 1;
        }
        e.implicit = arrow == std::string::npos;
        if (!e.implicit) e.result = text.substr(arrow + 2);
        return e;
    }

    // `term` with its ellipsis, if any, replaced by `letters`; every other character must be an
    // index letter.
    std::string expanded(const std::string &term, const std::string &letters,
                         const std::string &equation) const {
        std::string out;
        const size_t dots = term.find("...");
        for (size_t i = 0; i < term.size(); ++i) {
            if (i == dots) {
                out += letters;
                i += 2;
                continue;
            }
            if (!std::isalpha(static_cast<unsigned char>(term[i])))
                fail("equation '" + printable(equation) + "': '" +
                     printable(std::string(1, term[i])) + "' is not an index letter");
            out += term[i];
        }
        return out;
    }

    // The equation with each ellipsis replaced by index letters of its own, the operands' ranks
    // telling how many (numpy's rule: the ellipsis axes of every operand are the result's, right
    // aligned), and the implicit result worked out: the ellipsis indices, then those that appear
    // once, in alphabetical order.
    Equation with_indices(const Equation &written, const std::string &equation,
                          const std::vector<int> &ranks) const {
        std::string used;
        for (const std::string &t : written.operands) used += t;
        std::string spare; // letters the equation does not use, for the ellipsis axes
        for (char c = 'A'; c <= 'Z'; ++c)
            if (used.find(c) == std::string::npos) spare += c;
        std::vector<int> ellipsis_rank;
        int widest = 0;
        for (size_t i = 0; i < written.operands.size(); ++i) {
            const std::string &t = written.operands[i];
            const size_t dots = t.find("...");
            if (dots != std::string::npos && t.find("...", dots + 1) != std::string::npos)
                fail("equation '" + printable(equation) + "': two ellipses in one operand");
            const int rank = dots == std::string::npos ? 0 : ranks[i] - int(t.size() - 3);
            if (rank < 0)
                fail("equation '" + printable(equation) + "': operand " + std::to_string(i) +
                     " has rank " + std::to_string(ranks[i]) + ", fewer than its indices");
            ellipsis_rank.push_back(rank);
            widest = std::max(widest, rank);
        }
        if (widest > int(spare.size()))
            fail("equation '" + printable(equation) + "': too many ellipsis axes");
        const std::string all = spare.substr(0, size_t(widest));
        Equation e;
        for (size_t i = 0; i < written.operands.size(); ++i)
            e.operands.push_back(expanded(
                written.operands[i], all.substr(all.size() - size_t(ellipsis_rank[i])), equation));
        if (written.implicit) {
            std::map<char, int> count;
            for (const std::string &t : e.operands)
                for (char c : t) ++count[c];
            e.result = all;
            for (const auto &[c, n] : count)
                if (n == 1 && all.find(c) == std::string::npos) e.result += c;
            return e;
        }
        e.result = expanded(written.result, all, equation);
        std::string sorted = e.result;
        std::sort(sorted.begin(), sorted.end());
        if (std::adjacent_find(sorted.begin(), sorted.end()) != sorted.end())
            fail("equation '" + printable(equation) + "': an index repeated in the result");
        for (char c : e.result)
            if (std::none_of(e.operands.begin(), e.operands.end(),
                             [&](const std::string &t) { return t.find(c) != std::string::npos; }))
                fail("equation '" + printable(equation) + "': result index '" +
                     printable(std::string(1, c)) + "' is no operand's");
        return e;
    }

    std::string constant(const std::string &wanted, const std::vector<int64_t> &values) {
        onnx::TensorProto &t = *graph_.add_initializer();
        t.set_name(fresh(wanted));
        t.set_data_type(onnx::TensorProto::INT64);
        t.add_dims(int64_t(values.size()));
        for (int64_t v : values) t.add_int64_data(v);
        return t.name();
    }

    std::string add_node(Nodes &nodes, const std::string &op,
                         const std::vector<std::string> &inputs, const std::string &output,
                         const std::vector<int64_t> &perm = {}) {
        onnx::NodeProto &n = *nodes.Add();
        n.set_op_type(op);
        n.set_name(fresh(op));
        for (const std::string &in : inputs) n.add_input(in);
        n.add_output(output);
        if (op == "Transpose") {
            onnx::AttributeProto &a = *n.add_attribute();
            a.set_name("perm");
            a.set_type(onnx::AttributeProto::INTS);
            for (int64_t p : perm) a.add_ints(p);
        }
        if (op == "ReduceSum") {
            onnx::AttributeProto &a = *n.add_attribute();
            a.set_name("keepdims");
            a.set_type(onnx::AttributeProto::INT);
            a.set_i(0);
        }
        return output;
    }

    // `value`, whose indices are `letters`, with the indices of `drop` summed away.
    std::string summed(Nodes &nodes, const std::string &value, std::string &letters,
                       const std::string &drop) {
        std::vector<int64_t> axes;
        std::string kept;
        for (size_t i = 0; i < letters.size(); ++i) {
            if (drop.find(letters[i]) != std::string::npos)
                axes.push_back(int64_t(i));
            else
                kept += letters[i];
        }
        if (axes.empty()) return value;
        letters = kept;
        return add_node(nodes, "ReduceSum", {value, constant("axes", axes)}, fresh("summed"));
    }

    // `value`, whose indices are `letters`, with its indices in the order of `order`.
    std::string ordered(Nodes &nodes, const std::string &value, const std::string &letters,
                        const std::string &order, const std::string &output = "") {
        std::vector<int64_t> perm;
        for (char c : order) perm.push_back(int64_t(letters.find(c)));
        bool identity = true;
        for (size_t i = 0; i < perm.size(); ++i) identity = identity && perm[i] == int64_t(i);
        if (identity && output.empty()) return value;
        if (identity) return add_node(nodes, "Identity", {value}, output);
        return add_node(nodes, "Transpose", {value}, output.empty() ? fresh("transposed") : output,
                        perm);
    }

    // `value`, whose indices are `letters`, with every index repeated in it taken once: the
    // diagonal. The two axes of an index c of extent n go last (a Transpose), become one of n * n
    // (a Reshape), of which a Slice with step n + 1 takes the n elements where they are equal.
    std::string diagonal(Nodes &nodes, std::string value, std::string &letters,
                         const std::map<char, int64_t> &extent) {
        while (true) {
            size_t p = 0, q = std::string::npos;
            for (; p < letters.size() && q == std::string::npos; ++p)
                q = letters.find(letters[p], p + 1);
            if (q == std::string::npos) return value;
            const char c = letters[--p];
            std::string others;
            std::vector<int64_t> perm;
            for (size_t i = 0; i < letters.size(); ++i)
                if (i != p && i != q) {
                    others += letters[i];
                    perm.push_back(int64_t(i));
                }
            perm.push_back(int64_t(p));
            perm.push_back(int64_t(q));
            if (!std::is_sorted(perm.begin(), perm.end())) // not the identity
                value = add_node(nodes, "Transpose", {value}, fresh("transposed"), perm);
            const int64_t n = extent.at(c);
            std::vector<int64_t> shape;
            for (char o : others) shape.push_back(extent.at(o));
            shape.push_back(n * n);
            value =
                add_node(nodes, "Reshape", {value, constant("square", shape)}, fresh("squares"));
            value =
                add_node(nodes, "Slice",
                         {value, constant("start", {0}), constant("end", {n * n}),
                          constant("axis", {int64_t(others.size())}), constant("step", {n + 1})},
                         fresh("diagonal"));
            letters = others + c;
        }
    }

    void lower(const onnx::NodeProto &node, Nodes &nodes) {
        base_ = node.name().empty() && node.output_size() > 0 ? node.output(0) : node.name();
        std::string equation;
        for (const onnx::AttributeProto &a : node.attribute())
            if (a.name() == "equation") equation = a.s();
        const Equation written = parse(equation);
        if (int(written.operands.size()) != node.input_size())
            fail("equation '" + printable(equation) + "' has " +
                 std::to_string(written.operands.size()) + " operand(s) for " +
                 std::to_string(node.input_size()) + " input(s)");
        if (written.operands.size() > 2)
            fail(std::to_string(written.operands.size()) + " operands: one or two are supported");
        std::vector<int> ranks;
        for (size_t i = 0; i < written.operands.size(); ++i) {
            const auto shape = shapes_.find(node.input(int(i)));
            if (shape == shapes_.end()) fail("input " + std::to_string(i) + " has no known shape");
            ranks.push_back(shape->second.dim_size());
        }
        Equation e = with_indices(written, equation, ranks);
        // The extent of every index, from the operands' inferred shapes.
        std::map<char, int64_t> extent;
        for (size_t i = 0; i < e.operands.size(); ++i) {
            const auto shape = shapes_.find(node.input(int(i)));
            if (shape->second.dim_size() != int(e.operands[i].size()))
                fail("input " + std::to_string(i) + " has rank " +
                     std::to_string(shape->second.dim_size()) + ", not the " +
                     std::to_string(e.operands[i].size()) + " of its indices");
            for (int d = 0; d < shape->second.dim_size(); ++d) {
                if (!shape->second.dim(d).has_dim_value())
                    fail("input " + std::to_string(i) + " has a dynamic dimension");
                const int64_t v = shape->second.dim(d).dim_value();
                const char c = e.operands[i][size_t(d)];
                if (extent.count(c) && extent[c] != v)
                    fail("index '" + std::string(1, c) + "' has extents " +
                         std::to_string(extent[c]) + " and " + std::to_string(v));
                extent[c] = v;
            }
        }
        const std::string &output = node.output(0);
        std::vector<std::string> values;
        for (size_t i = 0; i < e.operands.size(); ++i)
            values.push_back(diagonal(nodes, node.input(int(i)), e.operands[i], extent));
        if (e.operands.size() == 1) {
            std::string letters = e.operands[0];
            std::string drop;
            for (char c : letters)
                if (e.result.find(c) == std::string::npos) drop += c;
            const std::string value = summed(nodes, values[0], letters, drop);
            ordered(nodes, value, letters, e.result, output);
            return;
        }
        std::string a = e.operands[0], b = e.operands[1];
        // Indices of one operand only, and not of the result, are summed first.
        auto only_summed = [&](const std::string &self, const std::string &other) {
            std::string drop;
            for (char c : self)
                if (other.find(c) == std::string::npos && e.result.find(c) == std::string::npos)
                    drop += c;
            return drop;
        };
        const std::string drop_a = only_summed(a, b), drop_b = only_summed(b, a);
        const std::string va = summed(nodes, values[0], a, drop_a);
        const std::string vb = summed(nodes, values[1], b, drop_b);
        std::string batch, kept_a, kept_b, contracted;
        for (char c : e.result) {
            const bool in_a = a.find(c) != std::string::npos, in_b = b.find(c) != std::string::npos;
            if (in_a && in_b)
                batch += c;
            else if (in_a)
                kept_a += c;
            else
                kept_b += c;
        }
        for (char c : a)
            if (b.find(c) != std::string::npos && e.result.find(c) == std::string::npos)
                contracted += c;
        auto product = [&](const std::string &letters) {
            int64_t p = 1;
            for (char c : letters) {
                if (extent[c] > 0 && p > std::numeric_limits<int64_t>::max() / extent[c])
                    fail("the extents of indices '" + letters + "' multiply past 2^63");
                p *= extent[c];
            }
            return p;
        };
        const std::string rows_a =
            add_node(nodes, "Reshape",
                     {ordered(nodes, va, a, batch + kept_a + contracted),
                      constant("a_shape", {product(batch), product(kept_a), product(contracted)})},
                     fresh("a"));
        const std::string rows_b =
            add_node(nodes, "Reshape",
                     {ordered(nodes, vb, b, batch + contracted + kept_b),
                      constant("b_shape", {product(batch), product(contracted), product(kept_b)})},
                     fresh("b"));
        const std::string product_value =
            add_node(nodes, "MatMul", {rows_a, rows_b}, fresh("product"));
        std::vector<int64_t> shape;
        const std::string letters = batch + kept_a + kept_b;
        for (char c : letters) shape.push_back(extent[c]);
        const bool reordered = letters != e.result;
        const std::string unflat =
            add_node(nodes, "Reshape", {product_value, constant("shape", shape)},
                     reordered ? fresh("result") : output);
        if (reordered) ordered(nodes, unflat, letters, e.result, output);
    }

    onnx::GraphProto &graph_;
    const std::string &path_;
    std::set<std::string> names_;
    std::map<std::string, onnx::TensorShapeProto> shapes_;
    std::string base_; // the node being lowered
};

} // namespace

bool lower_einsums(onnx::ModelProto &model, const std::string &path) {
    const onnx::GraphProto &graph = model.graph();
    if (std::none_of(graph.node().begin(), graph.node().end(), is_einsum)) return false;
    EinsumLowering(*model.mutable_graph(), path).run();
    return true;
}

} // namespace vpuc::frontend::detail
