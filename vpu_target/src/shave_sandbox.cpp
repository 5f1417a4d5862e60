// The simulator's side of the SHAVE sandbox: asks the fork server (started with posix_spawn,
// so a simulator with threads never forks itself) for a worker, sends it the kernels, then one
// message per task, and turns everything that can go wrong in the worker into a BlobError.
#include "vpu_target/shave_sandbox.h"

#include <HalideRuntime.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <mutex>

#include "kernel_object.h"
#include "vpu_target/fp16.h"
#include "vpu_target/printable.h"

namespace vpuc::sim {

namespace {

using Clock = std::chrono::steady_clock;

std::string system_error(const std::string &what) {
    return what + ": " + std::strerror(errno);
}

// "SIGSEGV (Segmentation fault)"
std::string signal_name(int signal) {
    const char *abbrev = sigabbrev_np(signal);
    const char *description = strsignal(signal);
    return (abbrev ? "SIG" + std::string(abbrev) : "signal " + std::to_string(signal)) + " (" +
           (description ? description : "?") + ")";
}

} // namespace

SharedMemory::SharedMemory(uint64_t bytes) {
    size_ = std::max<uint64_t>(bytes, 1);
    fd_ = memfd_create("vpuc-simulated-memory", MFD_CLOEXEC);
    if (fd_ < 0) throw blob::BlobError(system_error("cannot create the simulated memory"));
    if (ftruncate(fd_, off_t(size_)) != 0) {
        const std::string error =
            system_error("cannot size the simulated memory to " + std::to_string(size_) + " bytes");
        ::close(fd_);
        throw blob::BlobError(error);
    }
    void *mapped = mmap(nullptr, size_, PROT_READ | PROT_WRITE, MAP_SHARED, fd_, 0);
    if (mapped == MAP_FAILED) {
        const std::string error = system_error("cannot map the simulated memory");
        ::close(fd_);
        throw blob::BlobError(error);
    }
    data_ = static_cast<uint8_t *>(mapped);
}

SharedMemory::~SharedMemory() {
    munmap(data_, size_);
    ::close(fd_);
}

namespace {

// The fork server (sandbox_protocol.h), one per process, started with the first worker asked
// of it. Requests from several simulators are taken one at a time.
class Zygote {
  public:
    static Zygote &instance() {
        static Zygote zygote;
        return zygote;
    }

    // Asks for a new worker holding the three descriptors: it sends its pid first on its
    // socket. Throws blob::BlobError.
    void spawn(int socket, int memory, int images) {
        std::lock_guard<std::mutex> lock(mutex_);
        const int fds[3] = {socket, memory, images};
        // A zygote that died (it never should) is started again, once.
        for (int attempt = 0; attempt < 2; ++attempt) {
            if (control_ < 0) start();
            if (send(sandbox::ZygoteRequest{sandbox::ZygoteRequest::Spawn, 0}, fds)) return;
            stop();
        }
        throw blob::BlobError("the SHAVE workers' zygote '" + path_ + "' does not answer");
    }

    // Has a worker killed and reaped, without waiting for it.
    void discard(pid_t pid) {
        std::lock_guard<std::mutex> lock(mutex_);
        if (control_ >= 0)
            send(sandbox::ZygoteRequest{sandbox::ZygoteRequest::Discard, pid}, nullptr);
    }

    // Reaps a worker (killing it first when asked); its wait status, or -1 if unknown.
    int reap(pid_t pid, bool kill_first) {
        std::lock_guard<std::mutex> lock(mutex_);
        sandbox::ZygoteReply reply;
        const sandbox::ZygoteRequest request{
            kill_first ? sandbox::ZygoteRequest::Kill : sandbox::ZygoteRequest::Wait, pid};
        if (control_ < 0 || !exchange(request, reply) || reply.error != 0) return -1;
        return reply.status;
    }

  private:
    Zygote() = default;
    ~Zygote() { stop(); }

    void start() {
        path_ = ShaveSandbox::worker_path();
        int sockets[2];
        if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sockets) != 0)
            throw blob::BlobError(system_error("cannot create the SHAVE zygote's socket"));
        posix_spawn_file_actions_t files;
        posix_spawn_file_actions_init(&files);
        posix_spawn_file_actions_adddup2(&files, sockets[1], sandbox::kSocketFd);
        posix_spawn_file_actions_addopen(&files, 1, "/dev/null", O_WRONLY, 0);
        posix_spawn_file_actions_addopen(&files, 2, "/dev/null", O_WRONLY, 0);
        char zygote_flag[] = "--zygote";
        char *argv[] = {const_cast<char *>(path_.c_str()), zygote_flag, nullptr};
        char *envp[] = {nullptr};
        const int spawned = posix_spawn(&pid_, path_.c_str(), &files, nullptr, argv, envp);
        posix_spawn_file_actions_destroy(&files);
        ::close(sockets[1]);
        if (spawned != 0) {
            ::close(sockets[0]);
            throw blob::BlobError("cannot start the SHAVE worker '" + path_ +
                                  "': " + std::strerror(spawned));
        }
        control_ = sockets[0];
    }

