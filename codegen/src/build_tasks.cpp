// Pass build_tasks: every task of every layer's loop nest becomes DMA-in, DPU or SHAVE and
// DMA-out tasks over CMX buffers, in program order: per tile, the loads of `prefetch` tasks
// ahead (order_prefetch.cpp makes them wait); channels padded to whole groups in CMX for the DPU;
// layers computed at a consumer's loop built inside it; layers kept in CMX computed into a copy
// of the whole output on each tile (broadcast_outputs copies each task's result between them).
// Weights are one copy per range of output channels into a constant that pack_weights fills; DPU
// tasks get their variants from choose_workloads.
#include <algorithm>
#include <array>
#include <cstring>
#include <map>
#include <memory>
#include <numeric>
#include <set>
#include <tuple>

#include "codegen/bounds.h"
#include "dpu_layout.h"

namespace vpuc::codegen {

namespace {

// dpu_arith.h stays free of the blob schema (the DPU's Halide generators build without it), so
// its activations are an enum of their own.
blob::Activation blob_activation(dpu::Activation a) {
    switch (a) {
    case dpu::Activation::None:
        return blob::Activation::None;
    case dpu::Activation::Relu:
        return blob::Activation::Relu;
    case dpu::Activation::ReluX:
        return blob::Activation::ReluX;
    case dpu::Activation::LeakyRelu:
        return blob::Activation::LeakyRelu;
    }
    return blob::Activation::None;
}

int elem_bytes(blob::DType t) {
    return blob::dtype_bytes(t);
}

// Image `image` of a view of a batch (as tensor_view makes); a view of one image serves every
// image (a tensor without batch broadcast over one with).
View image_view(const View &whole, int64_t image) {
    if (whole.dims[3].extent() == 1) return whole;
    View v = whole;
    v.offset += uint64_t(image * whole.dims[3].stride() * elem_bytes(whole.dtype));
    v.dims[3] = blob::Dim(1, whole.dims[3].stride());
    return v;
}

// The part `r` of a view whose first element is at `origin` (c, x, y).
View sub_view(const View &whole, const Region &r, const std::array<int64_t, 3> &origin = {}) {
    View v = whole;
    int64_t first = 0;
    for (int d = 0; d < 3; ++d) {
        first += (r.dims[size_t(d)].begin - origin[size_t(d)]) * whole.dims[size_t(d)].stride();
        v.dims[size_t(d)] =
            blob::Dim(uint32_t(r.dims[size_t(d)].extent()), whole.dims[size_t(d)].stride());
    }
    v.offset += uint64_t(first * elem_bytes(whole.dtype));
    return v;
}

// The region `r` held in a CMX buffer in NHWC, `lanes` elements per pixel (r's channels, then
// pad lanes).
View cmx_view(int buffer, blob::DType dtype, const Region &r, int64_t lanes, int32_t zero_point) {
    View v;
    v.buffer = buffer;
    v.dtype = dtype;
    v.zero_point = zero_point;
    const int64_t c = r.dims[0].extent(), w = r.dims[1].extent(), h = r.dims[2].extent();
    v.dims = {blob::Dim(uint32_t(c), 1), blob::Dim(uint32_t(w), lanes),
              blob::Dim(uint32_t(h), lanes * w), blob::Dim(1, lanes * w * h)};
    return v;
}

// The bytes of `r` held with `lanes` elements per pixel.
uint64_t cmx_bytes(const Region &r, int64_t lanes, blob::DType dtype) {
    return uint64_t(r.dims[1].extent() * r.dims[2].extent() * lanes) * uint64_t(elem_bytes(dtype));
}

Region with_channels(Region r, Interval c) {
    r.dims[0] = c;
    return r;
}

std::array<int64_t, 3> origin_of(const Region &r) {
    return {r.dims[0].begin, r.dims[1].begin, r.dims[2].begin};
}

class LayerBuilder;
using Builders = std::map<std::string, std::unique_ptr<LayerBuilder>>;

// Builds the tasks of one layer: all of them for a layer computed at root (its output goes to
// DDR), or, for a layer computed at a consumer's loop, those of one region at a time, into the
// consumer's CMX (compute_region).
class LayerBuilder {
  public:
    LayerBuilder(LoweringState &s, const LayerPlan &plan, const Builders &builders)
        : s_(s), plan_(plan), d_(plan.dpu), builders_(builders), nest_tasks_(plan.nest.tasks()),
          input_regions_(plan.layer), next_dpu_(size_t(s.target.tiles), 0) {}

