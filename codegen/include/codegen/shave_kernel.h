// SHAVE kernel generation: a Halide pipeline becomes a relocatable object for the simulator's
// host, vectorized for the SHAVE's vector width, with its argument contract and op counts.
#pragma once

#include <Halide.h>

#include <cstdint>
#include <string>
#include <vector>

#include "vpu_target/target.h"

namespace vpuc::codegen {

enum class KernelArgKind { InputBuffer, OutputBuffer, ScalarInt, ScalarFloat };

struct KernelArgDesc {
    std::string name;
    KernelArgKind kind = KernelArgKind::InputBuffer;
    target::DType dtype = target::DType::I8;
    int rank = 0;
};

struct ShaveKernelBinary {
    std::string name;
    std::string entry;  // Halide's argv-style entry point
    std::vector<uint8_t> object;
    std::vector<KernelArgDesc> args;
    uint32_t vector_lanes = 0;
    float ops_per_vector = 0;
};

}  // namespace vpuc::codegen
