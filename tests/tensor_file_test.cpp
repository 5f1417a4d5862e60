// Tensor files (frontend/tensor_file.h): .npy and .npz written and read back, the bytes numpy
// writes, every kind of malformed file refused with a message naming the field; and the
// comparison of a tensor with its reference (frontend/compare.h).
#include <gtest/gtest.h>
#include <unistd.h>
#include <zip.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <list>
#include <string>
#include <type_traits>
#include <vector>

#include "frontend/compare.h"
#include "frontend/tensor_file.h"
#include "vpu_target/input_file.h"

namespace {

namespace fs = std::filesystem;
using namespace vpuc::frontend;
using vpuc::files::FileKind;

static_assert(std::is_base_of_v<vpuc::Error, TensorFileError>);

std::vector<uint8_t> bytes_of(const std::string &text) {
    return std::vector<uint8_t>(text.begin(), text.end());
}

std::vector<uint8_t> bytes_of(const Halide::Buffer<> &value) {
    const Halide::Buffer<> d = dense(value);
    const auto *p = static_cast<const uint8_t *>(d.raw_buffer()->host);
    return p ? std::vector<uint8_t>(p, p + d.size_in_bytes()) : std::vector<uint8_t>{};
}

// A tensor of numpy shape `shape` holding `values` in C order.
template <typename T>
Halide::Buffer<> tensor(const std::vector<int> &shape, const std::vector<T> &values) {
    Halide::Buffer<T> b(std::vector<int>(shape.rbegin(), shape.rend()));
    EXPECT_EQ(b.number_of_elements(), values.size());
    std::copy(values.begin(), values.end(), b.data());
    return b;
}

Halide::Buffer<> floats(const std::vector<int> &shape, const std::vector<float> &values) {
    return tensor<float>(shape, values);
}

void expect_same_tensor(const Halide::Buffer<> &got, const Halide::Buffer<> &want) {
    ASSERT_EQ(got.type(), want.type()) << dtype_name(got.type());
    ASSERT_EQ(got.dimensions(), want.dimensions());
    for (int d = 0; d < want.dimensions(); ++d)
        EXPECT_EQ(got.dim(d).extent(), want.dim(d).extent());
    EXPECT_EQ(bytes_of(got), bytes_of(want));
}

// The message of the TensorFileError parsing `bytes` throws.
std::string npy_error(const std::vector<uint8_t> &bytes) {
    try {
        parse_npy(bytes, "x.npy");
    } catch (const TensorFileError &e) {
        return e.what();
    }
    return "no error";
}

std::string npz_error(const std::vector<uint8_t> &bytes) {
    try {
        parse_npz(bytes, "x.npz");
    } catch (const TensorFileError &e) {
        return e.what();
    }
    return "no error";
}

// A version 1.0 .npy file of `header` as it is (no padding) and `data`.
std::vector<uint8_t> npy_of(const std::string &header, const std::string &data = "") {
    std::string bytes = std::string("\x93NUMPY\x01\x00", 8) + char(header.size() & 0xff) +
                        char(header.size() >> 8) + header + data;
    return bytes_of(bytes);
}

std::string f4_header(const std::string &shape) {
    return "{'descr': '<f4', 'fortran_order': False, 'shape': " + shape + ", }";
}

// One tensor of every dtype a tensor file holds, numpy shape 1x3x5x7, every byte pattern
// there is (NaNs, infinities and subnormals for floats), bools 0 and 1.
std::vector<Halide::Buffer<>> one_of_every_dtype() {
    const std::vector<Halide::Type> types = {
        Halide::Float(16), Halide::Float(32), Halide::Float(64), Halide::Int(8),
        Halide::UInt(8),   Halide::Int(16),   Halide::UInt(16),  Halide::Int(32),
        Halide::UInt(32),  Halide::Int(64),   Halide::UInt(64),  Halide::Bool()};
    std::vector<Halide::Buffer<>> all;
    for (const Halide::Type &type : types) {
        Halide::Buffer<> b(type, std::vector<int>{7, 5, 3, 1});
        auto *p = static_cast<uint8_t *>(b.raw_buffer()->host);
        for (size_t i = 0; i < b.size_in_bytes(); ++i)
            p[i] = type == Halide::Bool() ? uint8_t(i % 3 == 0) : uint8_t(i * 37 + 11);
        all.push_back(b);
    }
    return all;
}

// Restores the .npy size limit a test lowers.
class NpySizeLimit {
  public:
    explicit NpySizeLimit(uint64_t bytes) { vpuc::files::set_size_limit(FileKind::Npy, bytes); }
    ~NpySizeLimit() {
        vpuc::files::set_size_limit(FileKind::Npy,
                                    vpuc::files::file_kind_info(FileKind::Npy).default_limit);
    }
};

// A directory of its own, removed with the fixture.
class TensorFile : public ::testing::Test {
  protected:
    void SetUp() override {
        dir_ = fs::temp_directory_path() / ("vpuc_tensor_file_test_" + std::to_string(::getpid()));
        fs::create_directories(dir_);
    }
    void TearDown() override { fs::remove_all(dir_); }

    std::string path(const std::string &name) const { return (dir_ / name).string(); }