    void build() {
        // Interleave the tiles' tasks so every tile starts at once; per tile, the inputs
        // of `prefetch` tasks ahead are loaded before a task computes. A batch repeats every
        // task once per image, image after image; the weights stay loaded.
        const std::vector<Task> tasks = split_by_group(nest_tasks_);
        start_context(tasks);
        for (const Task &t : tasks) tiles_computing_[t.region.to_string()].push_back(t.tile);
        const int64_t images = plan_.layer.output().shape[dsl::dims::N];
        if (images > 1 && plan_.nest.broadcast)
            fail("kept in CMX (store_in(CMX) or HKSwitch) with a batch of " +
                 std::to_string(images) + ": the CMX copy holds one image; store it in DDR");
        std::vector<std::vector<Task>> per_tile(size_t(s_.target.tiles));
        std::vector<std::vector<int64_t>> image_of(per_tile.size());
        for (int64_t image = 0; image < images; ++image)
            for (const Task &t : tasks) {
                per_tile[size_t(t.tile)].push_back(t);
                image_of[size_t(t.tile)].push_back(image);
            }
        size_t rounds = 0;
        for (const auto &list : per_tile) rounds = std::max(rounds, list.size());
        const size_t ahead = size_t(plan_.nest.prefetch);
        std::vector<std::vector<Pending>> pending(per_tile.size());
        std::vector<std::vector<int>> computes(per_tile.size());
        std::map<std::pair<int64_t, int64_t>, std::vector<int>> weight_users;
        if (!plan_.on_shave && has_weights())
            for (const Task &t : tasks) {
                auto &tiles = weight_users[channels_of(t)];
                if (std::find(tiles.begin(), tiles.end(), t.tile) == tiles.end())
                    tiles.push_back(t.tile);
            }
        const bool keep_weights = weights_fit(weight_users);
        for (size_t r = 0; r < rounds + ahead; ++r) {
            // Weights go first: every task of the round needs them, and one broadcast serves
            // all the tiles computing the same output channels. When all of the layer's
            // weights do not fit in CMX at once, each tile loads a range of channels afresh
            // whenever its tasks move to it, and the previous range's memory is free again.
            for (size_t tile = 0; tile < per_tile.size(); ++tile)
                if (r < per_tile[tile].size() && !weight_users.empty()) {
                    const auto channels = channels_of(per_tile[tile][r]);
                    if (keep_weights) {
                        load_weights(channels, weight_users.at(channels));
                    } else if (r == 0 || channels_of(per_tile[tile][r - 1]) != channels) {
                        loaded_weights_.erase({channels, int(tile)});
                        load_weights(channels, {int(tile)});
                    }
                }
            // Per tile, the inputs of `prefetch` tasks ahead are loaded before a task computes
            // (order_prefetch then bounds how far the loads run ahead).
            for (size_t tile = 0; tile < per_tile.size(); ++tile)
                if (r < per_tile[tile].size())
                    pending[tile].push_back(load(per_tile[tile][r], image_of[tile][r]));
            for (size_t tile = 0; tile < per_tile.size(); ++tile)
                if (r >= ahead && r - ahead < per_tile[tile].size())
                    computes[tile].push_back(compute_and_store(pending[tile][r - ahead]));
        }
        PrefetchChain chain{name(), plan_.nest.prefetch, {}};
        for (size_t tile = 0; tile < per_tile.size(); ++tile) {
            std::vector<PrefetchChain::Step> steps;
            for (size_t r = 0; r < per_tile[tile].size(); ++r)
                steps.push_back({pending[tile][r].input_loads, computes[tile][r]});
            if (!steps.empty()) chain.tiles.push_back(std::move(steps));
        }
        s_.prefetch_chains.push_back(std::move(chain));
    }

    // Computes the part `region` of the output on `tile` into `dest`, a CMX view whose first
    // element is the region's first (in whole channel groups when this layer is on the DPU),
    // as the layer's own tasks clipped to the region. Returns the tasks that write `dest`.
    std::vector<int> compute_region(const Region &region, int tile, int64_t image,
                                    const View &dest) {
        std::vector<Task> tasks;
        for (Task t : nest_tasks_) {
            bool empty = false;
            for (size_t d = 0; d < 3; ++d) {
                Interval &i = t.region.dims[d];
                i = {std::max(i.begin, region.dims[d].begin), std::min(i.end, region.dims[d].end)};
                empty |= i.extent() <= 0;
            }
            t.tile = tile;
            if (!empty) tasks.push_back(t);
        }
        tasks = split_by_group(tasks);
        start_context(tasks);
        std::vector<int> computes;
        for (const Task &t : tasks) {
            if (!plan_.on_shave && has_weights()) load_weights(channels_of(t), {tile});
            const Pending p = load(t, image);
            const View out = output_window(dest, region, t.region);
            computes.push_back(plan_.on_shave ? shave_task(p, {out}) : dpu_task(p, out));
        }
        return computes;
    }

    std::vector<int> writers; // who wrote this layer's output (to DDR, or into its CMX copies)

    // A layer whose output stays in CMX (LoopNest::broadcast) holds all of it in one buffer on
    // each of these tiles, or, kept by rows (LoweringState::rows_in_cmx), on each tile computing
    // it the rows the pass gave it, recorded in LoweringState::resident_copies.
    // The copies hold whole channel groups when the DPU computes the layer or reads it.
    void keep_in_cmx(const std::set<int> &tiles, bool read_in_groups) {
        const dsl::TensorDesc &out = plan_.layer.output();
        const int64_t channels = out.shape[dsl::dims::C];
        resident_lanes_ = writes_groups() || read_in_groups ? ceil_group(channels) : channels;
        const auto by_rows = s_.rows_in_cmx.find(name());
        rows_only_ = by_rows != s_.rows_in_cmx.end();
        if (rows_only_) {
            // All channels and columns (keep_in_cmx checked each tile computes them), the band
            // of rows the pass gave the tile.
            for (const auto &[tile, rows] : by_rows->second) {
                Region held = whole_region();
                held.dims[2] = rows;
                held_[tile] = held;
            }
        } else {
            for (int tile : tiles) held_[tile] = whole_region();
        }
        for (const auto &[tile, region] : held_) {
            resident_[tile] = add_cmx_buffer(
                name() + ".cmx", tile, cmx_bytes(region, resident_lanes_, blob_dtype(out.type)));
            s_.program.buffers[size_t(resident_[tile])].from_top = rows_only_;
            // Pad lanes a SHAVE leaves alone are zeroed once (the DPU computes its own).
            if (!writes_groups()) {
                const int zero = zero_pad_lanes(resident_view(tile), resident_lanes_, tile, "cmx");
                if (zero >= 0) {
                    writers.push_back(zero);
                    zero_writers_[tile] = zero;
                }
            }
        }
        ResidentCopies copies{name(), resident_, {}, {}};
        if (rows_only_) copies.rows = by_rows->second;
        const bool replicated =
            std::any_of(plan_.nest.relations.begin(), plan_.nest.relations.end(),
                        [](const LoopRelation &r) { return r.replicate; });
        if (replicated)
            for (const Task &t : nest_tasks_) copies.computing_all.insert(t.tile);
        s_.resident_copies.push_back(std::move(copies));
    }

    // Whether this layer's tasks read their inputs, and write their output, in whole channel
    // groups (see "channel padding" below).
    bool reads_groups() const { return !plan_.on_shave && !channel_major(); }
    bool writes_groups() const { return !plan_.on_shave; }

