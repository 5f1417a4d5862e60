// Access to blobs: reading a file, the format version, and the error every check throws.
#pragma once

#include <array>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "vpu_target/blob_generated.h"
#include "vpu_target/error.h"

namespace vpuc::blob {

// A reader accepts blobs of its major version whose minor version is at most its own
// (docs/blob.md, "Versions").
constexpr uint16_t kVersionMajor = 3;
constexpr uint16_t kVersionMinor = 0;

// A blob that cannot be run: malformed, hostile, or asking for what the target lacks.
// The message names the task and field (e.g. "task 'conv0.dpu' (DPU queue tile 1):
// output: offset 2097152 + 4096 bytes past the end of CMX (1982464 bytes)").
class BlobError : public Error {
  public:
    using Error::Error;
};

// The blob file at `path`, within the blob size limit (vpu_target/input_file.h); throws
// BlobError naming the path when it cannot be read, is not a regular file or is too large.
std::vector<uint8_t> read_file(const std::string &path);
void write_file(const std::string &path, const std::vector<uint8_t> &bytes);

int dtype_bytes(DType dtype);

// The bytes one output channel's weights span in a DPU task's weights tensor: its (C, KW, KH)
// dims, from the address a weight-table entry gives.
uint64_t channel_weight_span(const TensorRef &weights);

using Sha256 = std::array<uint8_t, 32>;
Sha256 sha256(const void *data, size_t bytes);
std::string hex(const Sha256 &digest); // 64 lowercase hex digits

// What a kernel's `sha256` covers: its entry point, its argument contract (names, kinds, types,
// ranks, read bounds) and its object code, in a fixed byte order.
Sha256 kernel_digest(const KernelT &kernel);
Sha256 kernel_digest(const Kernel &kernel);

const char *to_string(MemSpace space);
const char *to_string(EngineKind engine);
const char *to_string(DpuOp op);
const char *to_string(DType dtype);

// "DMA queue 1", "DPU queue tile 0 dpu 2", "SHAVE queue tile 1"
std::string describe_queue(const TaskQueue &queue);

} // namespace vpuc::blob
