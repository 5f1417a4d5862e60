// SHAVE kernels run sandboxed: a blob carries native code, and the simulator runs it in a
// worker process of its own (vpuc-shave-worker) that shares only the simulated memory with the
// simulator, under a seccomp filter, with a time limit per task. A kernel that crashes, hangs
// or misbehaves ends the worker and becomes a blob::BlobError naming the task, the kernel and
// the signal; the simulator carries on (docs/RELIABILITY.md, "The SHAVE sandbox").
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "vpu_target/blob.h"

namespace vpuc::sim {

// A kernel failed in its sandbox: it reported an error (e.g. its own bounds check), crashed,
// made a forbidden system call or ran past the time limit. Kernels are native code the
// verifier cannot check, so a verified blob can still end a run this way, and only this way;
// the message names the task, the kernel and what happened.
class KernelFault : public blob::BlobError {
  public:
    using blob::BlobError::BlobError;
};

// Memory shared with the worker: an anonymous file (memfd) mapped read-write, never executable.
class SharedMemory {
  public:
    explicit SharedMemory(uint64_t bytes); // zero-filled; throws blob::BlobError
    ~SharedMemory();
    SharedMemory(const SharedMemory &) = delete;
    SharedMemory &operator=(const SharedMemory &) = delete;

    uint8_t *data() const { return data_; }
    uint64_t size() const { return size_; }
    int fd() const { return fd_; }

  private:
    int fd_ = -1;
    uint8_t *data_ = nullptr;
    uint64_t size_ = 0;
};

// One argument of a kernel call, as its contract (blob::KernelArg) says.
struct ShaveArgument {
    blob::ArgKind kind = blob::ArgKind::InputBuffer;
    blob::DType dtype = blob::DType::U8;
    // Buffers: the offset in the shared memory of the element at the mins, and per dimension
    // (innermost first) min, extent and stride in elements, as Halide's buffers have them.
    uint64_t offset = 0;
    struct Dim {
        int32_t min = 0, extent = 0, stride = 0;
    };
    std::vector<Dim> dims;
    // Scalars.
    int64_t int_value = 0;
    double float_value = 0;
};

struct SandboxOptions {
    // A task whose kernel runs longer is stopped and reported (wall clock).
    double task_time_limit_s = 10;
};

// What the sandbox cost the simulator, in host time: the time it spent blocked on the worker
// (spawning it, waiting for it to load the kernels, sending tasks, waiting for results and,
// added by Simulator::run, ending it) and, of that, the time the kernels' own code ran. A kernel
// runs while the simulator goes on with other tasks, so the blocked time can be less than the
// kernels' time: blocked_ns - kernel_ns is what the sandbox adds to a run (negative: what running
// kernels on a second core saves).
struct SandboxStats {
    double start_ns = 0; // of blocked_ns: spawning and waiting for the kernels to load
    double blocked_ns = 0;
    double kernel_ns = 0;
    uint64_t tasks = 0;
};

// A blob's kernels laid out for the worker to load (checked and laid out with LLVM's ELF
// reader, once per blob: see kernel_object.h).
struct KernelImages {
    std::vector<std::string> names; // printable, for messages
    std::vector<uint8_t> bytes;     // every kernel's image, one after the other
    // Throws blob::BlobError naming the kernel when an object cannot be loaded (a verified
    // blob's can).
    static KernelImages of(const blob::Blob &blob);
};

class ShaveSandbox {
  public:
    // Starts a worker sharing `memory` and sends it the kernel images; the worker loads them
    // while the caller goes on. Throws blob::BlobError.
    ShaveSandbox(const KernelImages &kernels, const SharedMemory &memory,
                 const SandboxOptions &options = {});
    ~ShaveSandbox(); // stops the worker
    ShaveSandbox(const ShaveSandbox &) = delete;
    ShaveSandbox &operator=(const ShaveSandbox &) = delete;

    // Waits until the worker has loaded the kernels (the first finish() does); throws
    // blob::BlobError when it could not.
    void wait_for_kernels();

    // Sends kernel `kernel` on `args` (one per argument of its contract), its output cut across
    // `shaves` SHAVEs, to run in the worker; returns a ticket for finish(). The worker runs
    // tasks in the order they are submitted.
    uint64_t submit(uint32_t kernel, const std::vector<ShaveArgument> &args, uint32_t shaves,
                    const std::string &task);
    // Waits for a submitted task. Throws KernelFault naming the task and the kernel when it
    // (or a task submitted before it) reports an error (e.g. a bounds check), crashes, makes a
    // forbidden system call or exceeds the time limit; the worker is gone after the last three.
    void finish(uint64_t ticket);
    void run(uint32_t kernel, const std::vector<ShaveArgument> &args, uint32_t shaves,
             const std::string &task) {
        finish(submit(kernel, args, shaves, task));
    }

    const SandboxStats &stats() const { return stats_; }

    // The worker executable: $VPUC_SHAVE_WORKER if set, else the one built with this library.
    static std::string worker_path();

  private:
    struct Worker;
    struct Pending;
    std::string where(const Pending &task) const;
    std::chrono::steady_clock::time_point
    deadline_after(std::chrono::steady_clock::time_point start) const;

    std::unique_ptr<Worker> worker_;
    std::vector<std::string> kernel_names_;
    std::vector<Pending> pending_;                  // submitted, result not read yet, in order
    uint64_t next_ticket_ = 0, finished_below_ = 0; // tickets below finished_below_ are done
    std::chrono::steady_clock::time_point last_result_;
    bool loaded_ = false;
    SandboxOptions options_;
    SandboxStats stats_;
};

} // namespace vpuc::sim
