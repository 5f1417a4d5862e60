// The blob printer (blob_printer.h): text for people, JSON for scripts.
#include "vpu_target/blob_printer.h"

#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <nlohmann/json.hpp>
#include <ostream>
#include <sstream>

#include "vpu_target/blob.h"
#include "vpu_target/printable.h"
#include "vpu_target/verifier.h"

namespace vpuc::blob {

namespace {

using Json = nlohmann::ordered_json;

template <typename... Args> std::string cat(const Args &...args) {
    std::ostringstream out;
    (out << ... << args);
    return out.str();
}

// Blob strings may hold anything: escaped and cut (vpu_target/printable.h).
std::string safe(const flatbuffers::String *s) {
    return s ? printable(s->string_view()) : "";
}

std::string quoted(const flatbuffers::String *s) {
    return "'" + safe(s) + "'";
}

// Enum names, or the raw value for a value the schema does not know (a corrupted blob).
template <typename E> std::string name_of(E value, const char *name) {
    return name && *name ? name : cat("<", int(value), ">");
}
std::string name_of(DType t) {
    return name_of(t, EnumNameDType(t));
}
std::string name_of(MemSpace s) {
    return name_of(s, EnumNameMemSpace(s));
}
std::string name_of(DpuOp op) {
    return name_of(op, EnumNameDpuOp(op));
}
std::string name_of(Layout l) {
    return name_of(l, EnumNameLayout(l));
}
std::string name_of(ArgKind k) {
    return name_of(k, EnumNameArgKind(k));
}
std::string name_of(Activation a) {
    return name_of(a, EnumNameActivation(a));
}
std::string name_of(EltwiseOp op) {
    return name_of(op, EnumNameEltwiseOp(op));
}

template <typename T> uint32_t size_of(const flatbuffers::Vector<T> *v) {
    return v ? v->size() : 0;
}

// A copy of struct element i: the FlatBuffers verifier does not check the alignment of a
// struct vector's elements, and a corrupted blob may misalign them.
template <typename T> T element(const flatbuffers::Vector<const T *> *v, uint32_t i) {
    T out;
    std::memcpy(&out, v->Data() + size_t(i) * sizeof(T), sizeof(T));
    return out;
}

// Prints one blob. A hostile blob can reference one table or vector from many places, so
// that printing it would produce far more than the file holds: every loop over blob data
// counts its elements against a budget proportional to the file size.
class Printer {
  public:
    Printer(std::ostream &out, size_t blob_bytes)
        : out_(out), elements_left_(16 * uint64_t(blob_bytes) + (1 << 20)) {}

    // Both return whether the blob passes verification.
    bool print_text(const std::string &path, const std::vector<uint8_t> &bytes, const Blob &b);
    bool print_json(const std::string &path, const std::vector<uint8_t> &bytes, const Blob &b);

  private:
    // "[0, 3]"
    std::string list(const flatbuffers::Vector<uint32_t> *v) {
        std::string s = "[";
        for (uint32_t i = 0; i < counted(size_of(v)); ++i) s += cat(i ? ", " : "", v->Get(i));
        return s + "]";
    }

    // ---- Text

    // "CMX 1 +4096", "Input 0 +0", "Constant +2304"
    std::string text(const Address &a) {
        bool indexed = a.space() == MemSpace::Input || a.space() == MemSpace::Output ||
                       a.space() == MemSpace::Cmx;
        std::string space = a.space() == MemSpace::Cmx ? "CMX" : name_of(a.space());
        return indexed ? cat(space, " ", a.index(), " +", a.offset())
                       : cat(space, " +", a.offset());
    }

    // "U8 (16, 8, 8, 1) at CMX 0 +8192", dims innermost first; strides when asked.
    std::string text(const TensorRef *t, bool strides = false) {
        if (!t) return "none";
        std::string dims = "(", stride_list = " strides (";
        for (uint32_t i = 0; i < counted(t->dims()->size()); ++i) {
            dims += cat(i ? ", " : "", element(t->dims(), i).extent());
            stride_list += cat(i ? ", " : "", element(t->dims(), i).stride());
        }
        return cat(name_of(t->dtype()), " ", dims, ")", strides ? stride_list + ")" : "", " at ",
                   text(*t->address()));
    }

