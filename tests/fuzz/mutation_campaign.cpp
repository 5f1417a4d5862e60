// The mutation campaign: mutated blobs through the real `vpuc` command, each in a child process
// with a timeout, so that a crash or a hang is counted instead of ending the campaign.
//
// Seeds are the networks of seed_blobs.h compiled for vpu27 and vpu20. Blob k is a mutation of
// seed k/2 (cycling): even k byte-level, odd k field-level through the JSON form
// (blob_mutator.h), all drawn from --seed, so a campaign is reproducible. Each blob goes
// through `vpuc verify`; one it accepts then through `vpuc run` (functional) and
// `vpuc run --timing-only`. Counted: clean rejections, accepted blobs, crashes (a signal, or
// an exit status other than 0, 1 and 3), hangs (the timeout), and blobs the verifier accepted
// but a run rejected. The exit status is 1 when any of the last three is not zero.
//
// Digests stale after a mutation are kept, as an accident leaves them; with --forge-digests
// they are recomputed, as an attacker would, so that changed kernel code and contracts get
// past the verifier to the sandbox. A kernel failing in its sandbox (`vpuc run` exit status
// 3) is then counted apart, as a fault contained; with kept digests it is a failure.
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <map>
#include <random>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "blob_mutator.h"
#include "seed_blobs.h"
#include "vpu_target/blob.h"

extern char **environ;

namespace fs = std::filesystem;
using namespace vpuc;

namespace {

constexpr const char *kUsage =
    "usage: vpuc_mutation_campaign --vpuc PATH [--blobs N] [--seed S] [--timeout SECONDS]\n"
    "                              [--save-failures DIR] [--forge-digests]\n\n"
    "Runs N mutated blobs (default 6000: half byte-level, half field-level) through\n"
    "`vpuc verify`, then those it accepts through `vpuc run` and `vpuc run --timing-only`,\n"
    "each in a child process killed after SECONDS (default 10). Prints the counts; exits\n"
    "with 1 when a blob crashed, hung, or was accepted by the verifier and rejected by a run.\n"
    "--save-failures DIR keeps those blobs and their output in DIR.\n"
    "--forge-digests recomputes the kernel and target digests after each mutation, as an\n"
    "attacker would: kernels failing in their sandbox are then counted apart, as contained.\n";

// Output kept per child: enough for the message and the top of a stack.
constexpr size_t kKeptOutputBytes = 16384;

struct Options {
    std::string vpuc;
    long blobs = 6000;
    uint64_t seed = 1;
    int timeout_seconds = 10;
    std::string save_failures;
    bool forge_digests = false;
};

long number_option(const std::string &name, const char *text, long low, long high) {
    char *end = nullptr;
    errno = 0;
    long value = std::strtol(text, &end, 10);
    if (*text == '\0' || *end != '\0' || errno != 0 || value < low || value > high)
        throw std::runtime_error(name + " needs an integer in " + std::to_string(low) + ".." +
                                 std::to_string(high) + ", got '" + text + "'");
    return value;
}

Options parse_options(int argc, char **argv) {
    Options o;
    for (int i = 1; i < argc; ++i) {
        const std::string arg = argv[i];
        if (arg == "--help" || arg == "-h") {
            std::fputs(kUsage, stdout);
            std::exit(0);
        }
        if (arg == "--forge-digests") {
            o.forge_digests = true;
            continue;
        }
        if (i + 1 >= argc) throw std::runtime_error("unknown option or missing value: " + arg);
        const char *value = argv[++i];
        if (arg == "--vpuc")
            o.vpuc = value;
        else if (arg == "--blobs")
            o.blobs = number_option(arg, value, 1, 100000000);
        else if (arg == "--seed")
            o.seed = uint64_t(number_option(arg, value, 0, 0x7FFFFFFF));
        else if (arg == "--timeout")
            o.timeout_seconds = int(number_option(arg, value, 1, 3600));
        else if (arg == "--save-failures")
            o.save_failures = value;
        else
            throw std::runtime_error("unknown option " + arg);
    }
    if (o.vpuc.empty()) throw std::runtime_error("--vpuc PATH is required");
    return o;
}

// ---- Children ----------------------------------------------------------------------------

struct Outcome {
    enum class Kind { Exited, Signaled, TimedOut };
    Kind kind = Kind::Exited;
    int code = 0; // exit status or signal
    std::string output;

