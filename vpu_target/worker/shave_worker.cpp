// vpuc-shave-worker: runs a blob's SHAVE kernels for the simulator, in a process of its own.
//
// A kernel is native code from a blob, which is untrusted input. A worker holds nothing a
// kernel could misuse: before it reads a byte from the simulator, every descriptor but its
// socket and the two memories it maps is closed, and once they are mapped a seccomp filter
// allows only the system calls the work needs (no open, no exec, no sockets, no signals to
// others). Once the kernels are loaded, a second filter forbids making any memory executable,
// so kernel code cannot write new code into its buffers and run it. A kernel that crashes,
// loops or makes a forbidden call ends its worker, never the simulator, which reports the task
// and the signal (vpu_target/src/shave_sandbox.cpp).
//
// Started with --zygote (the only way the simulator starts it), the process is a fork server:
// it compiles the two filters once, then forks a fresh worker for each blob the simulator
// sends, which is much faster than starting a process, and reaps it. It runs no kernel code
// and reads nothing but the simulator's fixed-size requests. The protocol: sandbox_protocol.h.
#include <HalideRuntime.h>
#include <fcntl.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <poll.h>
#include <seccomp.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cinttypes>
#include <cmath>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>

#include "sandbox_protocol.h"

namespace sb = vpuc::sandbox;

namespace {

// The last error a kernel reported through one of Halide's error functions.
char g_message[sb::kMaxMessageBytes];

void set_message(const char *format, ...) {
    va_list args;
    va_start(args, format);
    std::vsnprintf(g_message, sizeof g_message, format, args);
    va_end(args);
}

const char *text(const char *s) {
    return s ? s : "?";
}

} // namespace

// ---- What kernels call: Halide's heap and error reports --------------------------------------

