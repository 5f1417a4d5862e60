// The task program as text: print() writes everything a pass reads or writes, and
// parse_program() reads it back, so a pass can be run on a program written by hand or dumped
// after another pass.
#include "codegen/task_ir.h"

#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <iomanip>
#include <limits>
#include <memory>
#include <sstream>

namespace vpuc::codegen {

namespace {

// Constants and kernel objects are written as hex, this many bytes a line; lines of zeros
// are left out (the section starts zeroed).
constexpr size_t kHexLine = 64;

std::string engine_name(blob::EngineKind e) {
    return blob::to_string(e);
}

// "[8]conv1.in0@0+64 U8 (16:1,8:16,4:128,1:512) zp 3": the buffer's index and name, its tile
// for CMX, the offset, the element type, the dims (extent:stride, innermost first) and the
// zero point when there is one.
std::string describe(const Program &p, const View &v) {
    std::ostringstream os;
    const BufferDecl &b = p.buffers.at(size_t(v.buffer));
    os << "[" << v.buffer << "]" << b.name;
    if (b.space == blob::MemSpace::Cmx) os << "@" << b.index; // the tile
    os << "+" << v.offset << " " << blob::to_string(v.dtype) << " (";
    for (size_t i = 0; i < v.dims.size(); ++i)
        os << (i ? "," : "") << v.dims[i].extent() << ":" << v.dims[i].stride();
    os << ")";
    if (v.zero_point != 0) os << " zp " << v.zero_point;
    return os.str();
}

// Floats with as many digits as read back the same float.
std::string float_text(float f) {
    std::ostringstream os;
    os << std::setprecision(std::numeric_limits<float>::max_digits10) << f;
    return os.str();
}

void print_hex(std::ostream &os, const uint8_t *data, size_t size) {
    static const char digits[] = "0123456789abcdef";
    for (size_t line = 0; line < size; line += kHexLine) {
        const size_t end = std::min(size, line + kHexLine);
        bool zeros = true;
        for (size_t i = line; i < end; ++i) zeros &= data[i] == 0;
        if (zeros) continue;
        os << "    @" << line << " ";
        for (size_t i = line; i < end; ++i) os << digits[data[i] >> 4] << digits[data[i] & 15];
        os << "\n";
    }
}

void print_io(std::ostream &os, const char *what, size_t i, const IoDecl &io) {
    os << "  " << what << " " << i << " " << io.name << ": " << blob::to_string(io.dtype) << " "
       << blob::EnumNameLayout(io.layout) << " ";
    for (size_t d = 0; d < io.shape.size(); ++d) os << (d ? "x" : "") << io.shape[d];
    for (const blob::Quant &q : io.quant)
        os << " quant " << float_text(q.scale()) << " " << q.zero_point();
    os << "\n";
}

void print_dpu(std::ostream &os, const Program &p, const DpuWork &dpu) {
    const blob::DpuTaskT &t = dpu.invariant;
    os << "    " << blob::to_string(t.op) << " " << describe(p, dpu.input) << " -> "
       << describe(p, dpu.output) << ", " << t.variants.size() << " variants\n";
    if (dpu.has_input2) os << "    input2 " << describe(p, dpu.input2) << "\n";
    if (dpu.has_weights)
        os << "    weights " << describe(p, dpu.weights) << " table "
           << describe(p, dpu.weight_table) << "\n";
    os << "    kernel " << int(t.kernel_w) << "x" << int(t.kernel_h) << " stride "
       << int(t.stride_w) << "x" << int(t.stride_h) << " pad " << int(t.pad_left) << ","
       << int(t.pad_right) << "," << int(t.pad_top) << "," << int(t.pad_bottom) << " weights_zp "
       << t.weights_zero_point << "\n";
    if (const blob::PpeT *ppe = t.ppe.get())
        os << "    ppe " << blob::EnumNameActivation(ppe->activation) << " relux_max "
           << ppe->relux_max << " leaky " << ppe->leaky_mult << ">>" << int(ppe->leaky_shift)
           << " alpha " << float_text(ppe->leaky_alpha) << " clamp " << ppe->clamp_low << ".."
           << ppe->clamp_high << " fp_clamp " << float_text(ppe->fp_clamp_low) << ".."
           << float_text(ppe->fp_clamp_high) << " requant " << ppe->mult << ">>" << int(ppe->shift)
           << " bias " << ppe->bias << " fp_scale " << float_text(ppe->fp_scale) << " eltwise "
           << blob::EnumNameEltwiseOp(ppe->eltwise_op) << " in_mult " << ppe->in1_mult << ","
           << ppe->in2_mult << "\n";
    for (const auto &v : t.variants) {
        os << "    variant";
        for (size_t d = 0; d < v->start.size() && d < v->end.size(); ++d)
            os << " " << v->start[d] << ".." << v->end[d];
        os << " " << v->mpe_mode << "\n";
    }
}

// --- parsing ------------------------------------------------------------------------------

// One line of the text, read from left to right; every error names the line.
class Line {
  public:
    Line(std::string text, size_t number) : text_(std::move(text)), number_(number) {}

