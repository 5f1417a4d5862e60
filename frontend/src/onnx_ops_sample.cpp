// GridSample of a constant grid and RoiAlign of constant boxes: every output element is a sum of
// input elements times weights the sample points fix at compile time (bilinear taps, bicubic
// taps, a bin's average), the same for every channel. Each op is one weighted_gather of its input
// as it is (several images as rows on a leading unit dimension, NODE.rows and NODE.images;
// NODE.points), reshaped to the output. The taps and weights are worked out here, as ONNX's
// reference implementation computes them, in double precision, and stored as float32.
#include <cmath>
#include <string>
#include <vector>

#include "dsl/constant_values.h"
#include "onnx_internal.h"

namespace vpuc::frontend::detail {

namespace {

using Layers = std::vector<dsl::Layer>;

// One input element (row, column) of an image plane times a weight; row -1 for none.
struct Tap {
    int64_t row = -1, column = -1;
    double weight = 0;
};

// The sample points of one output plane position, shared by the channels: its taps in the plane
// of image `image` of the input.
struct PointTaps {
    int64_t image = 0;
    std::vector<Tap> taps;
};

// The weighted gather of input `x` [N, C, H, W] into `output` [N', C, H', W']: the output point
// (n', c, h', w') sums `points[(n' * H' + h') * W' + w']`'s taps over channel c of its image.
dsl::Layer gathered(NodeImport &node, const dsl::Layer &x, const std::vector<PointTaps> &points,
                    const std::vector<int64_t> &output) {
    const std::vector<int64_t> &in = x.output().shape.raw();
    const int64_t channels = in[1], height = in[2], width = in[3];
    size_t taps = 1;
    for (const PointTaps &p : points) taps = std::max(taps, p.taps.size());
    const double entries = double(points.size()) * double(channels) * double(taps);
    if (entries > double(1 << 24))
        node.fail("its sample tables would hold " + std::to_string(int64_t(entries)) +
                  " entries, more than 2^24");
    const int64_t plane = output[2] * output[3];
    dsl::ConstValues indices{dsl::ElemType::I64, {}, {}, {}};
    dsl::ConstValues weights{dsl::ElemType::F32, {}, {}, {}};
    for (int64_t n = 0; n < output[0]; ++n)
        for (int64_t c = 0; c < channels; ++c)
            for (int64_t at = 0; at < plane; ++at) {
                const PointTaps &p = points[size_t(n * plane + at)];
                for (size_t k = 0; k < taps; ++k) {
                    const bool used = k < p.taps.size() && p.taps[k].row >= 0;
                    indices.ints.push_back(
                        used ? ((p.image * channels + c) * height + p.taps[k].row) * width +
                                   p.taps[k].column
                             : -1);
                    weights.reals.push_back(used ? p.taps[k].weight : 0.0);
                }
            }
    const int64_t point_count = output[0] * channels * plane;
    indices.shape = weights.shape = {point_count, int64_t(taps)};
    // The weighted gather reads one image: several are first rows of channels [N, C, H * W]
    // (NODE.rows), then one image on a leading unit dimension (NODE.images).
    dsl::Layer source = x;
    if (in[0] > 1) {
        const dsl::Layer rows = node.build(
            "reshape", node.unique_name(node.name() + ".rows"), {x},
            dsl::Attrs().set("shape", std::vector<int64_t>{in[0], channels, height * width}));
        source = node.build("unsqueeze", node.unique_name(node.name() + ".images"), {rows},
                            dsl::Attrs().set("axes", std::vector<int64_t>{0}));
    }
    const dsl::Layer sums =
        node.build("weighted_gather", node.unique_name(node.name() + ".points"), {source},
                   dsl::Attrs()
                       .set("indices", dsl::const_buffer(indices))
                       .set("weights", dsl::const_buffer(weights)));
    return node.build("reshape", node.name(), {sums}, dsl::Attrs().set("shape", output));
}

// Input 0 as a computed float tensor [N, C, H, W].
const dsl::Layer &float_image(NodeImport &node) {
    const dsl::Layer &x = node.input(0);
    if (dsl::is_constant(x)) node.fail("input 0 must be a computed tensor, not a constant");
    if (x.output().shape.rank() != 4) node.fail("input 0 must have rank 4 [N, C, H, W]");
    const dsl::ElemType type = x.output().type;
    if (type != dsl::ElemType::F16 && type != dsl::ElemType::F32)
        node.fail("input 0 must be a float tensor (it is " + std::string(dsl::to_string(type)) +
                  ")");
    return x;
}

// Constant input i as float values of `shape`, each finite.
std::vector<double> finite_constant(NodeImport &node, size_t i, const std::string &role,
                                    const std::vector<int64_t> &shape) {
    const dsl::ConstValues v =
        dsl::const_values(node.constant_input(i, role), node.node().input(int(i)));
    if (v.shape != shape)
        node.fail(role + " must have the shape " + dsl::to_string(dsl::Shape(shape)));
    std::vector<double> values =
        v.is_float() ? v.reals : std::vector<double>(v.ints.begin(), v.ints.end());
    for (size_t e = 0; e < values.size(); ++e)
        if (!std::isfinite(values[e]))
            node.fail(role + " element " + std::to_string(e) + " is " + std::to_string(values[e]) +
                      "; sample points must be finite");
    return values;
}

// GridSample's coordinate folded back into [low, high] by reflecting at its borders.
double reflect(double x, double low, double high) {
    const double range = high - low;
    if (range <= 0) return low;
    if (x < low) {
        const double over = low - x;
        const double whole = std::floor(over / range), rest = over - whole * range;
        return std::fmod(whole, 2.0) == 0 ? low + rest : high - rest;
    }
    if (x > high) {
        const double over = x - high;
        const double whole = std::floor(over / range), rest = over - whole * range;
        return std::fmod(whole, 2.0) == 0 ? high - rest : low + rest;
    }
    return x;
}

// Keys' cubic convolution weights (A = -0.75) of the four taps around a point `t` past the second.
std::vector<double> cubic_weights(double t) {
    constexpr double a = -0.75;
    auto near = [](double d) { return ((a + 2) * d - (a + 3)) * d * d + 1; };
    auto far = [](double d) { return ((a * d - 5 * a) * d + 8 * a) * d - 4 * a; };
    return {far(t + 1), near(t), near(1 - t), far(2 - t)};
}

} // namespace

// GridSample (opset 16): output (n, c, h, w) samples channel c of image n at grid[n, h, w] =
// (x, y), each in [-1, 1] across the input's width and height (pixel centres at the ends with
// align_corners, else pixel edges), by mode nearest (half to even), bilinear or bicubic; a point
// outside reads zeros, the border (clamped) or the reflection, by padding_mode.
Layers import_grid_sample(NodeImport &node) {
    const dsl::Layer &x = float_image(node);
    const std::vector<int64_t> &in = x.output().shape.raw();
    const int64_t height = in[2], width = in[3];
    const std::vector<int64_t> &grid_shape = node.input(1).output().shape.raw();
    if (grid_shape.size() != 4 || grid_shape[0] != in[0] || grid_shape[3] != 2)
        node.fail("the grid must be [N, H_out, W_out, 2] with the input's N");
    const std::vector<double> grid = finite_constant(node, 1, "grid", grid_shape);
    // [-1, 1] spans the image: a coordinate beyond a million (images away) is refused before its
    // pixel index could overflow.
    for (size_t e = 0; e < grid.size(); ++e)
        if (std::abs(grid[e]) > 1e6)
            node.fail("grid element " + std::to_string(e) + " is " + std::to_string(grid[e]) +
                      ", beyond a million (the grid is normalized: [-1, 1] spans the image)");
    const std::string mode = node.attr_string("mode", "bilinear");
    const std::string padding = node.attr_string("padding_mode", "zeros");
    const bool align = node.attr_int("align_corners", 0) != 0;
    if (mode != "bilinear" && mode != "nearest" && mode != "bicubic")
        node.fail("mode '" + mode + "': bilinear, nearest or bicubic");
    if (padding != "zeros" && padding != "border" && padding != "reflection")
        node.fail("padding_mode '" + padding + "': zeros, border or reflection");
    // The range of coordinates inside the input, along x and along y.
    const double x_low = align ? 0 : -0.5, x_high = align ? double(width - 1) : width - 0.5;
    const double y_low = align ? 0 : -0.5, y_high = align ? double(height - 1) : height - 0.5;
    auto unnormalized = [&](double v, int64_t length) {
        return align ? (v + 1) / 2 * double(length - 1) : ((v + 1) * double(length) - 1) / 2;
    };
    // Input element (row, column) by the padding mode; row -1 for a zero.
    auto tap = [&](int64_t row, int64_t column, double weight) {
        if (padding == "border") {
            row = std::clamp<int64_t>(row, 0, height - 1);
            column = std::clamp<int64_t>(column, 0, width - 1);
        } else if (padding == "reflection") {
            row = int64_t(reflect(double(row), y_low, y_high));
            column = int64_t(reflect(double(column), x_low, x_high));
        } else if (row < 0 || row >= height || column < 0 || column >= width) {
            return Tap{};
        }
        return Tap{row, column, weight};
    };
    std::vector<PointTaps> points;
    for (int64_t p = 0; p < int64_t(grid.size()) / 2; ++p) {
        double px = unnormalized(grid[size_t(2 * p)], width);
        double py = unnormalized(grid[size_t(2 * p + 1)], height);
        if (mode == "nearest") px = std::nearbyint(px), py = std::nearbyint(py);
        if (px < x_low || px > x_high || py < y_low || py > y_high) {
            if (padding == "border") {
                px = std::clamp(px, 0.0, double(width - 1));
                py = std::clamp(py, 0.0, double(height - 1));
            } else if (padding == "reflection") {
                px = reflect(px, x_low, x_high);
                py = reflect(py, y_low, y_high);
            }
        }
        PointTaps point;
        point.image = p / (grid_shape[1] * grid_shape[2]);
        if (mode == "nearest") {
            point.taps.push_back(tap(int64_t(py), int64_t(px), 1.0));
        } else if (mode == "bilinear") {
            const int64_t x1 = int64_t(std::floor(px)), y1 = int64_t(std::floor(py));
            const double dx = px - double(x1), dy = py - double(y1);
            point.taps = {tap(y1, x1, (1 - dy) * (1 - dx)), tap(y1, x1 + 1, (1 - dy) * dx),
                          tap(y1 + 1, x1, dy * (1 - dx)), tap(y1 + 1, x1 + 1, dy * dx)};
        } else {
            const int64_t x0 = int64_t(std::floor(px)) - 1, y0 = int64_t(std::floor(py)) - 1;
            const std::vector<double> wx = cubic_weights(px - double(x0) - 1),
                                      wy = cubic_weights(py - double(y0) - 1);
            for (int64_t r = 0; r < 4; ++r)
                for (int64_t c = 0; c < 4; ++c)
                    point.taps.push_back(tap(y0 + r, x0 + c, wy[size_t(r)] * wx[size_t(c)]));
        }
        points.push_back(std::move(point));
    }
    return {gathered(node, x, points, {in[0], in[1], grid_shape[1], grid_shape[2]})};
}

// RoiAlign (opset 16), mode avg: output (r, c, h, w) averages bilinear samples of channel c of
// image batch_indices[r] over bin (h, w) of box rois[r] = (x1, y1, x2, y2) scaled by
// spatial_scale, sampling_ratio samples a side (or as many as the bin is wide and high); a
// sample more than a pixel outside the image reads nothing.
Layers import_roi_align(NodeImport &node) {
    const dsl::Layer &x = float_image(node);
    const std::vector<int64_t> &in = x.output().shape.raw();
    const int64_t height = in[2], width = in[3];
    const std::vector<int64_t> &roi_shape = node.input(1).output().shape.raw();
    if (roi_shape.size() != 2 || roi_shape[1] != 4) node.fail("rois must be [num_rois, 4]");
    const int64_t count = roi_shape[0];
    const std::vector<double> rois = finite_constant(node, 1, "rois", roi_shape);
    const std::vector<double> images = finite_constant(node, 2, "batch_indices", {count});
    const std::string mode = node.attr_string("mode", "avg");
    if (mode != "avg")
        node.fail("mode '" + mode + "': only avg (max takes the largest weighted tap, not a sum)");
    const std::string transform = node.attr_string("coordinate_transformation_mode", "half_pixel");
    if (transform != "half_pixel" && transform != "output_half_pixel")
        node.fail("coordinate_transformation_mode '" + transform +
                  "': half_pixel or output_half_pixel");
    const int64_t out_h = node.attr_int("output_height", 1),
                  out_w = node.attr_int("output_width", 1);
    const int64_t ratio = node.attr_int("sampling_ratio", 0);
    const double scale = node.attr_float("spatial_scale", 1.0f);
    if (out_h < 1 || out_w < 1 || ratio < 0)
        node.fail("output_height and output_width must be at least 1, sampling_ratio at least 0");
    const bool half_pixel = transform == "half_pixel";
    // Each box's bins and samples, checked before any table is made.
    struct Box {
        int64_t image = 0, grid_h = 0, grid_w = 0;
        double start_w = 0, start_h = 0, bin_w = 0, bin_h = 0;
    };
    std::vector<Box> boxes;
    double most_taps = 1;
    for (int64_t r = 0; r < count; ++r) {
        const double image = images[size_t(r)];
        if (image < 0 || image >= double(in[0]) || image != std::floor(image))
            node.fail("batch_indices[" + std::to_string(r) + "] is not an image of the input");
        const double offset = half_pixel ? 0.5 : 0.0;
        Box box;
        box.image = int64_t(image);
        box.start_w = rois[size_t(4 * r)] * scale - offset;
        box.start_h = rois[size_t(4 * r + 1)] * scale - offset;
        double roi_w = rois[size_t(4 * r + 2)] * scale - offset - box.start_w,
               roi_h = rois[size_t(4 * r + 3)] * scale - offset - box.start_h;
        if (!half_pixel) roi_w = std::max(roi_w, 1.0), roi_h = std::max(roi_h, 1.0);
        box.bin_h = roi_h / double(out_h);
        box.bin_w = roi_w / double(out_w);
        for (double v : {box.start_w, box.start_h, box.bin_w, box.bin_h})
            if (!std::isfinite(v))
                node.fail("box " + std::to_string(r) +
                          ": its corners times spatial_scale are not finite");
        const double grid_h = ratio > 0 ? double(ratio) : std::ceil(box.bin_h);
        const double grid_w = ratio > 0 ? double(ratio) : std::ceil(box.bin_w);
        if (!(grid_h <= 4096 && grid_w <= 4096 && grid_h * grid_w <= 4096))
            node.fail("box " + std::to_string(r) + " takes " + std::to_string(grid_h) + " x " +
                      std::to_string(grid_w) + " samples a bin, more than 4096");
        box.grid_h = int64_t(std::max(grid_h, 0.0));
        box.grid_w = int64_t(std::max(grid_w, 0.0));
        most_taps = std::max(most_taps, 4 * grid_h * grid_w);
        boxes.push_back(box);
    }
    const double entries =
        double(count) * double(out_h) * double(out_w) * double(in[1]) * most_taps;
    if (entries > double(1 << 24))
        node.fail("its sample tables would hold " + std::to_string(entries) +
                  " entries, more than 2^24");
    std::vector<PointTaps> points;
    for (const Box &box : boxes) {
        const double share = 1.0 / double(std::max<int64_t>(box.grid_h * box.grid_w, 1));
        for (int64_t ph = 0; ph < out_h; ++ph)
            for (int64_t pw = 0; pw < out_w; ++pw) {
                PointTaps point;
                point.image = box.image;
                for (int64_t iy = 0; iy < box.grid_h; ++iy)
                    for (int64_t ix = 0; ix < box.grid_w; ++ix) {
                        double y = box.start_h + double(ph) * box.bin_h +
                                   (double(iy) + 0.5) * box.bin_h / double(box.grid_h);
                        double xx = box.start_w + double(pw) * box.bin_w +
                                    (double(ix) + 0.5) * box.bin_w / double(box.grid_w);
                        if (y < -1.0 || y > double(height) || xx < -1.0 || xx > double(width))
                            continue;
                        y = std::max(y, 0.0), xx = std::max(xx, 0.0);
                        int64_t y_low = int64_t(y), x_low = int64_t(xx), y_high, x_high;
                        if (y_low >= height - 1)
                            y_high = y_low = height - 1, y = double(y_low);
                        else
                            y_high = y_low + 1;
                        if (x_low >= width - 1)
                            x_high = x_low = width - 1, xx = double(x_low);
                        else
                            x_high = x_low + 1;
                        const double ly = y - double(y_low), lx = xx - double(x_low);
                        point.taps.push_back({y_low, x_low, (1 - ly) * (1 - lx) * share});
                        point.taps.push_back({y_low, x_high, (1 - ly) * lx * share});
                        point.taps.push_back({y_high, x_low, ly * (1 - lx) * share});
                        point.taps.push_back({y_high, x_high, ly * lx * share});
                    }
                points.push_back(std::move(point));
            }
    }
    // Output (r, c, h, w) reads point (r, h, w): the boxes take the place of images.
    return {gathered(node, x, points, {count, in[1], out_h, out_w})};
}

} // namespace vpuc::frontend::detail
