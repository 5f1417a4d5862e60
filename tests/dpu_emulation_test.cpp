// The DPU emulation (Halide pipelines compiled ahead of time, vpu_target/src/sim_dpu.cpp)
// against its scalar definition (dpu_scalar_oracle.h, the arithmetic of dpu_arith.h), bit for
// bit, on random tasks run through the simulator: every op and element type, odd shapes and
// multiples of 16, strides 1 and 2, kernels 1 to 7, asymmetric padding, several variants, strided
// and reversed views, weight tables with their own per-channel offsets, every activation and
// clamps, fp16 with -0.0, exact fractions, infinities and NaNs. Each task's whole CMX is
// compared, so a write outside the variants' boxes shows too.
#include <gtest/gtest.h>

#include <Halide.h>
#include <dlfcn.h>

#include <cmath>
#include <cstring>
#include <nlohmann/json.hpp>
#include <random>
#include <sstream>

#include "dpu_scalar_oracle.h"
#include "vpu_target/blob_writer.h"
#include "vpu_target/simulator.h"
#include "vpu_target/target.h"

using namespace vpuc;
using namespace vpuc::blob;

namespace {

// vpu27 with channels in groups of 1, so that any channel count is a valid DPU tensor, and
// `cmx_bytes` of CMX per tile.
target::Target any_channels(uint64_t cmx_bytes) {
    auto json = nlohmann::json::parse(target::load_target("vpu27").description_json);
    json["name"] = "vpu27-any-channels";
    json["dpu"]["channel_alignment"] = 1;
    json["cmx"]["bytes_per_tile"] = json["cmx"]["usable_bytes"] = cmx_bytes;
    return target::parse_target(json.dump(), "vpu27-any-channels");
}

const target::Target &any_channels_target() {
    static const target::Target t = any_channels(2 << 20);
    return t;
}

class Random {
  public:
    explicit Random(uint32_t seed) : rng_(seed) {}
    int between(int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng_); }
    bool chance(double p) { return std::uniform_real_distribution<double>(0, 1)(rng_) < p; }
    template <typename T> T pick(std::initializer_list<T> values) {
        return *(values.begin() + between(0, int(values.size()) - 1));
    }
    float real(float lo, float hi) { return std::uniform_real_distribution<float>(lo, hi)(rng_); }
    uint8_t byte() { return uint8_t(rng_()); }

  private:
    std::mt19937 rng_;
};

// fp16 bits: mostly random reals, some exact small fractions and signed zeros, and (when
// `specials`) infinities and NaNs.
uint16_t random_half(Random &r, float magnitude, bool specials) {
    const int kind = r.between(0, 19);
    if (kind == 0) return r.pick<uint16_t>({0x0000, 0x8000}); // +-0
    if (kind <= 4) return fp16::from_float(float(r.between(-16, 16)) / 8.0f);
    if (specials && kind == 5) return r.pick<uint16_t>({0x7c00, 0xfc00, 0x7e00, 0xfe01});
    return fp16::from_float(r.real(-magnitude, magnitude));
}

// One random DPU task and the layout of everything it touches in CMX tile 0.
struct Spec {
    DpuOp op = DpuOp::Conv;
    DType in = DType::U8, out = DType::U8, weights = DType::I8;
    int c = 16, w = 8, h = 8, oc = 16;
    int kw = 3, kh = 3, sx = 1, sy = 1, pl = 1, pr = 1, pt = 1, pb = 1;
    int weight_sets = 0; // distinct channel weights the table points at; 0: random
    int out_w() const { return (w + pl + pr - kw) / sx + 1; }
    int out_h() const { return (h + pt + pb - kh) / sy + 1; }
    bool weighted() const {
        return op == DpuOp::Conv || op == DpuOp::MatMul || op == DpuOp::DepthwiseConv;
    }
    int weight_ic() const { return op == DpuOp::DepthwiseConv ? 1 : c; }

    std::string describe() const {
        std::ostringstream s;
        s << EnumNameDpuOp(op) << " " << EnumNameDType(in) << "->" << EnumNameDType(out) << " in "
          << c << "x" << w << "x" << h << " out " << oc << "x" << out_w() << "x" << out_h()
          << " kernel " << kw << "x" << kh << " stride " << sx << "x" << sy << " pads l" << pl
          << " r" << pr << " t" << pt << " b" << pb;
        return s.str();
    }
};

