// Reading the files vpuc is given: blobs, ONNX models, target descriptions, VPUNN reference
// CSVs, schedules, .npy arrays, images and raw input tensors. Every reader goes through
// read_input_file, which takes regular files only (a device, FIFO or socket can block, never
// end, or act on being opened) and stops at the kind's size limit, so that a wrong or hostile
// path can neither hang vpuc nor exhaust its memory.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>
#include <system_error>
#include <vector>

#include "vpu_target/error.h"

namespace vpuc::files {

enum class FileKind { Blob, Model, Target, ReferenceCsv, Schedule, Npy, Image, RawInput };

struct FileKindInfo {
    FileKind kind;
    const char *name;        // in messages: "blob file 'net.vpub'"
    const char *size_option; // the vpuc option that sets the limit; "" for raw inputs
    uint64_t default_limit;  // bytes; 0 for raw inputs, whose size the blob fixes
};

// Every kind, in FileKind order. The limits (docs/ARCHITECTURE.md, "Files vpuc reads"):
// blob 1 GiB, ONNX model 2 GiB (protobuf's own limit), target 1 MiB, reference CSV 64 MiB,
// schedule 16 MiB, .npy 1 GiB, image 256 MiB.
const std::vector<FileKindInfo> &file_kinds();
const FileKindInfo &file_kind_info(FileKind kind);

// A kind's size limit: its default until set_size_limit changes it (vpuc's --max-*-size
// options do, before anything is read). Raw inputs have none: their reader passes the size
// the blob expects. Both throw std::invalid_argument for RawInput, and set_size_limit for 0.
uint64_t size_limit(FileKind kind);
void set_size_limit(FileKind kind, uint64_t bytes);

// "1 GiB", "64 MiB", "512 KiB" for whole units, else "1000 bytes".
std::string size_text(uint64_t bytes);

class InputFileError : public Error {
  public:
    explicit InputFileError(const std::string &message, std::error_code code = {})
        : Error(message), code_(code) {}
    // The system's error when the file could not be opened or read; empty otherwise.
    const std::error_code &code() const { return code_; }

  private:
    std::error_code code_;
};

// The whole file at `path`, at most `max_bytes` long. Throws InputFileError naming the kind
// and the path when the file cannot be opened or read ("cannot open blob file 'x.vpub': No
// such file or directory"), is not a regular file ("blob file '/dev/zero' is a character
// device, not a regular file"), or is longer than `max_bytes`, by its size or, for a file
// that reports none (as those in /proc), once max_bytes + 1 bytes are read.
std::vector<uint8_t> read_input_file(const std::string &path, FileKind kind, uint64_t max_bytes);
// The same with the kind's size limit, whose message names the option that raises it.
std::vector<uint8_t> read_input_file(const std::string &path, FileKind kind);
std::string read_text_file(const std::string &path, FileKind kind);

} // namespace vpuc::files