    [[noreturn]] void fail(const std::string &what) const {
        throw ProgramTextError("task program, line " + std::to_string(number_) + ": " + what +
                               " (at '" + text_.substr(pos_, 40) + "' in '" + text_.substr(0, 120) +
                               "')");
    }

    bool done() const { return pos_ >= text_.size(); }
    bool peek(const std::string &literal) const {
        return text_.compare(pos_, literal.size(), literal) == 0;
    }
    bool accept(const std::string &literal) {
        if (!peek(literal)) return false;
        pos_ += literal.size();
        return true;
    }
    void expect(const std::string &literal) {
        if (!accept(literal)) fail("expected '" + literal + "'");
    }
    void end() {
        if (!done()) fail("unexpected text");
    }

    // Up to the next space (or the end).
    std::string word() {
        const size_t end = std::min(text_.find(' ', pos_), text_.size());
        if (end == pos_) fail("expected a word");
        std::string w = text_.substr(pos_, end - pos_);
        pos_ = end;
        return w;
    }
    // Everything left.
    std::string rest() {
        std::string r = text_.substr(std::min(pos_, text_.size()));
        pos_ = text_.size();
        return r;
    }
    // The text up to the last occurrence of `separator`, which is then skipped: for names,
    // which may hold anything but the separator's later text.
    std::string up_to_last(const std::string &separator) {
        const size_t at = text_.rfind(separator);
        if (at == std::string::npos || at < pos_) fail("expected '" + separator + "'");
        std::string s = text_.substr(pos_, at - pos_);
        pos_ = at + separator.size();
        return s;
    }

    int64_t integer(int64_t lo = std::numeric_limits<int64_t>::min(),
                    int64_t hi = std::numeric_limits<int64_t>::max()) {
        const char *start = text_.c_str() + pos_;
        char *end = nullptr;
        errno = 0;
        const long long v = std::strtoll(start, &end, 10);
        if (end == start || errno != 0 || v < lo || v > hi) fail("expected an integer");
        pos_ += size_t(end - start);
        return v;
    }
    uint64_t unsigned_integer() {
        const char *start = text_.c_str() + pos_;
        char *end = nullptr;
        errno = 0;
        if (*start == '-') fail("expected a non-negative integer");
        const unsigned long long v = std::strtoull(start, &end, 10);
        if (end == start || errno != 0) fail("expected a non-negative integer");
        pos_ += size_t(end - start);
        return v;
    }
    float real() {
        const char *start = text_.c_str() + pos_;
        char *end = nullptr;
        const float v = std::strtof(start, &end);
        if (end == start) fail("expected a number");
        pos_ += size_t(end - start);
        return v;
    }

    // An enumerator by its name in the blob schema.
    template <typename E, size_t N> E enumerator(const E (&values)[N], const char *(*name)(E)) {
        const std::string w = word();
        for (E v : values)
            if (w == name(v)) return v;
        fail("unknown name '" + w + "'");
    }

    size_t number() const { return number_; }

  private:
    std::string text_;
    size_t number_;
    size_t pos_ = 0;
};

const char *dtype_name(blob::DType t) {
    return blob::to_string(t);
}
const char *space_name(blob::MemSpace s) {
    return blob::to_string(s);
}
const char *engine_kind_name(blob::EngineKind e) {
    return blob::to_string(e);
}
const char *op_name(blob::DpuOp op) {
    return blob::to_string(op);
}

class Parser {
  public:
    explicit Parser(const std::string &text) {
        std::istringstream in(text);
        std::string line;
        size_t number = 0;
        while (std::getline(in, line)) lines_.emplace_back(line, ++number);
    }