Spec random_spec(Random &r, DpuOp op) {
    Spec s;
    s.op = op;
    const bool fp16 = r.chance(0.35);
    s.in = fp16 ? DType::F16 : r.pick({DType::U8, DType::I8});
    s.out = fp16 ? DType::F16 : r.pick({DType::U8, DType::I8, DType::U8, DType::I8, DType::F16});
    s.weights = fp16 ? DType::F16 : r.pick({DType::U8, DType::I8});
    s.c = r.pick({1, 3, 5, 7, 16, 17, 20, 32, 33});
    s.oc = s.weighted() && s.op != DpuOp::DepthwiseConv ? r.pick({1, 3, 7, 16, 19, 32, 48}) : s.c;
    if (s.op == DpuOp::Eltwise || s.op == DpuOp::MatMul) {
        s.kw = s.kh = 1;
        s.sx = s.sy = 1;
        s.pl = s.pr = s.pt = s.pb = 0;
    } else {
        s.kw = r.pick({1, 3, 3, 5, 7});
        s.kh = r.chance(0.8) ? s.kw : r.pick({1, 2, 3, 5});
        s.sx = r.pick({1, 1, 2});
        s.sy = r.chance(0.8) ? s.sx : r.pick({1, 2});
        s.pl = r.between(0, s.kw - 1), s.pr = r.between(0, s.kw - 1);
        s.pt = r.between(0, s.kh - 1), s.pb = r.between(0, s.kh - 1);
    }
    s.w = r.between(std::max(1, s.kw - s.pl - s.pr), 13);
    s.h = r.between(std::max(1, s.kh - s.pt - s.pb), 9);
    return s;
}

// A (C, W, H, N) view laid out in CMX from `at`: channel stride 1, pixel and row strides with
// or without gaps, rows reversed (a negative stride) at times. Returns the bytes it spans.
uint64_t place_view(Random &r, TensorRefT &t, DType dtype, int c, int w, int h, uint64_t at,
                    int32_t zero_point) {
    const int64_t sw = c + r.pick({0, 0, 0, 1, 5});
    const int64_t row = sw * w + r.pick({0, 0, 3});
    const bool reversed = r.chance(0.2);
    const int elem = dtype_bytes(dtype);
    const uint64_t base = at + (reversed ? uint64_t(row * (h - 1) * elem) : 0);
    t = nhwc(cmx_at(0, base), dtype, uint32_t(c), uint32_t(w), uint32_t(h), 1, zero_point);
    t.dims[1] = Dim(uint32_t(w), sw);
    t.dims[2] = Dim(uint32_t(h), reversed ? -row : row);
    return uint64_t(row * h * elem);
}

int32_t random_zero_point(Random &r, DType t) {
    if (t == DType::U8) return r.between(0, 255);
    if (t == DType::I8) return r.between(-128, 127);
    return 0;
}

// Variants: the output cut into a grid along x, y and c, of which a random nonempty subset is
// computed (the rest of the output keeps its bytes).
std::vector<std::unique_ptr<DpuVariantT>> random_variants(Random &r, const Spec &s) {
    auto cuts = [&](int extent, int max_pieces) {
        std::vector<uint32_t> at = {0, uint32_t(extent)};
        for (int i = 1; i < max_pieces; ++i)
            if (extent > 1) at.push_back(uint32_t(r.between(1, extent - 1)));
        std::sort(at.begin(), at.end());
        at.erase(std::unique(at.begin(), at.end()), at.end());
        return at;
    };
    const auto xs = cuts(s.out_w(), 2), ys = cuts(s.out_h(), 3), cs = cuts(s.oc, 2);
    std::vector<std::unique_ptr<DpuVariantT>> variants;
    for (size_t i = 0; i + 1 < xs.size(); ++i)
        for (size_t j = 0; j + 1 < ys.size(); ++j)
            for (size_t k = 0; k + 1 < cs.size(); ++k)
                if (variants.empty() || r.chance(0.7))
                    variants.push_back(std::make_unique<DpuVariantT>(variant(
                        {xs[i], ys[j], cs[k]}, {xs[i + 1], ys[j + 1], cs[k + 1]}, "CUBOID_16x16")));
    return variants;
}