    bool exited_with(int status) const { return kind == Kind::Exited && code == status; }
    std::string describe() const {
        switch (kind) {
        case Kind::Exited:
            return "exit status " + std::to_string(code);
        case Kind::Signaled:
            return std::string("signal ") + strsignal(code);
        case Kind::TimedOut:
            return "timed out";
        }
        return "";
    }
};

// The environment of the children: under a sanitizer build, a report aborts, so that it
// shows as a crash rather than as an exit status.
std::vector<std::string> child_environment() {
    std::vector<std::string> env;
    std::string asan = "ASAN_OPTIONS=abort_on_error=1",
                ubsan = "UBSAN_OPTIONS=halt_on_error=1:abort_on_error=1";
    for (char **e = environ; *e; ++e) {
        const std::string entry = *e;
        if (entry.rfind("ASAN_OPTIONS=", 0) == 0)
            asan += ":" + entry.substr(13);
        else if (entry.rfind("UBSAN_OPTIONS=", 0) == 0)
            ubsan += ":" + entry.substr(14);
        else
            env.push_back(entry);
    }
    env.push_back(asan);
    env.push_back(ubsan);
    return env;
}

// Runs `args` with stdout and stderr into a pipe, in a process group of its own; after
// `timeout_seconds` the whole group is killed.
Outcome run_child(const std::vector<std::string> &args, int timeout_seconds) {
    static const std::vector<std::string> env_strings = child_environment();
    std::vector<char *> env;
    for (const auto &e : env_strings) env.push_back(const_cast<char *>(e.c_str()));
    env.push_back(nullptr);
    std::vector<char *> argv;
    for (const auto &a : args) argv.push_back(const_cast<char *>(a.c_str()));
    argv.push_back(nullptr);

    int pipe_fds[2];
    if (pipe2(pipe_fds, O_CLOEXEC) != 0)
        throw std::runtime_error("pipe: " + std::string(strerror(errno)));
    posix_spawn_file_actions_t files;
    posix_spawn_file_actions_init(&files);
    posix_spawn_file_actions_adddup2(&files, pipe_fds[1], 1);
    posix_spawn_file_actions_adddup2(&files, pipe_fds[1], 2);
    posix_spawnattr_t attributes;
    posix_spawnattr_init(&attributes);
    posix_spawnattr_setflags(&attributes, POSIX_SPAWN_SETPGROUP);
    posix_spawnattr_setpgroup(&attributes, 0);
    pid_t pid = 0;
    const int spawned = posix_spawn(&pid, argv[0], &files, &attributes, argv.data(), env.data());
    posix_spawn_file_actions_destroy(&files);
    posix_spawnattr_destroy(&attributes);
    close(pipe_fds[1]);
    if (spawned != 0) {
        close(pipe_fds[0]);
        throw std::runtime_error("cannot run " + args[0] + ": " + strerror(spawned));
    }

    Outcome outcome;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(timeout_seconds);
    auto remaining_ms = [&] {
        auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
            deadline - std::chrono::steady_clock::now());
        return std::max<long>(0, long(left.count()));
    };
    bool open = true, timed_out = false;
    while (open) {
        pollfd p{pipe_fds[0], POLLIN, 0};
        const int ready = poll(&p, 1, int(remaining_ms()));
        if (ready == 0) {
            timed_out = true;
            break;
        }
        if (ready < 0) {
            if (errno == EINTR) continue;
            break;
        }
        char buffer[4096];
        const ssize_t got = read(pipe_fds[0], buffer, sizeof buffer);
        if (got <= 0) {
            open = got < 0 && errno == EINTR;
            continue;
        }
        if (outcome.output.size() < kKeptOutputBytes) outcome.output.append(buffer, size_t(got));
    }
    close(pipe_fds[0]);
    int status = 0;
    while (!timed_out) { // the output is closed; the child may still be running
        const pid_t done = waitpid(pid, &status, WNOHANG);
        if (done == pid) break;
        if (remaining_ms() == 0)
            timed_out = true;
        else
            std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    if (timed_out) {
        kill(-pid, SIGKILL);
        waitpid(pid, &status, 0);
        outcome.kind = Outcome::Kind::TimedOut;
    } else if (WIFSIGNALED(status)) {
        outcome.kind = Outcome::Kind::Signaled;
        outcome.code = WTERMSIG(status);
    } else {
        outcome.code = WEXITSTATUS(status);
    }
    return outcome;
}

// ---- The campaign ------------------------------------------------------------------------

struct Tally {
    long rejected = 0, accepted = 0, crashes = 0, hangs = 0, run_rejected = 0, kernel_faults = 0;
    long byte_level = 0, field_level = 0;
    long failures() const { return crashes + hangs + run_rejected; }
};

class Campaign {
  public:
    explicit Campaign(Options options) : o_(std::move(options)) {
        work_dir_ =
            fs::temp_directory_path() / ("vpuc-mutation-campaign-" + std::to_string(getpid()));
        fs::create_directories(work_dir_);
        if (!o_.save_failures.empty()) fs::create_directories(o_.save_failures);
    }
    ~Campaign() {
        std::error_code ignored;
        fs::remove_all(work_dir_, ignored);
    }

