// `vpuc compare`: the tensors of two tensor files (.npz, .npy), one against the other as its
// reference, as TPU-MLIR's `npz_tool.py compare` does.
#include <algorithm>
#include <cctype>
#include <cstdio>
#include <exception>
#include <filesystem>
#include <map>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

#include "command.h"
#include "frontend/compare.h"
#include "frontend/tensor_file.h"
#include "options.h"
#include "vpu_target/printable.h"

namespace vpuc::tools {

namespace {

using frontend::NamedTensor;
using frontend::TensorComparison;

// Names longer than this are cut in the table, and end in "...".
constexpr size_t kNameWidth = 40;

struct Request {
    std::string a_path, b_path;
    std::vector<NamedTensor> a, b;
    frontend::Tolerance tolerance;
    std::vector<std::string> only; // --tensor
    bool quiet = false;
};

bool is_npy(const std::string &path) {
    std::string extension = std::filesystem::path(path).extension().string();
    for (char &c : extension) c = char(std::tolower(static_cast<unsigned char>(c)));
    return extension == ".npy";
}

std::vector<NamedTensor> read_tensors(const std::string &path) {
    return std::filesystem::is_directory(path) ? frontend::read_tensor_dir(path)
                                               : frontend::read_tensor_file(path);
}

std::map<std::string, const Halide::Buffer<> *> by_name(const std::vector<NamedTensor> &tensors) {
    std::map<std::string, const Halide::Buffer<> *> found;
    for (const NamedTensor &t : tensors) found[t.name] = &t.value;
    return found;
}

// The command line and both files; throws std::exception for anything wrong with them.
Request read_request(const std::vector<std::string> &args) {
    const Options o = parse_options(args, {"--atol", "--rtol", "--cosine", "--tensor"}, {"--quiet"},
                                    {files::FileKind::Npy});
    if (o.positional.size() != 2)
        throw std::runtime_error("compare takes two tensor files, A and B (see --help)");
    Request r;
    r.a_path = o.positional[0];
    r.b_path = o.positional[1];
    const auto real = [&](const std::string &option, double fallback, double low, double high) {
        const std::string text = o.get(option);
        return text.empty() ? fallback : real_option(option, text, low, high);
    };
    r.tolerance.atol = real("--atol", r.tolerance.atol, 0, 1e9);
    r.tolerance.rtol = real("--rtol", r.tolerance.rtol, 0, 1e9);
    r.tolerance.min_cosine = real("--cosine", r.tolerance.min_cosine, -1, 1);
    r.only = o.all("--tensor");
    r.quiet = o.has("--quiet");
    r.a = read_tensors(r.a_path);
    r.b = read_tensors(r.b_path);
    // Two .npy files hold one tensor each, named after different files.
    if (is_npy(r.a_path) && is_npy(r.b_path)) r.b[0].name = r.a[0].name;
    const auto a_names = by_name(r.a);
    for (const std::string &name : r.only)
        if (!a_names.count(name))
            throw std::runtime_error("--tensor " + printable(name) + ": " + r.a_path +
                                     " holds no such tensor");
    if (r.a.empty()) throw std::runtime_error(r.a_path + " holds no tensors");
    return r;
}

std::string either(const std::string &a, const std::string &b) {
    return a == b ? a : a + "/" + b;
}

std::string number(const char *format, double value) {
    char text[32];
    std::snprintf(text, sizeof text, format, value);
    return text;
}

class Table {
  public:
    Table(size_t name_width, bool quiet) : name_width_(name_width), quiet_(quiet) {}

    void row(const std::string &name, const std::string &shape, const std::string &dtype,
             const std::string &cosine, const std::string &max_error, const std::string &mean_error,
             const std::string &result, bool failed) {
        if (quiet_ && !failed) return;
        if (!header_printed_) {
            header_printed_ = true;
            row("tensor", "shape", "dtype", "cosine", "max|a-b|", "mean|a-b|", "result", true);
        }
        std::printf("%-*s  %-16s %-9s %-9s %-10s %-10s %s\n", int(name_width_),
                    printable(name, kNameWidth).c_str(), shape.c_str(), dtype.c_str(),
                    cosine.c_str(), max_error.c_str(), mean_error.c_str(), result.c_str());
    }

