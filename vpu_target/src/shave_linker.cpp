// Links SHAVE kernel objects with LLVM ORC (RuntimeDyld, the linker ORC uses for ELF on
// x86-64). Each kernel gets its own JITDylib, so kernels never see each other's symbols; its
// only other source of symbols is the "shave-runtime" JITDylib holding exactly the allow-list.
// Objects are checked before ORC sees them (format, architecture, bounds, every undefined
// symbol), so a refusal names the kernel and the symbol instead of surfacing as a generic link
// error or a crash.
#include "vpu_target/shave_linker.h"

#include <llvm/ExecutionEngine/Orc/Core.h>
#include <llvm/ExecutionEngine/Orc/ExecutorProcessControl.h>
#include <llvm/ExecutionEngine/Orc/RTDyldObjectLinkingLayer.h>
#include <llvm/ExecutionEngine/SectionMemoryManager.h>
#include <llvm/Object/ELF.h>
#include <llvm/Support/MemoryBuffer.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <set>

namespace vpuc::sim {

namespace {

namespace orc = llvm::orc;

// Halide's heap allocations (intermediate buffers of runtime size). Halide assumes its own
// runtime's alignment; 128 bytes covers every vector width it may generate for.
constexpr size_t kHeapAlignment = 128;

void *halide_malloc_shim(void * /*user_context*/, size_t bytes) {
    const size_t rounded =
        (std::max<size_t>(bytes, 1) + kHeapAlignment - 1) / kHeapAlignment * kHeapAlignment;
    return std::aligned_alloc(kHeapAlignment, rounded);
}

void halide_free_shim(void * /*user_context*/, void *ptr) {
    std::free(ptr);
}

struct AllowedSymbol {
    const char *name;
    llvm::JITTargetAddress address;
};

template <typename F> llvm::JITTargetAddress address_of(F *function) {
    return llvm::pointerToJITTargetAddress(function);
}

// Everything a kernel compiled with shave_halide_target() can reference (checked by compiling
// each Halide math function and a few schedules and listing the undefined symbols).
const std::vector<AllowedSymbol> &allow_list() {
    static const std::vector<AllowedSymbol> symbols = {
        // Halide's allocations of intermediate buffers on the heap (no runtime: ours).
        {"halide_malloc", address_of(&halide_malloc_shim)},
        {"halide_free", address_of(&halide_free_shim)},
        // LLVM turns copy and fill loops into these.
        {"memcpy", address_of(&::memcpy)},
        {"memmove", address_of(&::memmove)},
        {"memset", address_of(&::memset)},
        // Float math Halide calls from libm (exp, log, pow, sqrt, floor... it inlines).
        {"sinf", address_of(&::sinf)},
        {"cosf", address_of(&::cosf)},
        {"tanf", address_of(&::tanf)},
        {"asinf", address_of(&::asinf)},
        {"acosf", address_of(&::acosf)},
        {"atanf", address_of(&::atanf)},
        {"atan2f", address_of(&::atan2f)},
        {"sinhf", address_of(&::sinhf)},
        {"coshf", address_of(&::coshf)},
        {"tanhf", address_of(&::tanhf)},
        {"asinhf", address_of(&::asinhf)},
        {"acoshf", address_of(&::acoshf)},
        {"atanhf", address_of(&::atanhf)},
    };
    return symbols;
}

std::string allowed_list_text() {
    std::string text;
    for (const std::string &name : LinkedKernels::allowed_symbols())
        text += (text.empty() ? "" : ", ") + name;
    return text;
}

std::string kernel_label(const blob::Kernel &kernel, uint32_t index) {
    if (kernel.name()) return kernel.name()->str();
    return "#" + std::to_string(index);
}

// RuntimeDyld trusts the ELF it loads: a bad offset or index makes it write out of bounds or
// abort. So every structure it reads is checked here first (LLVM's ELFFile checks the bounds of
// what it returns), and only the relocation types Halide emits for x86-64 are accepted.
using Elf = llvm::object::ELF64LE;
using ElfFile = llvm::object::ELF64LEFile;

class ObjectChecker {
  public:
    ObjectChecker(std::string kernel, const ElfFile &elf) : kernel_(std::move(kernel)), elf_(elf) {}

    // The object is an ELF relocatable object for x86-64 whose structures are all in bounds,
    // references only allow-listed symbols and defines `entry`.
    void check(const std::string &entry) {
        const auto &header = elf_.getHeader();
        if (header.e_machine != llvm::ELF::EM_X86_64 || header.e_type != llvm::ELF::ET_REL)
            fail("object is not an ELF relocatable object for x86-64");
        sections_ = value(elf_.sections(), "section table");
        for (const Elf::Shdr &section : sections_) check_section(section);
        if (!symtab_) fail("object is malformed: no symbol table");
        check_symbols(entry);
        for (const Elf::Shdr &section : sections_)
            if (section.sh_type == llvm::ELF::SHT_RELA) check_relocations(section);
    }