    std::string text_quant(const IoTensor &io) {
        uint32_t n = size_of(io.quant());
        if (n == 0) return "not quantized";
        if (n == 1)
            return cat("scale ", element(io.quant(), 0).scale(), " zero point ",
                       element(io.quant(), 0).zero_point());
        return cat("per channel on axis ", io.quant_axis(), " (", n, " scales)");
    }

    void print_io(const char *title, const flatbuffers::Vector<flatbuffers::Offset<IoTensor>> *l) {
        print("%s:\n", title);
        for (uint32_t i = 0; i < counted(size_of(l)); ++i) {
            const IoTensor &io = *l->Get(i);
            std::string shape;
            for (uint32_t d = 0; d < counted(io.shape()->size()); ++d)
                shape += cat(d ? "x" : "", io.shape()->Get(d));
            if (shape.empty()) shape = "scalar";
            print("  %u %s: %s %s %s, %s, %llu bytes\n      %s\n", i, quoted(io.name()).c_str(),
                  shape.c_str(), name_of(io.dtype()).c_str(), name_of(io.layout()).c_str(),
                  text_quant(io).c_str(), static_cast<unsigned long long>(io.bytes()),
                  text(io.tensor(), true).c_str());
        }
    }

    void print_sections(const Blob &b) {
        uint64_t code = 0;
        for (uint32_t k = 0; k < size_of(b.kernels()); ++k)
            code += b.kernels()->Get(k)->object()->size();
        print("sections: constants %u bytes, DDR scratch %llu bytes, kernel code %llu bytes\n",
              size_of(b.constants()),
              static_cast<unsigned long long>(b.header()->ddr_scratch_bytes()),
              static_cast<unsigned long long>(code));
    }

    void print_kernels(const Blob &b) {
        print("kernels (%u):\n", size_of(b.kernels()));
        for (uint32_t i = 0; i < counted(size_of(b.kernels())); ++i) {
            const Kernel &k = *b.kernels()->Get(i);
            std::string args;
            for (uint32_t a = 0; a < k.args()->size(); ++a) {
                const KernelArg &arg = *k.args()->Get(a);
                args += cat(a ? ", " : "", safe(arg.name()), ": ", name_of(arg.kind()), " ",
                            name_of(arg.dtype()));
                if (arg.kind() == ArgKind::InputBuffer || arg.kind() == ArgKind::OutputBuffer)
                    args += cat(" rank ", int(arg.rank()));
            }
            print("  %u %s: entry %s, %u bytes of code, %u lanes; per vector %g ops, %g special "
                  "ops, %g CMX bytes\n      args: %s\n",
                  i, quoted(k.name()).c_str(), safe(k.entry()).c_str(), k.object()->size(),
                  k.vector_lanes(), double(k.arith_ops_per_vector()),
                  double(k.special_ops_per_vector()), double(k.cmx_bytes_per_vector()),
                  args.c_str());
        }
    }

    void print_barriers(const Blob &b) {
        print("barriers (%u):\n", size_of(b.barriers()));
        for (uint32_t i = 0; i < counted(size_of(b.barriers())); ++i) {
            const Barrier &bar = *b.barriers()->Get(i);
            print("  %u: physical %u, %u producers, %u consumers\n", i, bar.physical_id(),
                  bar.producer_count(), bar.consumer_count());
        }
    }

