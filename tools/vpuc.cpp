// vpuc: the command-line driver. Subcommands register themselves (tools/command.h).
#include <algorithm>
#include <cctype>
#include <charconv>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "command.h"
#include "vpu_target/printable.h"
#include "vpu_target/shave_sandbox.h"
#include "vpu_target/verifier.h"

namespace vpuc::tools {

namespace {
std::vector<Command> &registry() {
    static std::vector<Command> all;
    return all;
}
} // namespace

bool register_command(Command command) {
    registry().push_back(std::move(command));
    return true;
}

const std::vector<Command> &commands() {
    return registry();
}

bool wants_help(const std::vector<std::string> &args) {
    return std::any_of(args.begin(), args.end(),
                       [](const std::string &a) { return a == "-h" || a == "--help"; });
}

target::Target blob_target(const blob::Blob &blob, const std::string &target_option) {
    return target_option.empty() ? blob::embedded_target(blob) : target::load_target(target_option);
}

int64_t integer_option(const std::string &option, const std::string &text, int64_t low,
                       int64_t high) {
    int64_t value = 0;
    const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
    if (error != std::errc() || end != text.data() + text.size() || value < low || value > high)
        throw std::runtime_error(option + " needs an integer in " + std::to_string(low) + ".." +
                                 std::to_string(high) + " (got '" + text + "')");
    return value;
}

double real_option(const std::string &option, const std::string &text, double low, double high) {
    double value = 0;
    char *end = nullptr;
    if (!text.empty() && !std::isspace(static_cast<unsigned char>(text[0])))
        value = std::strtod(text.c_str(), &end);
    if (!end || *end != '\0' || !(value >= low && value <= high)) {
        char range[64];
        std::snprintf(range, sizeof range, "%g..%g", low, high);
        throw std::runtime_error(option + " needs a number in " + range + " (got '" +
                                 printable(text) + "')");
    }
    return value;
}

} // namespace vpuc::tools

namespace {

// The commands whose name starts with `prefix` (all for ""), sorted by name.
std::vector<const vpuc::tools::Command *> commands_named(const std::string &prefix) {
    std::vector<const vpuc::tools::Command *> found;
    for (const auto &c : vpuc::tools::commands())
        if (c.name.rfind(prefix, 0) == 0) found.push_back(&c);
    std::sort(found.begin(), found.end(), [](auto *a, auto *b) { return a->name < b->name; });
    return found;
}

void print_commands(std::FILE *out, const std::vector<const vpuc::tools::Command *> &list) {
    for (const auto *c : list)
        std::fprintf(out, "  %-22s %s\n", c->name.c_str(), c->summary.c_str());
}

void print_overview() {
    std::printf("vpuc: a Halide-style scheduling DSL, code generator and simulator for "
                "Intel-VPU-style NPUs\n\nusage: vpuc COMMAND [ARGS...]   (vpuc COMMAND --help "
                "for details)\n\ncommands:\n");
    print_commands(stdout, commands_named(""));
}

// `vpuc GROUP ...` where GROUP is the first word of commands such as "bench layers" but what
// follows is none of them: help for GROUP alone, else an error listing the subcommands.
int group_without_subcommand(const std::vector<std::string> &args,
                             const std::vector<const vpuc::tools::Command *> &group) {
    const std::string &name = args[0];
    const bool missing = args.size() == 1 || args[1].rfind('-', 0) == 0;
    if (missing && vpuc::tools::wants_help(args)) {
        std::printf("usage: vpuc %s SUBCOMMAND [ARGS...]   (vpuc %s SUBCOMMAND --help for "
                    "details)\n\nsubcommands:\n",
                    name.c_str(), name.c_str());
        print_commands(stdout, group);
        return 0;
    }
    std::string names;
    for (const auto *c : group)
        names += (names.empty() ? "" : ", ") + c->name.substr(name.size() + 1);
    if (missing)
        std::fprintf(stderr, "vpuc: '%s' needs a subcommand: %s\n\n", name.c_str(), names.c_str());
    else
        std::fprintf(stderr, "vpuc: unknown command '%s %s' (%s subcommands: %s)\n\n", name.c_str(),
                     args[1].c_str(), name.c_str(), names.c_str());
    print_commands(stderr, group);
    return 2;
}

// The command whose (possibly two-word) name matches the most leading arguments.
const vpuc::tools::Command *match(const std::vector<std::string> &args, size_t &words) {
    const vpuc::tools::Command *best = nullptr;
    words = 0;
    for (const auto &c : vpuc::tools::commands()) {
        std::istringstream in(c.name);
        std::vector<std::string> parts;
        for (std::string w; in >> w;) parts.push_back(w);
        if (parts.size() > args.size() || parts.size() <= words) continue;
        if (std::equal(parts.begin(), parts.end(), args.begin())) {
            best = &c;
            words = parts.size();
        }
    }
    return best;
}

} // namespace

int main(int argc, char **argv) {
    std::vector<std::string> args(argv + 1, argv + argc);
    if (args.empty() || args[0] == "-h" || args[0] == "--help" || args[0] == "help") {
        print_overview();
        return args.empty() ? 2 : 0;
    }
    size_t words = 0;
    const vpuc::tools::Command *command = match(args, words);
    if (!command) {
        const auto group = commands_named(args[0] + " ");
        if (!group.empty()) return group_without_subcommand(args, group);
        std::fprintf(stderr, "vpuc: unknown command '%s'\n\n", args[0].c_str());
        print_overview();
        return 2;
    }
    std::vector<std::string> rest(args.begin() + long(words), args.end());
    if (vpuc::tools::wants_help(rest)) {
        std::printf("%s\n", command->usage.c_str());
        return 0;
    }
    try {
        return command->run(rest);
    } catch (const vpuc::sim::KernelFault &e) {
        // Native code of the blob failed in its sandbox: the one way a verified blob can fail.
        std::fprintf(stderr, "vpuc %s: kernel fault: %s\n", command->name.c_str(), e.what());
        return 3;
    } catch (const std::exception &e) {
        std::fprintf(stderr, "vpuc %s: error: %s\n", command->name.c_str(), e.what());
        return 1;
    }
}