  private:
    [[noreturn]] void fail(const std::string &why) const {
        throw blob::BlobError("kernel '" + kernel_ + "': " + why);
    }
    template <typename T> T value(llvm::Expected<T> expected, const std::string &what) const {
        if (!expected)
            fail("object is malformed: " + what + ": " + llvm::toString(expected.takeError()));
        return std::move(*expected);
    }
    void require(llvm::Error error, const std::string &what) const {
        if (error) fail("object is malformed: " + what + ": " + llvm::toString(std::move(error)));
    }

    void check_section(const Elf::Shdr &section) {
        const std::string name = value(elf_.getSectionName(section), "section name").str();
        if (section.sh_type == llvm::ELF::SHT_REL)
            fail("object is malformed: section '" + name +
                 "' has REL relocations (x86-64 uses RELA)");
        if (section.sh_flags & llvm::ELF::SHF_TLS)
            fail("object has thread-local section '" + name + "'; SHAVE kernels have none");
        if (section.sh_type != llvm::ELF::SHT_NOBITS)
            require(elf_.getSectionContents(section).takeError(), "section '" + name + "'");
        if (section.sh_type == llvm::ELF::SHT_SYMTAB) {
            if (symtab_) fail("object is malformed: several symbol tables");
            symtab_ = &section;
        }
    }

    void check_symbols(const std::string &entry) {
        const auto symbols = value(elf_.symbols(symtab_), "symbol table");
        const llvm::StringRef names = value(elf_.getStringTableForSymtab(*symtab_), "symbol names");
        symbol_count_ = symbols.size();
        const std::set<std::string> allowed(LinkedKernels::allowed_symbols().begin(),
                                            LinkedKernels::allowed_symbols().end());
        bool entry_defined = false;
        for (const Elf::Sym &symbol : symbols.drop_front()) { // symbol 0 is the null symbol
            const std::string name = value(symbol.getName(names), "symbol name").str();
            if (!plain_symbol_type(symbol.getType()))
                fail("object has symbol '" + name + "' of ELF type " +
                     std::to_string(symbol.getType()) + ", which SHAVE kernels do not use");
            const uint16_t index = symbol.st_shndx;
            if (index == llvm::ELF::SHN_UNDEF) {
                if (!allowed.count(name))
                    fail("references symbol '" + name +
                         "', which is not in the SHAVE allow-list (allowed: " +
                         allowed_list_text() + ")");
                continue;
            }
            if (index == llvm::ELF::SHN_ABS || index == llvm::ELF::SHN_COMMON) continue;
            if (index >= sections_.size() || symbol.st_value > sections_[index].sh_size)
                fail("object is malformed: symbol '" + name + "' lies outside its section");
            if (name == entry) entry_defined = true;
        }
        if (!entry_defined) fail("object does not define its entry point '" + entry + "'");
    }

    void check_relocations(const Elf::Shdr &section) {
        if (section.sh_info >= sections_.size() || section.sh_link >= sections_.size() ||
            &sections_[section.sh_link] != symtab_)
            fail("object is malformed: a relocation section names a bad section or symbol table");
        const Elf::Shdr &target = sections_[section.sh_info];
        for (const Elf::Rela &rela : value(elf_.relas(section), "relocations")) {
            const uint64_t width = relocation_width(rela.getType(false));
            if (width == 0)
                fail("object has relocation type " + std::to_string(rela.getType(false)) +
                     ", which Halide does not emit for SHAVE kernels");
            if (rela.r_offset > target.sh_size || target.sh_size - rela.r_offset < width ||
                rela.getSymbol(false) >= symbol_count_)
                fail("object is malformed: a relocation lies outside its section or symbol table");
        }
    }

    static bool plain_symbol_type(uint8_t type) {
        return type == llvm::ELF::STT_NOTYPE || type == llvm::ELF::STT_OBJECT ||
               type == llvm::ELF::STT_FUNC || type == llvm::ELF::STT_SECTION ||
               type == llvm::ELF::STT_FILE;
    }

    // Bytes a relocation writes; 0 for types refused.
    static uint64_t relocation_width(uint32_t type) {
        switch (type) {
        case llvm::ELF::R_X86_64_64:
            return 8;
        case llvm::ELF::R_X86_64_PC32:
        case llvm::ELF::R_X86_64_PLT32:
        case llvm::ELF::R_X86_64_32:
        case llvm::ELF::R_X86_64_32S:
            return 4;
        default:
            return 0;
        }
    }