    std::string describe_dma(const DmaTask &d) {
        std::string dsts;
        for (uint32_t i = 0; i < counted(d.dst()->size()); ++i)
            dsts += cat(i ? ", " : "", text(element(d.dst(), i)));
        uint64_t lines = 1;
        std::string dims;
        for (uint32_t i = 0; i < counted(size_of(d.dims())); ++i) {
            DmaDim dim = element(d.dims(), i);
            lines *= dim.count();
            dims += cat(i ? ", " : "", dim.count(), " (src +", dim.src_stride(), ", dst +",
                        dim.dst_stride(), ")");
        }
        std::string shape = size_of(d.dims()) == 0
                                ? cat(d.line_bytes(), " bytes")
                                : cat(lines, " lines of ", d.line_bytes(), " bytes [", dims, "]");
        return cat("DMA ", shape, ": ", text(*d.src()), " -> ", dsts,
                   d.dst()->size() > 1 ? " (broadcast)" : "");
    }

    std::string describe_ppe(const DpuTask &d) {
        const Ppe *ppe = d.ppe();
        if (!ppe) return "";
        std::string s;
        if (d.op() == DpuOp::Eltwise) s += cat(", ", name_of(ppe->eltwise_op()));
        if (ppe->activation() != Activation::None) s += cat(", ", name_of(ppe->activation()));
        return s;
    }

    std::string describe_dpu(const DpuTask &d) {
        std::string s = cat(name_of(d.op()), " ", int(d.kernel_w()), "x", int(d.kernel_h()),
                            " stride ", int(d.stride_w()), "x", int(d.stride_h()), " pad (l ",
                            int(d.pad_left()), ", r ", int(d.pad_right()), ", t ", int(d.pad_top()),
                            ", b ", int(d.pad_bottom()), "): ", text(d.input()));
        if (d.input2()) s += " + " + text(d.input2());
        s += " -> " + text(d.output());
        if (d.weights()) s += ", weights " + text(d.weights());
        if (d.weight_table()) s += ", table at " + text(*d.weight_table()->address());
        s += describe_ppe(d) + cat("; ", d.variants()->size(), " variants:");
        for (uint32_t i = 0; i < counted(d.variants()->size()); ++i) {
            const DpuVariant &v = *d.variants()->Get(i);
            s += cat(i ? ", " : " ", safe(v.mpe_mode()), " ", list(v.start()), "-", list(v.end()));
        }
        return s;
    }

    std::string describe_shave(const Blob &b, const ShaveTask &s) {
        bool known = s.kernel() < size_of(b.kernels());
        const Kernel *k = known ? b.kernels()->Get(s.kernel()) : nullptr;
        std::string out = cat("SHAVE kernel ", s.kernel(), " ", k ? quoted(k->name()) : "<missing>",
                              " on ", int(s.shaves()), " SHAVEs:");
        for (uint32_t i = 0; i < counted(s.args()->size()); ++i) {
            const ShaveArg &a = *s.args()->Get(i);
            bool named = k && i < k->args()->size();
            std::string name = named ? safe(k->args()->Get(i)->name()) : cat("arg", i);
            bool is_float = named && k->args()->Get(i)->kind() == ArgKind::ScalarFloat;
            std::string value = a.tensor() ? text(a.tensor())
                                : is_float ? cat(a.float_value())
                                           : cat(a.int_value());
            out += cat(i ? ", " : " ", name, " = ", value);
        }
        return out;
    }

    std::string describe_task(const Blob &b, const Task &t) {
        switch (t.kind_type()) {
        case TaskKind::DmaTask:
            return describe_dma(*t.kind_as_DmaTask());
        case TaskKind::DpuTask:
            return describe_dpu(*t.kind_as_DpuTask());
        case TaskKind::ShaveTask:
            return describe_shave(b, *t.kind_as_ShaveTask());
        default:
            return cat("<unknown task kind ", int(t.kind_type()), ">");
        }
    }

    void print_queues(const Blob &b) {
        for (uint32_t q = 0; q < counted(size_of(b.queues())); ++q) {
            const TaskQueue &queue = *b.queues()->Get(q);
            print("%s (%u tasks):\n", describe_queue(queue).c_str(), queue.tasks()->size());
            for (uint32_t i = 0; i < counted(queue.tasks()->size()); ++i) {
                const Task &t = *queue.tasks()->Get(i);
                std::string layer = t.layer() ? " [layer " + safe(t.layer()) + "]" : "";
                print("  %u %s%s waits %s updates %s\n      %s\n", i, quoted(t.name()).c_str(),
                      layer.c_str(), list(t.wait_barriers()).c_str(),
                      list(t.update_barriers()).c_str(), describe_task(b, t).c_str());
            }
        }
    }

