#include "sim_memory.h"

#include <cstring>

namespace vpuc::sim {

using blob::MemSpace;

Memory::Memory(const blob::Blob &blob, const target::Target &target,
               const std::vector<std::vector<uint8_t>> &inputs)
    : inputs_(inputs) {
    const auto *header = blob.header();
    size_t input_count = header->inputs() ? header->inputs()->size() : 0;
    if (inputs_.size() != input_count)
        throw blob::BlobError("the blob has " + std::to_string(input_count) + " inputs, " +
                              std::to_string(inputs_.size()) + " were given");
    for (size_t i = 0; i < input_count; ++i) {
        const auto *io = header->inputs()->Get(uint32_t(i));
        if (inputs_[i].size() != io->bytes())
            throw blob::BlobError("input '" + io->name()->str() + "': expected " +
                                  std::to_string(io->bytes()) + " bytes, got " +
                                  std::to_string(inputs_[i].size()));
    }
    if (header->outputs())
        for (const auto *io : *header->outputs()) outputs_.emplace_back(io->bytes(), 0);
    if (blob.constants()) constants_.assign(blob.constants()->begin(), blob.constants()->end());
    scratch_.assign(header->ddr_scratch_bytes(), 0);
    // CMX starts with a pattern that makes reads of never-written data stand out: 0xFFFF is a
    // NaN in fp16 (which spreads through any sum), 0xFF is -1 or 255 in int8.
    cmx_.assign(size_t(target.tiles), std::vector<uint8_t>(target.cmx_bytes_per_tile, 0xff));
}

std::vector<uint8_t> &Memory::section(MemSpace space, uint32_t index) {
    return const_cast<std::vector<uint8_t> &>(std::as_const(*this).section(space, index));
}

const std::vector<uint8_t> &Memory::section(MemSpace space, uint32_t index) const {
    switch (space) {
    case MemSpace::Input:
        return inputs_.at(index);
    case MemSpace::Output:
        return outputs_.at(index);
    case MemSpace::Constant:
        return constants_;
    case MemSpace::Scratch:
        return scratch_;
    case MemSpace::Cmx:
        return cmx_.at(index);
    }
    throw blob::BlobError("unknown memory space");
}

uint8_t *Memory::at(const blob::Address &address) {
    return section(address.space(), address.index()).data() + address.offset();
}

bool Memory::contains(MemSpace space, uint32_t index, uint64_t offset, uint64_t bytes) const {
    const auto &s = section(space, index);
    return offset <= s.size() && bytes <= s.size() - offset;
}

void run_dma(const blob::DmaTask &dma, Memory &memory) {
    const uint8_t *src = memory.at(*dma.src());
    // Odometer over the outer dims (outermost first); one line per step.
    std::vector<const blob::DmaDim *> dims;
    if (dma.dims())
        for (const auto *d : *dma.dims()) dims.push_back(d);
    for (const auto *dst_address : *dma.dst()) {
        uint8_t *dst = memory.at(*dst_address);
        std::vector<uint32_t> counter(dims.size(), 0);
        while (true) {
            int64_t src_offset = 0, dst_offset = 0;
            for (size_t i = 0; i < dims.size(); ++i) {
                src_offset += int64_t(counter[i]) * dims[i]->src_stride();
                dst_offset += int64_t(counter[i]) * dims[i]->dst_stride();
            }
            std::memmove(dst + dst_offset, src + src_offset, dma.line_bytes());
            size_t i = dims.size();
            while (i > 0 && ++counter[i - 1] == dims[i - 1]->count()) counter[--i] = 0;
            if (i == 0) break;
        }
    }
}

} // namespace vpuc::sim
