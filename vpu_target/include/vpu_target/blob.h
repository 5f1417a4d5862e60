// Access to blobs: reading a file, the format version, and the error every check throws.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "vpu_target/blob_generated.h"

namespace vpuc::blob {

constexpr uint16_t kVersionMajor = 1;
constexpr uint16_t kVersionMinor = 0;

// A blob that cannot be run: malformed, hostile, or asking for what the target lacks.
// The message names the task and field (e.g. "task 'conv0.dpu' (DPU queue tile 1):
// output: offset 2097152 + 4096 bytes past the end of CMX (1982464 bytes)").
class BlobError : public std::runtime_error {
  public:
    using std::runtime_error::runtime_error;
};

std::vector<uint8_t> read_file(const std::string &path);
void write_file(const std::string &path, const std::vector<uint8_t> &bytes);

int dtype_bytes(DType dtype);

const char *to_string(MemSpace space);
const char *to_string(EngineKind engine);
const char *to_string(DpuOp op);
const char *to_string(DType dtype);

// "DMA queue 1", "DPU queue tile 0 dpu 2", "SHAVE queue tile 1"
std::string describe_queue(const TaskQueue &queue);

} // namespace vpuc::blob