    // The semantic verifier's problems against the blob's own target; empty when it passes.
    std::vector<std::string> problems_of(const std::vector<uint8_t> &bytes, const Blob &b) {
        std::string message;
        try {
            verify(bytes, embedded_target(b));
            return {};
        } catch (const BlobError &e) {
            message = e.what();
        }
        std::vector<std::string> lines;
        std::istringstream in(message);
        for (std::string line; std::getline(in, line);) lines.push_back(line);
        return lines;
    }

    // ---- JSON

    Json json_address(const Address &a) {
        return {{"space", name_of(a.space())}, {"index", a.index()}, {"offset", a.offset()}};
    }

    Json json_tensor(const TensorRef *t) {
        if (!t) return nullptr;
        Json dims = Json::array();
        for (uint32_t i = 0; i < counted(t->dims()->size()); ++i)
            dims.push_back({{"extent", element(t->dims(), i).extent()},
                            {"stride", element(t->dims(), i).stride()}});
        return {{"address", json_address(*t->address())},
                {"dtype", name_of(t->dtype())},
                {"dims", dims},
                {"zero_point", t->zero_point()}};
    }

    Json json_io(const flatbuffers::Vector<flatbuffers::Offset<IoTensor>> *l) {
        Json out = Json::array();
        for (uint32_t i = 0; i < counted(size_of(l)); ++i) {
            const IoTensor &io = *l->Get(i);
            Json quant = Json::array();
            for (uint32_t q = 0; q < counted(size_of(io.quant())); ++q)
                quant.push_back({{"scale", element(io.quant(), q).scale()},
                                 {"zero_point", element(io.quant(), q).zero_point()}});
            out.push_back({{"name", io.name()->str()},
                           {"shape", std::vector<uint32_t>(io.shape()->begin(), io.shape()->end())},
                           {"dtype", name_of(io.dtype())},
                           {"layout", name_of(io.layout())},
                           {"quant", quant},
                           {"quant_axis", io.quant_axis()},
                           {"bytes", io.bytes()},
                           {"tensor", json_tensor(io.tensor())}});
        }
        return out;
    }

    Json json_kernels(const Blob &b) {
        Json out = Json::array();
        for (uint32_t i = 0; i < counted(size_of(b.kernels())); ++i) {
            const Kernel &k = *b.kernels()->Get(i);
            Json args = Json::array();
            for (uint32_t a = 0; a < k.args()->size(); ++a) {
                const KernelArg &arg = *k.args()->Get(a);
                args.push_back({{"name", arg.name()->str()},
                                {"kind", name_of(arg.kind())},
                                {"dtype", name_of(arg.dtype())},
                                {"rank", arg.rank()}});
            }
            out.push_back({{"name", k.name()->str()},
                           {"entry", k.entry()->str()},
                           {"object_bytes", k.object()->size()},
                           {"vector_lanes", k.vector_lanes()},
                           {"arith_ops_per_vector", k.arith_ops_per_vector()},
                           {"special_ops_per_vector", k.special_ops_per_vector()},
                           {"cmx_bytes_per_vector", k.cmx_bytes_per_vector()},
                           {"args", args}});
        }
        return out;
    }

    Json json_barriers(const Blob &b) {
        Json out = Json::array();
        for (uint32_t i = 0; i < counted(size_of(b.barriers())); ++i) {
            const Barrier &bar = *b.barriers()->Get(i);
            out.push_back({{"physical_id", bar.physical_id()},
                           {"producer_count", bar.producer_count()},
                           {"consumer_count", bar.consumer_count()}});
        }
        return out;
    }