extern "C" {

// In a build with AddressSanitizer: a signal kills the worker as it would otherwise (the
// sanitizer's handlers would make system calls the sandbox forbids), and no leak check runs
// at exit.
const char *__asan_default_options() {
    return "handle_segv=0:handle_sigbus=0:handle_sigfpe=0:handle_sigill=0:handle_abort=0:"
           "detect_leaks=0";
}

void *halide_malloc(void *, size_t bytes) {
    // Halide assumes its runtime's alignment; 128 bytes covers every vector width.
    constexpr size_t kAlignment = 128;
    const size_t rounded = (std::max<size_t>(bytes, 1) + kAlignment - 1) / kAlignment * kAlignment;
    return std::aligned_alloc(kAlignment, rounded);
}

void halide_free(void *, void *ptr) {
    std::free(ptr);
}

int halide_error_access_out_of_bounds(void *, const char *func_name, int dimension, int min_touched,
                                      int max_touched, int min_valid, int max_valid) {
    set_message("%s: dimension %d is read at %d..%d, outside its window %d..%d", text(func_name),
                dimension, min_touched, max_touched, min_valid, max_valid);
    return halide_error_code_access_out_of_bounds;
}
int halide_error_bad_dimensions(void *, const char *func_name, int32_t given, int32_t correct) {
    set_message("%s has %d dimensions, the kernel takes %d", text(func_name), given, correct);
    return halide_error_code_bad_dimensions;
}
int halide_error_bad_extern_fold(void *, const char *func_name, int dim, int min, int extent,
                                 int valid_min, int fold_factor) {
    set_message("%s: bad extern fold in dimension %d (%d+%d, valid from %d, fold %d)",
                text(func_name), dim, min, extent, valid_min, fold_factor);
    return halide_error_code_bad_extern_fold;
}
int halide_error_bad_fold(void *, const char *func_name, const char *var_name,
                          const char *loop_name) {
    set_message("%s: bad fold of %s in loop %s", text(func_name), text(var_name), text(loop_name));
    return halide_error_code_bad_fold;
}
int halide_error_bad_type(void *, const char *func_name, uint32_t given, uint32_t correct) {
    set_message("%s has type bits %#x, the kernel takes %#x", text(func_name), given, correct);
    return halide_error_code_bad_type;
}
int halide_error_bounds_inference_call_failed(void *, const char *stage, int result) {
    set_message("bounds query of %s failed with %d", text(stage), result);
    return result;
}
int halide_error_buffer_allocation_too_large(void *, const char *buffer_name, uint64_t size,
                                             uint64_t max_size) {
    set_message("%s: an allocation of %" PRIu64 " bytes exceeds %" PRIu64, text(buffer_name), size,
                max_size);
    return halide_error_code_buffer_allocation_too_large;
}
int halide_error_buffer_argument_is_null(void *, const char *buffer_name) {
    set_message("buffer %s is null", text(buffer_name));
    return halide_error_code_buffer_argument_is_null;
}
int halide_error_buffer_extents_negative(void *, const char *buffer_name, int dimension,
                                         int extent) {
    set_message("%s: dimension %d has negative extent %d", text(buffer_name), dimension, extent);
    return halide_error_code_buffer_extents_negative;
}
int halide_error_buffer_extents_too_large(void *, const char *buffer_name, int64_t actual,
                                          int64_t max_size) {
    set_message("%s: %" PRId64 " elements exceed %" PRId64, text(buffer_name), actual, max_size);
    return halide_error_code_buffer_extents_too_large;
}
int halide_error_buffer_is_null(void *, const char *routine) {
    set_message("a null buffer in %s", text(routine));
    return halide_error_code_buffer_is_null;
}
int halide_error_constraint_violated(void *, const char *var, int val, const char *constrained_var,
                                     int constrained_val) {
    set_message("constraint violated: %s (%d) == %s (%d)", text(var), val, text(constrained_var),
                constrained_val);
    return halide_error_code_constraint_violated;
}
int halide_error_constraints_make_required_region_smaller(void *, const char *buffer_name,
                                                          int dimension, int constrained_min,
                                                          int constrained_extent, int required_min,
                                                          int required_extent) {
    set_message("%s: dimension %d constrained to %d+%d, smaller than the required %d+%d",
                text(buffer_name), dimension, constrained_min, constrained_extent, required_min,
                required_extent);
    return halide_error_code_constraints_make_required_region_smaller;
}
int halide_error_debug_to_file_failed(void *, const char *func, const char *, int error_code) {
    set_message("debug_to_file of %s failed (%d): kernels write no files", text(func), error_code);
    return halide_error_code_debug_to_file_failed;
}
int halide_error_device_crop_failed(void *) {
    set_message("device crop failed: kernels have no device");
    return halide_error_code_device_crop_failed;
}
int halide_error_device_dirty_with_no_device_support(void *, const char *buffer_name) {
    set_message("%s is marked dirty on a device: kernels have no device", text(buffer_name));
    return halide_error_code_device_dirty_with_no_device_support;
}
int halide_error_device_interface_no_device(void *) {
    set_message("a device interface without a device");
    return halide_error_code_device_interface_no_device;
}
int halide_error_explicit_bounds_too_small(void *, const char *func_name, const char *var_name,
                                           int min_bound, int max_bound, int min_required,
                                           int max_required) {
    set_message("%s: bounds %d..%d of %s are smaller than the required %d..%d", text(func_name),
                min_bound, max_bound, text(var_name), min_required, max_required);
    return halide_error_code_explicit_bounds_too_small;
}
int halide_error_extern_stage_failed(void *, const char *stage, int result) {
    set_message("extern stage %s failed with %d", text(stage), result);
    return result;
}
int halide_error_fold_factor_too_small(void *, const char *func_name, const char *var_name,
                                       int fold_factor, const char *loop_name,
                                       int required_extent) {
    set_message("%s: fold factor %d of %s in %s is below the required %d", text(func_name),
                fold_factor, text(var_name), text(loop_name), required_extent);
    return halide_error_code_fold_factor_too_small;
}
int halide_error_host_and_device_dirty(void *) {
    set_message("a buffer is dirty on host and device");
    return halide_error_code_host_and_device_dirty;
}
int halide_error_host_is_null(void *, const char *func_name) {
    set_message("%s has no host memory", text(func_name));
    return halide_error_code_host_is_null;
}
int halide_error_no_device_interface(void *) {
    set_message("no device interface: kernels have no device");
    return halide_error_code_no_device_interface;
}
int halide_error_out_of_memory(void *) {
    set_message("out of memory");
    return halide_error_code_out_of_memory;
}
int halide_error_param_too_large_f64(void *, const char *param, double val, double max_val) {
    set_message("parameter %s is %g, above its maximum %g", text(param), val, max_val);
    return halide_error_code_param_too_large;
}
int halide_error_param_too_large_i64(void *, const char *param, int64_t val, int64_t max_val) {
    set_message("parameter %s is %" PRId64 ", above its maximum %" PRId64, text(param), val,
                max_val);
    return halide_error_code_param_too_large;
}
int halide_error_param_too_large_u64(void *, const char *param, uint64_t val, uint64_t max_val) {
    set_message("parameter %s is %" PRIu64 ", above its maximum %" PRIu64, text(param), val,
                max_val);
    return halide_error_code_param_too_large;
}
int halide_error_param_too_small_f64(void *, const char *param, double val, double min_val) {
    set_message("parameter %s is %g, below its minimum %g", text(param), val, min_val);
    return halide_error_code_param_too_small;
}
int halide_error_param_too_small_i64(void *, const char *param, int64_t val, int64_t min_val) {
    set_message("parameter %s is %" PRId64 ", below its minimum %" PRId64, text(param), val,
                min_val);
    return halide_error_code_param_too_small;
}
int halide_error_param_too_small_u64(void *, const char *param, uint64_t val, uint64_t min_val) {
    set_message("parameter %s is %" PRIu64 ", below its minimum %" PRIu64, text(param), val,
                min_val);
    return halide_error_code_param_too_small;
}
int halide_error_requirement_failed(void *, const char *condition, const char *message) {
    set_message("requirement failed: %s %s", text(condition), text(message));
    return halide_error_code_requirement_failed;
}
int halide_error_specialize_fail(void *, const char *message) {
    set_message("no specialization matched: %s", text(message));
    return halide_error_code_specialize_fail;
}
int halide_error_storage_bound_too_small(void *, const char *func_name, const char *var_name,
                                         int provided_size, int required_size) {
    set_message("%s: storage of %s is %d, below the required %d", text(func_name), text(var_name),
                provided_size, required_size);
    return halide_error_code_storage_bound_too_small;
}
int halide_error_unaligned_host_ptr(void *, const char *func_name, int alignment) {
    set_message("%s: host pointer not aligned to %d bytes", text(func_name), alignment);
    return halide_error_code_unaligned_host_ptr;
}

} // extern "C"