  private:
    struct Pending {
        Task task;
        int64_t image = 0;            // of the batch
        std::vector<int> loads;       // DMA tasks bringing its inputs and weights
        std::vector<int> input_loads; // of them, the DMAs copying inputs from DDR
        std::vector<View> inputs;
        std::vector<Region> input_regions;
        View weights, table;
    };

    const std::string &name() const { return plan_.layer.name(); }

    [[noreturn]] void fail(const std::string &what) const {
        throw LoweringError("layer '" + name() + "': " + what);
    }

    // --- channel padding --------------------------------------------------------------------
    // The DPU reads and writes channels in whole groups of the target's channel alignment (16).
    // A CMX tensor the DPU touches holds channels from a multiple of it, in a whole number of
    // groups per pixel; the lanes past the real channels are pad lanes. A DPU task covers
    // whole groups: pad output lanes are computed with zero weights, and pad input lanes meet
    // zero weights (a convolution) or make pad output lanes (a per-channel operation). int8
    // pad lanes may hold anything; fp16 ones must be finite (0 x NaN is NaN), so the pad lanes
    // that no DPU writes are zeroed first.
    int64_t ceil_group(int64_t c) const { return codegen::ceil_group(c, s_.target); }
    Interval group_span(Interval c) const { return codegen::group_span(c, s_.target); }
    bool channel_major() const { return codegen::channel_major(plan_, s_.target); }
    bool has_weights() const { return codegen::has_weights(d_); }

    // The channels a CMX copy of `r` (of a tensor of `channels` channels) holds when read or
    // written in whole groups: from the group `r` starts in, up to the group it ends in.
    Interval held_channels(Interval c, int64_t channels) const {
        return {floor_group(c.begin, s_.target), std::min(channels, ceil_group(c.end))};
    }

    // The view a task of this layer reads or writes: the part `r` of a CMX copy `held` of
    // region `held_region`, widened to whole channel groups when the DPU touches it in groups.
    View window(const View &held, const Region &held_region, const Region &r, bool groups) const {
        return sub_view(held, groups ? with_channels(r, group_span(r.dims[0])) : r,
                        origin_of(held_region));
    }
    View input_window(const View &held, const Region &held_region, const Region &r) const {
        return window(held, held_region, r, reads_groups());
    }
    View output_window(const View &held, const Region &held_region, const Region &r) const {
        return window(held, held_region, r, writes_groups());
    }

    // Zeroes the pad lanes of the CMX copy `held` (lanes per pixel: `lanes`) when they are
    // fp16: one DMA from a constant of zeros, repeated over the pixels. Returns the task, or -1.
    int zero_pad_lanes(const View &held, int64_t lanes, int tile, const std::string &what) {
        const int64_t real = held.dims[0].extent();
        if (held.dtype != blob::DType::F16 || lanes == real) return -1;
        if (zeros_.buffer < 0)
            zeros_ = constant(std::vector<uint8_t>(size_t(s_.target.channel_alignment) * 2, 0),
                              blob::DType::F16);
        View src = zeros_, dst = held;
        dst.offset += uint64_t(real * elem_bytes(held.dtype));
        dst.dims[0] = blob::Dim(uint32_t(lanes - real), 1);
        src.dims = dst.dims;
        for (size_t d = 1; d < src.dims.size(); ++d)
            src.dims[d] = blob::Dim(dst.dims[d].extent(), 0);
        return add_dma(name() + ".zero_pad." + what + "." + std::to_string(tile),
                       dma_engine_in(tile), DmaWork{src, {dst}}, {});
    }

    int dma_engine_in(int tile) const { return codegen::dma_engine_in(s_.target, tile); }
    int dma_engine_out(int tile) const { return codegen::dma_engine_out(s_.target, tile); }

    int add_cmx_buffer(const std::string &buffer_name, int tile, uint64_t bytes) {
        BufferDecl b;
        b.name = buffer_name;
        b.space = blob::MemSpace::Cmx;
        b.index = uint32_t(tile);
        b.bytes = bytes;
        return s_.program.add_buffer(b);
    }

    int add_dma(const std::string &task_name, int engine, DmaWork copy, std::vector<int> deps) {
        return s_.program.add_task(
            dma_task(task_name, name(), engine, std::move(copy), std::move(deps)));
    }

    std::string task_name(const Task &t, const std::string &what) const {
        return name() + "." + what + "." + std::to_string(t.tile) + "." + t.region.to_string();
    }

    // The tasks writing `producer`'s tensor in DDR that a load of `src` waits for: those whose
    // writes meet its bytes (a band of rows of an NHWC tensor is one range), so that a task can
    // start on the first rows its producer stored while the producer computes the rest.
    std::vector<int> writers_within(const dsl::Layer &producer, const View &src) const {
        std::vector<int> wait;
        for (int w : s_.writers_of(producer.name()))
            if (codegen::writes_within(s_.program.tasks[size_t(w)], src)) wait.push_back(w);
        return wait;
    }

