// The blob verifier, in two stages. verify_structure() runs the FlatBuffers verifier: after it,
// every offset, vector and string is inside the buffer, so reading any field is memory-safe.
// verify() then checks the meaning against the target (the checks are listed in docs/blob.md).
//
// A hostile blob can make FlatBuffers data much larger than the file: one table may be
// referenced from many places (a task list of a million offsets to one task with a long wait
// list). So the FlatBuffers verifier may visit at most one table per 4 bytes of file (what a
// blob without shared tables needs), and every loop of the semantic stage charges its work to
// a budget proportional to the file size. Either limit turns a blow-up into a BlobError.
#include "vpu_target/verifier.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <iterator>
#include <limits>
#include <map>
#include <tuple>
#include <type_traits>

#include "kernel_object.h"
#include "vpu_target/printable.h"
#include "vpu_target/races.h"
#include "weight_tables.h"

namespace vpuc::blob {
namespace {

using target::Target;

constexpr size_t kMaxProblems = 50;
constexpr uint32_t kMaxRank = 8;    // no tensor the compiler emits has more dimensions
constexpr uint32_t kMaxDmaDims = 4; // the DMA engine's descriptor holds 4 outer dimensions
constexpr size_t kMaxNameChars = 80;
constexpr int kMaxPpeShift = 63;
constexpr size_t kMaxCycleTasks = 16; // tasks of a deadlock cycle named in the message
// Work one task may ask of the functional simulator: a DMA moves at most kMaxDmaBytes in at
// most kMaxDmaLines lines (all destinations together), a DPU task computes at most
// kMaxDpuMacs multiply-accumulates (or window elements for pools and eltwise). The largest task
// a compiled network has is far below: a whole 7x7/2 224x224x3->64 conv is 2^28.4 MACs.
constexpr uint64_t kMaxDmaBytes = uint64_t(1) << 30;
constexpr uint64_t kMaxDmaLines = uint64_t(1) << 24;
constexpr uint64_t kMaxDpuMacs = uint64_t(1) << 31;
// A DPU activation spans at most this many bytes (and no extent is larger): the simulator
// computes DPU tasks with Halide pipelines, which address a buffer with 32-bit offsets. A CMX
// holds megabytes.
constexpr int64_t kMaxDpuTensorBytes = (int64_t(1) << 31) - 1;
// Weights per output channel of a DPU task: twice what a 2 MiB CMX holds in int8. The simulator
// packs the weights of at least 16 channels at a time, as int32.
constexpr uint64_t kMaxDpuChannelWeights = uint64_t(1) << 22;
// A kernel's figures for the timing model (instructions or bytes per output vector).
constexpr double kMaxPerVectorFigure = 1e9;
// Work units the semantic stage may spend per byte of blob, plus a floor for small blobs.
constexpr uint64_t kBudgetPerByte = 8;
constexpr uint64_t kBudgetFloor = uint64_t(1) << 22;
constexpr uint64_t kDataflowBudgetPerByte = 64;
constexpr uint64_t kDataflowBudgetFloor = uint64_t(1) << 24;

// String concatenation for messages, cheaper than ostringstream (run once per task).
void append(std::string &s, const std::string &text) {
    s += text;
}
void append(std::string &s, const char *text) {
    s += text;
}
template <typename N, typename = std::enable_if_t<std::is_arithmetic_v<N>>>
void append(std::string &s, N number) {
    s += std::to_string(number);
}
template <typename... Args> std::string cat(const Args &...args) {
    std::string s;
    (append(s, args), ...);
    return s;
}

// Names come from the blob: cut them short and neutralize control characters, so a hostile
// name cannot flood or drive the terminal that shows the error.
std::string printable(const char *data, size_t size) {
    return vpuc::printable(std::string_view(data, size), kMaxNameChars);
}

std::string quoted(const flatbuffers::String *s) {
    return s ? "'" + printable(s->c_str(), s->size()) + "'" : "''";
}

template <typename E> bool in_enum(E value, E last) {
    return static_cast<unsigned>(value) <= static_cast<unsigned>(last);
}
bool valid(DType t) {
    return in_enum(t, DType::I32);
}
bool valid(MemSpace s) {
    return in_enum(s, MemSpace::Cmx);
}
bool valid(DpuOp op) {
    return in_enum(op, DpuOp::MatMul);
}
bool valid(Layout l) {
    return in_enum(l, Layout::ND);
}
bool valid(Activation a) {
    return in_enum(a, Activation::LeakyRelu);
}
bool valid(EltwiseOp op) {
    return in_enum(op, EltwiseOp::Min);
}
bool valid(ArgKind k) {
    return in_enum(k, ArgKind::ScalarFloat);
}

std::string name_of(DType t) {
    return valid(t) ? to_string(t) : cat("<unknown dtype ", int(t), ">");
}
std::string name_of(MemSpace s) {
    return valid(s) ? to_string(s) : cat("<unknown memory space ", int(s), ">");
}

bool is_8bit(DType t) {
    return t == DType::U8 || t == DType::I8;
}
bool dpu_input_type(DType t) {
    return is_8bit(t) || t == DType::F16;
}
bool is_buffer(ArgKind k) {
    return k == ArgKind::InputBuffer || k == ArgKind::OutputBuffer;
}

template <typename T> uint32_t size_of(const flatbuffers::Vector<T> *v) {
    return v ? v->size() : 0;
}

// The FlatBuffers verifier checks a vector's size field (4-byte aligned), not its elements:
// in a corrupted blob a vector of 8-byte aligned structs may be misaligned.
template <typename T> bool aligned(const flatbuffers::Vector<const T *> *v) {
    return !v || v->size() == 0 || reinterpret_cast<uintptr_t>(v->Data()) % alignof(T) == 0;
}

// acc += a * b, false on int64 overflow.
bool add_product(int64_t &acc, int64_t a, int64_t b) {
    int64_t product = 0;
    return !__builtin_mul_overflow(a, b, &product) && !__builtin_add_overflow(acc, product, &acc);
}

// Every problem, one line each. Stops the verification (throws) at kMaxProblems or when the
// work budget runs out, so neither the message nor the run time can grow without bound.
class Problems {
  public:
    explicit Problems(uint64_t budget) : budget_(budget) {}

    void add(std::string line) {
        lines_.push_back(std::move(line));
        if (lines_.size() == kMaxProblems) stop(cat("stopped after ", kMaxProblems, " problems"));
    }

    void charge(uint64_t units) {
        if (units <= budget_) {
            budget_ -= units;
            return;
        }
        stop("blob: verification budget exhausted: the blob references the same data from "
             "more places than its size justifies");
    }

    [[noreturn]] void stop(std::string last) {
        lines_.push_back(std::move(last));
        throw BlobError(joined());
    }

    void throw_if_any() const {
        if (!lines_.empty()) throw BlobError(joined());
    }

  private:
    std::string joined() const {
        std::string all;
        for (const auto &l : lines_) all += (all.empty() ? "" : "\n") + l;
        return all;
    }

    std::vector<std::string> lines_;
    uint64_t budget_;
};

// Where a problem is: "task 'conv0' (DPU queue tile 0 dpu 0)", "barrier 3 (physical 1)"...
struct Ctx {
    Problems *problems;
    std::string where;
    void add(const std::string &field, const std::string &what) const {
        problems->add(where + ": " + field + ": " + what);
    }
};

// The (C, W, H) extents of a DPU activation tensor, dims ordered (C, W, H, N).
struct Chw {
    uint64_t c = 0, w = 0, h = 0;
    bool operator==(const Chw &o) const { return c == o.c && w == o.w && h == o.h; }
};
Chw chw_of(const TensorRef &t) {
    return {t.dims()->Get(0)->extent(), t.dims()->Get(1)->extent(), t.dims()->Get(2)->extent()};
}
std::string shape_str(const Chw &s) {
    return cat("(C ", s.c, ", W ", s.w, ", H ", s.h, ")");
}

struct TaskRef {
    const Task *task;
    const TaskQueue *queue;
};

std::string describe(const TaskRef &t) {
    return cat(quoted(t.task->name()), " (", describe_queue(*t.queue), ")");
}

class Checker {
  public:
    Checker(const Blob &blob, const Target &target, size_t blob_bytes)
        : blob_(blob), header_(*blob.header()), target_(target),
          problems_(kBudgetPerByte * blob_bytes + kBudgetFloor),
          barrier_count_(size_of(blob.barriers())) {}

    void run() {
        check_target();
        check_io(header_.inputs(), MemSpace::Input, "input");
        check_io(header_.outputs(), MemSpace::Output, "output");
        check_ddr_total();
        check_kernels();
        check_barrier_ids();
        check_queues();
        check_barrier_counts();
        // Reachability, which the reuse check needs, is only defined on an acyclic graph.
        if (!find_deadlock()) check_physical_reuse();
        problems_.throw_if_any();
    }

  private:
    // ---- Header ------------------------------------------------------------------------

    // A blob for another target would fail most checks for an uninteresting reason: stop.
    void check_target() const {
        const TargetDescription &described = *header_.target();
        const Sha256 digest = description_digest(described);
        if (described.name()->str() == target_.name && digest == target_.description_sha256) return;
        throw BlobError(cat("header: target: blob compiled for ", quoted(described.name()),
                            " (description sha256 ", hex(digest).substr(0, 16), "...), not for '",
                            target_.name, "' (sha256 ",
                            hex(target_.description_sha256).substr(0, 16),
                            "...): a blob runs on the target it was compiled for"));
    }

