// The vpuc subcommand registry: each tools/*.cpp registers its commands at start-up.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "vpu_target/blob.h"
#include "vpu_target/target.h"

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

// The target to run or verify a blob on: the description the blob carries, or, when
// `target_option` (--target) is given, that bundled target or target file, which must be the
// same description (the verifier compares their SHA-256). Throws blob::BlobError or
// target::TargetError.
target::Target blob_target(const blob::Blob &blob, const std::string &target_option);

// The value of `option` read as a whole integer in [low, high]; throws std::runtime_error
// naming the option and the range otherwise ("--seed needs an integer in 0..4294967295").
int64_t integer_option(const std::string &option, const std::string &text, int64_t low,
                       int64_t high);

// The same for a real number in [low, high] ("--kernel-time-limit needs a number in 0.001..3600").
double real_option(const std::string &option, const std::string &text, double low, double high);

} // namespace vpuc::tools
