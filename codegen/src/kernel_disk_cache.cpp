#include "kernel_disk_cache.h"

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>
#include <string_view>
#include <system_error>
#include <thread>
#include <type_traits>

#include <unistd.h>

namespace vpuc::codegen::detail {

namespace {

namespace fs = std::filesystem;

// Bumped when the layout below changes.
constexpr char kMagic[] = "vpuc SHAVE kernel cache 1\n";
// A kernel object plus its key (the kernel's lowered statement and constant buffers) stays far
// below this; anything larger is not one of ours.
constexpr uintmax_t kMaxFileBytes = uintmax_t(1) << 30;

// Fixed-size values in the host's byte order: the cache belongs to one machine's compiler.
class Writer {
  public:
    template <typename T> void put(T value) {
        static_assert(std::is_trivially_copyable_v<T>);
        out_.append(reinterpret_cast<const char *>(&value), sizeof value);
    }
    void put_bytes(const void *data, size_t size) {
        put<uint64_t>(size);
        out_.append(static_cast<const char *>(data), size);
    }
    void put_string(const std::string &s) { put_bytes(s.data(), s.size()); }
    const std::string &bytes() const { return out_; }

  private:
    std::string out_;
};

// Every read checks the bytes left; a failed read leaves ok() false and reads zeros after.
class Reader {
  public:
    explicit Reader(const std::string &in) : in_(in) {}
    template <typename T> T get() {
        static_assert(std::is_trivially_copyable_v<T>);
        T value{};
        if (take(sizeof value)) std::memcpy(&value, in_.data() + pos_ - sizeof value, sizeof value);
        return value;
    }
    std::string get_string() {
        const uint64_t size = get<uint64_t>();
        if (!take(size)) return {};
        return in_.substr(pos_ - size, size);
    }
    bool ok() const { return ok_; }
    bool at_end() const { return ok_ && pos_ == in_.size(); }