    fs::path dir_;
};

// --- .npy ---

TEST(Npy, EveryDtypeRoundTrips) {
    for (const Halide::Buffer<> &value : one_of_every_dtype()) {
        SCOPED_TRACE(dtype_name(value.type()));
        expect_same_tensor(parse_npy(serialize_npy(value), "t.npy"), value);
    }
}

TEST(Npy, OddShapesRoundTrip) {
    for (const std::vector<int> &extents : std::vector<std::vector<int>>{
             {}, {5}, {2, 3, 1, 4, 3}, {1, 2, 1, 2, 1, 2, 1, 3}, {0, 3}}) {
        Halide::Buffer<int16_t> b(extents);
        for (size_t i = 0; i < b.number_of_elements(); ++i) b.data()[i] = int16_t(i * 1000 - 7);
        SCOPED_TRACE(shape_text(b));
        expect_same_tensor(parse_npy(serialize_npy(b), "t.npy"), b);
    }
}

// A 0-d array is a buffer of rank 0 holding one element.
TEST(Npy, ZeroDimensionalArrayIsRankZero) {
    Halide::Buffer<float> scalar = Halide::Buffer<float>::make_scalar();
    scalar() = 1.5f;
    const Halide::Buffer<> read = parse_npy(serialize_npy(scalar), "s.npy");
    EXPECT_EQ(read.dimensions(), 0);
    EXPECT_EQ(read.number_of_elements(), 1u);
    EXPECT_EQ(Halide::Buffer<float>(read)(), 1.5f);
    EXPECT_EQ(shape_text(read), "scalar");
}

// A buffer whose elements are not in order (a transposed view) is written in its logical
// order, the last numpy axis fastest.
TEST(Npy, StridedBufferIsWrittenInLogicalOrder) {
    Halide::Buffer<int32_t> b(3, 2);
    for (int y = 0; y < 2; ++y)
        for (int x = 0; x < 3; ++x) b(x, y) = 10 * y + x;
    Halide::Buffer<int32_t> transposed = b;
    transposed.transpose(0, 1); // extents (2, 3): element (y, x) at b(x, y)
    const Halide::Buffer<int32_t> read(parse_npy(serialize_npy(transposed), "t.npy"));
    ASSERT_EQ(shape_text(read), "3x2");
    EXPECT_EQ(std::vector<int32_t>(read.data(), read.data() + 6),
              (std::vector<int32_t>{0, 10, 1, 11, 2, 12}));
}

// np.save of np.array([[1.1, 2.2, 3.3, 4.4], [9.9, 8.8, 7.7, 6.6]], dtype=np.float32), as
// numpy writes it: format 1.0, a header length of 118 (0x76, 'v'), the header text, 58 spaces
// of padding (numpy's room for the first extent to grow, then alignment to 64 bytes) and a
// newline, then the data.
const std::string kNumpyF4 =
    std::string("\x93NUMPY\x01\x00v\x00", 10) +
    "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 4), }" + std::string(58, ' ') + "\n" +
    "\xcd\xcc\x8c?\xcd\xcc\x0c@33S@\xcd\xcc\x8c@ff\x1e" + "A\xcd\xcc\x0c" + "Aff\xf6@33\xd3@";

// np.save of np.arange(10) (int64): the header text and 59 spaces.
const std::string kNumpyI8Header = std::string("\x93NUMPY\x01\x00v\x00", 10) +
                                   "{'descr': '<i8', 'fortran_order': False, 'shape': (10,), }" +
                                   std::string(59, ' ') + "\n";

TEST(Npy, ReadsWhatNumpyWrites) {
    const Halide::Buffer<float> f4(parse_npy(bytes_of(kNumpyF4), "numpy.npy"));
    ASSERT_EQ(shape_text(f4), "2x4");
    EXPECT_EQ(std::vector<float>(f4.data(), f4.data() + 8),
              (std::vector<float>{1.1f, 2.2f, 3.3f, 4.4f, 9.9f, 8.8f, 7.7f, 6.6f}));
    EXPECT_EQ(f4(3, 0), 4.4f); // dim 0 is the last numpy axis

    std::string i8 = kNumpyI8Header;
    for (int64_t v = 0; v < 10; ++v) i8.append(reinterpret_cast<const char *>(&v), 8);
    const Halide::Buffer<int64_t> arange(parse_npy(bytes_of(i8), "arange.npy"));
    ASSERT_EQ(shape_text(arange), "10");
    for (int i = 0; i < 10; ++i) EXPECT_EQ(arange(i), i);
}

TEST(Npy, WritesWhatNumpyWrites) {
    const Halide::Buffer<> f4 = floats({2, 4}, {1.1f, 2.2f, 3.3f, 4.4f, 9.9f, 8.8f, 7.7f, 6.6f});
    EXPECT_EQ(serialize_npy(f4), bytes_of(kNumpyF4));
    std::vector<int64_t> values(10);
    for (int i = 0; i < 10; ++i) values[size_t(i)] = i;
    const std::vector<uint8_t> i8 = serialize_npy(tensor<int64_t>({10}, values));
    EXPECT_EQ(std::string(i8.begin(), i8.begin() + 128), kNumpyI8Header);
    // numpy's padding: the data starts at a multiple of 64 bytes, a 1-byte type '|'.
    const std::vector<uint8_t> u1 =
        serialize_npy(Halide::Buffer<uint8_t>(std::vector<int>{0, 2, 3, 4, 5, 6, 7, 1000000}));
    const std::string header(u1.begin(), u1.begin() + 10 + u1[8] + 256 * u1[9]);
    EXPECT_EQ(header.size() % 64, 0u);
    EXPECT_NE(header.find("{'descr': '|u1', 'fortran_order': False, 'shape': (1000000, 7, 6, 5, "
                          "4, 3, 2, 0), }"),
              std::string::npos)
        << header;
}

// Other writers: versions 2.0 and 3.0 (4-byte header length), keys in any order, double
// quotes, no trailing comma, Python 2's 'L' suffix, 16-byte alignment (older numpy), '<' on a
// one-byte type, and a 0-d bool.
TEST(Npy, ReadsOtherWritersHeaders) {
    for (const char major : {'\x02', '\x03'}) {
        const std::string header = "{\"shape\": (2L, 1L), \"descr\": \"<i2\", \"fortran_order\": "
                                   "False}\n";
        std::string bytes = std::string("\x93NUMPY", 6) + major + '\0' + char(header.size()) +
                            std::string(3, '\0') + header + std::string("\x01\x00\xff\xff", 4);
        const Halide::Buffer<int16_t> b(parse_npy(bytes_of(bytes), "v2.npy"));
        ASSERT_EQ(shape_text(b), "2x1");
        EXPECT_EQ(b(0, 0), 1);
        EXPECT_EQ(b(0, 1), -1);
    }
    const Halide::Buffer<int8_t> i1(
        parse_npy(npy_of("{'descr':'<i1','fortran_order':False,'shape':(3,)}    \n",
                         std::string("\x80\x00\x7f", 3)),
                  "i1.npy"));
    EXPECT_EQ(i1(0), -128);
    EXPECT_EQ(i1(2), 127);
    const Halide::Buffer<bool> flag(parse_npy(
        npy_of("{'descr': '|b1', 'fortran_order': False, 'shape': (), }", "\x01"), "b.npy"));
    EXPECT_EQ(flag.type(), Halide::Bool());
    EXPECT_TRUE(flag());
}

// --- malformed .npy files: each message names the file and the field ---

TEST(NpyErrors, NotANpyFile) {
    EXPECT_EQ(npy_error(bytes_of("\x93NUMP")),
              "x.npy: not a .npy file (it does not start with \\x93NUMPY and a version)");
    EXPECT_EQ(npy_error(bytes_of("PK\x03\x04 and more")),
              "x.npy: not a .npy file (it does not start with \\x93NUMPY and a version)");
}

TEST(NpyErrors, UnknownVersion) {
    EXPECT_EQ(npy_error(bytes_of(std::string("\x93NUMPY\x04\x00\x10\x00", 10))),
              "x.npy: format version 4.0 is not 1.0, 2.0 or 3.0");
    EXPECT_EQ(npy_error(bytes_of(std::string("\x93NUMPY\x01\x01\x10\x00", 10))),
              "x.npy: format version 1.1 is not 1.0, 2.0 or 3.0");
}

TEST(NpyErrors, TruncatedHeader) {
    EXPECT_EQ(npy_error(bytes_of(std::string("\x93NUMPY\x02\x00\x10\x00", 10))),
              "x.npy: header: its length is cut off (the file holds 10 bytes)");
    std::vector<uint8_t> cut = npy_of(f4_header("(2,)"));
    cut.resize(cut.size() - 5);
    EXPECT_EQ(npy_error(cut), "x.npy: header: 57 bytes declared, 52 in the file");
}

TEST(NpyErrors, HeaderNotADict) {
    EXPECT_EQ(npy_error(npy_of("['descr', '<f4']")),
              "x.npy: header: at offset 0: expected '{' (the header is a dict), found '['");
    EXPECT_EQ(npy_error(npy_of("")),
              "x.npy: header: at offset 0: expected '{' (the header is a dict), found the end");
    EXPECT_EQ(npy_error(npy_of("{'descr': '<f4' 'shape': (1,)}")),
              "x.npy: header: at offset 16: expected ',' or '}' after the value of 'descr', "
              "found '''");
    EXPECT_EQ(npy_error(npy_of("{'descr': '<f4', 'fortran_order': False, 'shape': (1,)")),
              "x.npy: header: at offset 54: expected ',' or '}' after the value of 'shape', found "
              "the end");
    EXPECT_EQ(npy_error(npy_of("{descr: '<f4'}")),
              "x.npy: header: at offset 1: expected a key (a quoted string) or '}', found 'd'");
    EXPECT_EQ(npy_error(npy_of("{'de\\x73cr': '<f4'}")),
              "x.npy: header: at offset 4: expected a string without escape sequences, found "
              "'\\'");
}

TEST(NpyErrors, TextAfterTheDict) {
    EXPECT_EQ(npy_error(npy_of(f4_header("(1,)") + " x\n", "abcd")),
              "x.npy: header: at offset 58: expected nothing but white space after the dict, "
              "found 'x'");
    EXPECT_EQ(npy_error(npy_of(f4_header("(1,)") + std::string(1, '\0'), "abcd")),
              "x.npy: header: at offset 57: expected nothing but white space after the dict, "
              "found '\\x00'");
}

TEST(NpyErrors, MissingRepeatedOrUnknownKey) {
    EXPECT_EQ(npy_error(npy_of("{'descr': '<f4', 'shape': (1,)}", "abcd")),
              "x.npy: header: missing key 'fortran_order'");
    EXPECT_EQ(npy_error(npy_of("{'descr': '<f4', 'descr': '<f4'}")),
              "x.npy: header: key 'descr' given twice");
    EXPECT_EQ(npy_error(npy_of("{'descr': '<f4', 'fortran_order': False, 'shape': (1,), "
                               "'order': 'C'}")),
              "x.npy: header: unknown key 'order' (a .npy header holds 'descr', 'fortran_order' "
              "and 'shape')");
}

TEST(NpyErrors, Descr) {
    EXPECT_EQ(npy_error(npy_of("{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': ()}")),
              "x.npy: header: at offset 10: expected a string such as '<f4' for 'descr' "
              "(structured dtypes are not supported), found '['");
    EXPECT_EQ(npy_error(npy_of("{'descr': '<c8', 'fortran_order': False, 'shape': ()}")),
              "x.npy: header: 'descr': unknown dtype '<c8' (known: <f2, <f4, <f8, |i1, |u1, <i2, "
              "<u2, <i4, <u4, <i8, <u8, |b1)");
    EXPECT_EQ(npy_error(npy_of("{'descr': '>f4', 'fortran_order': False, 'shape': ()}")),
              "x.npy: header: 'descr': '>f4' is big-endian; vpuc reads little-endian ('<') data");
    EXPECT_EQ(npy_error(npy_of("{'descr': '|f4', 'fortran_order': False, 'shape': ()}")),
              "x.npy: header: 'descr': '|f4' does not say little-endian ('<')");
}

TEST(NpyErrors, FortranOrder) {
    EXPECT_EQ(npy_error(npy_of("{'descr': '<f4', 'fortran_order': True, 'shape': (2, 2)}")),
              "x.npy: header: 'fortran_order': True: the data is in Fortran order, which vpuc "
              "does not read; save a C-order array (numpy.ascontiguousarray)");
    EXPECT_EQ(npy_error(npy_of("{'descr': '<f4', 'fortran_order': 0, 'shape': (2, 2)}")),
              "x.npy: header: at offset 34: expected True or False for 'fortran_order', found "
              "'0'");
    EXPECT_EQ(npy_error(npy_of("{'descr': '<f4', 'fortran_order': Falsehood, 'shape': ()}")),
              "x.npy: header: at offset 34: expected True or False for 'fortran_order', found "
              "'F'");
}

TEST(NpyErrors, Shape) {
    const auto shape_error = [](const std::string &shape) {
        return npy_error(npy_of(f4_header(shape)));
    };
    EXPECT_EQ(shape_error("(3, -1)"), "x.npy: header: 'shape': (3, -1) has a negative extent");
    EXPECT_EQ(shape_error("(3)"),
              "x.npy: header: 'shape': (3) is an integer, not a tuple (a 1-d shape is written "
              "(3,))");
    EXPECT_EQ(shape_error("[3]"),
              "x.npy: header: at offset 50: expected a tuple such as (3, 4) for 'shape', found "
              "'['");
    EXPECT_EQ(shape_error("(3, 2.5)"),
              "x.npy: header: at offset 55: expected ',' or ')' in 'shape', found '.'");
    EXPECT_EQ(shape_error("(3, 4x)"),
              "x.npy: header: at offset 55: expected an integer extent in 'shape', found 'x'");
    EXPECT_EQ(shape_error("(3, 'a')"),
              "x.npy: header: at offset 54: expected an integer extent in 'shape', found '''");
    EXPECT_EQ(shape_error("(99999999999999999999,)"),
              "x.npy: header: 'shape': extent 99999999999999999999 is too large");
    EXPECT_EQ(shape_error("(-9223372036854775808,)"),
              "x.npy: header: 'shape': extent -9223372036854775808 is too large");
    EXPECT_EQ(shape_error("(2147483648,)"),
              "x.npy: header: 'shape': (2147483648,): extent 2147483648 is over 2147483647, the "
              "largest vpuc holds");
    EXPECT_EQ(shape_error("(65536, 0, 32768)"),
              "x.npy: header: 'shape': (65536, 0, 32768) has over 2147483647 elements (counting a "
              "zero extent as 1), more than vpuc holds");
    EXPECT_EQ(shape_error("(1, 1, 1, 1, 1, 1, 1, 1, 1)"),
              "x.npy: header: 'shape': (1, 1, 1, 1, 1, 1, 1, 1, 1) has 9 dimensions; vpuc reads "
              "at most 8");
}

TEST(NpyErrors, DataOfTheWrongSize) {
    EXPECT_EQ(npy_error(npy_of(f4_header("(3, 4)"), std::string(47, 'x'))),
              "x.npy: data: 47 bytes, but shape (3, 4) of <f4 needs 48");
    EXPECT_EQ(npy_error(npy_of(f4_header("(3, 4)"), std::string(49, 'x'))),
              "x.npy: data: 49 bytes, but shape (3, 4) of <f4 needs 48");
    EXPECT_EQ(npy_error(npy_of(f4_header("(0, 4)"), "x")),
              "x.npy: data: 1 byte, but shape (0, 4) of <f4 needs 0");
}

TEST(NpyErrors, BoolThatIsNeitherZeroNorOne) {
    EXPECT_EQ(npy_error(npy_of("{'descr': '|b1', 'fortran_order': False, 'shape': (3,), }",
                               std::string("\x01\x00\x02", 3))),
              "x.npy: data: element 2 of a bool array is 2, neither 0 nor 1");
}

// --- .npz ---

TEST(Npz, StoredAndDeflatedRoundTrip) {
    std::vector<NamedTensor> tensors;
    for (const Halide::Buffer<> &value : one_of_every_dtype())
        tensors.push_back({"t_" + dtype_name(value.type()), value});
    // Names are names: a '/' or '..' in one makes no path.
    tensors.push_back({"../up/and/away", floats({2}, {1, 2})});
    tensors.push_back({"\xff\xfe not UTF-8", floats({1}, {3})});
    tensors.push_back({"zeros", Halide::Buffer<float>(std::vector<int>{1000}).fill(0.0f)});
    for (NpzCompression compression : {NpzCompression::Stored, NpzCompression::Deflated}) {
        const std::vector<NamedTensor> read =
            parse_npz(serialize_npz(tensors, compression), "t.npz");
        ASSERT_EQ(read.size(), tensors.size());
        for (size_t i = 0; i < read.size(); ++i) {
            EXPECT_EQ(read[i].name, tensors[i].name);
            expect_same_tensor(read[i].value, tensors[i].value);
        }
    }
    // Deflating shrinks 4000 bytes of zeros; storing does not.
    const std::vector<NamedTensor> zeros = {tensors.back()};
    EXPECT_GT(serialize_npz(zeros, NpzCompression::Stored).size(), 4000u);
    EXPECT_LT(serialize_npz(zeros, NpzCompression::Deflated).size(), 1000u);
}

std::vector<uint8_t> from_hex(const std::string &hex) {
    std::vector<uint8_t> bytes;
    for (size_t i = 0; i + 1 < hex.size(); i += 2)
        bytes.push_back(uint8_t(std::stoi(hex.substr(i, 2), nullptr, 16)));
    return bytes;
}

// numpy.savez(f, a=...) and numpy.savez_compressed of the array of kNumpyF4: Python's zipfile
// called as numpy calls it (ZipFile(f, mode='w', compression=ZIP_STORED or ZIP_DEFLATED,
// allowZip64=True), then zipf.open('a.npy', 'w', force_zip64=True) and the .npy bytes), so
// each local header holds 0xffffffff sizes and a zip64 extra field, and ZipInfo's date,
// 1980-01-01. Made with Python 3.11's zipfile and zlib.
const std::string kNumpySavez =
    "504b03042d000000000000002100bef0a777ffffffffffffffff05001400612e6e707901001000a000000000"
    "000000a000000000000000934e554d5059010076007b276465736372273a20273c6634272c2027666f727472"
    "616e5f6f72646572273a2046616c73652c20277368617065273a2028322c2034292c207d2020202020202020"
    "2020202020202020202020202020202020202020202020202020202020202020202020202020202020202020"
    "2020202020200acdcc8c3fcdcc0c4033335340cdcc8c4066661e41cdcc0c416666f6403333d340504b01022d"
    "032d000000000000002100bef0a777a0000000a0000000050000000000000000000000800100000000612e6e"
    "7079504b0506000000000100010033000000d70000000000";
const std::string kNumpySavezCompressed =
    "504b03042d000000080000002100bef0a777ffffffffffffffff05001400612e6e707901001000a000000000"
    "00000063000000000000009bec17ea1b10c9c850c650ad9e925a9c5ca46ea5a06e9366a2aea3a09e965f5452"
    "9498179f5f94920a12774bcc294e058a17672416a402f91a463a0a269a3a0ab50a6403aeb3677aeccf9ee171"
    "30360e7600b21dd2d2e41c817cc7b4b46f40b1cb0e00504b01022d032d000000080000002100bef0a7776300"
    "0000a0000000050000000000000000000000800100000000612e6e7079504b05060000000001000100330000"
    "009a0000000000";

TEST(Npz, ReadsWhatNumpyWrites) {
    for (const std::string &hex : {kNumpySavez, kNumpySavezCompressed}) {
        const std::vector<NamedTensor> read = parse_npz(from_hex(hex), "numpy.npz");
        ASSERT_EQ(read.size(), 1u);
        EXPECT_EQ(read[0].name, "a");
        expect_same_tensor(read[0].value, parse_npy(bytes_of(kNumpyF4), "numpy.npy"));
    }
}

TEST(Npz, EmptyArchive) {
    EXPECT_TRUE(parse_npz(serialize_npz({}), "empty.npz").empty());
}

// Zip archives made with libzip: entries named as other writers name them.
class ZipBuilder {
  public:
    ZipBuilder() {
        zip_error_t error;
        zip_error_init(&error);
        source_ = zip_source_buffer_create(nullptr, 0, 0, &error);
        zip_source_keep(source_);
        archive_ = zip_open_from_source(source_, ZIP_TRUNCATE, &error);
        zip_error_fini(&error);
    }
    ~ZipBuilder() { zip_source_free(source_); }

