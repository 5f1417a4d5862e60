// Fuzzes functional runs of small blobs. Contract (blob_contract.h): only what the verifier
// accepts runs, and it runs functionally (DMA, DPU, SHAVE kernels in their sandbox) without
// throwing, but for kernel faults the sandbox contains. Mutations: blob_mutation_hooks.cpp.
#include "blob_contract.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    return vpuc::fuzz::fuzz_blob(data, size, vpuc::sim::Mode::Functional);
}