    void check_io(const flatbuffers::Vector<flatbuffers::Offset<IoTensor>> *list, MemSpace space,
                  const char *what) {
        problems_.charge(size_of(list));
        for (uint32_t i = 0; i < size_of(list); ++i) {
            const IoTensor &io = *list->Get(i);
            Ctx c{&problems_, cat(what, " ", i, " ", quoted(io.name()))};
            if (!valid(io.dtype())) c.add("dtype", cat("unknown dtype ", int(io.dtype())));
            if (!valid(io.layout())) c.add("layout", cat("unknown layout ", int(io.layout())));
            check_quant(c, io);
            const Address &at = *io.tensor()->address();
            if (at.space() != space || at.index() != i) {
                c.add("tensor", cat("address must be its own section (", name_of(space), " ", i,
                                    "), got ", name_of(at.space()), " ", at.index()));
                continue;
            }
            check_tensor(c, "tensor", io.tensor());
        }
    }

    // Per-channel quantization is indexed by channel: the table must have one entry each.
    void check_quant(const Ctx &c, const IoTensor &io) const {
        uint32_t entries = size_of(io.quant()), rank = size_of(io.shape());
        if (entries <= 1) return;
        if (io.quant_axis() < 0 || uint32_t(io.quant_axis()) >= rank) {
            c.add("quant_axis", cat(io.quant_axis(), " is not an axis of the ", rank, "-D shape"));
            return;
        }
        uint32_t channels = io.shape()->Get(uint32_t(io.quant_axis()));
        if (entries != channels)
            c.add("quant",
                  cat(entries, " per-channel entries, shape[", io.quant_axis(), "] is ", channels));
    }

    // The simulator allocates DDR for all sections: their sum must fit the target's DDR.
    void check_ddr_total() {
        uint64_t total = size_of(blob_.constants());
        bool overflow = __builtin_add_overflow(total, header_.ddr_scratch_bytes(), &total);
        for (const auto *list : {header_.inputs(), header_.outputs()})
            for (uint32_t i = 0; i < size_of(list); ++i)
                overflow |= __builtin_add_overflow(total, list->Get(i)->bytes(), &total);
        if (overflow || total > target_.ddr_bytes)
            problems_.add(cat("header: DDR: inputs, outputs, constants and scratch need ",
                              overflow ? "more than 2^64" : std::to_string(total),
                              " bytes, more than the ", target_.ddr_bytes, " bytes of ",
                              target_.name));
    }

    // ---- Memory ------------------------------------------------------------------------

    struct Section {
        std::string name;
        uint64_t size = 0;
        std::string size_note; // "(1024 bytes)"
    };

    // The section an address points into; false (reported) when it names none.
    bool section_of(const Ctx &c, const std::string &field, const Address &a, Section &s) const {
        auto bad_index = [&](const std::string &what) {
            c.add(field, what);
            return false;
        };
        switch (a.space()) {
        case MemSpace::Input:
        case MemSpace::Output: {
            bool input = a.space() == MemSpace::Input;
            const auto *list = input ? header_.inputs() : header_.outputs();
            const char *kind = input ? "input" : "output";
            if (a.index() >= size_of(list))
                return bad_index(cat(kind, " ", a.index(), " does not exist (the blob has ",
                                     size_of(list), ")"));
            const IoTensor &io = *list->Get(a.index());
            s = {cat(kind, " ", a.index(), " ", quoted(io.name())), io.bytes(),
                 cat("(", io.bytes(), " bytes)")};
            return true;
        }
        case MemSpace::Constant:
        case MemSpace::Scratch: {
            bool constant = a.space() == MemSpace::Constant;
            if (a.index() != 0)
                return bad_index(
                    cat("index must be 0 for ", name_of(a.space()), ", got ", a.index()));
            uint64_t size = constant ? size_of(blob_.constants()) : header_.ddr_scratch_bytes();
            s = {constant ? "the constant section" : "DDR scratch", size,
                 cat("(", size, " bytes)")};
            return true;
        }
        case MemSpace::Cmx:
            if (a.index() >= uint32_t(target_.tiles))
                return bad_index(cat("CMX tile ", a.index(), " does not exist (", target_.name,
                                     " has ", target_.tiles, " tiles)"));
            s = {cat("CMX tile ", a.index()), target_.cmx_usable_bytes,
                 cat("(", target_.cmx_usable_bytes, " usable bytes)")};
            return true;
        }
        return bad_index(cat("unknown memory space ", int(a.space())));
    }

    // Checks that bytes [offset + lo, offset + hi) of the addressed section exist.
    void check_range(const Ctx &c, const std::string &field, const Address &a, int64_t lo,
                     int64_t hi) const {
        Section s;
        if (!section_of(c, field, a, s)) return;
        int64_t begin = 0, end = 0;
        if (a.offset() > uint64_t(std::numeric_limits<int64_t>::max()) ||
            __builtin_add_overflow(int64_t(a.offset()), lo, &begin) ||
            __builtin_add_overflow(int64_t(a.offset()), hi, &end)) {
            c.add(field, cat("offset ", a.offset(), ": byte range overflows 64 bits"));
            return;
        }
        if (begin < 0)
            c.add(field, cat("bytes [", begin, ", ", end, ") start before ", s.name));
        else if (uint64_t(end) > s.size)
            c.add(field,
                  cat("bytes [", begin, ", ", end, ") past the end of ", s.name, " ", s.size_note));
    }

    // Checks a tensor view: known dtype, rank in [1, kMaxRank], no empty dimension, every byte
    // it touches inside its section. False when its dims or dtype are unusable for further
    // (shape) checks.
    bool check_tensor(const Ctx &c, const std::string &field, const TensorRef *t) {
        if (!aligned(t->dims())) {
            c.add(field, "dims: misaligned vector (corrupted blob)");
            return false;
        }
        if (!valid(t->dtype())) {
            c.add(field, cat("unknown dtype ", int(t->dtype())));
            return false;
        }
        uint32_t rank = t->dims()->size();
        if (rank == 0 || rank > kMaxRank) {
            c.add(field, cat("rank ", rank, " not in [1, ", kMaxRank, "]"));
            return false;
        }
        problems_.charge(rank);
        int64_t lo = 0, hi = 0; // element offsets of the first and last element touched
        bool ok = true;
        for (uint32_t i = 0; i < rank; ++i) {
            const Dim &d = *t->dims()->Get(i);
            if (d.extent() == 0) {
                c.add(field, cat("dims[", i, "]: extent 0 (empty tensor)"));
                return false;
            }
            ok &= add_product(d.stride() < 0 ? lo : hi, int64_t(d.extent()) - 1, d.stride());
        }
        int64_t size = dtype_bytes(t->dtype());
        int64_t begin = 0, end = 0;
        if (!ok || !add_product(begin, lo, size) || !add_product(end, hi + 1, size)) {
            c.add(field, "dims: byte range overflows 64 bits");
            return true;
        }
        check_range(c, field, *t->address(), begin, end);
        return true;
    }

    // ---- Kernels and barriers ----------------------------------------------------------

    void check_kernels() {
        problems_.charge(size_of(blob_.kernels()));
        for (uint32_t i = 0; i < size_of(blob_.kernels()); ++i) {
            const Kernel &k = *blob_.kernels()->Get(i);
            Ctx c{&problems_, cat("kernel ", i, " ", quoted(k.name()))};
            if (k.entry()->size() == 0) c.add("entry", "empty");
            if (k.object()->size() == 0) c.add("object", "empty");
            check_kernel_figures(c, k);
            problems_.charge(k.args()->size());
            uint32_t outputs = 0;
            bool reads_ok = true;
            for (uint32_t a = 0; a < k.args()->size(); ++a) {
                reads_ok = check_kernel_arg(c, a, *k.args()->Get(a)) && reads_ok;
                outputs += k.args()->Get(a)->kind() == ArgKind::OutputBuffer;
            }
            if (outputs == 0) c.add("args", "no output buffer, a kernel has one or more");
            kernel_reads_ok_.push_back(reads_ok);
            problems_.charge(k.object()->size() / 64);
            const Sha256 digest = kernel_digest(k);
            if (k.sha256()->size() != digest.size() ||
                !std::equal(digest.begin(), digest.end(), k.sha256()->begin())) {
                c.add("sha256", "does not match the kernel's entry, contract and object: the "
                                "kernel is corrupted");
                continue; // its object is not worth parsing
            }
            try {
                sim::prepare_kernel_image(k, printable(k.name()->c_str(), k.name()->size()));
            } catch (const BlobError &e) {
                c.add("object", e.what());
            }
        }
    }

    // What the timing model reads of a kernel: finite, positive, and a vector of lanes that fit.
    void check_kernel_figures(const Ctx &c, const Kernel &k) const {
        const uint32_t max_lanes = uint32_t(target_.shave_vector_bits / 8);
        if (k.vector_lanes() < 1 || k.vector_lanes() > max_lanes)
            c.add("vector_lanes", cat(k.vector_lanes(), " not in [1, ", max_lanes, "]"));
        auto check = [&](const char *field, double value, bool zero_allowed) {
            const bool in_range =
                (zero_allowed ? value >= 0 : value > 0) && value <= kMaxPerVectorFigure;
            if (in_range) return;
            char text[96];
            std::snprintf(text, sizeof text, "%g not in %c0, %g]", value, zero_allowed ? '[' : '(',
                          kMaxPerVectorFigure);
            c.add(field, text);
        };
        check("arith_ops_per_vector", k.arith_ops_per_vector(), true);
        check("special_ops_per_vector", k.special_ops_per_vector(), true);
        // Every kernel stores its output.
        check("cmx_bytes_per_vector", k.cmx_bytes_per_vector(), false);
    }