    std::string kernel_;
    const ElfFile &elf_;
    llvm::ArrayRef<Elf::Shdr> sections_;
    const Elf::Shdr *symtab_ = nullptr;
    size_t symbol_count_ = 0;
};

void check_object(const std::string &kernel, llvm::StringRef bytes, const std::string &entry) {
    auto elf = ElfFile::create(bytes);
    if (!elf)
        throw blob::BlobError("kernel '" + kernel + "': object is not a valid ELF object: " +
                              llvm::toString(elf.takeError()));
    ObjectChecker(kernel, *elf).check(entry);
}

// Kernels never unwind (no exception crosses them), so their unwind tables are not registered
// with the process: a corrupt one would be parsed by the next exception thrown anywhere.
class KernelMemoryManager : public llvm::SectionMemoryManager {
    void registerEHFrames(uint8_t *, uint64_t, size_t) override {}
    void deregisterEHFrames() override {}
};

class OrcLinkedKernels : public LinkedKernels {
  public:
    OrcLinkedKernels() {
        auto process = orc::SelfExecutorProcessControl::Create();
        if (!process)
            throw blob::BlobError("cannot start the SHAVE kernel linker: " +
                                  llvm::toString(process.takeError()));
        session_ = std::make_unique<orc::ExecutionSession>(std::move(*process));
        // Materialization errors come here rather than through the failed lookup.
        session_->setErrorReporter([this](llvm::Error error) {
            session_errors_ +=
                (session_errors_.empty() ? "" : "; ") + llvm::toString(std::move(error));
        });
        objects_ = std::make_unique<orc::RTDyldObjectLinkingLayer>(
            *session_, [] { return std::make_unique<KernelMemoryManager>(); });
        runtime_ = &session_->createBareJITDylib("shave-runtime");
        llvm::cantFail(runtime_->define(orc::absoluteSymbols(runtime_symbols())));
    }

    ~OrcLinkedKernels() override {
        // Frees the kernels' code; the session must end before its layers are destroyed.
        llvm::consumeError(session_->endSession());
        objects_.reset();
    }

    void add(const blob::Kernel &kernel, uint32_t index) {
        const std::string name = kernel_label(kernel, index);
        if (!kernel.entry() || !kernel.object() || kernel.object()->size() == 0)
            throw blob::BlobError("kernel '" + name + "': missing entry point or object");
        const std::string entry = kernel.entry()->str();
        const llvm::StringRef bytes(reinterpret_cast<const char *>(kernel.object()->data()),
                                    kernel.object()->size());
        check_object(name, bytes, entry);

        orc::JITDylib &dylib = session_->createBareJITDylib("kernel" + std::to_string(index));
        dylib.addToLinkOrder(*runtime_);
        link_or_fail(name, objects_->add(dylib, llvm::MemoryBuffer::getMemBufferCopy(bytes, name)));
        // Looking the entry up links the whole object now, so link errors surface here.
        auto symbol = session_->lookup({&dylib}, entry);
        if (!symbol) link_or_fail(name, symbol.takeError());
        entries_.push_back(reinterpret_cast<KernelEntry>(symbol->getAddress()));
    }

    KernelEntry entry(uint32_t kernel_index) const override {
        if (kernel_index >= entries_.size())
            throw blob::BlobError("kernel index " + std::to_string(kernel_index) +
                                  " out of range (the blob has " + std::to_string(entries_.size()) +
                                  " kernels)");
        return entries_[kernel_index];
    }
    size_t size() const override { return entries_.size(); }

  private:
    orc::SymbolMap runtime_symbols() const {
        orc::SymbolMap symbols;
        for (const AllowedSymbol &symbol : allow_list())
            symbols[session_->intern(symbol.name)] = llvm::JITEvaluatedSymbol(
                symbol.address, llvm::JITSymbolFlags::Exported | llvm::JITSymbolFlags::Callable);
        return symbols;
    }

    void link_or_fail(const std::string &kernel, llvm::Error error) {
        if (!error) return;
        std::string why = llvm::toString(std::move(error));
        if (!session_errors_.empty()) why = session_errors_ + " (" + why + ")";
        session_errors_.clear();
        throw blob::BlobError("kernel '" + kernel + "': cannot link its object: " + why);
    }

    std::unique_ptr<orc::ExecutionSession> session_;
    std::unique_ptr<orc::RTDyldObjectLinkingLayer> objects_;
    orc::JITDylib *runtime_ = nullptr;
    std::string session_errors_;
    std::vector<KernelEntry> entries_;
};

} // namespace

const std::vector<std::string> &LinkedKernels::allowed_symbols() {
    static const std::vector<std::string> names = [] {
        std::vector<std::string> out;
        for (const AllowedSymbol &symbol : allow_list()) out.emplace_back(symbol.name);
        return out;
    }();
    return names;
}

std::unique_ptr<LinkedKernels> LinkedKernels::link(const blob::Blob &blob) {
    auto linked = std::make_unique<OrcLinkedKernels>();
    if (blob.kernels())
        for (uint32_t i = 0; i < blob.kernels()->size(); ++i)
            linked->add(*blob.kernels()->Get(i), i);
    return linked;
}

} // namespace vpuc::sim