namespace {

struct Import {
    const char *name;
    const void *address;
};

template <typename F> const void *address_of(F *function) {
    return reinterpret_cast<const void *>(function);
}

// In sandbox::kImports order (checked at start-up).
const Import kImportTable[] = {
    {"halide_malloc", address_of(&halide_malloc)},
    {"halide_free", address_of(&halide_free)},
    {"memcpy", address_of(&::memcpy)},
    {"memmove", address_of(&::memmove)},
    {"memset", address_of(&::memset)},
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
    {"halide_error_access_out_of_bounds", address_of(&halide_error_access_out_of_bounds)},
    {"halide_error_bad_dimensions", address_of(&halide_error_bad_dimensions)},
    {"halide_error_bad_extern_fold", address_of(&halide_error_bad_extern_fold)},
    {"halide_error_bad_fold", address_of(&halide_error_bad_fold)},
    {"halide_error_bad_type", address_of(&halide_error_bad_type)},
    {"halide_error_bounds_inference_call_failed",
     address_of(&halide_error_bounds_inference_call_failed)},
    {"halide_error_buffer_allocation_too_large",
     address_of(&halide_error_buffer_allocation_too_large)},
    {"halide_error_buffer_argument_is_null", address_of(&halide_error_buffer_argument_is_null)},
    {"halide_error_buffer_extents_negative", address_of(&halide_error_buffer_extents_negative)},
    {"halide_error_buffer_extents_too_large", address_of(&halide_error_buffer_extents_too_large)},
    {"halide_error_buffer_is_null", address_of(&halide_error_buffer_is_null)},
    {"halide_error_constraint_violated", address_of(&halide_error_constraint_violated)},
    {"halide_error_constraints_make_required_region_smaller",
     address_of(&halide_error_constraints_make_required_region_smaller)},
    {"halide_error_debug_to_file_failed", address_of(&halide_error_debug_to_file_failed)},
    {"halide_error_device_crop_failed", address_of(&halide_error_device_crop_failed)},
    {"halide_error_device_dirty_with_no_device_support",
     address_of(&halide_error_device_dirty_with_no_device_support)},
    {"halide_error_device_interface_no_device",
     address_of(&halide_error_device_interface_no_device)},
    {"halide_error_explicit_bounds_too_small", address_of(&halide_error_explicit_bounds_too_small)},
    {"halide_error_extern_stage_failed", address_of(&halide_error_extern_stage_failed)},
    {"halide_error_fold_factor_too_small", address_of(&halide_error_fold_factor_too_small)},
    {"halide_error_host_and_device_dirty", address_of(&halide_error_host_and_device_dirty)},
    {"halide_error_host_is_null", address_of(&halide_error_host_is_null)},
    {"halide_error_no_device_interface", address_of(&halide_error_no_device_interface)},
    {"halide_error_out_of_memory", address_of(&halide_error_out_of_memory)},
    {"halide_error_param_too_large_f64", address_of(&halide_error_param_too_large_f64)},
    {"halide_error_param_too_large_i64", address_of(&halide_error_param_too_large_i64)},
    {"halide_error_param_too_large_u64", address_of(&halide_error_param_too_large_u64)},
    {"halide_error_param_too_small_f64", address_of(&halide_error_param_too_small_f64)},
    {"halide_error_param_too_small_i64", address_of(&halide_error_param_too_small_i64)},
    {"halide_error_param_too_small_u64", address_of(&halide_error_param_too_small_u64)},
    {"halide_error_requirement_failed", address_of(&halide_error_requirement_failed)},
    {"halide_error_specialize_fail", address_of(&halide_error_specialize_fail)},
    {"halide_error_storage_bound_too_small", address_of(&halide_error_storage_bound_too_small)},
    {"halide_error_unaligned_host_ptr", address_of(&halide_error_unaligned_host_ptr)},
};
static_assert(sizeof kImportTable / sizeof kImportTable[0] == sb::kImportCount,
              "the worker provides every import of sandbox_protocol.h");

// ---- I/O ---------------------------------------------------------------------------------------

uint64_t now_ns() {
    timespec t{};
    clock_gettime(CLOCK_MONOTONIC, &t);
    return uint64_t(t.tv_sec) * 1000000000u + uint64_t(t.tv_nsec);
}

// The socket is non-blocking (work()): a worker waiting for its next task polls it this long
// before it sleeps, because in a blob of many SHAVE tasks the next one usually comes sooner
// than a sleeping process wakes up.
constexpr uint64_t kSpinBeforeSleepingNs = 100000;

// Reads exactly `bytes`; false at end of file or on an error.
bool read_exact(void *data, size_t bytes) {
    auto *p = static_cast<uint8_t *>(data);
    const uint64_t spin_end = now_ns() + kSpinBeforeSleepingNs;
    while (bytes > 0) {
        const ssize_t n = ::read(sb::kSocketFd, p, bytes);
        if (n < 0 && errno == EAGAIN) {
            pollfd socket{sb::kSocketFd, POLLIN, 0};
            if (now_ns() >= spin_end && ::poll(&socket, 1, -1) < 0 && errno != EINTR) return false;
            continue;
        }
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) return false;
        p += n;
        bytes -= size_t(n);
    }
    return true;
}

