#include "frontend/tensor_file.h"

#include <zip.h>

#include <algorithm>
#include <cctype>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <memory>
#include <set>
#include <sstream>
#include <string_view>

#include "vpu_target/input_file.h"
#include "vpu_target/printable.h"

namespace vpuc::frontend {

namespace {

// .npy data is little-endian, and vpuc copies it as it is.
static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "vpuc reads .npy data on little-endian "
                                                         "hosts only");

constexpr size_t kMaxRank = 8;
constexpr int64_t kMaxElements = std::numeric_limits<int32_t>::max();
constexpr size_t kMaxNpzEntries = 65536;
constexpr std::string_view kMagic = "\x93NUMPY";
constexpr size_t kMagicAndVersion = 8;
// numpy leaves room in the header for the first extent to grow to this many digits.
constexpr size_t kGrowthAxisDigits = 21;
constexpr size_t kHeaderAlignment = 64;

bool one_of(char c, std::string_view set) {
    return set.find(c) != std::string_view::npos;
}

std::string bytes_text(uint64_t count) {
    return std::to_string(count) + (count == 1 ? " byte" : " bytes");
}

struct Dtype {
    char kind; // numpy's: 'f', 'i', 'u', 'b'
    int bytes;
    Halide::Type type;
    const char *name;
};

const std::vector<Dtype> &dtypes() {
    static const std::vector<Dtype> all = {
        {'f', 2, Halide::Float(16), "f16"}, {'f', 4, Halide::Float(32), "f32"},
        {'f', 8, Halide::Float(64), "f64"}, {'i', 1, Halide::Int(8), "i8"},
        {'u', 1, Halide::UInt(8), "u8"},    {'i', 2, Halide::Int(16), "i16"},
        {'u', 2, Halide::UInt(16), "u16"},  {'i', 4, Halide::Int(32), "i32"},
        {'u', 4, Halide::UInt(32), "u32"},  {'i', 8, Halide::Int(64), "i64"},
        {'u', 8, Halide::UInt(64), "u64"},  {'b', 1, Halide::Bool(), "bool"},
    };
    return all;
}

const Dtype *find_dtype(const Halide::Type &type) {
    for (const Dtype &d : dtypes())
        if (d.type == type) return &d;
    return nullptr;
}

// The descr numpy writes: '|' (no byte order) for one-byte types, '<' for the others.
std::string descr_of(const Dtype &d) {
    return std::string(1, d.bytes == 1 ? '|' : '<') + d.kind + std::to_string(d.bytes);
}

// The dtype of a descr: a byte order, then a kind and a size known above. One-byte types take
// any byte order; the others must say little-endian.
const Dtype &parse_descr(const std::string &descr, const std::string &where) {
    std::string known;
    for (const Dtype &d : dtypes()) known += (known.empty() ? "" : ", ") + descr_of(d);
    const std::string quoted = "'" + printable(descr) + "'";
    if (descr.size() >= 3 && one_of(descr[0], "<>|="))
        for (const Dtype &d : dtypes()) {
            if (descr.substr(1) != d.kind + std::to_string(d.bytes)) continue;
            if (d.bytes == 1 || descr[0] == '<') return d;
            if (descr[0] == '>')
                throw TensorFileError(where + quoted +
                                      " is big-endian; vpuc reads little-endian ('<') data");
            throw TensorFileError(where + quoted + " does not say little-endian ('<')");
        }
    throw TensorFileError(where + "unknown dtype " + quoted + " (known: " + known + ")");
}

// The numpy text of a shape: "()", "(3,)", "(3, 4)".
std::string shape_repr(const std::vector<int64_t> &shape) {
    std::string text = "(";
    for (size_t i = 0; i < shape.size(); ++i) text += (i ? ", " : "") + std::to_string(shape[i]);
    return text + (shape.size() == 1 ? ",)" : ")");
}

struct NpyHeader {
    const Dtype *dtype = nullptr;
    std::vector<int64_t> shape; // numpy order, outermost first
};

// The header of a .npy file: a Python dict literal of the keys 'descr' (a string),
// 'fortran_order' (True or False) and 'shape' (a tuple of integers), each exactly once, in
// any order, with a trailing comma allowed, followed by white space only. The parser knows
// this much Python and no more: strings without escapes, decimal integers (with the 'L'
// suffix Python 2 wrote), True and False.
class HeaderParser {
  public:
    HeaderParser(std::string_view text, const std::string &what)
        : text_(text), where_(what + ": header: ") {}