std::unique_ptr<PpeT> random_ppe(Random &r, const Spec &s) {
    auto p = std::make_unique<PpeT>();
    p->activation =
        r.pick({Activation::None, Activation::Relu, Activation::ReluX, Activation::LeakyRelu});
    p->relux_max = r.pick({0, 5, 100, 1 << 20});
    p->leaky_mult = r.pick({1, 3, -7, 1000});
    p->leaky_shift = uint8_t(r.between(0, 40));
    p->leaky_alpha = r.pick({0.0f, 0.1f, -0.5f, 1.25f});
    if (r.chance(0.3)) {
        p->clamp_low = r.between(-300, 20);
        p->clamp_high = p->clamp_low + r.between(0, 300);
    }
    if (r.chance(0.3)) {
        p->fp_clamp_low = r.pick({-1.0f, -0.0f, 0.0f, -100.0f});
        p->fp_clamp_high = p->fp_clamp_low + r.pick({0.0f, 0.5f, 2.0f, 1000.0f});
    }
    p->mult = r.between(0, 65535);
    p->shift = uint8_t(r.between(0, 63));
    p->bias = r.pick({0, -5, 1000, INT32_MAX, INT32_MIN});
    p->fp_scale = r.pick({1.0f, 0.5f, -3.0f, 1e-3f, 70000.0f});
    p->eltwise_op =
        r.pick({EltwiseOp::Add, EltwiseOp::Sub, EltwiseOp::Mul, EltwiseOp::Max, EltwiseOp::Min});
    p->in1_mult = r.pick({1, 3, -2, 1 << 24, INT32_MIN});
    p->in2_mult = r.pick({1, 7, -1, 1 << 28});
    (void)s;
    return p;
}

// Weights and weight table in CMX from `at`: per output channel a weights offset (channels in
// order, shuffled, or sharing weights) and its scaling. Returns the bytes and fills the task.
std::vector<uint8_t> random_weights(Random &r, const Spec &s, DpuTaskT &t, uint64_t at) {
    const int elem = dtype_bytes(s.weights);
    const int64_t sc = 1, sx = s.weight_ic() + r.pick({0, 0, 2});
    const int64_t sy = sx * s.kw + r.pick({0, 0, 1});
    const int64_t per_channel = sy * s.kh;
    const int stored = s.weight_sets ? s.weight_sets : r.chance(0.3) ? std::max(1, s.oc / 2) : s.oc;
    const uint64_t table_at = (at + uint64_t(per_channel * stored * elem) + 63) / 64 * 64;
    std::vector<uint8_t> bytes(size_t(table_at - at + uint64_t(s.oc) * 16));

    // Nonfinite fp16 weights sit in the taps that border outputs read as padding.
    const bool specials = r.chance(0.3);
    for (int set = 0; set < stored; ++set)
        for (int ky = 0; ky < s.kh; ++ky)
            for (int kx = 0; kx < s.kw; ++kx)
                for (int ic = 0; ic < s.weight_ic(); ++ic) {
                    uint8_t *p =
                        bytes.data() + (set * per_channel + ic * sc + kx * sx + ky * sy) * elem;
                    const bool padding_tap =
                        kx < s.pl || ky < s.pt || s.kw - 1 - kx < s.pr || s.kh - 1 - ky < s.pb;
                    if (s.weights == DType::F16) {
                        uint16_t h = random_half(r, 1.0f, specials && padding_tap);
                        std::memcpy(p, &h, 2);
                    } else {
                        *p = r.byte();
                    }
                }
    std::vector<int> order(size_t(s.oc));
    for (int c = 0; c < s.oc; ++c) order[size_t(c)] = c % stored;
    if (r.chance(0.5)) std::shuffle(order.begin(), order.end(), std::mt19937(r.byte()));
    for (int c = 0; c < s.oc; ++c) {
        int32_t entry[4] = {int32_t(order[size_t(c)] * per_channel * elem), 0, 0, 0};
        if (s.in == DType::F16) {
            entry[2] = int32_t(fp16::float_bits(r.pick({1.0f, 0.25f, -2.0f, 3.5e4f})));
            entry[3] = int32_t(fp16::float_bits(r.pick({0.0f, -0.0f, 1.5f, -7.25f})));
        } else {
            const uint16_t mult = uint16_t(r.pick({1, 3, 300, 20000, 65535}));
            entry[2] = int32_t(dpu::pack_requant(mult, uint8_t(r.between(0, 63))));
            if (s.out == DType::F16) entry[2] = int32_t(fp16::float_bits(r.real(-1e-2f, 1e-2f)));
            entry[3] = r.pick({0, 17, -4000, INT32_MAX - 100, INT32_MIN + 5});
        }
        std::memcpy(bytes.data() + (table_at - at) + size_t(c) * 16, entry, 16);
    }
    t.weights = std::make_unique<TensorRefT>(
        dense(cmx_at(0, at), s.weights,
              {uint32_t(s.weight_ic()), uint32_t(s.kw), uint32_t(s.kh), uint32_t(s.oc)}));
    t.weights->dims[1] = Dim(uint32_t(s.kw), sx);
    t.weights->dims[2] = Dim(uint32_t(s.kh), sy);
    t.weights->dims[3] = Dim(uint32_t(s.oc), stored < s.oc ? 0 : per_channel);
    t.weight_table =
        std::make_unique<TensorRefT>(dense(cmx_at(0, table_at), DType::I32, {4, uint32_t(s.oc)}));
    t.weights_zero_point = random_zero_point(r, s.weights);
    return bytes;
}

