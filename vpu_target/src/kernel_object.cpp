#include "kernel_object.h"

#include <llvm/Object/ELF.h>

#include <algorithm>
#include <cstring>
#include <limits>
#include <map>

namespace vpuc::sim {

namespace {

using Elf = llvm::object::ELF64LE;
using ElfFile = llvm::object::ELF64LEFile;

std::string imports_text() {
    std::string text;
    for (const char *name : sandbox::kImports)
        text += (text.empty() ? "" : ", ") + std::string(name);
    return text;
}

uint32_t import_index(const std::string &name) {
    for (uint32_t i = 0; i < sandbox::kImportCount; ++i)
        if (name == sandbox::kImports[i]) return i;
    return sandbox::kImportCount;
}

uint64_t round_up(uint64_t value, uint64_t to) {
    return (value + to - 1) / to * to;
}

// A stub the code's calls to an import jump through: `jmp *2(%rip)` to the import's address,
// kept (aligned) in the stub's last 8 bytes and patched by an R_X86_64_64 relocation, so that a
// 32-bit call reaches a function anywhere.
constexpr uint64_t kStubBytes = 16;
constexpr uint64_t kStubSlot = 8;
constexpr uint8_t kStubCode[6] = {0xff, 0x25, kStubSlot - 6, 0, 0, 0};

enum class Region { Text, ReadOnly, Data };

// LLVM's ELFFile checks the bounds of everything it returns; what it does not know is what the
// worker can load, which this checks, section by section, symbol by symbol.
class Layout {
  public:
    Layout(std::string kernel, const ElfFile &elf) : kernel_(std::move(kernel)), elf_(elf) {}

    KernelImage run(const std::string &entry) {
        const auto &header = elf_.getHeader();
        if (header.e_machine != llvm::ELF::EM_X86_64 || header.e_type != llvm::ELF::ET_REL)
            fail("object is not an ELF relocatable object for x86-64");
        sections_ = value(elf_.sections(), "section table");
        placed_.assign(sections_.size(), Placement{});
        for (size_t i = 0; i < sections_.size(); ++i) check_section(i);
        if (!symtab_) fail("object is malformed: no symbol table");
        read_symbols();
        place_sections();
        for (const Elf::Shdr &section : sections_)
            if (section.sh_type == llvm::ELF::SHT_RELA) read_relocations(section);
        place_stubs();
        finish(entry);
        return std::move(image_);
    }

  private:
    struct Placement {
        bool loaded = false;
        Region region = Region::ReadOnly;
        uint64_t offset = 0; // in its region until finish(), then in the image
    };

    struct Symbol {
        std::string name;
        enum Kind { Undefined, Absolute, Section, Unloaded } kind = Unloaded;
        uint32_t section = 0;
        uint64_t value = 0;
        uint8_t type = 0;
    };

    [[noreturn]] void fail(const std::string &why) const {
        throw blob::BlobError("kernel '" + kernel_ + "': " + why);
    }
    template <typename T> T value(llvm::Expected<T> expected, const std::string &what) const {
        if (!expected)
            fail("object is malformed: " + what + ": " + llvm::toString(expected.takeError()));
        return std::move(*expected);
    }

    std::string section_name(const Elf::Shdr &section) const {
        return value(elf_.getSectionName(section), "section name").str();
    }

