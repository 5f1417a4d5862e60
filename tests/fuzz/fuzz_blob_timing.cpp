// Fuzzes blob loading, verification and timing-only runs. Contract (blob_contract.h): a blob
// is rejected with a BlobError, or it is accepted and runs timing only without throwing.
// Mutations: blob_mutation_hooks.cpp.
#include "blob_contract.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    return vpuc::fuzz::fuzz_blob(data, size, vpuc::sim::Mode::TimingOnly);
}