void write_exact(const void *data, size_t bytes) {
    const auto *p = static_cast<const uint8_t *>(data);
    while (bytes > 0) {
        const ssize_t n = ::write(sb::kSocketFd, p, bytes);
        if (n < 0 && errno == EAGAIN) {
            pollfd socket{sb::kSocketFd, POLLOUT, 0};
            ::poll(&socket, 1, -1);
            continue;
        }
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) _exit(0); // the simulator is gone
        p += n;
        bytes -= size_t(n);
    }
}

void reply(int32_t status, uint64_t kernel_ns, const char *message) {
    sb::Reply r;
    r.status = status;
    r.kernel_ns = kernel_ns;
    r.message_bytes = uint32_t(std::min(std::strlen(message), size_t(sb::kMaxMessageBytes)));
    write_exact(&r, sizeof r);
    write_exact(message, r.message_bytes);
}

[[noreturn]] void fail(const char *format, ...) {
    char message[sb::kMaxMessageBytes];
    va_list args;
    va_start(args, format);
    std::vsnprintf(message, sizeof message, format, args);
    va_end(args);
    reply(-1, 0, message);
    _exit(1);
}

// ---- Confinement -------------------------------------------------------------------------------

// Closes every descriptor from `first` up.
void close_descriptors_from(int first) {
    if (::close_range(unsigned(first), ~0u, 0) == 0) return;
    for (int fd = first, last = int(sysconf(_SC_OPEN_MAX)); fd < last; ++fd) ::close(fd);
}

// Maps a memory the simulator passed at `fd` and closes the descriptor.
uint8_t *map_descriptor(int fd, uint64_t bytes, int protection, int flags) {
    struct stat file {};
    if (fstat(fd, &file) != 0 || uint64_t(file.st_size) != bytes || bytes == 0)
        fail("the memory at descriptor %d is not the size announced", fd);
    void *mapped = mmap(nullptr, bytes, protection, flags, fd, 0);
    if (mapped == MAP_FAILED) fail("cannot map the memory at descriptor %d", fd);
    ::close(fd);
    return static_cast<uint8_t *>(mapped);
}

// The two filters, compiled by libseccomp into BPF once (in the zygote) and installed by each
// worker: the first allows what loading and running kernels needs, reading and writing the
// socket (the only descriptor left), memory management, the time and exiting; anything else
// kills the process. The second, once the kernels are loaded, kills it on making memory
// executable and on changing the filters.
constexpr size_t kMaxFilterInstructions = 512;
struct Filter {
    sock_filter code[kMaxFilterInstructions];
    unsigned short length = 0;
};
Filter g_allow_only_work, g_forbid_new_code;

bool compile(scmp_filter_ctx context, Filter &out) {
    // libseccomp 2.5 exports BPF only to a descriptor: an anonymous file, read back.
    const int fd = memfd_create("vpuc-seccomp-filter", MFD_CLOEXEC);
    bool ok = fd >= 0 && seccomp_export_bpf(context, fd) == 0;
    const off_t bytes = ok ? lseek(fd, 0, SEEK_END) : 0;
    ok = ok && bytes > 0 && bytes % off_t(sizeof(sock_filter)) == 0 &&
         size_t(bytes) <= sizeof out.code && pread(fd, out.code, size_t(bytes), 0) == bytes;
    out.length = static_cast<unsigned short>(size_t(bytes) / sizeof(sock_filter));
    if (fd >= 0) ::close(fd);
    seccomp_release(context);
    return ok;
}

