// A picture of a simulated run: one row per engine, one box per task over time, drawn with
// OpenCV and written as PNG (`vpuc profile --timeline FILE.png`).
#pragma once

#include <string>

#include "vpu_target/simulator.h"

namespace vpuc::tools {

// Draws `result`'s tasks: DMA engines blue, DPUs green, SHAVEs orange, each row labelled with its
// engine and busy share, a time axis in µs, and `title` at the top. Throws std::runtime_error
// naming the file when its name does not end in .png or it cannot be written.
void write_timeline_png(const sim::RunResult &result, const std::string &title,
                        const std::string &path);

} // namespace vpuc::tools
