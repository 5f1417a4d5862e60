// The vpuc subcommand registry: each tools/*.cpp registers its commands at start-up.
#pragma once

#include <functional>
#include <string>
#include <vector>

namespace vpuc::tools {

struct Command {
    std::string name;    // may be two words, e.g. "bench timing-model"
    std::string summary; // one line for `vpuc --help`
    std::string usage;   // full help text for `vpuc NAME --help`
    std::function<int(const std::vector<std::string> &args)> run; // args after the name
};

// Registers a command; call from a static initializer:
//   static const bool registered = register_command({...});
bool register_command(Command command);
const std::vector<Command> &commands();

// True when args ask for help (-h / --help); the dispatcher prints `usage` then.
bool wants_help(const std::vector<std::string> &args);

} // namespace vpuc::tools