    // False when the argument's read bounds are malformed (reported).
    bool check_kernel_arg(const Ctx &c, uint32_t index, const KernelArg &arg) const {
        std::string field = cat("args[", index, "] ", quoted(arg.name()));
        if (!valid(arg.kind())) c.add(field, cat("unknown kind ", int(arg.kind())));
        if (!valid(arg.dtype())) c.add(field, cat("unknown dtype ", int(arg.dtype())));
        if (is_buffer(arg.kind()) && (arg.rank() == 0 || arg.rank() > kMaxRank))
            c.add(field, cat("buffer rank ", int(arg.rank()), " not in [1, ", kMaxRank, "]"));
        const uint32_t reads = size_of(arg.reads());
        if (reads == 0) return true;
        if (arg.kind() != ArgKind::InputBuffer || reads != arg.rank()) {
            c.add(field, cat("reads: ", reads, " bounds; an input buffer has one per dimension ",
                             "(or none), other arguments none"));
            return false;
        }
        bool ok = true;
        for (uint32_t d = 0; d < reads; ++d) {
            const ReadBound &r = *arg.reads()->Get(d);
            const bool constant = r.source() == -1 && r.scale() == 0;
            const bool of_output = r.source() >= 0 && r.source() < int(kMaxRank) && r.scale() > 0;
            if (!(constant || of_output) || r.divisor() < 1 || r.min_lo() > r.min_hi() ||
                r.max_lo() > r.max_hi()) {
                c.add(cat(field, " reads[", d, "]"),
                      cat("source ", int(r.source()), ", scale ", r.scale(), ", divisor ",
                          r.divisor(), ", clamps [", r.min_lo(), ", ", r.min_hi(), "] and [",
                          r.max_lo(), ", ", r.max_hi(),
                          "]: needs source -1 with scale 0 or an output dimension with scale > "
                          "0, divisor >= 1, and ordered clamps"));
                ok = false;
            }
        }
        return ok;
    }

    std::string barrier_where(uint32_t b) const {
        return cat("barrier ", b, " (physical ", blob_.barriers()->Get(b)->physical_id(), ")");
    }

    void check_barrier_ids() {
        problems_.charge(barrier_count_);
        for (uint32_t b = 0; b < barrier_count_; ++b) {
            uint32_t id = blob_.barriers()->Get(b)->physical_id();
            if (id >= uint32_t(target_.barriers))
                problems_.add(cat(barrier_where(b), ": physical_id: ", id, " but ", target_.name,
                                  " has ", target_.barriers, " barriers"));
        }
    }

    // ---- Queues and tasks --------------------------------------------------------------

    void check_queues() {
        std::map<std::tuple<EngineKind, uint32_t, uint32_t>, uint32_t> seen;
        uint32_t queues = size_of(blob_.queues());
        problems_.charge(queues);
        producers_.resize(barrier_count_);
        consumers_.resize(barrier_count_);
        for (uint32_t qi = 0; qi < queues; ++qi) {
            const TaskQueue &q = *blob_.queues()->Get(qi);
            Ctx c{&problems_, cat("queue ", qi, " (", describe_queue(q), ")")};
            check_queue_id(c, q);
            auto [it, fresh] = seen.emplace(std::make_tuple(q.engine(), q.tile(), q.index()), qi);
            if (!fresh) c.add("engine", cat("same engine as queue ", it->second));
            problems_.charge(q.tasks()->size());
            for (uint32_t t = 0; t < q.tasks()->size(); ++t) check_task({q.tasks()->Get(t), &q});
        }
    }

    void check_queue_id(const Ctx &c, const TaskQueue &q) const {
        auto within = [&](const char *field, uint32_t value, int count, const std::string &what) {
            if (value >= uint32_t(count))
                c.add(field, cat(what, " ", value, " does not exist (", target_.name, " has ",
                                 count, ")"));
        };
        auto zero = [&](const char *field, uint32_t value, const char *why) {
            if (value != 0) c.add(field, cat("must be 0 ", why, ", got ", value));
        };
        switch (q.engine()) {
        case EngineKind::Dma:
            within("index", q.index(), target_.dma_engines, "DMA engine");
            zero("tile", q.tile(), "(DMA engines are shared by all tiles)");
            return;
        case EngineKind::Dpu:
            within("tile", q.tile(), target_.tiles, "tile");
            within("index", q.index(), target_.dpus_per_tile, "DPU");
            return;
        case EngineKind::Shave:
            within("tile", q.tile(), target_.tiles, "tile");
            zero("index", q.index(), "(one SHAVE queue per tile)");
            return;
        }
        c.add("engine", cat("unknown engine ", int(q.engine())));
    }

    void check_task(TaskRef ref) {
        auto index = uint32_t(tasks_.size());
        tasks_.push_back(ref);
        const Task &t = *ref.task;
        Ctx c{&problems_, "task " + describe(ref)};
        std::vector<uint32_t> waits = barrier_list(c, "wait_barriers", t.wait_barriers());
        std::vector<uint32_t> updates = barrier_list(c, "update_barriers", t.update_barriers());
        for (uint32_t b : waits) consumers_[b].push_back(index);
        for (uint32_t b : updates) producers_[b].push_back(index);
        std::vector<uint32_t> both;
        std::set_intersection(waits.begin(), waits.end(), updates.begin(), updates.end(),
                              std::back_inserter(both));
        both.erase(std::unique(both.begin(), both.end()), both.end());
        for (uint32_t b : both)
            c.add("update_barriers",
                  cat("barrier ", b, " is also in wait_barriers (the task would wait for itself)"));
        check_kind(c, *ref.queue, t);
    }

    // The valid barrier indices of a list, sorted, repeats kept (they count in the barrier's
    // producer or consumer count); reports bad and repeated ones.
    std::vector<uint32_t> barrier_list(const Ctx &c, const char *field,
                                       const flatbuffers::Vector<uint32_t> *list) {
        problems_.charge(size_of(list));
        std::vector<uint32_t> out;
        for (uint32_t i = 0; i < size_of(list); ++i) {
            uint32_t b = list->Get(i);
            if (b < barrier_count_)
                out.push_back(b);
            else
                c.add(cat(field, "[", i, "]"),
                      cat("barrier ", b, " does not exist (the blob has ", barrier_count_, ")"));
        }
        std::sort(out.begin(), out.end());
        for (size_t i = 1; i < out.size(); ++i)
            if (out[i] == out[i - 1] && (i == 1 || out[i - 2] != out[i]))
                c.add(field, cat("barrier ", out[i], " listed more than once"));
        return out;
    }

    void check_kind(const Ctx &c, const TaskQueue &q, const Task &t) {
        auto engine_matches = [&](EngineKind want, const char *kind) {
            if (q.engine() != want)
                c.add("kind", cat("a ", kind, " on a ", to_string(q.engine()), " queue"));
        };
        switch (t.kind_type()) {
        case TaskKind::DmaTask:
            engine_matches(EngineKind::Dma, "DmaTask");
            check_dma(c, *t.kind_as_DmaTask());
            return;
        case TaskKind::DpuTask:
            engine_matches(EngineKind::Dpu, "DpuTask");
            check_dpu(c, *t.kind_as_DpuTask(), q.tile());
            return;
        case TaskKind::ShaveTask:
            engine_matches(EngineKind::Shave, "ShaveTask");
            check_shave(c, *t.kind_as_ShaveTask(), q.tile());
            return;
        default:
            c.add("kind", cat("unknown task kind ", int(t.kind_type())));
        }
    }

    // ---- DMA ---------------------------------------------------------------------------

    void check_dma(const Ctx &c, const DmaTask &d) {
        if (!aligned(d.dims()) || !aligned(d.dst())) {
            c.add(aligned(d.dims()) ? "dst" : "dims", "misaligned vector (corrupted blob)");
            return;
        }
        uint32_t dims = size_of(d.dims()), dsts = d.dst()->size();
        bool shape_ok = d.line_bytes() > 0 && dims <= kMaxDmaDims;
        if (d.line_bytes() == 0) c.add("line_bytes", "must be > 0");
        if (dims > kMaxDmaDims) c.add("dims", cat(dims, " dims, at most ", kMaxDmaDims));
        for (uint32_t i = 0; i < std::min(dims, kMaxDmaDims); ++i)
            if (d.dims()->Get(i)->count() == 0) {
                c.add(cat("dims[", i, "]"), "count must be > 0");
                shape_ok = false;
            }
        if (dsts == 0) c.add("dst", "no destination");
        problems_.charge(dsts);
        for (uint32_t i = 0; i < dsts && dsts > 1; ++i) {
            MemSpace space = d.dst()->Get(i)->space();
            if (space != MemSpace::Cmx)
                c.add(cat("dst[", i, "]"),
                      cat("a broadcast (", dsts, " destinations) goes only to CMX, got ",
                          name_of(space)));
        }
        if (!shape_ok) return;
        uint64_t lines = dsts;
        for (uint32_t i = 0; i < dims; ++i)
            lines = std::min<uint64_t>(lines * d.dims()->Get(i)->count(), kMaxDmaLines + 1);
        if (lines > kMaxDmaLines || lines * d.line_bytes() > kMaxDmaBytes)
            c.add("dims", cat("the copy moves more than a DMA task may (", kMaxDmaLines,
                              " lines and ", kMaxDmaBytes, " bytes over all destinations)"));
        check_dma_side(c, "src", *d.src(), d, true);
        for (uint32_t i = 0; i < dsts; ++i)
            check_dma_side(c, cat("dst[", i, "]"), *d.dst()->Get(i), d, false);
    }