    Program parse() {
        Program p;
        Line &header = next("the program header");
        header.expect("program ");
        p.name = header.up_to_last(": ");
        const uint64_t buffers = header.unsigned_integer();
        header.expect(" buffers, ");
        const uint64_t tasks = header.unsigned_integer();
        header.expect(" tasks, ");
        const uint64_t barriers = header.unsigned_integer();
        header.expect(" barriers, scratch ");
        p.scratch_bytes = header.unsigned_integer();
        header.expect(" bytes");
        header.end();
        while (at("  input ")) p.inputs.push_back(io(next(), "  input ", p.inputs.size()));
        while (at("  output ")) p.outputs.push_back(io(next(), "  output ", p.outputs.size()));
        for (uint64_t b = 0; b < buffers; ++b) p.buffers.push_back(buffer(next("a buffer"), b));
        for (uint64_t t = 0; t < tasks; ++t) p.tasks.push_back(task(p, t));
        for (uint64_t b = 0; b < barriers; ++b)
            p.barriers.push_back(barrier(next("a barrier"), b, tasks));
        Line &constants = next("the constants");
        constants.expect("  constants ");
        p.constants = hex(constants.unsigned_integer());
        constants.expect(" bytes");
        constants.end();
        while (at("  kernel ")) p.kernels.push_back(kernel(p.kernels.size()));
        if (pos_ < lines_.size()) lines_[pos_].fail("unexpected line");
        for (const TaskIR &t : p.tasks)
            if (const auto *shave = std::get_if<ShaveWork>(&t.work);
                shave && shave->kernel >= p.kernels.size())
                throw ProgramTextError("task program: task '" + t.name + "' runs kernel " +
                                       std::to_string(shave->kernel) + ", and there are " +
                                       std::to_string(p.kernels.size()));
        for (const BufferDecl &b : p.buffers)
            if (b.space == blob::MemSpace::Constant && b.offset != kUnallocated &&
                b.offset + b.bytes > p.constants.size())
                throw ProgramTextError("task program: constant buffer '" + b.name +
                                       "' ends past the constants");
        return p;
    }

  private:
    bool at(const std::string &prefix) const {
        return pos_ < lines_.size() && lines_[pos_].peek(prefix);
    }
    Line &next(const std::string &what = "a line") {
        if (pos_ >= lines_.size())
            throw ProgramTextError("task program: ends where " + what + " was expected (line " +
                                   std::to_string(lines_.size() + 1) + ")");
        return lines_[pos_++];
    }

    IoDecl io(Line &l, const std::string &prefix, size_t index) {
        IoDecl io;
        l.expect(prefix);
        if (l.integer() != int64_t(index)) l.fail("expected index " + std::to_string(index));
        l.expect(" ");
        io.name = l.up_to_last(": ");
        io.dtype = l.enumerator(blob::EnumValuesDType(), dtype_name);
        l.expect(" ");
        io.layout = l.enumerator(blob::EnumValuesLayout(), blob::EnumNameLayout);
        l.expect(" ");
        do io.shape.push_back(uint32_t(l.integer(0, UINT32_MAX)));
        while (l.accept("x"));
        while (l.accept(" quant ")) {
            const float scale = l.real();
            l.expect(" ");
            io.quant.emplace_back(scale, int32_t(l.integer(INT32_MIN, INT32_MAX)));
        }
        l.end();
        return io;
    }

    BufferDecl buffer(Line &l, uint64_t index) {
        BufferDecl b;
        l.expect("  buffer ");
        if (l.unsigned_integer() != index) l.fail("expected buffer " + std::to_string(index));
        l.expect(" ");
        b.name = l.up_to_last(": ");
        b.space = l.enumerator(blob::EnumValuesMemSpace(), space_name);
        l.expect(" ");
        b.index = uint32_t(l.integer(0, UINT32_MAX));
        l.expect(", ");
        b.bytes = l.unsigned_integer();
        l.expect(" bytes");
        if (l.accept(" from the top")) b.from_top = true;
        if (l.accept(" at ")) b.offset = l.unsigned_integer();
        l.end();
        return b;
    }

    View view(Line &l, const Program &p) {
        View v;
        l.expect("[");
        v.buffer = int(l.integer(0, int64_t(p.buffers.size()) - 1));
        l.expect("]");
        const BufferDecl &b = p.buffers[size_t(v.buffer)];
        if (!l.accept(b.name))
            l.fail("expected the name of buffer " + std::to_string(v.buffer) + ", '" + b.name +
                   "'");
        if (b.space == blob::MemSpace::Cmx) {
            l.expect("@");
            if (l.integer() != int64_t(b.index)) l.fail("not the tile of the buffer");
        }
        l.expect("+");
        v.offset = l.unsigned_integer();
        l.expect(" ");
        v.dtype = l.enumerator(blob::EnumValuesDType(), dtype_name);
        l.expect(" (");
        if (!l.accept(")")) {
            do {
                const uint32_t extent = uint32_t(l.integer(0, UINT32_MAX));
                l.expect(":");
                v.dims.emplace_back(extent, l.integer());
            } while (l.accept(","));
            l.expect(")");
        }
        if (l.accept(" zp ")) v.zero_point = int32_t(l.integer(INT32_MIN, INT32_MAX));
        return v;
    }

