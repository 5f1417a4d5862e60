#include "vpu_target/input_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <limits>
#include <utility>

namespace vpuc::files {

namespace {

constexpr uint64_t KiB = uint64_t(1) << 10, MiB = KiB << 10, GiB = MiB << 10;

constexpr size_t kKinds = size_t(FileKind::RawInput) + 1;

// Read in pieces, so that a file reporting no size costs no more memory than it holds.
constexpr size_t kReadChunk = 1 << 16;

std::array<uint64_t, kKinds> &limits() {
    static std::array<uint64_t, kKinds> bytes = [] {
        std::array<uint64_t, kKinds> defaults{};
        for (const FileKindInfo &k : file_kinds()) defaults[size_t(k.kind)] = k.default_limit;
        return defaults;
    }();
    return bytes;
}

void require_limited(FileKind kind) {
    if (kind == FileKind::RawInput)
        throw std::invalid_argument("raw input files have no size limit of their own: their "
                                    "reader passes the size the blob expects");
}

// Closes the descriptor on every way out.
class Descriptor {
  public:
    explicit Descriptor(int fd) : fd_(fd) {}
    ~Descriptor() { ::close(fd_); }
    Descriptor(const Descriptor &) = delete;
    Descriptor &operator=(const Descriptor &) = delete;
    int get() const { return fd_; }

  private:
    int fd_;
};

// Reads one file for messages that name it by kind and path.
class Reader {
  public:
    Reader(const std::string &path, FileKind kind, uint64_t max_bytes)
        // No file holds 2^64 - 1 bytes; the cap keeps max_bytes + 1 from wrapping around.
        : path_(path), info_(file_kind_info(kind)),
          max_bytes_(std::min(max_bytes, std::numeric_limits<uint64_t>::max() - 1)) {}

    template <typename Buffer> Buffer read() const {
        // Refuse what is not a regular file before opening it: opening a device can act on
        // it (a watchdog starts, a tape rewinds).
        struct stat st {};
        if (::stat(path_.c_str(), &st) != 0) fail_system("cannot open");
        require_regular(st);
        // Without O_NONBLOCK, opening a FIFO put in the file's place since waits for a writer.
        const int fd = ::open(path_.c_str(), O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
        if (fd < 0) fail_system("cannot open");
        const Descriptor file(fd);
        if (::fstat(file.get(), &st) != 0) fail_system("cannot read");
        require_regular(st); // what was opened, which need not be what stat saw
        if (uint64_t(st.st_size) > max_bytes_)
            fail("is " + std::to_string(st.st_size) + " bytes, over " + limit());
        Buffer data;
        // Room for the read that finds the end too, so that it does not double the buffer.
        data.reserve(size_t(std::min<uint64_t>(uint64_t(st.st_size) + kReadChunk, max_bytes_ + 1)));
        // Up to max_bytes + 1: one byte past the limit tells a file that reported a wrong size.
        while (true) {
            const uint64_t room = max_bytes_ + 1 - data.size();
            if (room == 0) fail("holds more than " + limit());
            const size_t used = data.size();
            data.resize(used + size_t(std::min<uint64_t>(room, kReadChunk)));
            const ssize_t got = ::read(file.get(), &data[used], data.size() - used);
            if (got < 0 && errno == EINTR) {
                data.resize(used);
                continue;
            }
            if (got < 0) fail_system("cannot read");
            data.resize(used + size_t(got));
            if (got == 0) return data;
        }
    }

  private:
    std::string described() const { return std::string(info_.name) + " file '" + path_ + "'"; }

    // "the limit of 1 GiB for blob files (raise it with --max-blob-size)"
    std::string limit() const {
        if (*info_.size_option == '\0') return "the " + size_text(max_bytes_) + " expected";
        return "the limit of " + size_text(max_bytes_) + " for " + info_.name +
               " files (raise it with " + info_.size_option + ")";
    }

    [[noreturn]] void fail(const std::string &what) const {
        throw InputFileError(described() + " " + what);
    }

    [[noreturn]] void fail_system(const std::string &what) const {
        const std::error_code code(errno, std::generic_category());
        throw InputFileError(what + " " + described() + ": " + code.message(), code);
    }

    void require_regular(const struct stat &st) const {
        if (S_ISREG(st.st_mode)) return;
        const char *type = S_ISDIR(st.st_mode)    ? "a directory"
                           : S_ISCHR(st.st_mode)  ? "a character device"
                           : S_ISBLK(st.st_mode)  ? "a block device"
                           : S_ISFIFO(st.st_mode) ? "a FIFO"
                           : S_ISSOCK(st.st_mode) ? "a socket"
                                                  : "a special file";
        fail("is " + std::string(type) + ", not a regular file");
    }

    const std::string &path_;
    const FileKindInfo &info_;
    uint64_t max_bytes_;
};

} // namespace

const std::vector<FileKindInfo> &file_kinds() {
    static const std::vector<FileKindInfo> kinds = {
        {FileKind::Blob, "blob", "--max-blob-size", 1 * GiB},
        {FileKind::Model, "ONNX model", "--max-model-size", 2 * GiB},
        {FileKind::Target, "target", "--max-target-size", 1 * MiB},
        {FileKind::ReferenceCsv, "reference CSV", "--max-reference-size", 64 * MiB},
        {FileKind::Schedule, "schedule", "--max-schedule-size", 16 * MiB},
        {FileKind::Npy, ".npy", "--max-npy-size", 1 * GiB},
        {FileKind::Image, "image", "--max-image-size", 256 * MiB},
        {FileKind::RawInput, "input", "", 0},
    };
    return kinds;
}

const FileKindInfo &file_kind_info(FileKind kind) {
    return file_kinds().at(size_t(kind));
}

uint64_t size_limit(FileKind kind) {
    require_limited(kind);
    return limits()[size_t(kind)];
}

void set_size_limit(FileKind kind, uint64_t bytes) {
    require_limited(kind);
    if (bytes == 0) throw std::invalid_argument("a size limit of 0 bytes admits no file");
    limits()[size_t(kind)] = bytes;
}

std::string size_text(uint64_t bytes) {
    for (const auto &[unit, name] : {std::pair{GiB, " GiB"}, {MiB, " MiB"}, {KiB, " KiB"}})
        if (bytes >= unit && bytes % unit == 0) return std::to_string(bytes / unit) + name;
    return std::to_string(bytes) + (bytes == 1 ? " byte" : " bytes");
}

std::vector<uint8_t> read_input_file(const std::string &path, FileKind kind, uint64_t max_bytes) {
    return Reader(path, kind, max_bytes).read<std::vector<uint8_t>>();
}

std::vector<uint8_t> read_input_file(const std::string &path, FileKind kind) {
    return read_input_file(path, kind, size_limit(kind));
}

std::string read_text_file(const std::string &path, FileKind kind) {
    return Reader(path, kind, size_limit(kind)).read<std::string>();
}

} // namespace vpuc::files
