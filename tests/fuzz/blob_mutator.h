// Mutations of blobs for the fuzzers and the mutation campaign.
//
// Field-level: the blob is printed in FlatBuffers' JSON form with the blob schema
// (vpu_target/schema/blob.fbs, embedded at build time, so the mutator follows the schema as it
// changes), one to a few fields are changed, and the JSON is packed back into a blob. The
// schema gives each value its type: integers go to boundary and interesting values of their
// width, floats to infinities, NaN, denormals and fp16 limits, enums to other names or out of
// range, strings to empty, long, control characters or other strings of the blob; vector
// elements are removed, duplicated or swapped; tables and union members are replaced by others
// of the same type (a DMA task by a DPU task); absent optional fields are added. A string that
// holds JSON (the target description the header carries) is mutated inside. Afterwards the
// kernel and target digests are, when asked, usually recomputed (forged), so that the blob
// gets past the digest checks to what lies behind them: the kernel loader and the sandbox.
//
// Byte-level: bit flips, interesting bytes and words, chunks copied, inserted or erased,
// truncation.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <vector>

namespace vpuc::fuzz {

class BlobMutator {
  public:
    BlobMutator();
    ~BlobMutator();
    BlobMutator(const BlobMutator &) = delete;
    BlobMutator &operator=(const BlobMutator &) = delete;

    // The blob in FlatBuffers' JSON form, every scalar included, indented (the form of the
    // regression inputs, tests/fuzz/regressions/blob/); nullopt when the bytes are not a
    // well-formed FlatBuffer of the schema.
    std::optional<std::string> to_json(const std::vector<uint8_t> &blob) const;
    // JSON packed into a blob; nullopt, with the parser's message in `error`, when the JSON
    // does not fit the schema.
    std::optional<std::vector<uint8_t>> from_json(const std::string &json,
                                                  std::string *error = nullptr) const;

    // What becomes of the digests a field mutation makes stale: kept, as an accident would
    // leave them, or forged (recomputed, seven times in eight), as an attacker would.
    enum class Digests { Kept, Forged };

    // `blob` with one to a few fields changed; nullopt when the blob is not a well-formed
    // FlatBuffer or no mutation packed back after a few attempts.
    std::optional<std::vector<uint8_t>> mutate_fields(const std::vector<uint8_t> &blob,
                                                      std::mt19937_64 &rng,
                                                      Digests digests = Digests::Forged) const;
    // `a` with one of its values (a table, vector, string) replaced by a value of the same
    // type from `b`; nullopt when either is not well-formed or they share no such type.
    std::optional<std::vector<uint8_t>> crossover(const std::vector<uint8_t> &a,
                                                  const std::vector<uint8_t> &b,
                                                  std::mt19937_64 &rng) const;

  private:
    struct Impl;
    std::unique_ptr<Impl> impl_;
};

// `blob` with one to a few byte-level mutations.
std::vector<uint8_t> mutate_bytes(const std::vector<uint8_t> &blob, std::mt19937_64 &rng);

// Recomputes the kernel digests and the digest of the target description in a well-formed
// blob; unchanged when the blob is not one.
std::vector<uint8_t> with_digests_recomputed(const std::vector<uint8_t> &blob);

} // namespace vpuc::fuzz
