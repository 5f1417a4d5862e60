// The blob printer (vpu_target/blob_printer.h), which `vpuc inspect` prints with.
#include "vpu_target/blob_printer.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <sstream>

#include "examples/conv_relu_shave.h"
#include "vpu_target/blob.h"
#include "vpu_target/blob_writer.h"
#include "vpu_target/target.h"
#include "vpu_target/verifier.h"

namespace vpuc {
namespace {

bool contains(const std::string &text, const std::string &part) {
    return text.find(part) != std::string::npos;
}

// The hand-built example holds every kind of task: DMAs (one broadcasting), DPU convs and
// SHAVE kernels, with barriers between them.
TEST(BlobPrinter, TextShowsEveryPartOfAValidBlob) {
    const target::Target target = target::load_target("vpu27");
    const examples::ExampleBlob example = examples::conv_relu_shave(target, 3);
    std::ostringstream out;
    EXPECT_TRUE(blob::print_blob_text(out, "example.vpub", example.bytes));
    const std::string text = out.str();
    EXPECT_EQ(text.rfind("blob example.vpub: " + std::to_string(example.bytes.size()) +
                             " bytes, format 3.0, target 'vpu27'",
                         0),
              0u)
        << text;
    EXPECT_TRUE(contains(text, "\nverification: ok\n")) << text;
    EXPECT_TRUE(contains(text, "\ninputs:\n  0 ")) << text;
    EXPECT_TRUE(contains(text, "\noutputs:\n  0 ")) << text;
    EXPECT_TRUE(contains(text, "\nkernels (1):\n")) << text;
    EXPECT_TRUE(contains(text, "(broadcast)")) << text;
    EXPECT_TRUE(contains(text, "Conv 3x3 stride 1x1")) << text;
    EXPECT_TRUE(contains(text, "SHAVE kernel 0 ")) << text;
}

// JSON holds the same blob, one entry per queue, and the same verdict.
TEST(BlobPrinter, JsonParsesAndCountsTheQueues) {
    const target::Target target = target::load_target("vpu20");
    const examples::ExampleBlob example = examples::conv_relu_shave(target, 5);
    std::ostringstream out;
    EXPECT_TRUE(blob::print_blob_json(out, "example.vpub", example.bytes));
    const nlohmann::json j = nlohmann::json::parse(out.str());
    EXPECT_EQ(j.at("file"), "example.vpub");
    EXPECT_EQ(j.at("target"), "vpu20");
    EXPECT_EQ(j.at("verification").at("ok"), true);
    const blob::Blob &b = blob::verify_structure(example.bytes);
    EXPECT_EQ(j.at("queues").size(), b.queues()->size());
}

// A blob the verifier rejects is still printed, with the problems; the result says it failed.
TEST(BlobPrinter, PrintsARejectedBlobWithItsProblems) {
    blob::BlobWriter w(target::load_target("vpu27"), "copy");
    w.add_input("x", {64}, blob::DType::U8, blob::Layout::ND);
    w.add_output("y", {64}, blob::DType::U8, blob::Layout::ND);
    w.add_dma(0, "copy", blob::input_at(0, 32), blob::output_at(0), 64); // past the input
    const std::vector<uint8_t> bytes = w.finish();
    std::ostringstream text, json;
    EXPECT_FALSE(blob::print_blob_text(text, "bad.vpub", bytes));
    EXPECT_TRUE(contains(text.str(), "\nverification: FAILED\n  ")) << text.str();
    EXPECT_TRUE(contains(text.str(), "'copy'")) << text.str();
    EXPECT_FALSE(blob::print_blob_json(json, "bad.vpub", bytes));
    EXPECT_FALSE(nlohmann::json::parse(json.str()).at("verification").at("problems").empty());
}

// What is not a blob is an error, and nothing is printed.
TEST(BlobPrinter, RefusesBytesThatAreNotABlob) {
    const std::vector<uint8_t> junk(64, 0x5a);
    std::ostringstream out;
    EXPECT_THROW(blob::print_blob_text(out, "junk.vpub", junk), blob::BlobError);
    EXPECT_THROW(blob::print_blob_json(out, "junk.vpub", junk), blob::BlobError);
    EXPECT_TRUE(out.str().empty());
}

} // namespace
} // namespace vpuc
