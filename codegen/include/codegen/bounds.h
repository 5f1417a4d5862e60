// Bounds inference with Halide's own machinery: which region of each input a layer reads to
// produce a region of its output (halos included).
#pragma once

#include <Halide.h>

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "codegen/loop_nest.h"
#include "dsl/layer.h"

namespace vpuc::codegen {

// The box of every Func and image `output` reads, by name, for the box `box` of `output`
// (constant or symbolic), through every definition and update: Halide's bounds inference.
std::map<std::string, Halide::Internal::Box> required_boxes(const Halide::Func &output,
                                                            const Halide::Internal::Box &box);

// One region per input of `layer`, clamped to the input's extents (a region past the output's
// extent, as channel padding makes, reads no more than the input has). Throws LoweringError
// naming the layer when a bound is not a constant, and, naming the input too, when the layer's
// whole output reads outside an input: a padded conv reads inside it (through a clamp, the
// select discarding what lies outside), and the padding is the DPU's or the kernel's business.
std::vector<Region> input_regions(const dsl::Layer &layer, const Region &output);

// The same for many regions of one layer: its algorithm is instantiated once, and each call
// only propagates the region through it.
class InputBounds {
  public:
    explicit InputBounds(const dsl::Layer &layer);
    ~InputBounds();
    InputBounds(InputBounds &&) noexcept;
    std::vector<Region> operator()(const Region &output) const;

  private:
    void check_reads_inside_inputs(const dsl::Layer &layer) const;

    struct Pipeline;
    std::unique_ptr<Pipeline> pipeline_;
};

} // namespace vpuc::codegen