    Json json_dma(const DmaTask &d) {
        Json dsts = Json::array(), dims = Json::array();
        for (uint32_t i = 0; i < counted(d.dst()->size()); ++i)
            dsts.push_back(json_address(element(d.dst(), i)));
        for (uint32_t i = 0; i < counted(size_of(d.dims())); ++i) {
            DmaDim dim = element(d.dims(), i);
            dims.push_back({{"count", dim.count()},
                            {"src_stride", dim.src_stride()},
                            {"dst_stride", dim.dst_stride()}});
        }
        return {{"src", json_address(*d.src())},
                {"dst", dsts},
                {"line_bytes", d.line_bytes()},
                {"dims", dims}};
    }

    Json json_ppe(const Ppe *p) {
        if (!p) return nullptr;
        return {{"activation", name_of(p->activation())},
                {"relux_max", p->relux_max()},
                {"leaky_mult", p->leaky_mult()},
                {"leaky_shift", p->leaky_shift()},
                {"leaky_alpha", p->leaky_alpha()},
                {"clamp_low", p->clamp_low()},
                {"clamp_high", p->clamp_high()},
                {"fp_clamp_low", p->fp_clamp_low()},
                {"fp_clamp_high", p->fp_clamp_high()},
                {"mult", p->mult()},
                {"shift", p->shift()},
                {"bias", p->bias()},
                {"fp_scale", p->fp_scale()},
                {"eltwise_op", name_of(p->eltwise_op())},
                {"in1_mult", p->in1_mult()},
                {"in2_mult", p->in2_mult()}};
    }

    Json json_dpu(const DpuTask &d) {
        Json variants = Json::array();
        for (uint32_t i = 0; i < counted(d.variants()->size()); ++i) {
            const DpuVariant &v = *d.variants()->Get(i);
            variants.push_back(
                {{"start", std::vector<uint32_t>(v.start()->begin(), v.start()->end())},
                 {"end", std::vector<uint32_t>(v.end()->begin(), v.end()->end())},
                 {"mpe_mode", v.mpe_mode()->str()}});
        }
        return {{"op", name_of(d.op())},
                {"kernel", {d.kernel_w(), d.kernel_h()}},
                {"stride", {d.stride_w(), d.stride_h()}},
                {"pad",
                 {{"left", d.pad_left()},
                  {"right", d.pad_right()},
                  {"top", d.pad_top()},
                  {"bottom", d.pad_bottom()}}},
                {"input", json_tensor(d.input())},
                {"input2", json_tensor(d.input2())},
                {"weights", json_tensor(d.weights())},
                {"weight_table", json_tensor(d.weight_table())},
                {"output", json_tensor(d.output())},
                {"weights_zero_point", d.weights_zero_point()},
                {"ppe", json_ppe(d.ppe())},
                {"variants", variants}};
    }

    Json json_shave(const ShaveTask &s) {
        Json args = Json::array();
        for (uint32_t i = 0; i < counted(s.args()->size()); ++i) {
            const ShaveArg &a = *s.args()->Get(i);
            args.push_back({{"tensor", json_tensor(a.tensor())},
                            {"int_value", a.int_value()},
                            {"float_value", a.float_value()}});
        }
        return {{"kernel", s.kernel()}, {"shaves", s.shaves()}, {"args", args}};
    }

    Json json_task(const Blob &b, const Task &t) {
        auto barriers = [](const flatbuffers::Vector<uint32_t> *v) {
            return v ? std::vector<uint32_t>(v->begin(), v->end()) : std::vector<uint32_t>{};
        };
        Json j = {{"name", t.name()->str()},
                  {"layer", t.layer() ? t.layer()->str() : ""},
                  {"wait_barriers", barriers(t.wait_barriers())},
                  {"update_barriers", barriers(t.update_barriers())},
                  {"description", describe_task(b, t)}};
        switch (t.kind_type()) {
        case TaskKind::DmaTask:
            j["dma"] = json_dma(*t.kind_as_DmaTask());
            break;
        case TaskKind::DpuTask:
            j["dpu"] = json_dpu(*t.kind_as_DpuTask());
            break;
        case TaskKind::ShaveTask:
            j["shave"] = json_shave(*t.kind_as_ShaveTask());
            break;
        default:
            break; // the description says it is unknown
        }
        return j;
    }