// False when libseccomp cannot build them (the zygote then exits, and the simulator says so).
bool compile_filters() {
    scmp_filter_ctx work = seccomp_init(SCMP_ACT_KILL_PROCESS);
    if (!work) return false;
    const int allowed[] = {
        SCMP_SYS(read),
        SCMP_SYS(write),
        SCMP_SYS(poll),
        SCMP_SYS(mmap),
        SCMP_SYS(munmap),
        SCMP_SYS(mprotect),
        SCMP_SYS(mremap),
        SCMP_SYS(madvise),
        SCMP_SYS(brk),
        SCMP_SYS(exit),
        SCMP_SYS(exit_group),
        SCMP_SYS(rt_sigreturn),
        SCMP_SYS(clock_gettime),
        SCMP_SYS(gettimeofday),
        SCMP_SYS(futex),
        // Installing the second filter.
        SCMP_SYS(prctl),
        SCMP_SYS(seccomp),
    };
    bool ok = true;
    for (int call : allowed) ok = ok && seccomp_rule_add(work, SCMP_ACT_ALLOW, call, 0) == 0;
    if (!compile(work, g_allow_only_work) || !ok) return false;

    scmp_filter_ctx no_code = seccomp_init(SCMP_ACT_ALLOW);
    if (!no_code) return false;
    ok = seccomp_rule_add(no_code, SCMP_ACT_KILL_PROCESS, SCMP_SYS(mmap), 1,
                          SCMP_A2(SCMP_CMP_MASKED_EQ, PROT_EXEC, PROT_EXEC)) == 0 &&
         seccomp_rule_add(no_code, SCMP_ACT_KILL_PROCESS, SCMP_SYS(mprotect), 1,
                          SCMP_A2(SCMP_CMP_MASKED_EQ, PROT_EXEC, PROT_EXEC)) == 0 &&
         seccomp_rule_add(no_code, SCMP_ACT_KILL_PROCESS, SCMP_SYS(pkey_mprotect), 0) == 0 &&
         seccomp_rule_add(no_code, SCMP_ACT_KILL_PROCESS, SCMP_SYS(prctl), 0) == 0 &&
         seccomp_rule_add(no_code, SCMP_ACT_KILL_PROCESS, SCMP_SYS(seccomp), 0) == 0;
    return compile(no_code, g_forbid_new_code) && ok;
}

void install(Filter &filter) {
    sock_fprog program{filter.length, filter.code};
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 ||
        syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &program) != 0)
        fail("cannot install a seccomp filter");
}

// ---- Loading -------------------------------------------------------------------------------

using Entry = int (*)(void **);

uint8_t *g_memory = nullptr;
uint64_t g_memory_bytes = 0;
Entry *g_entries = nullptr;
uint32_t g_kernels = 0;

// The kernel images, read in order.
const uint8_t *g_images = nullptr;
uint64_t g_image_bytes = 0, g_image_read = 0;

void take(void *out, uint64_t bytes, uint32_t index) {
    if (bytes > g_image_bytes - g_image_read) fail("kernel %u: the image memory ends early", index);
    std::memcpy(out, g_images + g_image_read, bytes);
    g_image_read += bytes;
}

