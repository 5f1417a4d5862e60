#include "vpu_target/blob_writer.h"

#include <algorithm>

namespace vpuc::blob {

Address input_at(uint32_t index, uint64_t offset) {
    return Address(MemSpace::Input, index, offset);
}
Address output_at(uint32_t index, uint64_t offset) {
    return Address(MemSpace::Output, index, offset);
}
Address constant_at(uint64_t offset) {
    return Address(MemSpace::Constant, 0, offset);
}
Address scratch_at(uint64_t offset) {
    return Address(MemSpace::Scratch, 0, offset);
}
Address cmx_at(uint32_t tile, uint64_t offset) {
    return Address(MemSpace::Cmx, tile, offset);
}

TensorRefT activation(Address address, DType dtype, Layout layout, uint32_t c, uint32_t w,
                      uint32_t h, uint32_t n, int32_t zero_point) {
    TensorRefT t;
    t.address = std::make_unique<Address>(address);
    t.dtype = dtype;
    t.zero_point = zero_point;
    int64_t chw = int64_t(c) * w * h;
    if (layout == Layout::NCHW)
        t.dims = {Dim(c, int64_t(w) * h), Dim(w, 1), Dim(h, w), Dim(n, chw)};
    else
        t.dims = {Dim(c, 1), Dim(w, c), Dim(h, int64_t(c) * w), Dim(n, chw)};
    return t;
}

TensorRefT nhwc(Address address, DType dtype, uint32_t c, uint32_t w, uint32_t h, uint32_t n,
                int32_t zero_point) {
    return activation(address, dtype, Layout::NHWC, c, w, h, n, zero_point);
}

TensorRefT dense(Address address, DType dtype, const std::vector<uint32_t> &extents,
                 int32_t zero_point) {
    TensorRefT t;
    t.address = std::make_unique<Address>(address);
    t.dtype = dtype;
    t.zero_point = zero_point;
    int64_t stride = 1;
    for (uint32_t e : extents) {
        t.dims.emplace_back(e, stride);
        stride *= e;
    }
    return t;
}

DpuVariantT variant(std::vector<uint32_t> start, std::vector<uint32_t> end, std::string mpe_mode) {
    DpuVariantT v;
    v.start = std::move(start);
    v.end = std::move(end);
    v.mpe_mode = std::move(mpe_mode);
    return v;
}

uint64_t span_bytes(const TensorRefT &tensor) {
    int64_t last = 0;
    for (const Dim &d : tensor.dims) {
        if (d.extent() == 0) return 0;
        last += int64_t(d.extent() - 1) * std::abs(d.stride());
    }
    return uint64_t(last + 1) * uint64_t(dtype_bytes(tensor.dtype));
}

TaskHandle &TaskHandle::wait(uint32_t barrier) {
    task_->wait_barriers.push_back(barrier);
    return *this;
}

TaskHandle &TaskHandle::update(uint32_t barrier) {
    task_->update_barriers.push_back(barrier);
    return *this;
}

TaskHandle &TaskHandle::layer(const std::string &name) {
    task_->layer = name;
    return *this;
}

BlobWriter::BlobWriter(const target::Target &target, const std::string &network_name) {
    blob_.header = std::make_unique<HeaderT>();
    blob_.header->version = std::make_unique<VersionT>();
    blob_.header->version->major = kVersionMajor;
    blob_.header->version->minor = kVersionMinor;
    blob_.header->target = std::make_unique<TargetDescriptionT>();
    blob_.header->target->name = target.name;
    blob_.header->target->json = target.description_json;
    blob_.header->target->sha256.assign(target.description_sha256.begin(),
                                        target.description_sha256.end());
    blob_.header->name = network_name;
}

IoTensorT BlobWriter::make_io(const std::string &name, const std::vector<uint32_t> &shape,
                              DType dtype, Layout layout, std::vector<Quant> quant, MemSpace space,
                              uint32_t index) {
    IoTensorT io;
    io.name = name;
    io.shape = shape;
    io.dtype = dtype;
    io.layout = layout;
    io.quant = std::move(quant);
    io.quant_axis = 1;
    Address at(space, index, 0);
    if (layout == Layout::ND || shape.size() != 4) {
        io.layout = Layout::ND;
        std::vector<uint32_t> innermost_first(shape.rbegin(), shape.rend());
        if (shape.empty()) innermost_first = {1}; // a scalar: one element
        io.tensor = std::make_unique<TensorRefT>(dense(at, dtype, innermost_first));
    } else {
        io.tensor = std::make_unique<TensorRefT>(
            activation(at, dtype, layout, shape[1], shape[3], shape[2], shape[0]));
    }
    io.bytes = span_bytes(*io.tensor);
    return io;
}

uint32_t BlobWriter::add_input(const std::string &name, const std::vector<uint32_t> &shape,
                               DType dtype, Layout layout, std::vector<Quant> quant) {
    auto &inputs = blob_.header->inputs;
    auto index = uint32_t(inputs.size());
    inputs.push_back(std::make_unique<IoTensorT>(
        make_io(name, shape, dtype, layout, std::move(quant), MemSpace::Input, index)));
    return index;
}

uint32_t BlobWriter::add_output(const std::string &name, const std::vector<uint32_t> &shape,
                                DType dtype, Layout layout, std::vector<Quant> quant) {
    auto &outputs = blob_.header->outputs;
    auto index = uint32_t(outputs.size());
    outputs.push_back(std::make_unique<IoTensorT>(
        make_io(name, shape, dtype, layout, std::move(quant), MemSpace::Output, index)));
    return index;
}

uint64_t BlobWriter::add_constant(const void *data, size_t bytes, size_t alignment) {
    auto &section = blob_.constants;
    size_t offset = (section.size() + alignment - 1) / alignment * alignment;
    section.resize(offset + bytes, 0);
    std::copy_n(static_cast<const uint8_t *>(data), bytes, section.begin() + long(offset));
    return offset;
}

uint32_t BlobWriter::add_barrier(uint16_t physical_id) {
    auto b = std::make_unique<BarrierT>();
    b->physical_id = physical_id;
    blob_.barriers.push_back(std::move(b));
    return uint32_t(blob_.barriers.size() - 1);
}

uint32_t BlobWriter::add_kernel(KernelT kernel) {
    const Sha256 digest = kernel_digest(kernel);
    kernel.sha256.assign(digest.begin(), digest.end());
    blob_.kernels.push_back(std::make_unique<KernelT>(std::move(kernel)));
    return uint32_t(blob_.kernels.size() - 1);
}

TaskQueueT &BlobWriter::queue(QueueId id) {
    for (auto &q : blob_.queues)
        if (q->engine == id.engine && q->tile == id.tile && q->index == id.index) return *q;
    auto q = std::make_unique<TaskQueueT>();
    q->engine = id.engine;
    q->tile = id.tile;
    q->index = id.index;
    blob_.queues.push_back(std::move(q));
    return *blob_.queues.back();
}

TaskHandle BlobWriter::add_task(QueueId id, const std::string &name, TaskKindUnion kind) {
    auto task = std::make_unique<TaskT>();
    task->name = name;
    task->kind = std::move(kind);
    auto &tasks = queue(id).tasks;
    tasks.push_back(std::move(task));
    return TaskHandle(*tasks.back());
}

TaskHandle BlobWriter::add_dma(uint32_t engine, const std::string &name, Address src, Address dst,
                               uint32_t bytes) {
    return add_dma(engine, name, src, {dst}, bytes, {});
}

TaskHandle BlobWriter::add_dma(uint32_t engine, const std::string &name, Address src,
                               std::vector<Address> dsts, uint32_t line_bytes,
                               std::vector<DmaDim> dims) {
    DmaTaskT dma;
    dma.src = std::make_unique<Address>(src);
    dma.dst = std::move(dsts);
    dma.line_bytes = line_bytes;
    dma.dims = std::move(dims);
    TaskKindUnion kind;
    kind.Set(std::move(dma));
    return add_task(QueueId::dma(engine), name, std::move(kind));
}

TaskHandle BlobWriter::add_dpu(uint32_t tile, uint32_t dpu, const std::string &name,
                               DpuTaskT task) {
    TaskKindUnion kind;
    kind.Set(std::move(task));
    return add_task(QueueId::dpu(tile, dpu), name, std::move(kind));
}

TaskHandle BlobWriter::add_shave(uint32_t tile, const std::string &name, ShaveTaskT task) {
    TaskKindUnion kind;
    kind.Set(std::move(task));
    return add_task(QueueId::shave(tile), name, std::move(kind));
}

std::vector<uint8_t> pack(const BlobT &blob) {
    flatbuffers::FlatBufferBuilder fbb(1 << 16);
    FinishBlobBuffer(fbb, Blob::Pack(fbb, &blob));
    return std::vector<uint8_t>(fbb.GetBufferPointer(), fbb.GetBufferPointer() + fbb.GetSize());
}

std::vector<uint8_t> BlobWriter::finish(bool keep_barrier_counts) {
    if (!keep_barrier_counts) {
        for (auto &b : blob_.barriers) b->producer_count = b->consumer_count = 0;
        auto bump = [&](uint32_t index, bool producer) {
            if (index >= blob_.barriers.size()) return; // the verifier reports it
            auto &b = *blob_.barriers[index];
            (producer ? b.producer_count : b.consumer_count)++;
        };
        for (const auto &q : blob_.queues)
            for (const auto &t : q->tasks) {
                for (uint32_t b : t->wait_barriers) bump(b, false);
                for (uint32_t b : t->update_barriers) bump(b, true);
            }
    }
    return pack(blob_);
}

} // namespace vpuc::blob