    // Bytes touched on one side of a copy: lines of line_bytes at the strided positions.
    void check_dma_side(const Ctx &c, const std::string &field, const Address &a, const DmaTask &d,
                        bool src) const {
        int64_t lo = 0, hi = d.line_bytes();
        bool ok = true;
        for (uint32_t i = 0; i < size_of(d.dims()); ++i) {
            const DmaDim &dim = *d.dims()->Get(i);
            int64_t stride = src ? dim.src_stride() : dim.dst_stride();
            ok &= add_product(stride < 0 ? lo : hi, int64_t(dim.count()) - 1, stride);
        }
        if (!ok)
            c.add(field, "dims: byte range overflows 64 bits");
        else
            check_range(c, field, a, lo, hi);
    }

    // ---- DPU ---------------------------------------------------------------------------

    void check_dpu(const Ctx &c, const DpuTask &d, uint32_t tile) {
        if (!valid(d.op())) {
            c.add("op", cat("unknown DPU op ", int(d.op())));
            return;
        }
        bool in_ok = check_activation(c, "input", d.input(), tile, true);
        bool out_ok = check_activation(c, "output", d.output(), tile, false);
        if (in_ok) check_dtype(c, "input", d.input()->dtype());
        if (out_ok) check_dtype(c, "output", d.output()->dtype());
        if (in_ok && out_ok && d.input()->dtype() == DType::F16 && is_8bit(d.output()->dtype()))
            c.add("output", cat("dtype ", name_of(d.output()->dtype()),
                                " with an F16 input: the PPE turns float accumulators into F16 "
                                "only"));
        bool window_ok = check_window(c, d);
        if (in_ok && out_ok && window_ok) check_output_extents(c, d);
        if (in_ok) check_channel_groups(c, "input", *d.input(), is_convolution(d.op()));
        if (out_ok) check_channel_groups(c, "output", *d.output(), false);
        check_operands(c, d, tile, in_ok, out_ok);
        check_ppe(c, d);
        if (in_ok) check_zero_point(c, "input", d.input()->dtype(), d.input()->zero_point());
        if (out_ok) check_zero_point(c, "output", d.output()->dtype(), d.output()->zero_point());
        if (d.input2() && valid(d.input2()->dtype()))
            check_zero_point(c, "input2", d.input2()->dtype(), d.input2()->zero_point());
        if (d.weights() && valid(d.weights()->dtype()))
            check_zero_point(c, "weights_zero_point", d.weights()->dtype(), d.weights_zero_point());
        if (out_ok) check_variants(c, d, in_ok);
    }

    static bool is_convolution(DpuOp op) { return op == DpuOp::Conv || op == DpuOp::MatMul; }

    // The DPU reads and writes whole groups of `channel_alignment` channels (tensors are
    // padded); only a convolution's input of fewer channels runs unpadded (channel-major).
    void check_channel_groups(const Ctx &c, const char *field, const TensorRef &t,
                              bool channel_major_allowed) const {
        const uint64_t channels = t.dims()->Get(0)->extent();
        const uint64_t group = uint64_t(target_.channel_alignment);
        if (group <= 1 || channels % group == 0) return;
        if (channel_major_allowed && channels < group) return;
        c.add(field,
              cat("C ", channels, " is not a multiple of ", group,
                  ": the DPU reads and writes whole groups of ", group,
                  " channels (pad the channels", channel_major_allowed ? "; fewer than " : "",
                  channel_major_allowed ? cat(group, " run channel-major") : std::string(), ")"));
    }

    // A DPU activation: (C, W, H, N) NHWC with batch 1, in CMX (the DPU reads and writes only
    // CMX; inputs of its own tile, outputs possibly broadcast to another tile's CMX).
    bool check_activation(const Ctx &c, const char *field, const TensorRef *t, uint32_t tile,
                          bool own_tile) {
        if (!check_tensor(c, field, t)) return false;
        check_in_cmx(c, field, *t, tile, own_tile);
        if (t->dims()->size() != 4) {
            c.add(field, cat("DPU activations need 4 dims (C, W, H, N), got ", t->dims()->size()));
            return false;
        }
        if (t->dims()->Get(0)->stride() != 1)
            c.add(field, cat("C stride must be 1 (NHWC), got ", t->dims()->Get(0)->stride()));
        if (t->dims()->Get(3)->extent() != 1)
            c.add(field, cat("batch N is ", t->dims()->Get(3)->extent(), ", the DPU takes 1"));
        check_dpu_tensor_size(c, field, *t);
        return true;
    }

    void check_dpu_tensor_size(const Ctx &c, const char *field, const TensorRef &t) const {
        int64_t span = 1;
        bool ok = true;
        for (const Dim *d : *t.dims()) {
            ok &= d->extent() <= uint64_t(kMaxDpuTensorBytes) && d->stride() != INT64_MIN;
            ok = ok && add_product(span, int64_t(d->extent()) - 1, std::abs(d->stride()));
        }
        ok =
            ok && add_product(span, span, dtype_bytes(t.dtype()) - 1) && span <= kMaxDpuTensorBytes;
        if (!ok)
            c.add(field, cat("spans more than ", kMaxDpuTensorBytes,
                             " bytes or elements, which no DPU tensor may"));
    }

    void check_in_cmx(const Ctx &c, const char *field, const TensorRef &t, uint32_t tile,
                      bool own_tile) const {
        const Address &a = *t.address();
        if (a.space() != MemSpace::Cmx)
            c.add(field, cat("in ", name_of(a.space()), ", the DPU reads and writes only CMX"));
        else if (own_tile && a.index() != tile)
            c.add(field, cat("in CMX tile ", a.index(), ", the DPU of tile ", tile,
                             " reads only its own CMX"));
    }

    // The DPU reads and writes U8, I8 and F16 (the timing model knows no other).
    void check_dtype(const Ctx &c, const char *field, DType t) const {
        if (!dpu_input_type(t))
            c.add(field, cat("dtype ", name_of(t), " not supported by the DPU (U8, I8 or F16)"));
    }

    bool check_window(const Ctx &c, const DpuTask &d) const {
        bool ok = true;
        auto kernel = [&](const char *field, int k) {
            if (k < 1 || k > target_.max_kernel) {
                c.add(field, cat(k, " not in [1, ", target_.max_kernel, "]"));
                ok = false;
            }
        };
        auto stride = [&](const char *field, int s) {
            if (s < 1 || s > target_.max_stride) {
                c.add(field, cat(s, " not in [1, ", target_.max_stride, "]"));
                ok = false;
            }
        };
        auto pad = [&](const char *field, int p, const char *kernel_field, int k) {
            if (p >= k) {
                c.add(field, cat(p, " must be < ", kernel_field, " ", k));
                ok = false;
            }
        };
        kernel("kernel_w", d.kernel_w());
        kernel("kernel_h", d.kernel_h());
        stride("stride_w", d.stride_w());
        stride("stride_h", d.stride_h());
        pad("pad_left", d.pad_left(), "kernel_w", d.kernel_w());
        pad("pad_right", d.pad_right(), "kernel_w", d.kernel_w());
        pad("pad_top", d.pad_top(), "kernel_h", d.kernel_h());
        pad("pad_bottom", d.pad_bottom(), "kernel_h", d.kernel_h());
        return ok;
    }

    // out = (in + pad_a + pad_b - kernel) / stride + 1, for W and H.
    void check_output_extents(const Ctx &c, const DpuTask &d) const {
        Chw in = chw_of(*d.input()), out = chw_of(*d.output());
        auto axis = [&](const char *name, uint64_t i, uint64_t o, int pa, int pb, int k, int s) {
            uint64_t padded = i + uint64_t(pa) + uint64_t(pb);
            if (padded < uint64_t(k)) {
                c.add("input", cat(name, " ", i, " padded by ", pa, " + ", pb,
                                   " is smaller than the kernel ", k));
                return;
            }
            uint64_t expected = (padded - uint64_t(k)) / uint64_t(s) + 1;
            if (o != expected)
                c.add("output", cat(name, " ", o, ", expected (", i, " + ", pa, " + ", pb, " - ", k,
                                    ") / ", s, " + 1 = ", expected));
        };
        axis("W", in.w, out.w, d.pad_left(), d.pad_right(), d.kernel_w(), d.stride_w());
        axis("H", in.h, out.h, d.pad_top(), d.pad_bottom(), d.kernel_h(), d.stride_h());
    }

    void check_operands(const Ctx &c, const DpuTask &d, uint32_t tile, bool in_ok, bool out_ok) {
        DpuOp op = d.op();
        bool weighted = op == DpuOp::Conv || op == DpuOp::DepthwiseConv || op == DpuOp::MatMul;
        if (weighted) {
            check_weights(c, d, tile, in_ok, out_ok);
            check_weight_table(c, d, tile, out_ok);
        }
        if (op == DpuOp::Eltwise) check_input2(c, d, tile, in_ok, out_ok);
        bool per_channel =
            op == DpuOp::DepthwiseConv || op == DpuOp::MaxPool || op == DpuOp::AvgPool;
        if (per_channel && in_ok && out_ok && chw_of(*d.output()).c != chw_of(*d.input()).c)
            c.add("output", cat("C ", chw_of(*d.output()).c, " must equal the input C ",
                                chw_of(*d.input()).c, " for ", to_string(op)));
    }

