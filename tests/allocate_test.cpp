// CMX allocation: consecutive tasks rotate through CMX, so reusing memory never makes a task
// wait for its predecessor's store, and what does get reused waits for its previous users.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>

#include "lowering_fixtures.h"
#include "pass_fixtures.h"

using namespace vpuc;
using namespace vpuc::test;

namespace {

// The passes of lower() up to and including allocate_cmx.
codegen::LoweringState allocated(const dsl::Graph &graph, const target::Target &target) {
    codegen::LoweringState s(graph, target);
    run_through_allocate_cmx(s);
    return s;
}

// vpu27 with 24 KB of CMX, and a 3x3 conv in tasks of 4 rows there: room for a few tasks'
// buffers only, so memory is reused.
target::Target tight_vpu27() {
    target::Target small = target::load_target("vpu27");
    small.cmx_usable_bytes = 24 * 1024;
    return small;
}

dsl::Graph rows_of_four() {
    dsl::Layer in = dsl::Layer::input(activation("in", 32, 16, 32));
    dsl::Layer conv = conv3x3("conv", in, 32, 32);
    conv.schedule().split("y", "yo", "yi", 4).prefetch(1).on_dpu();
    return dsl::Graph("small", {conv});
}

int task_named(const codegen::Program &p, const std::string &prefix) {
    for (size_t t = 0; t < p.tasks.size(); ++t)
        if (p.tasks[t].name.rfind(prefix, 0) == 0) return int(t);
    ADD_FAILURE() << "no task " << prefix;
    return -1;
}

TEST(Allocate, ADpuTaskNeverWaitsForThePreviousStore) {
    dsl::Layer in = dsl::Layer::input(activation("in", 64, 28, 32));
    dsl::Layer conv = conv3x3("conv", in, 64, 31);
    conv.schedule().split("y", "yo", "yi", 8).prefetch(1).on_dpu();
    const dsl::Graph graph("rows", {conv});
    const codegen::LoweringState s = allocated(graph, target::load_target("vpu27"));
    const codegen::Program &p = s.program;
    for (int row = 8; row < 32; row += 8) {
        const std::string at = "c[0,64) x[0,28) y[" + std::to_string(row) + ",";
        const std::string before = "c[0,64) x[0,28) y[" + std::to_string(row - 8) + ",";
        const int dpu = task_named(p, "conv.dpu.0." + at);
        const int previous_store = task_named(p, "conv.store.0." + before);
        const auto &deps = p.tasks[size_t(dpu)].deps;
        EXPECT_EQ(std::count(deps.begin(), deps.end(), previous_store), 0)
            << p.tasks[size_t(dpu)].name << " waits for " << p.tasks[size_t(previous_store)].name;
    }
    compile_and_check(graph, "vpu27");
}

// With room for only a few tasks' buffers, memory is reused; the write-after-read
// dependencies keep every new writer after the old readers, so the results stay exact (the
// simulator computes a task when it starts: a writer started early would change them).
TEST(Allocate, ReusedMemoryKeepsResultsExact) {
    const target::Target small = tight_vpu27();
    const dsl::Graph graph = rows_of_four();
    const codegen::LoweringState s = allocated(graph, small);
    const codegen::Program &p = s.program;
    int reused = 0;
    for (size_t a = 0; a < p.buffers.size(); ++a)
        for (size_t b = a + 1; b < p.buffers.size(); ++b) {
            const codegen::BufferDecl &x = p.buffers[a], &y = p.buffers[b];
            if (x.space != blob::MemSpace::Cmx || y.space != blob::MemSpace::Cmx) continue;
            if (x.offset == codegen::kUnallocated || y.offset == codegen::kUnallocated) continue;
            if (x.offset + x.bytes <= y.offset || y.offset + y.bytes <= x.offset) continue;
            ++reused;
        }
    EXPECT_GT(reused, 0);
    compile_and_check(graph, small);
}

int tasks_named(const codegen::Program &p, const std::string &part) {
    int n = 0;
    for (const auto &t : p.tasks) n += t.name.find(part) != std::string::npos;
    return n;
}

// A dependency lost after allocation is a data race, and the blob's verification names it.
TEST(Allocate, ALostWriteAfterReadDependencyIsARace) {
    const target::Target small = tight_vpu27();
    const dsl::Graph graph = rows_of_four();
    codegen::LoweringState s = allocated(graph, small);
    for (auto &task : s.program.tasks)
        if (task.name.find(".load") != std::string::npos) task.deps.clear();
    codegen::allocate_ddr(s);
    codegen::reduce_dependencies(s);
    codegen::assign_barriers(s);
    codegen::map_physical_barriers(s);
    codegen::assemble(s);
    try {
        codegen::verify_blob(s);
        FAIL() << "no race found";
    } catch (const codegen::LoweringError &e) {
        const std::string what = e.what();
        EXPECT_EQ(
            what.rfind("the assembled blob does not verify:\ndata races: tasks touch the same "
                       "bytes, one writing, and neither waits for the other (a missing "
                       "dependency; results would depend on timing):\n'conv.",
                       0),
            0u)
            << what;
        EXPECT_NE(what.find("writes CMX of tile 0+"), std::string::npos) << what;
    }
}

// e = a + b of two 1x1 convolutions from 64 channels to 16, both computed per half of e:
// while b computes its half from four times as many bytes, a's half waits in CMX for e.
dsl::Graph two_branches() {
    dsl::Layer in = dsl::Layer::input(activation("in", 64, 32, 32));
    algorithms::Conv2dParams one_by_one;
    dsl::Layer a = algorithms::conv2d("a", in, weights(64, 1, 16, 41), one_by_one);
    dsl::Layer b = algorithms::conv2d("b", in, weights(64, 1, 16, 42), one_by_one);
    const auto q =
        algorithms::quant_eltwise(algorithms::EltwiseOp::Add, a.output().quant, b.output().quant,
                                  dsl::ElemType::U8, dsl::Quant::per_tensor(0.1f, 5));
    dsl::Layer e = algorithms::eltwise("e", algorithms::EltwiseOp::Add, a, b, {}, q);
    e.schedule().split("y", "yo", "yi", 16).on_dpu();
    a.schedule().compute_at("e", "yo").on_dpu();
    b.schedule().compute_at("e", "yo").on_dpu();
    return dsl::Graph("two_branches", {e});
}

// When CMX runs out, live buffers the task at hand does not use leave CMX: computed data is
// stored to DDR and loaded back, weights are copied from the constants again.
TEST(Allocate, SpillsWhenCmxRunsOutAndResultsStayExact) {
    target::Target small = target::load_target("vpu27");
    small.cmx_usable_bytes = 44 * 1024; // b's half needs 50 KB with a's
    const dsl::Graph graph = two_branches();
    const codegen::Program p = allocated(graph, small).program;
    EXPECT_GT(tasks_named(p, ".spill."), 0);
    EXPECT_GT(tasks_named(p, ".reload."), 0);
    EXPECT_EQ(tasks_named(p, ".spill."), tasks_named(p, ".reload."));
    EXPECT_GT(tasks_named(p, ".refetch."), 0);
    compile_and_check(graph, small);
    // With room for everything, nothing moves.
    const codegen::Program roomy = allocated(graph, target::load_target("vpu27")).program;
    EXPECT_EQ(tasks_named(roomy, ".spill.") + tasks_named(roomy, ".refetch."), 0);
}

// What a task uses at once must fit: nothing can be evicted, and the error says which task
// holds which buffers.
TEST(Allocate, ErrorNamesTheTaskAndItsBuffersWhenNothingCanMove) {
    target::Target small = target::load_target("vpu27");
    small.cmx_usable_bytes = 60 * 1024;
    dsl::Layer in = dsl::Layer::input(activation("in", 32, 32, 32));
    dsl::Layer conv = conv3x3("conv", in, 32, 8);
    conv.schedule().on_dpu();
    try {
        allocated(dsl::Graph("one_task", {conv}), small);
        FAIL() << "allocated";
    } catch (const codegen::LoweringError &e) {
        EXPECT_STREQ(e.what(), "buffer 'conv.out' (32768 bytes) does not fit in CMX of tile 0: "
                               "42496 of 61440 usable bytes are live, all used by task "
                               "'conv.dpu.0.c[0,32) x[0,32) y[0,32)' (conv.in0 32768 B, "
                               "conv.weights 9728 B); split the layer's task loops further, or "
                               "prefetch less");
    }
}

} // namespace

namespace {

// An empty buffer cannot be placed (it would take no memory at all): allocation refuses it by
// name rather than handing it to the allocator.
TEST(Allocate, AnEmptyBufferIsAnErrorNamingIt) {
    const dsl::Graph graph = rows_of_four();
    const target::Target target = target::load_target("vpu27");
    codegen::LoweringState s(graph, target);
    test::run_through_task_program(s);
    auto &buffers = s.program.buffers;
    auto input = std::find_if(buffers.begin(), buffers.end(), [](const codegen::BufferDecl &b) {
        return b.space == blob::MemSpace::Cmx && b.name.rfind("conv.in0", 0) == 0;
    });
    ASSERT_NE(input, buffers.end());
    input->bytes = 0;
    try {
        codegen::allocate_cmx(s);
        FAIL() << "allocated";
    } catch (const codegen::LoweringError &e) {
        const std::string what = e.what();
        EXPECT_EQ(what.rfind("allocation: buffer '" + input->name + "' (used by task 'conv.", 0),
                  0u)
            << what;
        EXPECT_NE(what.find("') has no bytes"), std::string::npos) << what;
    }
}

} // namespace
