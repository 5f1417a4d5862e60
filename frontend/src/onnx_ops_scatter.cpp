// GatherND, ScatterND, ScatterElements, Scatter, ReverseSequence and MaxUnpool with constant
// indices (sequence lengths): each output element is one element of the data (or of the updates,
// or a zero), known at compile time, so the op is one gather of constant indices from the data
// flattened (NODE.data_flat), the updates flattened after it (NODE.updates_flat, NODE.sources),
// reshaped to the output: the gather layer's SHAVE copy kernel, which reads each picked element
// once. A scatter's reduction takes one such gather per repeated write (scattered, below).
// Computed indices are refused naming the node.
#include <functional>
#include <limits>
#include <map>
#include <string>
#include <vector>

#include "dsl/constant_values.h"
#include "onnx_internal.h"

namespace vpuc::frontend::detail {

namespace {

using Layers = std::vector<dsl::Layer>;

std::vector<int64_t> extents_of(const dsl::Layer &layer) {
    return layer.output().shape.raw();
}

int64_t product(const std::vector<int64_t> &extents, size_t from, size_t to) {
    int64_t p = 1;
    for (size_t i = from; i < to; ++i) p *= extents[i];
    return p;
}

// Input `i`'s constant indices, each made non-negative against `extent(position)`, the extent
// the index at that position (row-major) indexes; one outside [-extent, extent) is an error
// naming the node.
dsl::ConstValues constant_indices(NodeImport &node, size_t i,
                                  const std::function<int64_t(size_t position)> &extent) {
    if (!dsl::is_constant(node.input(i)) &&
        !(node.input(i).is_input() && node.options().known_inputs.count(node.input(i).name())))
        node.fail("indices must be a constant (an initializer, or computed from constants); "
                  "computed indices are not supported");
    dsl::ConstValues v =
        dsl::const_values(node.constant_input(i, "indices"), node.node().input(int(i)));
    for (size_t p = 0; p < v.ints.size(); ++p) {
        const int64_t e = extent(p);
        if (v.ints[p] < -e || v.ints[p] >= e)
            node.fail("index " + std::to_string(v.ints[p]) + " (element " + std::to_string(p) +
                      " of the indices) is outside [-" + std::to_string(e) + ", " +
                      std::to_string(e) + ")");
        if (v.ints[p] < 0) v.ints[p] += e;
    }
    return v;
}

// `sources` flattened (each NAME.ROLE of its role) and joined (NAME.sources), each output
// element picked from them by `map` (an index into the joined elements, row-major; NAME.picked),
// reshaped to `shape`: the layer `name`.
dsl::Layer static_gather(NodeImport &node, const std::string &name,
                         const std::vector<std::pair<dsl::Layer, std::string>> &sources,
                         const std::vector<int64_t> &map, const std::vector<int64_t> &shape) {
    Layers flat;
    for (const auto &[source, role] : sources) {
        // Several images held NHWC flatten as rows of channels [N, C, H * W] first
        // (NAME.ROLE_rows), which a reshape to one dimension reads in logical order.
        const std::vector<int64_t> &extents = source.output().shape.raw();
        dsl::Layer logical = source;
        if (extents.size() == 4 && extents[0] > 1 &&
            source.output().order == dsl::DimsOrder::NHWC())
            logical = node.build(
                "reshape", node.unique_name(name + "." + role + "_rows"), {source},
                dsl::Attrs().set("shape", std::vector<int64_t>{extents[0], extents[1],
                                                               extents[2] * extents[3]}));
        flat.push_back(node.build(
            "reshape", node.unique_name(name + "." + role), {logical},
            dsl::Attrs().set("shape", std::vector<int64_t>{source.output().shape.elements()})));
    }
    const dsl::Layer joined = flat.size() == 1
                                  ? flat[0]
                                  : node.build("concat", node.unique_name(name + ".sources"), flat,
                                               dsl::Attrs().set("axis", int64_t(0)));
    dsl::ConstValues indices;
    indices.type = dsl::ElemType::I64;
    indices.shape = {int64_t(map.size())};
    indices.ints = map;
    const dsl::Layer picked =
        node.build("gather", node.unique_name(name + ".picked"), {joined},
                   dsl::Attrs().set("axis", int64_t(0)).set("indices", dsl::const_buffer(indices)));
    return node.build("reshape", name, {picked}, dsl::Attrs().set("shape", shape));
}

// One update written: the data's element `target` (flat, row-major) takes updates' `update`.
struct Write {
    int64_t target, update;
};

// The data (input 0) with `writes` of the updates (input 2), in order, by the node's
// `reduction`: none, the last write to an element wins (as ONNX's reference loops); add, mul,
// max or min, the element combined with each write in turn. A reduction takes one gather per
// write to the same element (NODE.write_K: the K-th write of each element, the operation's
// identity, a constant NODE.identity, elsewhere) and the eltwise layer of the operation.
Layers scattered(NodeImport &node, const std::vector<Write> &writes) {
    const dsl::Layer &data = node.input(0), &updates = node.input(2);
    const std::vector<int64_t> shape = extents_of(data);
    const int64_t elements = data.output().shape.elements();
    const std::string reduction = node.attr_string("reduction", "none");
    if (reduction == "none") {
        std::vector<int64_t> map(static_cast<size_t>(elements));
        for (int64_t e = 0; e < elements; ++e) map[size_t(e)] = e;
        for (const Write &w : writes) map[size_t(w.target)] = elements + w.update;
        return {static_gather(node, node.name(), {{data, "data_flat"}, {updates, "updates_flat"}},
                              map, shape)};
    }
    const std::map<std::string, double> identities = {
        {"add", 0},
        {"mul", 1},
        {"max", -std::numeric_limits<double>::infinity()},
        {"min", std::numeric_limits<double>::infinity()}};
    const auto identity = identities.find(reduction);
    if (identity == identities.end())
        node.fail("reduction '" + reduction + "': none, add, mul, max or min");
    const dsl::ElemType type = updates.output().type;
    if (type != dsl::ElemType::F16 && type != dsl::ElemType::F32)
        node.fail("reduction '" + reduction + "' takes float data (the updates are " +
                  dsl::to_string(type) + ")");
    dsl::ConstValues one;
    one.type = type;
    one.shape = {1};
    one.reals = {identity->second};
    const dsl::Layer neutral = dsl::LayerRegistry::constant(
        node.unique_name(node.name() + ".identity"), dsl::const_buffer(one));
    // levels[k][target]: the update of the target's K-th write.
    std::vector<std::map<int64_t, int64_t>> levels;
    std::map<int64_t, size_t> written;
    for (const Write &w : writes) {
        const size_t k = written[w.target]++;
        if (k == levels.size()) levels.emplace_back();
        levels[k][w.target] = w.update;
    }
    const int64_t identity_index = updates.output().shape.elements();
    dsl::Layer result = data;
    for (size_t k = 0; k < levels.size(); ++k) {
        std::vector<int64_t> map(static_cast<size_t>(elements), identity_index);
        for (const auto &[target, update] : levels[k]) map[size_t(target)] = update;
        const dsl::Layer level =
            static_gather(node, node.unique_name(node.name() + ".write_" + std::to_string(k)),
                          {{updates, "updates_flat"}, {neutral, "identity_flat"}}, map, shape);
        result = node.build(reduction,
                            k + 1 == levels.size()
                                ? node.name()
                                : node.unique_name(node.name() + ".combined_" + std::to_string(k)),
                            {result, level}, {});
    }
    return {result};
}

} // namespace

// output[p, ...] = data[batch of p, indices[p, :], ...]: with b batch_dims, p's first b
// coordinates are the data's batch, and the m entries of each index row the next m axes.
Layers import_gather_nd(NodeImport &node) {
    const std::vector<int64_t> data = extents_of(node.input(0));
    const int64_t b = node.attr_int("batch_dims", 0);
    const std::vector<int64_t> rows = extents_of(node.input(1));
    if (rows.empty()) node.fail("indices must have rank 1 or more");
    const int64_t m = rows.back();
    if (b < 0 || m < 1 || b + m > int64_t(data.size()) || b >= int64_t(rows.size()))
        node.fail("batch_dims " + std::to_string(b) + " and index rows of " + std::to_string(m) +
                  " do not fit data of rank " + std::to_string(data.size()));
    for (int64_t i = 0; i < b; ++i)
        if (rows[size_t(i)] != data[size_t(i)])
            node.fail("the indices' batch axes must be the data's");
    const dsl::ConstValues idx =
        constant_indices(node, 1, [&](size_t p) { return data[size_t(b) + p % size_t(m)]; });
    const int64_t inner = product(data, size_t(b + m), data.size());
    const int64_t picked_per_batch = product(data, size_t(b), size_t(b + m));
    const int64_t picks = int64_t(idx.ints.size()) / m;
    const int64_t picks_per_batch = picks / std::max<int64_t>(product(rows, 0, size_t(b)), 1);
    std::vector<int64_t> map;
    map.reserve(size_t(picks * inner));
    for (int64_t p = 0; p < picks; ++p) {
        int64_t slice = 0;
        for (int64_t j = 0; j < m; ++j)
            slice = slice * data[size_t(b + j)] + idx.ints[size_t(p * m + j)];
        const int64_t base = ((p / picks_per_batch) * picked_per_batch + slice) * inner;
        for (int64_t t = 0; t < inner; ++t) map.push_back(base + t);
    }
    std::vector<int64_t> shape(rows.begin(), rows.end() - 1);
    shape.insert(shape.end(), data.begin() + b + m, data.end());
    return {static_gather(node, node.name(), {{node.input(0), "data_flat"}}, map, shape)};
}

// output = data, with output[indices[p, :], ...] = updates[p, ...], or combined with it by the
// reduction.
Layers import_scatter_nd(NodeImport &node) {
    const std::vector<int64_t> data = extents_of(node.input(0));
    const std::vector<int64_t> rows = extents_of(node.input(1));
    if (rows.empty()) node.fail("indices must have rank 1 or more");
    const int64_t m = rows.back();
    if (m < 1 || m > int64_t(data.size()))
        node.fail("index rows of " + std::to_string(m) + " do not fit data of rank " +
                  std::to_string(data.size()));
    const dsl::ConstValues idx =
        constant_indices(node, 1, [&](size_t p) { return data[p % size_t(m)]; });
    const int64_t inner = product(data, size_t(m), data.size());
    const int64_t picks = int64_t(idx.ints.size()) / m;
    std::vector<Write> writes;
    for (int64_t p = 0; p < picks; ++p) {
        int64_t slice = 0;
        for (int64_t j = 0; j < m; ++j)
            slice = slice * data[size_t(j)] + idx.ints[size_t(p * m + j)];
        for (int64_t t = 0; t < inner; ++t) writes.push_back({slice * inner + t, p * inner + t});
    }
    return scattered(node, writes);
}

// output = data, with output at index j, its `axis` coordinate replaced by indices[j], =
// updates[j], or combined with it by the reduction (indices and updates of one shape, no larger
// than the data); Scatter, its name before opset 11, too.
Layers import_scatter_elements(NodeImport &node) {
    const std::vector<int64_t> data = extents_of(node.input(0));
    const std::vector<int64_t> at = extents_of(node.input(1));
    const int64_t rank = int64_t(data.size());
    int64_t axis = node.attr_int("axis", 0);
    if (axis < -rank || axis >= rank)
        node.fail("axis " + std::to_string(axis) + " is outside the rank " + std::to_string(rank));
    if (axis < 0) axis += rank;
    if (at != extents_of(node.input(2)) || int64_t(at.size()) != rank)
        node.fail("indices and updates must have one shape, of the data's rank");
    for (int64_t d = 0; d < rank; ++d)
        if (at[size_t(d)] > data[size_t(d)])
            node.fail("indices are larger than the data along axis " + std::to_string(d));
    const dsl::ConstValues idx =
        constant_indices(node, 1, [&](size_t) { return data[size_t(axis)]; });
    std::vector<Write> writes;
    std::vector<int64_t> coord(size_t(rank), 0);
    for (int64_t j = 0; j < int64_t(idx.ints.size()); ++j) {
        // coord: j's coordinates in the indices' shape, row-major.
        int64_t rest = j;
        for (int64_t d = rank - 1; d >= 0; --d) {
            coord[size_t(d)] = rest % at[size_t(d)];
            rest /= at[size_t(d)];
        }
        coord[size_t(axis)] = idx.ints[size_t(j)];
        int64_t target = 0;
        for (int64_t d = 0; d < rank; ++d) target = target * data[size_t(d)] + coord[size_t(d)];
        writes.push_back({target, j});
    }
    return scattered(node, writes);
}

// output = input, with the first sequence_lens[b] elements along time_axis of each batch b
// (along batch_axis) in reverse order.
Layers import_reverse_sequence(NodeImport &node) {
    const std::vector<int64_t> data = extents_of(node.input(0));
    const int64_t rank = int64_t(data.size());
    const int64_t batch_axis = node.attr_int("batch_axis", 1),
                  time_axis = node.attr_int("time_axis", 0);
    if (rank < 2 || !((batch_axis == 0 && time_axis == 1) || (batch_axis == 1 && time_axis == 0)))
        node.fail("batch_axis " + std::to_string(batch_axis) + " and time_axis " +
                  std::to_string(time_axis) + " of an input of rank " + std::to_string(rank) +
                  ": they must be 0 and 1, in either order, of a rank of 2 or more");
    const int64_t batches = data[size_t(batch_axis)], steps = data[size_t(time_axis)];
    // A computed sequence_lens is an error naming the node (NodeImport::constant_layer).
    const std::vector<int64_t> lengths = node.constant_ints(1, "sequence_lens");
    if (int64_t(lengths.size()) != batches)
        node.fail(std::to_string(lengths.size()) + " sequence_lens for a batch of " +
                  std::to_string(batches));
    for (size_t b = 0; b < lengths.size(); ++b)
        if (lengths[b] < 0 || lengths[b] > steps)
            node.fail("sequence_lens[" + std::to_string(b) + "] = " + std::to_string(lengths[b]) +
                      " is outside [0, " + std::to_string(steps) + "]");
    // Axes 0 and 1 are the batch and the time in some order; the rest is `inner` per pair.
    const int64_t inner = product(data, 2, data.size());
    std::vector<int64_t> map;
    map.reserve(size_t(batches * steps * inner));
    for (int64_t outer = 0; outer < data[0]; ++outer)
        for (int64_t second = 0; second < data[1]; ++second) {
            const int64_t b = batch_axis == 0 ? outer : second,
                          t = batch_axis == 0 ? second : outer;
            const int64_t length = lengths[size_t(b)];
            const int64_t from = t < length ? length - 1 - t : t;
            const int64_t source = batch_axis == 0 ? b * steps + from : from * batches + b;
            for (int64_t e = 0; e < inner; ++e) map.push_back(source * inner + e);
        }
    return {static_gather(node, node.name(), {{node.input(0), "data_flat"}}, map, data)};
}

// output = zeros of the unpooled shape, with output (flattened) at indices[j] = X[j] (the last
// write wins, as ONNX's reference loops): the inverse of MaxPool with its indices. The shape is
// output_shape when given, else (in - 1) * stride - pads + kernel along each spatial axis.
Layers import_max_unpool(NodeImport &node) {
    const dsl::Layer &x = node.input(0);
    if (!x.output().quant.empty())
        node.fail("input 0 is quantized: its zeros are not the integer 0 (dequantize it first)");
    const std::vector<int64_t> in = extents_of(x);
    const std::vector<int64_t> kernel = node.attr_ints("kernel_shape", {});
    const size_t spatial = kernel.size();
    if (spatial == 0 || in.size() != spatial + 2)
        node.fail("kernel_shape of " + std::to_string(spatial) + " axes for an input of rank " +
                  std::to_string(in.size()) + ": it must give each axis after N and C");
    const std::vector<int64_t> strides =
        node.attr_ints("strides", std::vector<int64_t>(spatial, 1));
    const std::vector<int64_t> pads = node.attr_ints("pads", std::vector<int64_t>(2 * spatial, 0));
    if (strides.size() != spatial || pads.size() != 2 * spatial)
        node.fail("strides and pads must give each spatial axis (pads twice)");
    std::vector<int64_t> out = {in[0], in[1]};
    for (size_t d = 0; d < spatial; ++d)
        out.push_back((in[d + 2] - 1) * strides[d] - pads[d] - pads[d + spatial] + kernel[d]);
    if (node.has_input(2)) {
        const std::vector<int64_t> given = node.constant_ints(2, "output_shape");
        if (given.size() != out.size() || given[0] != in[0] || given[1] != in[1])
            node.fail("output_shape must give N and C of the input and each spatial axis");
        for (size_t d = 2; d < out.size(); ++d)
            if (given[d] < out[d])
                node.fail("output_shape is smaller than the unpooled shape along axis " +
                          std::to_string(d));
        out = given;
    }
    double unpooled = 1;
    for (int64_t e : out) {
        if (e < 1) node.fail("the unpooled shape has an extent below 1");
        unpooled *= double(e);
    }
    // Each output element takes an entry of the gather's table.
    if (unpooled > double(1 << 24))
        node.fail("the unpooled shape " + dsl::to_string(dsl::Shape(out)) +
                  " has more than 2^24 elements");
    if (extents_of(node.input(1)) != in) node.fail("the indices must have the shape of input 0");
    const int64_t elements = product(out, 0, out.size());
    const dsl::ConstValues idx = constant_indices(node, 1, [&](size_t) { return elements; });
    // Element `elements` of the joined sources is the zero after X's.
    const int64_t zero = x.output().shape.elements();
    std::vector<int64_t> map(size_t(elements), zero);
    for (size_t j = 0; j < idx.ints.size(); ++j) map[size_t(idx.ints[j])] = int64_t(j);
    dsl::ConstValues zeros;
    zeros.type = x.output().type;
    zeros.shape = {1};
    if (zeros.is_float())
        zeros.reals = {0.0};
    else
        zeros.ints = {0};
    const dsl::Layer zero_layer = dsl::LayerRegistry::constant(
        node.unique_name(node.name() + ".zero"), dsl::const_buffer(zeros));
    return {static_gather(node, node.name(), {{x, "x_flat"}, {zero_layer, "zero_flat"}}, map, out)};
}

} // namespace vpuc::frontend::detail
