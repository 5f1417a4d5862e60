#include "bench/shave_layers.h"

#include "algorithms/registry.h"

namespace vpuc::bench {

namespace {

// VPUNN's SHAVE models price output bytes of fp16 tensors (vector_size 8: fp16 lanes).
constexpr int kElementBytes = 2;

// The attributes an op requires, at values any input allows, and the spec's form.
dsl::Attrs required_attrs(const ShaveLayerSpec &spec) {
    const std::string &op = spec.op;
    dsl::Attrs attrs;
    if (!spec.approximate.empty()) attrs.set("approximate", spec.approximate);
    if (!spec.arithmetic.empty()) attrs.set("arithmetic", spec.arithmetic);
    if (op == "clamp") attrs.set("low", -1.0).set("high", 1.0);
    if (op == "cumsum") attrs.set("axis", int64_t(-1));
    return attrs;
}

// A graph input of the measured shape: fp16, or bool (u8 0 or 1, unquantized).
dsl::Layer input_layer(const std::string &name, bool boolean) {
    dsl::TensorDesc t =
        activation(name, kShaveLayerChannels, kShaveLayerWidth, kShaveLayerHeight, Precision::Fp16);
    if (boolean) t.type = dsl::ElemType::U8;
    return dsl::Layer::input(t);
}

dsl::Graph shave_layer_graph(const ShaveLayerSpec &spec) {
    std::vector<dsl::Layer> inputs;
    if (spec.op == "where") inputs.push_back(input_layer("condition", true));
    const bool boolean =
        spec.op == "not" || spec.op == "and" || spec.op == "or" || spec.op == "xor";
    for (int i = 0; i < spec.inputs; ++i)
        inputs.push_back(input_layer("x" + std::to_string(i), boolean));
    const dsl::Layer layer =
        algorithms::layer_registry().build(spec.op, spec.op, inputs, required_attrs(spec));
    return dsl::Graph(spec.op, {layer});
}

} // namespace

const std::vector<ShaveLayerSpec> &shave_layer_specs() {
    // VPUNN's names, in its file's order; "" where no vpuc layer computes the kernel.
    static const std::vector<ShaveLayerSpec> specs = {
        {"abs", "abs"},
        {"sigmoid", "sigmoid"},
        {"sigmoid", "sigmoid", 1, "", "fp16"},
        {"clamp", "clamp"},
        {"cos", "cos"},
        {"cumsum", "cumsum"},
        {"hsigmoid", "hard_sigmoid"},
        {"elu", "elu"},
        {"elu", "elu", 1, "", "fp16"},
        {"mish", "mish"},
        {"mish", "mish", 1, "", "fp16"},
        {"floor", "floor"},
        {"erf", "erf"},
        {"exp", "exp"},
        {"sqrt", "sqrt"},
        {"ceiling", "ceil"},
        {"logicalnot", "not"},
        {"log", "log"},
        {"acos", "acos"},
        {"acosh", "acosh"},
        {"asin", "asin"},
        {"asinh", "asinh"},
        {"atan", "atan"},
        {"atanh", "atanh"},
        {"tan", "tan"},
        {"sin", "sin"},
        {"sinh", "sinh"},
        {"cosh", "cosh"},
        {"selu", "selu"},
        {"selu", "selu", 1, "", "fp16"},
        {"tanh", "tanh"},
        {"round", "round"},
        {"swish", "swish"},
        {"swish", "swish", 1, "", "fp16"},
        {"hswish", "hard_swish"},
        {"hardswish", "hard_swish"},
        {"hardsigmoid", "hard_sigmoid"},
        {"sign", "sign"},
        {"gelu", "gelu", 1, "tanh"},
        {"div", "div", 2},
        {"equal", "equal", 2},
        {"less", "less", 2},
        {"max", "max", 2},
        {"greater", "greater", 2},
        {"power", "pow", 2},
        {"floormod", "mod", 2},
        {"greatereq", "greater_or_equal", 2},
        {"logicaland", "and", 2},
        {"logicalor", "or", 2},
        {"logicalxor", "xor", 2},
        {"lesseq", "less_or_equal", 2},
        {"min", "min", 2},
        {"notequal", "", 2},
        {"select", "where", 2},
    };
    return specs;
}

const std::string &form_of(const ShaveLayerSpec &spec) {
    return spec.approximate.empty() ? spec.arithmetic : spec.approximate;
}

std::string op_label(const ShaveLayerSpec &spec) {
    const std::string &form = form_of(spec);
    return form.empty() ? spec.op : spec.op + " (" + form + ")";
}

target::Target one_shave_target(const target::Target &target) {
    target::Target one = target;
    one.tiles = 1;
    if (one.shaves_per_tile > 0)
        one.shaves_per_tile = 1;
    else
        one.shared_shaves = 1;
    return one;
}

std::vector<ShaveLayerRow>
measure_shave_layers(const target::Target &target,
                     const std::vector<target::VpunnShaveKernel> &reference,
                     const std::function<void(const std::string &)> &progress) {
    const target::Target one = one_shave_target(target);
    const int64_t elements = kShaveLayerChannels * kShaveLayerWidth * kShaveLayerHeight;
    std::vector<ShaveLayerRow> rows;
    for (const ShaveLayerSpec &spec : shave_layer_specs()) {
        ShaveLayerRow row;
        row.spec = spec;
        row.elements = elements;
        row.shaves = target.shaves_per_tile > 0 ? target.tiles * target.shaves_per_tile
                                                : target.shared_shaves;
        for (const target::VpunnShaveKernel &k : reference)
            if (k.name == spec.vpunn_kernel) row.vpunn_us = k.microseconds(elements, kElementBytes);
        if (spec.op.empty()) {
            row.one_shave.error = row.all_shaves.error = "no vpuc layer";
            rows.push_back(std::move(row));
            continue;
        }
        if (progress) progress(spec.op);
        try {
            const dsl::Graph graph = shave_layer_graph(spec);
            row.one_shave = measure_graph(graph, one);
            row.all_shaves = measure_graph(graph, target);
        } catch (const std::exception &e) {
            row.one_shave.error = row.all_shaves.error = std::string("build: ") + e.what();
        }
        rows.push_back(std::move(row));
    }
    return rows;
}

} // namespace vpuc::bench