    // Conv/MatMul weights are (IC, KW, KH, OC); DepthwiseConv weights (1, KW, KH, C).
    void check_weights(const Ctx &c, const DpuTask &d, uint32_t tile, bool in_ok, bool out_ok) {
        const TensorRef *w = d.weights();
        if (!w) {
            c.add("weights", cat("missing (", to_string(d.op()), " needs weights)"));
            return;
        }
        if (!check_tensor(c, "weights", w)) return;
        check_in_cmx(c, "weights", *w, tile, true);
        DType in = d.input()->dtype();
        if (in_ok && dpu_input_type(in) && is_8bit(w->dtype()) != is_8bit(in))
            c.add("weights",
                  cat("dtype ", name_of(w->dtype()), " does not go with input ", name_of(in),
                      " (8-bit inputs need U8/I8 weights, "
                      "F16 inputs F16 weights)"));
        else if (!is_8bit(w->dtype()) && w->dtype() != DType::F16)
            c.add("weights", cat("dtype ", name_of(w->dtype()), " not supported (U8, I8 or F16)"));
        if (!in_ok || !out_ok) return;
        bool depthwise = d.op() == DpuOp::DepthwiseConv;
        uint64_t want[4] = {depthwise ? 1 : chw_of(*d.input()).c, d.kernel_w(), d.kernel_h(),
                            chw_of(*d.output()).c};
        bool match = w->dims()->size() == 4;
        for (uint32_t i = 0; match && i < 4; ++i) match = w->dims()->Get(i)->extent() == want[i];
        if (!match)
            c.add("weights",
                  cat("dims ", extents(*w), " must be (", want[0], ", ", want[1], ", ", want[2],
                      ", ", want[3], ") = (", depthwise ? "1" : "IC", ", KW, KH, ",
                      depthwise ? "C" : "OC", ") for ", to_string(d.op())));
        const uint64_t per_channel = want[0] * want[1] * want[2];
        if (per_channel > kMaxDpuChannelWeights)
            c.add("weights", cat(per_channel,
                                 " weights per output channel (IC x KW x KH), more "
                                 "than the DPU takes (",
                                 kMaxDpuChannelWeights, ")"));
    }

    static std::string extents(const TensorRef &t) {
        std::string s = "(";
        for (uint32_t i = 0; i < t.dims()->size(); ++i)
            s += cat(i ? ", " : "", t.dims()->Get(i)->extent());
        return s + ")";
    }

    // I32, dims (4, OC): one 16-byte entry per output channel (layout in docs/blob.md).
    void check_weight_table(const Ctx &c, const DpuTask &d, uint32_t tile, bool out_ok) {
        const TensorRef *wt = d.weight_table();
        if (!wt) {
            c.add("weight_table", cat("missing (", to_string(d.op()), " needs a weight table)"));
            return;
        }
        if (!check_tensor(c, "weight_table", wt)) return;
        check_in_cmx(c, "weight_table", *wt, tile, true);
        if (wt->dtype() != DType::I32)
            c.add("weight_table", cat("dtype must be I32, got ", name_of(wt->dtype())));
        if (!out_ok) return;
        uint64_t oc = chw_of(*d.output()).c;
        const auto &dims = *wt->dims();
        if (dims.size() != 2 || dims.Get(0)->extent() != 4 || dims.Get(1)->extent() != oc)
            c.add("weight_table", cat("dims ", extents(*wt), " must be (4, ", oc,
                                      "): 4 values per output channel"));
        else if (dims.Get(0)->stride() != 1)
            c.add("weight_table",
                  cat("an entry's 4 values must be contiguous (stride 1), got stride ",
                      dims.Get(0)->stride()));
    }

    void check_input2(const Ctx &c, const DpuTask &d, uint32_t tile, bool in_ok, bool out_ok) {
        if (!d.input2()) {
            c.add("input2", "missing (Eltwise needs a second input)");
            return;
        }
        if (!check_activation(c, "input2", d.input2(), tile, true)) return;
        check_channel_groups(c, "input2", *d.input2(), false);
        if (!in_ok) return;
        Chw in = chw_of(*d.input()), in2 = chw_of(*d.input2());
        if (!(in2 == in))
            c.add("input2", cat("shape ", shape_str(in2), " differs from input ", shape_str(in)));
        if (d.input2()->dtype() != d.input()->dtype())
            c.add("input2", cat("dtype ", name_of(d.input2()->dtype()), " differs from input ",
                                name_of(d.input()->dtype())));
        if (out_ok && !(chw_of(*d.output()) == in))
            c.add("output", cat("shape ", shape_str(chw_of(*d.output())), " differs from input ",
                                shape_str(in), " (Eltwise)"));
    }

    // An 8-bit tensor's zero point is a value of its type; float tensors have none.
    void check_zero_point(const Ctx &c, const char *field, DType t, int32_t zero_point) const {
        const int32_t lo = t == DType::U8 ? 0 : t == DType::I8 ? -128 : 0;
        const int32_t hi = t == DType::U8 ? 255 : t == DType::I8 ? 127 : 0;
        if (zero_point < lo || zero_point > hi)
            c.add(field,
                  cat("zero point ", zero_point, " not in [", lo, ", ", hi, "] for ", name_of(t)));
    }

    void check_ppe(const Ctx &c, const DpuTask &d) const {
        const Ppe *ppe = d.ppe();
        if (!ppe) return;
        // The PPE multiplier is a 16-bit field, as in the weight table's requant word.
        if (ppe->mult() < 0 || ppe->mult() > 65535)
            c.add("ppe.mult", cat(ppe->mult(), " not in [0, 65535]"));
        if (ppe->relux_max() < 0) c.add("ppe.relux_max", cat(ppe->relux_max(), " is negative"));
        if (ppe->clamp_low() > ppe->clamp_high())
            c.add("ppe.clamp_low", cat(ppe->clamp_low(), " above clamp_high ", ppe->clamp_high()));
        if (!(ppe->fp_clamp_low() <= ppe->fp_clamp_high()))
            c.add("ppe.fp_clamp_low",
                  cat(ppe->fp_clamp_low(), " is not at most fp_clamp_high ", ppe->fp_clamp_high()));
        if (!std::isfinite(ppe->leaky_alpha()))
            c.add("ppe.leaky_alpha", cat(ppe->leaky_alpha(), " is not finite"));
        if (!std::isfinite(ppe->fp_scale()))
            c.add("ppe.fp_scale", cat(ppe->fp_scale(), " is not finite"));
        if (!valid(ppe->activation()))
            c.add("ppe.activation", cat("unknown activation ", int(ppe->activation())));
        if (d.op() == DpuOp::Eltwise && !valid(ppe->eltwise_op()))
            c.add("ppe.eltwise_op", cat("unknown eltwise op ", int(ppe->eltwise_op())));
        // Shifts are 6-bit fields in the PPE (as in the weight table's requant word); the
        // simulator's rounding shift is only defined up to 63.
        if (ppe->shift() > kMaxPpeShift)
            c.add("ppe.shift", cat(int(ppe->shift()), " > ", kMaxPpeShift));
        if (ppe->leaky_shift() > kMaxPpeShift)
            c.add("ppe.leaky_shift", cat(int(ppe->leaky_shift()), " > ", kMaxPpeShift));
    }

    struct Box {
        uint32_t start[3], end[3];
        uint32_t index;
    };

    static std::string box_str(const Box &b) {
        return cat("(", b.start[0], ", ", b.start[1], ", ", b.start[2], ")-(", b.end[0], ", ",
                   b.end[1], ", ", b.end[2], ")");
    }

    void check_variants(const Ctx &c, const DpuTask &d, bool in_ok) {
        uint32_t n = d.variants()->size();
        if (n == 0) c.add("variants", "none (a DPU task needs at least one workload)");
        problems_.charge(n);
        Chw out = chw_of(*d.output());
        const uint64_t limit[3] = {out.w, out.h, out.c};
        std::vector<Box> boxes;
        for (uint32_t i = 0; i < n; ++i) {
            const DpuVariant &v = *d.variants()->Get(i);
            std::string field = cat("variants[", i, "]");
            if (in_ok && dpu_input_type(d.input()->dtype()))
                check_mpe_mode(c, field, v, d.input()->dtype());
            Box box{};
            box.index = i;
            if (variant_box(c, field, v, limit, box)) boxes.push_back(box);
        }
        check_overlaps(c, boxes);
        if (in_ok) check_work(c, d, boxes);
    }

    // The multiply-accumulates (or window elements) the task computes, against kMaxDpuMacs.
    void check_work(const Ctx &c, const DpuTask &d, const std::vector<Box> &boxes) const {
        const uint64_t per_output = uint64_t(d.kernel_w()) * d.kernel_h() *
                                    (is_convolution(d.op()) ? chw_of(*d.input()).c : 1);
        uint64_t outputs = 0;
        for (const Box &b : boxes)
            outputs +=
                uint64_t(b.end[0] - b.start[0]) * (b.end[1] - b.start[1]) * (b.end[2] - b.start[2]);
        const long double macs = (long double)outputs * per_output;
        if (macs > (long double)kMaxDpuMacs)
            c.add("variants",
                  cat("the task computes ", uint64_t(std::min<long double>(macs, 1e19L)),
                      " multiply-accumulates, more than a task may (", kMaxDpuMacs, ")"));
    }

    void check_mpe_mode(const Ctx &c, const std::string &field, const DpuVariant &v, DType input) {
        problems_.charge(v.mpe_mode()->size());
        const target::MpeMode *mode = target_.find_mpe_mode(v.mpe_mode()->str());
        if (!mode) {
            std::string known;
            for (const auto &m : target_.mpe_modes) known += (known.empty() ? "" : ", ") + m.name;
            c.add(field, cat("mpe_mode ", quoted(v.mpe_mode()), " is not an MPE mode of ",
                             target_.name, " (", known, ")"));
        } else if (is_8bit(input) ? !mode->int8 : !mode->fp16) {
            c.add(field,
                  cat("mpe_mode ", mode->name, " does not take ", name_of(input), " inputs"));
        }
    }

