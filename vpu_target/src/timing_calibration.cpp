// Reads VPUNN reference CSVs and measures how far the timing model is from them.
#include "vpu_target/timing_calibration.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <map>
#include <memory>
#include <sstream>

#include "vpu_target/input_file.h"
#include "vpu_target/printable.h"
#include "vpu_target/timing_model.h"

namespace vpuc::target {

namespace {

const std::vector<std::string> kDpuColumns = {
    "device",  "op",         "in_dtype", "out_dtype", "in_w",     "in_h",       "in_c",
    "out_w",   "out_h",      "out_c",    "kernel_w",  "kernel_h", "stride_w",   "stride_h",
    "pad_top", "pad_bottom", "pad_left", "pad_right", "mpe_mode", "activation", "cycles"};

const std::vector<std::string> kDmaColumns = {
    "device",    "direction",  "bytes",      "num_planes",       "length",           "src_width",
    "dst_width", "src_stride", "dst_stride", "src_plane_stride", "dst_plane_stride", "cycles"};

const std::vector<std::string> kShaveColumns = {
    "kernel_type",   "kernel_name", "slope",       "intercept",     "scalar_offset",
    "unroll_offset", "unroll_size", "vector_size", "DPU_frequency", "SHV_frequency"};

// VPUNN device names and the bundled targets modeled on them.
const std::vector<std::pair<std::string, std::string>> kDevices = {{"VPU_2_7", "vpu27"},
                                                                   {"VPU_2_0", "vpu20"}};

// Text from the file in a message is escaped and cut after this many characters.
constexpr size_t kMessageTextChars = 200;

// Ranges of the integer columns: far beyond any real workload, small enough that the cost
// models' sums and products of them stay exact.
constexpr int64_t kMaxDim = int64_t(1) << 20;    // widths, heights, channels, kernel, stride
constexpr int64_t kMaxPad = int64_t(1) << 10;    // padding
constexpr int64_t kMaxBytes = int64_t(1) << 40;  // DMA bytes, lengths, widths and strides
constexpr int64_t kMaxPlanes = int64_t(1) << 20; // DMA planes
constexpr int64_t kMaxCycles = int64_t(1) << 50; // VPUNN's prediction

std::vector<std::string> split(const std::string &line) {
    std::vector<std::string> fields;
    std::istringstream in(line);
    for (std::string f; std::getline(in, f, ',');) fields.push_back(f);
    if (!line.empty() && line.back() == ',') fields.emplace_back();
    return fields;
}

// One data row, with its fields addressed by column name.
class Row {
  public:
    Row(const std::map<std::string, size_t> &columns, std::vector<std::string> fields,
        std::string where)
        : columns_(columns), fields_(std::move(fields)), where_(std::move(where)) {}

    const std::string &text(const std::string &column) const {
        return fields_.at(columns_.at(column));
    }

    // A whole number in [min, max]; the bounds keep the model's arithmetic far from overflow.
    int64_t integer(const std::string &column, int64_t min, int64_t max) const {
        const std::string &s = text(column);
        int64_t v = 0;
        const auto [end, error] = std::from_chars(s.data(), s.data() + s.size(), v);
        if (error == std::errc::invalid_argument || end != s.data() + s.size())
            fail("column '" + column + "': not an integer: '" + s + "'");
        if (error == std::errc::result_out_of_range || v < min || v > max)
            fail("column '" + column + "': must be in [" + std::to_string(min) + ", " +
                 std::to_string(max) + "], got " + s);
        return v;
    }

    // The message quotes cells of the file: escaped (vpu_target/printable.h).
    [[noreturn]] void fail(const std::string &what) const {
        throw CalibrationError(where_ + ": " + printable(what, kMessageTextChars));
    }

    const std::string &where() const { return where_; }

  private:
    const std::map<std::string, size_t> &columns_;
    std::vector<std::string> fields_;
    std::string where_;
};

// Targets by VPUNN device, loaded once; with an explicit target only its device is evaluated.
class Targets {
  public:
    explicit Targets(const std::string &target) {
        if (target.empty()) return;
        auto t = std::make_unique<Target>(load_target(target));
        for (const auto &[device, name] : kDevices)
            if (t->name == name) only_device_ = device;
        if (only_device_.empty())
            throw CalibrationError("target '" + target + "' (" +
                                   printable(t->name, kMessageTextChars) +
                                   ") is not modeled on a VPUNN device (vpu27, vpu20)");
        loaded_[only_device_] = std::move(t);
    }