    void check_section(size_t index) {
        const Elf::Shdr &section = sections_[index];
        const std::string name = section_name(section);
        if (section.sh_type == llvm::ELF::SHT_REL)
            fail("object is malformed: section '" + name +
                 "' has REL relocations (x86-64 uses RELA)");
        if (section.sh_flags & llvm::ELF::SHF_TLS)
            fail("object has thread-local section '" + name + "'; SHAVE kernels have none");
        if (section.sh_type != llvm::ELF::SHT_NOBITS)
            (void)value(elf_.getSectionContents(section), "section '" + name + "'");
        if (section.sh_type == llvm::ELF::SHT_SYMTAB) {
            if (symtab_) fail("object is malformed: several symbol tables");
            symtab_ = &section;
        }
        if (!(section.sh_flags & llvm::ELF::SHF_ALLOC)) return;
        const bool loadable = section.sh_type == llvm::ELF::SHT_PROGBITS ||
                              section.sh_type == llvm::ELF::SHT_NOBITS ||
                              section.sh_type == llvm::ELF::SHT_NOTE ||
                              section.sh_type == llvm::ELF::SHT_X86_64_UNWIND;
        if (!loadable)
            fail("object has section '" + name + "' of ELF type " +
                 std::to_string(section.sh_type) + ", which SHAVE kernels do not use");
        const uint64_t align = std::max<uint64_t>(section.sh_addralign, 1);
        if (align > sandbox::kPageBytes || (align & (align - 1)) != 0)
            fail("object is malformed: section '" + name + "' has alignment " +
                 std::to_string(section.sh_addralign));
        if (section.sh_size > sandbox::kMaxImageBytes)
            fail("section '" + name + "' of " + std::to_string(section.sh_size) +
                 " bytes is larger than a kernel may be (" +
                 std::to_string(sandbox::kMaxImageBytes) + " bytes)");
        Placement &p = placed_[index];
        p.loaded = true;
        p.region = (section.sh_flags & llvm::ELF::SHF_EXECINSTR) ? Region::Text
                   : (section.sh_flags & llvm::ELF::SHF_WRITE)   ? Region::Data
                                                                 : Region::ReadOnly;
    }

    static bool plain_symbol_type(uint8_t type) {
        return type == llvm::ELF::STT_NOTYPE || type == llvm::ELF::STT_OBJECT ||
               type == llvm::ELF::STT_FUNC || type == llvm::ELF::STT_SECTION ||
               type == llvm::ELF::STT_FILE;
    }

    void read_symbols() {
        const auto symbols = value(elf_.symbols(symtab_), "symbol table");
        const llvm::StringRef names = value(elf_.getStringTableForSymtab(*symtab_), "symbol names");
        for (const Elf::Sym &symbol : symbols) {
            Symbol s;
            s.name = value(symbol.getName(names), "symbol name").str();
            s.type = symbol.getType();
            s.value = symbol.st_value;
            if (&symbol != &symbols.front() && !plain_symbol_type(s.type))
                fail("object has symbol '" + s.name + "' of ELF type " + std::to_string(s.type) +
                     ", which SHAVE kernels do not use");
            const uint16_t index = symbol.st_shndx;
            if (index == llvm::ELF::SHN_UNDEF) {
                s.kind = Symbol::Undefined;
                if (&symbol != &symbols.front() && import_index(s.name) == sandbox::kImportCount)
                    fail("references symbol '" + s.name +
                         "', which is not in the SHAVE allow-list (allowed: " + imports_text() +
                         ")");
            } else if (index == llvm::ELF::SHN_ABS) {
                s.kind = Symbol::Absolute;
            } else if (index == llvm::ELF::SHN_COMMON) {
                fail("object has common symbol '" + s.name + "'; SHAVE kernels have none");
            } else if (index >= sections_.size() || s.value > sections_[index].sh_size) {
                fail("object is malformed: symbol '" + s.name + "' lies outside its section");
            } else {
                s.kind = placed_[index].loaded ? Symbol::Section : Symbol::Unloaded;
                s.section = index;
            }
            symbols_.push_back(std::move(s));
        }
    }

    void place_sections() {
        for (size_t i = 0; i < sections_.size(); ++i) {
            Placement &p = placed_[i];
            if (!p.loaded) continue;
            const uint64_t align = std::max<uint64_t>(sections_[i].sh_addralign, 1);
            uint64_t &size = region_bytes_[int(p.region)];
            p.offset = round_up(size, align);
            size = p.offset + sections_[i].sh_size;
            if (size > sandbox::kMaxImageBytes) too_large();
        }
    }

