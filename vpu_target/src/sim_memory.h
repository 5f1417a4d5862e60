// The simulator's memories: DDR sections (inputs, outputs, constants, scratch) and the CMX
// of each tile, laid out in one shared mapping, which the sandboxed SHAVE worker maps too.
// Addresses come from a verified blob; run-time pointers (weight tables) are checked with
// contains().
#pragma once

#include <cstdint>
#include <vector>

#include "vpu_target/blob.h"
#include "vpu_target/shave_sandbox.h"
#include "vpu_target/target.h"

namespace vpuc::sim {

class Memory {
  public:
    // Lays the memories out in a new mapping, all zero; load() gives them their start state.
    Memory(const blob::Blob &blob, const target::Target &target);
    // Checks the inputs' sizes, then writes the inputs and constants, and fills CMX.
    void load(const blob::Blob &blob, const std::vector<std::vector<uint8_t>> &inputs);

    uint8_t *at(const blob::Address &address) { return shared_.data() + offset_of(address); }
    // Where an address lies in the shared mapping.
    uint64_t offset_of(const blob::Address &address) const;
    bool contains(blob::MemSpace space, uint32_t index, uint64_t offset, uint64_t bytes) const;
    const SharedMemory &shared() const { return shared_; }
    std::vector<std::vector<uint8_t>> outputs() const;

  private:
    struct Section {
        uint64_t start = 0; // in the mapping, page-aligned
        uint64_t bytes = 0;
    };
    // Sections in mapping order: inputs, outputs, constants, scratch, then CMX per tile.
    struct Layout {
        std::vector<Section> inputs, outputs, cmx;
        Section constants, scratch;
        uint64_t total = 0;
    };
    static Layout lay_out(const blob::Blob &blob, const target::Target &target);
    const Section &section(blob::MemSpace space, uint32_t index) const;

    Layout layout_;
    SharedMemory shared_;
};

// Functional execution of one task; `task_name` goes into error messages.
void run_dma(const blob::DmaTask &dma, Memory &memory);
void run_dpu(const blob::DpuTask &dpu, Memory &memory, const std::string &task_name);

} // namespace vpuc::sim