    Json json_queues(const Blob &b) {
        Json out = Json::array();
        for (uint32_t q = 0; q < counted(size_of(b.queues())); ++q) {
            const TaskQueue &queue = *b.queues()->Get(q);
            Json tasks = Json::array();
            for (uint32_t i = 0; i < counted(queue.tasks()->size()); ++i)
                tasks.push_back(json_task(b, *queue.tasks()->Get(i)));
            out.push_back({{"queue", describe_queue(queue)},
                           {"engine", to_string(queue.engine())},
                           {"tile", queue.tile()},
                           {"index", queue.index()},
                           {"tasks", tasks}});
        }
        return out;
    }

    std::ostream &out_;
    uint64_t elements_left_;

    uint32_t counted(uint32_t elements) {
        if (elements > elements_left_)
            throw BlobError("the blob references the same data from far more places than "
                            "its size justifies (see vpuc verify): not printing it");
        elements_left_ -= elements;
        return elements;
    }

    // printf to the stream.
    __attribute__((format(printf, 2, 3))) void print(const char *format, ...) {
        va_list args;
        va_start(args, format);
        va_list again;
        va_copy(again, args);
        const int n = std::vsnprintf(nullptr, 0, format, args);
        va_end(args);
        std::string s(size_t(n > 0 ? n : 0) + 1, '\0');
        std::vsnprintf(s.data(), s.size(), format, again);
        va_end(again);
        s.pop_back();
        out_ << s;
    }
};

bool Printer::print_text(const std::string &path, const std::vector<uint8_t> &bytes,
                         const Blob &b) {
    const Header &h = *b.header();
    print("blob %s: %zu bytes, format %u.%u, target %s, network %s\n", path.c_str(), bytes.size(),
          h.version()->major(), h.version()->minor(), quoted(h.target()->name()).c_str(),
          quoted(h.name()).c_str());
    std::vector<std::string> problems = problems_of(bytes, b);
    print("verification: %s\n", problems.empty() ? "ok" : "FAILED");
    for (const auto &p : problems) print("  %s\n", p.c_str());
    print_io("inputs", h.inputs());
    print_io("outputs", h.outputs());
    print_sections(b);
    print_kernels(b);
    print_barriers(b);
    print_queues(b);
    return problems.empty();
}

bool Printer::print_json(const std::string &path, const std::vector<uint8_t> &bytes,
                         const Blob &b) {
    const Header &h = *b.header();
    std::vector<std::string> problems = problems_of(bytes, b);
    Json j = {{"file", path},
              {"bytes", bytes.size()},
              {"version", cat(h.version()->major(), ".", h.version()->minor())},
              {"target", safe(h.target()->name())},
              {"name", h.name() ? h.name()->str() : ""},
              {"verification", {{"ok", problems.empty()}, {"problems", problems}}},
              {"inputs", json_io(h.inputs())},
              {"outputs", json_io(h.outputs())},
              {"sections",
               {{"constants_bytes", size_of(b.constants())},
                {"ddr_scratch_bytes", h.ddr_scratch_bytes()}}},
              {"kernels", json_kernels(b)},
              {"barriers", json_barriers(b)},
              {"queues", json_queues(b)}};
    // Blob strings need not be UTF-8: replace what is not, rather than fail.
    out_ << j.dump(2, ' ', false, Json::error_handler_t::replace) << "\n";
    return problems.empty();
}

} // namespace

bool print_blob_text(std::ostream &out, const std::string &path,
                     const std::vector<uint8_t> &bytes) {
    const Blob &b = verify_structure(bytes);
    return Printer(out, bytes.size()).print_text(path, bytes, b);
}

bool print_blob_json(std::ostream &out, const std::string &path,
                     const std::vector<uint8_t> &bytes) {
    const Blob &b = verify_structure(bytes);
    return Printer(out, bytes.size()).print_json(path, bytes, b);
}

} // namespace vpuc::blob