    // The bundled model's version, or the explicit target's label.
    std::string label() const {
        if (only_device_.empty()) return timing_model_label(load_target(kDevices[0].second));
        return timing_model_label(*loaded_.at(only_device_));
    }

    // The target for a row's device, or null when the row is not evaluated.
    const Target *for_device(const Row &row) {
        const std::string &device = row.text("device");
        if (!only_device_.empty()) return device == only_device_ ? loaded_[device].get() : nullptr;
        auto it = loaded_.find(device);
        if (it != loaded_.end()) return it->second.get();
        for (const auto &[d, name] : kDevices)
            if (d == device)
                return (loaded_[d] = std::make_unique<Target>(load_target(name))).get();
        row.fail("unknown device '" + device + "'");
    }

  private:
    std::string only_device_;
    std::map<std::string, std::unique_ptr<Target>> loaded_;
};

DType dpu_dtype(const Row &row, const std::string &column) {
    const std::string &s = row.text(column);
    if (s == "UINT8") return DType::U8;
    if (s == "INT8") return DType::I8;
    if (s == "FLOAT16") return DType::F16;
    row.fail("column '" + column + "': unknown data type '" + s + "'");
}

DpuOpKind dpu_op(const Row &row) {
    const std::string &s = row.text("op");
    // A channel-major convolution is a convolution with few input channels: the model tells
    // them apart by in_c, as the compiler does.
    if (s == "CONVOLUTION" || s == "CM_CONVOLUTION") return DpuOpKind::Conv;
    if (s == "DW_CONVOLUTION") return DpuOpKind::DepthwiseConv;
    if (s == "MAXPOOL") return DpuOpKind::MaxPool;
    if (s == "AVEPOOL") return DpuOpKind::AvgPool;
    if (s == "ELTWISE") return DpuOpKind::Eltwise;
    row.fail("unknown op '" + s + "'");
}

DpuWorkload dpu_workload(const Row &row) {
    DpuWorkload w;
    w.op = dpu_op(row);
    w.input_dtype = dpu_dtype(row, "in_dtype");
    w.output_dtype = dpu_dtype(row, "out_dtype");
    auto dim = [&](const char *column) { return int(row.integer(column, 1, kMaxDim)); };
    auto pad = [&](const char *column) { return int(row.integer(column, 0, kMaxPad)); };
    w.in_w = dim("in_w");
    w.in_h = dim("in_h");
    w.in_c = dim("in_c");
    w.out_w = dim("out_w");
    w.out_h = dim("out_h");
    w.out_c = dim("out_c");
    w.kernel_w = dim("kernel_w");
    w.kernel_h = dim("kernel_h");
    w.stride_w = dim("stride_w");
    w.stride_h = dim("stride_h");
    w.pad_top = pad("pad_top");
    w.pad_bottom = pad("pad_bottom");
    w.pad_left = pad("pad_left");
    w.pad_right = pad("pad_right");
    w.mpe_mode = row.text("mpe_mode");
    const std::string &act = row.text("activation");
    if (act != "NONE" && act != "RELU") row.fail("unknown activation '" + act + "'");
    w.activation = act == "RELU";
    return w;
}

DmaDirection dma_direction(const Row &row) {
    const std::string &s = row.text("direction");
    if (s == "DDR2CMX") return DmaDirection::DdrToCmx;
    if (s == "CMX2DDR") return DmaDirection::CmxToDdr;
    if (s == "DDR2DDR") return DmaDirection::DdrToDdr;
    if (s == "CMX2CMX") return DmaDirection::CmxToCmx;
    row.fail("unknown direction '" + s + "'");
}

// A side is contiguous when its lines (or planes) follow each other without gaps.
bool gapless(int64_t stride, int64_t width) {
    return stride == 0 || stride == width;
}

struct DmaRow {
    DmaTransfer transfer;
    std::string pattern;
};

// VPUNN's descriptor (planes of lines) as our transfer (lines of contiguous bytes).
DmaRow dma_row(const Row &row) {
    DmaRow r;
    DmaTransfer &t = r.transfer;
    t.direction = dma_direction(row);
    const int64_t bytes = row.integer("bytes", 1, kMaxBytes);
    const int64_t planes = row.integer("num_planes", 0, kMaxPlanes) + 1;
    const int64_t length = row.integer("length", 1, kMaxBytes);
    const int64_t src_w = row.integer("src_width", 1, kMaxBytes);
    const int64_t dst_w = row.integer("dst_width", 1, kMaxBytes);
    const int64_t src_s = row.integer("src_stride", 0, kMaxBytes);
    const int64_t dst_s = row.integer("dst_stride", 0, kMaxBytes);
    if (bytes != planes * length) row.fail("bytes must equal (num_planes + 1) * length");
    if (planes > 1) {
        if (src_w != length || dst_w != length || src_s != 0 || dst_s != 0)
            row.fail("planes made of strided lines are not supported");
        r.pattern = "3D";
        t.lines = uint64_t(planes);
        t.line_bytes = uint64_t(length);
        t.src_contiguous = gapless(row.integer("src_plane_stride", 0, kMaxBytes), length);
        t.dst_contiguous = gapless(row.integer("dst_plane_stride", 0, kMaxBytes), length);
        return r;
    }
    if (src_s == 0 && dst_s == 0) {
        r.pattern = "contiguous";
        t.line_bytes = uint64_t(length);
        return r;
    }
    const int64_t width = src_s != 0 ? src_w : dst_w;
    if (src_s != 0 && dst_s != 0 && src_w != dst_w)
        row.fail("source and destination lines of different widths are not supported");
    if (length % width != 0) row.fail("length must be a multiple of the line width");
    r.pattern = "2D strided";
    t.line_bytes = uint64_t(width);
    t.lines = uint64_t(length / width);
    t.src_contiguous = gapless(src_s, width);
    t.dst_contiguous = gapless(dst_s, width);
    return r;
}

const char *dtype_class(DType t) {
    return t == DType::F16 ? "fp16" : "int8";
}

std::map<std::string, size_t> read_columns(const std::string &line, const std::string &origin,
                                           const std::vector<std::string> &expected) {
    std::vector<std::string> names = split(line);
    std::map<std::string, size_t> columns;
    for (size_t i = 0; i < names.size(); ++i)
        if (!columns.emplace(names[i], i).second)
            throw CalibrationError(origin + ":1: duplicate column '" +
                                   printable(names[i], kMessageTextChars) + "'");
    for (const auto &name : names)
        if (std::find(expected.begin(), expected.end(), name) == expected.end())
            throw CalibrationError(origin + ":1: unknown column '" +
                                   printable(name, kMessageTextChars) + "'");
    for (const auto &name : expected)
        if (!columns.count(name))
            throw CalibrationError(origin + ":1: missing column '" + name + "'");
    return columns;
}

const std::vector<std::string> &columns_of(ReferenceKind kind) {
    switch (kind) {
    case ReferenceKind::Dpu:
        return kDpuColumns;
    case ReferenceKind::Dma:
        return kDmaColumns;
    case ReferenceKind::Shave:
        return kShaveColumns;
    }
    throw std::logic_error("unknown ReferenceKind");
}

// Reads the header line of `csv`: its columns, which must be those of `kind`.
std::map<std::string, size_t> read_header(std::istream &csv, const std::string &origin,
                                          ReferenceKind kind) {
    std::string line;
    if (!std::getline(csv, line)) throw CalibrationError(origin + ": empty file");
    if (!line.empty() && line.back() == '\r') line.pop_back();
    return read_columns(line, origin, columns_of(kind));
}

// Calls `fn` with each data row after the header, checked to have every column; blank lines
// are skipped.
template <typename Fn>
void for_each_row(std::istream &csv, const std::string &origin,
                  const std::map<std::string, size_t> &columns, Fn &&fn) {
    std::string line;
    for (size_t number = 2; std::getline(csv, line); ++number) {
        if (!line.empty() && line.back() == '\r') line.pop_back();
        if (line.empty()) continue;
        std::vector<std::string> fields = split(line);
        Row row(columns, fields, origin + ":" + std::to_string(number));
        if (fields.size() != columns.size())
            row.fail("expected " + std::to_string(columns.size()) + " fields, got " +
                     std::to_string(fields.size()));
        fn(row);
    }
}

// A real number in [min, max], finite.
double real_field(const Row &row, const std::string &column, double min, double max) {
    const std::string &s = row.text(column);
    double v = 0;
    const auto [end, error] = std::from_chars(s.data(), s.data() + s.size(), v);
    if (error != std::errc() || end != s.data() + s.size() || !std::isfinite(v))
        row.fail("column '" + column + "': not a number: '" + s + "'");
    if (v < min || v > max)
        row.fail("column '" + column + "': must be in [" + std::to_string(min) + ", " +
                 std::to_string(max) + "], got " + s);
    return v;
}

std::vector<ErrorStats> stats_of(std::map<std::string, std::vector<double>> &groups) {
    std::vector<ErrorStats> out;
    for (auto &[name, errors] : groups) out.push_back(error_stats(name, std::move(errors)));
    return out;
}

std::string percent(double fraction) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.1f%%", fraction * 100);
    return buf;
}

} // namespace

