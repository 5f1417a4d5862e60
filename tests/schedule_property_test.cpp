// The scheduling property: a schedule changes speed, never results. For every layer kind the
// lowering supports, on the DPU (convolutions, dilated and grouped included, pools, eltwise,
// matmul) or as SHAVE kernels (sigmoid, softmax), random legal schedules
// (codegen/random_schedule.h) compile, run on the simulator and give the default schedule's
// output byte for byte, which is also the CPU reference's (algorithms::run_reference).
//
// Each kind gets 50 random schedules, cycling through kTargets, on small layers (16..48
// channels, 7..20 pixels, odd sizes included) that change every kSchedulesPerShape schedules.
// Seeds are fixed, so a run is reproducible; a longer search (property_budget.h), by count or
// by time:
//
//   VPUC_PROPERTY_SCHEDULES=5000 ./build/tests/schedule_property_test
//   VPUC_PROPERTY_MINUTES=60 ./build/tests/schedule_property_test
//
// A failure prints the kind, shape index, target, seed and the schedule as a chain and as
// JSON (dsl::Schedule::from_json reads it back).
#include <gtest/gtest.h>

#include <functional>
#include <iterator>
#include <map>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "algorithms/layers.h"
#include "algorithms/reference.h"
#include "codegen/dpu_match.h"
#include "codegen/loop_nest.h"
#include "codegen/lower.h"
#include "codegen/random_schedule.h"
#include "property_budget.h"
#include "schedule_property_support.h"
#include "schedules/default_schedule.h"
#include "vpu_target/simulator.h"

using namespace vpuc;
using dsl::ElemType;
using test::compile_and_run;
using test::difference;
using test::seed_of;
using test::target_named;

namespace {

constexpr int kDefaultSchedules = 50;
constexpr int kSchedulesPerShape = 10;
const char *const kTargets[] = {"vpu27", "vpu20"};

// ---- Layers ------------------------------------------------------------------------------

class Draw {
  public:
    explicit Draw(uint32_t seed) : rng_(seed) {}
    int operator()(int lo, int hi) { return lo + int(rng_() % uint32_t(hi - lo + 1)); }
    std::mt19937 &rng() { return rng_; }