    // The DMAs bringing a task's inputs, after the producers' writers; inputs computed at this
    // layer are computed here instead.
    Pending load(const Task &task, int64_t image) {
        Pending p;
        p.task = task;
        p.image = image;
        p.input_regions = input_regions_(task.region);
        std::vector<int> dma_inputs;
        if (plan_.on_shave) {
            for (int i = 0; i < int(plan_.layer.inputs().size()); ++i) dma_inputs.push_back(i);
        } else {
            dma_inputs.push_back(d_.input);
            if (d_.input2 >= 0) dma_inputs.push_back(d_.input2);
        }
        for (int i : dma_inputs) {
            const dsl::Layer &producer = plan_.layer.inputs()[size_t(i)];
            const Region &r = p.input_regions[size_t(i)];
            if (computed_here(producer)) {
                const Fused &fused = fused_input(i, task, image);
                p.inputs.push_back(input_window(fused.dest, fused.region, r));
                p.loads.insert(p.loads.end(), fused.writers.begin(), fused.writers.end());
                continue;
            }
            if (const LayerBuilder *resident = broadcast_producer(producer)) {
                const Region &held = resident->held_region(task.tile);
                if (r.dims[2].begin < held.dims[2].begin || r.dims[2].end > held.dims[2].end)
                    fail("task " + task.region.to_string() + " on tile " +
                         std::to_string(task.tile) + " reads rows [" +
                         std::to_string(r.dims[2].begin) + ", " + std::to_string(r.dims[2].end) +
                         ") of '" + producer.name() + "', whose copy there holds " +
                         held.to_string());
                p.inputs.push_back(input_window(resident->resident_view(task.tile), held, r));
                const std::vector<int> wait = resident->copy_writers(task.tile, r.dims[2]);
                p.loads.insert(p.loads.end(), wait.begin(), wait.end());
                continue;
            }
            const dsl::TensorDesc &desc = producer.output();
            const Region held =
                reads_groups()
                    ? with_channels(r, held_channels(r.dims[0], desc.shape[dsl::dims::C]))
                    : r;
            const int64_t lanes =
                reads_groups() ? ceil_group(held.dims[0].extent()) : held.dims[0].extent();
            View src = sub_view(image_view(s_.tensor_views.at(producer.name()), image), held);
            const int buf = add_cmx_buffer(name() + ".in" + std::to_string(i), task.tile,
                                           cmx_bytes(held, lanes, src.dtype));
            View dst = cmx_view(buf, src.dtype, held, lanes, src.zero_point);
            p.loads.push_back(add_dma(task_name(task, "load" + std::to_string(i)),
                                      dma_engine_in(task.tile), DmaWork{src, {dst}},
                                      writers_within(producer, src)));
            p.input_loads.push_back(p.loads.back());
            const int zero = zero_pad_lanes(dst, lanes, task.tile, task.region.to_string());
            if (zero >= 0) p.loads.push_back(zero);
            p.inputs.push_back(input_window(dst, held, r));
        }
        if (!plan_.on_shave && has_weights()) {
            const LoadedWeights &w = loaded_weights_.at({channels_of(task), task.tile});
            p.weights = w.weights;
            p.table = w.table;
            p.loads.insert(p.loads.end(), w.loads.begin(), w.loads.end());
        }
        return p;
    }

    Region whole_region() const {
        const dsl::Shape &shape = plan_.layer.output().shape;
        Region whole;
        whole.dims = {Interval{0, shape[dsl::dims::C]}, Interval{0, shape[dsl::dims::W]},
                      Interval{0, shape[dsl::dims::H]}};
        return whole;
    }

    // The part of the output the copy in the CMX of `tile` holds (broadcast layers).
    const Region &held_region(int tile) const {
        auto it = held_.find(tile);
        if (it == held_.end())
            fail("no copy of the output in the CMX of tile " + std::to_string(tile));
        return it->second;
    }

    // The copy in the CMX of `tile`, NHWC with `resident_lanes_` per pixel (broadcast layers).
    View resident_view(int tile) const {
        const dsl::TensorDesc &out = plan_.layer.output();
        const int32_t zero_point =
            !out.quant.empty() && !out.quant.per_channel() ? out.quant.zero_point[0] : 0;
        return cmx_view(resident_.at(tile), blob_dtype(out.type), held_region(tile),
                        resident_lanes_, zero_point);
    }

    // The tasks a reader of rows `rows` of the copy on `tile` waits for: every writer of a
    // whole copy, which other tiles' tasks and their broadcasts fill; for a copy of rows, the
    // tile's zeroing of pad lanes and the tasks computing any of those rows, on whichever tile
    // (broadcast_outputs adds the copy of another tile's rows after its task, and a reader
    // waits for that too).
    std::vector<int> copy_writers(int tile, Interval rows) const {
        if (!rows_only_) return writers;
        std::vector<int> wait;
        if (auto zero = zero_writers_.find(tile); zero != zero_writers_.end())
            wait.push_back(zero->second);
        for (const auto &[written, task] : row_writers_)
            if (written.begin < rows.end && rows.begin < written.end) wait.push_back(task);
        return wait;
    }

    // The producer keeps its whole output in CMX.
    const LayerBuilder *broadcast_producer(const dsl::Layer &producer) const {
        auto it = builders_.find(producer.name()); // network inputs have no builder
        if (it == builders_.end() || !it->second->plan_.nest.broadcast) return nullptr;
        return it->second.get();
    }

    // The producer is computed at one of this layer's loops.
    bool computed_here(const dsl::Layer &producer) const {
        auto it = builders_.find(producer.name()); // network inputs have no builder
        if (it == builders_.end()) return false;
        const LoopNest &nest = it->second->plan_.nest;
        return !nest.compute_root && nest.compute_at_layer == name();
    }

    // A producer's output computed into CMX once per iteration of the loop it is computed at:
    // the region every task of that iteration on `task`'s tile reads, halos included (tasks of
    // different iterations each compute their halo).
    struct Fused {
        View dest;
        Region region;
        std::vector<int> writers;
    };

