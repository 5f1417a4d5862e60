// What the schedule property tests share (schedule_property_test, layer_matrix_test): the
// bundled targets loaded once, compiling and running a graph with the schedules its layers
// carry, comparing bytes, and seeds that depend only on a case's name (a buffer's bytes:
// lowering_fixtures.h).
#pragma once

#include <Halide.h>

#include <algorithm>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "codegen/lower.h"
#include "lowering_fixtures.h"
#include "vpu_target/simulator.h"
#include "vpu_target/target.h"

namespace vpuc::test {

inline const target::Target &target_named(const std::string &name) {
    static std::map<std::string, target::Target> loaded;
    auto it = loaded.find(name);
    if (it == loaded.end()) it = loaded.emplace(name, target::load_target(name)).first;
    return it->second;
}

// Compiles `graph` with the schedules its layers carry and runs it: "" and every output's
// bytes, one after the other, in `output`; or the error.
inline std::string compile_and_run(const dsl::Graph &graph, const target::Target &target,
                                   const std::vector<std::vector<uint8_t>> &inputs,
                                   std::vector<uint8_t> &output) {
    try {
        std::vector<uint8_t> blob = codegen::lower(graph, target);
        sim::Simulator simulator(target, blob);
        sim::RunResult result = simulator.run(inputs);
        output.clear();
        for (const auto &o : result.outputs) output.insert(output.end(), o.begin(), o.end());
        return "";
    } catch (const std::exception &e) {
        return std::string("exception: ") + e.what();
    }
}

// "" when equal, else how they differ.
inline std::string difference(const std::vector<uint8_t> &got, const std::vector<uint8_t> &want) {
    if (got.size() != want.size())
        return std::to_string(got.size()) + " bytes instead of " + std::to_string(want.size());
    size_t count = 0, first = got.size();
    for (size_t i = 0; i < got.size(); ++i)
        if (got[i] != want[i]) {
            ++count;
            first = std::min(first, i);
        }
    if (count == 0) return "";
    return std::to_string(count) + " of " + std::to_string(got.size()) +
           " bytes differ, the first at byte " + std::to_string(first) + " (" +
           std::to_string(got[first]) + " instead of " + std::to_string(want[first]) + ")";
}

// Seeds from the case's name (FNV-1a), so adding a case leaves the others' unchanged.
inline uint32_t seed_of(const std::string &kind, const std::string &what, int index) {
    uint32_t h = 2166136261u;
    for (char ch : kind + "/" + what + "/" + std::to_string(index))
        h = (h ^ uint8_t(ch)) * 16777619u;
    return h;
}

} // namespace vpuc::test