    TaskIR task(const Program &p, uint64_t index) {
        TaskIR t;
        Line &head = next("a task");
        head.expect("  task ");
        if (head.unsigned_integer() != index) head.fail("expected task " + std::to_string(index));
        head.expect(" ");
        t.name = head.up_to_last(" [");
        t.engine = head.enumerator(blob::EnumValuesEngineKind(), engine_kind_name);
        head.expect(" tile ");
        t.tile = uint32_t(head.integer(0, UINT32_MAX));
        head.expect(" #");
        t.index = uint32_t(head.integer(0, UINT32_MAX));
        head.expect("]");
        if (head.accept(" after"))
            while (head.accept(" ")) {
                const int64_t dep = head.integer(0, int64_t(index) - 1);
                t.deps.push_back(int(dep));
            }
        head.end();
        Line &layer = next("the task's layer");
        layer.expect("    layer ");
        t.layer = layer.rest();
        Line &work = next("the task's work");
        switch (t.engine) {
        case blob::EngineKind::Dma: {
            DmaWork dma;
            work.expect("    copy ");
            dma.src = view(work, p);
            work.expect(" ->");
            do {
                work.expect(" ");
                dma.dsts.push_back(view(work, p));
            } while (work.accept(","));
            work.end();
            t.work = std::move(dma);
            break;
        }
        case blob::EngineKind::Shave: {
            ShaveWork shave;
            work.expect("    kernel ");
            shave.kernel = uint32_t(work.integer(0, UINT32_MAX));
            work.expect(" on ");
            shave.shaves = uint8_t(work.integer(0, 255));
            work.expect(" SHAVEs");
            work.end();
            while (at("    arg ")) {
                Line &arg = next();
                arg.expect("    arg ");
                shave.args.push_back(view(arg, p));
                arg.expect(" at");
                std::vector<int32_t> mins;
                while (arg.accept(" ")) mins.push_back(int32_t(arg.integer(INT32_MIN, INT32_MAX)));
                shave.mins.push_back(std::move(mins));
                arg.end();
            }
            t.work = std::move(shave);
            break;
        }
        case blob::EngineKind::Dpu:
            t.work = dpu(work, p);
            break;
        }
        return t;
    }