    [[noreturn]] void too_large() const {
        fail("object needs more than " + std::to_string(sandbox::kMaxImageBytes) +
             " bytes when loaded");
    }

    void read_relocations(const Elf::Shdr &section) {
        if (section.sh_info >= sections_.size() || section.sh_link >= sections_.size() ||
            &sections_[section.sh_link] != symtab_)
            fail("object is malformed: a relocation section names a bad section or symbol table");
        const uint32_t patched = section.sh_info;
        const auto relocations = value(elf_.relas(section), "relocations");
        if (!placed_[patched].loaded) return; // debug information and the like: not loaded
        const Elf::Shdr &target = sections_[patched];
        for (const Elf::Rela &rela : relocations) {
            const uint32_t type = rela.getType(false);
            const uint64_t width = type == sandbox::kRelocAbs64 ? 8
                                   : type == sandbox::kRelocPc32 || type == sandbox::kRelocPlt32
                                       ? 4
                                       : 0;
            if (width == 0)
                fail("object has relocation type " + std::to_string(type) +
                     ", which Halide does not emit for SHAVE kernels (they are "
                     "position-independent)");
            if (rela.r_offset > target.sh_size || target.sh_size - rela.r_offset < width ||
                rela.getSymbol(false) >= symbols_.size())
                fail("object is malformed: a relocation lies outside its section or symbol table");
            if (relocations_.size() >= sandbox::kMaxRelocations)
                fail("object has more than " + std::to_string(sandbox::kMaxRelocations) +
                     " relocations");
            relocations_.push_back(
                {patched, rela.r_offset, rela.getSymbol(false), type, int64_t(rela.r_addend)});
        }
    }

    // One stub per import the code calls with a 32-bit displacement, after the code.
    void place_stubs() {
        for (const Pending &r : relocations_) {
            const Symbol &s = symbols_[r.symbol];
            if (s.kind != Symbol::Undefined || r.type == sandbox::kRelocAbs64) continue;
            const uint32_t import = import_index(s.name);
            if (import == sandbox::kImportCount)
                fail("a relocation refers to the null symbol (corrupted object)");
            if (stubs_.count(import)) continue;
            uint64_t &text = region_bytes_[int(Region::Text)];
            const uint64_t at = round_up(text, kStubBytes);
            stubs_[import] = at;
            text = at + kStubBytes;
            if (text > sandbox::kMaxImageBytes) too_large();
        }
    }

    // Region offsets become image offsets; bytes are copied, relocations resolved.
    void finish(const std::string &entry) {
        auto &h = image_.header;
        h.text_bytes = round_up(region_bytes_[int(Region::Text)], sandbox::kPageBytes);
        h.rodata_bytes = round_up(region_bytes_[int(Region::ReadOnly)], sandbox::kPageBytes);
        h.data_bytes = round_up(region_bytes_[int(Region::Data)], sandbox::kPageBytes);
        if (h.text_bytes == 0) fail("object has no code");
        const uint64_t total = h.text_bytes + h.rodata_bytes + h.data_bytes;
        if (total > sandbox::kMaxImageBytes) too_large();
        const uint64_t region_start[3] = {0, h.text_bytes, h.text_bytes + h.rodata_bytes};
        image_.bytes.assign(total, 0);
        for (size_t i = 0; i < sections_.size(); ++i) {
            Placement &p = placed_[i];
            if (!p.loaded) continue;
            p.offset += region_start[int(p.region)];
            if (sections_[i].sh_type == llvm::ELF::SHT_NOBITS) continue;
            const auto contents = value(elf_.getSectionContents(sections_[i]), "section");
            std::copy(contents.begin(), contents.end(), image_.bytes.begin() + long(p.offset));
        }
        for (const auto &[import, at] : stubs_) {
            std::memcpy(image_.bytes.data() + at, kStubCode, sizeof kStubCode);
            image_.relocations.push_back({at + kStubSlot, 0, 0, sandbox::kRelocAbs64, import});
        }
        for (const Pending &r : relocations_) resolve(r);
        image_.header.relocations = uint32_t(image_.relocations.size());
        image_.header.entry = entry_offset(entry);
    }

