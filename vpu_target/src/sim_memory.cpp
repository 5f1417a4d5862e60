#include "sim_memory.h"

#include <cstring>

namespace vpuc::sim {

using blob::MemSpace;

namespace {

constexpr uint64_t kPage = 4096;

uint64_t round_up(uint64_t bytes) {
    return (bytes + kPage - 1) / kPage * kPage;
}

} // namespace

Memory::Layout Memory::lay_out(const blob::Blob &blob, const target::Target &target) {
    Layout l;
    auto add = [&](uint64_t bytes) {
        Section s{l.total, bytes};
        l.total += round_up(bytes);
        return s;
    };
    const auto *header = blob.header();
    if (header->inputs())
        for (const auto *io : *header->inputs()) l.inputs.push_back(add(io->bytes()));
    if (header->outputs())
        for (const auto *io : *header->outputs()) l.outputs.push_back(add(io->bytes()));
    l.constants = add(blob.constants() ? blob.constants()->size() : 0);
    l.scratch = add(header->ddr_scratch_bytes());
    for (int t = 0; t < target.tiles; ++t) l.cmx.push_back(add(target.cmx_bytes_per_tile));
    return l;
}

Memory::Memory(const blob::Blob &blob, const target::Target &target)
    : layout_(lay_out(blob, target)), shared_(layout_.total) {}

void Memory::load(const blob::Blob &blob, const std::vector<std::vector<uint8_t>> &inputs) {
    const auto *header = blob.header();
    size_t input_count = header->inputs() ? header->inputs()->size() : 0;
    if (inputs.size() != input_count)
        throw blob::BlobError("the blob has " + std::to_string(input_count) + " inputs, " +
                              std::to_string(inputs.size()) + " were given");
    for (size_t i = 0; i < input_count; ++i) {
        const auto *io = header->inputs()->Get(uint32_t(i));
        if (inputs[i].size() != io->bytes())
            throw blob::BlobError("input '" + io->name()->str() + "': expected " +
                                  std::to_string(io->bytes()) + " bytes, got " +
                                  std::to_string(inputs[i].size()));
        std::memcpy(shared_.data() + layout_.inputs[i].start, inputs[i].data(), inputs[i].size());
    }
    if (blob.constants())
        std::memcpy(shared_.data() + layout_.constants.start, blob.constants()->data(),
                    blob.constants()->size());
    // CMX starts with a pattern that makes reads of never-written data stand out: 0xFFFF is a
    // NaN in fp16 (which spreads through any sum), 0xFF is -1 or 255 in int8. DDR starts as 0.
    for (const Section &cmx : layout_.cmx) std::memset(shared_.data() + cmx.start, 0xff, cmx.bytes);
}

const Memory::Section &Memory::section(MemSpace space, uint32_t index) const {
    switch (space) {
    case MemSpace::Input:
        return layout_.inputs.at(index);
    case MemSpace::Output:
        return layout_.outputs.at(index);
    case MemSpace::Constant:
        return layout_.constants;
    case MemSpace::Scratch:
        return layout_.scratch;
    case MemSpace::Cmx:
        return layout_.cmx.at(index);
    }
    throw blob::BlobError("unknown memory space");
}

uint64_t Memory::offset_of(const blob::Address &address) const {
    return section(address.space(), address.index()).start + address.offset();
}

bool Memory::contains(MemSpace space, uint32_t index, uint64_t offset, uint64_t bytes) const {
    const Section &s = section(space, index);
    return offset <= s.bytes && bytes <= s.bytes - offset;
}

std::vector<std::vector<uint8_t>> Memory::outputs() const {
    std::vector<std::vector<uint8_t>> out;
    for (const Section &s : layout_.outputs)
        out.emplace_back(shared_.data() + s.start, shared_.data() + s.start + s.bytes);
    return out;
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