    const Fused &fused_input(int input, const Task &task, int64_t image) {
        const dsl::Layer &producer = plan_.layer.inputs()[size_t(input)];
        const LayerBuilder &builder = *builders_.at(producer.name());
        const auto loops = plan_.nest.task_loop_names();
        const size_t depth =
            size_t(std::find(loops.begin(), loops.end(), builder.plan_.nest.compute_at_loop) -
                   loops.begin()) +
            1;
        auto iteration = [&](const Task &t) {
            return std::vector<int64_t>(t.loop_index.begin(),
                                        t.loop_index.begin() +
                                            long(std::min(depth, t.loop_index.size())));
        };
        const FusedKey key{input, task.tile, iteration(task), image};
        if (auto it = fused_.find(key); it != fused_.end()) return it->second;
        if (!group_regions_.count(key)) // the first iteration: every iteration's region at once
            for (const Task &t : *context_) {
                const Region r = input_regions_(t.region)[size_t(input)];
                const auto [it, fresh] =
                    group_regions_.try_emplace(FusedKey{input, t.tile, iteration(t), image}, r);
                if (!fresh)
                    for (size_t d = 0; d < 3; ++d)
                        it->second.dims[d] = {std::min(it->second.dims[d].begin, r.dims[d].begin),
                                              std::max(it->second.dims[d].end, r.dims[d].end)};
            }
        Fused fused;
        fused.region = group_regions_.at(key);
        const dsl::TensorDesc &desc = producer.output();
        // Whole channel groups when the DPU computes the producer or reads it here.
        const bool groups = builder.writes_groups() || reads_groups();
        if (groups)
            fused.region.dims[0] = held_channels(fused.region.dims[0], desc.shape[dsl::dims::C]);
        const int64_t lanes =
            groups ? ceil_group(fused.region.dims[0].extent()) : fused.region.dims[0].extent();
        const blob::DType dtype = blob_dtype(desc.type);
        const int32_t zero_point =
            !desc.quant.empty() && !desc.quant.per_channel() ? desc.quant.zero_point[0] : 0;
        const int buf = add_cmx_buffer(producer.name() + ".at." + name(), task.tile,
                                       cmx_bytes(fused.region, lanes, dtype));
        fused.dest = cmx_view(buf, dtype, fused.region, lanes, zero_point);
        fused.writers = builders_.at(producer.name())
                            ->compute_region(fused.region, task.tile, image, fused.dest);
        if (!builder.writes_groups()) {
            const int zero = zero_pad_lanes(fused.dest, lanes, task.tile, fused.region.to_string());
            if (zero >= 0) fused.writers.push_back(zero);
        }
        return fused_[key] = std::move(fused);
    }

    // The tasks being built: all of a root layer's, or one region's.
    void start_context(const std::vector<Task> &tasks) {
        context_ = &tasks;
        fused_.clear();
        group_regions_.clear();
    }

    // Whether each tile's ranges of output channels, all of them, have their weights fit in
    // half of its CMX at once.
    bool weights_fit(const std::map<std::pair<int64_t, int64_t>, std::vector<int>> &ranges) const {
        const int64_t per_channel = dpu_weight_bytes(d_, s_.target) /
                                    std::max<int64_t>(1, plan_.layer.output().shape[dsl::dims::C]);
        std::vector<int64_t> channels(size_t(s_.target.tiles), 0);
        for (const auto &[range, tiles] : ranges)
            for (int tile : tiles) channels[size_t(tile)] += range.second - range.first;
        const int64_t most = *std::max_element(channels.begin(), channels.end());
        return uint64_t(per_channel * most) <= s_.target.cmx_usable_bytes / 2;
    }

    static std::pair<int64_t, int64_t> channels_of(const Task &t) {
        return {t.region.dims[0].begin, t.region.dims[0].end};
    }

    // A grouped convolution runs as plain convolutions over whole channel groups, with zero
    // weights between an output channel and the input channels of other groups: tasks are cut
    // where a convolution group ends on a channel group's boundary, so that groups of
    // 16-multiple channels each run alone (reading only their inputs) and smaller ones share
    // a task.
    std::vector<Task> split_by_group(const std::vector<Task> &tasks) const {
        if (plan_.on_shave || d_.groups == 1) return tasks;
        const int64_t per_group = plan_.layer.output().shape[dsl::dims::C] / d_.groups;
        const int64_t step = std::lcm(per_group, int64_t(s_.target.channel_alignment));
        std::vector<Task> out;
        for (const Task &t : tasks) {
            const Interval c = t.region.dims[0];
            for (int64_t begin = c.begin; begin < c.end;) {
                const int64_t end = std::min(c.end, (begin / step + 1) * step);
                Task part = t;
                part.region.dims[0] = {begin, end};
                out.push_back(part);
                begin = end;
            }
        }
        return out;
    }

    // Weights of output channels [c0, c1) with their weight table (dpu_layout.h): one
    // constant, which pack_weights fills, copied by one DMA into the CMX of every tile that
    // computes these channels and has not got them yet.
    void load_weights(std::pair<int64_t, int64_t> channels, const std::vector<int> &users) {
        std::vector<int> tiles;
        for (int tile : users)
            if (!loaded_weights_.count({channels, tile})) tiles.push_back(tile);
        if (tiles.empty()) return;
        const Interval range{channels.first, channels.second};
        const WeightLayout layout = weight_layout(plan_, s_.target, range);
        const Interval oc = layout.out_channels;
        const int ic = int(layout.in_channels.extent());
        const int kw = layout.kernel_w, kh = layout.kernel_h;
        View src = constant(std::vector<uint8_t>(layout.bytes, 0), blob::DType::U8);
        s_.weight_packs.push_back({name(), range, src.buffer});
        src.dims = {blob::Dim(uint32_t(layout.bytes), 1)};
        View weights = src, table = src;
        weights.dtype = blob_dtype(d_.weights.type());
        weights.dims = {
            blob::Dim(uint32_t(ic), 1), blob::Dim(uint32_t(kw), ic),
            blob::Dim(uint32_t(kh), int64_t(ic) * kw),
            blob::Dim(uint32_t(oc.extent()), int64_t(layout.channel_bytes) / layout.elem_bytes)};
        weights.zero_point = d_.weights_zero_point;
        table.dtype = blob::DType::I32;
        table.offset = layout.table_offset;
        table.dims = {blob::Dim(4, 1), blob::Dim(uint32_t(oc.extent()), 4)};

        std::vector<View> dsts;
        for (int tile : tiles) {
            const int buf = add_cmx_buffer(name() + ".weights", tile, layout.bytes);
            View dst = src;
            dst.buffer = buf;
            dsts.push_back(dst);
            weights.buffer = table.buffer = buf;
            loaded_weights_[{channels, tile}] = {weights, table, {}};
        }
        const std::string channel_range =
            "c[" + std::to_string(oc.begin) + "," + std::to_string(oc.end) + ")";
        const int copy = add_dma(name() + ".weights." + channel_range, dma_engine_in(tiles[0]),
                                 DmaWork{src, dsts}, {});
        for (int tile : tiles) loaded_weights_[{channels, tile}].loads = {copy};
    }