  private:
    size_t name_width_;
    bool quiet_;
    bool header_printed_ = false;
};

int compare_command(const std::vector<std::string> &args) {
    Request r;
    try {
        r = read_request(args);
    } catch (const std::exception &e) {
        std::fprintf(stderr, "vpuc compare: error: %s\n", e.what());
        return 2;
    }
    size_t name_width = std::string("tensor").size();
    for (const NamedTensor &t : r.a) name_width = std::max(name_width, printable(t.name).size());
    Table table(std::min(name_width, kNameWidth + 3), r.quiet);
    const auto a_names = by_name(r.a), b_names = by_name(r.b);
    const std::set<std::string> only(r.only.begin(), r.only.end());

    int compared = 0, failed = 0, missing = 0;
    std::string first_failure; // in A's order: where a dump of every layer's result first parts
    for (const NamedTensor &t : r.a) {
        if (!only.empty() && !only.count(t.name)) continue;
        const auto reference = b_names.find(t.name);
        const std::string dtype = frontend::dtype_name(t.value.type());
        if (reference == b_names.end()) {
            ++missing;
            table.row(t.name, frontend::shape_text(t.value), dtype, "-", "-", "-",
                      "FAIL: not in " + r.b_path, true);
            continue;
        }
        const Halide::Buffer<> &b = *reference->second;
        const TensorComparison c = frontend::compare_tensors(t.value, b, r.tolerance);
        ++compared;
        failed += !c.passed;
        if (!c.passed && first_failure.empty()) first_failure = t.name;
        table.row(t.name, either(frontend::shape_text(t.value), frontend::shape_text(b)),
                  either(dtype, frontend::dtype_name(b.type())),
                  c.shapes_match ? number("%.6f", c.cosine) : "-",
                  c.shapes_match ? number("%.3g", c.max_abs_error) : "-",
                  c.shapes_match ? number("%.3g", c.mean_abs_error) : "-",
                  c.passed ? "pass" : "FAIL: " + c.reason, !c.passed);
    }
    std::string total = "total: " + std::to_string(compared) + " compared, " +
                        std::to_string(compared - failed) + " pass, " + std::to_string(failed) +
                        (failed == 1 ? " fails" : " fail");
    if (missing) total += "; " + std::to_string(missing) + " missing in " + r.b_path;
    if (only.empty()) {
        size_t extra = 0;
        for (const auto &name_value : b_names) extra += !a_names.count(name_value.first);
        if (extra)
            total += "; " + std::to_string(extra) + " of " + r.b_path + " not in " + r.a_path;
    }
    std::printf("%s\n", total.c_str());
    if (!first_failure.empty())
        std::printf("first to fail, in %s's order: %s\n", r.a_path.c_str(),
                    printable(first_failure).c_str());
    return failed || missing ? 1 : 0;
}

const std::vector<files::FileKind> kCompareReads = {files::FileKind::Npy};

const bool registered = register_command(
    {"compare", "compare the tensors of two .npz/.npy files: cosine, errors, pass or fail",
     "usage: vpuc compare A B [--atol X] [--rtol X] [--cosine X] [--tensor NAME]... [--quiet]\n\n"
     "Compares each tensor of A with the tensor of the same name in B, the reference. A and B\n"
     "are .npz archives or .npy files (a .npy file holds one tensor, named after the file; two\n"
     ".npy files are compared whatever their names). Prints a line per tensor: its shape and\n"
     "dtype (A's/B's when they differ), the cosine similarity, the largest and the mean\n"
     "|a - b|, and pass or FAIL with the reason; then the total. Tensors of B that A lacks are\n"
     "counted, not compared. The .npy size limit bounds each file and, for an .npz, what its\n"
     "entries hold uncompressed. A and B may also be directories written by\n"
     "`vpuc reference --dump-all`: their tensors are compared in the order A's index lists\n"
     "them, and the first to fail is named: where two runs of a model part.\n\n"
     "Shapes must be equal. Integer and bool tensors pass when equal. Float tensors (either\n"
     "side a float) pass when every element is within atol + rtol * |b| (a NaN never is, an\n"
     "infinity only of itself) and the cosine similarity is at least the bound (of two all-zero\n"
     "tensors 1, of an all-zero one and another 0).\n\n"
     "options:\n"
     "  --atol X        absolute tolerance (default 0.01)\n"
     "  --rtol X        relative tolerance, a share of |b| (default 0.01)\n"
     "  --cosine X      the least cosine similarity of float tensors (default 0.99)\n"
     "  --tensor NAME   compare only this tensor of A; repeatable\n"
     "  --quiet         print only the tensors that fail, and the total\n" +
         size_options_help(kCompareReads) +
         "\n\nexit status: 0 when every tensor compared passes; 1 when one fails or a tensor of "
         "A\nis missing in B; 2 on a usage error or a file that cannot be read (the reason on "
         "stderr)",
     compare_command});

} // namespace

} // namespace vpuc::tools