// The task and the CMX contents it starts from: activations (from 0, loaded from the network
// input) and constants (weights and table, from `constants_at`, loaded from the constant
// section); the rest of the CMX up to `cmx_bytes` keeps the simulator's fill, 0xFF.
struct Case {
    Spec spec;
    DpuTaskT task;
    std::vector<uint8_t> activations, constants;
    uint64_t constants_at = 0;
    uint64_t cmx_bytes() const {
        uint64_t end = constants_at + constants.size();
        for (const TensorRefT *t : {task.input.get(), task.input2.get(), task.output.get()})
            if (t) end = std::max(end, t->address->offset() + span_bytes(*t));
        return end;
    }
};

Case make_case(Random &r, const Spec &s) {
    Case k;
    k.spec = s;
    DpuTaskT &t = k.task;
    t.op = s.op;
    t.kernel_w = uint8_t(s.kw), t.kernel_h = uint8_t(s.kh);
    t.stride_w = uint8_t(s.sx), t.stride_h = uint8_t(s.sy);
    t.pad_left = uint8_t(s.pl), t.pad_right = uint8_t(s.pr);
    t.pad_top = uint8_t(s.pt), t.pad_bottom = uint8_t(s.pb);
    uint64_t at = 0;
    auto next = [&](uint64_t bytes) { at = (at + bytes + 64 + 63) / 64 * 64; };
    t.input = std::make_unique<TensorRefT>();
    next(place_view(r, *t.input, s.in, s.c, s.w, s.h, at, random_zero_point(r, s.in)));
    if (s.op == DpuOp::Eltwise) {
        t.input2 = std::make_unique<TensorRefT>();
        next(place_view(r, *t.input2, s.in, s.c, s.w, s.h, at, random_zero_point(r, s.in)));
    }
    t.output = std::make_unique<TensorRefT>();
    next(place_view(r, *t.output, s.out, s.oc, s.out_w(), s.out_h(), at,
                    random_zero_point(r, s.out)));
    k.activations.resize(at);
    const bool fp16 = s.in == DType::F16;
    for (size_t i = 0; i + 1 < k.activations.size(); i += 2) {
        uint16_t h = fp16 ? random_half(r, 4.0f, true) : uint16_t(r.byte() | r.byte() << 8);
        std::memcpy(&k.activations[i], &h, 2);
    }
    k.constants_at = at;
    if (s.weighted()) k.constants = random_weights(r, s, t, at);
    t.ppe = random_ppe(r, s);
    t.variants = random_variants(r, s);
    return k;
}

