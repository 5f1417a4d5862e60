// The contract between the verifier and the simulator (tests/fuzz/blob_contract.h): whatever
// blob::verify accepts runs, timing only and functionally, without throwing. Checked on
// mutated blobs (tests/fuzz/blob_mutator.h) of a few seed blobs, byte- and field-level in
// turn, from fixed seeds; the mutation campaign (`make mutation-campaign`) does the same
// through the vpuc command, and the fuzzers at length (docs/fuzzing.md). More blobs:
//
//   VPUC_CONTRACT_BLOBS=5000 ./build/tests/blob_contract_test
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <random>
#include <string>

#include "blob_contract.h"
#include "blob_mutator.h"
#include "seed_blobs.h"
#include "vpu_target/blob.h"

namespace fs = std::filesystem;
using namespace vpuc;

namespace {

constexpr long kDefaultBlobs = 400;

long blob_count() {
    const char *env = std::getenv("VPUC_CONTRACT_BLOBS");
    if (env == nullptr || *env == '\0') return kDefaultBlobs;
    char *end = nullptr;
    const long n = std::strtol(env, &end, 10);
    if (*end != '\0' || n < 1) {
        ADD_FAILURE() << "VPUC_CONTRACT_BLOBS=" << env << ": not a positive integer";
        return kDefaultBlobs;
    }
    return n;
}

const std::vector<fuzz::SeedBlob> &seeds() {
    // A DPU layer and a SHAVE kernel, on both targets.
    static const std::vector<fuzz::SeedBlob> compiled =
        fuzz::compile_seed_blobs({"depthwise", "softmax"}, {"vpu27", "vpu20"});
    return compiled;
}

const std::vector<sim::Mode> kBothModes = {sim::Mode::TimingOnly, sim::Mode::Functional};

TEST(BlobContract, SeedsPassAndRun) {
    for (const auto &seed : seeds()) {
        const auto verdict = fuzz::check_blob(seed.bytes, kBothModes);
        EXPECT_TRUE(verdict.accepted) << seed.name;
        EXPECT_EQ(verdict.violation, "") << seed.name;
    }
}

// The JSON form the field-level mutations go through keeps a blob's meaning.
TEST(BlobContract, JsonFormRoundTrips) {
    const fuzz::BlobMutator mutator;
    for (const auto &seed : seeds()) {
        const auto json = mutator.to_json(seed.bytes);
        ASSERT_TRUE(json.has_value()) << seed.name;
        std::string error;
        const auto packed = mutator.from_json(*json, &error);
        ASSERT_TRUE(packed.has_value()) << seed.name << ": " << error;
        EXPECT_EQ(mutator.to_json(*packed), json) << seed.name;
        EXPECT_TRUE(fuzz::check_blob(*packed, {}).accepted) << seed.name;
    }
}

TEST(BlobContract, MutationsAreReproducible) {
    const fuzz::BlobMutator mutator;
    const auto &seed = seeds().front().bytes;
    std::mt19937_64 first(7), second(7);
    const auto a = mutator.mutate_fields(seed, first);
    ASSERT_TRUE(a.has_value());
    EXPECT_NE(*a, seed);
    EXPECT_EQ(mutator.mutate_fields(seed, second), a);
    std::mt19937_64 third(7), fourth(7);
    EXPECT_EQ(fuzz::mutate_bytes(seed, third), fuzz::mutate_bytes(seed, fourth));
}

TEST(BlobContract, WhatTheVerifierAcceptsRuns) {
    const fuzz::BlobMutator mutator;
    const long blobs = blob_count();
    long accepted = 0;
    for (long k = 0; k < blobs; ++k) {
        const auto &seed = seeds()[size_t(k / 2) % seeds().size()];
        std::mt19937_64 rng{uint64_t(k)};
        std::optional<std::vector<uint8_t>> mutated;
        if (k % 2) mutated = mutator.mutate_fields(seed.bytes, rng);
        const bool field_level = mutated.has_value();
        if (!field_level) mutated = fuzz::mutate_bytes(seed.bytes, rng);
        const auto verdict = fuzz::check_blob(*mutated, kBothModes);
        accepted += verdict.accepted;
        if (verdict.violation.empty()) continue;
        // Kept for a look and as a regression input (docs/fuzzing.md).
        const fs::path kept = fs::path(VPUC_BINARY_DIR) / "blob_contract_failures" /
                              ("blob-" + std::to_string(k) + "-" + seed.name + ".vpub");
        fs::create_directories(kept.parent_path());
        blob::write_file(kept.string(), *mutated);
        ADD_FAILURE() << "blob " << k << ", a " << (field_level ? "field" : "byte")
                      << "-level mutation of " << seed.name << ": " << verdict.violation
                      << "\n(kept in " << kept.string() << ")";
    }
    // Mutations that never get past the verifier would prove nothing.
    EXPECT_GT(accepted, 0);
}

} // namespace
