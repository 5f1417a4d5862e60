// SHAVE kernel objects: the checks a relocatable object must pass, and its layout for the
// sandboxed worker. The object is parsed here, with LLVM's ELF reader, in the simulator's own
// process; the worker only copies bytes and applies the relocations this computes, so no ELF
// parser ever runs next to kernel code. The verifier calls the same function, so a blob it
// accepts is one the worker can link.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "sandbox_protocol.h"
#include "vpu_target/blob.h"

namespace vpuc::sim {

struct KernelImage {
    sandbox::ImageHeader header;
    std::vector<uint8_t> bytes; // text, rodata, data, as header says
    std::vector<sandbox::Relocation> relocations;
};

// Checks `kernel`'s object (an ELF relocatable object for x86-64 whose structures are all in
// bounds, with sections the worker can load, relocations it applies, references only to
// sandbox::kImports, and its entry point defined in code) and lays it out. Throws
// blob::BlobError naming the kernel (`label`).
KernelImage prepare_kernel_image(const blob::Kernel &kernel, const std::string &label);

} // namespace vpuc::sim
