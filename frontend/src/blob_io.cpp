#include "frontend/blob_io.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <set>
#include <type_traits>

#include "vpu_target/printable.h"

namespace vpuc::frontend {

namespace {

std::string io_what(const char *kind, const IoLayout &io) {
    return std::string(kind) + " '" + printable(io.name) + "'";
}

std::string extents_text(const std::vector<int64_t> &shape) {
    std::string text;
    for (size_t i = 0; i < shape.size(); ++i) text += (i ? "x" : "") + std::to_string(shape[i]);
    return shape.empty() ? "scalar" : text;
}

Halide::Type halide_type_of(blob::DType dtype) {
    switch (dtype) {
    case blob::DType::U8:
        return Halide::UInt(8);
    case blob::DType::I8:
        return Halide::Int(8);
    case blob::DType::F16:
        return Halide::Float(16);
    case blob::DType::F32:
        return Halide::Float(32);
    case blob::DType::I32:
        return Halide::Int(32);
    }
    throw BlobIoError("unknown element type " + std::to_string(int(dtype)));
}

// Where element `index` (in C order over the shape) lies in the section, in elements.
class SectionOrder {
  public:
    SectionOrder(const IoLayout &io, const char *kind) : nhwc_(io.layout == blob::Layout::NHWC) {
        if (nhwc_ && io.shape.size() != 4)
            throw BlobIoError(io_what(kind, io) + ": an NHWC tensor of rank " +
                              std::to_string(io.shape.size()) + " (shape " +
                              extents_text(io.shape) + ")");
        if (nhwc_) c_ = io.shape[1], h_ = io.shape[2], w_ = io.shape[3];
    }

    int64_t operator()(int64_t index) const {
        if (!nhwc_) return index;
        const int64_t x = index % w_, y = index / w_ % h_, c = index / (w_ * h_) % c_,
                      n = index / (w_ * h_ * c_);
        return ((n * h_ + y) * w_ + x) * c_ + c;
    }