    DpuWork dpu(Line &l, const Program &p) {
        DpuWork dpu;
        blob::DpuTaskT &t = dpu.invariant;
        l.expect("    ");
        t.op = l.enumerator(blob::EnumValuesDpuOp(), op_name);
        l.expect(" ");
        dpu.input = view(l, p);
        l.expect(" -> ");
        dpu.output = view(l, p);
        l.expect(", ");
        const uint64_t variants = l.unsigned_integer();
        l.expect(" variants");
        l.end();
        if (at("    input2 ")) {
            Line &in2 = next();
            in2.expect("    input2 ");
            dpu.input2 = view(in2, p);
            dpu.has_input2 = true;
            in2.end();
        }
        if (at("    weights ")) {
            Line &w = next();
            w.expect("    weights ");
            dpu.weights = view(w, p);
            w.expect(" table ");
            dpu.weight_table = view(w, p);
            dpu.has_weights = true;
            w.end();
        }
        Line &k = next("the DPU task's kernel");
        auto byte = [](Line &line) { return uint8_t(line.integer(0, 255)); };
        k.expect("    kernel ");
        t.kernel_w = byte(k);
        k.expect("x");
        t.kernel_h = byte(k);
        k.expect(" stride ");
        t.stride_w = byte(k);
        k.expect("x");
        t.stride_h = byte(k);
        k.expect(" pad ");
        t.pad_left = byte(k);
        k.expect(",");
        t.pad_right = byte(k);
        k.expect(",");
        t.pad_top = byte(k);
        k.expect(",");
        t.pad_bottom = byte(k);
        k.expect(" weights_zp ");
        t.weights_zero_point = int32_t(k.integer(INT32_MIN, INT32_MAX));
        k.end();
        if (at("    ppe ")) {
            Line &l2 = next();
            auto ppe = std::make_unique<blob::PpeT>();
            auto i32 = [](Line &line) { return int32_t(line.integer(INT32_MIN, INT32_MAX)); };
            l2.expect("    ppe ");
            ppe->activation = l2.enumerator(blob::EnumValuesActivation(), blob::EnumNameActivation);
            l2.expect(" relux_max ");
            ppe->relux_max = i32(l2);
            l2.expect(" leaky ");
            ppe->leaky_mult = i32(l2);
            l2.expect(">>");
            ppe->leaky_shift = byte(l2);
            l2.expect(" alpha ");
            ppe->leaky_alpha = l2.real();
            l2.expect(" clamp ");
            ppe->clamp_low = i32(l2);
            l2.expect("..");
            ppe->clamp_high = i32(l2);
            l2.expect(" fp_clamp ");
            ppe->fp_clamp_low = l2.real();
            l2.expect("..");
            ppe->fp_clamp_high = l2.real();
            l2.expect(" requant ");
            ppe->mult = i32(l2);
            l2.expect(">>");
            ppe->shift = byte(l2);
            l2.expect(" bias ");
            ppe->bias = i32(l2);
            l2.expect(" fp_scale ");
            ppe->fp_scale = l2.real();
            l2.expect(" eltwise ");
            ppe->eltwise_op = l2.enumerator(blob::EnumValuesEltwiseOp(), blob::EnumNameEltwiseOp);
            l2.expect(" in_mult ");
            ppe->in1_mult = i32(l2);
            l2.expect(",");
            ppe->in2_mult = i32(l2);
            l2.end();
            t.ppe = std::move(ppe);
        }
        for (uint64_t i = 0; i < variants; ++i) {
            Line &v = next("a variant");
            v.expect("    variant");
            std::vector<uint32_t> start, end;
            for (int d = 0; d < 3; ++d) {
                v.expect(" ");
                start.push_back(uint32_t(v.integer(0, UINT32_MAX)));
                v.expect("..");
                end.push_back(uint32_t(v.integer(0, UINT32_MAX)));
            }
            v.expect(" ");
            t.variants.push_back(
                std::make_unique<blob::DpuVariantT>(blob::variant(start, end, v.rest())));
        }
        return dpu;
    }

    BarrierIR barrier(Line &l, uint64_t index, uint64_t tasks) {
        BarrierIR b;
        l.expect("  barrier ");
        if (l.unsigned_integer() != index) l.fail("expected barrier " + std::to_string(index));
        l.expect(" (physical ");
        b.physical = int(l.integer(-1, std::numeric_limits<int>::max()));
        l.expect("): producers");
        while (l.accept(" ")) b.producers.push_back(int(l.integer(0, int64_t(tasks) - 1)));
        l.expect("; consumers");
        while (l.accept(" ")) b.consumers.push_back(int(l.integer(0, int64_t(tasks) - 1)));
        l.end();
        return b;
    }

    // The hex lines after a section's line: `size` bytes, zero where no line says otherwise.
    std::vector<uint8_t> hex(uint64_t size) {
        std::vector<uint8_t> bytes(size, 0);
        while (at("    @")) {
            Line &l = next();
            l.expect("    @");
            const uint64_t offset = l.unsigned_integer();
            l.expect(" ");
            const std::string digits = l.rest();
            if (digits.size() % 2 != 0 || offset % kHexLine != 0 || offset > size ||
                digits.size() / 2 > size - offset)
                l.fail("hex bytes outside the section or of an odd count");
            for (size_t i = 0; i < digits.size() / 2; ++i) {
                int v = 0;
                for (char c : {digits[2 * i], digits[2 * i + 1]}) {
                    const int nibble = c >= '0' && c <= '9'   ? c - '0'
                                       : c >= 'a' && c <= 'f' ? c - 'a' + 10
                                                              : -1;
                    if (nibble < 0) l.fail("not a hex digit");
                    v = v * 16 + nibble;
                }
                bytes[offset + i] = uint8_t(v);
            }
        }
        return bytes;
    }