ErrorStats error_stats(std::string name, std::vector<double> errors) {
    ErrorStats s;
    s.name = std::move(name);
    s.rows = errors.size();
    if (errors.empty()) return s;
    std::sort(errors.begin(), errors.end());
    size_t n = errors.size();
    s.median = n % 2 ? errors[n / 2] : (errors[n / 2 - 1] + errors[n / 2]) / 2;
    s.p90 = errors[size_t(std::ceil(0.9 * double(n))) - 1];
    return s;
}

CalibrationReport calibrate_timing_model(std::istream &csv, const std::string &origin,
                                         const std::string &target) {
    CalibrationReport report;
    report.reference = origin;
    std::string line;
    if (!std::getline(csv, line)) throw CalibrationError(origin + ": empty file");
    if (!line.empty() && line.back() == '\r') line.pop_back();
    const ReferenceKind kind = reference_kind(line, origin);
    if (kind == ReferenceKind::Shave)
        throw CalibrationError(origin + ": a SHAVE reference: its kernels are compiled and "
                                        "counted by `vpuc bench timing-model`, not evaluated here");
    report.dma = kind == ReferenceKind::Dma;
    const std::map<std::string, size_t> columns = read_columns(line, origin, columns_of(kind));

    Targets targets(target);
    report.timing_model = targets.label();
    std::map<std::string, std::vector<double>> groups, activations;
    std::vector<double> all;
    for_each_row(csv, origin, columns, [&](const Row &row) {
        const Target *t = targets.for_device(row);
        if (!t) return;
        double reference = double(row.integer("cycles", 1, kMaxCycles));
        double ours = 0;
        std::string group = row.text("device") + " ";
        try {
            if (report.dma) {
                DmaRow d = dma_row(row);
                reference *= 1000.0 / t->dpu_clock_mhz; // VPUNN counts DMA time in DPU cycles
                ours = dma_transfer_ns(*t, d.transfer);
                group = row.text("direction") + " " + d.pattern;
            } else {
                DpuWorkload w = dpu_workload(row);
                ours = dpu_workload_cycles(*t, w);
                group += row.text("op") + " " + dtype_class(w.input_dtype) + " " + w.mpe_mode;
                activations[row.text("device") + " " + row.text("activation")].push_back(
                    std::abs(ours - reference) / reference);
            }
        } catch (const TargetError &e) {
            row.fail(e.what());
        }
        double error = std::abs(ours - reference) / reference;
        groups[group].push_back(error);
        all.push_back(error);
    });
    if (all.empty()) throw CalibrationError(origin + ": no rows to evaluate");
    report.groups = stats_of(groups);
    report.by_activation = stats_of(activations);
    report.overall = error_stats("overall", all);
    return report;
}

