// The contract the target fuzzer and regression inputs hold parse_target to: a description is
// accepted or rejected with a TargetError (anything else escapes: a finding); an accepted one
// answers what the compiler and simulator ask of it, and its canonical JSON (what a blob
// carries) parses back to the same description.
#pragma once

#include <algorithm>
#include <string>

#include "vpu_target/target.h"

namespace vpuc::fuzz {

// How an accepted target breaks the contract, or an empty string.
inline std::string target_violation(const target::Target &target) {
    for (const target::MpeMode &mode : target.mpe_modes)
        if (target.find_mpe_mode(mode.name) == nullptr)
            return "find_mpe_mode does not find '" + mode.name + "'";
    for (int tile = 0; tile < std::min(target.tiles, 64); ++tile) target.shaves_available(tile);
    target.macs_per_cycle(target::DType::U8);
    target.macs_per_cycle(target::DType::F16);
    try {
        if (target::parse_target(target.description_json, "canonical.json").description_sha256 !=
            target.description_sha256)
            return "the canonical JSON parses to another description";
    } catch (const target::TargetError &e) {
        return std::string("the canonical JSON of an accepted description is rejected: ") +
               e.what();
    }
    return "";
}

} // namespace vpuc::fuzz
