// Lesson 8: a layer the library does not have, added in one place.
//
// In a vendor compiler, enabling one software layer takes a dozen steps: an operation in each
// dialect, table-gen files, a parser, a serializer, a graph schema, a kernel binding. In vpuc a
// layer is one entry of the layer registry: its attributes and an algorithm (a Halide
// definition). Everything else reads the registry: attribute checking, the compiler, which
// runs a layer the DPU cannot as a SHAVE kernel (lesson 7), the CPU reference, `vpuc layers`,
// the registry's tests, and the ONNX importer's op table.
//
// This lesson adds CTC greedy decoding, the last step of a speech or text recognizer: per time
// step the most likely class, repeats merged, blanks dropped, the labels moved to the front and
// the rest filled with -1. It registers the layer, builds it through the registry, compiles it
// for both targets and checks the simulator's result against the reference and against a
// decoder written as a plain loop. As a file of algorithms/layers/, with a function
// register_layer_NAME instead of main's add(), the same entry would be built into vpuc itself
// (docs/adding-a-layer.md).
//
// Build and run:  ninja -C build lesson_08_a_new_layer_in_one_file
//                 ./build/tutorials/lesson_08_a_new_layer_in_one_file

#include <Halide.h>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "algorithms/reference.h"
#include "algorithms/registry.h"
#include "codegen/lower.h"
#include "dsl/graph.h"
#include "vpu_target/simulator.h"
#include "vpu_target/target.h"

using namespace vpuc;

namespace {

// ---- The layer -----------------------------------------------------------------------------
//
// Its input is the recognizer's scores, one image of shape 1 x classes x 1 x steps (classes
// innermost in memory: NHWC); its output the labels, 1 x 1 x 1 x steps in i32.
dsl::Layer build_ctc_greedy_decode(const std::string &name, const std::vector<dsl::Layer> &inputs,
                                   const dsl::Attrs &attrs) {
    const dsl::TensorDesc &in = inputs.at(0).output();
    const std::string what = "ctc_greedy_decode '" + name + "'";
    if (in.shape.rank() != 4 || in.shape[dsl::dims::N] != 1 || in.shape[dsl::dims::H] != 1 ||
        (in.type != dsl::ElemType::F16 && in.type != dsl::ElemType::F32))
        throw dsl::LayerError(what + ": takes f16 or f32 scores of shape 1 x classes x 1 x steps");
    const int classes = int(in.shape[dsl::dims::C]), steps = int(in.shape[dsl::dims::W]);
    int blank = int(attrs.get_int("blank"));
    if (blank < 0) blank += classes;
    if (blank < 0 || blank >= classes)
        throw dsl::LayerError(what + ": blank class " + std::to_string(attrs.get_int("blank")) +
                              " is not one of the " + std::to_string(classes) + " classes");

    dsl::TensorDesc out = in;
    out.name = name;
    out.shape = dsl::Shape{1, 1, 1, steps};
    out.type = dsl::ElemType::I32;
    out.order = dsl::DimsOrder::NCHW();

    // Halide's coordinates (c, x, y) are the device's C, W and H: the class, the time step and 0
    // for the input; for the output x is the label's position. Every stage is pure, so the
    // compiler sees a function from scores to labels, and the order of the loops is the
    // schedule's business.
    dsl::Algorithm algorithm = [=](const std::vector<Halide::Func> &funcs) {
        const auto &v = dsl::act_vars();
        const Halide::Func &scores = funcs.at(0);
        // The most likely class at each step (the first of equal scores).
        Halide::RDom k(0, classes, name + "_k");
        Halide::Func best(name + "_best");
        best(v.c, v.x, v.y) =
            Halide::cast<int>(Halide::argmax(k, Halide::cast<float>(scores(k, v.x, v.y)))[0]);
        // A step is kept when its class is not blank and differs from the step before.
        Halide::Func kept(name + "_kept");
        const Halide::Expr previous = best(v.c, Halide::max(v.x - 1, 0), v.y);
        kept(v.c, v.x, v.y) =
            best(v.c, v.x, v.y) != blank && (v.x == 0 || best(v.c, v.x, v.y) != previous);
        // How many steps up to this one are kept: its label's position plus one.
        Halide::RDom r(0, steps, name + "_r");
        Halide::Func count(name + "_count");
        count(v.c, v.x, v.y) = Halide::sum(Halide::select(r.x <= v.x && kept(v.c, r.x, v.y), 1, 0));
        // Position x holds the label of the one kept step counted x + 1, or -1 when fewer
        // steps are kept.
        Halide::RDom s(0, steps, name + "_s");
        Halide::Func labels(name);
        labels(v.c, v.x, v.y) =
            Halide::sum(Halide::select(kept(v.c, s.x, v.y) && count(v.c, s.x, v.y) == v.x + 1,
                                       best(v.c, s.x, v.y) + 1, 0)) -
            1;
        return labels;
    };
    return dsl::Layer::make("ctc_greedy_decode", out, inputs, algorithm);
}

dsl::LayerDef ctc_greedy_decode_def() {
    dsl::LayerDef def;
    def.op = "ctc_greedy_decode";
    def.doc = "CTC greedy decoding: best class per step, repeats merged, blanks dropped (SHAVE)";
    def.inputs = {"scores"};
    def.attrs = {{"blank",
                  dsl::AttrType::Int,
                  int64_t(-1),
                  "the blank class; negative counts from the last",
                  {}}};
    def.build = build_ctc_greedy_decode;
    // Every label reads every step: a kernel computes the whole row.
    def.unsplittable_dims = [](const dsl::Layer &) { return std::vector<dsl::Dim>{dsl::dims::W}; };
    return def;
}

// ---- An independent decoder, as a plain loop -------------------------------------------------
std::vector<int32_t> decode_by_hand(const std::vector<float> &scores, int classes, int steps,
                                    int blank) {
    std::vector<int32_t> labels;
    int previous = -1;
    for (int t = 0; t < steps; ++t) {
        int best = 0;
        for (int c = 1; c < classes; ++c)
            if (scores[size_t(t * classes + c)] > scores[size_t(t * classes + best)]) best = c;
        if (best != blank && best != previous) labels.push_back(best);
        previous = best;
    }
    labels.resize(size_t(steps), -1);
    return labels;
}

std::vector<uint8_t> bytes_of(const Halide::Buffer<> &b) {
    const auto *p = static_cast<const uint8_t *>(b.raw_buffer()->host);
    return std::vector<uint8_t>(p, p + b.size_in_bytes());
}

} // namespace