    ZipBuilder &add(const std::string &name, const std::vector<uint8_t> &bytes,
                    zip_int32_t method = ZIP_CM_STORE) {
        contents_.push_back(bytes);
        zip_source_t *s = zip_source_buffer(archive_, contents_.back().data(), bytes.size(), 0);
        const zip_int64_t index = zip_file_add(archive_, name.c_str(), s, 0);
        EXPECT_GE(index, 0) << zip_strerror(archive_);
        zip_set_file_compression(archive_, zip_uint64_t(index), method, 0);
        return *this;
    }

    std::vector<uint8_t> finish() {
        EXPECT_EQ(zip_close(archive_), 0);
        zip_stat_t stat;
        zip_source_stat(source_, &stat);
        std::vector<uint8_t> bytes(stat.size);
        zip_source_open(source_);
        zip_source_read(source_, bytes.data(), bytes.size());
        zip_source_close(source_);
        return bytes;
    }

  private:
    zip_source_t *source_;
    zip_t *archive_;
    std::list<std::vector<uint8_t>> contents_; // alive until the archive is written
};

TEST(Npz, EntryNamesWithoutTheSuffixAreKept) {
    const std::vector<uint8_t> npy = serialize_npy(floats({1}, {3}));
    const std::vector<NamedTensor> read =
        parse_npz(ZipBuilder().add("plain", npy).add("a.npy.npy", npy).finish(), "n.npz");
    ASSERT_EQ(read.size(), 2u);
    EXPECT_EQ(read[0].name, "plain");
    EXPECT_EQ(read[1].name, "a.npy");
}

// The offsets of the zip structures' signatures (PK\1\2: central directory, PK\3\4: local).
std::vector<size_t> signatures(const std::vector<uint8_t> &zip, const char *signature) {
    std::vector<size_t> at;
    for (size_t i = 0; i + 4 <= zip.size(); ++i)
        if (std::memcmp(&zip[i], signature, 4) == 0) at.push_back(i);
    return at;
}

void put32(std::vector<uint8_t> &bytes, size_t at, uint32_t value) {
    for (int i = 0; i < 4; ++i) bytes[at + size_t(i)] = uint8_t(value >> (8 * i));
}

TEST(NpzErrors, NotAZipArchive) {
    EXPECT_EQ(npz_error({}), "x.npz: an empty file, not a zip archive");
    EXPECT_EQ(npz_error(serialize_npy(floats({1}, {1}))), "x.npz: not a zip archive: Not a zip "
                                                          "archive");
    std::vector<uint8_t> cut = serialize_npz({{"a", floats({4}, {1, 2, 3, 4})}});
    cut.resize(cut.size() - 30);
    EXPECT_NE(npz_error(cut).find("x.npz: not a zip archive: "), std::string::npos);
}

TEST(NpzErrors, EntryThatIsNotANpyFile) {
    EXPECT_EQ(npz_error(ZipBuilder().add("a.npy", bytes_of("hello")).finish()),
              "x.npz: entry 'a.npy': not a .npy file (it does not start with \\x93NUMPY and a "
              "version)");
    EXPECT_EQ(npz_error(ZipBuilder().add("b.npy", npy_of(f4_header("(-1,)"))).finish()),
              "x.npz: entry 'b.npy': header: 'shape': (-1,) has a negative extent");
}

TEST(NpzErrors, TwoEntriesOfOneName) {
    const std::vector<uint8_t> npy = serialize_npy(floats({1}, {3}));
    EXPECT_EQ(npz_error(ZipBuilder().add("a.npy", npy).add("a", npy).finish()),
              "x.npz: entry 'a': a second entry holding tensor 'a'");
}

TEST(NpzErrors, CompressionMethodOtherThanStoredOrDeflated) {
    std::vector<uint8_t> zip = serialize_npz({{"a", floats({1}, {1})}});
    zip[signatures(zip, "PK\x03\x04")[0] + 8] = 12; // bzip2
    zip[signatures(zip, "PK\x01\x02")[0] + 10] = 12;
    EXPECT_EQ(npz_error(zip), "x.npz: entry 'a.npy': compression method 12; .npz entries are "
                              "stored (0) or deflated (8)");
}

TEST(NpzErrors, EncryptedEntry) {
    std::vector<uint8_t> zip = serialize_npz({{"a", floats({1}, {1})}});
    zip[signatures(zip, "PK\x03\x04")[0] + 6] |= 1; // general purpose flag: encrypted
    zip[signatures(zip, "PK\x01\x02")[0] + 8] |= 1;
    EXPECT_EQ(npz_error(zip), "x.npz: entry 'a.npy': encrypted");
}

// A zip bomb: entries whose uncompressed sizes add up past the .npy size limit are refused
// before any is inflated.
TEST(NpzErrors, EntriesLargerThanTheSizeLimit) {
    const NpySizeLimit limit(4096);
    const Halide::Buffer<> zeros = Halide::Buffer<float>(std::vector<int>{1024}).fill(0.0f);
    const std::vector<uint8_t> bomb = serialize_npz({{"z", zeros}}, NpzCompression::Deflated);
    EXPECT_LT(bomb.size(), 4096u);
    EXPECT_EQ(npz_error(bomb), "x.npz: entry 'z.npy': the entries up to this one declare over "
                               "4096 bytes uncompressed, over the limit of 4 KiB for .npy files "
                               "(raise it with --max-npy-size)");
    const Halide::Buffer<> half = Halide::Buffer<float>(std::vector<int>{500}).fill(0.0f);
    EXPECT_EQ(npz_error(serialize_npz({{"a", half}, {"b", half}}, NpzCompression::Deflated)),
              "x.npz: entry 'b.npy': the entries up to this one declare over 4096 bytes "
              "uncompressed, over the limit of 4 KiB for .npy files (raise it with "
              "--max-npy-size)");
}

// An entry whose header declares fewer or more bytes than it inflates to.
TEST(NpzErrors, EntryOfAnotherSizeThanDeclared) {
    const Halide::Buffer<> zeros = Halide::Buffer<float>(std::vector<int>{1024}).fill(0.0f);
    const std::vector<uint8_t> zip = serialize_npz({{"z", zeros}}, NpzCompression::Deflated);
    const auto declaring = [&](uint32_t size) {
        std::vector<uint8_t> lying = zip;
        put32(lying, signatures(lying, "PK\x03\x04")[0] + 22, size);
        put32(lying, signatures(lying, "PK\x01\x02")[0] + 24, size);
        return lying;
    };
    const uint32_t size = 128 + 4096; // header and data
    EXPECT_EQ(npz_error(declaring(size - 100)),
              "x.npz: entry 'z.npy': holds more than the 4124 bytes it declares");
    EXPECT_EQ(npz_error(declaring(size + 100)),
              "x.npz: entry 'z.npy': holds 4224 bytes, not the 4324 it declares");
}

TEST(NpzErrors, TooManyEntries) {
    std::vector<NamedTensor> many;
    const Halide::Buffer<> one = Halide::Buffer<uint8_t>::make_scalar().fill(0);
    for (int i = 0; i <= 65536; ++i) many.push_back({std::to_string(i), one});
    EXPECT_EQ(npz_error(serialize_npz(many)), "x.npz: 65537 entries, over the 65536 vpuc reads");
}

// --- files ---

TEST_F(TensorFile, ReadsAndWritesFiles) {
    const Halide::Buffer<> value = floats({2, 2}, {1, 2, 3, 4});
    write_npy(path("input.npy"), value);
    expect_same_tensor(read_npy(path("input.npy")), value);
    const std::vector<NamedTensor> as_file = read_tensor_file(path("input.npy"));
    ASSERT_EQ(as_file.size(), 1u);
    EXPECT_EQ(as_file[0].name, "input");

    write_npz(path("all.NPZ"), {{"x", value}, {"y", value}}, NpzCompression::Deflated);
    const std::vector<NamedTensor> all = read_tensor_file(path("all.NPZ"));
    ASSERT_EQ(all.size(), 2u);
    EXPECT_EQ(all[1].name, "y");
    EXPECT_EQ(read_npz(path("all.NPZ")).size(), 2u);
}

TEST_F(TensorFile, FileErrors) {
    try {
        read_tensor_file(path("values.bin"));
        ADD_FAILURE() << "no error";
    } catch (const TensorFileError &e) {
        EXPECT_EQ(std::string(e.what()), "'" + path("values.bin") +
                                             "': not a tensor file: its name ends in neither .npy "
                                             "nor .npz");
    }
    EXPECT_THROW(read_tensor_file(path("missing.npy")), vpuc::files::InputFileError);
    EXPECT_THROW(read_npz("/dev/zero"), vpuc::files::InputFileError);
    EXPECT_THROW(write_npy(path("no/such/dir.npy"), floats({1}, {1})), TensorFileError);
    {
        const NpySizeLimit limit(100);
        write_npy(path("big.npy"), floats({64}, std::vector<float>(64)));
        EXPECT_THROW(read_npy(path("big.npy")), vpuc::files::InputFileError);
    }
}

TEST(TensorWriteErrors, WhatNoTensorFileHolds) {
    const auto write_error = [](const std::vector<NamedTensor> &tensors) {
        try {
            serialize_npz(tensors);
        } catch (const TensorFileError &e) {
            return std::string(e.what());
        }
        return std::string("no error");
    };
    const Halide::Buffer<> f = floats({1}, {1});
    EXPECT_EQ(write_error({{"a", f}, {"a", f}}), "tensor 'a' given twice");
    EXPECT_EQ(write_error({{std::string("a\0b", 3), f}}),
              "tensor 'a\\x00b': a name holding a NUL byte cannot name a zip entry");
    EXPECT_EQ(write_error({{"bf", Halide::Buffer<>(Halide::BFloat(16), std::vector<int>{2})}}),
              "tensor 'bf': a tensor of type bfloat16 has no .npy dtype vpuc writes");
    EXPECT_EQ(write_error({{"r9", Halide::Buffer<>(Halide::Int(8), std::vector<int>(9, 1))}}),
              "tensor 'r9': a tensor of rank 9; vpuc writes .npy files of rank 0 to 8");
}

// --- comparison ---

TEST(Compare, IdenticalTensorsPass) {
    const Halide::Buffer<> a = floats({2, 3}, {1, -2, 3, 0.5f, 0, 7});
    const TensorComparison c = compare_tensors(a, a);
    EXPECT_TRUE(c.passed) << c.reason;
    EXPECT_TRUE(c.shapes_match);
    EXPECT_FALSE(c.exact);
    EXPECT_EQ(c.elements, 6);
    EXPECT_EQ(c.mismatches, 0);
    EXPECT_EQ(c.first_mismatch, -1);
    EXPECT_DOUBLE_EQ(c.cosine, 1.0);
    EXPECT_EQ(c.max_abs_error, 0.0);
    EXPECT_EQ(c.mean_abs_error, 0.0);
    EXPECT_EQ(c.reason, "");
}

TEST(Compare, ElementsWithinTheTolerancePass) {
    // |a - b| <= 0.01 + 0.01 * |b|: 0.0195 at b = 1, 1.0 at b = 99.
    const TensorComparison c = compare_tensors(floats({2}, {1.0195f, 100}), floats({2}, {1, 99}));
    EXPECT_TRUE(c.passed) << c.reason;
    EXPECT_NEAR(c.max_abs_error, 1.0, 1e-6);
    EXPECT_NEAR(c.mean_abs_error, (1.0 + 0.0195) / 2, 1e-6);
}

TEST(Compare, OneElementBeyondTheToleranceFails) {
    const TensorComparison c =
        compare_tensors(floats({2, 2}, {1, 2, 3, 4.5f}), floats({2, 2}, {1, 2, 3, 4}));
    EXPECT_FALSE(c.passed);
    EXPECT_EQ(c.mismatches, 1);
    EXPECT_EQ(c.first_mismatch, 3);
    EXPECT_GT(c.cosine, 0.99); // the cosine alone would pass
    EXPECT_EQ(
        c.reason,
        "1 of 4 elements not within 0.01 + 0.01 * |reference|, the first at [1, 1]: 4.5 vs 4");
    Tolerance loose;
    loose.atol = 0.5;
    EXPECT_TRUE(
        compare_tensors(floats({2, 2}, {1, 2, 3, 4.5f}), floats({2, 2}, {1, 2, 3, 4}), loose)
            .passed);
}

TEST(Compare, NaNOnEitherSideFails) {
    const float nan = std::numeric_limits<float>::quiet_NaN();
    for (const auto &[a, b] : {std::pair{nan, 1.0f}, {1.0f, nan}, {nan, nan}}) {
        const TensorComparison c = compare_tensors(floats({2}, {0.5f, a}), floats({2}, {0.5f, b}));
        EXPECT_FALSE(c.passed);
        EXPECT_EQ(c.mismatches, 1);
        EXPECT_TRUE(std::isnan(c.max_abs_error));
        EXPECT_TRUE(std::isnan(c.mean_abs_error));
        EXPECT_TRUE(std::isnan(c.cosine));
        EXPECT_NE(c.reason.find("cosine undefined (a NaN or an infinity)"), std::string::npos)
            << c.reason;
    }
}

// ONNX's backend test runner (numpy.testing.assert_allclose) takes a NaN where a NaN is
// expected; still never a NaN against a number, either way.
TEST(Compare, NaNMatchesNaNOnlyWhenTheToleranceSaysSo) {
    const float nan = std::numeric_limits<float>::quiet_NaN();
    Tolerance onnx_runner;
    onnx_runner.min_cosine = -1;
    onnx_runner.nan_equals_nan = true;
    EXPECT_EQ(
        compare_tensors(floats({2}, {0.5f, nan}), floats({2}, {0.5f, nan}), onnx_runner).mismatches,
        0);
    for (const auto &[a, b] : {std::pair{nan, 1.0f}, {1.0f, nan}})
        EXPECT_EQ(
            compare_tensors(floats({2}, {0.5f, a}), floats({2}, {0.5f, b}), onnx_runner).mismatches,
            1);
}

TEST(Compare, InfinitiesAreCloseOnlyToThemselves) {
    const float inf = std::numeric_limits<float>::infinity();
    const TensorComparison same = compare_tensors(floats({2}, {inf, 1}), floats({2}, {inf, 1}));
    EXPECT_EQ(same.mismatches, 0);
    EXPECT_EQ(same.max_abs_error, 0.0);
    const TensorComparison other = compare_tensors(floats({2}, {5, 1}), floats({2}, {inf, 1}));
    EXPECT_EQ(other.mismatches, 1);
    EXPECT_TRUE(std::isinf(other.max_abs_error));
    EXPECT_EQ(compare_tensors(floats({1}, {-inf}), floats({1}, {inf})).mismatches, 1);
}

TEST(Compare, DifferentShapesFail) {
    const TensorComparison c = compare_tensors(floats({2, 3}, std::vector<float>(6)),
                                               floats({3, 2}, std::vector<float>(6)));
    EXPECT_FALSE(c.passed);
    EXPECT_FALSE(c.shapes_match);
    EXPECT_EQ(c.reason, "shape 2x3 differs from the reference's 3x2");
    EXPECT_TRUE(std::isnan(c.cosine));
    EXPECT_EQ(
        compare_tensors(floats({6}, std::vector<float>(6)), floats({1, 6}, std::vector<float>(6)))
            .reason,
        "shape 6 differs from the reference's 1x6");
}

TEST(Compare, IntegersMustBeEqual) {
    Tolerance loose;
    loose.atol = 10;
    const TensorComparison equal =
        compare_tensors(tensor<int32_t>({3}, {-5, 0, 7}), tensor<int64_t>({3}, {-5, 0, 7}), loose);
    EXPECT_TRUE(equal.passed) << equal.reason;
    EXPECT_TRUE(equal.exact);
    const TensorComparison off =
        compare_tensors(tensor<uint8_t>({3}, {1, 2, 3}), tensor<uint8_t>({3}, {1, 2, 4}), loose);
    EXPECT_FALSE(off.passed);
    EXPECT_EQ(off.reason, "1 of 3 elements differ, the first at [2]: 3 vs 4");
    // 64-bit values beyond a double's precision, and one no int64 holds.
    const int64_t big = (int64_t(1) << 53) + 1;
    EXPECT_FALSE(
        compare_tensors(tensor<int64_t>({1}, {big}), tensor<int64_t>({1}, {big - 1})).passed);
    const TensorComparison sign =
        compare_tensors(tensor<uint64_t>({1}, {~uint64_t(0)}), tensor<int64_t>({1}, {-1}));
    EXPECT_EQ(sign.reason, "1 of 1 elements differ, the first at [0]: 18446744073709551615 vs -1");
    EXPECT_TRUE(
        compare_tensors(tensor<bool>({2}, {true, false}), tensor<uint8_t>({2}, {1, 0})).passed);
}

// A float on one side makes the comparison a float one: an fp16 result against an fp32
// reference, an integer result against a float reference.
TEST(Compare, MixedTypesCompareAsFloats) {
    const Halide::Buffer<> half = tensor<Halide::float16_t>(
        {3}, {Halide::float16_t(0.1f), Halide::float16_t(-2.5f), Halide::float16_t(1000.0f)});
    const TensorComparison c = compare_tensors(half, floats({3}, {0.1f, -2.5f, 1000.2f}));
    EXPECT_TRUE(c.passed) << c.reason;
    EXPECT_FALSE(c.exact);
    EXPECT_FALSE(compare_tensors(tensor<int32_t>({2}, {1, 2}), floats({2}, {1, 2.5f})).passed);
}

// The cosine of two all-zero tensors is 1; of an all-zero tensor and another, 0.
TEST(Compare, CosineOfZeroTensors) {
    const TensorComparison zeros =
        compare_tensors(floats({3}, {0, 0, 0}), floats({3}, {0, -0.0f, 0}));
    EXPECT_TRUE(zeros.passed) << zeros.reason;
    EXPECT_EQ(zeros.cosine, 1.0);
    const TensorComparison one =
        compare_tensors(floats({3}, {0, 0, 0}), floats({3}, {0, 1e-3f, 0}));
    EXPECT_EQ(one.cosine, 0.0);
    EXPECT_EQ(one.mismatches, 0);
    EXPECT_FALSE(one.passed);
    EXPECT_EQ(one.reason, "cosine 0 below 0.99");
    // Empty tensors: nothing differs.
    const TensorComparison empty = compare_tensors(floats({0, 2}, {}), floats({0, 2}, {}));
    EXPECT_TRUE(empty.passed);
    EXPECT_EQ(empty.cosine, 1.0);
}

TEST(Compare, CosineBelowTheBoundFails) {
    Tolerance loose;
    loose.atol = 2;
    const TensorComparison c = compare_tensors(floats({2}, {1, 0}), floats({2}, {0, 1}), loose);
    EXPECT_EQ(c.mismatches, 0);
    EXPECT_FALSE(c.passed);
    EXPECT_EQ(c.reason, "cosine 0 below 0.99");
    loose.min_cosine = -1;
    EXPECT_TRUE(compare_tensors(floats({2}, {1, 0}), floats({2}, {0, 1}), loose).passed);
    // No overflow for values near the largest double.
    const double huge = 1e300;
    EXPECT_DOUBLE_EQ(
        compare_tensors(tensor<double>({2}, {huge, huge}), tensor<double>({2}, {huge, huge}))
            .cosine,
        1.0);
}

TEST(Compare, TypesWithoutANumpyDtypeAreRefused) {
    const Halide::Buffer<> bf16(Halide::BFloat(16), std::vector<int>{2});
    EXPECT_THROW(compare_tensors(bf16, floats({2}, {1, 2})), TensorFileError);
}

TEST(Compare, StridedBuffers) {
    Halide::Buffer<float> b(3, 2);
    for (int y = 0; y < 2; ++y)
        for (int x = 0; x < 3; ++x) b(x, y) = float(10 * y + x);
    Halide::Buffer<float> transposed = b;
    transposed.transpose(0, 1);
    const TensorComparison c = compare_tensors(transposed, floats({3, 2}, {0, 10, 1, 11, 2, 13}));
    EXPECT_EQ(c.mismatches, 1);
    EXPECT_NE(c.reason.find("the first at [2, 1]: 12 vs 13"), std::string::npos) << c.reason;
}

} // namespace
