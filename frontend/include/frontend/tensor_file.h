// Tensor files: NumPy's .npy (one array) and .npz (a zip archive of .npy files), which hold a
// network's inputs, its reference outputs and the results vpuc computes.
//
// A tensor is a dense Halide::Buffer<> with the numpy shape reversed: dim 0 is the last numpy
// axis (the innermost), as vpuc holds constants (dsl/registry.h). The element types are the
// numpy dtypes f2, f4, f8, i1, u1, i2, u2, i4, u4, i8, u8 and b1, as Halide's Float(16),
// Float(32), Float(64), Int(8), UInt(8), Int(16), UInt(16), Int(32), UInt(32), Int(64),
// UInt(64) and Bool() (what dsl::halide_type gives ElemType::Bool: one byte per element, 0 or
// 1). A 0-d array (shape ()) is a buffer of rank 0 holding one element, as a constant of rank
// 0 is.
//
// Every file is untrusted. A reader accepts the .npy format versions 1.0, 2.0 and 3.0, in C
// order, little-endian ('<'; one-byte types in any byte order), of rank 0 to 8 with at most
// 2^31 - 1 elements (counting a zero extent as 1, so that Halide's strides fit) and each
// extent below 2^31, bools 0 or 1; anything else throws TensorFileError naming the file and
// the field ("x.npy: header: 'shape': (3, -1) has a negative extent"). An .npz is read from
// memory with libzip: entries stored or deflated, at most 65536 of them, whose uncompressed
// sizes, as declared and as read, stay within the .npy size limit (files::size_limit) in
// all, so that no archive expands past what a .npy file may hold. An entry's tensor is named
// after the entry without its ".npy" suffix, as numpy.load names it; a name is only a name
// ('/' and ".." included), never a path.
#pragma once

#include <Halide.h>

#include <cstdint>
#include <string>
#include <vector>

#include "vpu_target/error.h"

namespace vpuc::frontend {

class TensorFileError : public Error {
  public:
    using Error::Error;
};

struct NamedTensor {
    std::string name;
    Halide::Buffer<> value;
};

enum class NpzCompression { Stored, Deflated }; // numpy.savez, numpy.savez_compressed

// The dtype names vpuc prints, as dsl does: "f16", "f32", "f64", "i8", "u8", "i16", "u16",
// "i32", "u32", "i64", "u64", "bool"; Halide's name for a type with no numpy dtype here.
std::string dtype_name(const Halide::Type &type);
// The numpy shape of `value` (its extents, last dimension first): "1x3x5x7", "scalar" for
// rank 0.
std::string shape_text(const Halide::Buffer<> &value);
// `value` itself when its elements lie in order without gaps (dim 0 innermost, as .npy data
// does), else a copy that does.
Halide::Buffer<> dense(const Halide::Buffer<> &value);

// Calls f with a value of the C++ type of `type`'s elements (Halide::float16_t for f16), for
// each type with a numpy dtype above; throws TensorFileError for any other.
template <typename F> void visit_element_type(const Halide::Type &type, F &&f) {
    if (type == Halide::Float(16)) return f(Halide::float16_t{});
    if (type == Halide::Float(32)) return f(float{});
    if (type == Halide::Float(64)) return f(double{});
    if (type == Halide::Int(8)) return f(int8_t{});
    if (type == Halide::UInt(8)) return f(uint8_t{});
    if (type == Halide::Int(16)) return f(int16_t{});
    if (type == Halide::UInt(16)) return f(uint16_t{});
    if (type == Halide::Int(32)) return f(int32_t{});
    if (type == Halide::UInt(32)) return f(uint32_t{});
    if (type == Halide::Int(64)) return f(int64_t{});
    if (type == Halide::UInt(64)) return f(uint64_t{});
    if (type == Halide::Bool()) return f(bool{});
    throw TensorFileError("no numpy dtype holds elements of type " + dtype_name(type));
}

// The tensor of a .npy file's bytes; `what` names the file in messages ("x.npy", or
// "x.npz: entry 'a.npy'").
Halide::Buffer<> parse_npy(const std::vector<uint8_t> &bytes, const std::string &what);
// The tensors of an .npz archive's bytes, in the archive's order.
std::vector<NamedTensor> parse_npz(const std::vector<uint8_t> &bytes, const std::string &what);

// The same from files, read with files::read_input_file (FileKind::Npy: regular files, at most
// the .npy size limit, --max-npy-size).
Halide::Buffer<> read_npy(const std::string &path);
std::vector<NamedTensor> read_npz(const std::string &path);
// A .npy file (one tensor, named after the file without its directory and extension) or an
// .npz, by the path's extension (any case); another extension is a TensorFileError.
std::vector<NamedTensor> read_tensor_file(const std::string &path);

// The bytes numpy.save writes for `value`: format 1.0, numpy's header text and padding, the
// elements in C order. Throws TensorFileError for a type without a numpy dtype above or a rank
// over 8.
std::vector<uint8_t> serialize_npy(const Halide::Buffer<> &value);
// An .npz of `tensors`, each an entry "<name>.npy", in order. Throws TensorFileError for a
// repeated name or one holding a NUL byte.
std::vector<uint8_t> serialize_npz(const std::vector<NamedTensor> &tensors,
                                   NpzCompression compression = NpzCompression::Stored);
void write_npy(const std::string &path, const Halide::Buffer<> &value);
void write_npz(const std::string &path, const std::vector<NamedTensor> &tensors,
               NpzCompression compression = NpzCompression::Stored);

// A directory of tensors, as `--dump-all` writes them: DIR/NAME.npy for each (characters of
// NAME other than letters, digits, '.', '_' and '-' made '_') and DIR/index.txt, a line
// "NAME FILE" per tensor in their order. DIR is created when missing.
void write_tensor_dir(const std::string &dir, const std::vector<NamedTensor> &tensors);
// The tensors of such a directory, in the index's order. Every FILE must be an .npy of DIR
// itself, so that an index cannot lead the reader elsewhere.
std::vector<NamedTensor> read_tensor_dir(const std::string &dir);

} // namespace vpuc::frontend