  private:
    bool nhwc_;
    int64_t c_ = 1, h_ = 1, w_ = 1;
};

// The bytes of a dense tensor of `io`.
uint64_t section_bytes(const IoLayout &io) {
    uint64_t elements = 1;
    for (int64_t extent : io.shape) elements *= uint64_t(extent);
    return elements * uint64_t(io.type.bytes());
}

// The element in C order `index` of `value`, for messages.
std::string index_text(int64_t index, const std::vector<int64_t> &shape) {
    std::vector<int64_t> coords(shape.size());
    for (size_t d = shape.size(); d-- > 0;) {
        coords[d] = index % shape[d];
        index /= shape[d];
    }
    std::string text = "[";
    for (size_t d = 0; d < coords.size(); ++d) text += (d ? ", " : "") + std::to_string(coords[d]);
    return text + "]";
}

// `value` as an element of type T, or an error when T cannot hold it exactly (integers) or
// at all (a NaN or a value past the largest finite float is kept: floats round).
template <typename T, typename S> T convert_element(S value, const std::string &what) {
    const double real = double(value);
    if constexpr (std::is_floating_point_v<T> || std::is_same_v<T, Halide::float16_t>) {
        return T(real);
    } else {
        bool exact;
        if constexpr (std::is_same_v<S, bool>)
            exact = true;
        else if constexpr (std::is_integral_v<S>)
            exact = (std::is_signed_v<S> && value < 0)
                        ? int64_t(value) >= int64_t(std::numeric_limits<T>::min())
                        : uint64_t(value) <= uint64_t(std::numeric_limits<T>::max());
        else
            exact = std::floor(real) == real && real >= double(std::numeric_limits<T>::min()) &&
                    real <= double(std::numeric_limits<T>::max());
        if (!exact) {
            char text[64];
            std::snprintf(text, sizeof text, "%.17g", real);
            throw BlobIoError(what + " is " + text + ", which is not exact in " +
                              dtype_name(Halide::type_of<T>()));
        }
        if constexpr (std::is_integral_v<S>) return T(value);
        return T(real);
    }
}

} // namespace

IoLayout io_layout(const blob::IoTensor &io) {
    IoLayout layout{io.name()->str(), {}, halide_type_of(io.dtype()), io.layout()};
    // A blob is untrusted: its shape must describe a tensor a buffer can hold, whose size
    // cannot wrap around to look like its section's.
    uint64_t elements = 1;
    for (uint32_t extent : *io.shape()) {
        layout.shape.push_back(extent);
        if (extent > uint32_t(std::numeric_limits<int32_t>::max()) ||
            __builtin_mul_overflow(elements, uint64_t(extent), &elements) || elements > io.bytes())
            throw BlobIoError(io_what("tensor", layout) + ": extents " +
                              extents_text(layout.shape) + " (so far) do not fit its section of " +
                              std::to_string(io.bytes()) + " bytes");
    }
    if (io.bytes() != section_bytes(layout))
        throw BlobIoError(io_what("tensor", layout) + ": its section is " +
                          std::to_string(io.bytes()) + " bytes, not the " +
                          std::to_string(section_bytes(layout)) + " of a dense " +
                          extents_text(layout.shape) + " " + dtype_name(layout.type) + " tensor");
    return layout;
}

IoLayout io_layout(const dsl::TensorDesc &tensor) {
    IoLayout layout{tensor.name, tensor.logical_shape().raw(), dsl::halide_type(tensor.type),
                    blob::Layout::NCHW};
    if (tensor.graph_shape)
        layout.layout = blob::Layout::ND;
    else if (tensor.order == dsl::DimsOrder::NHWC())
        layout.layout = blob::Layout::NHWC;
    return layout;
}

std::vector<uint8_t> input_bytes(const IoLayout &io, const Halide::Buffer<> &value) {
    const std::string what = io_what("input", io);
    std::vector<int64_t> given;
    for (int d = value.dimensions() - 1; d >= 0; --d) given.push_back(value.dim(d).extent());
    if (given != io.shape)
        throw BlobIoError(what + ": the tensor is " + shape_text(value) + ", the input is " +
                          extents_text(io.shape));
    const SectionOrder order(io, "input");
    const Halide::Buffer<> source = dense(value);
    std::vector<uint8_t> bytes(section_bytes(io));
    visit_element_type(source.type(), [&](auto from) {
        using S = decltype(from);
        const S *in = static_cast<const S *>(source.data());
        visit_element_type(io.type, [&](auto to) {
            using T = decltype(to);
            T *out = reinterpret_cast<T *>(bytes.data());
            for (int64_t i = 0; i < int64_t(source.number_of_elements()); ++i) {
                const T element =
                    convert_element<T>(in[i], what + ": element " + index_text(i, io.shape));
                std::memcpy(out + order(i), &element, sizeof(T));
            }
        });
    });
    return bytes;
}

Halide::Buffer<> output_tensor(const IoLayout &io, const std::vector<uint8_t> &bytes) {
    const SectionOrder order(io, "output");
    if (bytes.size() != section_bytes(io))
        throw BlobIoError(io_what("output", io) + ": " + std::to_string(bytes.size()) +
                          " bytes for a section of " + std::to_string(section_bytes(io)));
    std::vector<int> extents(io.shape.rbegin(), io.shape.rend());
    Halide::Buffer<> value(io.type, extents);
    const int64_t size = io.type.bytes();
    auto *out = static_cast<uint8_t *>(value.data());
    for (int64_t i = 0; i < int64_t(value.number_of_elements()); ++i)
        std::memcpy(out + i * size, bytes.data() + order(i) * size, size_t(size));
    return value;
}

Halide::Buffer<> output_in_type(const NamedTensor &output, const Halide::Type &type) {
    if (output.value.type() == type) return output.value;
    const Halide::Buffer<> source = dense(output.value);
    std::vector<int> extents;
    std::vector<int64_t> shape;
    for (int d = 0; d < source.dimensions(); ++d) {
        extents.push_back(source.dim(d).extent());
        shape.insert(shape.begin(), source.dim(d).extent());
    }
    Halide::Buffer<> value(type, extents);
    const std::string what = "output '" + printable(output.name) + "'";
    visit_element_type(source.type(), [&](auto from) {
        using S = decltype(from);
        const S *in = static_cast<const S *>(source.data());
        visit_element_type(type, [&](auto to) {
            using T = decltype(to);
            T *out = static_cast<T *>(value.data());
            for (int64_t i = 0; i < int64_t(source.number_of_elements()); ++i)
                out[i] = convert_element<T>(in[i], what + ": element " + index_text(i, shape));
        });
    });
    return value;
}

std::vector<std::vector<uint8_t>> blob_inputs(const blob::Blob &blob,
                                              const std::vector<NamedTensor> &tensors) {
    const auto *ios = blob.header()->inputs();
    std::string names;
    std::set<std::string> expected;
    for (uint32_t i = 0; ios && i < ios->size(); ++i) {
        expected.insert(ios->Get(i)->name()->str());
        names += (i ? ", " : "") + printable(ios->Get(i)->name()->string_view());
    }
    const std::string listing = " (the blob's inputs: " + (names.empty() ? "none" : names) + ")";
    std::set<std::string> given;
    for (const NamedTensor &t : tensors) {
        if (!expected.count(t.name))
            throw BlobIoError("the blob has no input '" + printable(t.name) + "'" + listing);
        if (!given.insert(t.name).second)
            throw BlobIoError("input '" + printable(t.name) + "' is given twice");
    }
    std::vector<std::vector<uint8_t>> sections;
    for (uint32_t i = 0; ios && i < ios->size(); ++i) {
        const blob::IoTensor &io = *ios->Get(i);
        const auto it = std::find_if(tensors.begin(), tensors.end(), [&](const NamedTensor &t) {
            return t.name == io.name()->str();
        });
        if (it == tensors.end())
            throw BlobIoError("no tensor is given for input '" +
                              printable(io.name()->string_view()) + "'" + listing);
        sections.push_back(input_bytes(io_layout(io), it->value));
    }
    return sections;
}

std::vector<NamedTensor> blob_outputs(const blob::Blob &blob,
                                      const std::vector<std::vector<uint8_t>> &sections) {
    const auto *ios = blob.header()->outputs();
    const uint32_t count = ios ? ios->size() : 0;
    if (sections.size() != count)
        throw BlobIoError(std::to_string(sections.size()) + " output sections for a blob of " +
                          std::to_string(count) + " outputs");
    std::vector<NamedTensor> outputs;
    for (uint32_t i = 0; i < count; ++i)
        outputs.push_back(
            {ios->Get(i)->name()->str(), output_tensor(io_layout(*ios->Get(i)), sections[i])});
    return outputs;
}

} // namespace vpuc::frontend