    // A kernel, as its FlatBuffers table in hex.
    blob::KernelT kernel(size_t index) {
        Line &l = next();
        l.expect("  kernel ");
        if (l.unsigned_integer() != index) l.fail("expected kernel " + std::to_string(index));
        l.expect(" ");
        l.up_to_last(": ");
        const uint64_t size = l.unsigned_integer();
        l.expect(" bytes");
        l.end();
        const std::vector<uint8_t> bytes = hex(size);
        flatbuffers::Verifier verifier(bytes.data(), bytes.size());
        if (!verifier.VerifyBuffer<blob::Kernel>(nullptr)) l.fail("not a kernel table");
        std::unique_ptr<blob::KernelT> k(
            flatbuffers::GetRoot<blob::Kernel>(bytes.data())->UnPack());
        return std::move(*k);
    }

    std::vector<Line> lines_;
    size_t pos_ = 0;
};

} // namespace

std::pair<uint64_t, uint64_t> byte_span(const View &v) {
    uint64_t last = 0;
    for (const blob::Dim &d : v.dims)
        if (d.extent() > 0) last += uint64_t(d.extent() - 1) * uint64_t(d.stride());
    return {v.offset, v.offset + (last + 1) * uint64_t(blob::dtype_bytes(v.dtype))};
}

bool writes_within(const TaskIR &t, const View &v) {
    const auto [begin, end] = byte_span(v);
    bool meets = false;
    for_each_view(t, [&](const View &w, bool writes) {
        if (!writes || w.buffer != v.buffer) return;
        const auto [b, e] = byte_span(w);
        meets = meets || (b < end && begin < e);
    });
    return meets;
}

std::string print(const Program &p) {
    std::ostringstream os;
    os << "program " << p.name << ": " << p.buffers.size() << " buffers, " << p.tasks.size()
       << " tasks, " << p.barriers.size() << " barriers, scratch " << p.scratch_bytes << " bytes\n";
    for (size_t i = 0; i < p.inputs.size(); ++i) print_io(os, "input", i, p.inputs[i]);
    for (size_t i = 0; i < p.outputs.size(); ++i) print_io(os, "output", i, p.outputs[i]);
    for (size_t b = 0; b < p.buffers.size(); ++b) {
        const auto &buf = p.buffers[b];
        os << "  buffer " << b << " " << buf.name << ": " << blob::to_string(buf.space) << " "
           << buf.index << ", " << buf.bytes << " bytes";
        if (buf.from_top) os << " from the top";
        if (buf.offset != kUnallocated) os << " at " << buf.offset;
        os << "\n";
    }
    for (size_t i = 0; i < p.tasks.size(); ++i) {
        const TaskIR &t = p.tasks[i];
        os << "  task " << i << " " << t.name << " [" << engine_name(t.engine) << " tile " << t.tile
           << " #" << t.index << "]";
        if (!t.deps.empty()) {
            os << " after";
            for (int d : t.deps) os << " " << d;
        }
        os << "\n    layer " << t.layer << "\n";
        if (const auto *dma = std::get_if<DmaWork>(&t.work)) {
            os << "    copy " << describe(p, dma->src) << " ->";
            for (size_t d = 0; d < dma->dsts.size(); ++d)
                os << (d ? ", " : " ") << describe(p, dma->dsts[d]);
            os << "\n";
        } else if (const auto *shave = std::get_if<ShaveWork>(&t.work)) {
            os << "    kernel " << shave->kernel << " on " << int(shave->shaves) << " SHAVEs\n";
            for (size_t a = 0; a < shave->args.size(); ++a) {
                os << "    arg " << describe(p, shave->args[a]) << " at";
                if (a < shave->mins.size())
                    for (int32_t m : shave->mins[a]) os << " " << m;
                os << "\n";
            }
        } else {
            print_dpu(os, p, std::get<DpuWork>(t.work));
        }
    }
    for (size_t b = 0; b < p.barriers.size(); ++b) {
        os << "  barrier " << b << " (physical " << p.barriers[b].physical << "): producers";
        for (int t : p.barriers[b].producers) os << " " << t;
        os << "; consumers";
        for (int t : p.barriers[b].consumers) os << " " << t;
        os << "\n";
    }
    os << "  constants " << p.constants.size() << " bytes\n";
    print_hex(os, p.constants.data(), p.constants.size());
    for (size_t k = 0; k < p.kernels.size(); ++k) {
        flatbuffers::FlatBufferBuilder fb;
        fb.Finish(blob::Kernel::Pack(fb, &p.kernels[k]));
        os << "  kernel " << k << " " << p.kernels[k].name << ": " << fb.GetSize() << " bytes\n";
        print_hex(os, fb.GetBufferPointer(), fb.GetSize());
    }
    return os.str();
}

Program parse_program(const std::string &text) {
    return Parser(text).parse();
}

} // namespace vpuc::codegen
