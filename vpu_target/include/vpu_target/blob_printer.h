// A blob in readable form: as text for people, or as one JSON document for scripts (what
// `vpuc inspect` prints). Printing needs only the FlatBuffers structure to be sound (every
// read is then inside the file), so it also shows blobs the semantic verifier rejects, with
// the verifier's verdict.
#pragma once

#include <cstdint>
#include <iosfwd>
#include <string>
#include <vector>

namespace vpuc::blob {

// Writes the blob in `bytes`, read from `path` (the name the title shows), to `out`: header,
// the verifier's verdict against the blob's own target with every problem, I/O tensors,
// section sizes, SHAVE kernels, barriers, then every queue with its tasks, one line of
// description each. Returns whether the blob passes verification. Throws BlobError when its
// structure is unsound, or when it references the same data from far more places than its
// size justifies (printing it would produce far more than the file holds).
bool print_blob_text(std::ostream &out, const std::string &path, const std::vector<uint8_t> &bytes);

// The same as one JSON document (every field of every task), followed by a newline.
bool print_blob_json(std::ostream &out, const std::string &path, const std::vector<uint8_t> &bytes);

} // namespace vpuc::blob
