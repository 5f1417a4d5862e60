// vpuc: the command-line driver. Subcommands register themselves (tools/command.h).
#include <algorithm>
#include <charconv>
#include <cstdio>
#include <exception>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "command.h"

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

int64_t integer_option(const std::string &option, const std::string &text, int64_t low,
                       int64_t high) {
    int64_t value = 0;
    const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
    if (error != std::errc() || end != text.data() + text.size() || value < low || value > high)
        throw std::runtime_error(option + " needs an integer in " + std::to_string(low) + ".." +
                                 std::to_string(high) + " (got '" + text + "')");
    return value;
}

} // namespace vpuc::tools

namespace {

void print_overview() {
    std::printf("vpuc: a Halide-style scheduling DSL, code generator and simulator for "
                "Intel-VPU-style NPUs\n\nusage: vpuc COMMAND [ARGS...]   (vpuc COMMAND --help "
                "for details)\n\ncommands:\n");
    auto sorted = vpuc::tools::commands();
    std::sort(sorted.begin(), sorted.end(),
              [](const auto &a, const auto &b) { return a.name < b.name; });
    for (const auto &c : sorted) std::printf("  %-22s %s\n", c.name.c_str(), c.summary.c_str());
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
    } catch (const std::exception &e) {
        std::fprintf(stderr, "vpuc %s: error: %s\n", command->name.c_str(), e.what());
        return 1;
    }
}
