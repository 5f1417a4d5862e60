#include "timeline.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <numeric>
#include <opencv2/imgcodecs.hpp>
#include <opencv2/imgproc.hpp>
#include <stdexcept>
#include <vector>

namespace vpuc::tools {

namespace {

constexpr int kLabelWidth = 230, kPlotWidth = 1400, kRight = 20;
constexpr int kTop = 50, kRowHeight = 22, kRowGap = 4, kAxisHeight = 40;
const cv::Scalar kBackground(255, 255, 255), kInk(40, 40, 40), kGrid(225, 225, 225);

cv::Scalar colour_of(blob::EngineKind kind) {
    switch (kind) {
    case blob::EngineKind::Dma:
        return {200, 120, 40}; // blue (OpenCV colours are BGR)
    case blob::EngineKind::Dpu:
        return {70, 160, 60}; // green
    default:
        return {40, 140, 235}; // orange
    }
}

// A round step for the time axis: about eight ticks over `span_us`.
double tick_step_us(double span_us) {
    const double raw = span_us / 8;
    const double power = std::pow(10.0, std::floor(std::log10(std::max(raw, 1e-3))));
    for (double m : {1.0, 2.0, 5.0})
        if (m * power >= raw) return m * power;
    return 10 * power;
}

void text(cv::Mat &image, const std::string &s, cv::Point at, double scale = 0.45) {
    cv::putText(image, s, at, cv::FONT_HERSHEY_SIMPLEX, scale, kInk, 1, cv::LINE_AA);
}

} // namespace

void write_timeline_png(const sim::RunResult &result, const std::string &title,
                        const std::string &path) {
    const std::string suffix = ".png";
    if (path.size() <= suffix.size() ||
        path.compare(path.size() - suffix.size(), suffix.size(), suffix) != 0)
        throw std::runtime_error("--timeline '" + path + "': the picture is a PNG file (FILE.png)");
    // One row per engine (the run's engines are its blob's queues, in order), in the order a
    // reader scans them: DMA, then DPUs, then SHAVEs (the blob's order of engine kinds).
    const std::vector<sim::EngineStats> &engines = result.engines;
    std::vector<size_t> by_kind(engines.size());
    std::iota(by_kind.begin(), by_kind.end(), size_t(0));
    std::stable_sort(by_kind.begin(), by_kind.end(), [&](size_t a, size_t b) {
        return int(engines[a].kind) < int(engines[b].kind);
    });
    std::vector<int> row(engines.size());
    for (size_t i = 0; i < by_kind.size(); ++i) row[by_kind[i]] = int(i);

    const int rows = int(engines.size());
    const int height = kTop + rows * (kRowHeight + kRowGap) + kAxisHeight;
    cv::Mat image(height, kLabelWidth + kPlotWidth + kRight, CV_8UC3, kBackground);
    const double latency = std::max(result.latency_ns, 1.0);
    auto x_of = [&](double ns) {
        return kLabelWidth + int(std::lround(ns / latency * kPlotWidth));
    };
    auto y_of = [&](int r) { return kTop + r * (kRowHeight + kRowGap); };

    char line[160];
    std::snprintf(line, sizeof line, "%s: %.1f us", title.c_str(), result.latency_ns / 1000);
    text(image, line, {10, 28}, 0.6);
    const double span_us = latency / 1000, step = tick_step_us(span_us);
    const int axis_y = y_of(rows) + 4;
    for (double t = 0; t <= span_us + 1e-9; t += step) {
        const int x = x_of(t * 1000);
        cv::line(image, {x, kTop - 4}, {x, axis_y}, kGrid, 1);
        std::snprintf(line, sizeof line, "%g", t);
        text(image, line, {x - 10, axis_y + 18}, 0.4);
    }
    text(image, "us", {kLabelWidth + kPlotWidth - 10, axis_y + 34}, 0.4);

    for (const sim::TaskRecord &task : result.tasks) {
        if (task.queue >= row.size()) continue;
        const int y = y_of(row[task.queue]);
        // A task shorter than a pixel still shows, as one.
        const int x0 = x_of(task.start_ns), x1 = std::max(x_of(task.end_ns), x0 + 1);
        cv::rectangle(image, {x0, y}, {x1 - 1, y + kRowHeight - 1}, colour_of(task.kind),
                      cv::FILLED);
    }
    for (size_t q = 0; q < engines.size(); ++q) {
        std::snprintf(line, sizeof line, "%s  %.0f%%", engines[q].engine.c_str(),
                      100 * engines[q].busy_ns / latency);
        text(image, line, {8, y_of(row[q]) + kRowHeight - 6});
    }
    if (!cv::imwrite(path, image)) throw std::runtime_error("cannot write timeline '" + path + "'");
}

} // namespace vpuc::tools
