// Fuzzes target descriptions (vpu_target/targets/*.json, files given with --target, and what
// blobs carry) against target_contract.h; a violation aborts, so that libFuzzer keeps the
// input.
#include <cstdint>
#include <cstdio>
#include <cstdlib>

#include "target_contract.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    using namespace vpuc::target;
    Target target;
    try {
        target = parse_target(std::string(reinterpret_cast<const char *>(data), size), "fuzz.json");
    } catch (const TargetError &) {
        return 0;
    }
    const std::string violation = vpuc::fuzz::target_violation(target);
    if (!violation.empty()) {
        std::fprintf(stderr, "CONTRACT VIOLATION: %s\n", violation.c_str());
        std::abort();
    }
    return 0;
}