    template <typename T> View constant(const std::vector<T> &values, blob::DType dtype) {
        auto &section = s_.program.constants;
        size_t offset = (section.size() + 63) / 64 * 64;
        section.resize(offset + values.size() * sizeof(T), 0);
        std::memcpy(section.data() + offset, values.data(), values.size() * sizeof(T));
        BufferDecl b;
        b.name = name() + ".const";
        b.space = blob::MemSpace::Constant;
        b.bytes = values.size() * sizeof(T);
        b.offset = offset;
        View v;
        v.buffer = s_.program.add_buffer(b);
        v.dtype = dtype;
        return v;
    }

    // The DPU task's padding for one task: the layer's padding where the task's input region
    // touches the input's border, none inside.
    void set_window(blob::DpuTaskT &t, const Pending &p) const {
        const Region &out = p.task.region;
        const Region &in = p.input_regions[size_t(d_.input)];
        auto pads = [](int64_t out_begin, int64_t out_extent, int stride, int pad, int kernel,
                       const Interval &in_range, uint8_t &before, uint8_t &after) {
            int64_t first = out_begin * stride - pad;
            before = uint8_t(std::max<int64_t>(0, in_range.begin - first));
            int64_t needed = (out_extent - 1) * stride + kernel;
            after = uint8_t(std::max<int64_t>(0, needed - before - in_range.extent()));
        };
        t.kernel_w = uint8_t(kernel_span_w(d_));
        t.kernel_h = uint8_t(kernel_span_h(d_));
        t.stride_w = uint8_t(d_.stride_w);
        t.stride_h = uint8_t(d_.stride_h);
        pads(out.dims[1].begin, out.dims[1].extent(), d_.stride_w, d_.pad_left, t.kernel_w,
             in.dims[1], t.pad_left, t.pad_right);
        pads(out.dims[2].begin, out.dims[2].extent(), d_.stride_h, d_.pad_top, t.kernel_h,
             in.dims[2], t.pad_top, t.pad_bottom);
    }

    std::unique_ptr<blob::PpeT> ppe() const {
        auto p = std::make_unique<blob::PpeT>();
        const bool fp = d_.output_type.is_float();
        p->activation = blob_activation(fp ? d_.float_ppe.activation : d_.int_ppe.activation);
        p->relux_max = d_.int_ppe.relux_max;
        p->leaky_mult = d_.int_ppe.leaky_mult;
        p->leaky_shift = uint8_t(d_.int_ppe.leaky_shift);
        p->leaky_alpha = d_.float_ppe.leaky_alpha;
        p->clamp_low = d_.int_ppe.clamp_low;
        p->clamp_high = d_.int_ppe.clamp_high;
        p->fp_clamp_low = d_.float_ppe.clamp_low;
        p->fp_clamp_high = d_.float_ppe.clamp_high;
        if (!has_weights()) {
            if (!d_.mult.empty()) p->mult = d_.mult[0];
            if (!d_.shift.empty()) p->shift = d_.shift[0];
            if (!d_.bias.empty()) p->bias = d_.bias[0];
            if (!d_.fp_scale.empty()) p->fp_scale = d_.fp_scale[0];
        }
        p->eltwise_op = d_.eltwise;
        p->in1_mult = d_.in1_mult;
        p->in2_mult = d_.in2_mult;
        return p;
    }

    // Returns the compute task. A layer of several outputs (a SHAVE kernel) computes each into
    // a CMX buffer of its own and stores each.
    int compute_and_store(const Pending &p) {
        if (plan_.nest.broadcast) return compute_into_copy(p);
        const Region &region = p.task.region;
        const int64_t lanes =
            writes_groups() ? ceil_group(region.dims[0].extent()) : region.dims[0].extent();
        std::vector<View> whole_outs, outs_cmx, outs;
        for (const dsl::TensorDesc &t : plan_.layer.outputs()) {
            const View whole = image_view(s_.tensor_views.at(t.name), p.image);
            const std::string buffer = name() + ".out" + t.name.substr(name().size());
            const int out_buf =
                add_cmx_buffer(buffer, p.task.tile, cmx_bytes(region, lanes, whole.dtype));
            whole_outs.push_back(whole);
            outs_cmx.push_back(cmx_view(out_buf, whole.dtype, region, lanes, whole.zero_point));
            outs.push_back(output_window(outs_cmx.back(), region, region));
        }
        const int compute = plan_.on_shave ? shave_task(p, outs) : dpu_task(p, outs[0]);
        // Only the real channels go to DDR, and only this tile's share of the rows.
        const Region share = stored_share(p.task);
        for (size_t k = 0; k < outs.size() && share.elements() > 0; ++k)
            writers.push_back(add_dma(task_name(p.task, k ? "store" + std::to_string(k) : "store"),
                                      dma_engine_out(p.task.tile),
                                      DmaWork{sub_view(outs_cmx[k], share, origin_of(region)),
                                              {sub_view(whole_outs[k], share)}},
                                      {compute}));
        return compute;
    }

    // The part of a task's output that its tile stores to DDR. A replicated layer (Clustering)
    // computes the same region on several tiles; two stores of the same bytes would race, so
    // each of those tiles stores its own contiguous rows of it (none when there are more
    // tiles than rows). Otherwise the whole region.
    Region stored_share(const Task &task) const {
        const std::vector<int> &tiles = tiles_computing_.at(task.region.to_string());
        const int64_t sharers = int64_t(tiles.size());
        const int64_t k = std::find(tiles.begin(), tiles.end(), task.tile) - tiles.begin();
        Region share = task.region;
        const Interval rows = task.region.dims[2];
        share.dims[2] = {rows.begin + rows.extent() * k / sharers,
                         rows.begin + rows.extent() * (k + 1) / sharers};
        return share;
    }