  private:
    bool take(uint64_t size) {
        if (!ok_ || size > in_.size() - pos_) return ok_ = false;
        pos_ += size;
        return true;
    }
    const std::string &in_;
    size_t pos_ = 0;
    bool ok_ = true;
};

std::string encode(const std::string &key, const ShaveKernelBinary &kernel) {
    Writer w;
    w.put_bytes(kMagic, sizeof kMagic - 1);
    w.put_string(key);
    w.put_string(kernel.entry);
    w.put<uint64_t>(kernel.args.size());
    for (const KernelArgDesc &arg : kernel.args) {
        w.put_string(arg.name);
        w.put<uint8_t>(uint8_t(arg.kind));
        w.put<uint8_t>(uint8_t(arg.dtype));
        w.put<int32_t>(arg.rank);
        w.put<uint64_t>(arg.reads.size());
        for (const blob::ReadBound &r : arg.reads)
            for (int32_t v :
                 {int32_t(r.source()), r.scale(), r.divisor(), r.shift(), r.min_offset(),
                  r.max_offset(), r.min_lo(), r.min_hi(), r.max_lo(), r.max_hi()})
                w.put<int32_t>(v);
    }
    w.put<uint32_t>(kernel.vector_lanes);
    w.put<double>(kernel.per_vector.arith_ops);
    w.put<double>(kernel.per_vector.special_ops);
    w.put<double>(kernel.per_vector.cmx_bytes);
    w.put_bytes(kernel.object.data(), kernel.object.size());
    // A checksum of all of the above: a damaged object would otherwise load and run.
    w.put<uint64_t>(std::hash<std::string_view>{}(w.bytes()));
    return w.bytes();
}

std::optional<ShaveKernelBinary> decode(const std::string &file, const std::string &key) {
    if (file.size() < sizeof(uint64_t)) return std::nullopt;
    const std::string bytes = file.substr(0, file.size() - sizeof(uint64_t));
    uint64_t checksum = 0;
    std::memcpy(&checksum, file.data() + bytes.size(), sizeof checksum);
    if (checksum != std::hash<std::string_view>{}(bytes)) return std::nullopt;
    Reader r(bytes);
    if (r.get_string() != std::string(kMagic, sizeof kMagic - 1) || r.get_string() != key)
        return std::nullopt;
    ShaveKernelBinary kernel;
    kernel.entry = r.get_string();
    const uint64_t args = r.get<uint64_t>();
    // Every argument takes bytes of the file: a larger count is not one the file can hold.
    if (args > bytes.size()) return std::nullopt;
    for (uint64_t i = 0; i < args && r.ok(); ++i) {
        KernelArgDesc arg;
        arg.name = r.get_string();
        const uint8_t kind = r.get<uint8_t>(), dtype = r.get<uint8_t>();
        if (kind > uint8_t(blob::ArgKind::MAX) || dtype > uint8_t(blob::DType::MAX))
            return std::nullopt;
        arg.kind = blob::ArgKind(kind);
        arg.dtype = blob::DType(dtype);
        arg.rank = r.get<int32_t>();
        const uint64_t reads = r.get<uint64_t>();
        if (reads > bytes.size()) return std::nullopt;
        for (uint64_t d = 0; d < reads && r.ok(); ++d) {
            int32_t v[10];
            for (int32_t &x : v) x = r.get<int32_t>();
            arg.reads.emplace_back(int8_t(v[0]), v[1], v[2], v[3], v[4], v[5], v[6], v[7], v[8],
                                   v[9]);
        }
        kernel.args.push_back(std::move(arg));
    }
    kernel.vector_lanes = r.get<uint32_t>();
    kernel.per_vector.arith_ops = r.get<double>();
    kernel.per_vector.special_ops = r.get<double>();
    kernel.per_vector.cmx_bytes = r.get<double>();
    const std::string object = r.get_string();
    if (!r.at_end()) return std::nullopt;
    kernel.object.assign(object.begin(), object.end());
    return kernel;
}

} // namespace

std::string kernel_cache_file(const std::string &dir, const std::string &key) {
    std::ostringstream name;
    name << std::hex << std::hash<std::string>{}(key) << ".kernel";
    return (fs::path(dir) / name.str()).string();
}

std::string kernel_cache_dir() {
    const char *dir = std::getenv("VPUC_KERNEL_CACHE_DIR");
    return dir ? dir : "";
}

std::optional<ShaveKernelBinary> read_cached_kernel(const std::string &dir,
                                                    const std::string &key) {
    const std::string path = kernel_cache_file(dir, key);
    std::error_code error;
    if (!fs::is_regular_file(path, error) || fs::file_size(path, error) > kMaxFileBytes || error)
        return std::nullopt;
    std::ifstream in(path, std::ios::binary);
    std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    if (!in.good() && !in.eof()) return std::nullopt;
    return decode(bytes, key);
}

std::string write_cached_kernel(const std::string &dir, const std::string &key,
                                const ShaveKernelBinary &kernel) {
    std::error_code error;
    fs::create_directories(dir, error);
    if (error) return "cannot create " + dir + ": " + error.message();
    const std::string path = kernel_cache_file(dir, key);
    // Unique among the processes and threads writing this directory at once.
    static std::atomic<uint64_t> written{0};
    std::ostringstream temp;
    temp << path << ".tmp." << ::getpid() << '.'
         << std::hash<std::thread::id>{}(std::this_thread::get_id()) << '.' << written++;
    {
        std::ofstream out(temp.str(), std::ios::binary | std::ios::trunc);
        const std::string bytes = encode(key, kernel);
        out.write(bytes.data(), std::streamsize(bytes.size()));
        out.close();
        if (!out) {
            fs::remove(temp.str(), error);
            return "cannot write " + temp.str();
        }
    }
    fs::rename(temp.str(), path, error);
    if (error) {
        const std::string why =
            "cannot rename " + temp.str() + " to " + path + ": " + error.message();
        fs::remove(temp.str(), error);
        return why;
    }
    return "";
}

} // namespace vpuc::codegen::detail