    // The variant's output region: 3 values (x, y, c) each, start < end <= output extents.
    bool variant_box(const Ctx &c, const std::string &field, const DpuVariant &v,
                     const uint64_t limit[3], Box &box) const {
        if (v.start()->size() != 3 || v.end()->size() != 3) {
            c.add(field, cat("start and end need 3 values (x, y, c), got ", v.start()->size(),
                             " and ", v.end()->size()));
            return false;
        }
        for (uint32_t i = 0; i < 3; ++i) {
            box.start[i] = v.start()->Get(i);
            box.end[i] = v.end()->Get(i);
        }
        bool ordered = true, inside = true;
        for (uint32_t i = 0; i < 3; ++i) {
            ordered &= box.start[i] < box.end[i];
            inside &= box.end[i] <= limit[i];
        }
        if (!ordered) c.add(field, cat("empty region ", box_str(box), ": start must be < end"));
        if (!inside)
            c.add(field, cat("region ", box_str(box), " exceeds the output (W ", limit[0], ", H ",
                             limit[1], ", C ", limit[2], ")"));
        return ordered && inside;
    }

    // Two variants writing the same output element would race. Sweep along x: only boxes whose
    // x ranges intersect are compared; the first overlap is reported.
    void check_overlaps(const Ctx &c, std::vector<Box> &boxes) {
        std::sort(boxes.begin(), boxes.end(),
                  [](const Box &a, const Box &b) { return a.start[0] < b.start[0]; });
        for (size_t i = 0; i < boxes.size(); ++i) {
            size_t j = i + 1;
            for (; j < boxes.size() && boxes[j].start[0] < boxes[i].end[0]; ++j) {
                const Box &a = boxes[i], &b = boxes[j];
                bool overlap = a.start[1] < b.end[1] && b.start[1] < a.end[1] &&
                               a.start[2] < b.end[2] && b.start[2] < a.end[2];
                if (!overlap) continue;
                const Box &first = a.index < b.index ? a : b, &second = a.index < b.index ? b : a;
                c.add(cat("variants[", first.index, "]"),
                      cat("region ", box_str(first), " overlaps variants[", second.index, "] ",
                          box_str(second)));
                return;
            }
            problems_.charge(j - i);
        }
    }

    // ---- SHAVE -------------------------------------------------------------------------

    void check_shave(const Ctx &c, const ShaveTask &s, uint32_t tile) {
        int available = target_.shaves_available(
            int(std::min<uint32_t>(tile, uint32_t(std::numeric_limits<int32_t>::max()))));
        if (s.shaves() < 1 || s.shaves() > available)
            c.add("shaves", cat(int(s.shaves()), " not in [1, ", available, "]"));
        uint32_t kernels = size_of(blob_.kernels()), args = s.args()->size();
        problems_.charge(args);
        if (s.kernel() >= kernels) {
            c.add("kernel", cat("index ", s.kernel(), " but the blob has ", kernels, " kernels"));
            for (uint32_t i = 0; i < args; ++i) {
                const TensorRef *t = s.args()->Get(i)->tensor();
                if (t) check_tensor(c, cat("args[", i, "]"), t);
            }
            return;
        }
        const Kernel &k = *blob_.kernels()->Get(s.kernel());
        if (args != k.args()->size())
            c.add("args",
                  cat(args, " given, kernel ", quoted(k.name()), " takes ", k.args()->size()));
        bool windows_ok = args == k.args()->size();
        for (uint32_t i = 0; i < std::min(args, k.args()->size()); ++i)
            windows_ok &= check_shave_arg(c, i, *s.args()->Get(i), *k.args()->Get(i));
        if (windows_ok) windows_ok = check_outputs_alike(c, s, k);
        if (windows_ok && kernel_reads_ok_[s.kernel()]) check_reads(c, s, k);
    }

    // The outputs of a kernel of several (a Halide Tuple) cover one region: the simulator cuts
    // them among the SHAVEs alike, and the kernel's asserts refuse outputs that differ.
    bool check_outputs_alike(const Ctx &c, const ShaveTask &s, const Kernel &k) const {
        const ShaveArg *first = nullptr;
        for (uint32_t i = 0; i < k.args()->size(); ++i) {
            if (k.args()->Get(i)->kind() != ArgKind::OutputBuffer) continue;
            const ShaveArg &arg = *s.args()->Get(i);
            if (!first) {
                first = &arg;
                continue;
            }
            const uint32_t rank = arg.tensor()->dims()->size();
            bool alike = rank == first->tensor()->dims()->size();
            for (uint32_t d = 0; alike && d < rank; ++d) {
                auto min = [d](const ShaveArg &a) {
                    return size_of(a.mins()) ? a.mins()->Get(d) : 0;
                };
                alike = arg.tensor()->dims()->Get(d)->extent() ==
                            first->tensor()->dims()->Get(d)->extent() &&
                        min(arg) == min(*first);
            }
            if (!alike) {
                c.add(cat("args[", i, "] ", quoted(k.args()->Get(i)->name())),
                      "an output covering another region than the kernel's first output");
                return false;
            }
        }
        return true;
    }

    // A kernel checks its buffers as Halide's asserts do and fails the call when one is not
    // what it was compiled for: the same checks here, so that what verify accepts runs. True
    // when the argument is a buffer window whose reads can be checked (check_reads).
    bool check_shave_arg(const Ctx &c, uint32_t i, const ShaveArg &arg, const KernelArg &want) {
        std::string field = cat("args[", i, "] ", quoted(want.name()));
        const TensorRef *t = arg.tensor();
        if (!is_buffer(want.kind())) {
            if (t) c.add(field, "a scalar argument must not have a tensor");
            check_scalar(c, field, arg, want);
            return true;
        }
        if (!t) {
            c.add(field, "a buffer argument needs a tensor");
            return false;
        }
        if (!check_tensor(c, field, t)) return false;
        bool ok = true;
        auto problem = [&](const std::string &what) {
            c.add(field, what);
            ok = false;
        };
        if (t->dims()->size() != want.rank())
            problem(cat("rank ", t->dims()->size(), ", the kernel takes ", int(want.rank())));
        if (t->dtype() != want.dtype())
            problem(
                cat("dtype ", name_of(t->dtype()), ", the kernel takes ", name_of(want.dtype())));
        if (t->dims()->Get(0)->stride() != 1)
            problem(cat("innermost stride ", t->dims()->Get(0)->stride(),
                        ", kernels take dense rows (stride 1)"));
        if (size_of(arg.mins()) != 0 && arg.mins()->size() != t->dims()->size())
            problem(cat("mins: ", arg.mins()->size(), " values for ", t->dims()->size(), " dims"));
        if (!ok) return false;
        // Halide's buffers hold int32 mins, extents and strides, and a kernel refuses a buffer
        // spanning 2^31 elements or more (halide_error_buffer_allocation_too_large).
        constexpr int64_t kInt32Max = std::numeric_limits<int32_t>::max();
        int64_t elements = 1;
        for (uint32_t d = 0; d < t->dims()->size(); ++d) {
            const Dim &dim = *t->dims()->Get(d);
            const int64_t min = size_of(arg.mins()) ? arg.mins()->Get(d) : 0;
            const int64_t extent = dim.extent(), stride = dim.stride();
            elements = std::min(elements * extent, kInt32Max + 1);
            if (extent > kInt32Max || stride < -kInt32Max || stride > kInt32Max ||
                extent * std::abs(stride) > kInt32Max || elements > kInt32Max)
                problem(cat("dims[", d, "]: extent ", extent, " and stride ", stride,
                            " exceed what a kernel's buffer holds (2^31 - 1 elements)"));
            else if (min + extent - 1 > kInt32Max)
                problem(cat("mins[", d, "]: ", min, " + extent ", extent,
                            " passes the largest coordinate (2^31 - 1)"));
        }
        return ok;
    }

    // A scalar argument's value is a value of its type.
    void check_scalar(const Ctx &c, const std::string &field, const ShaveArg &arg,
                      const KernelArg &want) const {
        if (want.kind() == ArgKind::ScalarFloat) {
            const double v = arg.float_value();
            if (std::isfinite(v) && std::abs(v) > std::numeric_limits<float>::max())
                c.add(field, cat("float_value ", v, " is beyond the float range"));
            return;
        }
        const int64_t v = arg.int_value();
        const int64_t lo = want.dtype() == DType::U8   ? 0
                           : want.dtype() == DType::I8 ? -128
                                                       : std::numeric_limits<int32_t>::min();
        const int64_t hi = want.dtype() == DType::U8   ? 255
                           : want.dtype() == DType::I8 ? 127
                                                       : std::numeric_limits<int32_t>::max();
        if (v < lo || v > hi)
            c.add(field,
                  cat("int_value ", v, " not in [", lo, ", ", hi, "] for ", name_of(want.dtype())));
    }

