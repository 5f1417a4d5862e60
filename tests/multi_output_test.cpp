// Layers of several outputs: TopK's values and indices from one SHAVE kernel, read through
// tuple_element views. The reference is checked against a plain sort (ties in index order), and
// the device against the reference on both targets, with the kernel's outputs cut among the
// SHAVEs alike.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <numeric>
#include <random>

#include "algorithms/reference.h"
#include "algorithms/registry.h"
#include "codegen/check.h"
#include "dsl/graph_text.h"
#include "lowering_fixtures.h"
#include "vpu_target/blob_writer.h"
#include "vpu_target/verifier.h"

namespace vpuc {
namespace {

dsl::Layer topk(const std::string &name, const dsl::Layer &in, int64_t k, int64_t axis,
                int64_t largest) {
    dsl::Attrs a;
    a.set("k", k).set("axis", axis).set("largest", largest);
    return algorithms::layer_registry().build("topk", name, {in}, a);
}

// Values with many ties: u8 in [0, 6), f16 half of them from a pool of four.
Halide::Buffer<> tied_input(const dsl::TensorDesc &t, uint32_t seed) {
    Halide::Buffer<> b = algorithms::make_buffer(t);
    std::mt19937 rng(seed);
    if (t.type == dsl::ElemType::U8) {
        Halide::Buffer<uint8_t> u(b);
        u.for_each_value([&](uint8_t &v) { v = uint8_t(rng() % 6); });
    } else {
        const float pool[4] = {-1.5f, 0.0f, 0.25f, 3.0f};
        std::uniform_real_distribution<float> real(-4, 4);
        Halide::Buffer<Halide::float16_t> h(b);
        h.for_each_value([&](Halide::float16_t &v) {
            v = Halide::float16_t(rng() % 2 ? pool[rng() % 4] : real(rng));
        });
    }
    return b;
}

double value_at(const Halide::Buffer<> &b, int c, int x, int y) {
    if (b.type() == Halide::UInt(8)) return Halide::Buffer<uint8_t>(b)(c, x, y);
    return double(Halide::Buffer<Halide::float16_t>(b)(c, x, y));
}

TEST(TopK, TheReferenceSortsAlongEveryAxisTiesInIndexOrder) {
    for (const dsl::ElemType type : {dsl::ElemType::U8, dsl::ElemType::F16})
        for (int64_t axis : {1, 2, 3})
            for (int64_t largest : {1, 0}) {
                const dsl::Layer in = dsl::Layer::input(test::activation("in", 13, 7, 5, type));
                const int64_t k = 4;
                const dsl::Layer best = topk("best", in, k, axis, largest);
                const dsl::Graph g("topk", dsl::output_layers(best));
                const Halide::Buffer<> x = tied_input(in.output(), uint32_t(axis * 2 + largest));
                const auto out = algorithms::run_reference(g, {x});
                ASSERT_EQ(out.size(), 2u);
                const Halide::Buffer<int32_t> indices(out[1]);
                const int dim = axis == 1 ? 0 : axis == 3 ? 1 : 2; // (c, x, y)
                const int along = x.dim(dim).extent();
                std::string where = std::string(dsl::to_string(type)) + " axis " +
                                    std::to_string(axis) + " largest " + std::to_string(largest);
                out[0].for_each_element([&](int c, int px, int py) {
                    const int pos[3] = {c, px, py};
                    const int p = pos[dim];
                    // The elements along the axis through this point, best first, stable.
                    std::vector<int> order(static_cast<size_t>(along));
                    std::iota(order.begin(), order.end(), 0);
                    int at[3] = {c, px, py};
                    auto value = [&](int i) {
                        at[dim] = i;
                        return value_at(x, at[0], at[1], at[2]);
                    };
                    std::stable_sort(order.begin(), order.end(), [&](int a, int b) {
                        return largest ? value(a) > value(b) : value(a) < value(b);
                    });
                    EXPECT_EQ(indices(c, px, py), order[size_t(p)])
                        << where << " at " << c << "," << px << "," << py;
                    EXPECT_EQ(value_at(out[0], c, px, py), value(order[size_t(p)])) << where;
                });
            }
}

// Both outputs bit-exact on both targets, each split among a tile's SHAVEs (the kernel's
// outputs cut alike), along each axis; values feed a DPU layer and indices are a graph output.
TEST(TopK, OneKernelComputesValuesAndIndicesOnEveryTarget) {
    for (const dsl::ElemType type : {dsl::ElemType::U8, dsl::ElemType::F16})
        for (int64_t axis : {1, 2, 3}) {
            const dsl::Layer in = dsl::Layer::input(test::activation("in", 21, 9, 6, type));
            const dsl::Layer best = topk("best", in, 5, axis, 1);
            auto &registry = algorithms::layer_registry();
            const dsl::Layer values = registry.build("tuple_element", "values", {best},
                                                     dsl::Attrs().set("index", int64_t(0)));
            const dsl::Layer indices = registry.build("tuple_element", "indices", {best},
                                                      dsl::Attrs().set("index", int64_t(1)));
            algorithms::PoolParams pool;
            pool.kernel_w = pool.kernel_h = 2;
            const dsl::Layer pooled = algorithms::max_pool("pooled", values, pool);
            const dsl::Graph g("topk_net", {pooled, indices});
            for (const char *target : {"vpu27", "vpu20"}) {
                codegen::CheckOptions options;
                options.inputs = {tied_input(in.output(), 3)};
                const codegen::CheckResult r =
                    codegen::check_against_reference(g, target::load_target(target), options);
                EXPECT_TRUE(r.ok())
                    << dsl::to_string(type) << " axis " << axis << " on " << target << "\n"
                    << r.report();
                // One kernel of two outputs; the views run nothing but the indices' copy into
                // the output section.
                const blob::Blob &b = *blob::GetBlob(r.blob.data());
                int shave_tasks = 0, two_output_tasks = 0;
                for (const auto *queue : *b.queues())
                    for (const auto *task : *queue->tasks()) {
                        if (const auto *shave = task->kind_as_ShaveTask()) {
                            ++shave_tasks;
                            two_output_tasks += shave->args()->size() == 3 && shave->shaves() > 1;
                        }
                        EXPECT_NE(task->layer()->str(), "values") << target;
                    }
                EXPECT_EQ(two_output_tasks, shave_tasks) << target;
                EXPECT_GT(shave_tasks, 0) << target;
                // Vectors of the widest output, the i32 indices: 4 lanes of 128 bits.
                ASSERT_EQ(b.kernels()->size(), 1u) << target;
                EXPECT_EQ(b.kernels()->Get(0)->vector_lanes(), 4u) << target;
            }
        }
}

TEST(TopK, ErrorsNameTheLayer) {
    const dsl::Layer in = dsl::Layer::input(test::activation("in", 16, 8, 6));
    dsl::Layer best = topk("best", in, 3, 1, 1);
    EXPECT_EQ(best.outputs().size(), 2u);
    EXPECT_EQ(best.outputs()[1].name, "best#1");
    EXPECT_EQ(best.outputs()[1].type, dsl::ElemType::I32);
    auto message = [](auto &&f) {
        try {
            f();
        } catch (const Error &e) {
            return std::string(e.what());
        }
        return std::string("no error");
    };
    EXPECT_NE(message([&] { dsl::Graph("g", {best}); }).find("output 'best' has 2 outputs"),
              std::string::npos);
    const dsl::Layer reads_tuple = algorithms::relu("r", best);
    EXPECT_NE(message([&] {
                  dsl::Graph("g", {reads_tuple});
              }).find("reads 'best', which has 2 outputs: read one through a tuple_element"),
              std::string::npos);
    EXPECT_NE(message([&] {
                  dsl::LayerRegistry::output_of("e", best, 2);
              }).find("'best' has no output 2"),
              std::string::npos);
    EXPECT_NE(message([&] { topk("big", in, 17, 1, 1); }).find("k = 17 is more than the 16"),
              std::string::npos);
    const dsl::Graph g("g", dsl::output_layers(best));
    best.schedule().store_in(dsl::MemoryLevel::CMX);
    EXPECT_NE(message([&] {
                  codegen::lower(g, target::load_target("vpu27"));
              }).find("layer 'best' has 2 outputs: it runs on the SHAVEs, computed at root"),
              std::string::npos);
    best.schedule() = {};
    dsl::Layer values = dsl::LayerRegistry::output_of("values", best, 0);
    values.schedule().store_in(dsl::MemoryLevel::CMX);
    const dsl::Graph kept("kept", {algorithms::relu("r", values)});
    EXPECT_NE(message([&] {
                  codegen::lower(kept, target::load_target("vpu27"));
              }).find("layer 'values' (tuple_element) is a view of an output of 'best' in DDR"),
              std::string::npos);
    // The text lists both tensors; one alone does not read back.
    std::string text = dsl::print_graph(g);
    const std::string both = ": 1x3x6x8 u8 NHWC q(0.0500000007,120), 1x3x6x8 i32 NHWC";
    ASSERT_NE(text.find(both), std::string::npos) << text;
    text.replace(text.find(both), both.size(), ": 1x3x6x8 u8 NHWC q(0.0500000007,120)");
    EXPECT_NE(message([&] {
                  dsl::read_graph(text, algorithms::layer_registry());
              }).find("the text says 1x3x6x8 u8"),
              std::string::npos);
}

// The verifier refuses a task whose two outputs cover different regions: the simulator cuts
// them among the SHAVEs alike.
TEST(TopK, TheVerifierRefusesOutputsOfDifferentRegions) {
    const dsl::Layer in = dsl::Layer::input(test::activation("in", 16, 8, 6));
    const dsl::Graph g("g", dsl::output_layers(topk("best", in, 3, 1, 1)));
    const target::Target target = target::load_target("vpu27");
    std::unique_ptr<blob::BlobT> b = blob::UnPackBlob(codegen::lower(g, target).data());
    bool changed = false;
    for (auto &queue : b->queues)
        for (auto &task : queue->tasks)
            if (auto *shave = task->kind.AsShaveTask(); shave && !changed) {
                shave->args.back()->mins.at(2) += 1;
                changed = true;
            }
    ASSERT_TRUE(changed);
    const std::vector<uint8_t> bytes = blob::pack(*b);
    try {
        blob::verify(bytes, target);
        FAIL() << "expected a BlobError";
    } catch (const blob::BlobError &e) {
        // The kernel's output buffers are Halide's: "out.1", or "out$N.1" once a Func called
        // "out" exists in the process.
        const std::string what = e.what();
        EXPECT_NE(what.find("(SHAVE queue tile 0): args[2] 'out"), std::string::npos) << what;
        EXPECT_NE(what.find(".1': an output covering another region than the kernel's first "
                            "output"),
                  std::string::npos)
            << what;
    }
}

} // namespace
} // namespace vpuc
