// The contract the verifier and the simulator are held to by the blob fuzzers, the mutation
// campaign's in-process twin (tests/blob_contract_test.cpp) and the regression inputs: a blob
// is rejected with a clean blob::BlobError, or the verifier accepts it and it runs, timing
// only and functionally, without throwing, but for one thing: a SHAVE kernel's native code,
// which no verifier can check, may fail in its sandbox (sim::KernelFault, naming the task, the
// kernel and the signal). That happens only to a kernel whose code or contract was changed
// and its digest forged to match (blob_mutator.h recomputes digests to reach the sandbox).
#pragma once

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <optional>
#include <string>
#include <vector>

#include "vpu_target/simulator.h"
#include "vpu_target/verifier.h"

namespace vpuc::fuzz {

// The target the blob carries, when the verifier accepts the blob against it; nullopt when the
// blob is rejected. Any exception but BlobError escapes: a finding.
inline std::optional<target::Target> accepted_target(const std::vector<uint8_t> &bytes) {
    try {
        target::Target target = blob::embedded_target(blob::verify_structure(bytes));
        blob::verify(bytes, target);
        return target;
    } catch (const blob::BlobError &) {
        return std::nullopt;
    }
}

// Runs an accepted blob in `mode` (functional runs on inputs of 0x5A bytes). Returns how the
// run broke the contract, or an empty string; a kernel fault the sandbox contained goes to
// `kernel_fault`.
inline std::string run_violation(const target::Target &target, const std::vector<uint8_t> &bytes,
                                 sim::Mode mode, std::string &kernel_fault) {
    const std::string what = mode == sim::Mode::TimingOnly ? "the timing-only run threw: "
                                                           : "the functional run threw: ";
    try {
        sim::Simulator simulator(target, bytes);
        std::vector<std::vector<uint8_t>> inputs;
        if (mode == sim::Mode::Functional)
            if (const auto *ios = simulator.blob().header()->inputs())
                for (const auto *io : *ios) inputs.emplace_back(io->bytes(), uint8_t(0x5A));
        simulator.run(inputs, mode);
        return "";
    } catch (const sim::KernelFault &e) {
        kernel_fault = e.what();
        return "";
    } catch (const std::exception &e) {
        return what + e.what();
    } catch (...) {
        return what + "an exception of unknown type";
    }
}

struct BlobVerdict {
    bool accepted = false;
    std::string violation;    // how an accepted blob failed to run; empty when it ran
    std::string kernel_fault; // a kernel's failure, contained by the sandbox
};

// Verifies the blob and, when the verifier accepts it, runs it in each of `modes`.
inline BlobVerdict check_blob(const std::vector<uint8_t> &bytes,
                              const std::vector<sim::Mode> &modes) {
    BlobVerdict verdict;
    std::optional<target::Target> target = accepted_target(bytes);
    verdict.accepted = target.has_value();
    for (size_t i = 0; target && i < modes.size() && verdict.violation.empty(); ++i)
        verdict.violation = run_violation(*target, bytes, modes[i], verdict.kernel_fault);
    return verdict;
}

// A libFuzzer input held to the contract in `mode`; a violation aborts, so that libFuzzer
// keeps the blob.
inline int fuzz_blob(const uint8_t *data, size_t size, sim::Mode mode) {
    const BlobVerdict verdict = check_blob(std::vector<uint8_t>(data, data + size), {mode});
    if (!verdict.violation.empty()) {
        std::fprintf(stderr, "CONTRACT VIOLATION: the verifier accepted the blob, but %s\n",
                     verdict.violation.c_str());
        std::abort();
    }
    return 0;
}

} // namespace vpuc::fuzz
