// Building blobs from C++: used by the compiler's graph assembler and by tests.
// A thin layer over the FlatBuffers object API (BlobT): tests that need a malformed blob
// edit blob() directly before finish().
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "vpu_target/blob.h"
#include "vpu_target/target.h"

namespace vpuc::blob {

Address input_at(uint32_t index, uint64_t offset = 0);
Address output_at(uint32_t index, uint64_t offset = 0);
Address constant_at(uint64_t offset);
Address scratch_at(uint64_t offset);
Address cmx_at(uint32_t tile, uint64_t offset);

// A dense activation view with dims (C, W, H, N): NHWC or NCHW in memory.
TensorRefT activation(Address address, DType dtype, Layout layout, uint32_t c, uint32_t w,
                      uint32_t h, uint32_t n = 1, int32_t zero_point = 0);
// NHWC is what the DPU reads and writes.
TensorRefT nhwc(Address address, DType dtype, uint32_t c, uint32_t w, uint32_t h, uint32_t n = 1,
                int32_t zero_point = 0);
// A dense tensor, dims innermost first.
TensorRefT dense(Address address, DType dtype, const std::vector<uint32_t> &extents,
                 int32_t zero_point = 0);

DpuVariantT variant(std::vector<uint32_t> start, std::vector<uint32_t> end, std::string mpe_mode);

// Bytes spanned by a tensor view: (last element offset + 1) * element size; 0 when empty.
uint64_t span_bytes(const TensorRefT &tensor);

struct QueueId {
    EngineKind engine = EngineKind::Dma;
    uint32_t tile = 0;
    uint32_t index = 0;
    static QueueId dma(uint32_t engine) { return {EngineKind::Dma, 0, engine}; }
    static QueueId dpu(uint32_t tile, uint32_t dpu = 0) { return {EngineKind::Dpu, tile, dpu}; }
    static QueueId shave(uint32_t tile) { return {EngineKind::Shave, tile, 0}; }
};

// A task just added: chain wait() and update() to attach barriers.
class TaskHandle {
  public:
    explicit TaskHandle(TaskT &task) : task_(&task) {}
    TaskHandle &wait(uint32_t barrier);
    TaskHandle &update(uint32_t barrier);
    TaskHandle &layer(const std::string &name);
    TaskT &task() { return *task_; }

  private:
    TaskT *task_;
};

class BlobWriter {
  public:
    // The blob carries `target`'s description: it runs on that target only.
    BlobWriter(const target::Target &target, const std::string &network_name);

    // Network I/O: `shape` outermost first (N, C, H, W for 4-D layouts).
    uint32_t add_input(const std::string &name, const std::vector<uint32_t> &shape, DType dtype,
                       Layout layout, std::vector<Quant> quant = {});
    uint32_t add_output(const std::string &name, const std::vector<uint32_t> &shape, DType dtype,
                        Layout layout, std::vector<Quant> quant = {});
    const IoTensorT &input(uint32_t index) const { return *blob_.header->inputs.at(index); }
    const IoTensorT &output(uint32_t index) const { return *blob_.header->outputs.at(index); }

    // Appends constant data aligned to `alignment`; returns its offset in the section.
    uint64_t add_constant(const void *data, size_t bytes, size_t alignment = 64);
    template <typename T> uint64_t add_constant(const std::vector<T> &values) {
        return add_constant(values.data(), values.size() * sizeof(T));
    }

    void set_scratch_bytes(uint64_t bytes) { blob_.header->ddr_scratch_bytes = bytes; }

    // A virtual barrier on `physical_id`; its producer and consumer counts are derived from
    // the tasks that reference it when finish() runs.
    uint32_t add_barrier(uint16_t physical_id);
    // Sets the kernel's sha256 to kernel_digest(kernel).
    uint32_t add_kernel(KernelT kernel);

    TaskHandle add_task(QueueId queue, const std::string &name, TaskKindUnion kind);
    // 1-D contiguous copy.
    TaskHandle add_dma(uint32_t engine, const std::string &name, Address src, Address dst,
                       uint32_t bytes);
    // N-D strided copy (dims outermost first), optionally broadcast to several destinations.
    TaskHandle add_dma(uint32_t engine, const std::string &name, Address src,
                       std::vector<Address> dsts, uint32_t line_bytes, std::vector<DmaDim> dims);
    TaskHandle add_dpu(uint32_t tile, uint32_t dpu, const std::string &name, DpuTaskT task);
    TaskHandle add_shave(uint32_t tile, const std::string &name, ShaveTaskT task);

    BlobT &blob() { return blob_; }

    // Derives barrier counts (unless `keep_barrier_counts`) and serializes.
    std::vector<uint8_t> finish(bool keep_barrier_counts = false);

  private:
    IoTensorT make_io(const std::string &name, const std::vector<uint32_t> &shape, DType dtype,
                      Layout layout, std::vector<Quant> quant, MemSpace space, uint32_t index);
    TaskQueueT &queue(QueueId id);

    BlobT blob_;
};

// Serializes a BlobT as is (no derived fields).
std::vector<uint8_t> pack(const BlobT &blob);

} // namespace vpuc::blob
