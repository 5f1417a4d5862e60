// The library's SHAVE layers against VPUNN's figures for Intel's own SHAVE kernels of the same
// op and size (vpu_target/calibration/vpunn_shave_vpu27.csv), and their scaling over the
// SHAVEs of every tile. docs/benchmarks.md ("SHAVE layers against VPUNN") explains the rows.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "bench/layers.h"
#include "vpu_target/timing_calibration.h"

namespace vpuc::bench {

// One of VPUNN's kernels and the registry op computing the same function.
struct ShaveLayerSpec {
    std::string vpunn_kernel; // "sigmoid"
    std::string op;           // the registry op, "" when the library has none
    int inputs = 1;           // value inputs (where's bool condition comes on top)
    // The op's `approximate` attribute where the op has several forms: Intel's gelu computes
    // the tanh approximation (docs/timing-model.md), so the tanh form is what compares.
    std::string approximate{};
    // The op's `arithmetic` attribute: "fp16" for the form computing every operation in fp16,
    // as Intel's half8 kernels do, measured next to the default float32 one.
    std::string arithmetic{};
};

// The spec's form: its `approximate` or `arithmetic` attribute, "" for the op's only form.
const std::string &form_of(const ShaveLayerSpec &spec);
// The op as a table shows it: "gelu (tanh)" or "elu (fp16)" for a form.
std::string op_label(const ShaveLayerSpec &spec);

// Every kernel of VPUNN's SHAVE file, in its order, with the op that computes it.
const std::vector<ShaveLayerSpec> &shave_layer_specs();

// The measured shape: the per-channel activation, 1x48x40x40 fp16 (76,800 elements).
constexpr int64_t kShaveLayerChannels = 48, kShaveLayerWidth = 40, kShaveLayerHeight = 40;

// `target` cut down to one tile with one SHAVE: what VPUNN's per-launch figures price.
target::Target one_shave_target(const target::Target &target);

struct ShaveLayerRow {
    ShaveLayerSpec spec;
    int64_t elements = 0;
    std::optional<double> vpunn_us; // VPUNN's figure for one launch on one SHAVE
    Measurement one_shave;          // on one_shave_target()
    Measurement all_shaves;         // on the whole target
    int shaves = 0;                 // the whole target's SHAVEs
};

// Compiles each spec's op over the measured shape (fp16; a bool condition for where) and
// simulates it, timing only, on one SHAVE and on all of them. A spec without an op gets a row
// with the error "no vpuc layer". `progress` (if set) is told each op before it runs.
std::vector<ShaveLayerRow>
measure_shave_layers(const target::Target &target,
                     const std::vector<target::VpunnShaveKernel> &reference,
                     const std::function<void(const std::string &)> &progress = {});

} // namespace vpuc::bench