    NpyHeader parse() {
        NpyHeader header;
        std::set<std::string> seen;
        skip_space();
        expect('{', "'{' (the header is a dict)");
        while (true) {
            skip_space();
            if (peek() == '}') break;
            const std::string key = parse_string("a key (a quoted string) or '}'");
            if (!seen.insert(key).second) fail("key '" + printable(key) + "' given twice");
            skip_space();
            expect(':', "':' after key '" + printable(key) + "'");
            skip_space();
            if (key == "descr") {
                const std::string descr = parse_string("a string such as '<f4' for 'descr' "
                                                       "(structured dtypes are not supported)");
                header.dtype = &parse_descr(descr, where_ + "'descr': ");
            } else if (key == "fortran_order") {
                if (parse_bool())
                    fail("'fortran_order': True: the data is in Fortran order, which vpuc does "
                         "not read; save a C-order array (numpy.ascontiguousarray)");
            } else if (key == "shape") {
                header.shape = parse_shape();
            } else {
                fail("unknown key '" + printable(key) +
                     "' (a .npy header holds 'descr', 'fortran_order' and 'shape')");
            }
            skip_space();
            if (peek() == '}') break;
            expect(',', "',' or '}' after the value of '" + printable(key) + "'");
        }
        ++pos_;
        skip_space();
        if (pos_ != text_.size()) fail_here("nothing but white space after the dict");
        for (const char *key : {"descr", "fortran_order", "shape"})
            if (!seen.count(key)) fail(std::string("missing key '") + key + "'");
        return header;
    }

  private:
    [[noreturn]] void fail(const std::string &message) const {
        throw TensorFileError(where_ + message);
    }

    [[noreturn]] void fail_here(const std::string &expected) const {
        const std::string found =
            pos_ < text_.size() ? "'" + printable(text_.substr(pos_, 1)) + "'" : "the end";
        fail("at offset " + std::to_string(pos_) + ": expected " + expected + ", found " + found);
    }

    char peek() const { return pos_ < text_.size() ? text_[pos_] : '\0'; }

    void skip_space() {
        while (pos_ < text_.size() && one_of(text_[pos_], " \t\n\r\f")) ++pos_;
    }

    void expect(char c, const std::string &expected) {
        if (pos_ >= text_.size() || text_[pos_] != c) fail_here(expected);
        ++pos_;
    }

    std::string parse_string(const std::string &expected) {
        const char quote = peek();
        if (pos_ >= text_.size() || (quote != '\'' && quote != '"')) fail_here(expected);
        const size_t start = ++pos_;
        while (pos_ < text_.size() && text_[pos_] != quote) {
            if (text_[pos_] == '\\') fail_here("a string without escape sequences");
            if (text_[pos_] == '\n') fail_here("the string's closing quote");
            ++pos_;
        }
        if (pos_ >= text_.size()) fail_here("the string's closing quote");
        return std::string(text_.substr(start, pos_++ - start));
    }

    bool parse_bool() {
        for (const auto &[word, value] : {std::pair{"True", true}, {"False", false}}) {
            const std::string_view w(word);
            if (text_.substr(pos_, w.size()) == w && !is_word_char(w.size())) {
                pos_ += w.size();
                return value;
            }
        }
        fail_here("True or False for 'fortran_order'");
    }

    bool is_word_char(size_t offset) const {
        return pos_ + offset < text_.size() &&
               (std::isalnum(static_cast<unsigned char>(text_[pos_ + offset])) ||
                text_[pos_ + offset] == '_');
    }

    // A tuple of integers: "()", "(3,)", "(3, 4)", "(3, 4,)"; "(3)" is the integer 3.
    std::vector<int64_t> parse_shape() {
        expect('(', "a tuple such as (3, 4) for 'shape'");
        std::vector<int64_t> shape;
        bool trailing_comma = false;
        while (true) {
            skip_space();
            if (peek() == ')') break;
            shape.push_back(parse_integer());
            skip_space();
            trailing_comma = peek() == ',';
            if (peek() == ')') break;
            expect(',', "',' or ')' in 'shape'");
        }
        ++pos_;
        if (shape.size() == 1 && !trailing_comma) {
            const std::string extent = std::to_string(shape[0]);
            fail("'shape': (" + extent + ") is an integer, not a tuple (a 1-d shape is written (" +
                 extent + ",))");
        }
        check_shape(shape);
        return shape;
    }