// A blob running the case: the loads, the DPU task, then the whole CMX stored to the output.
std::vector<uint8_t> case_blob(const Case &k,
                               const target::Target &target = any_channels_target()) {
    BlobWriter w(target, "dpu");
    const uint32_t act_bytes = uint32_t(k.activations.size());
    const uint32_t cmx_bytes = uint32_t(k.cmx_bytes());
    w.add_input("activations", {act_bytes}, DType::U8, Layout::ND);
    w.add_output("cmx", {cmx_bytes}, DType::U8, Layout::ND);
    const uint32_t loaded = w.add_barrier(0), computed = w.add_barrier(1);
    w.add_dma(0, "activations", input_at(0), cmx_at(0, 0), act_bytes).update(loaded);
    if (!k.constants.empty()) {
        const uint64_t at = w.add_constant(k.constants.data(), k.constants.size());
        w.add_dma(1, "constants", constant_at(at), cmx_at(0, k.constants_at),
                  uint32_t(k.constants.size()))
            .update(loaded);
    }
    DpuTaskT task = k.task;
    w.add_dpu(0, 0, "dpu", std::move(task)).wait(loaded).update(computed);
    w.add_dma(0, "store", cmx_at(0, 0), output_at(0), cmx_bytes).wait(computed);
    return w.finish();
}

std::vector<uint8_t> simulate(const Case &k) {
    sim::Simulator sim(any_channels_target(), case_blob(k));
    return sim.run({k.activations}).outputs.at(0);
}

// The same CMX contents computed by the scalar definition.
std::vector<uint8_t> expected(const Case &k) {
    std::vector<uint8_t> cmx = k.activations;
    cmx.insert(cmx.end(), k.constants.begin(), k.constants.end());
    cmx.resize(k.cmx_bytes(), 0xff);
    const std::vector<uint8_t> bytes = case_blob(k);
    const Blob &blob = *GetBlob(bytes.data());
    for (const TaskQueue *q : *blob.queues())
        for (const Task *t : *q->tasks())
            if (const DpuTask *dpu = t->kind_as_DpuTask()) test::run_dpu_scalar(*dpu, cmx.data());
    return cmx;
}

void expect_same_cmx(const Case &k, const std::string &what) {
    const std::vector<uint8_t> got = simulate(k), want = expected(k);
    ASSERT_EQ(got.size(), want.size());
    size_t differ = 0, first = 0;
    for (size_t i = 0; i < got.size(); ++i)
        if (got[i] != want[i] && differ++ == 0) first = i;
    EXPECT_EQ(differ, 0u) << what << ": " << k.spec.describe() << ": " << differ
                          << " bytes differ, the first at CMX byte " << first << " ("
                          << int(got[first]) << " instead of " << int(want[first]) << ")";
}

// The verifier's message for the case, or "" when it accepts it.
std::string refusal(const Case &k, const target::Target &target = any_channels_target()) {
    try {
        sim::Simulator sim(target, case_blob(k, target));
    } catch (const BlobError &e) {
        return e.what();
    }
    return "";
}

class DpuEmulationOps : public testing::TestWithParam<DpuOp> {};

TEST_P(DpuEmulationOps, RandomTasksMatchTheScalarDefinition) {
    for (uint32_t seed = 1; seed <= 150; ++seed) {
        Random r(seed);
        expect_same_cmx(make_case(r, random_spec(r, GetParam())), "seed " + std::to_string(seed));
        if (HasFailure()) return;
    }
}

INSTANTIATE_TEST_SUITE_P(Ops, DpuEmulationOps,
                         testing::Values(DpuOp::Conv, DpuOp::MatMul, DpuOp::DepthwiseConv,
                                         DpuOp::MaxPool, DpuOp::AvgPool, DpuOp::Eltwise),
                         [](const auto &info) { return std::string(EnumNameDpuOp(info.param)); });

