// compute_at changes speed, never results: chains of two or three layers (convolutions, max
// pools, sigmoids) whose producers get random schedules drawn from the schedule space
// (codegen/random_schedule.h) that their consumer's schedule leaves them, mostly computed at a
// random task loop of their consumer, with splits (uneven ones too), tiles and fuses of their
// own, or at root, now and then kept in CMX (store_in(CMX), HKSwitch) and broadcast to the
// tiles, under random consumer schedules, give the CPU reference's bytes on both targets. The
// same chains with CMX cut to a few kilobytes spill, and still give them.
//
// Each test runs 30 chains, or as many as VPUC_PROPERTY_SCHEDULES or VPUC_PROPERTY_MINUTES
// ask (property_budget.h; the two tests are the kinds the time is split between); seeds are
// fixed. A failure prints the seed and every layer's schedule.
#include <gtest/gtest.h>

#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "codegen/loop_nest.h"
#include "codegen/random_schedule.h"
#include "lowering_fixtures.h"
#include "property_budget.h"

using namespace vpuc;
using vpuc::test::bytes_of;

namespace {

constexpr int kDefaultChains = 30;
constexpr size_t kKinds = 2; // the two tests below

int draw(std::mt19937 &rng, int lo, int hi) {
    return lo + int(rng() % uint32_t(hi - lo + 1));
}

algorithms::QuantWeights weights(int ic, int k, int oc, std::mt19937 &rng) {
    algorithms::QuantWeights w;
    w.weights = Halide::Buffer<int8_t>(ic, k, k, oc);
    w.weights.for_each_value([&](int8_t &v) { v = int8_t(draw(rng, -60, 60)); });
    for (int c = 0; c < oc; ++c) w.bias.push_back(draw(rng, -1500, 1500));
    w.requant = {algorithms::fixed_point(0.004)};
    w.output_type = dsl::ElemType::U8;
    w.output_quant = dsl::Quant::per_tensor(0.05f, 8);
    return w;
}

// A 3x3 (pad 1) or 1x1 conv with ReLU, a 3x3 max pool (stride 1, pad 1), or a sigmoid (a
// SHAVE kernel).
dsl::Layer random_layer(const std::string &name, const dsl::Layer &in, std::mt19937 &rng) {
    const int ic = int(in.output().shape[dsl::dims::C]);
    switch (rng() % 4) {
    case 3:
        return algorithms::sigmoid(name, in);
    case 0: {
        algorithms::PoolParams pool;
        pool.kernel_w = pool.kernel_h = 3;
        pool.pad_left = pool.pad_right = pool.pad_top = pool.pad_bottom = 1;
        return algorithms::max_pool(name, in, pool);
    }
    case 1: {
        algorithms::Conv2dParams p;
        p.activation = algorithms::Activation::relu();
        return algorithms::conv2d(name, in, weights(ic, 1, 8 * draw(rng, 1, 4), rng), p);
    }
    default: {
        algorithms::Conv2dParams p;
        p.pad_left = p.pad_right = p.pad_top = p.pad_bottom = 1;
        p.activation = algorithms::Activation::relu();
        return algorithms::conv2d(name, in, weights(ic, 3, 8 * draw(rng, 1, 4), rng), p);
    }
    }
}

// A random chain of two or three layers: the last computed at root with a random schedule
// that has a task loop, each earlier one with a random schedule drawn from the space its
// consumer's schedule leaves it, which mostly computes it at one of the consumer's task loops.
struct Chain {
    dsl::TensorDesc input;
    std::vector<dsl::Layer> layers;
    std::string schedules; // for failure messages
    int computed_at = 0;   // layers computed at their consumer
};

Chain random_chain(std::mt19937 &rng, const target::Target &target) {
    Chain c;
    c.input.name = "in";
    // Channels in multiples of 8: whole groups of 16, padded ones, and channel-major
    // convolutions (8 input channels).
    c.input.shape = dsl::Shape{1, 8 * draw(rng, 1, 4), draw(rng, 5, 14), draw(rng, 5, 14)};
    c.input.type = dsl::ElemType::U8;
    c.input.quant = dsl::Quant::per_tensor(0.05f, 120);
    c.input.order = dsl::DimsOrder::NHWC();
    dsl::Layer in = dsl::Layer::input(c.input);
    std::vector<dsl::Layer> &chain = c.layers;
    chain = {random_layer("l0", in, rng)};
    const int length = draw(rng, 2, 3);
    while (int(chain.size()) < length)
        chain.push_back(random_layer("l" + std::to_string(chain.size()), chain.back(), rng));
    const dsl::Graph graph("chain", {chain.back()});

    // A random schedule with a task loop; else (a few draws without one) rows split in tasks.
    for (int attempt = 0; attempt < 8; ++attempt) {
        chain.back().schedule() = codegen::random_schedule(graph, chain.back(), target, rng);
        if (!codegen::resolve_loop_nest(graph, chain.back(), target).task_loop_names().empty())
            break;
        chain.back().schedule() = dsl::Schedule().split("y", "ry", "ryi", draw(rng, 1, 4));
    }
    for (int l = int(chain.size()) - 2; l >= 0; --l) {
        dsl::Layer &layer = chain[size_t(l)];
        layer.schedule() = codegen::random_schedule(graph, layer, target, rng);
        c.computed_at += !codegen::resolve_loop_nest(graph, layer, target).compute_root;
    }
    for (const dsl::Layer &l : chain)
        c.schedules += "  " + l.name() + ": " + l.schedule().to_string() + "\n";
    return c;
}

// Compiles and runs the chain on random input; the IR after allocate_cmx goes to `ir`.
bool matches_reference(const Chain &c, const target::Target &target, std::mt19937 &rng,
                       std::string *ir = nullptr) {
    const dsl::Graph graph("chain", {c.layers.back()});
    Halide::Buffer<> input = algorithms::make_buffer(c.input);
    Halide::Buffer<uint8_t> typed(input);
    typed.for_each_value([&](uint8_t &v) { v = uint8_t(rng()); });
    const auto expected = algorithms::run_reference(graph, {input});
    codegen::LowerOptions options;
    std::ostringstream log;
    if (ir) {
        options.log = &log;
        options.dump_after = "allocate_cmx";
    }
    sim::Simulator simulator(target, codegen::lower(graph, target, options));
    if (ir) *ir = log.str();
    return simulator.run({bytes_of(input)}).outputs.at(0) == bytes_of(expected.at(0));
}

TEST(ComputeAtProperty, RandomFusedChainsGiveTheReferenceResult) {
    const test::PropertyBudget budget(kDefaultChains, kKinds);
    int n = 0, failures = 0, computed_at = 0;
    for (int i = 0; budget.runs(i); ++i, ++n) {
        const uint32_t seed = 9000 + uint32_t(i);
        std::mt19937 rng(seed);
        const std::string target_name = i % 2 ? "vpu20" : "vpu27";
        const target::Target target = target::load_target(target_name);
        const Chain chain = random_chain(rng, target);
        computed_at += chain.computed_at;
        try {
            if (!matches_reference(chain, target, rng)) {
                ADD_FAILURE() << "seed " << seed << " on " << target_name
                              << ": result differs from the reference (" << budget.reproduce(i)
                              << ")\n"
                              << chain.schedules;
                ++failures;
            }
        } catch (const std::exception &e) {
            ADD_FAILURE() << "seed " << seed << " on " << target_name << " (" << budget.reproduce(i)
                          << "): " << e.what() << "\n"
                          << chain.schedules;
            ++failures;
        }
    }
    test::PropertyBudget::report("compute_at chains", n, "chains", failures);
    EXPECT_EQ(failures, 0) << failures << " of " << n << " chains failed";
    // Most producers go into their consumer.
    EXPECT_GT(computed_at, n / 2);
}

// With CMX cut to a few kilobytes, chains spill: the results stay the reference's, or the
// lowering says which buffer does not fit; never a wrong result.
TEST(ComputeAtProperty, ChainsThatSpillGiveTheReferenceResult) {
    const test::PropertyBudget budget(kDefaultChains, kKinds);
    int n = 0, failures = 0, spilled = 0;
    for (int i = 0; budget.runs(i); ++i, ++n) {
        const uint32_t seed = 9500 + uint32_t(i);
        std::mt19937 rng(seed);
        target::Target target = target::load_target(i % 2 ? "vpu20" : "vpu27");
        target.cmx_usable_bytes = uint64_t(draw(rng, 3, 10)) * 1024;
        const Chain chain = random_chain(rng, target);
        std::string ir;
        try {
            if (!matches_reference(chain, target, rng, &ir)) {
                ADD_FAILURE() << "seed " << seed << " on " << target.name << " with "
                              << target.cmx_usable_bytes << " B of CMX: result differs ("
                              << budget.reproduce(i) << ")\n"
                              << chain.schedules;
                ++failures;
            }
            spilled += ir.find(".spill.") != std::string::npos ||
                       ir.find(".refetch.") != std::string::npos;
        } catch (const codegen::LoweringError &e) {
            if (std::string(e.what()).find("does not fit in CMX") == std::string::npos) {
                ADD_FAILURE() << "seed " << seed << " (" << budget.reproduce(i) << "): " << e.what()
                              << "\n"
                              << chain.schedules;
                ++failures;
            }
        }
    }
    test::PropertyBudget::report("compute_at chains on small CMX", n, "chains", failures);
    EXPECT_EQ(failures, 0) << failures << " of " << n << " chains failed";
    EXPECT_GT(spilled, 0);
}

} // namespace
