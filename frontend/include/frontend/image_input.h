// Images as network inputs, decoded by OpenCV and prepared as TPU-MLIR's model_transform
// prepares them: resized to the input's height and width (optionally keeping the aspect ratio
// and padding the rest), in RGB, BGR or gray order, then (pixel - mean) * scale per channel,
// laid out NCHW or NHWC.
#pragma once

#include <Halide.h>

#include <cstdint>
#include <string>
#include <vector>

#include "vpu_target/error.h"

namespace vpuc::frontend {

class ImageError : public Error {
  public:
    using Error::Error;
};

enum class PixelFormat { RGB, BGR, Gray };
enum class ChannelFormat { NCHW, NHWC };

struct ImagePreprocess {
    PixelFormat pixel_format = PixelFormat::RGB;
    ChannelFormat channel_format = ChannelFormat::NCHW;
    // Resize to fit inside the input keeping the aspect ratio, centred, and fill the rest with
    // pad_value (before mean and scale); otherwise stretch to the input's size.
    bool keep_aspect_ratio = false;
    float pad_value = 0;
    // One value per channel, or one for all: the input is (pixel - mean) * scale, pixels
    // 0..255.
    std::vector<float> mean = {0};
    std::vector<float> scale = {1};
};

// "rgb", "bgr", "gray"; "nchw", "nhwc". Throw ImageError for any other name.
PixelFormat parse_pixel_format(const std::string &name);
ChannelFormat parse_channel_format(const std::string &name);

// The image file at `path` (read under the file rules, FileKind::Image; any format OpenCV's
// imgcodecs decodes) as a float32 tensor of numpy shape `shape`: 4-D, batch 1, with 1 channel
// for Gray and 3 otherwise, (1, C, H, W) for NCHW and (1, H, W, C) for NHWC. Throws ImageError
// naming the file for an image that does not decode or a shape or option that does not fit.
Halide::Buffer<> read_image(const std::string &path, const std::vector<int64_t> &shape,
                            const ImagePreprocess &preprocess);

} // namespace vpuc::frontend
