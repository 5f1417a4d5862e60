// Graph passes: rewrites of the editable dsl::Graph that `vpuc compile` runs between the ONNX
// import and the lowering (docs/graph-passes.md). graph_passes.cpp is their table of contents,
// a straight list of atomic passes, each logged, timed and followed by graph.verify() with the
// layer registry; each pass lives in a file of its own (graph_pass_NAME.cpp).
//
// A pass keeps layer names: a layer merged into another (a ReLU into its convolution) leaves
// the name of the one that computes both, and the pass records the merge; but a graph output
// keeps its name (the importer gives it the ONNX output's, which results are named by), so a
// convolution merged with its output ReLU takes the ReLU's name.
#pragma once

#include <iosfwd>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "dsl/graph.h"

namespace vpuc::frontend {

// What the passes work on and what they report.
struct GraphPassState {
    explicit GraphPassState(dsl::Graph g) : graph(std::move(g)) {}
    dsl::Graph graph;
    // What a user should know, without the "note: " prefix: "fuse_activations: 'relu1' fused
    // into 'conv1'", "fold_batch_norm: 'bn2' stays a SHAVE layer: ...".
    std::vector<std::string> notes;
    // Layers that no longer exist because a pass merged them into another, by name: the layer
    // that computes their result now (a schedule or a profile line naming 'relu1' finds 'conv1').
    std::map<std::string, std::string> merged_into;
    // GraphPassOptions::fp16_activations, for the pass of that name.
    bool fp16_activations = false;
};

struct GraphPassOptions {
    std::string dump_after;        // print the graph after this pass (graph_pass_names())
    std::ostream *log = nullptr;   // pass log, notes and the dump; nullptr: silent
    std::ostream *notes = nullptr; // the notes alone, "note: ..." lines
    bool time_passes = false;      // each pass's time to stderr (as VPUC_PASS_TIMES=1 does)
    bool fp16_activations = false; // run the pass fp16_activations (off: it changes nothing)
};

// The names of the passes, in order.
const std::vector<std::string> &graph_pass_names();

// Runs every pass, in order, on a clone of `graph` (the caller's layers are left alone) and
// returns the result. A `dump_after` naming no graph pass is ignored here: it may name a
// lowering pass. Throws dsl::GraphError when a pass leaves an invalid graph (a bug of the pass).
GraphPassState run_graph_passes(const dsl::Graph &graph, const GraphPassOptions &options = {});

// Runs the pass `name` on `state`, then the verifier (how the tests run one pass alone).
// Throws dsl::GraphError for an unknown name, listing the passes.
void run_graph_pass(GraphPassState &state, const std::string &name);

// The passes, in list order.
//
// A layer all of whose inputs are constants (a sigmoid of a constant, say) becomes a constant
// of its value, computed by the CPU reference; graph outputs stay layers.
void fold_constants(GraphPassState &state);
// Layers that return their input unchanged (a reshape, flatten, squeeze or unsqueeze to the
// same shape, a slice of everything, a concat of one input, a transpose by the identity) are
// removed; their readers read their input. Layers no output reads never exist: a graph is
// what its outputs read (dsl::Graph), so no pass is needed to drop them.
void remove_identity_layers(GraphPassState &state);
// quantize(op(dequantize(x))), where op only selects or moves values (max_pool, reshape,
// flatten, squeeze, unsqueeze, transpose, a nearest resize) and the quantize gives x's own
// quantization, becomes op(x): the same bytes, without the two SHAVE layers, and a max pool on
// the DPU. quantize(concat(...)) becomes a concat of its parts quantized one by one (a part
// that dequantizes a tensor of the quantize's quantization: that tensor), the same bytes.
void propagate_dequantize(GraphPassState &state);
// A batch_norm reading an fp16 conv2d, depthwise_conv2d or matmul that has no other reader
// and no activation is folded into that layer's per-channel scale and bias.
void fold_batch_norm(GraphPassState &state);
// mul(x, sigmoid(x)) in floats, the sigmoid read by the multiply alone, becomes swish(x),
// named after the multiply.
void fuse_swish(GraphPassState &state);
// A relu, clamp or leaky_relu reading a conv2d, depthwise_conv2d, matmul, pool or eltwise
// layer that has no other reader becomes that layer's PPE activation, when the PPE computes
// it for the element type.
void fuse_activations(GraphPassState &state);
// With GraphPassState::fp16_activations only: every layer offering attribute `arithmetic` (elu,
// selu, swish, mish, sigmoid) on an fp16 input computes in fp16 arithmetic (about twice as fast
// on the SHAVEs, within the error bound docs/layers.md states). Before fuse_pointwise, whose
// groups then compose the fp16 forms.
void fp16_activations(GraphPassState &state);

// An element-wise layer (see elementwise_layer) that reads a relabelling view (reshape,
// flatten, squeeze, unsqueeze, transpose) of a 4-D NHWC tensor, where the tensor it reads would
// be held in another order, computes on that tensor, and the same views follow it: the
// transformer's biases and GELU on the DPU matmul's output, without an element-by-element
// reordering copy in and out. The same bytes; the layer keeps its name, the views after it are
// named `<layer>.view`, `<layer>.view_2`...
void sink_views(GraphPassState &state);
// Element-wise layers (quantization, activations and math of one tensor, constant_eltwise; add,
// sub and mul of same-shaped inputs all computed in the group) whose results only the
// group reads become one SHAVE layer, op "pointwise", named after the group's last layer,
// computing their composed algorithms (a group of two SHAVE layers or more): the same bytes. A
// group whose result is a function of one 8-bit tensor's value (per-tensor quantization, more
// computed than a dequantization), a lone int8 sigmoid too, becomes op "lookup" instead, of that
// tensor and a 256-entry table the reference computes with the composed algorithms: the same
// bytes again.
void fuse_pointwise(GraphPassState &state);

// For the passes: element-wise layers, each output element computed from the same element of
// each input. The SHAVEs run quantization, activations and math of one tensor, and
// constant_eltwise whose result has the computed input's shape; the DPU runs add, sub and mul of
// inputs of the output's shape (no broadcasting).
bool shave_elementwise(const dsl::Layer &layer);
bool dpu_elementwise(const dsl::Layer &layer);
bool elementwise_layer(const dsl::Layer &layer); // a layer of one output of either kind
// For the passes: `layer` rebuilt by the layer registry from `attrs` on its inputs, with a copy
// of its schedule, named `name`.
dsl::Layer rebuild_layer(const dsl::Layer &layer, const std::string &name, const dsl::Attrs &attrs);
// `producer` rebuilt with `attrs` in the place of `absorbed`, its only reader, whose result it
// now computes: named after the producer, or after `absorbed` when that is a graph output.
// Records the name that disappears in `merged_into` and notes "PASS: 'absorbed' (op) WHAT
// 'producer'".
void merge_into_producer(GraphPassState &state, const dsl::Layer &absorbed,
                         const dsl::Layer &producer, const dsl::Attrs &attrs,
                         const std::string &pass, const std::string &what);
// Whether `layer` is one of the graph's outputs.
bool is_graph_output(const dsl::Graph &graph, const dsl::Layer &layer);
// Whether `layer` is still in the graph (an earlier edit may have replaced it).
bool in_graph(const dsl::Graph &graph, const dsl::Layer &layer);
// The names of `graph`'s inputs and layers, for a pass that adds layers of new names.
std::set<std::string> layer_names(const dsl::Graph &graph);
// `base`, or the first of `base_2`, `base_3`... that `taken` does not hold; added to `taken`.
std::string unused_name(std::set<std::string> &taken, const std::string &base);

} // namespace vpuc::frontend
