// A blob's inputs and outputs as tensors (frontend/blob_io.h), and images as inputs
// (frontend/image_input.h): element conversion, section layouts, and errors that name the
// input.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <random>

#include "codegen/lower.h"
#include "error_text.h"
#include "frontend/blob_io.h"
#include "frontend/image_input.h"
#include "frontend/onnx_import.h"
#include "vpu_target/blob_writer.h"
#include "vpu_target/simulator.h"
#include "vpu_target/verifier.h"

using namespace vpuc;
using frontend::IoLayout;

namespace {

using vpuc::testing::error_of;

IoLayout layout(std::vector<int64_t> shape, Halide::Type type, blob::Layout order) {
    return {"x", std::move(shape), type, order};
}

TEST(BlobIo, FloatsRoundToNearestEvenInFp16) {
    // 1 + 2^-11 lies halfway between 1 and the next fp16 (1 + 2^-10): even is 1. 1 + 3 * 2^-11
    // lies halfway between 1 + 2^-10 and 1 + 2^-9: even is 1 + 2^-9.
    Halide::Buffer<float> value(3);
    value(0) = 1.0f + std::ldexp(1.0f, -11);
    value(1) = 1.0f + 3 * std::ldexp(1.0f, -11);
    value(2) = -0.1f;
    const std::vector<uint8_t> bytes =
        frontend::input_bytes(layout({3}, Halide::Float(16), blob::Layout::ND), value);
    const auto *h = reinterpret_cast<const uint16_t *>(bytes.data());
    EXPECT_EQ(h[0], 0x3c00);
    EXPECT_EQ(h[1], 0x3c02);
    EXPECT_EQ(h[2], Halide::float16_t(-0.1).to_bits());
}

TEST(BlobIo, RandomRealValuesRoundTripThroughAnNhwcSection) {
    // An NCHW tensor of odd extents into an NHWC section and back: every element lands where
    // the layout puts it, and comes back to its place, rounded once to fp16.
    const std::vector<int64_t> shape = {2, 3, 5, 7};
    Halide::Buffer<float> value(7, 5, 3, 2); // numpy (2, 3, 5, 7), reversed
    std::mt19937 rng(7);
    std::uniform_real_distribution<float> real(-4, 4);
    value.for_each_value([&](float &v) { v = real(rng); });
    const IoLayout io = layout(shape, Halide::Float(16), blob::Layout::NHWC);
    const std::vector<uint8_t> bytes = frontend::input_bytes(io, value);
    ASSERT_EQ(bytes.size(), 2u * 3 * 5 * 7 * 2);
    const auto *h = reinterpret_cast<const Halide::float16_t *>(bytes.data());
    for (int n = 0; n < 2; ++n)
        for (int c = 0; c < 3; ++c)
            for (int y = 0; y < 5; ++y)
                for (int x = 0; x < 7; ++x)
                    ASSERT_EQ(h[((n * 5 + y) * 7 + x) * 3 + c].to_bits(),
                              Halide::float16_t(value(x, y, c, n)).to_bits());
    const Halide::Buffer<> back = frontend::output_tensor(io, bytes);
    ASSERT_EQ(back.type(), Halide::Float(16));
    const Halide::Buffer<Halide::float16_t> typed(back);
    typed.for_each_element([&](int x, int y, int c, int n) {
        EXPECT_EQ(typed(x, y, c, n).to_bits(), Halide::float16_t(value(x, y, c, n)).to_bits());
    });
}

TEST(BlobIo, IntegersMustBeExactInTheInputsType) {
    const IoLayout u8 = layout({2, 2}, Halide::UInt(8), blob::Layout::ND);
    Halide::Buffer<int64_t> ints(2, 2);
    ints.fill(200);
    EXPECT_EQ(frontend::input_bytes(u8, ints), std::vector<uint8_t>(4, 200));
    ints(1, 0) = 256;
    EXPECT_EQ(error_of([&] { frontend::input_bytes(u8, ints); }),
              "input 'x': element [0, 1] is 256, which is not exact in u8");
    Halide::Buffer<float> reals(2, 2);
    reals.fill(3.0f);
    reals(0, 1) = 2.5f;
    EXPECT_EQ(error_of([&] { frontend::input_bytes(u8, reals); }),
              "input 'x': element [1, 0] is 2.5, which is not exact in u8");
    reals(0, 1) = NAN;
    EXPECT_NE(error_of([&] { frontend::input_bytes(u8, reals); }).find("element [1, 0] is nan"),
              std::string::npos);
}

TEST(BlobIo, AShapeThatIsNotTheInputsIsAnError) {
    Halide::Buffer<float> value(4, 3);
    EXPECT_EQ(error_of([&] {
                  frontend::input_bytes(layout({4, 3}, Halide::Float(16), blob::Layout::ND), value);
              }),
              "input 'x': the tensor is 3x4, the input is 4x3");
    EXPECT_EQ(error_of([&] {
                  frontend::output_tensor(layout({4, 3}, Halide::Float(16), blob::Layout::ND),
                                          std::vector<uint8_t>(5));
              }),
              "output 'x': 5 bytes for a section of 24");
}

// A hostile blob's I/O shape cannot make a buffer of extents that overflow or wrap around
// to its section's size.
TEST(BlobIo, AnIoShapeThatDoesNotFitItsSectionIsAnError) {
    blob::BlobWriter writer(target::load_target("vpu27"), "net");
    writer.add_output("y", {2, 3}, blob::DType::U8, blob::Layout::ND);
    // 2^64 elements: 0, as a section of 0 bytes holds, when the product wraps around.
    writer.blob().header->outputs[0]->shape = {65536, 65536, 65536, 65536};
    writer.blob().header->outputs[0]->bytes = 0;
    std::vector<uint8_t> bytes = writer.finish();
    const blob::Blob &b = blob::verify_structure(bytes);
    EXPECT_EQ(error_of([&] { frontend::io_layout(*b.header()->outputs()->Get(0)); }),
              "tensor 'y': extents 65536 (so far) do not fit its section of 0 bytes");
    writer.blob().header->outputs[0]->shape = {4294967295u};
    writer.blob().header->outputs[0]->bytes = 6;
    bytes = writer.finish();
    EXPECT_EQ(error_of([&] {
                  frontend::io_layout(*blob::verify_structure(bytes).header()->outputs()->Get(0));
              }),
              "tensor 'y': extents 4294967295 (so far) do not fit its section of 6 bytes");
}

// A compiled ONNX model run through blob_inputs and blob_outputs gives the values ONNX
// expects, under the model's own names.
TEST(BlobIo, AnOnnxModelRunsOnNamedTensors) {
    const std::string model = "/usr/share/libonnx-testdata/data/node/test_relu/model.onnx";
    const frontend::ImportedModel imported = frontend::import_onnx(model);
    const target::Target target = target::load_target("vpu27");
    sim::Simulator simulator(target, codegen::lower(imported.graph, target));
    Halide::Buffer<float> x(5, 4, 3); // numpy (3, 4, 5)
    std::mt19937 rng(3);
    std::uniform_real_distribution<float> real(-4, 4);
    x.for_each_value([&](float &v) { v = real(rng); });
    const auto inputs = frontend::blob_inputs(simulator.blob(), {{"x", x}});
    const auto outputs = frontend::blob_outputs(simulator.blob(), simulator.run(inputs).outputs);
    ASSERT_EQ(outputs.size(), 1u);
    EXPECT_EQ(outputs[0].name, "y");
    const Halide::Buffer<Halide::float16_t> y(outputs[0].value);
    ASSERT_EQ(y.dimensions(), 3);
    x.for_each_element([&](int i, int j, int k) {
        EXPECT_EQ(float(y(i, j, k)), float(Halide::float16_t(std::max(0.0f, x(i, j, k)))));
    });

    EXPECT_EQ(error_of([&] { frontend::blob_inputs(simulator.blob(), {}); }),
              "no tensor is given for input 'x' (the blob's inputs: x)");
    EXPECT_EQ(error_of([&] {
                  frontend::blob_inputs(simulator.blob(), {{"x", x}, {"z", x}});
              }),
              "the blob has no input 'z' (the blob's inputs: x)");
    EXPECT_EQ(error_of([&] {
                  frontend::blob_inputs(simulator.blob(), {{"x", x}, {"x", x}});
              }),
              "input 'x' is given twice");
}

// A binary PPM of `pixels` (RGB triples, row by row).
std::string write_ppm(const std::string &name, int width, int height,
                      const std::vector<uint8_t> &pixels) {
    const std::string path = (std::filesystem::temp_directory_path() / name).string();
    std::ofstream out(path, std::ios::binary);
    out << "P6\n" << width << " " << height << "\n255\n";
    out.write(reinterpret_cast<const char *>(pixels.data()), std::streamsize(pixels.size()));
    return path;
}

TEST(ImageInput, PixelsBecomeMeanScaledChannelsInTheInputsOrder) {
    // 2x1 pixels: (10, 20, 30) and (40, 50, 60) in RGB.
    const std::string path = write_ppm("vpuc_two_pixels.ppm", 2, 1, {10, 20, 30, 40, 50, 60});
    frontend::ImagePreprocess p;
    p.mean = {10, 20, 30};
    p.scale = {0.5f, 0.25f, 2};
    const Halide::Buffer<float> nchw(frontend::read_image(path, {1, 3, 1, 2}, p));
    EXPECT_EQ(nchw(0, 0, 0, 0), 0);
    EXPECT_EQ(nchw(1, 0, 0, 0), 15);  // (40 - 10) * 0.5
    EXPECT_EQ(nchw(1, 0, 1, 0), 7.5); // (50 - 20) * 0.25
    EXPECT_EQ(nchw(1, 0, 2, 0), 60);  // (60 - 30) * 2
    p.pixel_format = frontend::PixelFormat::BGR;
    p.channel_format = frontend::ChannelFormat::NHWC;
    p.mean = {0};
    p.scale = {1};
    const Halide::Buffer<float> nhwc(frontend::read_image(path, {1, 1, 2, 3}, p));
    EXPECT_EQ(nhwc(0, 1, 0, 0), 60); // B of the second pixel first
    EXPECT_EQ(nhwc(2, 1, 0, 0), 40);
}

TEST(ImageInput, KeepingTheAspectRatioPadsCentred) {
    // A 4x2 white image into a 4x4 input: one row of padding above and below.
    const std::string path = write_ppm("vpuc_wide.ppm", 4, 2, std::vector<uint8_t>(24, 255));
    frontend::ImagePreprocess p;
    p.keep_aspect_ratio = true;
    p.pad_value = 7;
    const Halide::Buffer<float> t(frontend::read_image(path, {1, 3, 4, 4}, p));
    for (int x = 0; x < 4; ++x) {
        EXPECT_EQ(t(x, 0, 1, 0), 7);
        EXPECT_EQ(t(x, 1, 1, 0), 255);
        EXPECT_EQ(t(x, 2, 1, 0), 255);
        EXPECT_EQ(t(x, 3, 1, 0), 7);
    }
}

TEST(ImageInput, BadImagesAndShapesAreErrorsNamingTheFile) {
    const std::string path = write_ppm("vpuc_one_pixel.ppm", 1, 1, {1, 2, 3});
    frontend::ImagePreprocess p;
    EXPECT_EQ(error_of([&] {
                  frontend::read_image(path, {1, 1, 4, 4}, p);
              }),
              "image '" + path +
                  "': the input has 1 channels; the pixel format gives 3 (--pixel-format, "
                  "--channel-format)");
    EXPECT_EQ(error_of([&] {
                  frontend::read_image(path, {3, 4, 4}, p);
              }),
              "image '" + path +
                  "': an image fills a 4-D input of batch 1, not one of rank 3 "
                  "and batch 3");
    p.mean = {1, 2};
    EXPECT_EQ(error_of([&] {
                  frontend::read_image(path, {1, 3, 4, 4}, p);
              }),
              "image '" + path + "': --mean has 2 values for 3 channels");
    const std::string junk = (std::filesystem::temp_directory_path() / "vpuc_junk.png").string();
    std::ofstream(junk) << "not a png";
    EXPECT_EQ(error_of([&] {
                  frontend::read_image(junk, {1, 3, 4, 4}, {});
              }),
              "image '" + junk + "': not an image OpenCV can decode");
}

} // namespace
