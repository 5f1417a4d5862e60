/* Kernels a hostile or broken blob could carry, for tests/sandbox_test.cpp: each is an entry
 * point with Halide's argv calling convention (int entry(void **args)) that does one thing the
 * SHAVE sandbox must contain. They use system calls directly, as crafted machine code would,
 * so the object references nothing outside the SHAVE allow-list and passes the verifier. */
#include <stddef.h>
#include <stdint.h>

/* The allow-listed heap function, as Halide's kernels call it. */
void *halide_malloc(void *user_context, size_t bytes);

static long raw_syscall3(long number, long a, long b, long c) {
    long result;
    __asm__ volatile("syscall"
                     : "=a"(result)
                     : "a"(number), "D"(a), "S"(b), "d"(c)
                     : "rcx", "r11", "memory");
    return result;
}

enum { kRead = 0, kOpen = 2, kMmap = 9, kMprotect = 10, kGetppid = 110 };
enum { kProtReadWriteExec = 7, kBadDescriptor = -9 };

/* Returns 0: the kernel that does nothing wrong. */
int benign_argv(void **args) {
    (void)args;
    return 0;
}

int null_write_argv(void **args) {
    (void)args;
    *(volatile int *)(uintptr_t)16 = 1;
    return 0;
}

int endless_argv(void **args) {
    (void)args;
    for (volatile int spin = 0;; spin = spin + 1) {
    }
    return 0;
}

int open_file_argv(void **args) {
    (void)args;
    static const char path[] = "/etc/passwd";
    return (int)raw_syscall3(kOpen, (long)path, 0, 0);
}

int parent_pid_argv(void **args) {
    (void)args;
    return (int)raw_syscall3(kGetppid, 0, 0, 0);
}

/* Makes its own stack executable, to run code written into it. */
int make_executable_argv(void **args) {
    (void)args;
    static char page[8192] __attribute__((aligned(4096)));
    return (int)raw_syscall3(kMprotect, (long)page, 4096, kProtReadWriteExec);
}

/* Writes `ret` into writable memory and calls it. */
int run_written_code_argv(void **args) {
    (void)args;
    static unsigned char code[16] = {0xc3};
    void (*function)(void) = (void (*)(void))(void *)code;
    function();
    return 0;
}

static int recurse(volatile char *previous) {
    volatile char frame[1024];
    frame[0] = previous ? previous[0] + 1 : 0;
    return recurse(frame) + frame[1];
}

int stack_overflow_argv(void **args) {
    (void)args;
    return recurse(0);
}

int heap_overflow_argv(void **args) {
    (void)args;
    volatile char *block = halide_malloc(0, 16);
    for (size_t i = 0; i < ((size_t)1 << 34); i += 4096) block[i] = 1;
    return 0;
}

/* Counts the descriptors other than its socket (0) it can read from: a read of 0 bytes fails
 * with EBADF on a closed descriptor, and on one open only for writing. */
int open_descriptors_argv(void **args) {
    (void)args;
    int readable = 0;
    for (long fd = 1; fd < 1024; ++fd)
        if (raw_syscall3(kRead, fd, 0, 0) != kBadDescriptor) ++readable;
    return readable;
}
