// SHAVE kernel generation: a Halide pipeline becomes a relocatable object for the simulator's
// host, vectorized for the SHAVE's vector width, with its argument contract and op counts.
//
// The contract a kernel is compiled for (the blob verifier checks every task against it, and
// the kernel's own checks, Halide's asserts, hold each call to it at run time):
// - it is called through its argv entry with one pointer per argument, in `args` order:
//   a halide_buffer_t* for buffers, a pointer to the value for scalars;
// - it computes exactly the region the output buffers describe (a SHAVE's crop of the output;
//   a kernel of several outputs, a Halide Tuple, takes one buffer per value, all of that region);
// - input buffers cover every element that region reads (`reads`, per input dimension, says
//   which), and every buffer's innermost dimension is dense (stride 1).
#pragma once

#include <Halide.h>

#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "vpu_target/blob.h"
#include "vpu_target/error.h"
#include "vpu_target/target.h"

namespace vpuc::codegen {

// A pipeline that cannot become a SHAVE kernel; the message names the kernel and says why.
class ShaveKernelError : public Error {
  public:
    using Error::Error;
};

// The blob's enum (schema/blob.fbs): one definition of a kernel argument's kinds.
using KernelArgKind = blob::ArgKind;

struct KernelArgDesc {
    std::string name;
    KernelArgKind kind = KernelArgKind::InputBuffer;
    target::DType dtype = target::DType::I8;
    int rank = 0; // dimensions of a buffer; 0 for scalars
    // An input buffer: what the kernel reads of it per dimension for the output region it
    // computes (blob.fbs ReadBound), from Halide's bounds inference; empty if it reads nothing.
    std::vector<blob::ReadBound> reads;
};

// What a kernel executes per output vector, counted on its lowered statement: the SHAVE timing
// model's inputs (docs/timing-model.md, "SHAVE"). Instructions are in native vectors: an op on
// a wider vector takes several.
struct ShaveKernelCost {
    double arith_ops = 0;   // arithmetic, compare, select, convert and shuffle instructions
    double special_ops = 0; // special-function instructions: exp, log, sqrt, tanh..., float divide
    double cmx_bytes = 0;   // bytes loaded and stored
};

struct ShaveKernelBinary {
    std::string name;
    std::string entry; // Halide's argv-style entry point
    std::vector<uint8_t> object;
    std::vector<KernelArgDesc> args; // inputs in the caller's order, then the outputs
    uint32_t vector_lanes = 0;       // output elements per SHAVE vector (of the widest output)
    ShaveKernelCost per_vector;      // per output vector
};

// The Halide target every SHAVE kernel is compiled for: the simulator's host (x86-64 Linux)
// with 128-bit SSE4.1 vectors, no Halide runtime and no bounds queries in the object. Asserts
// stay: a call whose buffers do not cover what it reads returns an error, never reads outside.
// No FMA or AVX, so results do not depend on the machine that runs the simulator.
const Halide::Target &shave_halide_target();

// Compiles `output` (one output, or a Tuple of several; types u8/i8/f16/f32/i32) with `inputs`
// (its ImageParams and Params, in the order the kernel takes them) into a kernel called `name`
// (a C identifier).
// Stages the caller did not schedule are scheduled in place (Funcs are handles):
// - the output, if none of its stages was scheduled: its innermost dimension vectorized by the
//   vector lanes, guarded so any extent works (updates too, along that pure dimension);
// - a reduction (a Func with update definitions), and a Func evaluated inside one (called from
//   an update definition), left inlined: computed at root inside the kernel, over the region
//   the output needs, vectorized the same way. Inlined, a reduction would be recomputed for
//   every point of its consumers. Other Funcs (pointwise stages, an input's Func) stay inlined.
// Vectorizing a reduction's pure dimension keeps every point's reduction order, so results do
// not change. Parallel loops are refused: the simulator splits work across SHAVEs by giving
// each one a crop of the output.
//
// `per_vector` is the kernel's cost for an output of `cost_extents` (innermost
// first, mins 0) over that output's vectors: all stages, each with its own trip counts, so a
// reduction over a fixed domain weighs in for the share of the output it serves. The count
// depends on the extents only through such stages and vector tails; pass one SHAVE's share of
// a typical task (shave_share). Empty: 16 vectors along the innermost dimension, 4 along the
// others. Throws ShaveKernelError.
ShaveKernelBinary compile_shave_kernel(const std::string &name, Halide::Func output,
                                       const std::vector<Halide::Argument> &inputs, int vector_bits,
                                       const std::vector<int64_t> &cost_extents = {});

// compile_shave_kernel in two steps, for compiling kernels on several threads: prepare schedules
// and lowers the pipeline and computes its cache key (below); finish takes the kernel of that key
// from the cache, or generates its object and caches it. Each step may run on any thread. Kernels
// of one key finished at once would each be generated, whichever lands in the cache first;
// finishing the first of a key, then the others, gives every one the first's object, as
// compile_shave_kernel one after another does.
//
// An output its schedule leaves alone is vectorized along its innermost dimension, or, where
// that extent is a few elements (an image's 3 channels) and the next holds a vector, along the
// next with the innermost unrolled (Default); AlongSecond asks for the latter wherever the first
// extent is shorter than a vector and the second holds one. Neither is better everywhere:
// unrolled channels make an index computed from the channel (a space_to_depth's) a constant,
// where along the channels it is a gather of one load per lane, but a reader of columns by a
// computed index (a resize) gathers along the next. `may_vectorize_along_second` says when
// preparing the kernel the other way is worth a try (prepared_cost compares them).
enum class OutputVectorization { Default, AlongSecond };
struct PreparedShaveKernel {
    ShaveKernelBinary kernel; // its name, entry, arguments and lanes; no object or cost yet
    std::string key;          // the cache key
    Halide::Func output;
    Halide::Module module{"", Halide::Target()}; // the lowered pipeline, its function `name`
    std::vector<int64_t> counted_extents;
    int vector_bits = 0;
    bool may_vectorize_along_second = false; // see OutputVectorization
};
PreparedShaveKernel
prepare_shave_kernel(const std::string &name, Halide::Func output,
                     const std::vector<Halide::Argument> &inputs, int vector_bits,
                     const std::vector<int64_t> &cost_extents = {},
                     OutputVectorization vectorization = OutputVectorization::Default);
// The kernel's figures per output vector, as finish_shave_kernel stores them.
ShaveKernelCost prepared_cost(const PreparedShaveKernel &prepared);
ShaveKernelBinary finish_shave_kernel(PreparedShaveKernel prepared);

// How often compile_shave_kernel found a kernel already compiled in this process (hits), and how
// often not (misses); of the misses, how many it read from the disk cache instead of compiling.
struct ShaveKernelCacheStats {
    uint64_t hits = 0, misses = 0, disk_hits = 0;
};

// Compiled kernels are kept in memory for the process, shared by every thread, keyed on what the
// kernel computes, never on a name: the lowered statement with every name canonical (so the
// printed Halide definition and its schedule), the argument types and ranks, constant buffers'
// contents, the target, vector width and the extents ops are counted for, and the vpuc and
// Halide versions with a digest of codegen's sources. A hit returns the cached object, entry
// point, reads and cost, under the name and argument names asked for; Halide's error messages
// inside the object keep the names of the kernel first compiled.
// With VPUC_KERNEL_CACHE_DIR set, kernels are also stored in that directory, one file per key,
// and read back by later processes (codegen/src/kernel_disk_cache.h).
ShaveKernelCacheStats shave_kernel_cache_stats();

// The output one SHAVE computes of a task whose output has `extents` (innermost first) when the
// task runs on `shaves` SHAVEs: the simulator cuts the outermost dimension with extent > 1 into
// that many parts (at most its extent); this is the largest part, the one the task waits for.
std::vector<int64_t> shave_share(std::vector<int64_t> extents, int shaves);

// The blob's form of a kernel, for the graph assembler's BlobT::kernels.
std::unique_ptr<blob::KernelT> to_blob_kernel(const ShaveKernelBinary &kernel);

} // namespace vpuc::codegen
