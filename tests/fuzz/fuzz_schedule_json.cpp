// Fuzzes schedules as JSON (what the autotuner stores) against schedule_contract.h.
#include "schedule_contract.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    return vpuc::fuzz::fuzz_schedule(data, size, &vpuc::dsl::Schedule::from_json);
}