    int run() {
        std::fprintf(stderr, "compiling the seed blobs...\n");
        const std::vector<fuzz::SeedBlob> seeds =
            fuzz::compile_seed_blobs(fuzz::seed_network_names(), {"vpu27", "vpu20"});
        for (long k = 0; k < o_.blobs; ++k) {
            const fuzz::SeedBlob &seed = seeds[size_t(k / 2) % seeds.size()];
            std::seed_seq sequence{uint32_t(o_.seed), uint32_t(k), uint32_t(k >> 32)};
            std::mt19937_64 rng(sequence);
            std::optional<std::vector<uint8_t>> mutated;
            using Digests = fuzz::BlobMutator::Digests;
            if (k % 2)
                mutated = mutator_.mutate_fields(
                    seed.bytes, rng, o_.forge_digests ? Digests::Forged : Digests::Kept);
            if (mutated) {
                ++tally_.field_level;
            } else {
                mutated = fuzz::mutate_bytes(seed.bytes, rng);
                if (o_.forge_digests) mutated = fuzz::with_digests_recomputed(*mutated);
                ++tally_.byte_level;
            }
            check(k, seed.name, *mutated);
            if ((k + 1) % 500 == 0) std::fprintf(stderr, "%ld blobs...\n", k + 1);
        }
        std::printf("mutation campaign: %ld blobs from %zu seeds (%ld byte-level, %ld "
                    "field-level), seed %llu, digests %s\n",
                    o_.blobs, seeds.size(), tally_.byte_level, tally_.field_level,
                    static_cast<unsigned long long>(o_.seed), o_.forge_digests ? "forged" : "kept");
        std::printf("  rejected cleanly by the verifier    %ld\n", tally_.rejected);
        std::printf("  accepted by the verifier            %ld\n", tally_.accepted);
        std::printf("  crashes (signal or odd exit status) %ld\n", tally_.crashes);
        std::printf("  hangs (over %d s)                   %ld\n", o_.timeout_seconds,
                    tally_.hangs);
        std::printf("  accepted, then rejected by a run    %ld\n", tally_.run_rejected);
        if (o_.forge_digests)
            std::printf("  kernel faults the sandbox contained %ld\n", tally_.kernel_faults);
        for (const auto &[what, count] : symptoms_)
            std::printf("    %ld x %s\n", count, what.c_str());
        return tally_.failures() ? 1 : 0;
    }

  private:
    void check(long k, const std::string &seed_name, const std::vector<uint8_t> &bytes) {
        const std::string path = (work_dir_ / "blob.vpub").string();
        blob::write_file(path, bytes);
        const Outcome verify = run_child({o_.vpuc, "verify", path}, o_.timeout_seconds);
        if (verify.exited_with(1)) {
            ++tally_.rejected;
            return;
        }
        if (!verify.exited_with(0)) {
            failure(k, seed_name, bytes, "verify", verify);
            return;
        }
        ++tally_.accepted;
        for (const char *mode : {"--timing-only", ""}) {
            // A kernel looping forever is stopped by the sandbox well before the child's
            // timeout, which is for hangs of vpuc itself.
            const std::string limit = std::to_string(std::max(1, o_.timeout_seconds / 4));
            std::vector<std::string> args = {o_.vpuc, "run", path, "--kernel-time-limit", limit};
            if (*mode) args.push_back(mode);
            const Outcome run = run_child(args, o_.timeout_seconds);
            if (!run.exited_with(0)) {
                failure(k, seed_name, bytes, *mode ? "run --timing-only" : "run", run);
                return;
            }
        }
    }

    void failure(long k, const std::string &seed_name, const std::vector<uint8_t> &bytes,
                 const std::string &command, const Outcome &outcome) {
        std::string kind;
        if (outcome.kind == Outcome::Kind::TimedOut) {
            kind = "hang";
            ++tally_.hangs;
        } else if (outcome.exited_with(3) && o_.forge_digests) {
            kind = "kernel-fault";
            ++tally_.kernel_faults;
        } else if (outcome.exited_with(1) || outcome.exited_with(3)) {
            kind = "run-rejected";
            ++tally_.run_rejected;
        } else {
            kind = "crash";
            ++tally_.crashes;
        }
        ++symptoms_["vpuc " + command + ": " + outcome.describe()];
        if (o_.save_failures.empty()) return;
        const std::string base =
            o_.save_failures + "/" + kind + "-" + std::to_string(k) + "-" + seed_name;
        blob::write_file(base + ".vpub", bytes);
        const std::string log =
            "vpuc " + command + ": " + outcome.describe() + "\n" + outcome.output;
        blob::write_file(base + ".log", std::vector<uint8_t>(log.begin(), log.end()));
    }

    Options o_;
    fs::path work_dir_;
    fuzz::BlobMutator mutator_;
    Tally tally_;
    std::map<std::string, long> symptoms_; // "vpuc run: signal Segmentation fault" -> count
};

} // namespace

int main(int argc, char **argv) {
    Options options;
    try {
        options = parse_options(argc, argv);
    } catch (const std::exception &e) {
        std::fprintf(stderr, "vpuc_mutation_campaign: %s\n%s", e.what(), kUsage);
        return 2;
    }
    try {
        return Campaign(options).run();
    } catch (const std::exception &e) {
        std::fprintf(stderr, "vpuc_mutation_campaign: %s\n", e.what());
        return 2;
    }
}
