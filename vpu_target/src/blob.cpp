#include "vpu_target/blob.h"

#include <llvm/ADT/ArrayRef.h>
#include <llvm/Support/SHA256.h>

#include <cstdlib>
#include <fstream>

#include "vpu_target/input_file.h"

namespace vpuc::blob {

std::vector<uint8_t> read_file(const std::string &path) {
    try {
        return files::read_input_file(path, files::FileKind::Blob);
    } catch (const files::InputFileError &e) {
        throw BlobError(e.what());
    }
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

uint64_t channel_weight_span(const TensorRef &weights) {
    uint64_t span = 1;
    for (uint32_t i = 0; i < 3 && i < weights.dims()->size(); ++i) {
        const Dim &d = *weights.dims()->Get(i);
        span += uint64_t(d.extent() - 1) * uint64_t(std::abs(d.stride()));
    }
    return span * uint64_t(dtype_bytes(weights.dtype()));
}

Sha256 sha256(const void *data, size_t bytes) {
    return llvm::SHA256::hash(llvm::ArrayRef<uint8_t>(static_cast<const uint8_t *>(data), bytes));
}

std::string hex(const Sha256 &digest) {
    static const char digits[] = "0123456789abcdef";
    std::string text;
    for (uint8_t byte : digest) {
        text += digits[byte >> 4];
        text += digits[byte & 15];
    }
    return text;
}

namespace {

// Little-endian fields with their lengths, so that no two contracts serialize alike.
class DigestInput {
  public:
    void integer(int64_t value, int bytes) {
        for (int i = 0; i < bytes; ++i) data_.push_back(uint8_t(uint64_t(value) >> (8 * i)));
    }
    void text(const std::string &value) {
        integer(int64_t(value.size()), 4);
        data_.insert(data_.end(), value.begin(), value.end());
    }
    void bytes(const std::vector<uint8_t> &value) {
        integer(int64_t(value.size()), 8);
        data_.insert(data_.end(), value.begin(), value.end());
    }
    Sha256 digest() const { return sha256(data_.data(), data_.size()); }

  private:
    std::vector<uint8_t> data_;
};

} // namespace

Sha256 kernel_digest(const KernelT &kernel) {
    DigestInput in;
    in.text(kernel.entry);
    in.integer(int64_t(kernel.args.size()), 4);
    for (const auto &arg : kernel.args) {
        in.text(arg->name);
        in.integer(int64_t(arg->kind), 1);
        in.integer(int64_t(arg->dtype), 1);
        in.integer(arg->rank, 1);
        in.integer(int64_t(arg->reads.size()), 4);
        for (const ReadBound &r : arg->reads)
            for (int64_t field :
                 {int64_t(r.source()), int64_t(r.scale()), int64_t(r.divisor()), int64_t(r.shift()),
                  int64_t(r.min_offset()), int64_t(r.max_offset()), int64_t(r.min_lo()),
                  int64_t(r.min_hi()), int64_t(r.max_lo()), int64_t(r.max_hi())})
                in.integer(field, 4);
    }
    in.bytes(kernel.object);
    return in.digest();
}

Sha256 kernel_digest(const Kernel &kernel) {
    KernelT unpacked;
    kernel.UnPackTo(&unpacked);
    return kernel_digest(unpacked);
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