// Loads one kernel image (kernel_object.cpp laid it out and checked it; the checks here only
// keep a corrupted image from writing outside its memory).
Entry load_kernel(uint32_t index) {
    sb::ImageHeader h;
    take(&h, sizeof h, index);
    const uint64_t total = h.text_bytes + h.rodata_bytes + h.data_bytes;
    if (h.text_bytes == 0 || total > sb::kMaxImageBytes || total % sb::kPageBytes != 0 ||
        h.text_bytes % sb::kPageBytes != 0 || h.rodata_bytes % sb::kPageBytes != 0 ||
        h.entry >= h.text_bytes || h.relocations > sb::kMaxRelocations)
        fail("kernel %u: bad image header", index);
    void *mapped = mmap(nullptr, total, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (mapped == MAP_FAILED) fail("kernel %u: cannot map %" PRIu64 " bytes", index, total);
    auto *base = static_cast<uint8_t *>(mapped);
    take(base, total, index);
    for (uint32_t i = 0; i < h.relocations; ++i) {
        sb::Relocation r;
        take(&r, sizeof r, index);
        const uint64_t width = r.type == sb::kRelocAbs64 ? 8 : 4;
        uint64_t target = 0;
        if (r.symbol < sb::kImportCount)
            target = reinterpret_cast<uint64_t>(kImportTable[r.symbol].address);
        else if (r.symbol == sb::kInImage && r.target <= total)
            target = reinterpret_cast<uint64_t>(base) + r.target;
        else if (r.symbol == sb::kAbsolute)
            target = r.target;
        else
            fail("kernel %u: relocation %u has a bad symbol", index, i);
        if (r.at > total - width) fail("kernel %u: relocation %u outside the image", index, i);
        const uint64_t place = reinterpret_cast<uint64_t>(base) + r.at;
        const uint64_t value = target + uint64_t(r.addend);
        if (r.type == sb::kRelocAbs64) {
            std::memcpy(base + r.at, &value, 8);
        } else if (r.type == sb::kRelocPc32 || r.type == sb::kRelocPlt32) {
            const int64_t displacement = int64_t(value - place);
            if (displacement != int64_t(int32_t(displacement)))
                fail("kernel %u: relocation %u out of range", index, i);
            const int32_t narrow = int32_t(displacement);
            std::memcpy(base + r.at, &narrow, 4);
        } else {
            fail("kernel %u: relocation %u has type %u", index, i, r.type);
        }
    }
    if (mprotect(base, h.text_bytes, PROT_READ | PROT_EXEC) != 0 ||
        (h.rodata_bytes > 0 && mprotect(base + h.text_bytes, h.rodata_bytes, PROT_READ) != 0))
        fail("kernel %u: cannot protect its image", index);
    return reinterpret_cast<Entry>(base + h.entry);
}

// ---- Running -------------------------------------------------------------------------------

struct Buffer {
    halide_buffer_t buffer{};
    halide_dimension_t dims[sb::kMaxRank]{};
};

// A halide_buffer_t for a buffer argument, every byte it spans inside the shared memory.
bool describe(const sb::ArgDesc &arg, Buffer &out) {
    if (arg.dimensions == 0 || arg.dimensions > sb::kMaxRank || arg.type_bits == 0 ||
        arg.type_bits > 64 || arg.type_bits % 8 != 0)
        return false;
    const int64_t bytes = arg.type_bits / 8;
    int64_t lo = 0, hi = 0; // element offsets from the mins' element
    for (uint32_t d = 0; d < arg.dimensions; ++d) {
        const sb::Dim &dim = arg.dims[d];
        if (dim.extent <= 0) return false;
        const int64_t reach = int64_t(dim.extent - 1) * dim.stride;
        (reach < 0 ? lo : hi) += reach;
    }
    if (arg.offset > g_memory_bytes || int64_t(arg.offset) + lo * bytes < 0 ||
        uint64_t(int64_t(arg.offset) + (hi + 1) * bytes) > g_memory_bytes)
        return false;
    for (uint32_t d = 0; d < arg.dimensions; ++d)
        out.dims[d] = halide_dimension_t(arg.dims[d].min, arg.dims[d].extent, arg.dims[d].stride);
    out.buffer = halide_buffer_t{};
    out.buffer.host = g_memory + arg.offset;
    out.buffer.type = halide_type_t(halide_type_code_t(arg.type_code), uint8_t(arg.type_bits));
    out.buffer.dimensions = int32_t(arg.dimensions);
    out.buffer.dim = out.dims;
    return true;
}

// Runs one task: the output cut in `shaves` slices along its outermost dimension of extent
// above 1, one kernel call each (as the SHAVEs of a tile share a task). A kernel of several
// outputs has them cut alike (the verifier checks they cover one region).
void run_task() {
    sb::TaskHeader task;
    if (!read_exact(&task, sizeof task)) _exit(0);
    static sb::ArgDesc args[sb::kMaxArgs];
    static Buffer buffers[sb::kMaxArgs];
    static uint64_t scalars[sb::kMaxArgs];
    void *argv[sb::kMaxArgs];
    if (task.kernel >= g_kernels || task.args > sb::kMaxArgs) fail("bad task message");
    if (!read_exact(args, sizeof(sb::ArgDesc) * task.args)) _exit(0);
    static int outputs[sb::kMaxArgs];
    uint32_t output_count = 0;
    for (uint32_t i = 0; i < task.args; ++i) {
        const sb::ArgDesc &arg = args[i];
        switch (arg.kind) {
        case sb::ArgKind::InputBuffer:
        case sb::ArgKind::OutputBuffer:
            if (!describe(arg, buffers[i])) fail("argument %u: bad buffer", i);
            argv[i] = &buffers[i].buffer;
            if (arg.kind == sb::ArgKind::OutputBuffer) outputs[output_count++] = int(i);
            break;
        case sb::ArgKind::Int:
        case sb::ArgKind::Float32:
        case sb::ArgKind::Float16:
            // x86-64 is little-endian: a narrower parameter reads the low bytes.
            scalars[i] = arg.scalar;
            argv[i] = &scalars[i];
            break;
        default:
            fail("argument %u: bad kind", i);
        }
    }
    if (output_count == 0) fail("the task has no output buffer");

    const Buffer &first = buffers[outputs[0]];
    int split = 0; // the outermost dimension with extent > 1
    for (int d = first.buffer.dimensions - 1; d >= 0; --d)
        if (first.dims[d].extent > 1) {
            split = d;
            break;
        }
    static halide_dimension_t whole[sb::kMaxArgs];
    static uint8_t *base[sb::kMaxArgs];
    for (uint32_t o = 0; o < output_count; ++o) {
        Buffer &out = buffers[outputs[o]];
        if (out.buffer.dimensions != first.buffer.dimensions ||
            out.dims[split].extent != first.dims[split].extent)
            fail("argument %d: an output of another shape than the first", outputs[o]);
        whole[o] = out.dims[split];
        base[o] = out.buffer.host;
    }
    const int32_t extent = whole[0].extent;
    const int32_t parts =
        int32_t(std::min<uint32_t>(std::max<uint32_t>(task.shaves, 1), uint32_t(extent)));
    uint64_t spent = 0;
    for (int32_t p = 0; p < parts; ++p) {
        const int32_t begin = int32_t(int64_t(extent) * p / parts);
        const int32_t end = int32_t(int64_t(extent) * (p + 1) / parts);
        for (uint32_t o = 0; o < output_count; ++o) {
            Buffer &out = buffers[outputs[o]];
            out.dims[split].min = whole[o].min + begin;
            out.dims[split].extent = end - begin;
            // The host pointer addresses the slice's first element.
            out.buffer.host = base[o] + int64_t(begin) * whole[o].stride * out.buffer.type.bytes();
        }
        g_message[0] = '\0';
        const uint64_t start = now_ns();
        const int status = g_entries[task.kernel](argv);
        spent += now_ns() - start;
        if (status != 0) {
            reply(status, spent, g_message[0] ? g_message : "the kernel returned an error");
            return;
        }
    }
    reply(0, spent, "");
}

// A worker, in a child of the zygote whose descriptors are already set: 0 the socket, 1 and 2
// /dev/null, 3 the simulated memory, 4 the kernel images, nothing else.
[[noreturn]] void work() {
    if (fcntl(sb::kSocketFd, F_SETFL, O_NONBLOCK) != 0) _exit(1);
    sb::Hello hello;
    if (!read_exact(&hello, sizeof hello)) _exit(1);
    if (hello.magic != sb::kMagic || hello.version != sb::kVersion ||
        hello.kernels > sb::kMaxKernels)
        fail("bad start-up message");
    g_memory =
        map_descriptor(sb::kMemoryFd, hello.memory_bytes, PROT_READ | PROT_WRITE, MAP_SHARED);
    g_memory_bytes = hello.memory_bytes;
    g_images = map_descriptor(sb::kImagesFd, hello.image_bytes, PROT_READ, MAP_PRIVATE);
    g_image_bytes = hello.image_bytes;

    install(g_allow_only_work);
    static Entry entries[sb::kMaxKernels];
    g_entries = entries;
    g_kernels = hello.kernels;
    for (uint32_t k = 0; k < hello.kernels; ++k) entries[k] = load_kernel(k);
    munmap(const_cast<uint8_t *>(g_images), g_image_bytes);
    install(g_forbid_new_code);
    reply(0, 0, "");
    for (;;) run_task();
}

// ---- The zygote ------------------------------------------------------------------------------

void answer(const sb::ZygoteReply &r) {
    if (::send(sb::kSocketFd, &r, sizeof r, MSG_NOSIGNAL) != ssize_t(sizeof r)) _exit(0);
}

// Receives one message of exactly `bytes` on `socket`, with the three descriptors of a spawn
// request or none. Returns how many descriptors came (3 or 0, put in `fds`), or -1 for a
// message of another form (its descriptors closed). Ends the process when the sender is gone.
int receive(int socket, void *data, size_t bytes, int fds[3]) {
    iovec buffer{data, bytes};
    alignas(cmsghdr) char control[CMSG_SPACE(3 * sizeof(int))];
    msghdr message{};
    message.msg_iov = &buffer;
    message.msg_iovlen = 1;
    message.msg_control = control;
    message.msg_controllen = sizeof control;
    ssize_t n;
    while ((n = recvmsg(socket, &message, MSG_CMSG_CLOEXEC)) < 0 && errno == EINTR) {
    }
    if (n <= 0) _exit(0);
    const cmsghdr *rights = CMSG_FIRSTHDR(&message);
    int received = 0;
    if (rights && rights->cmsg_level == SOL_SOCKET && rights->cmsg_type == SCM_RIGHTS) {
        received = std::min(3, int((rights->cmsg_len - CMSG_LEN(0)) / sizeof(int)));
        std::memcpy(fds, CMSG_DATA(rights), sizeof(int) * size_t(received));
    }
    if (n == ssize_t(bytes) && (received == 0 || received == 3)) return received;
    for (int i = 0; i < received; ++i) ::close(fds[i]);
    return -1;
}

// A worker forked before the request it will serve, so that a spawn costs the simulator two
// messages rather than a fork. It waits on a socket of its own for the request's descriptors.
struct Standby {
    pid_t pid = -1;
    int socket = -1;
};

// In the standby child, once the descriptors came: the worker's first message is its pid,
// which the simulator needs to have it reaped. A standby that fails closes the worker's
// socket, which the simulator reads as a worker that did not start.
[[noreturn]] void become_worker(const int fds[3]) {
    const int32_t self = int32_t(getpid());
    if (::write(fds[0], &self, sizeof self) != ssize_t(sizeof self)) _exit(1);
    // Out of the way first: a received descriptor may be numbered 3 or 4.
    int high[3];
    for (int i = 0; i < 3; ++i) high[i] = fcntl(fds[i], F_DUPFD, 16);
    if (high[0] < 0 || high[1] < 0 || high[2] < 0 || dup2(high[0], sb::kSocketFd) < 0 ||
        dup2(high[1], sb::kMemoryFd) < 0 || dup2(high[2], sb::kImagesFd) < 0)
        _exit(1);
    close_descriptors_from(sb::kImagesFd + 1); // the standby's socket among them
    work();
}

Standby fork_standby() {
    int pair[2];
    if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, pair) != 0) return {};
    const pid_t zygote = getpid();
    const pid_t pid = fork();
    if (pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL); // the zygote's death ends its workers
        if (getppid() != zygote) _exit(0);
        ::close(pair[0]);
        ::close(sb::kSocketFd); // the zygote's control socket is not the worker's to hold
        char byte;
        int fds[3];
        if (receive(pair[1], &byte, 1, fds) != 3) _exit(1);
        become_worker(fds);
    }
    ::close(pair[1]);
    if (pid < 0) {
        ::close(pair[0]);
        return {};
    }
    return {pid, pair[0]};
}

