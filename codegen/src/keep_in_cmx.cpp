// keep_in_cmx: a graph scheduling pass. A layer computed at root stores its output to DDR and
// every consumer loads it back: two trips over the DDR bus, the device's scarcest resource. A
// tensor small enough stays in CMX instead (store_in(CMX)), from its producer to its last
// consumer, the residual branch of a ResNet block until its add included
// (docs/graph-scheduling.md). A tensor split over rows (SOH) whose every reader runs on tiles
// that compute some of it is kept by rows (LoweringState::rows_in_cmx): each tile holds the
// rows it computes and those its readers there read, the few computed elsewhere (a 3x3
// convolution's halo) copied in by broadcast_outputs. That is a share of the bytes, which lets
// ResNet-50's 56x56x256 tensors stay, and little or no copying. Otherwise, where copies cost
// less than a round trip (vpu27, not vpu20), each tile keeps a copy of all of it, filled by
// CMX-to-CMX broadcasts as it is computed.
#include <algorithm>
#include <map>

#include "algorithms/registry.h"
#include "codegen/bounds.h"
#include "passes.h"

namespace vpuc::codegen {

// A tensor kept in CMX takes at most 45% of a tile's CMX, and all of those live at one time at
// most two thirds: the rest is the layers' own double-buffered tasks and weights. 45% admits
// the rows of ResNet-50's 56x56x256 fp16 tensors each vpu27 tile computes (800 KB, 41%); a third
// kept fewer tensors, a half slowed vpu20's ResNets, and on vpu27 a fifth or a quarter per
// tensor, or half live, kept fewer, and no network of the zoo ran faster with any of them
// (docs/graph-scheduling.md, with the figures).
constexpr double kTensorShare = 0.45;
constexpr double kLiveShare = 2.0 / 3;

int64_t kept_tensor_limit(const target::Target &target) {
    return int64_t(double(target.cmx_usable_bytes) * kTensorShare);
}

int64_t cmx_bytes(const dsl::TensorDesc &t, int64_t channel_alignment) {
    const dsl::Shape &s = t.shape;
    const int64_t channels =
        (s[dsl::dims::C] + channel_alignment - 1) / channel_alignment * channel_alignment;
    return s[dsl::dims::N] * channels * s[dsl::dims::H] * s[dsl::dims::W] * dsl::bytes_of(t.type);
}

// Whether a tensor costs less kept in CMX than stored and loaded back: a tile's part copied into
// every other tile's CMX on the DMA engines, against each byte stored to DDR and loaded once.
// vpu27 (2 tiles, 2 engines of 31.2 GB/s, DDR 31.2 GB/s): a byte's copy costs a quarter of its
// round trip. vpu20 (4 tiles, 1 engine of 22.4 GB/s, DDR 20 GB/s): three copies cost more, so
// it keeps tensors by rows only, which need no more than their halos copied.
bool copies_beat_round_trip(const target::Target &target) {
    const double engines_gbps =
        target.dma_engines * target.dma_engine_bytes_per_cycle * target.dma_clock_mhz / 1000;
    const double broadcast_ns_per_byte = double(target.tiles - 1) / engines_gbps;
    const double round_trip_ns_per_byte = 2 / std::min(target.ddr_bandwidth_gbps, engines_gbps);
    return broadcast_ns_per_byte < round_trip_ns_per_byte;
}

namespace {

// Whether `layer`'s output may stay in CMX: a computed layer of one output of one image (a CMX
// copy holds one) whose schedule and whose readers' schedules are the defaults, none of them a
// view of DDR memory.
bool may_stay_in_cmx(const LoweringState &s, const dsl::Layer &layer,
                     const std::vector<dsl::Layer> &readers) {
    const dsl::LayerRegistry &registry = algorithms::layer_registry();
    if (!s.defaulted_schedules.count(layer.name()) || layer.outputs().size() != 1 ||
        layer.output().shape[dsl::dims::N] != 1 || dsl::is_constant(layer) ||
        registry.view(layer) || is_network_output(s, layer) || readers.empty())
        return false;
    return std::all_of(readers.begin(), readers.end(), [&](const dsl::Layer &reader) {
        return s.defaulted_schedules.count(reader.name()) && !registry.view(reader) &&
               reader.outputs().size() == 1;
    });
}

// The box of `layer`'s output each tile computes, when every tile's tasks cover exactly a box
// of all of its channels and columns (rows split over tiles, SOH); nullopt otherwise.
std::optional<std::map<int, Region>> rows_per_tile(LoweringState &s, const dsl::Layer &layer) {
    const int64_t granule = runs_on_dpu(s, layer) ? s.target.channel_alignment : 1;
    const LoopNest nest = resolve_loop_nest(s.graph, layer, s.target, granule);
    std::map<int, Region> boxes;
    std::map<int, int64_t> covered;
    for (const Task &t : nest.tasks()) {
        auto [it, fresh] = boxes.try_emplace(t.tile, t.region);
        for (size_t d = 0; !fresh && d < 3; ++d)
            it->second.dims[d] = {std::min(it->second.dims[d].begin, t.region.dims[d].begin),
                                  std::max(it->second.dims[d].end, t.region.dims[d].end)};
        covered[t.tile] += t.region.elements();
    }
    const dsl::Shape &shape = layer.output().shape;
    for (const auto &[tile, box] : boxes)
        if (covered[tile] != box.elements() || box.dims[0].extent() != shape[dsl::dims::C] ||
            box.dims[1].extent() != shape[dsl::dims::W])
            return std::nullopt;
    return boxes;
}

// The rows of `layer` each tile holds to keep it by rows: those it computes (`computed`) and
// those its readers' tasks there read, as one band; nullopt when a reader runs on a tile that
// computes none of it.
std::optional<std::map<int, Interval>> rows_held(LoweringState &s, const dsl::Layer &layer,
                                                 const std::vector<dsl::Layer> &readers,
                                                 const std::map<int, Region> &computed) {
    std::map<int, Interval> held;
    for (const auto &[tile, box] : computed) held[tile] = box.dims[2];
    const int64_t height = layer.output().shape[dsl::dims::H];
    for (const dsl::Layer &reader : readers) {
        const int64_t granule = runs_on_dpu(s, reader) ? s.target.channel_alignment : 1;
        const LoopNest nest = resolve_loop_nest(s.graph, reader, s.target, granule);
        const InputBounds bounds(reader);
        for (const Task &t : nest.tasks()) {
            const std::vector<Region> read = bounds(t.region);
            for (size_t i = 0; i < reader.inputs().size(); ++i) {
                if (!reader.inputs()[i].same_as(layer)) continue;
                const auto rows = held.find(t.tile);
                if (rows == held.end()) return std::nullopt;
                const Interval r = read[i].dims[2];
                rows->second = {std::min(rows->second.begin, std::max<int64_t>(r.begin, 0)),
                                std::max(rows->second.end, std::min(r.end, height))};
            }
        }
    }
    return held;
}

} // namespace

void keep_in_cmx(LoweringState &s) {
    if (!s.graph_scheduling) return;
    const bool copies_pay = copies_beat_round_trip(s.target);
    const std::vector<dsl::Layer> &layers = s.graph.layers();
    std::map<std::string, size_t> position;
    for (size_t i = 0; i < layers.size(); ++i) position[layers[i].name()] = i;
    const int64_t usable = int64_t(s.target.cmx_usable_bytes);
    const int64_t alignment = s.target.channel_alignment;
    // Kept tensors: bytes and the position of their last reader.
    std::vector<std::pair<int64_t, size_t>> kept;
    for (size_t i = 0; i < layers.size(); ++i) {
        const dsl::Layer &layer = layers[i];
        const std::vector<dsl::Layer> readers = s.graph.consumers(layer);
        if (!may_stay_in_cmx(s, layer, readers)) continue;
        const int64_t whole = cmx_bytes(layer.output(), alignment);
        int64_t live = 0;
        for (const auto &[kept_bytes, last_reader] : kept)
            if (last_reader >= i) live += kept_bytes; // still read by layer i, or later
        auto fits = [&](int64_t bytes) {
            return bytes <= kept_tensor_limit(s.target) && live + bytes <= usable * kLiveShare;
        };
        // By rows first: each tile the rows it computes or reads, a band of the bytes, and the
        // halo rows alone copied between tiles.
        int64_t bytes = whole;
        bool by_rows = false;
        std::map<int, Interval> rows;
        const std::optional<std::map<int, Region>> computed = rows_per_tile(s, layer);
        const std::optional<std::map<int, Interval>> held =
            computed && computed->size() > 1 ? rows_held(s, layer, readers, *computed)
                                             : std::nullopt;
        if (held) {
            int64_t largest = 0;
            for (const auto &[tile, band] : *held)
                largest =
                    std::max(largest, whole / layer.output().shape[dsl::dims::H] * band.extent());
            if (fits(largest)) {
                bytes = largest;
                by_rows = true;
                rows = *held;
            }
        }
        // A copy on each tile, where copies cost less than a round trip.
        if (!by_rows && (!copies_pay || !fits(whole))) continue;
        size_t last_reader = i;
        for (const dsl::Layer &reader : readers)
            last_reader = std::max(last_reader, position.at(reader.name()));
        kept.push_back({bytes, last_reader});
        dsl::Layer handle = layer;
        handle.schedule().store_in(dsl::MemoryLevel::CMX);
        if (by_rows) s.rows_in_cmx[layer.name()] = rows;
    }
    if (!kept.empty())
        s.notes.push_back(
            "keep_in_cmx: " + std::to_string(kept.size()) +
            " layer output(s) kept in CMX from their producer to their last "
            "reader (" +
            std::to_string(s.rows_in_cmx.size()) +
            " by rows, each tile holding the rows it computes or reads); --dump-after "
            "keep_in_cmx lists every layer's schedule");
}

} // namespace vpuc::codegen