    int64_t parse_integer() {
        const size_t start = pos_;
        const bool negative = peek() == '-';
        if (negative) ++pos_;
        if (!std::isdigit(static_cast<unsigned char>(peek())))
            fail_here("an integer extent in 'shape'");
        uint64_t magnitude = 0;
        bool overflow = false;
        for (; std::isdigit(static_cast<unsigned char>(peek())); ++pos_) {
            const uint64_t digit = uint64_t(peek() - '0');
            overflow |= magnitude > (uint64_t(std::numeric_limits<int64_t>::max()) - digit) / 10;
            if (!overflow) magnitude = magnitude * 10 + digit;
        }
        if (overflow)
            fail("'shape': extent " + printable(text_.substr(start, pos_ - start)) +
                 " is too large");
        if (peek() == 'L') ++pos_;
        if (is_word_char(0)) fail_here("an integer extent in 'shape'");
        return negative ? -int64_t(magnitude) : int64_t(magnitude);
    }

    void check_shape(const std::vector<int64_t> &shape) const {
        const std::string repr = "'shape': " + shape_repr(shape);
        if (shape.size() > kMaxRank)
            fail(repr + " has " + std::to_string(shape.size()) +
                 " dimensions; vpuc reads at most " + std::to_string(kMaxRank));
        int64_t elements = 1;
        for (int64_t extent : shape) {
            if (extent < 0) fail(repr + " has a negative extent");
            if (extent > kMaxElements)
                fail(repr + ": extent " + std::to_string(extent) + " is over " +
                     std::to_string(kMaxElements) + ", the largest vpuc holds");
            // Zero extents count as 1, so that the strides of the other dimensions fit in 32
            // bits; the product stays below 2^62, as each factor is below 2^31.
            elements *= std::max<int64_t>(extent, 1);
            if (elements > kMaxElements)
                fail(repr + " has over " + std::to_string(kMaxElements) +
                     " elements (counting a zero extent as 1), more than vpuc holds");
        }
    }

    std::string_view text_;
    std::string where_;
    size_t pos_ = 0;
};

uint32_t little_endian(const uint8_t *p, size_t bytes) {
    uint32_t value = 0;
    for (size_t i = bytes; i-- > 0;) value = value << 8 | p[i];
    return value;
}

// Owns a libzip object, discarding it (unwritten) on every way out.
struct ZipDiscard {
    void operator()(zip_t *archive) const { zip_discard(archive); }
};
struct ZipFileClose {
    void operator()(zip_file_t *file) const { zip_fclose(file); }
};
struct ZipSourceFree {
    void operator()(zip_source_t *source) const { zip_source_free(source); }
};
using ZipArchive = std::unique_ptr<zip_t, ZipDiscard>;
using ZipFile = std::unique_ptr<zip_file_t, ZipFileClose>;
using ZipSource = std::unique_ptr<zip_source_t, ZipSourceFree>;

// Frees a zip_error_t on every way out.
class ZipError {
  public:
    ZipError() { zip_error_init(&error_); }
    ~ZipError() { zip_error_fini(&error_); }
    ZipError(const ZipError &) = delete;
    ZipError &operator=(const ZipError &) = delete;
    zip_error_t *get() { return &error_; }
    std::string text() { return zip_error_strerror(&error_); }

