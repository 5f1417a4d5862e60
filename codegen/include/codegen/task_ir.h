// The task level of the lowering: buffers in memory spaces and tasks on engine queues with
// their dependencies, before addresses and barriers exist. Every pass after task building
// reads and writes this IR; print() shows it to people (--dump-after) and parse_program()
// reads that text back, so a pass can start from a program written as text.
#pragma once

#include <cstdint>
#include <limits>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "vpu_target/blob_writer.h"
#include "vpu_target/error.h"

namespace vpuc::codegen {

constexpr uint64_t kUnallocated = std::numeric_limits<uint64_t>::max();

struct BufferDecl {
    std::string name;
    blob::MemSpace space = blob::MemSpace::Cmx;
    uint32_t index = 0; // I/O index, or tile for CMX
    uint64_t bytes = 0;
    uint64_t offset = kUnallocated; // in its section; set by the allocation passes
    // A band of rows kept in CMX from its producer to its last reader: allocate_cmx places it
    // from the top of CMX down, away from the tasks' short-lived buffers.
    bool from_top = false;
};

// A strided view of a buffer: dims innermost first, strides in elements.
struct View {
    int buffer = -1;
    uint64_t offset = 0; // bytes from the buffer's start
    blob::DType dtype = blob::DType::U8;
    std::vector<blob::Dim> dims;
    int32_t zero_point = 0;
};

// Copies `src` into each of `dsts`; all views have the same extents.
struct DmaWork {
    View src;
    std::vector<View> dsts;
};

// A DPU task: the invariant (op, kernel, strides, padding, PPE, variants) without tensors,
// and the views the assembler turns into its tensors.
struct DpuWork {
    blob::DpuTaskT invariant;
    View input, input2, weights, weight_table, output;
    bool has_input2 = false, has_weights = false;
};

// A SHAVE task: kernel `kernel` of the program on one buffer per kernel argument (inputs,
// then the output), each with the coordinates of its first element.
struct ShaveWork {
    uint32_t kernel = 0;
    std::vector<View> args;
    std::vector<std::vector<int32_t>> mins;
    uint8_t shaves = 1;
};

struct TaskIR {
    std::string name;
    std::string layer;
    blob::EngineKind engine = blob::EngineKind::Dma;
    uint32_t tile = 0;
    uint32_t index = 0; // DMA engine, or DPU of the tile
    std::variant<DmaWork, DpuWork, ShaveWork> work;
    std::vector<int> deps; // tasks (indices, always earlier) that must finish first
};

// Calls f(view, writes) for every view task `t` reads (writes = false) or writes. A SHAVE
// task's last argument is its output. `TaskT` is TaskIR or const TaskIR.
template <typename TaskT, typename F> void for_each_view(TaskT &t, F &&f) {
    if (auto *dma = std::get_if<DmaWork>(&t.work)) {
        f(dma->src, false);
        for (auto &d : dma->dsts) f(d, true);
    } else if (auto *shave = std::get_if<ShaveWork>(&t.work)) {
        for (size_t i = 0; i < shave->args.size(); ++i)
            f(shave->args[i], i + 1 == shave->args.size());
    } else {
        auto &dpu = std::get<DpuWork>(t.work);
        f(dpu.input, false);
        if (dpu.has_input2) f(dpu.input2, false);
        if (dpu.has_weights) {
            f(dpu.weights, false);
            f(dpu.weight_table, false);
        }
        f(dpu.output, true);
    }
}

// The bytes of `v`'s buffer from its first element to past its last: [first, end).
std::pair<uint64_t, uint64_t> byte_span(const View &v);
// Whether task `t` writes a byte of `v`'s buffer within v's byte span: a task whose writes all
// lie elsewhere cannot have written what `v` reads.
bool writes_within(const TaskIR &t, const View &v);

// Network I/O as the blob header describes it.
struct IoDecl {
    std::string name;
    std::vector<uint32_t> shape; // N, C, H, W
    blob::DType dtype = blob::DType::U8;
    blob::Layout layout = blob::Layout::NHWC;
    std::vector<blob::Quant> quant;
};

// A virtual barrier: its producers update it, its consumers wait on it.
struct BarrierIR {
    std::vector<int> producers, consumers;
    int physical = -1;
};

struct Program {
    std::string name;
    std::vector<IoDecl> inputs, outputs;
    std::vector<BufferDecl> buffers;
    std::vector<uint8_t> constants;
    std::vector<blob::KernelT> kernels;
    std::vector<TaskIR> tasks; // program order: each queue runs its tasks in this order
    std::vector<BarrierIR> barriers;
    uint64_t scratch_bytes = 0;

    int add_buffer(BufferDecl b) {
        buffers.push_back(std::move(b));
        return int(buffers.size() - 1);
    }
    int add_task(TaskIR t) {
        tasks.push_back(std::move(t));
        return int(tasks.size() - 1);
    }
};

// A listing of everything in the program, one record a line: the header, I/O, buffers,
// tasks (queue, dependencies, layer, work), barriers, then the constants and the kernels in
// hex (lines of zeros left out). Names may hold any character but a newline.
std::string print(const Program &program);

// An error in the text of a task program: names the line and what was expected there.
class ProgramTextError : public Error {
  public:
    using Error::Error;
};

// The inverse of print(): parse_program(print(p)) equals p, and prints as the same text.
// Throws ProgramTextError.
Program parse_program(const std::string &text);

} // namespace vpuc::codegen