  private:
    std::mt19937 rng_;
};

dsl::TensorDesc activation(const std::string &name, int64_t c, int64_t w, int64_t h, ElemType type,
                           dsl::Quant quant) {
    dsl::TensorDesc t;
    t.name = name;
    t.shape = dsl::Shape({1, c, h, w});
    t.type = type;
    t.quant = std::move(quant);
    t.order = dsl::DimsOrder::NHWC();
    return t;
}

dsl::Layer u8_input(const std::string &name, int64_t c, int64_t w, int64_t h) {
    return dsl::Layer::input(
        activation(name, c, w, h, ElemType::U8, dsl::Quant::per_tensor(0.05f, 120)));
}

// Per-channel requantization that keeps outputs spread over the u8/i8 range, so that a wrong
// task region or halo shows up in many bytes.
algorithms::QuantWeights weights(std::vector<int> sizes, int oc, ElemType out, Draw &draw) {
    algorithms::QuantWeights qw;
    qw.weights = Halide::Buffer<int8_t>(sizes);
    qw.weights.for_each_value([&](int8_t &v) { v = int8_t(draw(-100, 100)); });
    qw.zero_point = draw(-3, 3);
    for (int c = 0; c < oc; ++c) {
        qw.bias.push_back(draw(-2000, 2000));
        qw.requant.push_back(algorithms::fixed_point(0.002 + 0.0002 * draw(0, 20)));
    }
    qw.output_type = out;
    qw.output_quant = dsl::Quant::per_tensor(0.05f, out == ElemType::U8 ? 10 : -5);
    return qw;
}

// One layer of a kind, with the graph inputs it reads.
struct Case {
    dsl::Layer layer;
    std::string shape; // for failure messages
};

struct Kind {
    std::string name;
    std::function<Case(Draw &, int shape_index)> make;
    dsl::Engine engine = dsl::Engine::DPU; // what random_schedule schedules it for
};

std::string dims(int64_t c, int64_t w, int64_t h) {
    return "c" + std::to_string(c) + " w" + std::to_string(w) + " h" + std::to_string(h);
}

const std::vector<Kind> &kinds() {
    static const std::vector<Kind> all = {
        {"conv3x3",
         [](Draw &draw, int) {
             int ic = draw(16, 48), oc = draw(16, 48), w = draw(7, 20), h = draw(7, 20);
             algorithms::Conv2dParams p;
             p.pad_left = p.pad_right = p.pad_top = p.pad_bottom = 1;
             p.activation = algorithms::Activation::relu();
             auto in = u8_input("in", ic, w, h);
             return Case{
                 algorithms::conv2d("conv", in, weights({ic, 3, 3, oc}, oc, ElemType::U8, draw), p),
                 dims(ic, w, h) + " -> oc" + std::to_string(oc)};
         }},
        {"conv3x3_f16",
         [](Draw &draw, int) {
             // fp16: the MPE modes that take fp16 (vpu20 has one), fp32 accumulation.
             int ic = draw(16, 48), oc = draw(16, 48), w = draw(7, 20), h = draw(7, 20);
             algorithms::Conv2dParams p;
             p.pad_left = p.pad_right = p.pad_top = p.pad_bottom = 1;
             p.activation = algorithms::Activation::relu();
             algorithms::FloatWeights fw;
             fw.weights = Halide::Buffer<Halide::float16_t>(ic, 3, 3, oc);
             fw.weights.for_each_value(
                 [&](Halide::float16_t &v) { v = Halide::float16_t(draw(-64, 64) / 64.0f); });
             for (int c = 0; c < oc; ++c) {
                 fw.scale.push_back(draw(1, 16) / 16.0f);
                 fw.bias.push_back(draw(-16, 16) / 8.0f);
             }
             auto in = dsl::Layer::input(activation("in", ic, w, h, ElemType::F16, {}));
             return Case{algorithms::conv2d("conv", in, fw, p),
                         dims(ic, w, h) + " -> oc" + std::to_string(oc)};
         }},
        {"conv3x3_dilated_grouped",
         [](Draw &draw, int) {
             // Dilation 2 (a 5x5 span with zero taps on the DPU) and 2 or 4 groups (groups
             // within one group of 16 channels share a DPU task, with zero weights between
             // them).
             int groups = draw(0, 1) ? 2 : 4;
             int ic = 8 * draw(2, 4), oc = groups * draw(4, 12), w = draw(7, 20), h = draw(7, 20);
             algorithms::Conv2dParams p;
             p.dilation_w = p.dilation_h = 2;
             p.pad_left = p.pad_right = p.pad_top = p.pad_bottom = 2;
             p.groups = groups;
             auto in = u8_input("in", ic, w, h);
             return Case{
                 algorithms::conv2d("conv", in,
                                    weights({ic / groups, 3, 3, oc}, oc, ElemType::U8, draw), p),
                 dims(ic, w, h) + " -> oc" + std::to_string(oc) + " groups " +
                     std::to_string(groups)};
         }},
        {"conv1x1_stride2",
         [](Draw &draw, int) {
             int ic = draw(16, 48), oc = draw(16, 48), w = draw(7, 20), h = draw(7, 20);
             algorithms::Conv2dParams p;
             p.stride_w = p.stride_h = 2;
             auto in = u8_input("in", ic, w, h);
             return Case{
                 algorithms::conv2d("conv", in, weights({ic, 1, 1, oc}, oc, ElemType::U8, draw), p),
                 dims(ic, w, h) + " -> oc" + std::to_string(oc)};
         }},
        {"depthwise3x3",
         [](Draw &draw, int) {
             // i8 in and out: the other kinds are u8.
             int c = draw(16, 48), w = draw(7, 20), h = draw(7, 20);
             algorithms::Conv2dParams p;
             p.pad_left = p.pad_right = p.pad_top = p.pad_bottom = 1;
             auto in = dsl::Layer::input(
                 activation("in", c, w, h, ElemType::I8, dsl::Quant::per_tensor(0.05f, -7)));
             return Case{algorithms::depthwise_conv2d(
                             "dw", in, weights({1, 3, 3, c}, c, ElemType::I8, draw), p),
                         dims(c, w, h)};
         }},
        {"max_pool3x3s2",
         [](Draw &draw, int shape_index) {
             // Padded on every other shape: pads only at the tasks that touch the border.
             int c = draw(16, 48), w = draw(7, 20), h = draw(7, 20);
             algorithms::PoolParams p;
             p.kernel_w = p.kernel_h = 3;
             p.stride_w = p.stride_h = 2;
             int pad = shape_index % 2 == 0 ? 1 : 0;
             p.pad_left = p.pad_right = p.pad_top = p.pad_bottom = pad;
             return Case{algorithms::max_pool("pool", u8_input("in", c, w, h), p),
                         dims(c, w, h) + " pad " + std::to_string(pad)};
         }},
        {"avg_pool2x2s2",
         [](Draw &draw, int) {
             int c = draw(16, 48), w = draw(7, 20), h = draw(7, 20);
             algorithms::PoolParams p;
             p.kernel_w = p.kernel_h = 2;
             p.stride_w = p.stride_h = 2;
             return Case{algorithms::avg_pool("pool", u8_input("in", c, w, h), p), dims(c, w, h)};
         }},
        {"eltwise_add",
         [](Draw &draw, int) {
             int c = draw(16, 48), w = draw(7, 20), h = draw(7, 20);
             dsl::Quant qa = dsl::Quant::per_tensor(0.05f, 120);
             dsl::Quant qb = dsl::Quant::per_tensor(0.03f, 100);
             dsl::Quant qo = dsl::Quant::per_tensor(0.07f, 90);
             auto a = dsl::Layer::input(activation("a", c, w, h, ElemType::U8, qa));
             auto b = dsl::Layer::input(activation("b", c, w, h, ElemType::U8, qb));
             auto q =
                 algorithms::quant_eltwise(algorithms::EltwiseOp::Add, qa, qb, ElemType::U8, qo);
             return Case{algorithms::eltwise("add", algorithms::EltwiseOp::Add, a, b, {}, q),
                         dims(c, w, h)};
         }},
        {"matmul",
         [](Draw &draw, int) {
             // M rows of K features: (c = K, x = M, y = 1); SOH has no rows to spread.
             int k = draw(16, 48), n = draw(16, 48), m = draw(7, 20);
             auto in = u8_input("in", k, m, 1);
             return Case{algorithms::matmul("fc", in, weights({k, n}, n, ElemType::U8, draw)),
                         "k" + std::to_string(k) + " m" + std::to_string(m) + " -> n" +
                             std::to_string(n)};
         }},
        {"sigmoid",
         [](Draw &draw, int) {
             int c = draw(16, 48), w = draw(7, 20), h = draw(7, 20);
             return Case{algorithms::sigmoid("sig", u8_input("in", c, w, h),
                                             dsl::Quant::per_tensor(1.0f / 256, 0)),
                         dims(c, w, h)};
         },
         dsl::Engine::SHAVE},
        {"softmax",
         [](Draw &draw, int) {
             int c = draw(16, 48), w = draw(3, 12), h = draw(3, 12);
             return Case{algorithms::softmax("soft", u8_input("in", c, w, h), dsl::dims::C,
                                             dsl::Quant::per_tensor(1.0f / 256, 0)),
                         dims(c, w, h)};
         },
         dsl::Engine::SHAVE},
    };
    return all;
}

// ---- Running -----------------------------------------------------------------------------

Halide::Buffer<> random_input(const dsl::TensorDesc &t, uint32_t seed) {
    Halide::Buffer<> b = algorithms::make_buffer(t);
    std::mt19937 rng(seed);
    if (t.type == ElemType::F16) {
        Halide::Buffer<Halide::float16_t> f(b);
        f.for_each_value([&](Halide::float16_t &v) {
            v = Halide::float16_t(float(int(rng() % 513) - 256) / 128.0f);
        });
        return b;
    }
    // u8 and i8 alike: every bit pattern is a value.
    uint8_t *bytes = static_cast<uint8_t *>(b.raw_buffer()->host);
    for (size_t i = 0; i < b.size_in_bytes(); ++i) bytes[i] = uint8_t(rng());
    return b;
}

class ScheduleProperty : public ::testing::TestWithParam<size_t> {};

TEST_P(ScheduleProperty, RandomSchedulesGiveTheDefaultScheduleResult) {
    const Kind &kind = kinds()[GetParam()];
    const test::PropertyBudget budget(kDefaultSchedules, kinds().size());
    // Every schedule runs (a long search should count all failures); the first few print.
    constexpr int kPrinted = 10;
    int failures = 0;
    auto fail = [&](const std::string &message) {
        if (++failures <= kPrinted) ADD_FAILURE() << message;
    };
    int run = 0;
    for (int first = 0; budget.runs(first); first += kSchedulesPerShape) {
        const int shape_index = first / kSchedulesPerShape;
        Draw draw(seed_of(kind.name, "shape", shape_index));
        Case c = kind.make(draw, shape_index);
        dsl::Graph graph(kind.name, {c.layer});
        std::vector<Halide::Buffer<>> inputs;
        std::vector<std::vector<uint8_t>> input_bytes;
        for (const auto &in : graph.inputs()) {
            inputs.push_back(random_input(in.output(), uint32_t(draw(0, 1 << 30))));
            input_bytes.push_back(test::bytes_of(inputs.back()));
        }
        const std::vector<uint8_t> reference =
            test::bytes_of(algorithms::run_reference(graph, inputs)[0]);
        const std::string where =
            kind.name + " shape " + std::to_string(shape_index) + " (" + c.shape + ")";

        // The default schedule's result per target: the baseline every schedule must give.
        std::map<std::string, std::vector<uint8_t>> baseline;
        for (const char *name : kTargets) {
            const target::Target &target = target_named(name);
            c.layer.schedule() = schedules::default_schedule(
                c.layer, target, 0, codegen::dpu_weight_bytes(c.layer, target));
            std::string error = compile_and_run(graph, target, input_bytes, baseline[name]);
            ASSERT_EQ(error, "") << where << " on " << name << ", default schedule "
                                 << c.layer.schedule().to_string();
            ASSERT_EQ(difference(baseline[name], reference), "")
                << where << " on " << name << ": the default schedule "
                << c.layer.schedule().to_string() << " differs from the reference";
        }

        for (int i = first; i < first + kSchedulesPerShape && budget.runs(i); ++i, ++run) {
            const std::string target_name = kTargets[i % std::size(kTargets)];
            const target::Target &target = target_named(target_name);
            const uint32_t seed = seed_of(kind.name, "schedule", i);
            std::mt19937 rng(seed);
            c.layer.schedule() = codegen::random_schedule(graph, c.layer, target, rng, kind.engine);
            const dsl::Schedule &s = c.layer.schedule();
            auto describe = [&] {
                return where + " on " + target_name + ", schedule " + std::to_string(i) +
                       " (seed " + std::to_string(seed) + "; " + budget.reproduce(i) + "):\n  " +
                       s.to_string() + "\n" + s.to_json();
            };
            // Illegal schedules are the generator's bug, not the lowering's.
            try {
                codegen::resolve_loop_nest(graph, c.layer, target);
            } catch (const std::exception &e) {
                fail("random_schedule made an illegal schedule: " + std::string(e.what()) + "\n" +
                     describe());
                continue;
            }
            std::vector<uint8_t> output;
            std::string error = compile_and_run(graph, target, input_bytes, output);
            if (error.empty()) error = difference(output, baseline[target_name]);
            if (error.empty()) error = difference(output, reference);
            if (!error.empty()) fail(error + "\n" + describe());
        }
    }
    test::PropertyBudget::report(kind.name, run, "schedules", failures);
    EXPECT_EQ(failures, 0) << kind.name << ": " << failures << " of " << run
                           << " schedules failed (the first " << kPrinted << " are shown)";
}

INSTANTIATE_TEST_SUITE_P(Kinds, ScheduleProperty, ::testing::Range<size_t>(0, kinds().size()),
                         [](const ::testing::TestParamInfo<size_t> &info) {
                             return kinds()[info.param].name;
                         });

// ---- The generator itself ----------------------------------------------------------------

// Cheap without compiling: many schedules per kind and target resolve, stay within the task
// bound, are reproducible from their seed, survive JSON and their printed chain, and use every
// directive a single layer can have (compute_at needs a consumer: compute_at_property_test).
TEST(RandomSchedule, IsLegalBoundedReproducibleAndVaried) {
    std::set<std::string> used;
    std::set<std::string> modes;
    for (size_t k = 0; k < kinds().size(); ++k) {
        Draw draw(uint32_t(77 + k));
        Case c = kinds()[k].make(draw, 0);
        dsl::Graph graph("g", {c.layer});
        for (const char *name : {"vpu27", "vpu20"}) {
            const target::Target &target = target_named(name);
            for (uint32_t seed = 0; seed < 50; ++seed) {
                std::mt19937 rng(seed), again(seed);
                const dsl::Engine engine = kinds()[k].engine;
                dsl::Schedule s = codegen::random_schedule(graph, c.layer, target, rng, engine);
                ASSERT_EQ(s, codegen::random_schedule(graph, c.layer, target, again, engine));
                ASSERT_EQ(dsl::Schedule::from_json(s.to_json()), s);
                ASSERT_EQ(dsl::Schedule::parse(s.to_string()), s) << s.to_string();
                c.layer.schedule() = s;
                codegen::LoopNest nest;
                try {
                    nest = codegen::resolve_loop_nest(graph, c.layer, target);
                } catch (const std::exception &e) {
                    FAIL() << kinds()[k].name << " on " << name << " seed " << seed << ": "
                           << e.what() << "\n  " << s.to_string();
                }
                EXPECT_LE(nest.tasks().size(), 256u) << s.to_string();
                for (const dsl::Directive &d : s.directives()) {
                    used.insert(dsl::to_string(d.kind));
                    if (d.kind == dsl::Directive::Kind::OnDpu) modes.insert(d.name);
                    if (d.kind == dsl::Directive::Kind::Distribute)
                        used.insert(dsl::to_string(d.strategy));
                    if (d.kind == dsl::Directive::Kind::Split && d.factors.size() > 1)
                        used.insert("uneven split");
                }
            }
        }
    }
    for (const char *d :
         {"split", "tile", "reorder", "fuse", "store_in", "distribute", "workloads", "prefetch",
          "on_dpu", "on_shave", "vectorize", "unroll", "SOH", "SOK", "uneven split"})
        EXPECT_TRUE(used.count(d)) << d;
    // The compiler's choice and every int8 mode of both targets.
    for (const char *m : {"", "CUBOID_16x16", "CUBOID_8x16", "CUBOID_4x16", "VECTOR", "MATRIX"})
        EXPECT_TRUE(modes.count(m)) << "'" << m << "'";
}

} // namespace