    void stop() {
        if (control_ < 0) return;
        ::close(control_); // the zygote exits at end of file
        control_ = -1;
        waitpid(pid_, nullptr, 0);
    }

    // One request, with descriptors to pass or none; false when the zygote is gone.
    bool send(const sandbox::ZygoteRequest &request, const int *fds) {
        return sandbox::send_message(control_, &request, sizeof request, fds);
    }

    // A request and its reply; false when the zygote is gone.
    bool exchange(const sandbox::ZygoteRequest &request, sandbox::ZygoteReply &reply) {
        if (!send(request, nullptr)) return false;
        ssize_t n;
        while ((n = ::recv(control_, &reply, sizeof reply, 0)) < 0 && errno == EINTR) {
        }
        return n == ssize_t(sizeof reply);
    }

    std::mutex mutex_;
    std::string path_;
    pid_t pid_ = -1;
    int control_ = -1;
};

// Why a worker's wait status ended it.
std::string ending(int status) {
    if (status < 0) return "the worker is gone";
    if (WIFSIGNALED(status)) {
        const int signal = WTERMSIG(status);
        if (signal == SIGSYS)
            return "it made a system call the sandbox forbids (" + signal_name(signal) + ")";
        return "it crashed with " + signal_name(signal);
    }
    return "the worker exited with status " + std::to_string(WEXITSTATUS(status));
}

} // namespace

constexpr auto kSpinBeforeSleeping = std::chrono::microseconds(50);

struct ShaveSandbox::Worker {
    pid_t pid = -1; // read from the socket, the worker's first message
    int socket = -1;
    bool running = false;

    ~Worker() {
        if (running) know_pid(Clock::now() + std::chrono::seconds(1));
        if (socket >= 0) ::close(socket);
        if (running && pid > 0) Zygote::instance().discard(pid);
    }

    bool know_pid(Clock::time_point deadline) {
        if (pid > 0) return true;
        int32_t sent = 0;
        if (receive_all(&sent, sizeof sent, deadline) != Read::Done || sent <= 0) return false;
        pid = sent;
        return true;
    }

    // Why the worker is gone (it is reaped here).
    std::string end(bool kill_it) {
        if (!running) return "the worker had stopped";
        running = false;
        if (!know_pid(Clock::now() + std::chrono::seconds(1)))
            return "the worker did not start (its socket closed)";
        return ending(Zygote::instance().reap(pid, kill_it));
    }

    bool send_all(const void *data, size_t bytes) {
        const auto *p = static_cast<const uint8_t *>(data);
        while (bytes > 0) {
            const ssize_t n = ::send(socket, p, bytes, MSG_NOSIGNAL);
            if (n < 0 && errno == EINTR) continue;
            if (n <= 0) return false;
            p += n;
            bytes -= size_t(n);
        }
        return true;
    }

    enum class Read { Done, Closed, TimedOut };

    // A Reply and the message that follows it.
    Read receive_reply(sandbox::Reply &reply, std::string &message, Clock::time_point deadline) {
        Read read = receive_all(&reply, sizeof reply, deadline);
        if (read != Read::Done) return read;
        message.resize(std::min<uint32_t>(reply.message_bytes, sandbox::kMaxMessageBytes));
        return receive_all(message.data(), message.size(), deadline);
    }

    Read receive_all(void *data, size_t bytes, Clock::time_point deadline) {
        auto *p = static_cast<uint8_t *>(data);
        // Most replies come within a few tens of microseconds, sooner than a sleeping thread
        // wakes up: poll first, and sleep only after that.
        const auto spin_end = Clock::now() + kSpinBeforeSleeping;
        while (bytes > 0 && Clock::now() < std::min(spin_end, deadline)) {
            const ssize_t n = ::recv(socket, p, bytes, MSG_DONTWAIT);
            if (n == 0) return Read::Closed;
            if (n < 0 && (errno == EAGAIN || errno == EINTR)) continue;
            if (n < 0) return Read::Closed;
            p += n;
            bytes -= size_t(n);
        }
        while (bytes > 0) {
            const auto left =
                std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now())
                    .count();
            if (left <= 0) return Read::TimedOut;
            pollfd fd{socket, POLLIN, 0};
            const int ready = ::poll(&fd, 1, int(std::min<int64_t>(left, 1 << 30)));
            if (ready < 0 && errno == EINTR) continue;
            if (ready == 0) return Read::TimedOut;
            const ssize_t n = ::recv(socket, p, bytes, 0);
            if (n < 0 && errno == EINTR) continue;
            if (n <= 0) return Read::Closed;
            p += n;
            bytes -= size_t(n);
        }
        return Read::Done;
    }
};

