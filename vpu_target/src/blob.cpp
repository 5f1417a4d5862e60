#include "vpu_target/blob.h"

#include <fstream>
#include <iterator>

namespace vpuc::blob {

std::vector<uint8_t> read_file(const std::string &path) {
    std::ifstream in(path, std::ios::binary);
    if (!in) throw BlobError("cannot open blob file '" + path + "'");
    return std::vector<uint8_t>(std::istreambuf_iterator<char>(in),
                                std::istreambuf_iterator<char>());
}

void write_file(const std::string &path, const std::vector<uint8_t> &bytes) {
    std::ofstream out(path, std::ios::binary);
    out.write(reinterpret_cast<const char *>(bytes.data()), std::streamsize(bytes.size()));
    if (!out) throw BlobError("cannot write blob file '" + path + "'");
}

int dtype_bytes(DType dtype) {
    switch (dtype) {
    case DType::U8:
    case DType::I8:
        return 1;
    case DType::F16:
        return 2;
    case DType::F32:
    case DType::I32:
        return 4;
    }
    return 0;
}

const char *to_string(MemSpace space) {
    return EnumNameMemSpace(space);
}
const char *to_string(EngineKind engine) {
    switch (engine) {
    case EngineKind::Dma:
        return "DMA";
    case EngineKind::Dpu:
        return "DPU";
    case EngineKind::Shave:
        return "SHAVE";
    }
    return "?";
}
const char *to_string(DpuOp op) {
    return EnumNameDpuOp(op);
}
const char *to_string(DType dtype) {
    return EnumNameDType(dtype);
}

std::string describe_queue(const TaskQueue &queue) {
    switch (queue.engine()) {
    case EngineKind::Dma:
        return "DMA queue " + std::to_string(queue.index());
    case EngineKind::Dpu:
        return "DPU queue tile " + std::to_string(queue.tile()) + " dpu " +
               std::to_string(queue.index());
    case EngineKind::Shave:
        return "SHAVE queue tile " + std::to_string(queue.tile());
    }
    return "queue ?";
}

} // namespace vpuc::blob
