// Fuzzes the ONNX importer (frontend/onnx_import.h) and the graph passes behind it. The
// contract: import_onnx_bytes accepts the bytes or throws ModelError (files::InputFileError for
// external data it cannot read), and the graph passes take whatever graph it returns. Any other
// exception aborts with its message, so that libFuzzer keeps the input.
//
// The model lies in a directory of its own holding one external data file, data.bin, so that
// external data is loaded (and locations leaving the directory refused) without reading
// anything else.
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>
#include <vector>

#include "frontend/graph_passes.h"
#include "frontend/onnx_import.h"
#include "vpu_target/input_file.h"

namespace {

using namespace vpuc;
namespace fs = std::filesystem;

// data.bin's size: room for a small tensor of each type at a few offsets.
constexpr size_t kExternalDataBytes = 4096;

std::string model_path;

[[noreturn]] void violation(const std::string &what) {
    std::fprintf(stderr, "CONTRACT VIOLATION: %s\n", what.c_str());
    std::abort();
}

} // namespace

extern "C" int LLVMFuzzerInitialize(int *, char ***) {
    // One directory for every run; the file is replaced whole, so that a run starting beside
    // another never reads it half written.
    const fs::path dir = fs::temp_directory_path() / "vpuc-fuzz-onnx";
    fs::create_directories(dir);
    const fs::path part = dir / ("data.bin." + std::to_string(getpid()));
    {
        std::ofstream data(part, std::ios::binary);
        for (size_t i = 0; i < kExternalDataBytes; ++i) data.put(char(i * 37 + 11));
        if (!data) violation("cannot write the model's external data in " + dir.string());
    }
    fs::rename(part, dir / "data.bin");
    model_path = (dir / "fuzz.onnx").string();
    return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const std::vector<uint8_t> bytes(data, data + size);
    std::optional<frontend::ImportedModel> model;
    try {
        model = frontend::import_onnx_bytes(bytes, model_path);
    } catch (const frontend::ModelError &) {
        return 0;
    } catch (const files::InputFileError &) {
        return 0;
    } catch (const std::exception &e) {
        violation(std::string("the import throws another error: ") + e.what());
    }
    try {
        frontend::run_graph_passes(model->graph);
    } catch (const std::exception &e) {
        violation(std::string("the graph passes fail on an imported graph: ") + e.what());
    }
    return 0;
}