    // Every input window holds what the kernel reads (its `reads` bounds) for the task's output
    // window: the region the kernel's own checks require, so the call cannot fail them. Each
    // SHAVE's slice of the output reads a part of it (the bounds are non-decreasing).
    void check_reads(const Ctx &c, const ShaveTask &s, const Kernel &k) const {
        const ShaveArg *output = nullptr;
        for (uint32_t i = 0; i < k.args()->size(); ++i)
            if (k.args()->Get(i)->kind() == ArgKind::OutputBuffer) output = s.args()->Get(i);
        if (!output) return;
        auto window = [](const ShaveArg &arg, uint32_t d) {
            const int64_t min = size_of(arg.mins()) ? arg.mins()->Get(d) : 0;
            return std::make_pair(min, min + int64_t(arg.tensor()->dims()->Get(d)->extent()) - 1);
        };
        const uint32_t out_rank = output->tensor()->dims()->size();
        for (uint32_t i = 0; i < k.args()->size(); ++i) {
            const KernelArg &contract = *k.args()->Get(i);
            for (uint32_t d = 0; d < size_of(contract.reads()); ++d) {
                const ReadBound &r = *contract.reads()->Get(d);
                int64_t out_min = 0, out_max = 0;
                if (r.source() >= 0) {
                    if (uint32_t(r.source()) >= out_rank) {
                        c.add(cat("args[", i, "] ", quoted(contract.name())),
                              cat("reads[", d, "]: source ", int(r.source()), ", the output has ",
                                  out_rank, " dimensions"));
                        continue;
                    }
                    std::tie(out_min, out_max) = window(*output, uint32_t(r.source()));
                }
                const int64_t lo = read_bound(r, out_min, r.min_offset(), r.min_lo(), r.min_hi());
                const int64_t hi = read_bound(r, out_max, r.max_offset(), r.max_lo(), r.max_hi());
                const auto [in_min, in_max] = window(*s.args()->Get(i), d);
                if (lo < in_min || hi > in_max)
                    c.add(cat("args[", i, "] ", quoted(contract.name())),
                          cat("the kernel reads ", lo, "..", hi, " of dimension ", d,
                              " for its output, outside the window ", in_min, "..", in_max));
            }
        }
    }

    // clamp(scale * floor_div(v + shift, divisor) + offset, lo, hi), as blob.fbs defines it.
    static int64_t read_bound(const ReadBound &r, int64_t v, int64_t offset, int64_t lo,
                              int64_t hi) {
        // v, the shift and the offset fit 32 bits, the quotient 33, scale * quotient 64 but
        // for its sign: saturated, it still clamps to the same int32 bound.
        const int64_t numerator = v + r.shift();
        int64_t q = numerator / r.divisor();
        if (numerator % r.divisor() != 0 && numerator < 0) --q;
        int64_t value = 0;
        if (__builtin_mul_overflow(int64_t(r.scale()), q, &value) ||
            __builtin_add_overflow(value, offset, &value))
            value =
                q < 0 ? std::numeric_limits<int64_t>::min() : std::numeric_limits<int64_t>::max();
        return std::max<int64_t>(std::min<int64_t>(value, hi), lo);
    }

    // ---- Barrier counts ----------------------------------------------------------------

    void check_barrier_counts() {
        for (uint32_t b = 0; b < barrier_count_; ++b) {
            const Barrier &bar = *blob_.barriers()->Get(b);
            size_t producers = producers_[b].size(), consumers = consumers_[b].size();
            std::string where = barrier_where(b);
            if (bar.producer_count() != producers)
                problems_.add(cat(where, ": producer_count: ", bar.producer_count(), " but ",
                                  producers, " tasks update it"));
            if (bar.consumer_count() != consumers)
                problems_.add(cat(where, ": consumer_count: ", bar.consumer_count(), " but ",
                                  consumers, " tasks wait on it"));
            if (producers == 0 && consumers > 0)
                problems_.add(cat(where, ": no task updates it, so it is never released, but ",
                                  describe(tasks_[consumers_[b][0]]), " waits on it"));
        }
    }

    // ---- Dependency graph --------------------------------------------------------------
    // Nodes: the tasks (0..T-1, queue by queue, in queue order), then one node per barrier
    // (T..T+B-1). Edges: a task to the next task of its queue, a producer to its barrier, a
    // barrier to its consumers. Barrier nodes keep the edge count linear in the list sizes
    // (a barrier with P producers and C consumers costs P + C edges, not P * C).

    struct Csr {
        std::vector<uint32_t> begin, targets;
        const uint32_t *from(uint32_t n) const { return targets.data() + begin[n]; }
        const uint32_t *to(uint32_t n) const { return targets.data() + begin[n + 1]; }
    };

    static Csr make_csr(uint32_t nodes, const std::vector<std::pair<uint32_t, uint32_t>> &edges) {
        Csr g;
        g.begin.assign(nodes + 1, 0);
        for (const auto &e : edges) ++g.begin[e.first + 1];
        for (uint32_t n = 0; n < nodes; ++n) g.begin[n + 1] += g.begin[n];
        g.targets.resize(edges.size());
        std::vector<uint32_t> fill(g.begin.begin(), g.begin.end() - 1);
        for (const auto &e : edges) g.targets[fill[e.first]++] = e.second;
        return g;
    }

    void build_graph() {
        auto tasks = uint32_t(tasks_.size());
        nodes_ = tasks + barrier_count_;
        std::vector<std::pair<uint32_t, uint32_t>> edges;
        for (uint32_t t = 0; t + 1 < tasks; ++t)
            if (tasks_[t].queue == tasks_[t + 1].queue) edges.emplace_back(t, t + 1);
        for (uint32_t b = 0; b < barrier_count_; ++b) {
            for (uint32_t p : producers_[b]) edges.emplace_back(p, tasks + b);
            for (uint32_t q : consumers_[b]) edges.emplace_back(tasks + b, q);
        }
        problems_.charge(4 * (uint64_t(nodes_) + edges.size()));
        succ_ = make_csr(nodes_, edges);
        for (auto &e : edges) std::swap(e.first, e.second);
        pred_ = make_csr(nodes_, edges);
    }

    // Kahn's algorithm: fills order_/position_ with a topological order. True (and reported)
    // when the tasks cannot all run: some wait on each other in a cycle.
    bool find_deadlock() {
        build_graph();
        std::vector<uint32_t> indegree(nodes_);
        for (uint32_t n = 0; n < nodes_; ++n) indegree[n] = pred_.begin[n + 1] - pred_.begin[n];
        order_.clear();
        order_.reserve(nodes_);
        for (uint32_t n = 0; n < nodes_; ++n)
            if (indegree[n] == 0) order_.push_back(n);
        for (size_t i = 0; i < order_.size(); ++i)
            for (const uint32_t *s = succ_.from(order_[i]); s != succ_.to(order_[i]); ++s)
                if (--indegree[*s] == 0) order_.push_back(*s);
        if (order_.size() == nodes_) {
            position_.assign(nodes_, 0);
            for (uint32_t i = 0; i < nodes_; ++i) position_[order_[i]] = i;
            return false;
        }
        report_cycle(indegree);
        return true;
    }

    // Every node Kahn's algorithm left has a predecessor it also left: walking predecessors
    // from one of them must come back to a node already seen, closing a cycle.
    void report_cycle(const std::vector<uint32_t> &indegree) {
        uint32_t start = 0;
        while (indegree[start] == 0) ++start;
        std::vector<uint32_t> seen_at(nodes_, std::numeric_limits<uint32_t>::max()), path;
        uint32_t n = start;
        while (seen_at[n] == std::numeric_limits<uint32_t>::max()) {
            seen_at[n] = uint32_t(path.size());
            path.push_back(n);
            const uint32_t *p = pred_.from(n);
            while (indegree[*p] == 0) ++p;
            n = *p;
        }
        std::vector<uint32_t> cycle(path.begin() + seen_at[n], path.end());
        std::reverse(cycle.begin(), cycle.end()); // walked backwards: now in edge order
        // Start at the first task in blob order (task nodes come before barrier nodes).
        std::rotate(cycle.begin(), std::min_element(cycle.begin(), cycle.end()), cycle.end());
        problems_.add("deadlock: tasks wait on each other in a cycle: " + describe_cycle(cycle));
    }

    // "'a' (DMA queue 0) updates barrier 0 -> 'b' (DMA queue 1) updates barrier 1 -> 'a'"
    std::string describe_cycle(const std::vector<uint32_t> &cycle) const {
        auto tasks = uint32_t(tasks_.size());
        std::string s;
        size_t named = 0, total_tasks = 0;
        for (uint32_t v : cycle) total_tasks += v < tasks;
        for (size_t i = 0; i < cycle.size() && named < kMaxCycleTasks; ++i) {
            uint32_t v = cycle[i];
            if (v >= tasks) continue;
            uint32_t next = cycle[(i + 1) % cycle.size()];
            s += describe(tasks_[v]) +
                 (next >= tasks ? cat(" updates barrier ", next - tasks)
                                : " precedes in its queue") +
                 " -> ";
            ++named;
        }
        if (named < total_tasks) return s + cat("... (", total_tasks, " tasks in the cycle)");
        return s + quoted(tasks_[cycle[0]].task->name());
    }

    // ---- Physical barrier reuse --------------------------------------------------------
    // The hardware holds the counters of one virtual barrier per physical barrier at a time;
    // a task waits on, and updates, the virtual barrier its list names (the runtime feeds each
    // physical barrier its virtual barriers in index order). Physical barrier p moves on from
    // virtual barrier b1 to the next virtual barrier b2 mapped to p (next by index among those
    // some task uses) once b1 is released and every consumer of b1 has started. So each
    // producer of b2 must be ordered after (reachable in the dependency graph from, or be)
    // every consumer of b1; if b1 has no consumers, after every producer of b1. Consumers of
    // b2 need no check: they cannot start before b2's producers finish, which come after.
    //
    // Reachability: sources (the b1 tasks) are processed 64 at a time, one bit each; the bits
    // are propagated along the topological order, only over the positions between the first
    // source and the last target of the batch. Memory is one word per node; time is the
    // window length per batch, short for real blobs, and charged to the budget.

    struct Reuse {
        uint32_t before, after; // virtual barriers b1 < b2 on one physical barrier
    };

