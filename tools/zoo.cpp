// `vpuc zoo`: the model zoo's networks written as ONNX files.
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <stdexcept>
#include <string>
#include <vector>

#include "command.h"
#include "examples/zoo/zoo.h"
#include "options.h"

namespace vpuc::tools {

namespace {

std::string shape_text(const std::vector<int64_t> &shape) {
    std::string text;
    for (int64_t d : shape) text += (text.empty() ? "" : "x") + std::to_string(d);
    return text;
}

int zoo_command(const std::vector<std::string> &args) {
    const Options o = parse_options(args, {"--out", "--model"}, {"--list"});
    if (!o.positional.empty())
        throw std::runtime_error("zoo takes no file arguments (see vpuc zoo --help)");
    if (o.has("--list")) {
        for (const zoo::ModelInfo &m : zoo::models())
            std::printf("%-20s %-14s %-4s %s\n", m.name.c_str(), shape_text(m.input_shape).c_str(),
                        m.has_qdq_form ? "qdq" : "", m.description.c_str());
        return 0;
    }
    const std::string model = o.get("--model", "all");
    std::vector<std::string> names;
    if (model == "all")
        for (const zoo::ModelInfo &m : zoo::models()) names.push_back(m.name);
    else
        names.push_back(zoo::model_info(model).name);
    const std::string dir = o.get("--out", ".");
    std::error_code error;
    std::filesystem::create_directories(dir, error);
    if (error) throw std::runtime_error("--out '" + dir + "': " + error.message());
    const auto report = [](const std::string &path) {
        std::printf("%s: %ju bytes\n", path.c_str(),
                    std::uintmax_t(std::filesystem::file_size(path)));
    };
    for (const std::string &name : names) {
        report(zoo::write_model(name, dir));
        if (zoo::model_info(name).has_qdq_form) report(zoo::write_qdq_model(name, dir));
    }
    return 0;
}

const bool registered = register_command(
    {"zoo", "write the model zoo's networks (ResNet, MobileNet, ...) as ONNX files",
     "usage: vpuc zoo [--out DIR] [--model NAME|all] [--list]\n\n"
     "Writes standard networks as ONNX models with deterministic weights, as PyTorch exports\n"
     "them (batch norms kept), to DIR/NAME.onnx, and the models marked qdq also in their\n"
     "pre-quantized form, int8 weights and QuantizeLinear/DequantizeLinear on activations\n"
     "calibrated on 4 standard normal inputs, to DIR/NAME_qdq.onnx (docs/zoo.md). The same\n"
     "model is the same bytes on every run.\n\n"
     "options:\n"
     "  --out DIR      the directory to write to, created when missing (default .)\n"
     "  --model NAME   one model, or all (the default)\n"
     "  --list         list the models, their input shapes, whether they have a QDQ form and\n"
     "                 what they are; write nothing\n\n"
     "exit status: 0 when every model is written; 1 on an error (an unknown model, a\n"
     "directory that cannot be written), with a one-line reason",
     zoo_command});

} // namespace

} // namespace vpuc::tools
