// `vpuc layers`: the layer registry, as the compiler and the importer see it.
#include <algorithm>
#include <cstdio>
#include <stdexcept>
#include <string>
#include <vector>

#include "algorithms/examples.h"
#include "algorithms/registry.h"
#include "codegen/dpu_match.h"
#include "command.h"
#include "options.h"
#include "vpu_target/target.h"

namespace vpuc::tools {

namespace {

std::string attr_line(const dsl::AttrSpec &spec) {
    std::string when = spec.default_value ? "default " + dsl::to_string(*spec.default_value)
                       : spec.optional    ? "optional"
                                          : "required";
    char head[96];
    std::snprintf(head, sizeof head, "    %-18s %-7s %-20s ", spec.name.c_str(),
                  dsl::to_string(spec.type), when.c_str());
    return head + spec.doc;
}

// The device dimensions a kernel may not split, of the entry's example layer (softmax: its
// default axis).
std::string unsplittable_line(const dsl::LayerDef &def) {
    if (!def.example)
        return "    a kernel may not split some dimensions, which its attributes name";
    const dsl::Layer example = def.example(dsl::ElemType::F16);
    std::string dims;
    for (dsl::Dim d : def.unsplittable_dims(example))
        dims += std::string(dims.empty() ? "" : ", ") + "NCHW"[d.index() % 4];
    return "    a kernel may not split: " + (dims.empty() ? "any" : dims) + " (of its example, " +
           dsl::to_string(example.output().shape) + ")";
}

std::string inputs_of(const dsl::LayerDef &def) {
    std::string inputs;
    for (const auto &in : def.inputs) inputs += (inputs.empty() ? "" : ", ") + in;
    if (def.variadic) inputs += "...";
    // Inputs that may be given as constants for an attribute, in brackets.
    for (const auto &in : def.attr_inputs) inputs += ", [" + in + "]";
    return inputs;
}

// Which engine computes each element type `def` takes on `target`, "DPU: u8 f16; SHAVE: i32":
// the engine the lowering picks for the op's example in that type under the default schedule.
std::string engines_on(const dsl::LayerDef &def, const target::Target &target) {
    std::vector<std::pair<std::string, std::string>> engines; // engine, its types
    for (dsl::ElemType type : algorithms::example_types()) {
        const dsl::Layer layer = algorithms::example_in_type(def, type);
        if (!layer.defined()) continue; // the op does not take the type
        const std::string engine = def.view && def.view(layer)             ? "view"
                                   : codegen::try_match_dpu(layer, target) ? "DPU"
                                                                           : "SHAVE";
        auto it = std::find_if(engines.begin(), engines.end(),
                               [&](const auto &e) { return e.first == engine; });
        if (it == engines.end()) it = engines.insert(engines.end(), {engine, engine + ":"});
        it->second += std::string(" ") + dsl::to_string(type);
    }
    std::string text;
    for (const auto &e : engines) text += (text.empty() ? "" : "; ") + e.second;
    return text;
}

// `text` in a Markdown table cell.
std::string cell(const std::string &text) {
    std::string out;
    for (char ch : text) out += ch == '|' ? std::string("\\|") : std::string(1, ch);
    return out;
}

// The layer table of docs/layers.md: every op, its inputs, engines and element types on each
// bundled target, and its description, which states its limits.
void print_table(const std::vector<const dsl::LayerDef *> &defs) {
    const target::Target vpu27 = target::load_target("vpu27"), vpu20 = target::load_target("vpu20");
    std::printf("| op | inputs | engine: element types (vpu27) | vpu20, where it differs | what, "
                "and limits |\n|---|---|---|---|---|\n");
    for (const dsl::LayerDef *def : defs) {
        std::string on27 = "compile time", on20;
        if (def->example) {
            on27 = engines_on(*def, vpu27);
            const std::string other = engines_on(*def, vpu20);
            if (other != on27) on20 = other;
        }
        std::printf("| %s | %s | %s | %s | %s |\n", def->op.c_str(), inputs_of(*def).c_str(),
                    on27.c_str(), on20.c_str(), cell(def->doc).c_str());
    }
}

int layers_command(const std::vector<std::string> &args) {
    Options o = parse_options(args, {}, {"--attrs", "--table"});
    if (o.positional.size() > 1)
        throw std::runtime_error("layers takes at most one op name (see vpuc layers --help)");
    const dsl::LayerRegistry &registry = algorithms::layer_registry();
    std::vector<const dsl::LayerDef *> defs;
    if (o.positional.empty())
        defs = registry.all();
    else
        defs = {&registry.at(o.positional[0])};
    if (o.has("--table")) {
        print_table(defs);
        return 0;
    }
    const bool attrs = o.has("--attrs") || !o.positional.empty();
    for (const dsl::LayerDef *def : defs) {
        std::printf("%-18s %-9s %s\n", def->op.c_str(), ("(" + inputs_of(*def) + ")").c_str(),
                    def->doc.c_str());
        if (!attrs) continue;
        for (const dsl::AttrSpec &spec : def->attrs) std::printf("%s\n", attr_line(spec).c_str());
        if (def->unsplittable_dims) std::printf("%s\n", unsplittable_line(*def).c_str());
    }
    return 0;
}

const bool registered = register_command(
    {"layers", "list the layer registry: ops, inputs and attribute schemas",
     "usage: vpuc layers [OP] [--attrs | --table]\n\n"
     "Lists every op of the layer registry (algorithms/registry.h) with its inputs and a\n"
     "line of description. With --attrs, or for one OP, also each attribute: name, type,\n"
     "default (or required / optional) and meaning. These are the attributes the graph text\n"
     "form (dsl/graph_text.h) prints and reads back.\n\n"
     "options:\n"
     "  --attrs   print the attribute schemas of every op\n"
     "  --table   print the layer table of docs/layers.md (Markdown): for each op the\n"
     "            element types it takes (u8, i8, f16, f32, i32) and the engine each runs\n"
     "            on (DPU, SHAVE, or a view moving no data) on vpu27 and vpu20, found by\n"
     "            building and matching the op's example in each type\n\n"
     "exit status: 0; 1 for an unknown OP (the message lists the known ones)",
     layers_command});

} // namespace

} // namespace vpuc::tools