    struct Pending {
        uint32_t section;
        uint64_t offset;
        uint32_t symbol;
        uint32_t type;
        int64_t addend;
    };

    void resolve(const Pending &r) {
        const Symbol &s = symbols_[r.symbol];
        sandbox::Relocation out;
        out.at = placed_[r.section].offset + r.offset;
        out.type = r.type;
        out.addend = r.addend;
        switch (s.kind) {
        case Symbol::Undefined:
            if (r.type == sandbox::kRelocAbs64) {
                out.symbol = import_index(s.name);
                if (out.symbol == sandbox::kImportCount)
                    fail("a relocation refers to the null symbol (corrupted object)");
            } else {
                out.symbol = sandbox::kInImage;
                out.target = stubs_.at(import_index(s.name));
            }
            break;
        case Symbol::Absolute:
            if (r.type != sandbox::kRelocAbs64)
                fail("object has a PC-relative relocation to absolute symbol '" + s.name + "'");
            out.symbol = sandbox::kAbsolute;
            out.target = s.value;
            break;
        case Symbol::Section:
            out.symbol = sandbox::kInImage;
            out.target =
                placed_[s.section].offset + (s.type == llvm::ELF::STT_SECTION ? 0 : s.value);
            break;
        case Symbol::Unloaded:
            fail("a relocation in loaded code refers to '" + s.name +
                 "', in a section that is not loaded");
        }
        if (out.symbol == sandbox::kInImage && r.type != sandbox::kRelocAbs64) {
            // S + A - P: the image's base address cancels out, so the range is known here. S
            // and P are offsets in the image; A is anything the object says.
            int64_t displacement = 0;
            if (__builtin_add_overflow(int64_t(out.target) - int64_t(out.at), out.addend,
                                       &displacement) ||
                displacement < std::numeric_limits<int32_t>::min() ||
                displacement > std::numeric_limits<int32_t>::max())
                fail("object has a 32-bit PC-relative relocation out of range");
        }
        image_.relocations.push_back(out);
    }

    uint64_t entry_offset(const std::string &entry) const {
        const Symbol *found = nullptr;
        for (const Symbol &s : symbols_) {
            if (s.name != entry || s.kind == Symbol::Undefined) continue;
            if (found) fail("object defines its entry point '" + entry + "' twice");
            found = &s;
        }
        if (!found) fail("object does not define its entry point '" + entry + "'");
        if (found->kind != Symbol::Section || placed_[found->section].region != Region::Text ||
            (found->type != llvm::ELF::STT_FUNC && found->type != llvm::ELF::STT_NOTYPE))
            fail("entry point '" + entry + "' is not a function in the object's code");
        return placed_[found->section].offset + found->value;
    }

    std::string kernel_;
    const ElfFile &elf_;
    llvm::ArrayRef<Elf::Shdr> sections_;
    const Elf::Shdr *symtab_ = nullptr;
    std::vector<Placement> placed_;
    std::vector<Symbol> symbols_;
    std::vector<Pending> relocations_;
    std::map<uint32_t, uint64_t> stubs_; // import -> stub offset in text
    uint64_t region_bytes_[3] = {0, 0, 0};
    KernelImage image_;
};

} // namespace

KernelImage prepare_kernel_image(const blob::Kernel &kernel, const std::string &label) {
    if (kernel.entry()->size() == 0 || kernel.object()->size() == 0)
        throw blob::BlobError("kernel '" + label + "': missing entry point or object");
    const llvm::StringRef bytes(reinterpret_cast<const char *>(kernel.object()->data()),
                                kernel.object()->size());
    auto elf = ElfFile::create(bytes);
    if (!elf)
        throw blob::BlobError("kernel '" + label + "': object is not a valid ELF object: " +
                              llvm::toString(elf.takeError()));
    return Layout(label, *elf).run(kernel.entry()->str());
}

} // namespace vpuc::sim