CalibrationReport calibrate_timing_model_file(const std::string &path, const std::string &target) {
    std::istringstream in;
    try {
        in.str(files::read_text_file(path, files::FileKind::ReferenceCsv));
    } catch (const files::InputFileError &e) {
        throw CalibrationError(e.what());
    }
    return calibrate_timing_model(in, path, target);
}

std::string format_calibration_report(const CalibrationReport &report) {
    size_t width = 5;
    for (const auto &g : report.groups) width = std::max(width, g.name.size());
    for (const auto &g : report.by_activation) width = std::max(width, g.name.size());
    auto row = [&](const std::string &name, const std::string &rows, const std::string &median,
                   const std::string &p90) {
        char buf[256];
        std::snprintf(buf, sizeof buf, "%-*s %6s %8s %8s\n", int(width), name.c_str(), rows.c_str(),
                      median.c_str(), p90.c_str());
        return std::string(buf);
    };
    auto table = [&](const std::vector<ErrorStats> &stats) {
        std::string out;
        for (const auto &s : stats)
            out += row(s.name, std::to_string(s.rows), percent(s.median), percent(s.p90));
        return out;
    };
    std::string out = "reference: " + report.reference + " (" +
                      std::to_string(report.overall.rows) +
                      (report.dma ? " DMA transfers" : " DPU workloads") + ")\n";
    out += report.timing_model + "\n";
    out += "relative error |ours - VPUNN| / VPUNN\n\n";
    out += row(report.dma ? "direction pattern" : "device op dtype mode", "rows", "median", "p90");
    out += table(report.groups);
    if (!report.by_activation.empty()) {
        out += "\n" + row("device activation", "rows", "median", "p90");
        out += table(report.by_activation);
    }
    out += "\noverall p90 relative error: " + percent(report.overall.p90) + "\n";
    out += "overall median relative error: " + percent(report.overall.median) + "\n";
    return out;
}

