// SHAVE kernel generation: a Halide pipeline becomes a relocatable object for the simulator's
// host, vectorized for the SHAVE's vector width, with its argument contract and op counts.
//
// The contract a kernel is compiled for (the simulator keeps to it, nothing checks it at run
// time because the kernels are compiled without asserts):
// - it is called through its argv entry with one pointer per argument, in `args` order:
//   a halide_buffer_t* for buffers, a pointer to the value for scalars;
// - it computes exactly the region the output buffer describes (a SHAVE's crop of the output);
// - input buffers cover every element that region reads, and every buffer's innermost
//   dimension is dense (stride 1).
#pragma once

#include <Halide.h>

#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "vpu_target/blob.h"
#include "vpu_target/target.h"

namespace vpuc::codegen {

// A pipeline that cannot become a SHAVE kernel; the message names the kernel and says why.
class ShaveKernelError : public std::runtime_error {
  public:
    using std::runtime_error::runtime_error;
};

enum class KernelArgKind { InputBuffer, OutputBuffer, ScalarInt, ScalarFloat };

struct KernelArgDesc {
    std::string name;
    KernelArgKind kind = KernelArgKind::InputBuffer;
    target::DType dtype = target::DType::I8;
    int rank = 0; // dimensions of a buffer; 0 for scalars
};

struct ShaveKernelBinary {
    std::string name;
    std::string entry; // Halide's argv-style entry point
    std::vector<uint8_t> object;
    std::vector<KernelArgDesc> args; // inputs in the caller's order, then the output
    uint32_t vector_lanes = 0;       // output elements per SHAVE vector
    float ops_per_vector = 0;        // vector instructions per output vector
};

// The Halide target every SHAVE kernel is compiled for: the simulator's host (x86-64 Linux)
// with 128-bit SSE4.1 vectors, and no Halide runtime, asserts or bounds queries in the object.
// No FMA or AVX, so results do not depend on the machine that runs the simulator.
const Halide::Target &shave_halide_target();

// Compiles `output` (one output, types u8/i8/f16/f32/i32) with `inputs` (its ImageParams and
// Params, in the order the kernel takes them) into a kernel called `name` (a C identifier).
// If no stage of `output` was scheduled, the default SHAVE schedule is applied to it in place
// (Funcs are handles): the innermost dimension vectorized by the vector lanes, guarded so any
// extent works. Parallel loops are refused: the simulator splits work across SHAVEs by giving
// each one a crop of the output. Throws ShaveKernelError.
ShaveKernelBinary compile_shave_kernel(const std::string &name, Halide::Func output,
                                       const std::vector<Halide::Argument> &inputs,
                                       int vector_bits);

// The blob's form of a kernel, for the graph assembler's BlobT::kernels.
std::unique_ptr<blob::KernelT> to_blob_kernel(const ShaveKernelBinary &kernel);

} // namespace vpuc::codegen
