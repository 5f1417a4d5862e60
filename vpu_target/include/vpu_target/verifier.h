// The blob verifier: the trust boundary between a blob file and the simulator. It checks
// the FlatBuffers structure, then the semantics against the target: every tensor inside its
// memory, barrier counts, no deadlock, physical barrier reuse only after release.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "vpu_target/blob.h"
#include "vpu_target/target.h"

namespace vpuc::blob {

// Returns the verified blob (pointing into `bytes`). Throws BlobError listing every problem
// found, one per line, each naming the task (or header/barrier/kernel) and the field.
const Blob &verify(const std::vector<uint8_t> &bytes, const target::Target &target);

// What a timing-only run relies on: verify's checks of the structure, the memory bounds, the
// barriers and deadlock, without its checks of the values a functional run computes (data
// races, overlapping DPU outputs, weight tables). For blobs a compiler pass builds to time a
// trial form of a program (sim::Checks::Timing).
const Blob &verify_for_timing(const std::vector<uint8_t> &bytes, const target::Target &target);

// Only the FlatBuffers structure, file identifier and format version: enough to read the
// header (e.g. to find the target).
const Blob &verify_structure(const std::vector<uint8_t> &bytes);

// The target description a blob carries (after verify_structure), parsed. Throws BlobError
// when it is corrupted (its sha256 does not match) or not a valid target description.
target::Target embedded_target(const Blob &blob);

// The SHA-256 of a blob's target description, checked against the one it stores (throws
// BlobError when they differ).
Sha256 description_digest(const TargetDescription &described);

} // namespace vpuc::blob