    std::vector<Reuse> reuse_pairs() const {
        std::map<uint32_t, uint32_t> last_on_physical;
        std::vector<Reuse> pairs;
        for (uint32_t b = 0; b < barrier_count_; ++b) {
            if (producers_[b].empty() && consumers_[b].empty()) continue;
            uint32_t id = blob_.barriers()->Get(b)->physical_id();
            auto [it, fresh] = last_on_physical.emplace(id, b);
            if (!fresh) {
                pairs.push_back({it->second, b});
                it->second = b;
            }
        }
        return pairs;
    }

    const std::vector<uint32_t> &reuse_sources(const Reuse &r) const {
        return consumers_[r.before].empty() ? producers_[r.before] : consumers_[r.before];
    }

    void check_physical_reuse() {
        std::vector<Reuse> pairs = reuse_pairs();
        // Slots: every (pair, source task), pair by pair, so a batch holds few pairs.
        std::vector<std::pair<uint32_t, uint32_t>> slots;
        for (uint32_t p = 0; p < pairs.size(); ++p)
            for (uint32_t t : reuse_sources(pairs[p])) slots.emplace_back(p, t);
        problems_.charge(slots.size());
        // Per pair, the topological position of the last producer of the later barrier.
        std::vector<uint32_t> last_target(pairs.size(), 0);
        for (uint32_t p = 0; p < pairs.size(); ++p) {
            problems_.charge(producers_[pairs[p].after].size());
            for (uint32_t t : producers_[pairs[p].after])
                last_target[p] = std::max(last_target[p], position_[t]);
        }
        std::vector<uint64_t> reach(nodes_, 0); // by topological position
        std::vector<bool> reported(pairs.size(), false);
        for (size_t first = 0; first < slots.size(); first += 64) {
            size_t last = std::min(slots.size(), first + 64);
            check_reuse_batch(pairs, slots, last_target, first, last, reach, reported);
        }
    }

    void check_reuse_batch(const std::vector<Reuse> &pairs,
                           const std::vector<std::pair<uint32_t, uint32_t>> &slots,
                           const std::vector<uint32_t> &last_target, size_t first, size_t last,
                           std::vector<uint64_t> &reach, std::vector<bool> &reported) {
        uint32_t lo = std::numeric_limits<uint32_t>::max(), hi = 0;
        for (size_t s = first; s < last; ++s) {
            lo = std::min(lo, position_[slots[s].second]);
            hi = std::max(hi, last_target[slots[s].first]);
        }
        problems_.charge(last - first);
        if (lo <= hi) {
            std::fill(reach.begin() + lo, reach.begin() + hi + 1, 0);
            for (size_t s = first; s < last; ++s)
                if (position_[slots[s].second] <= hi)
                    reach[position_[slots[s].second]] |= uint64_t(1) << (s - first);
            propagate(reach, lo, hi);
        }
        for (size_t s = first; s < last;) {
            uint32_t p = slots[s].first;
            uint64_t sources = 0;
            for (; s < last && slots[s].first == p; ++s) sources |= uint64_t(1) << (s - first);
            if (!reported[p])
                reported[p] = !check_reuse_pair(pairs[p], slots, first, sources, reach, lo, hi);
        }
    }

    void propagate(std::vector<uint64_t> &reach, uint32_t lo, uint32_t hi) {
        problems_.charge(hi - lo + 1);
        for (uint32_t i = lo; i <= hi; ++i) {
            uint64_t bits = reach[i];
            if (!bits) continue;
            uint32_t n = order_[i];
            problems_.charge(succ_.begin[n + 1] - succ_.begin[n]);
            for (const uint32_t *s = succ_.from(n); s != succ_.to(n); ++s)
                if (position_[*s] <= hi) reach[position_[*s]] |= bits;
        }
    }

    // False (and reported) when a producer of the later barrier is not ordered after one of
    // the batch's sources (bits `sources`) of the earlier one.
    bool check_reuse_pair(const Reuse &r, const std::vector<std::pair<uint32_t, uint32_t>> &slots,
                          size_t first, uint64_t sources, const std::vector<uint64_t> &reach,
                          uint32_t lo, uint32_t hi) {
        problems_.charge(producers_[r.after].size());
        for (uint32_t t : producers_[r.after]) {
            uint32_t at = position_[t];
            uint64_t reached = at >= lo && at <= hi ? reach[at] : 0;
            uint64_t missing = sources & ~reached;
            if (!missing) continue;
            uint32_t source = slots[first + size_t(__builtin_ctzll(missing))].second;
            bool consumed = !consumers_[r.before].empty();
            problems_.add(cat(barrier_where(r.after), ": reuses physical barrier ",
                              blob_.barriers()->Get(r.after)->physical_id(), " before barrier ",
                              r.before, " is ", consumed ? "consumed" : "released",
                              ": its producer ", describe(tasks_[t]), " is not ordered after ",
                              consumed ? "consumer " : "producer ", describe(tasks_[source]),
                              " of barrier ", r.before));
            return false;
        }
        return true;
    }

    const Blob &blob_;
    const Header &header_;
    const Target &target_;
    Problems problems_;
    uint32_t barrier_count_;
    std::vector<bool> kernel_reads_ok_;            // per kernel: its read bounds well formed
    std::vector<TaskRef> tasks_;                   // every task, queue by queue
    std::vector<std::vector<uint32_t>> producers_; // per barrier: tasks that update it
    std::vector<std::vector<uint32_t>> consumers_; // per barrier: tasks that wait on it
    uint32_t nodes_ = 0;
    Csr succ_, pred_;
    std::vector<uint32_t> order_, position_; // topological order and each node's position
};

} // namespace

Sha256 description_digest(const TargetDescription &described) {
    const Sha256 digest = sha256(described.json()->data(), described.json()->size());
    const auto *stored = described.sha256();
    if (stored->size() != digest.size() ||
        !std::equal(digest.begin(), digest.end(), stored->begin()))
        throw BlobError("header: target: sha256 does not match the description it carries "
                        "(corrupted blob)");
    return digest;
}

target::Target embedded_target(const Blob &blob) {
    const TargetDescription &described = *blob.header()->target();
    description_digest(described);
    target::Target target;
    try {
        target = target::parse_target(described.json()->str(), "header.target.json");
    } catch (const target::TargetError &e) {
        throw BlobError(cat("header: target: ", e.what()));
    }
    if (target.name != described.name()->str())
        throw BlobError(cat("header: target: name ", quoted(described.name()),
                            " differs from the description's '", target.name, "'"));
    return target;
}

const Blob &verify_structure(const std::vector<uint8_t> &bytes) {
    if (bytes.size() < 8)
        throw BlobError(cat("not a vpuc blob: ", bytes.size(), " bytes is too short"));
    if (!BlobBufferHasIdentifier(bytes.data()))
        throw BlobError(cat("not a vpuc blob: file identifier '",
                            printable(reinterpret_cast<const char *>(bytes.data()) + 4, 4),
                            "', expected '", BlobIdentifier(), "'"));
    if (bytes.size() >= FLATBUFFERS_MAX_BUFFER_SIZE)
        throw BlobError(cat("blob of ", bytes.size(), " bytes exceeds the FlatBuffers limit of ",
                            FLATBUFFERS_MAX_BUFFER_SIZE, " bytes"));
    flatbuffers::Verifier::Options options;
    options.max_depth = 16; // the schema nests 6 deep
    // A blob without shared tables has at most one table per 4 bytes (see the file comment).
    options.max_tables = flatbuffers::uoffset_t(bytes.size() / 4 + 64);
    flatbuffers::Verifier verifier(bytes.data(), bytes.size(), options);
    if (!VerifyBlobBuffer(verifier))
        throw BlobError(cat("malformed blob: FlatBuffers verification failed on ", bytes.size(),
                            " bytes (truncated or corrupted)"));
    const Blob &blob = *GetBlob(bytes.data());
    const Version &v = *blob.header()->version();
    if (v.major() != kVersionMajor || v.minor() > kVersionMinor)
        throw BlobError(cat("header: version: blob format ", v.major(), ".", v.minor(),
                            ", this vpuc reads formats ", kVersionMajor, ".0 to ", kVersionMajor,
                            ".", kVersionMinor, " (recompile the network)"));
    return blob;
}

const Blob &verify_for_timing(const std::vector<uint8_t> &bytes, const target::Target &target) {
    const Blob &blob = verify_structure(bytes);
    Checker(blob, target, bytes.size()).run();
    return blob;
}

const Blob &verify(const std::vector<uint8_t> &bytes, const target::Target &target) {
    const Blob &blob = verify_for_timing(bytes, target);
    // The memory analyses work per contiguous run of bytes a task touches, which a small blob
    // can make many of: their allowance grows with the file, with a floor for small blobs.
    const uint64_t budget = kDataflowBudgetPerByte * bytes.size() + kDataflowBudgetFloor;
    auto lines = [](const std::vector<std::string> &list) {
        std::string all;
        for (const std::string &line : list) all += (all.empty() ? "" : "\n") + line;
        return all;
    };
    const std::vector<std::string> races = find_races(blob, 8, budget);
    if (!races.empty())
        throw BlobError("data races: tasks touch the same bytes, one writing, and neither waits "
                        "for the other (a missing dependency; results would depend on timing):\n" +
                        lines(races));
    const std::vector<std::string> overlaps = find_dpu_overlaps(blob, kMaxProblems, budget);
    if (!overlaps.empty()) throw BlobError(lines(overlaps));
    const std::vector<std::string> tables = check_weight_tables(blob, target, kMaxProblems, budget);
    if (!tables.empty()) throw BlobError(lines(tables));
    return blob;
}

} // namespace vpuc::blob
