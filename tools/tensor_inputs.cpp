#include "tensor_inputs.h"

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <sstream>
#include <stdexcept>

#include "command.h"
#include "frontend/image_input.h"
#include "vpu_target/printable.h"

namespace vpuc::tools {

const std::vector<std::string> kImageOptions = {"--mean", "--scale", "--pixel-format",
                                                "--channel-format", "--pad-value"};
const std::vector<std::string> kImageFlags = {"--keep-aspect-ratio"};
const char *const kTensorInputHelp =
    "  --input NAME=FILE  input NAME from FILE: an .npy file, an .npz file (its entry NAME,\n"
    "                     or its only entry), or an image (.png, .jpg, .bmp, .ppm, .tif...)\n"
    "  --input FILE.npz   the inputs named as the archive's entries\n"
    "  --input FILE.npy   the input named as the file, or the only input\n"
    "images are resized to the input's height and width and converted to float as\n"
    "(pixel - mean) * scale:\n"
    "  --pixel-format F   rgb (default), bgr or gray\n"
    "  --channel-format F nchw (default) or nhwc: how the input holds the image\n"
    "  --mean V[,V,V]     per channel, or one for all (default 0)\n"
    "  --scale V[,V,V]    per channel, or one for all (default 1)\n"
    "  --keep-aspect-ratio\n"
    "                     resize to fit and pad the rest, centred, instead of stretching\n"
    "  --pad-value V      the padding's pixel value, 0..255 (default 0)\n";

namespace {

std::string lower_extension(const std::string &path) {
    std::string ext = std::filesystem::path(path).extension().string();
    std::transform(ext.begin(), ext.end(), ext.begin(),
                   [](unsigned char c) { return char(std::tolower(c)); });
    return ext;
}

bool is_image(const std::string &path) {
    static const std::vector<std::string> kImageExtensions = {
        ".png", ".jpg",  ".jpeg", ".bmp", ".ppm", ".pgm", ".pbm", ".pnm",
        ".tif", ".tiff", ".webp", ".jp2", ".exr", ".hdr", ".ras", ".sr"};
    const std::string ext = lower_extension(path);
    return std::find(kImageExtensions.begin(), kImageExtensions.end(), ext) !=
           kImageExtensions.end();
}

const frontend::IoLayout *find_input(const std::vector<frontend::IoLayout> &inputs,
                                     const std::string &name) {
    for (const auto &in : inputs)
        if (in.name == name) return &in;
    return nullptr;
}

// The input NAME=FILE names, when NAME is one of `inputs`.
const frontend::IoLayout *named_input(const std::string &value,
                                      const std::vector<frontend::IoLayout> &inputs,
                                      std::string &file) {
    const size_t eq = value.find('=');
    if (eq == std::string::npos) return nullptr;
    const frontend::IoLayout *in = find_input(inputs, value.substr(0, eq));
    if (in) file = value.substr(eq + 1);
    return in;
}

std::vector<float> real_list(const std::string &option, const std::string &text) {
    std::vector<float> values;
    std::istringstream in(text);
    for (std::string item; std::getline(in, item, ',');)
        values.push_back(float(real_option(option, item, -1e6, 1e6)));
    if (values.empty()) throw std::runtime_error(option + " needs a number or a list of them");
    return values;
}

frontend::ImagePreprocess image_preprocess(const Options &o) {
    frontend::ImagePreprocess p;
    try {
        p.pixel_format = frontend::parse_pixel_format(o.get("--pixel-format", "rgb"));
        p.channel_format = frontend::parse_channel_format(o.get("--channel-format", "nchw"));
    } catch (const frontend::ImageError &e) {
        throw std::runtime_error(e.what());
    }
    if (!o.get("--mean").empty()) p.mean = real_list("--mean", o.get("--mean"));
    if (!o.get("--scale").empty()) p.scale = real_list("--scale", o.get("--scale"));
    p.keep_aspect_ratio = o.has("--keep-aspect-ratio");
    p.pad_value = float(real_option("--pad-value", o.get("--pad-value", "0"), 0, 255));
    return p;
}

// The tensor for input `in` from FILE of NAME=FILE.
Halide::Buffer<> read_named(const frontend::IoLayout &in, const std::string &file,
                            const Options &o) {
    if (is_image(file)) return frontend::read_image(file, in.shape, image_preprocess(o));
    if (lower_extension(file) == ".npz") {
        const std::vector<frontend::NamedTensor> entries = frontend::read_npz(file);
        for (const auto &entry : entries)
            if (entry.name == in.name) return entry.value;
        if (entries.size() == 1) return entries[0].value;
        throw std::runtime_error("--input " + in.name + "=" + file +
                                 ": the archive has no entry '" + printable(in.name) +
                                 "' and more than one other");
    }
    return frontend::read_npy(file);
}

} // namespace

bool tensor_inputs_given(const Options &o, const std::vector<std::string> &inputs) {
    for (const std::string &value : o.all("--input")) {
        const std::string ext = lower_extension(value);
        const size_t eq = value.find('=');
        const bool named =
            eq != std::string::npos &&
            std::find(inputs.begin(), inputs.end(), value.substr(0, eq)) != inputs.end();
        if (named || ext == ".npy" || ext == ".npz") return true;
    }
    return false;
}

std::vector<frontend::NamedTensor>
read_tensor_inputs(const Options &o, const std::vector<frontend::IoLayout> &inputs) {
    std::vector<frontend::NamedTensor> given;
    const auto add = [&](const std::string &name, Halide::Buffer<> value, const std::string &from) {
        for (const auto &t : given)
            if (t.name == name)
                throw std::runtime_error("input '" + printable(name) +
                                         "' is given twice (again by '" + printable(from) + "')");
        given.push_back({name, std::move(value)});
    };
    for (const std::string &value : o.all("--input")) {
        std::string file;
        if (const frontend::IoLayout *in = named_input(value, inputs, file)) {
            add(in->name, read_named(*in, file, o), value);
            continue;
        }
        const std::string ext = lower_extension(value);
        if (ext == ".npz") {
            for (auto &t : frontend::read_npz(value)) {
                if (!find_input(inputs, t.name))
                    throw std::runtime_error("--input " + printable(value) + ": entry '" +
                                             printable(t.name) + "' names no input");
                add(t.name, std::move(t.value), value);
            }
        } else if (ext == ".npy") {
            std::string name = std::filesystem::path(value).stem().string();
            if (!find_input(inputs, name) && inputs.size() == 1) name = inputs[0].name;
            if (!find_input(inputs, name))
                throw std::runtime_error("--input " + printable(value) +
                                         ": names no input; give it as NAME=" + printable(value));
            add(name, frontend::read_npy(value), value);
        } else {
            throw std::runtime_error("--input " + printable(value) +
                                     ": neither NAME=FILE for an input, an .npy nor an .npz; raw "
                                     "input files cannot be mixed with tensors");
        }
    }
    for (const auto &in : inputs)
        if (!std::any_of(given.begin(), given.end(),
                         [&](const frontend::NamedTensor &t) { return t.name == in.name; }))
            throw std::runtime_error("no --input gives input '" + printable(in.name) + "'");
    return given;
}

} // namespace vpuc::tools
