#include "codegen/ddr_size.h"

#include <cstdio>
#include <string>

#include "codegen/lower.h"

namespace vpuc::codegen {

namespace {

// "536870912 bytes (512.0 MiB)"
std::string bytes_text(uint64_t bytes) {
    char mib[32];
    std::snprintf(mib, sizeof mib, "%.1f", double(bytes) / double(1 << 20));
    return std::to_string(bytes) + " bytes (" + mib + " MiB)";
}

} // namespace

DdrUse ddr_use(const Program &program) {
    DdrUse use;
    for (const BufferDecl &b : program.buffers) {
        if (b.space == blob::MemSpace::Input) use.inputs += b.bytes;
        if (b.space == blob::MemSpace::Output) use.outputs += b.bytes;
    }
    use.constants = program.constants.size();
    use.scratch = program.scratch_bytes;
    return use;
}

void check_ddr_size(const Program &program, const target::Target &target) {
    const DdrUse use = ddr_use(program);
    if (use.total() <= target.ddr_bytes) return;
    throw LoweringError("model '" + program.name + "' does not fit the DDR of " + target.name +
                        ": it needs " + bytes_text(use.total()) + ", the target has " +
                        bytes_text(target.ddr_bytes) + " (ddr.bytes); constants " +
                        std::to_string(use.constants) + ", scratch " + std::to_string(use.scratch) +
                        ", inputs " + std::to_string(use.inputs) + ", outputs " +
                        std::to_string(use.outputs) + " bytes");
}

} // namespace vpuc::codegen