    // Computes into the tile's copy of the output (broadcast_outputs copies the result into
    // the other tiles' copies).
    int compute_into_copy(const Pending &p) {
        // The copies take the pad lanes the DPU computes too.
        const View local =
            output_window(resident_view(p.task.tile), held_region(p.task.tile), p.task.region);
        const int compute = plan_.on_shave ? shave_task(p, {local}) : dpu_task(p, local);
        writers.push_back(compute);
        if (rows_only_) row_writers_.push_back({p.task.region.dims[2], compute});
        return compute;
    }

    static std::vector<int32_t> mins_of(const Region &r) {
        return {int32_t(r.dims[0].begin), int32_t(r.dims[1].begin), int32_t(r.dims[2].begin)};
    }

    // Buffers as the kernel sees them: (c, x, y) with the region's coordinates as mins.
    static View kernel_view(View v) {
        v.dims.resize(3);
        return v;
    }

    // The kernel's arguments: its inputs, then its outputs (one per output tensor).
    int shave_task(const Pending &p, const std::vector<View> &outs_cmx) {
        ShaveWork work;
        work.kernel = plan_.kernel;
        for (size_t i = 0; i < p.inputs.size(); ++i) {
            work.args.push_back(kernel_view(p.inputs[i]));
            work.mins.push_back(mins_of(p.input_regions[i]));
        }
        for (const View &out : outs_cmx) {
            work.args.push_back(kernel_view(out));
            work.mins.push_back(mins_of(p.task.region));
        }
        work.shaves = uint8_t(std::min(s_.target.shaves_available(p.task.tile), 255));
        TaskIR t;
        t.name = task_name(p.task, "shave");
        t.layer = name();
        t.engine = blob::EngineKind::Shave;
        t.tile = uint32_t(p.task.tile);
        t.deps = p.loads;
        t.work = std::move(work);
        return s_.program.add_task(std::move(t));
    }

    int dpu_task(const Pending &p, const View &out_cmx) {
        const Task &task = p.task;
        DpuWork work;
        blob::DpuTaskT &t = work.invariant;
        t.op = d_.op;
        set_window(t, p);
        t.weights_zero_point = d_.weights_zero_point;
        t.ppe = ppe();
        work.input = p.inputs[0];
        if (d_.input2 >= 0) {
            work.input2 = p.inputs[1];
            work.has_input2 = true;
        }
        if (has_weights()) {
            work.weights = p.weights;
            work.weight_table = p.table;
            work.has_weights = true;
        }
        work.output = out_cmx;

        TaskIR dpu_task;
        dpu_task.name = task_name(task, "dpu");
        dpu_task.layer = name();
        dpu_task.engine = blob::EngineKind::Dpu;
        dpu_task.tile = uint32_t(task.tile);
        dpu_task.index = uint32_t(next_dpu_[size_t(task.tile)]++ % s_.target.dpus_per_tile);
        dpu_task.deps = p.loads;
        dpu_task.work = std::move(work);
        return s_.program.add_task(std::move(dpu_task));
    }

    struct LoadedWeights {
        View weights, table;
        std::vector<int> loads; // the DMA tasks copying them
    };
    // Per range of output channels and tile.
    std::map<std::pair<std::pair<int64_t, int64_t>, int>, LoadedWeights> loaded_weights_;
    // Per fused input, tile and iteration of the loop the producer is computed at.
    using FusedKey = std::tuple<int, int, std::vector<int64_t>, int64_t>; // and the image
    std::map<FusedKey, Fused> fused_;
    std::map<FusedKey, Region> group_regions_;
    const std::vector<Task> *context_ = nullptr;