std::string ShaveSandbox::worker_path() {
    if (const char *path = std::getenv("VPUC_SHAVE_WORKER"); path && *path) return path;
    return VPUC_SHAVE_WORKER_PATH;
}

struct ShaveSandbox::Pending {
    uint64_t ticket = 0;
    std::string task;
    uint32_t kernel = 0;
    Clock::time_point submitted;
};

namespace {

// The kernel images one after the other, as the worker reads them from its image memory.
std::vector<uint8_t> image_file(const std::vector<KernelImage> &images) {
    std::vector<uint8_t> out;
    auto append = [&](const void *data, size_t bytes) {
        const auto *p = static_cast<const uint8_t *>(data);
        out.insert(out.end(), p, p + bytes);
    };
    for (const KernelImage &image : images) {
        append(&image.header, sizeof image.header);
        append(image.bytes.data(), image.bytes.size());
        append(image.relocations.data(), image.relocations.size() * sizeof(sandbox::Relocation));
    }
    return out;
}

double elapsed_ns(Clock::time_point since) {
    return std::chrono::duration<double, std::nano>(Clock::now() - since).count();
}

} // namespace

KernelImages KernelImages::of(const blob::Blob &blob) {
    KernelImages out;
    std::vector<KernelImage> images;
    const uint32_t kernels = blob.kernels() ? blob.kernels()->size() : 0;
    for (uint32_t i = 0; i < kernels; ++i) {
        const blob::Kernel &k = *blob.kernels()->Get(i);
        out.names.push_back(printable(k.name()->string_view()));
        images.push_back(prepare_kernel_image(k, out.names.back()));
    }
    out.bytes = image_file(images);
    return out;
}

ShaveSandbox::ShaveSandbox(const KernelImages &kernels, const SharedMemory &memory,
                           const SandboxOptions &options)
    : kernel_names_(kernels.names), options_(options) {
    const auto start = Clock::now();
    SharedMemory image_memory(kernels.bytes.size());
    std::memcpy(image_memory.data(), kernels.bytes.data(), kernels.bytes.size());

    worker_ = std::make_unique<Worker>();
    int sockets[2];
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sockets) != 0)
        throw blob::BlobError(system_error("cannot create the SHAVE worker's socket"));
    worker_->socket = sockets[0];
    try {
        Zygote::instance().spawn(sockets[1], memory.fd(), image_memory.fd());
    } catch (...) {
        ::close(sockets[1]);
        throw;
    }
    ::close(sockets[1]);
    worker_->running = true;

    sandbox::Hello hello;
    hello.kernels = uint32_t(kernels.names.size());
    hello.memory_bytes = memory.size();
    hello.image_bytes = image_memory.size();
    if (!worker_->send_all(&hello, sizeof hello))
        throw blob::BlobError("the SHAVE worker did not start: " + worker_->end(false));
    stats_.start_ns = stats_.blocked_ns = elapsed_ns(start);
}

ShaveSandbox::~ShaveSandbox() = default;

// The worker answers once every kernel is loaded: the first task waits for that.
void ShaveSandbox::wait_for_kernels() {
    if (loaded_) return;
    const auto start = Clock::now();
    sandbox::Reply reply;
    std::string message;
    const auto deadline = deadline_after(start);
    if (!worker_->know_pid(deadline)) {
        worker_->running = false;
        throw blob::BlobError("the SHAVE worker did not start");
    }
    const Worker::Read read = worker_->receive_reply(reply, message, deadline);
    if (read != Worker::Read::Done)
        throw blob::BlobError("the SHAVE worker did not start: " +
                              worker_->end(read == Worker::Read::TimedOut));
    if (reply.status != 0)
        throw blob::BlobError("the SHAVE worker could not load the kernels: " +
                              printable(message, 400));
    loaded_ = true;
    const double waited = elapsed_ns(start);
    stats_.start_ns += waited;
    stats_.blocked_ns += waited;
}

Clock::time_point ShaveSandbox::deadline_after(Clock::time_point start) const {
    return start + std::chrono::duration_cast<Clock::duration>(
                       std::chrono::duration<double>(options_.task_time_limit_s));
}

std::string ShaveSandbox::where(const Pending &task) const {
    const std::string kernel = task.kernel < kernel_names_.size() ? kernel_names_[task.kernel]
                                                                  : std::to_string(task.kernel);
    return "task '" + task.task + "': kernel '" + kernel + "'";
}