// Hands a spawn request's descriptors to the standby worker and forks the next standby. A
// standby that died is replaced once.
void spawn(Standby &standby, const int fds[3]) {
    for (int attempt = 0; attempt < 2; ++attempt) {
        if (standby.pid < 0) standby = fork_standby();
        if (standby.pid < 0) break;
        const char byte = 0;
        const bool handed = sb::send_message(standby.socket, &byte, 1, fds);
        ::close(standby.socket);
        if (!handed) {
            kill(standby.pid, SIGKILL);
            waitpid(standby.pid, nullptr, 0);
        }
        standby = {};
        if (handed) break;
    }
    for (int i = 0; i < 3; ++i) ::close(fds[i]);
    standby = fork_standby();
}

// Serves the simulator's requests on its control socket until it closes.
[[noreturn]] void serve() {
    Standby standby = fork_standby();
    for (;;) {
        sb::ZygoteRequest request;
        int fds[3];
        const int received = receive(sb::kSocketFd, &request, sizeof request, fds);
        if (received == 3) {
            if (request.kind == sb::ZygoteRequest::Spawn)
                spawn(standby, fds);
            else
                for (int i = 0; i < 3; ++i) ::close(fds[i]);
            continue;
        }
        if (received < 0) continue;
        if (request.kind != sb::ZygoteRequest::Wait && request.kind != sb::ZygoteRequest::Kill &&
            request.kind != sb::ZygoteRequest::Discard)
            continue;
        // Only a worker: kill() and waitpid() take 0 and -1 for whole groups.
        const bool worker = request.pid > 0 && request.pid != standby.pid;
        if (worker && request.kind != sb::ZygoteRequest::Wait) kill(request.pid, SIGKILL);
        int status = 0;
        const bool reaped = worker && waitpid(request.pid, &status, 0) == request.pid;
        if (request.kind != sb::ZygoteRequest::Discard)
            answer({request.pid, status, reaped ? 0 : ECHILD});
    }
}

} // namespace

int main(int argc, char **argv) {
    // Nothing from the simulator is read before the descriptors are gone and limits are set.
    close_descriptors_from(3);
    const rlimit no_core{0, 0};
    setrlimit(RLIMIT_CORE, &no_core); // a crashing kernel leaves no core file behind
    if (argc != 2 || std::strcmp(argv[1], "--zygote") != 0) return 2;
    for (uint32_t i = 0; i < sb::kImportCount; ++i)
        if (std::strcmp(kImportTable[i].name, sb::kImports[i]) != 0) return 3;
    if (!compile_filters()) return 4;
    serve();
}