  private:
    zip_error_t error_;
};

// The size limit of .npy files as the message of a file over it says it.
std::string npy_limit_text() {
    const files::FileKindInfo &info = files::file_kind_info(files::FileKind::Npy);
    return "the limit of " + files::size_text(files::size_limit(files::FileKind::Npy)) +
           " for .npy files (raise it with " + info.size_option + ")";
}

struct NpzEntry {
    zip_uint64_t index;
    std::string name; // as stored
    uint64_t declared_size;
};

// The entries of an archive with what their headers declare, checked before any is read:
// stored or deflated, unencrypted, and no more bytes in all than a .npy file may hold.
std::vector<NpzEntry> npz_entries(zip_t *archive, const std::string &what) {
    const zip_int64_t count = zip_get_num_entries(archive, 0);
    if (uint64_t(count) > kMaxNpzEntries)
        throw TensorFileError(what + ": " + std::to_string(count) + " entries, over the " +
                              std::to_string(kMaxNpzEntries) + " vpuc reads");
    const uint64_t limit = files::size_limit(files::FileKind::Npy);
    uint64_t total = 0;
    std::vector<NpzEntry> entries;
    for (zip_uint64_t i = 0; i < zip_uint64_t(count); ++i) {
        zip_stat_t stat;
        zip_stat_init(&stat);
        if (zip_stat_index(archive, i, ZIP_FL_ENC_RAW, &stat) != 0)
            throw TensorFileError(what + ": entry " + std::to_string(i) + ": " +
                                  zip_strerror(archive));
        const uint64_t needed =
            ZIP_STAT_NAME | ZIP_STAT_SIZE | ZIP_STAT_COMP_METHOD | ZIP_STAT_ENCRYPTION_METHOD;
        if ((stat.valid & needed) != needed)
            throw TensorFileError(what + ": entry " + std::to_string(i) +
                                  ": libzip reports no name, size or method");
        const std::string where = what + ": entry '" + printable(stat.name) + "'";
        if (stat.comp_method != ZIP_CM_STORE && stat.comp_method != ZIP_CM_DEFLATE)
            throw TensorFileError(where + ": compression method " +
                                  std::to_string(stat.comp_method) +
                                  "; .npz entries are stored (0) or deflated (8)");
        if (stat.encryption_method != ZIP_EM_NONE) throw TensorFileError(where + ": encrypted");
        total += std::min<uint64_t>(stat.size, limit + 1); // no wrap-around
        if (total > limit)
            throw TensorFileError(where + ": the entries up to this one declare over " +
                                  std::to_string(limit) + " bytes uncompressed, over " +
                                  npy_limit_text());
        entries.push_back({i, stat.name, stat.size});
    }
    return entries;
}

// An entry's bytes, read as they come, so that a header lying about the size costs no more
// memory than the data holds; more or fewer bytes than declared is an error, so the entries
// hold no more than npz_entries allowed.
std::vector<uint8_t> read_entry(zip_t *archive, const NpzEntry &entry, const std::string &where) {
    ZipFile file(zip_fopen_index(archive, entry.index, 0));
    if (!file) throw TensorFileError(where + ": " + zip_strerror(archive));
    constexpr size_t kChunk = size_t(1) << 20;
    std::vector<uint8_t> bytes;
    while (true) {
        const size_t used = bytes.size();
        // One byte past the declared size: reading to the end is what makes libzip check the
        // CRC, and finds data longer than declared.
        const uint64_t wanted = std::min<uint64_t>(kChunk, entry.declared_size + 1 - used);
        bytes.resize(used + size_t(wanted));
        const zip_int64_t got = zip_fread(file.get(), bytes.data() + used, wanted);
        if (got < 0) throw TensorFileError(where + ": " + zip_file_strerror(file.get()));
        bytes.resize(used + size_t(got));
        if (bytes.size() > entry.declared_size)
            throw TensorFileError(where + ": holds more than the " +
                                  bytes_text(entry.declared_size) + " it declares");
        if (got == 0) break;
    }
    if (bytes.size() != entry.declared_size)
        throw TensorFileError(where + ": holds " + bytes_text(bytes.size()) + ", not the " +
                              std::to_string(entry.declared_size) + " it declares");
    return bytes;
}

std::string lowercase_extension(const std::string &path) {
    std::string extension = std::filesystem::path(path).extension().string();
    for (char &c : extension) c = char(std::tolower(static_cast<unsigned char>(c)));
    return extension;
}

void write_bytes(const std::string &path, const std::vector<uint8_t> &bytes) {
    std::ofstream out(path, std::ios::binary);
    out.write(reinterpret_cast<const char *>(bytes.data()), std::streamsize(bytes.size()));
    if (!out) throw TensorFileError("cannot write tensor file '" + path + "'");
}

} // namespace

std::string dtype_name(const Halide::Type &type) {
    if (const Dtype *d = find_dtype(type)) return d->name;
    std::ostringstream name;
    name << type;
    return name.str();
}

std::string shape_text(const Halide::Buffer<> &value) {
    if (value.dimensions() == 0) return "scalar";
    std::string text;
    for (int d = value.dimensions() - 1; d >= 0; --d)
        text += std::to_string(value.dim(d).extent()) + (d ? "x" : "");
    return text;
}

