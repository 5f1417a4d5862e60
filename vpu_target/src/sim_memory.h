// The simulator's memories: DDR sections (inputs, outputs, constants, scratch) and the CMX
// of each tile. Addresses come from a verified blob; run-time pointers (weight tables) are
// checked with contains().
#pragma once

#include <cstdint>
#include <vector>

#include "vpu_target/blob.h"
#include "vpu_target/target.h"

namespace vpuc::sim {

class Memory {
  public:
    Memory(const blob::Blob &blob, const target::Target &target,
           const std::vector<std::vector<uint8_t>> &inputs);

    uint8_t *at(const blob::Address &address);
    bool contains(blob::MemSpace space, uint32_t index, uint64_t offset, uint64_t bytes) const;
    std::vector<std::vector<uint8_t>> take_outputs() { return std::move(outputs_); }

  private:
    std::vector<uint8_t> &section(blob::MemSpace space, uint32_t index);
    const std::vector<uint8_t> &section(blob::MemSpace space, uint32_t index) const;

    std::vector<std::vector<uint8_t>> inputs_;
    std::vector<std::vector<uint8_t>> outputs_;
    std::vector<uint8_t> constants_;
    std::vector<uint8_t> scratch_;
    std::vector<std::vector<uint8_t>> cmx_;
};

// Functional execution of one task; `task_name` goes into error messages.
void run_dma(const blob::DmaTask &dma, Memory &memory);
void run_dpu(const blob::DpuTask &dpu, Memory &memory, const std::string &task_name);

} // namespace vpuc::sim
