// `vpuc bench layers`: the standard layers compiled with their default schedules (or one
// given on the command line) and simulated, against their roofline bound.
#include <algorithm>
#include <cctype>
#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "algorithms/registry.h"
#include "bench/layers.h"
#include "bench/shave_layers.h"
#include "command.h"
#include "options.h"
#include "vpu_target/blob.h"
#include "vpu_target/printable.h"
#include "vpu_target/timing_calibration.h"
#include "vpu_target/timing_model.h"

namespace vpuc::tools {

namespace {

using Json = nlohmann::ordered_json;

const std::vector<files::FileKind> kReads = {files::FileKind::Target, files::FileKind::Schedule,
                                             files::FileKind::ReferenceCsv};

const char *kUsage =
    R"(usage: vpuc bench layers [--target T] [--json] [--blob-dir DIR] [--layer NAME]
                         [--schedule S|@FILE] [--height H]
       vpuc bench layers --registry [--target T] [--json]
       vpuc bench layers --shave REFERENCE.csv [--target T] [--json] [--blob-dir DIR]

Compiles each standard layer (3x3 conv 56x56x64->64, 1x1 conv 28x28x256->512,
3x3 depthwise 112x112x32, 7x7/2 conv 224x224x3->64 pad 3, softmax over 1000) in
int8 and fp16 with its default schedule, simulates it (timing only) and prints, under
a header naming the target and the timing model's version (docs/timing-model.md):

  tiles         NCE tiles the layer ran on (failed rows: the tiles it was allowed)
  cycles, us    simulated latency (DPU clock cycles, microseconds)
  roof us       the roofline bound: max(MACs / (MACs/cycle(dtype) * DPUs per tile *
                all of the target's tiles) at the DPU clock, (input + weights + output
                bytes) / DDR bandwidth); the same for every row of a layer
  bound         which of the two terms is larger
  roof/sim      roofline fraction: roofline bound / simulated time (1 is the roofline)
  compile ms    wall clock of the lowering (codegen::lower)

The 3x3 conv is also run with its default schedule limited to one tile, and the
speedup of all tiles over one is printed last (not with --schedule or --height). A
layer the lowering cannot compile (or the simulator cannot run) prints its error
instead of numbers, and the exit status is then 1. Progress goes to stderr.

A layer can also be run with a schedule of your own (--schedule), e.g. to reproduce a
figure of docs/benchmarks.md:

  vpuc bench layers --layer conv3x3 \
      --schedule 'distribute(y, 2, SOH).split(y, yo, yi, {4, 8, 8, 8}).prefetch(1)'

options:
  --target T      a bundled target name or a target file (default vpu27)
  --json          print the same as JSON
  --layer NAME    only the layers whose name starts with NAME (conv3x3, conv1x1,
                  dwconv3x3, conv7x7/2, softmax)
  --schedule S    this schedule instead of the default for every layer run, as printed
                  (a chain like 'split(y, yo, yi, 8).prefetch(1)') or as JSON ('[...]');
                  no one-tile run then; @FILE reads it from FILE
  --height H      the selected layers with H input rows instead of their own (names
                  give width x height x channels: conv3x3 56x36x64->64); no one-tile
                  run then
  --blob-dir DIR  also write each compiled blob to DIR/LAYER_DTYPE_Nt.vpub (N: the tiles
                  the schedule could use), e.g. for `vpuc run BLOB --trace FILE`; DIR is
                  created if missing; with --shave DIR/K_1shave.vpub and DIR/K.vpub (all
                  SHAVEs), K VPUNN's kernel and the op's form (elu, elu_fp16, gelu_tanh),
                  e.g. for `vpuc inspect`, which prints each kernel's counts per vector
  --registry      instead, every op of the layer registry (built-in and added in
                  algorithms/layers/, see docs/adding-a-layer.md) on its example,
                  int8 and fp16, with the DDR term of its roofline only (ddr us: its
                  inputs, outputs and constants over the DDR bandwidth)
  --shave FILE    instead, the SHAVE layers against VPUNN's figures for Intel's
                  kernels (FILE: vpu_target/calibration/vpunn_shave_vpu27.csv): each
                  op over 1x48x40x40 fp16 on one SHAVE (the target cut to one tile
                  with one SHAVE, as VPUNN prices a launch) and on all of them; an op
                  of several forms in the form Intel's kernel computes, named after
                  it (gelu (tanh)); elu, selu, mish, swish and sigmoid also in fp16
                  (elu (fp16), docs/layers.md):
                    1 shave us   simulated latency on one SHAVE (DMA from DDR included)
                    kernel us    of which the SHAVE was busy: the kernel's time with
                                 its data in CMX, what VPUNN prices
                    vpunn us     VPUNN's time for the same kernel and size
                    /vpunn       kernel us / vpunn us (the goal: at most 1.5)
                    N shaves us  simulated latency on every SHAVE of every tile
                    cmx x        speedup with the data in CMX: the busiest SHAVE's busy
                                 time on one SHAVE over that on all (ideal: N)
                    ddr x        speedup of the whole latency, DMA from DDR included
                    bound        SHAVE or DMA: the busier engine on all SHAVEs
  -h, --help      this text
)";

struct Row {
    const bench::LayerSpec *spec;
    bench::Precision precision;
    int tiles; // tiles the schedule may distribute over; all of them: lower()'s default
    bench::Roofline roof;
    bench::Measurement m;
};

// A file name for a row's blob: the layer's name with each run of characters other than
// letters and digits made one '_', then the dtype and the tiles its schedule could use.
std::string blob_file_name(const Row &r) {
    std::string name;
    for (char ch : r.spec->name) {
        if (std::isalnum(static_cast<unsigned char>(ch)))
            name += ch;
        else if (name.empty() || name.back() != '_')
            name += '_';
    }
    return name + "_" + bench::to_string(r.precision) + "_" + std::to_string(r.tiles) + "t.vpub";
}

// The layer also run on one tile (at its standard height).
bool is_scaling_layer(const bench::LayerSpec &spec) {
    return spec.name == bench::scaling_layer().name;
}

// Errors can span lines (the verifier lists every problem); the table keeps one row a layer.
// They may quote a schedule read from a file: escaped, but not cut.
std::string one_line(std::string text) {
    for (char &ch : text)
        if (ch == '\n') ch = ' ';
    return printable(text, kWholeText);
}

// The speedup of all tiles over one for the scaling layer in `precision`, or 0 when either
// run failed.
double speedup(const std::vector<Row> &rows, bench::Precision precision, int all_tiles) {
    double one = 0, all = 0;
    for (const Row &r : rows) {
        if (!is_scaling_layer(*r.spec) || r.precision != precision || !r.m.error.empty()) continue;
        if (r.tiles == 1)
            one = r.m.latency_ns;
        else if (r.tiles == all_tiles)
            all = r.m.latency_ns;
    }
    return one > 0 && all > 0 ? one / all : 0;
}

// Whether the scaling layer was also run on one tile (not with --schedule or --height, or
// when --layer leaves it out).
bool measures_scaling(const std::vector<Row> &rows) {
    for (const Row &r : rows)
        if (is_scaling_layer(*r.spec) && r.tiles == 1) return true;
    return false;
}

void print_table(const target::Target &t, const std::vector<Row> &rows,
                 const std::optional<dsl::Schedule> &schedule) {
    std::printf("vpuc bench layers: %s (%d tiles x %d DPUs, DPU clock %.0f MHz, DDR %.1f GB/s), "
                "%s\n",
                printable(t.name).c_str(), t.tiles, t.dpus_per_tile, t.dpu_clock_mhz,
                t.ddr_bandwidth_gbps, target::timing_model_label(t).c_str());
    if (schedule)
        std::printf("schedule: %s\n", printable(schedule->to_string(), kWholeText).c_str());
    std::printf("\n");
    std::printf("%-24s %-5s %5s %10s %9s %9s %-7s %8s %10s\n", "layer", "dtype", "tiles", "cycles",
                "us", "roof us", "bound", "roof/sim", "compile ms");
    for (const Row &r : rows) {
        const bool failed = !r.m.error.empty();
        std::printf("%-24s %-5s %5d ", r.spec->name.c_str(), bench::to_string(r.precision),
                    failed ? r.tiles : r.m.tiles_used);
        if (failed) {
            std::printf("error: %s\n", one_line(r.m.error).c_str());
            continue;
        }
        std::printf("%10.0f %9.2f %9.2f %-7s %8.2f %10.1f\n", r.m.latency_cycles,
                    r.m.latency_ns / 1e3, r.roof.bound_ns() / 1e3, r.roof.bound_by(),
                    r.roof.bound_ns() / r.m.latency_ns, r.m.compile_ms);
    }
    if (!measures_scaling(rows)) return;
    std::printf("\n%s, %d tiles over 1:", bench::scaling_layer().name.c_str(), t.tiles);
    for (auto p : {bench::Precision::Int8, bench::Precision::Fp16}) {
        const double s = speedup(rows, p, t.tiles);
        if (s > 0)
            std::printf(" %s %.2fx", bench::to_string(p), s);
        else
            std::printf(" %s n/a (a run failed)", bench::to_string(p));
    }
    std::printf("\n");
}

void print_json(const target::Target &t, const std::vector<Row> &rows) {
    Json out;
    out["target"] = t.name;
    out["timing_model"] = target::timing_model_label(t);
    out["timing_model_version"] = target::kTimingModelVersion;
    out["tiles"] = t.tiles;
    out["dpus_per_tile"] = t.dpus_per_tile;
    out["dpu_clock_mhz"] = t.dpu_clock_mhz;
    out["ddr_bandwidth_gbps"] = t.ddr_bandwidth_gbps;
    Json list = Json::array();
    for (const Row &r : rows) {
        Json row;
        row["layer"] = r.spec->name;
        row["dtype"] = bench::to_string(r.precision);
        row["max_tiles"] = r.tiles;
        row["macs"] = r.spec->macs();
        row["ddr_bytes"] = bench::ddr_bytes(*r.spec, r.precision);
        if (!r.m.error.empty()) {
            row["error"] = r.m.error;
        } else {
            row["schedule"] = r.m.schedule;
            row["tiles_used"] = r.m.tiles_used;
            row["cycles"] = r.m.latency_cycles;
            row["us"] = r.m.latency_ns / 1e3;
            row["roofline_us"] = r.roof.bound_ns() / 1e3;
            row["roofline_compute_us"] = r.roof.compute_ns / 1e3;
            row["roofline_ddr_us"] = r.roof.ddr_ns / 1e3;
            row["bound"] = r.roof.bound_by();
            row["roofline_fraction"] = r.roof.bound_ns() / r.m.latency_ns;
            row["compile_ms"] = r.m.compile_ms;
        }
        list.push_back(std::move(row));
    }
    out["rows"] = std::move(list);
    if (measures_scaling(rows)) {
        Json speedups;
        for (auto p : {bench::Precision::Int8, bench::Precision::Fp16}) {
            const double s = speedup(rows, p, t.tiles);
            speedups[bench::to_string(p)] = s > 0 ? Json(s) : Json(nullptr); // null: a run failed
        }
        out["speedup_over_one_tile"] = {{"layer", bench::scaling_layer().name},
                                        {"by_dtype", std::move(speedups)}};
    }
    // A schedule from a file need not be UTF-8: replace what is not, rather than fail.
    std::printf("%s\n", out.dump(2, ' ', false, Json::error_handler_t::replace).c_str());
}

// The layers whose name starts with `prefix` (all for ""); an error lists the names.
std::vector<bench::LayerSpec> select_layers(const std::string &prefix) {
    std::vector<bench::LayerSpec> selected;
    std::string names;
    for (const auto &spec : bench::standard_layers()) {
        if (spec.name.rfind(prefix, 0) == 0) selected.push_back(spec);
        names += (names.empty() ? "" : ", ") + spec.name;
    }
    if (selected.empty())
        throw std::runtime_error("no standard layer's name starts with '" + prefix +
                                 "' (layers: " + names + ")");
    return selected;
}

// The --schedule option: a chain or JSON, given in place or, after '@', in a file.
dsl::Schedule schedule_option(const std::string &value) {
    const bool in_file = value[0] == '@';
    const std::string text =
        in_file ? files::read_text_file(value.substr(1), files::FileKind::Schedule) : value;
    const size_t first = text.find_first_not_of(" \t\r\n");
    try {
        return first != std::string::npos && text[first] == '[' ? dsl::Schedule::from_json(text)
                                                                : dsl::Schedule::parse(text);
    } catch (const dsl::ScheduleError &e) {
        if (!in_file) throw;
        throw std::runtime_error("schedule file '" + value.substr(1) + "': " + e.what());
    }
}

// --registry: every op's registry example (algorithms/registry.h), int8 and fp16, against the
// DDR term of its roofline (the examples' MACs are not counted).
int run_registry(const target::Target &t, bool json) {
    struct RegistryRow {
        std::string op;
        bench::Precision precision;
        int64_t ddr_bytes = 0;
        bench::Measurement m;
    };
    std::vector<RegistryRow> rows;
    for (const auto *def : algorithms::layer_registry().all())
        for (auto p : {bench::Precision::Int8, bench::Precision::Fp16}) {
            if (!def->example) continue; // runs at compile time only
            const dsl::Layer layer =
                def->example(p == bench::Precision::Int8 ? dsl::ElemType::U8 : dsl::ElemType::F16);
            if (!layer.defined()) continue;
            std::fprintf(stderr, "[%zu] %s %s ... ", rows.size() + 1, def->op.c_str(),
                         bench::to_string(p));
            const dsl::Graph graph(def->op, dsl::output_layers(layer));
            rows.push_back(
                {def->op, p, bench::graph_ddr_bytes(graph), bench::measure_graph(graph, t)});
            std::fprintf(stderr, "%s\n", rows.back().m.error.empty() ? "done" : "failed");
        }
    if (json) {
        Json out;
        out["target"] = t.name;
        out["timing_model_version"] = target::kTimingModelVersion;
        Json list = Json::array();
        for (const RegistryRow &r : rows) {
            Json row;
            row["op"] = r.op;
            row["dtype"] = bench::to_string(r.precision);
            row["ddr_bytes"] = r.ddr_bytes;
            if (!r.m.error.empty()) {
                row["error"] = r.m.error;
            } else {
                row["cycles"] = r.m.latency_cycles;
                row["us"] = r.m.latency_ns / 1e3;
                row["ddr_roofline_us"] = double(r.ddr_bytes) / t.ddr_bandwidth_gbps / 1e3;
                row["compile_ms"] = r.m.compile_ms;
            }
            list.push_back(std::move(row));
        }
        out["rows"] = std::move(list);
        std::printf("%s\n", out.dump(2).c_str());
    } else {
        std::printf("vpuc bench layers --registry: %s, %s\n\n", printable(t.name).c_str(),
                    target::timing_model_label(t).c_str());
        std::printf("%-18s %-5s %10s %9s %9s %10s\n", "op", "dtype", "cycles", "us", "ddr us",
                    "compile ms");
        for (const RegistryRow &r : rows) {
            std::printf("%-18s %-5s ", r.op.c_str(), bench::to_string(r.precision));
            if (!r.m.error.empty()) {
                std::printf("error: %s\n", one_line(r.m.error).c_str());
                continue;
            }
            std::printf("%10.0f %9.2f %9.2f %10.1f\n", r.m.latency_cycles, r.m.latency_ns / 1e3,
                        double(r.ddr_bytes) / t.ddr_bandwidth_gbps / 1e3, r.m.compile_ms);
        }
    }
    const bool failed = std::any_of(rows.begin(), rows.end(),
                                    [](const RegistryRow &r) { return !r.m.error.empty(); });
    return failed ? 1 : 0;
}

// --shave: the SHAVE layers against VPUNN's figures for Intel's kernels (bench/shave_layers.h).
// Creates `dir` if missing (an empty `dir`: nothing to write).
void make_blob_dir(const std::string &dir) {
    if (dir.empty()) return;
    std::error_code error;
    std::filesystem::create_directories(dir, error);
    if (error)
        throw std::runtime_error("cannot create the blob directory '" + dir +
                                 "': " + error.message());
}

int run_shave(const target::Target &t, const std::string &reference_path, bool json,
              const std::string &blob_dir) {
    if (t.name != "vpu27")
        throw std::runtime_error(reference_path +
                                 ": VPUNN's SHAVE models are of VPU_2_7; target '" + t.name +
                                 "' is not modeled on it (vpu27)");
    std::istringstream csv(files::read_text_file(reference_path, files::FileKind::ReferenceCsv));
    std::string header;
    std::getline(csv, header);
    if (target::reference_kind(header, reference_path) != target::ReferenceKind::Shave)
        throw std::runtime_error(reference_path + ": not VPUNN's SHAVE file (--shave takes "
                                                  "vpu_target/calibration/vpunn_shave_vpu27.csv)");
    csv.seekg(0);
    const auto reference = target::read_shave_reference(csv, reference_path);
    make_blob_dir(blob_dir);
    const auto rows = bench::measure_shave_layers(t, reference, [](const std::string &op) {
        std::fprintf(stderr, "measuring %s...\n", op.c_str());
    });
    for (const bench::ShaveLayerRow &r : rows) {
        if (blob_dir.empty() || r.spec.op.empty()) continue;
        // VPUNN's kernel, then the op's form: elu, elu_fp16, gelu_tanh.
        const std::string &form = bench::form_of(r.spec);
        const std::string base =
            blob_dir + "/" + r.spec.vpunn_kernel + (form.empty() ? "" : "_" + form);
        if (!r.one_shave.blob.empty()) blob::write_file(base + "_1shave.vpub", r.one_shave.blob);
        if (!r.all_shaves.blob.empty()) blob::write_file(base + ".vpub", r.all_shaves.blob);
    }
    const auto failed = [](const bench::ShaveLayerRow &r) {
        return !r.spec.op.empty() && (!r.one_shave.error.empty() || !r.all_shaves.error.empty());
    };
    // A row's figures; unset where a run failed or ran no SHAVE task.
    struct Figures {
        double one_us = 0, kernel_us = 0, all_us = 0, cmx_speedup = 0, ddr_speedup = 0;
        bool dma_bound = false;
    };
    const auto figures = [](const bench::ShaveLayerRow &r) -> std::optional<Figures> {
        if (!r.one_shave.error.empty() || !r.all_shaves.error.empty() ||
            r.one_shave.shave_busy_ns <= 0 || r.all_shaves.shave_busy_ns <= 0)
            return std::nullopt;
        Figures f;
        f.one_us = r.one_shave.latency_ns / 1e3;
        f.kernel_us = r.one_shave.shave_busy_ns / 1e3;
        f.all_us = r.all_shaves.latency_ns / 1e3;
        f.cmx_speedup = r.one_shave.shave_busy_ns / r.all_shaves.shave_busy_ns;
        f.ddr_speedup = r.one_shave.latency_ns / r.all_shaves.latency_ns;
        f.dma_bound = r.all_shaves.dma_busy_ns > r.all_shaves.shave_busy_ns;
        return f;
    };
    if (json) {
        Json out;
        out["target"] = t.name;
        out["timing_model_version"] = target::kTimingModelVersion;
        out["reference"] = reference_path;
        Json list = Json::array();
        for (const bench::ShaveLayerRow &r : rows) {
            Json row;
            row["vpunn_kernel"] = r.spec.vpunn_kernel;
            row["op"] = r.spec.op;
            if (!r.spec.approximate.empty()) row["approximate"] = r.spec.approximate;
            if (!r.spec.arithmetic.empty()) row["arithmetic"] = r.spec.arithmetic;
            row["elements"] = r.elements;
            if (r.vpunn_us) row["vpunn_us"] = *r.vpunn_us;
            if (const auto f = figures(r)) {
                row["one_shave_us"] = f->one_us;
                row["one_shave_kernel_us"] = f->kernel_us;
                row["shaves"] = r.shaves;
                row["all_shaves_us"] = f->all_us;
                if (r.vpunn_us) row["ratio_to_vpunn"] = f->kernel_us / *r.vpunn_us;
                row["cmx_speedup"] = f->cmx_speedup;
                row["ddr_speedup"] = f->ddr_speedup;
                row["bound"] = f->dma_bound ? "DMA" : "SHAVE";
            } else {
                row["error"] = !r.one_shave.error.empty()    ? r.one_shave.error
                               : !r.all_shaves.error.empty() ? r.all_shaves.error
                                                             : "no SHAVE task (a DPU layer)";
            }
            list.push_back(std::move(row));
        }
        out["rows"] = std::move(list);
        std::printf("%s\n", out.dump(2).c_str());
    } else {
        std::printf("vpuc bench layers --shave: %s, %s; 1x48x40x40 fp16, VPUNN from %s\n\n",
                    printable(t.name).c_str(), target::timing_model_label(t).c_str(),
                    printable(reference_path).c_str());
        const std::string all = std::to_string(rows.empty() ? 0 : rows.front().shaves) + " shaves";
        std::printf("%-12s %-17s %10s %9s %9s %7s %10s %6s %6s %6s\n", "vpunn", "op", "1 shave us",
                    "kernel us", "vpunn us", "/vpunn", (all + " us").c_str(), "cmx x", "ddr x",
                    "bound");
        for (const bench::ShaveLayerRow &r : rows) {
            std::printf("%-12s %-17s ", r.spec.vpunn_kernel.c_str(),
                        r.spec.op.empty() ? "-" : bench::op_label(r.spec).c_str());
            const auto f = figures(r);
            if (!f) {
                const std::string why = !r.one_shave.error.empty()    ? r.one_shave.error
                                        : !r.all_shaves.error.empty() ? r.all_shaves.error
                                                                      : "no SHAVE task";
                std::printf("%s\n", one_line(why).c_str());
                continue;
            }
            std::printf("%10.2f %9.2f ", f->one_us, f->kernel_us);
            if (r.vpunn_us)
                std::printf("%9.2f %7.2f ", *r.vpunn_us, f->kernel_us / *r.vpunn_us);
            else
                std::printf("%9s %7s ", "-", "-");
            std::printf("%10.2f %6.2f %6.2f %6s\n", f->all_us, f->cmx_speedup, f->ddr_speedup,
                        f->dma_bound ? "DMA" : "SHAVE");
        }
    }
    return std::any_of(rows.begin(), rows.end(), failed) ? 1 : 0;
}

int run(const std::vector<std::string> &args) {
    const Options o = parse_options(
        args, {"--target", "--blob-dir", "--layer", "--schedule", "--height", "--shave"},
        {"--json", "--registry"}, kReads);
    if (!o.positional.empty())
        throw std::runtime_error("unexpected argument '" + o.positional[0] + "' (see --help)");
    const bool shave = !o.get("--shave").empty();
    if (o.has("--registry") && shave)
        throw std::runtime_error("--registry and --shave are two different runs; give one");
    if (o.has("--registry") || shave) {
        const std::string mode = shave ? "--shave" : "--registry";
        for (const char *other : {"--blob-dir", "--layer", "--schedule", "--height"})
            if (!o.get(other).empty() && !(shave && std::string(other) == "--blob-dir"))
                throw std::runtime_error(mode + " measures layers of its own; it takes no " +
                                         other);
        const target::Target t = target::load_target(o.get("--target", "vpu27"));
        if (shave) return run_shave(t, o.get("--shave"), o.has("--json"), o.get("--blob-dir"));
        return run_registry(t, o.has("--json"));
    }
    const std::string blob_dir = o.get("--blob-dir");
    std::optional<dsl::Schedule> schedule;
    if (!o.get("--schedule").empty()) schedule = schedule_option(o.get("--schedule"));
    std::optional<int64_t> height;
    if (!o.get("--height").empty())
        height = integer_option("--height", o.get("--height"), 1, 1 << 20);
    const bool json = o.has("--json");
    const target::Target target = target::load_target(o.get("--target", "vpu27"));
    std::vector<bench::LayerSpec> layers = select_layers(o.get("--layer"));
    if (height)
        for (bench::LayerSpec &spec : layers) spec = bench::with_height(spec, *height);
    make_blob_dir(blob_dir);
    std::vector<Row> rows;
    for (const bench::LayerSpec &spec : layers)
        for (auto p : {bench::Precision::Int8, bench::Precision::Fp16}) {
            rows.push_back({&spec, p, target.tiles, bench::roofline(spec, p, target), {}});
            if (is_scaling_layer(spec) && target.tiles > 1 && !schedule && !height)
                rows.push_back({&spec, p, 1, bench::roofline(spec, p, target), {}});
        }
    for (size_t i = 0; i < rows.size(); ++i) {
        Row &r = rows[i];
        std::fprintf(stderr, "[%zu/%zu] %s %s, up to %d tile%s ... ", i + 1, rows.size(),
                     r.spec->name.c_str(), bench::to_string(r.precision), r.tiles,
                     r.tiles == 1 ? "" : "s");
        std::fflush(stderr);
        // All tiles: leave the layer unscheduled so lower() applies the default, as a user
        // gets it.
        r.m = schedule ? bench::measure(*r.spec, r.precision, target, *schedule)
                       : bench::measure(*r.spec, r.precision, target,
                                        r.tiles == target.tiles ? 0 : r.tiles);
        std::fprintf(stderr, "%s\n", r.m.error.empty() ? "done" : "failed");
        if (!blob_dir.empty() && !r.m.blob.empty())
            blob::write_file(blob_dir + "/" + blob_file_name(r), r.m.blob);
    }
    if (json)
        print_json(target, rows);
    else
        print_table(target, rows, schedule);
    const bool failed =
        std::any_of(rows.begin(), rows.end(), [](const Row &r) { return !r.m.error.empty(); });
    return failed ? 1 : 0;
}

const bool registered = register_command(
    {"bench layers", "simulated time of the standard layers against their roofline",
     kUsage + size_options_help(kReads), run});

} // namespace

} // namespace vpuc::tools
