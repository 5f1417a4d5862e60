// Reading the files vpuc is given (vpu_target/input_file.h) and quoting their text in
// messages (vpu_target/printable.h).
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>

#include "vpu_target/blob.h"
#include "vpu_target/input_file.h"
#include "vpu_target/printable.h"
#include "vpu_target/target.h"
#include "vpu_target/timing_calibration.h"

namespace {

namespace fs = std::filesystem;
using vpuc::files::FileKind;
using vpuc::files::InputFileError;
using vpuc::files::read_input_file;

// A directory of its own, removed with the fixture.
class InputFile : public ::testing::Test {
  protected:
    void SetUp() override {
        dir_ = fs::temp_directory_path() / ("vpuc_input_file_test_" + std::to_string(::getpid()));
        fs::create_directories(dir_);
    }
    void TearDown() override {
        fs::remove_all(dir_);
        for (const auto &k : vpuc::files::file_kinds())
            if (k.kind != FileKind::RawInput) vpuc::files::set_size_limit(k.kind, k.default_limit);
    }

    std::string file_of(const std::string &name, const std::string &bytes) const {
        const std::string path = (dir_ / name).string();
        std::ofstream(path, std::ios::binary) << bytes;
        return path;
    }

    fs::path dir_;
};

// The message of the InputFileError that reading `path` throws, "" when none is thrown.
std::string read_error(const std::string &path, FileKind kind, uint64_t max_bytes) {
    try {
        read_input_file(path, kind, max_bytes);
    } catch (const InputFileError &e) {
        return e.what();
    }
    return "";
}

TEST_F(InputFile, ReadsARegularFileWhole) {
    const std::string path = file_of("a.bin", std::string("ab\0c", 4));
    EXPECT_EQ(read_input_file(path, FileKind::Blob), (std::vector<uint8_t>{'a', 'b', 0, 'c'}));
    EXPECT_EQ(read_input_file(path, FileKind::RawInput, 4).size(), 4u);
    EXPECT_EQ(vpuc::files::read_text_file(path, FileKind::Target), std::string("ab\0c", 4));
}

TEST_F(InputFile, MissingFileNamesKindPathAndReason) {
    const std::string path = (dir_ / "missing").string();
    try {
        read_input_file(path, FileKind::Blob);
        FAIL();
    } catch (const InputFileError &e) {
        EXPECT_EQ(std::string(e.what()),
                  "cannot open blob file '" + path + "': No such file or directory");
        EXPECT_EQ(e.code(), std::errc::no_such_file_or_directory);
    }
}

TEST_F(InputFile, UnreadableFileIsRefused) {
    if (::geteuid() == 0) GTEST_SKIP() << "root reads files without read permission";
    const std::string path = file_of("secret", "x");
    fs::permissions(path, fs::perms::none);
    EXPECT_EQ(read_error(path, FileKind::Target, 10),
              "cannot open target file '" + path + "': Permission denied");
}

TEST_F(InputFile, DirectoryIsRefused) {
    EXPECT_EQ(read_error(dir_.string(), FileKind::ReferenceCsv, 100),
              "reference CSV file '" + dir_.string() + "' is a directory, not a regular file");
}

TEST_F(InputFile, DevicesAreRefusedUnread) {
    EXPECT_EQ(read_error("/dev/zero", FileKind::Blob, 100),
              "blob file '/dev/zero' is a character device, not a regular file");
    EXPECT_EQ(read_error("/dev/null", FileKind::Schedule, 100),
              "schedule file '/dev/null' is a character device, not a regular file");
}

// Opening a FIFO for reading would wait for a writer: it is refused without waiting.
TEST_F(InputFile, FifoIsRefusedWithoutBlocking) {
    const std::string path = (dir_ / "fifo").string();
    ASSERT_EQ(::mkfifo(path.c_str(), 0600), 0) << std::strerror(errno);
    EXPECT_EQ(read_error(path, FileKind::Npy, 100),
              ".npy file '" + path + "' is a FIFO, not a regular file");
}

TEST_F(InputFile, SocketIsRefused) {
    const std::string path = (dir_ / "socket").string();
    const int fd = ::socket(AF_UNIX, SOCK_STREAM, 0);
    ASSERT_GE(fd, 0);
    sockaddr_un address{};
    address.sun_family = AF_UNIX;
    ASSERT_LT(path.size(), sizeof address.sun_path);
    std::strcpy(address.sun_path, path.c_str());
    ASSERT_EQ(::bind(fd, reinterpret_cast<const sockaddr *>(&address), sizeof address), 0);
    EXPECT_EQ(read_error(path, FileKind::Model, 100),
              "ONNX model file '" + path + "' is a socket, not a regular file");
    ::close(fd);
}

TEST_F(InputFile, SymlinkToARegularFileIsFollowed) {
    const std::string target = file_of("real", "data");
    const std::string link = (dir_ / "link").string();
    fs::create_symlink(target, link);
    EXPECT_EQ(read_input_file(link, FileKind::Blob, 4).size(), 4u);
    fs::create_symlink("/dev/zero", dir_ / "zero");
    EXPECT_NE(read_error((dir_ / "zero").string(), FileKind::Blob, 4).find("character device"),
              std::string::npos);
}

TEST_F(InputFile, FileOverTheLimitNamesSizeLimitAndOption) {
    const std::string path = file_of("big.vpub", std::string(2048, 'x'));
    vpuc::files::set_size_limit(FileKind::Blob, 1024);
    try {
        read_input_file(path, FileKind::Blob);
        FAIL();
    } catch (const vpuc::blob::BlobError &) {
        FAIL() << "read_input_file throws InputFileError";
    } catch (const InputFileError &e) {
        EXPECT_EQ(std::string(e.what()),
                  "blob file '" + path +
                      "' is 2048 bytes, over the limit of 1 KiB for blob files (raise it with "
                      "--max-blob-size)");
    }
    EXPECT_EQ(read_input_file(path, FileKind::Blob, 2048).size(), 2048u);
}

TEST_F(InputFile, RawInputOverItsSizeNamesTheExpectedSize) {
    const std::string path = file_of("in.bin", std::string(1000, 'x'));
    EXPECT_EQ(read_error(path, FileKind::RawInput, 784),
              "input file '" + path + "' is 1000 bytes, over the 784 bytes expected");
}

// Files in /proc report a size of 0: reading stops one byte past the limit.
TEST_F(InputFile, FileReportingNoSizeStopsAtTheLimit) {
    struct stat st {};
    ASSERT_EQ(::stat("/proc/self/status", &st), 0);
    ASSERT_EQ(st.st_size, 0);
    EXPECT_EQ(read_error("/proc/self/status", FileKind::Target, 16),
              "target file '/proc/self/status' holds more than the limit of 16 bytes for "
              "target files (raise it with --max-target-size)");
    EXPECT_GT(read_input_file("/proc/self/status", FileKind::Target, 1 << 20).size(), 16u);
}

TEST_F(InputFile, LimitsHaveDefaultsAndRawInputsHaveNone) {
    EXPECT_EQ(vpuc::files::size_limit(FileKind::Blob), uint64_t(1) << 30);
    EXPECT_EQ(vpuc::files::size_limit(FileKind::Model), uint64_t(2) << 30);
    EXPECT_EQ(vpuc::files::size_limit(FileKind::Target), uint64_t(1) << 20);
    EXPECT_EQ(vpuc::files::size_limit(FileKind::ReferenceCsv), uint64_t(64) << 20);
    EXPECT_EQ(vpuc::files::size_limit(FileKind::Schedule), uint64_t(16) << 20);
    EXPECT_EQ(vpuc::files::size_limit(FileKind::Npy), uint64_t(1) << 30);
    EXPECT_THROW(vpuc::files::size_limit(FileKind::RawInput), std::invalid_argument);
    EXPECT_THROW(vpuc::files::set_size_limit(FileKind::Blob, 0), std::invalid_argument);
    for (const auto &k : vpuc::files::file_kinds())
        EXPECT_EQ(&vpuc::files::file_kind_info(k.kind), &k) << k.name;
}

TEST_F(InputFile, SizeText) {
    EXPECT_EQ(vpuc::files::size_text(uint64_t(2) << 30), "2 GiB");
    EXPECT_EQ(vpuc::files::size_text(uint64_t(64) << 20), "64 MiB");
    EXPECT_EQ(vpuc::files::size_text(3072), "3 KiB");
    EXPECT_EQ(vpuc::files::size_text(1000), "1000 bytes");
    EXPECT_EQ(vpuc::files::size_text(1), "1 byte");
}

// Each reader keeps its own error type, with the helper's message.
TEST_F(InputFile, ReadersReportTheHelpersMessage) {
    try {
        vpuc::blob::read_file(dir_.string());
        FAIL();
    } catch (const vpuc::blob::BlobError &e) {
        EXPECT_EQ(std::string(e.what()),
                  "blob file '" + dir_.string() + "' is a directory, not a regular file");
    }
    try {
        vpuc::target::load_target("/dev/zero");
        FAIL();
    } catch (const vpuc::target::TargetError &e) {
        EXPECT_EQ(std::string(e.what()),
                  "target file '/dev/zero' is a character device, not a regular file");
    }
    try {
        vpuc::target::calibrate_timing_model_file(dir_.string());
        FAIL();
    } catch (const vpuc::target::CalibrationError &e) {
        EXPECT_EQ(std::string(e.what()),
                  "reference CSV file '" + dir_.string() + "' is a directory, not a regular file");
    }
}

TEST_F(InputFile, TargetFileOverTheLimit) {
    const std::string path = file_of("huge.json", std::string(4096, ' ') + "{}");
    vpuc::files::set_size_limit(FileKind::Target, 4096);
    try {
        vpuc::target::load_target(path);
        FAIL();
    } catch (const vpuc::target::TargetError &e) {
        EXPECT_EQ(std::string(e.what()),
                  "target file '" + path +
                      "' is 4098 bytes, over the limit of 4 KiB for target files (raise it with "
                      "--max-target-size)");
    }
}

TEST(Printable, EscapesControlAndNonAsciiBytes) {
    EXPECT_EQ(vpuc::printable("conv1.dpu"), "conv1.dpu");
    EXPECT_EQ(vpuc::printable(std::string("a\nb\x1b[31m\x7f\xc3\xa9\0z", 13)),
              "a\\x0ab\\x1b[31m\\x7f\\xc3\\xa9\\x00z");
}

TEST(Printable, CutsLongTextWithoutSplittingAnEscape) {
    EXPECT_EQ(vpuc::printable(std::string(100, 'x')), std::string(80, 'x') + "...");
    EXPECT_EQ(vpuc::printable("abcdef", 6), "abcdef");
    EXPECT_EQ(vpuc::printable("abcdefg", 6), "abcdef...");
    EXPECT_EQ(vpuc::printable("abcd\x01", 6), "abcd...");
}

TEST(Printable, IsIdempotentUpToLength) {
    const std::string once = vpuc::printable("caf\xc3\xa9\t!");
    EXPECT_EQ(vpuc::printable(once), once);
}

} // namespace
