// The graph's text form: one line per input and layer, with its op, tensors, attributes and
// schedule, producers first; read back through the layer registry into the same graph.
//
//   graph "small_net"
//   input %in : 1x16x32x32 u8 NHWC q(0.0500000007,128)
//   %c1 = conv2d(%in) {strides=[1,1], ..., weights=tensor<i8:16x3x3x32>} : 1x32x32x32 u8 NHWC
//   q(0.100000001,0) schedule split(y, yo, yi, 8) output %c1
//
// A layer of several outputs lists their tensors after the ':', separated by commas.
#pragma once

#include <string>

#include "dsl/graph.h"
#include "dsl/registry.h"

namespace vpuc::dsl {

struct GraphPrintOptions {
    // Constant tensors' bytes, in hex: needed to read the text back; long for real weights.
    bool tensor_data = false;
    bool schedules = true;
};

std::string print_graph(const Graph &graph, const GraphPrintOptions &options = {});

// Reads text printed with tensor_data; every layer is rebuilt by `registry` from its op and
// attributes and must produce the tensor the text says. Throws GraphError naming the line.
Graph read_graph(const std::string &text, const LayerRegistry &registry);

// "1x16x32x32 u8 NHWC q(0.0500000007,128)", as the text form writes a tensor.
std::string tensor_text(const TensorDesc &tensor);

} // namespace vpuc::dsl