// Tasks of the sizes compiled networks have (channels in groups of 16, many outputs per box),
// which take the pipelines' main loops rather than their edges.
TEST(DpuEmulation, LargerTasksMatchTheScalarDefinition) {
    uint32_t seed = 1000;
    for (DpuOp op :
         {DpuOp::Conv, DpuOp::DepthwiseConv, DpuOp::MaxPool, DpuOp::AvgPool, DpuOp::Eltwise})
        for (DType in : {DType::U8, DType::I8, DType::F16}) {
            Random r(++seed);
            Spec s = random_spec(r, op);
            s.in = s.weights = in;
            s.out = in == DType::F16 ? DType::F16 : r.pick({DType::U8, DType::I8});
            s.c = 32, s.w = 23, s.h = 12;
            s.oc = op == DpuOp::Conv ? 48 : s.c;
            if (op == DpuOp::Eltwise) s.kw = s.kh = 1, s.pl = s.pr = s.pt = s.pb = 0;
            expect_same_cmx(make_case(r, s), "seed " + std::to_string(seed));
        }
}

// Weights packed for every output channel would take more than the simulator packs at once
// (64 MiB as int32): they are packed for a slice of channels at a time.
TEST(DpuEmulation, WeightsBeyondThePackingBudgetArePackedInSlices) {
    Random r(7);
    Spec s = random_spec(r, DpuOp::Conv);
    s.in = DType::U8, s.out = DType::I8, s.weights = DType::I8;
    s.c = 1 << 19, s.w = s.h = 1, s.oc = 40, s.weight_sets = 2;
    s.kw = s.kh = 1, s.sx = s.sy = 1, s.pl = s.pr = s.pt = s.pb = 0;
    expect_same_cmx(make_case(r, s), "one pixel of 2^19 channels");
}

// Moves the output to CMX byte `at`, its rows in order.
void move_output_to(Case &k, uint64_t at) {
    k.task.output->address = std::make_unique<Address>(MemSpace::Cmx, 0, at);
    for (Dim &d : k.task.output->dims) d = Dim(d.extent(), std::abs(d.stride()));
}

// A task whose output overwrites its own weight table (after the weights) computes with the
// table it started with, which it reads whole first.
TEST(DpuEmulation, OutputOverTheTaskOwnWeightTableUsesTheTableItStartedWith) {
    Random r(11);
    Spec s = random_spec(r, DpuOp::Conv);
    s.in = DType::U8, s.out = DType::U8, s.weights = DType::U8, s.c = 16, s.oc = 16;
    Case k = make_case(r, s);
    move_output_to(k, k.task.weight_table->address->offset());
    ASSERT_EQ(refusal(k), "");
    expect_same_cmx(k, "output over the weight table");
}

Case overlap_case(DpuOp op) {
    Random r(5);
    Spec s = random_spec(r, op);
    s.in = s.weights = s.out = DType::I8;
    return make_case(r, s);
}

// The DPU reads its input, second input and weights while it writes its output: the verifier
// refuses a task whose output shares a byte with them, as the result would depend on the order
// of its writes.
TEST(DpuEmulation, OutputOverlappingWhatTheTaskReadsIsRefused) {
    Case conv = overlap_case(DpuOp::Conv);
    move_output_to(conv, conv.task.input->address->offset() + 5);
    EXPECT_NE(refusal(conv).find("task 'dpu' (DPU queue tile 0 dpu 0): output overlaps its "
                                 "input at CMX of tile 0+"),
              std::string::npos)
        << refusal(conv);

    Case eltwise = overlap_case(DpuOp::Eltwise);
    move_output_to(eltwise, eltwise.task.input2->address->offset());
    EXPECT_NE(refusal(eltwise).find("output overlaps its input2"), std::string::npos)
        << refusal(eltwise);

    Case depthwise = overlap_case(DpuOp::DepthwiseConv);
    move_output_to(depthwise, depthwise.task.weights->address->offset());
    EXPECT_NE(refusal(depthwise).find("output overlaps its weights"), std::string::npos)
        << refusal(depthwise);
}

// A weight table may point a channel at weights anywhere in CMX: over the output too.
TEST(DpuEmulation, ChannelWeightsOverTheOutputAreRefused) {
    Case k = overlap_case(DpuOp::Conv);
    move_output_to(k, (k.cmx_bytes() + 63) / 64 * 64);
    const uint64_t weights = k.task.weights->address->offset();
    const uint64_t table = k.task.weight_table->address->offset();
    const int32_t onto_output = int32_t(k.task.output->address->offset() - weights);
    std::memcpy(&k.constants[table - k.constants_at + 16], &onto_output, 4); // channel 1
    EXPECT_NE(refusal(k).find("weight_table: entry 1: weights offset " +
                              std::to_string(onto_output) +
                              " puts the channel's weights over the task's output"),
              std::string::npos)
        << refusal(k);
}

