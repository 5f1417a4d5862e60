// Compiled SHAVE kernels kept on disk across processes, when VPUC_KERNEL_CACHE_DIR names a
// directory. It sits behind the in-memory cache of shave_kernel.cpp and shares its key.
//
// One file per key, named by a hash of the key; the file holds the whole key and a checksum, so
// a file that holds another key (a hash collision), is truncated or damaged, or is not a cache
// file at all is a miss, never a wrong kernel. Files are written under a temporary name and renamed
// into place, so processes sharing the directory never see half a file.
#pragma once

#include <optional>
#include <string>

#include "codegen/shave_kernel.h"

namespace vpuc::codegen::detail {

// VPUC_KERNEL_CACHE_DIR, or "" when it is unset or empty (no disk cache).
std::string kernel_cache_dir();

// The file in `dir` that holds `key`'s kernel.
std::string kernel_cache_file(const std::string &dir, const std::string &key);

// The kernel stored in `dir` for `key`, or nothing. Names in the result are the first
// compilation's; the caller renames them.
std::optional<ShaveKernelBinary> read_cached_kernel(const std::string &dir, const std::string &key);

// Stores `kernel` in `dir` (created if missing) for `key`. Returns "" or why it could not.
std::string write_cached_kernel(const std::string &dir, const std::string &key,
                                const ShaveKernelBinary &kernel);

// The SHA-256 of codegen's sources and the blob schema, generated at build time
// (codegen/source_digest.cmake): a kernel on disk is only reused by the compiler that wrote it,
// since its reads and op counts come from that code.
const char *codegen_source_digest();

} // namespace vpuc::codegen::detail
