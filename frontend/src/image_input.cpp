#include "frontend/image_input.h"

#include <opencv2/core.hpp>
#include <opencv2/imgcodecs.hpp>
#include <opencv2/imgproc.hpp>

#include <algorithm>
#include <cmath>

#include "vpu_target/input_file.h"
#include "vpu_target/printable.h"

namespace vpuc::frontend {

namespace {

// OpenCV refuses larger images itself (CV_IO_MAX_IMAGE_PIXELS); a network input is far smaller.
constexpr int64_t kMaxInputExtent = 1 << 14;

// `values` for `channels` channels: one value serves every channel.
std::vector<float> per_channel(const std::vector<float> &values, int channels,
                               const std::string &what, const char *option) {
    if (values.size() == 1) return std::vector<float>(size_t(channels), values[0]);
    if (int(values.size()) != channels)
        throw ImageError(what + ": " + option + " has " + std::to_string(values.size()) +
                         " values for " + std::to_string(channels) + " channels");
    return values;
}

// The decoded image in the pixel format, resized (and padded) to width x height.
cv::Mat fitted(const cv::Mat &decoded, int width, int height, const ImagePreprocess &p) {
    cv::Mat pixels;
    if (p.pixel_format == PixelFormat::RGB)
        cv::cvtColor(decoded, pixels, cv::COLOR_BGR2RGB);
    else
        pixels = decoded; // imdecode gives BGR, or gray when asked for it
    if (!p.keep_aspect_ratio) {
        cv::Mat resized;
        cv::resize(pixels, resized, cv::Size(width, height), 0, 0, cv::INTER_LINEAR);
        return resized;
    }
    const double ratio = std::min(double(width) / pixels.cols, double(height) / pixels.rows);
    const int w = std::max(1, int(std::lround(pixels.cols * ratio)));
    const int h = std::max(1, int(std::lround(pixels.rows * ratio)));
    cv::Mat resized;
    cv::resize(pixels, resized, cv::Size(w, h), 0, 0, cv::INTER_LINEAR);
    cv::Mat padded(height, width, resized.type(), cv::Scalar::all(p.pad_value));
    resized.copyTo(padded(cv::Rect((width - w) / 2, (height - h) / 2, w, h)));
    return padded;
}

} // namespace

PixelFormat parse_pixel_format(const std::string &name) {
    if (name == "rgb") return PixelFormat::RGB;
    if (name == "bgr") return PixelFormat::BGR;
    if (name == "gray") return PixelFormat::Gray;
    throw ImageError("unknown pixel format '" + printable(name) + "' (rgb, bgr or gray)");
}

ChannelFormat parse_channel_format(const std::string &name) {
    if (name == "nchw") return ChannelFormat::NCHW;
    if (name == "nhwc") return ChannelFormat::NHWC;
    throw ImageError("unknown channel format '" + printable(name) + "' (nchw or nhwc)");
}

Halide::Buffer<> read_image(const std::string &path, const std::vector<int64_t> &shape,
                            const ImagePreprocess &p) {
    const std::string what = "image '" + printable(path) + "'";
    const bool nhwc = p.channel_format == ChannelFormat::NHWC;
    const int channels = p.pixel_format == PixelFormat::Gray ? 1 : 3;
    if (shape.size() != 4 || shape[0] != 1)
        throw ImageError(what + ": an image fills a 4-D input of batch 1, not one of rank " +
                         std::to_string(shape.size()) +
                         (shape.empty() ? "" : " and batch " + std::to_string(shape[0])));
    const int64_t c = nhwc ? shape[3] : shape[1], h = nhwc ? shape[1] : shape[2],
                  w = nhwc ? shape[2] : shape[3];
    if (c != channels)
        throw ImageError(what + ": the input has " + std::to_string(c) +
                         " channels; the pixel format gives " + std::to_string(channels) +
                         " (--pixel-format, --channel-format)");
    if (h > kMaxInputExtent || w > kMaxInputExtent)
        throw ImageError(what + ": the input's " + std::to_string(h) + "x" + std::to_string(w) +
                         " is larger than an image input may be");
    const std::vector<float> mean = per_channel(p.mean, channels, what, "--mean");
    const std::vector<float> scale = per_channel(p.scale, channels, what, "--scale");

    const std::vector<uint8_t> bytes = files::read_input_file(path, files::FileKind::Image);
    cv::Mat decoded;
    try {
        decoded = cv::imdecode(
            cv::Mat(1, int(bytes.size()), CV_8UC1, const_cast<uint8_t *>(bytes.data())),
            channels == 1 ? cv::IMREAD_GRAYSCALE : cv::IMREAD_COLOR);
    } catch (const cv::Exception &e) {
        throw ImageError(what + ": " + e.what());
    }
    if (decoded.empty()) throw ImageError(what + ": not an image OpenCV can decode");
    const cv::Mat pixels = fitted(decoded, int(w), int(h), p);

    // numpy shape (1, C, H, W) or (1, H, W, C), reversed into Halide's dims.
    Halide::Buffer<float> tensor = nhwc ? Halide::Buffer<float>(int(c), int(w), int(h), 1)
                                        : Halide::Buffer<float>(int(w), int(h), int(c), 1);
    for (int y = 0; y < h; ++y) {
        const uint8_t *row = pixels.ptr<uint8_t>(y);
        for (int x = 0; x < w; ++x)
            for (int ch = 0; ch < channels; ++ch) {
                const float v = (float(row[x * channels + ch]) - mean[ch]) * scale[ch];
                if (nhwc)
                    tensor(ch, x, y, 0) = v;
                else
                    tensor(x, y, ch, 0) = v;
            }
    }
    return tensor;
}

} // namespace vpuc::frontend