Halide::Buffer<> dense(const Halide::Buffer<> &value) {
    int64_t stride = 1;
    bool in_order = true;
    std::vector<int> extents, mins;
    for (int d = 0; d < value.dimensions(); ++d) {
        in_order &= value.dim(d).stride() == stride;
        stride *= value.dim(d).extent();
        extents.push_back(value.dim(d).extent());
        mins.push_back(value.dim(d).min());
    }
    if (in_order) return value;
    Halide::Buffer<> copy(value.type(), extents);
    copy.set_min(mins);
    copy.copy_from(value);
    return copy;
}

Halide::Buffer<> parse_npy(const std::vector<uint8_t> &bytes, const std::string &what) {
    if (bytes.size() < kMagicAndVersion ||
        std::string_view(reinterpret_cast<const char *>(bytes.data()), kMagic.size()) != kMagic)
        throw TensorFileError(what + ": not a .npy file (it does not start with \\x93NUMPY and a "
                                     "version)");
    const int major = bytes[6], minor = bytes[7];
    if (major < 1 || major > 3 || minor != 0)
        throw TensorFileError(what + ": format version " + std::to_string(major) + "." +
                              std::to_string(minor) + " is not 1.0, 2.0 or 3.0");
    // Version 1.0 gives the header's length in 2 bytes, 2.0 and 3.0 (a UTF-8 header) in 4.
    const size_t length_bytes = major == 1 ? 2 : 4;
    const size_t header_start = kMagicAndVersion + length_bytes;
    if (bytes.size() < header_start)
        throw TensorFileError(what + ": header: its length is cut off (the file holds " +
                              bytes_text(bytes.size()) + ")");
    const size_t header_length = little_endian(&bytes[kMagicAndVersion], length_bytes);
    if (header_length > bytes.size() - header_start)
        throw TensorFileError(what + ": header: " + bytes_text(header_length) + " declared, " +
                              std::to_string(bytes.size() - header_start) + " in the file");
    const std::string_view text(reinterpret_cast<const char *>(&bytes[header_start]),
                                header_length);
    const NpyHeader header = HeaderParser(text, what).parse();

    int64_t elements = 1;
    for (int64_t extent : header.shape) elements *= extent;
    const uint64_t needed = uint64_t(elements) * uint64_t(header.dtype->bytes);
    const size_t data_start = header_start + header_length;
    const uint64_t present = bytes.size() - data_start;
    if (present != needed)
        throw TensorFileError(what + ": data: " + bytes_text(present) + ", but shape " +
                              shape_repr(header.shape) + " of " + descr_of(*header.dtype) +
                              " needs " + std::to_string(needed));
    const uint8_t *data = bytes.data() + data_start;
    if (header.dtype->kind == 'b')
        for (uint64_t i = 0; i < needed; ++i)
            if (data[i] > 1)
                throw TensorFileError(what + ": data: element " + std::to_string(i) +
                                      " of a bool array is " + std::to_string(data[i]) +
                                      ", neither 0 nor 1");

    std::vector<int> extents(header.shape.rbegin(), header.shape.rend());
    Halide::Buffer<> value(header.dtype->type, extents);
    if (needed) std::memcpy(value.raw_buffer()->host, data, size_t(needed));
    return value;
}

std::vector<NamedTensor> parse_npz(const std::vector<uint8_t> &bytes, const std::string &what) {
    // libzip opens no bytes at all as an empty archive; numpy.load refuses them.
    if (bytes.empty()) throw TensorFileError(what + ": an empty file, not a zip archive");
    ZipError error;
    ZipSource source(zip_source_buffer_create(bytes.data(), bytes.size(), 0, error.get()));
    if (!source) throw TensorFileError(what + ": " + error.text());
    ZipArchive archive(zip_open_from_source(source.get(), ZIP_RDONLY | ZIP_CHECKCONS, error.get()));
    if (!archive) throw TensorFileError(what + ": not a zip archive: " + error.text());
    source.release(); // the archive owns it now

    std::vector<NamedTensor> tensors;
    std::set<std::string> names;
    for (const NpzEntry &entry : npz_entries(archive.get(), what)) {
        const std::string where = what + ": entry '" + printable(entry.name) + "'";
        const std::vector<uint8_t> npy = read_entry(archive.get(), entry, where);
        const std::string_view suffix = ".npy";
        std::string name = entry.name;
        if (name.size() >= suffix.size() && name.compare(name.size() - 4, 4, suffix) == 0)
            name.resize(name.size() - suffix.size());
        if (!names.insert(name).second)
            throw TensorFileError(where + ": a second entry holding tensor '" + printable(name) +
                                  "'");
        tensors.push_back({name, parse_npy(npy, where)});
    }
    return tensors;
}