namespace {

sandbox::ArgDesc describe(const ShaveArgument &arg) {
    sandbox::ArgDesc out;
    switch (arg.kind) {
    case blob::ArgKind::InputBuffer:
    case blob::ArgKind::OutputBuffer: {
        out.kind = arg.kind == blob::ArgKind::InputBuffer ? sandbox::ArgKind::InputBuffer
                                                          : sandbox::ArgKind::OutputBuffer;
        const bool is_float = arg.dtype == blob::DType::F16 || arg.dtype == blob::DType::F32;
        const bool is_unsigned = arg.dtype == blob::DType::U8;
        out.type_code = is_float      ? halide_type_float
                        : is_unsigned ? halide_type_uint
                                      : halide_type_int;
        out.type_bits = uint32_t(8 * blob::dtype_bytes(arg.dtype));
        out.offset = arg.offset;
        out.dimensions = uint32_t(std::min<size_t>(arg.dims.size(), sandbox::kMaxRank));
        for (uint32_t d = 0; d < out.dimensions; ++d)
            out.dims[d] = {arg.dims[d].min, arg.dims[d].extent, arg.dims[d].stride};
        break;
    }
    case blob::ArgKind::ScalarInt:
        out.kind = sandbox::ArgKind::Int;
        out.scalar = uint64_t(arg.int_value);
        break;
    case blob::ArgKind::ScalarFloat:
        // Halide reads a float scalar at its own width.
        if (arg.dtype == blob::DType::F16) {
            out.kind = sandbox::ArgKind::Float16;
            out.scalar = fp16::from_float(float(arg.float_value));
        } else {
            out.kind = sandbox::ArgKind::Float32;
            const float value = float(arg.float_value);
            uint32_t bits = 0;
            std::memcpy(&bits, &value, sizeof bits);
            out.scalar = bits;
        }
        break;
    }
    return out;
}

} // namespace

uint64_t ShaveSandbox::submit(uint32_t kernel, const std::vector<ShaveArgument> &args,
                              uint32_t shaves, const std::string &task) {
    Pending pending{next_ticket_++, task, kernel, {}};
    if (!worker_->running)
        throw blob::BlobError(where(pending) + ": the SHAVE worker stopped after an earlier error");
    // Not waiting for the kernels to load: the task queues behind them.
    const auto start = Clock::now();
    // One message, so that the worker wakes once.
    sandbox::TaskHeader header;
    header.kernel = kernel;
    header.args = uint32_t(args.size());
    header.shaves = shaves;
    std::vector<uint8_t> message(sizeof header + args.size() * sizeof(sandbox::ArgDesc));
    std::memcpy(message.data(), &header, sizeof header);
    for (size_t i = 0; i < args.size(); ++i) {
        const sandbox::ArgDesc desc = describe(args[i]);
        std::memcpy(message.data() + sizeof header + i * sizeof desc, &desc, sizeof desc);
    }
    if (!worker_->send_all(message.data(), message.size())) {
        // The worker is gone: a kernel still running crashed it.
        const std::string ended = worker_->end(false);
        if (!pending_.empty())
            throw KernelFault(where(pending_.front()) + " did not finish: " + ended);
        throw blob::BlobError(where(pending) + " did not start: " + ended);
    }
    pending.submitted = Clock::now();
    stats_.blocked_ns += elapsed_ns(start);
    pending_.push_back(std::move(pending));
    return pending_.back().ticket;
}

void ShaveSandbox::finish(uint64_t ticket) {
    if (finished_below_ > ticket) return;
    wait_for_kernels();
    const auto start = Clock::now();
    // Results come in submission order: read them up to this task's.
    while (finished_below_ <= ticket && !pending_.empty()) {
        const Pending task = pending_.front();
        pending_.erase(pending_.begin());
        // The time limit runs from when the worker could begin the task: its submission, or
        // the result before it.
        sandbox::Reply reply;
        std::string message;
        const Worker::Read read = worker_->receive_reply(
            reply, message, deadline_after(std::max(task.submitted, last_result_)));
        if (read == Worker::Read::TimedOut) {
            worker_->end(true);
            char limit[32];
            std::snprintf(limit, sizeof limit, "%g", options_.task_time_limit_s);
            throw KernelFault(where(task) + " ran longer than the time limit of " + limit +
                              " s and was stopped");
        }
        if (read == Worker::Read::Closed)
            throw KernelFault(where(task) + " did not finish: " + worker_->end(false));
        last_result_ = Clock::now();
        finished_below_ = task.ticket + 1;
        ++stats_.tasks;
        stats_.kernel_ns += double(reply.kernel_ns);
        if (reply.status != 0)
            throw KernelFault(where(task) + " failed (status " + std::to_string(reply.status) +
                              "): " + printable(message, 400));
    }
    stats_.blocked_ns += elapsed_ns(start);
}

} // namespace vpuc::sim
