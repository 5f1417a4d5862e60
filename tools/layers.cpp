// `vpuc layers`: the layer registry, as the compiler and the importer see it.
#include <cstdio>
#include <stdexcept>
#include <string>
#include <vector>

#include "algorithms/registry.h"
#include "command.h"
#include "options.h"

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

int layers_command(const std::vector<std::string> &args) {
    Options o = parse_options(args, {}, {"--attrs"});
    if (o.positional.size() > 1)
        throw std::runtime_error("layers takes at most one op name (see vpuc layers --help)");
    const dsl::LayerRegistry &registry = algorithms::layer_registry();
    std::vector<const dsl::LayerDef *> defs;
    if (o.positional.empty())
        defs = registry.all();
    else
        defs = {&registry.at(o.positional[0])};
    const bool attrs = o.has("--attrs") || !o.positional.empty();
    for (const dsl::LayerDef *def : defs) {
        std::string inputs;
        for (const auto &in : def->inputs) inputs += (inputs.empty() ? "" : ", ") + in;
        if (def->variadic) inputs += "...";
        // Inputs that may be given as constants for an attribute, in brackets.
        for (const auto &in : def->attr_inputs) inputs += ", [" + in + "]";
        std::printf("%-18s %-9s %s\n", def->op.c_str(), ("(" + inputs + ")").c_str(),
                    def->doc.c_str());
        if (!attrs) continue;
        for (const dsl::AttrSpec &spec : def->attrs) std::printf("%s\n", attr_line(spec).c_str());
        if (def->unsplittable_dims) std::printf("%s\n", unsplittable_line(*def).c_str());
    }
    return 0;
}

const bool registered = register_command(
    {"layers", "list the layer registry: ops, inputs and attribute schemas",
     "usage: vpuc layers [OP] [--attrs]\n\n"
     "Lists every op of the layer registry (algorithms/registry.h) with its inputs and a\n"
     "line of description. With --attrs, or for one OP, also each attribute: name, type,\n"
     "default (or required / optional) and meaning. These are the attributes the graph text\n"
     "form (dsl/graph_text.h) prints and reads back.\n\n"
     "options:\n"
     "  --attrs   print the attribute schemas of every op\n\n"
     "exit status: 0; 1 for an unknown OP (the message lists the known ones)",
     layers_command});

} // namespace

} // namespace vpuc::tools