    LoweringState &s_;
    const LayerPlan &plan_;
    const DpuOpDesc &d_;
    const Builders &builders_;
    const std::vector<Task> nest_tasks_; // the layer's tasks, from its loop nest
    const InputBounds input_regions_;    // what a region of the output reads of each input
    std::map<int, int> resident_;        // broadcast layers: tile -> CMX buffer of the output
    std::map<int, Region> held_;         // and the part of the output it holds
    bool rows_only_ = false;             // each copy some rows (LoweringState::rows_in_cmx)
    // Copies of rows: the rows each computing task writes, and the task; per tile, the task
    // zeroing the copy's pad lanes.
    std::vector<std::pair<Interval, int>> row_writers_;
    std::map<int, int> zero_writers_;
    int64_t resident_lanes_ = 0; // and its elements per pixel
    View zeros_;                 // a constant of zeros, for pad lanes
    // Root layers: the tiles computing each task region (several when replicated).
    std::map<std::string, std::vector<int>> tiles_computing_;
    std::vector<int> next_dpu_; // per tile: the DPU the next task goes to
};

// The tiles a layer's tasks run on: its own, or those of the layer it is computed at.
std::set<int> tiles_running(const LoweringState &s, const LayerPlan &plan) {
    if (!plan.nest.compute_root) return tiles_running(s, s.plan_of(plan.nest.compute_at_layer));
    std::set<int> tiles;
    for (const Task &t : plan.nest.tasks()) tiles.insert(t.tile);
    return tiles;
}

// All of a dense tensor view as one row of elements.
View flat_view(View v) {
    uint64_t elements = 1;
    for (const blob::Dim &d : v.dims) elements *= d.extent();
    v.dims = {blob::Dim(uint32_t(elements), 1)};
    return v;
}

// The value of constant layer `layer`, dense in row-major order (its tensor's memory order),
// added to the blob's constant section: a view of it as one row of elements.
View constant_section_view(LoweringState &s, const dsl::Layer &layer) {
    const Halide::Buffer<> value = dsl::constant_value(layer).copy();
    auto &section = s.program.constants;
    const size_t offset = (section.size() + 63) / 64 * 64;
    section.resize(offset + value.size_in_bytes(), 0);
    std::memcpy(section.data() + offset, value.data(), value.size_in_bytes());
    BufferDecl b;
    b.name = layer.name() + ".const";
    b.space = blob::MemSpace::Constant;
    b.bytes = value.size_in_bytes();
    b.offset = offset;
    View v;
    v.buffer = s.program.add_buffer(b);
    v.dtype = blob_dtype(layer.output().type);
    v.dims = {blob::Dim(uint32_t(value.number_of_elements()), 1)};
    return v;
}

// A constant (a graph output) is written by one DMA from the blob's constant section.
void build_constant(LoweringState &s, const LayerPlan &plan) {
    const std::string &name = plan.layer.name();
    s.layer_writers[name] = {s.program.add_task(dma_task(
        name + ".copy0", name, 0,
        DmaWork{constant_section_view(s, plan.layer), {flat_view(s.tensor_views.at(name))}}, {}))};
}

// A view layer's tensor is written by the writers of what it shows: a window's or an alias's
// by its input's (or, for one that is a graph output, by one DMA copying it there), a concat's
// by its parts' writers, and by one DMA copy for each part not placed in it.
void build_view(LoweringState &s, const LayerPlan &plan) {
    const std::string &name = plan.layer.name();
    std::vector<int> writers;
    const dsl::ViewDef &view = *plan.view;
    const auto &inputs = plan.layer.inputs();
    auto copy = [&](size_t i, const View &src, const View &dst, const std::vector<int> &after) {
        writers.push_back(s.program.add_task(dma_task(name + ".copy" + std::to_string(i), name,
                                                      int(i) % s.target.dma_engines,
                                                      DmaWork{src, {dst}}, after)));
    };
    if (view.kind != dsl::ViewDef::Kind::Parts) {
        const std::vector<int> in_writers = s.writers_of(inputs.at(0).name());
        const View &whole = s.tensor_views.at(dsl::input_tensor(plan.layer, 0).name);
        if (s.placed.count(name)) {
            writers = in_writers;
        } else if (view.kind == dsl::ViewDef::Kind::Window) {
            copy(0, box_view(whole, view.boxes.at(0)), s.tensor_views.at(name), in_writers);
        } else { // an alias: the same bytes, dense in both
            copy(0, flat_view(whole), flat_view(s.tensor_views.at(name)), in_writers);
        }
        s.layer_writers[name] = writers;
        return;
    }
    for (size_t i = 0; i < inputs.size(); ++i) {
        const std::string &in = inputs[i].name();
        const std::vector<int> in_writers = s.writers_of(in);
        const auto placed = s.placed.find(in);
        const bool placed_here = placed != s.placed.end() && placed->second.in == name &&
                                 placed->second.box.start == view.boxes.at(i).start;
        if (placed_here) {
            writers.insert(writers.end(), in_writers.begin(), in_writers.end());
            continue;
        }
        copy(i, s.tensor_views.at(in), box_view(s.tensor_views.at(name), view.boxes.at(i)),
             in_writers);
    }
    s.layer_writers[name] = writers;
}

} // namespace

void build_tasks(LoweringState &s) {
    Builders builders;
    for (const auto &plan : s.plans)
        if (!dsl::is_constant(plan.layer)) // no engine computes it
            builders[plan.layer.name()] = std::make_unique<LayerBuilder>(s, plan, builders);
    for (const auto &plan : s.plans) {
        if (!plan.nest.broadcast) continue;
        std::set<int> tiles = tiles_running(s, plan);
        bool read_in_groups = false;
        for (const dsl::Layer &consumer : s.graph.consumers(plan.layer)) {
            const std::set<int> more = tiles_running(s, s.plan_of(consumer.name()));
            tiles.insert(more.begin(), more.end());
            read_in_groups |= builders.at(consumer.name())->reads_groups();
        }
        builders.at(plan.layer.name())->keep_in_cmx(tiles, read_in_groups);
    }
    for (const auto &plan : s.plans) {
        if (dsl::is_constant(plan.layer)) {
            build_constant(s, plan);
            continue;
        }
        if (plan.view) {
            build_view(s, plan);
            continue;
        }
        if (!plan.nest.compute_root) continue; // built by its consumer
        LayerBuilder &builder = *builders.at(plan.layer.name());
        builder.build();
        s.layer_writers[plan.layer.name()] = builder.writers;
    }
}

// Every CMX tensor a DPU task touches holds whole channel groups: its output and its inputs
// (but a convolution's input of fewer channels than a group, which runs channel-major) have a
// whole number of groups, at a pixel stride of whole groups; its weights cover whole groups of
// output channels.
void verify_channel_padding(const LoweringState &s) {
    const uint64_t group = uint64_t(s.target.channel_alignment);
    for (const TaskIR &t : s.program.tasks) {
        const auto *dpu = std::get_if<DpuWork>(&t.work);
        if (!dpu) continue;
        const bool convolution =
            dpu->invariant.op == blob::DpuOp::Conv || dpu->invariant.op == blob::DpuOp::MatMul;
        auto check = [&](const char *what, const View &v, bool channel_major_allowed) {
            const uint64_t channels = v.dims[0].extent();
            const uint64_t pixel = uint64_t(v.dims[1].stride());
            if (channel_major_allowed && channels < group) return;
            if (channels % group != 0 || pixel % group != 0)
                throw LoweringError(
                    "layer '" + t.layer + "': task '" + t.name + "': its " + what + " holds " +
                    std::to_string(channels) + " channels at " + std::to_string(pixel) +
                    " lanes per pixel, not whole groups of " + std::to_string(group));
        };
        check("output", dpu->output, false);
        check("input", dpu->input, convolution);
        if (dpu->has_input2) check("second input", dpu->input2, false);
        if (dpu->has_weights && dpu->weights.dims[3].extent() % group != 0)
            throw LoweringError("layer '" + t.layer + "': task '" + t.name + "': weights of " +
                                std::to_string(dpu->weights.dims[3].extent()) +
                                " output channels, not whole groups of " + std::to_string(group));
    }
}

} // namespace vpuc::codegen