TEST(DpuEmulation, Fp16InputWithAn8BitOutputIsRefused) {
    Random r(3);
    Spec s = random_spec(r, DpuOp::MaxPool);
    s.in = DType::F16, s.out = DType::U8;
    EXPECT_NE(refusal(make_case(r, s))
                  .find("output: dtype U8 with an F16 input: the PPE turns float accumulators "
                        "into F16 only"),
              std::string::npos);
}

// The pipelines address buffers with 32-bit offsets and the simulator packs the weights of at
// least 16 channels at a time: the verifier bounds both, far beyond what a CMX of megabytes
// holds (targets may declare up to 4 GiB).
TEST(DpuEmulation, TasksBeyondWhatTheEmulationAddressesAreRefused) {
    Random r(13);
    Spec s = random_spec(r, DpuOp::MatMul);
    s.in = s.out = s.weights = DType::U8;
    s.c = (1 << 22) + 1, s.w = s.h = 1, s.oc = 16, s.weight_sets = 1;
    Case wide = make_case(r, s);
    EXPECT_NE(refusal(wide, any_channels(64 << 20))
                  .find("weights: 4194305 weights per output channel (IC x KW x KH), more than "
                        "the DPU takes (4194304)"),
              std::string::npos)
        << refusal(wide, any_channels(64 << 20));

    s = random_spec(r, DpuOp::MaxPool);
    s.in = s.out = DType::U8, s.c = s.oc = 16, s.w = 4, s.h = 2;
    s.kw = s.kh = s.sx = s.sy = 1, s.pl = s.pr = s.pt = s.pb = 0;
    Case far = make_case(r, s);
    move_output_to(far, far.cmx_bytes());
    Dim &rows = far.task.output->dims[2];
    rows = Dim(rows.extent(), int64_t(1) << 31);
    EXPECT_NE(refusal(far, any_channels(uint64_t(1) << 32))
                  .find("output: spans more than 2147483647 bytes or elements, which no DPU "
                        "tensor may"),
              std::string::npos)
        << refusal(far, any_channels(uint64_t(1) << 32));
}

std::string jit_error;

// The simulator's pipelines carry their own Halide runtime, compiled ahead of time and linked
// into the executable, which also uses libHalide's JIT (as the tests and the vpuc command do).
// The runtime's functions are not exported: the JIT, which looks symbols up in the process,
// keeps binding to its own runtime, so each keeps its own error handler (the simulator sets the
// ahead-of-time one), allocator and thread pool, and either works after the other.
TEST(DpuEmulation, AheadOfTimeRuntimeStaysApartFromTheJit) {
    for (const char *symbol : {"halide_error", "halide_set_error_handler", "halide_malloc",
                               "halide_do_par_for", "halide_shutdown_thread_pool"})
        EXPECT_EQ(dlsym(RTLD_DEFAULT, symbol), nullptr) << symbol << " is exported";

    Random r(2);
    const Case k = make_case(r, random_spec(r, DpuOp::Conv));
    expect_same_cmx(k, "before the JIT ran");

    Halide::ImageParam in(Halide::UInt(8), 1, "in");
    Halide::Var x("x");
    Halide::Func twice("twice");
    twice(x) = in(x)*2;
    twice.jit_handlers().custom_error = [](Halide::JITUserContext *, const char *message) {
        jit_error = message;
    };
    Halide::Buffer<uint8_t> values(8);
    for (int i = 0; i < 8; ++i) values(i) = uint8_t(i);
    in.set(values);
    Halide::Buffer<uint8_t> doubled = twice.realize({8});
    EXPECT_EQ(doubled(7), 14);
    // Reading past the input fails in the JIT's code and reaches the JIT's handler.
    twice.realize({9});
    EXPECT_NE(jit_error.find("Input buffer in is accessed at 8"), std::string::npos) << jit_error;

    expect_same_cmx(k, "after the JIT ran");
}

} // namespace