Halide::Buffer<> read_npy(const std::string &path) {
    return parse_npy(files::read_input_file(path, files::FileKind::Npy), path);
}

std::vector<NamedTensor> read_npz(const std::string &path) {
    return parse_npz(files::read_input_file(path, files::FileKind::Npy), path);
}

std::vector<NamedTensor> read_tensor_file(const std::string &path) {
    const std::string extension = lowercase_extension(path);
    if (extension == ".npy") return {{std::filesystem::path(path).stem().string(), read_npy(path)}};
    if (extension == ".npz") return read_npz(path);
    throw TensorFileError("'" + path +
                          "': not a tensor file: its name ends in neither .npy "
                          "nor .npz");
}

std::vector<uint8_t> serialize_npy(const Halide::Buffer<> &value) {
    const Dtype *dtype = find_dtype(value.type());
    if (!dtype)
        throw TensorFileError("a tensor of type " + dtype_name(value.type()) +
                              " has no .npy dtype vpuc writes");
    if (size_t(value.dimensions()) > kMaxRank)
        throw TensorFileError("a tensor of rank " + std::to_string(value.dimensions()) +
                              "; vpuc writes .npy files of rank 0 to " + std::to_string(kMaxRank));
    std::vector<int64_t> shape;
    for (int d = value.dimensions() - 1; d >= 0; --d) shape.push_back(value.dim(d).extent());
    std::string header = "{'descr': '" + descr_of(*dtype) +
                         "', 'fortran_order': False, 'shape': " + shape_repr(shape) + ", }";
    if (!shape.empty()) header.append(kGrowthAxisDigits - std::to_string(shape[0]).size(), ' ');
    // numpy pads with spaces so that the data starts at a multiple of 64 bytes, adding a whole
    // 64 when it already would, and ends the header with a newline.
    const size_t prefix = kMagicAndVersion + 2;
    header.append(kHeaderAlignment - (prefix + header.size() + 1) % kHeaderAlignment, ' ');
    header += '\n';

    const Halide::Buffer<> data = dense(value);
    std::vector<uint8_t> bytes(kMagic.begin(), kMagic.end());
    bytes.insert(bytes.end(), {1, 0, uint8_t(header.size() & 0xff), uint8_t(header.size() >> 8)});
    bytes.insert(bytes.end(), header.begin(), header.end());
    const auto *host = static_cast<const uint8_t *>(data.raw_buffer()->host);
    if (data.size_in_bytes()) bytes.insert(bytes.end(), host, host + data.size_in_bytes());
    return bytes;
}

