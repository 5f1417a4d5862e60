// The messages between the simulator and its SHAVE worker (vpu_target/worker/), a process of
// its own that links and runs the blob's kernels under seccomp (docs/RELIABILITY.md). Plain
// structs of fixed layout over a Unix socket: both sides are built from this header.
//
// Start-up: the simulator sends Hello; the kernels are in the image memory, one after the
// other (an ImageHeader, its bytes, its relocations); the worker answers one Reply once it has
// loaded them (status 0). Then, per SHAVE task: TaskHeader and `args` ArgDesc; the worker
// answers a Reply, in the order of the tasks. The worker exits at end of file.
#pragma once

#include <sys/socket.h>

#include <cerrno>
#include <cstdint>
#include <cstring>

namespace vpuc::sandbox {

constexpr uint32_t kMagic = 0x56505357; // "WSPV"
constexpr uint32_t kVersion = 1;

// The zygote (`vpuc-shave-worker --zygote`, one per simulator process) forks the workers, one
// per blob, each ahead of the request it will serve. Its descriptor 0 is a SOCK_SEQPACKET
// socket to the simulator, 1 and 2 /dev/null. A Spawn request carries three descriptors
// (SCM_RIGHTS): the worker's socket, the simulated memory and the kernel images; it has no
// answer, and the worker's first message on its socket is its pid (int32). Wait and Kill reap
// a worker and answer a ZygoteReply with its wait status; Discard kills and reaps it, with no
// answer.
//
// A worker's descriptors: the socket to the simulator, the shared memory and the kernel
// images (both closed once mapped); 1 and 2 are /dev/null, and every other descriptor is
// closed before any input is read.
constexpr int kSocketFd = 0;
constexpr int kMemoryFd = 3;
constexpr int kImagesFd = 4;

struct ZygoteRequest {
    enum Kind : uint32_t { Spawn = 1, Wait = 2, Kill = 3, Discard = 4 };
    Kind kind = Spawn;
    int32_t pid = 0; // Wait, Kill and Discard
};

struct ZygoteReply {
    int32_t pid = 0;    // the worker waited for or killed
    int32_t status = 0; // Wait and Kill: waitpid's status
    int32_t error = 0;  // an errno, 0 when done
};

constexpr uint32_t kMaxKernels = 4096;
constexpr uint64_t kMaxImageBytes = uint64_t(64) << 20;
constexpr uint32_t kMaxRelocations = 1u << 22;
constexpr uint32_t kMaxArgs = 64;
constexpr uint32_t kMaxRank = 8;
constexpr uint32_t kMaxMessageBytes = 4096;
constexpr uint64_t kPageBytes = 4096;

// The functions a kernel may call, by index (Relocation::symbol). The worker provides them:
// the math Halide calls from libm, the memory functions LLVM emits, Halide's heap allocation,
// and the error reports its bounds checks make.
inline constexpr const char *kImports[] = {
    "halide_malloc",
    "halide_free",
    "memcpy",
    "memmove",
    "memset",
    "sinf",
    "cosf",
    "tanf",
    "asinf",
    "acosf",
    "atanf",
    "atan2f",
    "sinhf",
    "coshf",
    "tanhf",
    "asinhf",
    "acoshf",
    "atanhf",
    "halide_error_access_out_of_bounds",
    "halide_error_bad_dimensions",
    "halide_error_bad_extern_fold",
    "halide_error_bad_fold",
    "halide_error_bad_type",
    "halide_error_bounds_inference_call_failed",
    "halide_error_buffer_allocation_too_large",
    "halide_error_buffer_argument_is_null",
    "halide_error_buffer_extents_negative",
    "halide_error_buffer_extents_too_large",
    "halide_error_buffer_is_null",
    "halide_error_constraint_violated",
    "halide_error_constraints_make_required_region_smaller",
    "halide_error_debug_to_file_failed",
    "halide_error_device_crop_failed",
    "halide_error_device_dirty_with_no_device_support",
    "halide_error_device_interface_no_device",
    "halide_error_explicit_bounds_too_small",
    "halide_error_extern_stage_failed",
    "halide_error_fold_factor_too_small",
    "halide_error_host_and_device_dirty",
    "halide_error_host_is_null",
    "halide_error_no_device_interface",
    "halide_error_out_of_memory",
    "halide_error_param_too_large_f64",
    "halide_error_param_too_large_i64",
    "halide_error_param_too_large_u64",
    "halide_error_param_too_small_f64",
    "halide_error_param_too_small_i64",
    "halide_error_param_too_small_u64",
    "halide_error_requirement_failed",
    "halide_error_specialize_fail",
    "halide_error_storage_bound_too_small",
    "halide_error_unaligned_host_ptr",
};
constexpr uint32_t kImportCount = sizeof(kImports) / sizeof(kImports[0]);

// Relocation::symbol values other than an import index.
constexpr uint32_t kInImage = 0xfffffffe;  // `target` is an offset in the kernel's image
constexpr uint32_t kAbsolute = 0xffffffff; // `target` is an absolute value

// x86-64 ELF relocation types the worker applies (the only ones Halide emits for kernels,
// which are position-independent).
constexpr uint32_t kRelocAbs64 = 1; // R_X86_64_64:    S + A
constexpr uint32_t kRelocPc32 = 2;  // R_X86_64_PC32:  S + A - P, 32-bit signed
constexpr uint32_t kRelocPlt32 = 4; // R_X86_64_PLT32: as PC32 (calls go through stubs)

struct Hello {
    uint32_t magic = kMagic;
    uint32_t version = kVersion;
    uint32_t kernels = 0;
    uint32_t reserved = 0;
    uint64_t memory_bytes = 0; // the size of the shared memory at kMemoryFd
    uint64_t image_bytes = 0;  // the size of the image memory at kImagesFd
};

// A kernel laid out for loading: text (read + execute), read-only data, then writable data,
// each a whole number of pages; `entry` is an offset into text.
struct ImageHeader {
    uint64_t text_bytes = 0;
    uint64_t rodata_bytes = 0;
    uint64_t data_bytes = 0;
    uint64_t entry = 0;
    uint32_t relocations = 0;
    uint32_t reserved = 0;
};

struct Relocation {
    uint64_t at = 0;     // offset in the image of the bytes to patch
    uint64_t target = 0; // see `symbol`
    int64_t addend = 0;
    uint32_t type = 0;
    uint32_t symbol = kInImage; // an index into kImports, kInImage or kAbsolute
};

// halide_dimension_t without its flags.
struct Dim {
    int32_t min = 0;
    int32_t extent = 0;
    int32_t stride = 0;
};

enum class ArgKind : uint32_t { InputBuffer = 0, OutputBuffer, Int, Float32, Float16 };

struct ArgDesc {
    ArgKind kind = ArgKind::InputBuffer;
    // Buffers: where the element at the mins lies in the shared memory, and Halide's type.
    uint32_t type_code = 0; // halide_type_code_t
    uint64_t offset = 0;
    uint32_t type_bits = 0;
    uint32_t dimensions = 0;
    Dim dims[kMaxRank] = {};
    // Scalars: the value's bits (an int64, a float, or fp16 bits).
    uint64_t scalar = 0;
};

struct TaskHeader {
    uint32_t kernel = 0;
    uint32_t args = 0;
    uint32_t shaves = 1; // the output is cut in this many slices along its outermost dimension
    uint32_t reserved = 0;
};

struct Reply {
    int32_t status = 0;         // 0: done; else the kernel's (or the loader's) error code
    uint32_t message_bytes = 0; // a message of that many bytes follows (at most kMaxMessageBytes)
    uint64_t kernel_ns = 0;     // time spent in the kernel's code
};

// The three descriptors a spawn request passes: the worker's socket, the simulated memory and
// the kernel images.
constexpr int kSpawnDescriptors = 3;

// Sends `bytes` as one message on a Unix socket, with the spawn descriptors (SCM_RIGHTS) when
// `fds` is not null; true when all of it went.
inline bool send_message(int socket, const void *data, size_t bytes, const int *fds) {
    iovec buffer{const_cast<void *>(data), bytes};
    alignas(cmsghdr) char control[CMSG_SPACE(kSpawnDescriptors * sizeof(int))] = {};
    msghdr message{};
    message.msg_iov = &buffer;
    message.msg_iovlen = 1;
    if (fds) {
        message.msg_control = control;
        message.msg_controllen = sizeof control;
        cmsghdr *rights = CMSG_FIRSTHDR(&message);
        rights->cmsg_level = SOL_SOCKET;
        rights->cmsg_type = SCM_RIGHTS;
        rights->cmsg_len = CMSG_LEN(kSpawnDescriptors * sizeof(int));
        std::memcpy(CMSG_DATA(rights), fds, kSpawnDescriptors * sizeof(int));
    }
    ssize_t n;
    while ((n = sendmsg(socket, &message, MSG_NOSIGNAL)) < 0 && errno == EINTR) {
    }
    return n == ssize_t(bytes);
}

} // namespace vpuc::sandbox