ReferenceKind reference_kind(std::string header, const std::string &origin) {
    if (!header.empty() && header.back() == '\r') header.pop_back();
    const std::vector<std::string> names = split(header);
    auto has = [&](const char *column) {
        return std::find(names.begin(), names.end(), column) != names.end();
    };
    if (has("kernel_type")) return ReferenceKind::Shave;
    if (has("direction")) return ReferenceKind::Dma;
    if (has("op")) return ReferenceKind::Dpu;
    throw CalibrationError(origin + ":1: not a VPUNN reference header (no 'op', 'direction' or "
                                    "'kernel_type' column)");
}

double VpunnShaveKernel::microseconds(int64_t elements, int element_bytes) const {
    double us = slope_us_per_byte * double(elements * element_bytes) + intercept_us;
    const int64_t block = int64_t(vector_size) * unroll_size;
    if (block > 0 && elements < block) us -= unroll_offset_us;
    if (vector_size > 0 && elements % vector_size != 0) us += scalar_offset_us;
    if (block > 0 && elements % block == 0) us += scalar_offset_us;
    return us;
}

std::vector<VpunnShaveKernel> read_shave_reference(std::istream &csv, const std::string &origin) {
    const std::map<std::string, size_t> columns = read_header(csv, origin, ReferenceKind::Shave);
    std::vector<VpunnShaveKernel> kernels;
    for_each_row(csv, origin, columns, [&](const Row &row) {
        VpunnShaveKernel k;
        k.name = row.text("kernel_name");
        // Names are printed in reports: plain words only.
        const bool plain = !k.name.empty() && std::all_of(k.name.begin(), k.name.end(), [](char c) {
            return std::isalnum(static_cast<unsigned char>(c)) || c == '_';
        });
        if (!plain)
            row.fail("column 'kernel_name': not a name of letters, digits and '_': '" + k.name +
                     "'");
        const std::string &type = row.text("kernel_type");
        if (type == "ShaveModel1on1")
            k.inputs = 1;
        else if (type == "ShaveModel2on1")
            k.inputs = 2;
        else
            row.fail("column 'kernel_type': unknown model '" + type + "'");
        // VPUNN's fits are microseconds; the bounds are far beyond any of them.
        k.slope_us_per_byte = real_field(row, "slope", 0, 1e3);
        k.intercept_us = real_field(row, "intercept", 0, 1e6);
        k.scalar_offset_us = real_field(row, "scalar_offset", 0, 1e6);
        k.unroll_offset_us = real_field(row, "unroll_offset", 0, 1e6);
        k.unroll_size = int(row.integer("unroll_size", 0, 1024));
        k.vector_size = int(row.integer("vector_size", 0, 1024));
        k.shave_clock_mhz = real_field(row, "SHV_frequency", 1, 1e5);
        kernels.push_back(std::move(k));
    });
    if (kernels.empty()) throw CalibrationError(origin + ": no kernels");
    return kernels;
}

} // namespace vpuc::target