std::vector<uint8_t> serialize_npz(const std::vector<NamedTensor> &tensors,
                                   NpzCompression compression) {
    std::set<std::string> names;
    for (const NamedTensor &t : tensors) {
        if (t.name.find('\0') != std::string::npos)
            throw TensorFileError("tensor '" + printable(t.name) +
                                  "': a name holding a NUL byte cannot name a zip entry");
        if (!names.insert(t.name).second)
            throw TensorFileError("tensor '" + printable(t.name) + "' given twice");
    }
    // The entries' bytes stay alive until the archive is written.
    std::vector<std::vector<uint8_t>> npys;
    npys.reserve(tensors.size());
    for (const NamedTensor &t : tensors) {
        try {
            npys.push_back(serialize_npy(t.value));
        } catch (const TensorFileError &e) {
            throw TensorFileError("tensor '" + printable(t.name) + "': " + e.what());
        }
    }

    // libzip writes nothing at all for an archive without entries; numpy writes the end of
    // the central directory alone.
    if (tensors.empty()) {
        std::vector<uint8_t> empty_archive = {'P', 'K', 5, 6};
        empty_archive.resize(22);
        return empty_archive;
    }
    ZipError error;
    ZipSource out(zip_source_buffer_create(nullptr, 0, 0, error.get()));
    if (!out) throw TensorFileError("cannot make an .npz archive: " + error.text());
    zip_source_keep(out.get()); // the archive's reference, dropped when it is closed
    ZipArchive archive(zip_open_from_source(out.get(), ZIP_TRUNCATE, error.get()));
    if (!archive) {
        zip_source_free(out.get()); // the archive's reference, which it did not take
        throw TensorFileError("cannot make an .npz archive: " + error.text());
    }
    const auto fail = [&](const std::string &name) {
        throw TensorFileError("cannot add tensor '" + printable(name) +
                              "' to an .npz archive: " + zip_strerror(archive.get()));
    };
    for (size_t i = 0; i < tensors.size(); ++i) {
        zip_source_t *entry = zip_source_buffer(archive.get(), npys[i].data(), npys[i].size(), 0);
        if (!entry) fail(tensors[i].name);
        const zip_int64_t index =
            zip_file_add(archive.get(), (tensors[i].name + ".npy").c_str(), entry, 0);
        if (index < 0) {
            zip_source_free(entry);
            fail(tensors[i].name);
        }
        const zip_int32_t method =
            compression == NpzCompression::Stored ? ZIP_CM_STORE : ZIP_CM_DEFLATE;
        if (zip_set_file_compression(archive.get(), zip_uint64_t(index), method, 0) != 0)
            fail(tensors[i].name);
    }
    if (zip_close(archive.get()) != 0)
        throw TensorFileError(std::string("cannot write an .npz archive: ") +
                              zip_strerror(archive.get()));
    archive.release(); // closed

    zip_stat_t stat;
    zip_stat_init(&stat);
    if (zip_source_stat(out.get(), &stat) != 0 || !(stat.valid & ZIP_STAT_SIZE) ||
        zip_source_open(out.get()) != 0)
        throw TensorFileError("cannot read back an .npz archive written in memory");
    std::vector<uint8_t> bytes(size_t(stat.size));
    const zip_int64_t got = zip_source_read(out.get(), bytes.data(), bytes.size());
    zip_source_close(out.get());
    if (got < 0 || uint64_t(got) != stat.size)
        throw TensorFileError("cannot read back an .npz archive written in memory");
    return bytes;
}

void write_npy(const std::string &path, const Halide::Buffer<> &value) {
    write_bytes(path, serialize_npy(value));
}

void write_npz(const std::string &path, const std::vector<NamedTensor> &tensors,
               NpzCompression compression) {
    write_bytes(path, serialize_npz(tensors, compression));
}

} // namespace vpuc::frontend

namespace vpuc::frontend {

namespace {

// A file name for tensor `name`: characters other than letters, digits, '.', '_' and '-'
// become '_', so that no name reaches outside the directory; long names are cut.
std::string tensor_file_name(const std::string &name) {
    std::string file;
    for (char ch : name.substr(0, 200))
        file += std::isalnum(static_cast<unsigned char>(ch)) || ch == '.' || ch == '_' || ch == '-'
                    ? ch
                    : '_';
    return file + ".npy";
}

} // namespace

void write_tensor_dir(const std::string &dir, const std::vector<NamedTensor> &tensors) {
    std::error_code error;
    std::filesystem::create_directories(dir, error);
    if (error) throw TensorFileError("cannot create directory '" + dir + "': " + error.message());
    std::string index;
    std::set<std::string> written;
    for (const NamedTensor &t : tensors) {
        if (t.name.find('\n') != std::string::npos)
            throw TensorFileError("tensor '" + printable(t.name) + "': a name holding a newline");
        std::string file = tensor_file_name(t.name);
        // Names that differ only in characters made '_' still get files of their own.
        while (!written.insert(file).second) file = "_" + file;
        write_npy(dir + "/" + file, t.value);
        index += t.name + " " + file + "\n";
    }
    write_bytes(dir + "/index.txt", std::vector<uint8_t>(index.begin(), index.end()));
}

std::vector<NamedTensor> read_tensor_dir(const std::string &dir) {
    const std::string index = dir + "/index.txt";
    std::istringstream lines(files::read_text_file(index, files::FileKind::Npy));
    std::vector<NamedTensor> tensors;
    int number = 0;
    for (std::string line; std::getline(lines, line);) {
        ++number;
        const size_t space = line.rfind(' ');
        const std::string file = space == std::string::npos ? "" : line.substr(space + 1);
        // Only .npy files of the directory itself: an index cannot lead elsewhere.
        if (space == 0 || file.find('/') != std::string::npos ||
            lowercase_extension(file) != ".npy" || file == ".npy")
            throw TensorFileError(index + ": line " + std::to_string(number) +
                                  ": expected NAME FILE.npy, FILE a file of the directory");
        tensors.push_back({line.substr(0, space), read_npy(dir + "/" + file)});
    }
    return tensors;
}

} // namespace vpuc::frontend
