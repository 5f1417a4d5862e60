// The inputs the fuzzers and the mutation campaign found problems with, kept as text under
// tests/fuzz/regressions/ and held to the contracts of tests/fuzz/*_contract.h:
//
//   blob/*.json            blobs in FlatBuffers' JSON form of vpu_target/schema/blob.fbs, as
//                          tests/fuzz/blob_json prints them
//   target/*.json          target descriptions
//   schedule_chain/*.txt   schedule chains
//   schedule_json/*.json   schedules as JSON
//   mutator/*.bin          bytes the blob mutator itself was given (not blobs of any version)
//
// docs/fuzzing.md says how a finding becomes one of them.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "blob_contract.h"
#include "blob_mutator.h"
#include "schedule_contract.h"
#include "target_contract.h"

namespace fs = std::filesystem;
using namespace vpuc;

namespace {

// The files of one kind of regression input, sorted.
std::vector<fs::path> regressions(const std::string &kind, const std::string &extension) {
    std::vector<fs::path> files;
    const fs::path dir = fs::path(VPUC_SOURCE_DIR) / "tests" / "fuzz" / "regressions" / kind;
    if (fs::is_directory(dir))
        for (const auto &entry : fs::directory_iterator(dir))
            if (entry.path().extension() == extension) files.push_back(entry.path());
    std::sort(files.begin(), files.end());
    return files;
}

std::string read_text(const fs::path &path) {
    std::ifstream in(path, std::ios::binary);
    std::ostringstream text;
    text << in.rdbuf();
    return text.str();
}

TEST(FuzzRegression, Blobs) {
    const fuzz::BlobMutator mutator;
    for (const fs::path &file : regressions("blob", ".json")) {
        SCOPED_TRACE(file.filename().string());
        std::string error;
        const auto bytes = mutator.from_json(read_text(file), &error);
        ASSERT_TRUE(bytes.has_value()) << "does not fit the blob schema: " << error;
        EXPECT_EQ(
            fuzz::check_blob(*bytes, {sim::Mode::TimingOnly, sim::Mode::Functional}).violation, "");
    }
}

// libFuzzer hands the blob mutator any bytes. These made FlatBuffers' reflection verifier read
// far out of bounds, which crashed the blob fuzzers with no input to show: the mutator takes
// only what the generated verifier accepts, and leaves these alone.
TEST(FuzzRegression, MutatorInputs) {
    const fuzz::BlobMutator mutator;
    const auto files = regressions("mutator", ".bin");
    ASSERT_FALSE(files.empty());
    for (const fs::path &file : files) {
        SCOPED_TRACE(file.filename().string());
        const std::string text = read_text(file);
        const std::vector<uint8_t> bytes(text.begin(), text.end());
        EXPECT_EQ(mutator.to_json(bytes), std::nullopt);
        std::mt19937_64 rng(1);
        EXPECT_EQ(mutator.mutate_fields(bytes, rng), std::nullopt);
        EXPECT_EQ(mutator.crossover(bytes, bytes, rng), std::nullopt);
        EXPECT_FALSE(fuzz::check_blob(bytes, {}).accepted);
    }
}

TEST(FuzzRegression, Targets) {
    for (const fs::path &file : regressions("target", ".json")) {
        SCOPED_TRACE(file.filename().string());
        try {
            EXPECT_EQ(fuzz::target_violation(target::parse_target(read_text(file), "regression")),
                      "");
        } catch (const target::TargetError &) {
        }
    }
}

TEST(FuzzRegression, Schedules) {
    auto check = [](const fs::path &file, dsl::Schedule (*read)(const std::string &)) {
        SCOPED_TRACE(file.filename().string());
        try {
            EXPECT_EQ(fuzz::round_trip_violation(read(read_text(file))), "");
        } catch (const dsl::ScheduleError &) {
        }
    };
    for (const fs::path &file : regressions("schedule_chain", ".txt"))
        check(file, &dsl::Schedule::parse);
    for (const fs::path &file : regressions("schedule_json", ".json"))
        check(file, &dsl::Schedule::from_json);
}

} // namespace