int main() {
    // ---- Registering ---------------------------------------------------------------------------
    //
    // From here on the registry knows the op: build() checks the attributes against the entry
    // (an unknown one, or a wrong type, is an error naming the layer) and fills in defaults.
    dsl::LayerRegistry &registry = algorithms::layer_registry();
    registry.add(ctc_greedy_decode_def());
    const dsl::LayerDef &def = registry.at("ctc_greedy_decode");
    std::printf("registered %s: %s\n", def.op.c_str(), def.doc.c_str());
    try {
        dsl::Attrs wrong;
        wrong.set("blank_class", int64_t(0));
        registry.complete("ctc_greedy_decode", "decode", wrong);
        std::printf("an unknown attribute was accepted\n");
        return 1;
    } catch (const dsl::AttrError &e) {
        std::printf("an unknown attribute: %s\n\n", e.what());
    }

    // ---- Data ----------------------------------------------------------------------------------
    //
    // 37 steps over 11 classes (blank: the last). A path of labels, with repeats and blanks as
    // a recognizer emits them, scores 3 above random noise at each step, so that the decoded
    // labels are the path's, merged; the noise alone wins where the path's margin is small.
    const int classes = 11, steps = 37;
    dsl::TensorDesc scores_desc;
    scores_desc.name = "scores";
    scores_desc.shape = dsl::Shape{1, classes, 1, steps};
    scores_desc.type = dsl::ElemType::F16;
    scores_desc.order = dsl::DimsOrder::NHWC();
    const dsl::Layer scores = dsl::Layer::input(scores_desc);

    std::mt19937 rng(8);
    std::uniform_real_distribution<float> noise(-2.0f, 2.0f);
    std::vector<float> values(size_t(classes * steps));
    int path_class = 0;
    for (int t = 0; t < steps; ++t) {
        if (rng() % 3 == 0) path_class = int(rng() % unsigned(classes));
        for (int c = 0; c < classes; ++c) {
            // Rounded to fp16 here, so that the loop decodes what the device reads.
            const float x = noise(rng) + (c == path_class ? 3.0f : 0.0f);
            values[size_t(t * classes + c)] = float(Halide::float16_t(x));
        }
    }
    Halide::Buffer<Halide::float16_t> input = algorithms::make_buffer(scores_desc);
    for (int t = 0; t < steps; ++t)
        for (int c = 0; c < classes; ++c)
            input(c, t, 0, 0) = Halide::float16_t(values[size_t(t * classes + c)]);
    const std::vector<int32_t> by_hand = decode_by_hand(values, classes, steps, classes - 1);
    std::printf("decoded by hand:");
    for (int32_t label : by_hand) std::printf(" %d", label);
    std::printf("\n");

    // ---- Compiling and running -----------------------------------------------------------------
    //
    // The layer is built like any library layer. Without a schedule the compiler gives it the
    // default: the DPU cannot run it, so it becomes a SHAVE kernel.
    int failures = 0;
    for (const char *target_name : {"vpu27", "vpu20"}) {
        const target::Target target = target::load_target(target_name);
        const dsl::Layer decode = registry.build("ctc_greedy_decode", "decode", {scores}, {});
        const dsl::Graph graph("ctc", {decode});
        const std::vector<uint8_t> reference =
            bytes_of(algorithms::run_reference(graph, {input}).at(0));
        sim::Simulator simulator(target, codegen::lower(graph, target));
        sim::RunResult result = simulator.run({bytes_of(input)});
        const std::vector<uint8_t> &bytes = result.outputs.at(0);
        std::vector<int32_t> labels(bytes.size() / sizeof(int32_t));
        std::memcpy(labels.data(), bytes.data(), labels.size() * sizeof(int32_t));
        const bool same_as_reference = result.outputs.at(0) == reference;
        const bool same_as_loop = labels == by_hand;
        failures += !same_as_reference + !same_as_loop;
        std::printf("%s: %.2f us on the SHAVEs; %s the reference, %s the loop\n", target_name,
                    result.latency_ns / 1000, same_as_reference ? "same bytes as" : "DIFFERS from",
                    same_as_loop ? "same labels as" : "DIFFERS from");
    }
    return failures == 0 ? 0 : 1;
}
