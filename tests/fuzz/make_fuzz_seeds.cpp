// Writes the fuzzers' seed corpora, generated from the current sources so that they follow the
// blob format, the target files and the schedule syntax as they change:
//
//   DIR/blob/       every seed network (seed_blobs.h) compiled for vpu27 and vpu20
//   DIR/blob_small/ the same without the demo network, for functional runs
//   DIR/target/     the bundled target files as written, and as the canonical JSON blobs carry
//   DIR/schedule_chain/, DIR/schedule_json/   the schedules the lowering gave each layer,
//                   random legal ones (codegen/random_schedule.h), and one chain using every
//                   directive, as chains and as JSON
//   DIR/schedules_file/ per seed network and target, a schedules file (dsl/schedules_file.h)
//                   of the schedules the lowering gave its layers; one of every directive
//   DIR/tensor_file/ .npy files of every dtype, of ranks 0, 1, 4 and 8 and of rank 2 with a
//                   zero extent, and .npz archives of them, stored and deflated
//   DIR/onnx/       small models of the ONNX backend test data (libonnx-testdata): single
//                   nodes, and PyTorch layers with their weights, which import whole
//
// usage: make_fuzz_seeds DIR
#include <nlohmann/json.hpp>

#include <cstdio>
#include <exception>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "codegen/lower.h"
#include "codegen/random_schedule.h"
#include "frontend/tensor_file.h"
#include "seed_blobs.h"
#include "vpu_target/blob.h"

namespace fs = std::filesystem;
using namespace vpuc;

namespace {

constexpr int kRandomSchedulesPerLayer = 6;

// Where Debian's libonnx-testdata keeps the backend test data.
const fs::path kOnnxTestData = "/usr/share/libonnx-testdata/data";
// Models of a few hundred bytes each: ops the importer maps, one it refuses (LRN), a shape
// sub-graph (the expanded Range) and layers whose weights are initializers.
const std::vector<std::string> kOnnxSeedModels = {
    "node/test_add",
    "node/test_averagepool_2d_pads",
    "node/test_batchnorm_example",
    "node/test_cast_FLOAT_to_FLOAT16",
    "node/test_clip",
    "node/test_concat_2d_axis_0",
    "node/test_constantofshape_int_zeros",
    "node/test_conv_with_strides_padding",
    "node/test_erf",
    "node/test_flatten_axis0",
    "node/test_gather_0",
    "node/test_gemm_default_no_bias",
    "node/test_globalaveragepool",
    "node/test_layer_normalization_2d_axis0",
    "node/test_lrn",
    "node/test_matmul_2d",
    "node/test_maxpool_2d_default",
    "node/test_range_float_type_positive_delta_expanded",
    "node/test_reshape_reordered_all_dims",
    "node/test_resize_upsample_scales_nearest",
    "node/test_slice",
    "node/test_softmax_axis_1",
    "node/test_split_equal_parts_1d",
    "node/test_top_k",
    "node/test_transpose_default",
    "node/test_upsample_nearest",
    "pytorch-converted/test_BatchNorm2d_eval",
    "pytorch-converted/test_Conv2d",
    "pytorch-converted/test_Conv2d_depthwise",
    "pytorch-converted/test_Linear",
    "pytorch-converted/test_MaxPool2d",
    "pytorch-converted/test_Softmax",
};

void write_text(const fs::path &path, const std::string &text) {
    std::ofstream out(path, std::ios::binary);
    out << text;
    if (!out) throw std::runtime_error("cannot write " + path.string());
}

// The layers the DPU cannot run: random_schedule schedules them for the SHAVEs.
bool shave_layer(const dsl::Layer &layer) {
    return layer.name() == "prob" || layer.name() == "sig";
}

dsl::Schedule every_directive() {
    dsl::Schedule s;
    s.split("y", "yo", "yi", {4, 12, 8, 4})
        .tile("x", "c", "xo", "co", "xi", "ci", 8, 16)
        .reorder({"xi", "ci", "yi"})
        .fuse("xi", "ci", "xci")
        .unroll("xci")
        .vectorize("xci", 16)
        .compute_at("conv2", "yo")
        .store_in(dsl::MemoryLevel::CMX)
        .on_dpu("CUBOID_16x16")
        .on_shave()
        .workloads("yi", 2)
        .distribute("yo", 2, dsl::Strategy::HKSwitch)
        .distribute("co", 2, dsl::Strategy::SplitOverKernel)
        .distribute("xo", 2, dsl::Strategy::Clustering)
        .distribute("y", 2, dsl::Strategy::SplitOverHeight)
        .prefetch(1)
        .spill()
        .compute_root()
        .store_in(dsl::MemoryLevel::DDR);
    return s;
}

class ScheduleSeeds {
  public:
    explicit ScheduleSeeds(const fs::path &dir)
        : chains_(dir / "schedule_chain"), json_(dir / "schedule_json") {
        fs::create_directories(chains_);
        fs::create_directories(json_);
    }

    void add(const dsl::Schedule &schedule) {
        const std::string name = "schedule-" + std::to_string(count_++);
        write_text(chains_ / (name + ".txt"), schedule.to_string());
        write_text(json_ / (name + ".json"), schedule.to_json());
    }

  private:
    fs::path chains_, json_;
    int count_ = 0;
};

// A schedules file: layer names to schedules, as `vpuc compile --schedules` reads it.
void write_schedules_file(const fs::path &path,
                          const std::map<std::string, dsl::Schedule> &schedules) {
    nlohmann::json doc = nlohmann::json::object();
    for (const auto &[layer_name, schedule] : schedules)
        doc[layer_name] = nlohmann::json::parse(schedule.to_json());
    write_text(path, doc.dump(2));
}

void write_onnx_seeds(const fs::path &dir) {
    fs::create_directories(dir);
    for (const std::string &test : kOnnxSeedModels) {
        const std::string name = fs::path(test).filename().string() + ".onnx";
        fs::copy_file(kOnnxTestData / test / "model.onnx", dir / name,
                      fs::copy_options::overwrite_existing);
    }
}

void write_tensor_file_seeds(const fs::path &dir) {
    fs::create_directories(dir);
    const std::vector<Halide::Type> types = {
        Halide::Float(16), Halide::Float(32), Halide::Float(64), Halide::Int(8),
        Halide::UInt(8),   Halide::Int(16),   Halide::UInt(16),  Halide::Int(32),
        Halide::UInt(32),  Halide::Int(64),   Halide::UInt(64),  Halide::Bool()};
    const std::vector<std::vector<int>> shapes = {
        {}, {5}, {7, 5, 3, 1}, {2, 1, 1, 1, 1, 1, 1, 2}, {3, 0}};
    std::vector<frontend::NamedTensor> tensors;
    for (const Halide::Type &type : types)
        for (const std::vector<int> &extents : shapes) {
            Halide::Buffer<> value(type, extents);
            auto *p = static_cast<uint8_t *>(value.raw_buffer()->host);
            for (size_t i = 0; i < value.size_in_bytes(); ++i)
                p[i] = type == Halide::Bool() ? uint8_t(i % 2) : uint8_t(i * 37 + 11);
            const std::string name = frontend::dtype_name(type) + "-rank" +
                                     std::to_string(extents.size()) +
                                     (value.number_of_elements() ? "" : "-empty");
            frontend::write_npy((dir / (name + ".npy")).string(), value);
            tensors.push_back({name, value});
        }
    const std::vector<frontend::NamedTensor> few(tensors.begin(), tensors.begin() + 3);
    frontend::write_npz((dir / "stored.npz").string(), few, frontend::NpzCompression::Stored);
    frontend::write_npz((dir / "deflated.npz").string(), few, frontend::NpzCompression::Deflated);
    frontend::write_npz((dir / "every.npz").string(), tensors, frontend::NpzCompression::Deflated);
}

void write_seeds(const fs::path &dir) {
    const std::vector<std::string> targets = {"vpu27", "vpu20"};
    fs::create_directories(dir / "blob");
    fs::create_directories(dir / "blob_small");
    fs::create_directories(dir / "target");
    fs::create_directories(dir / "schedules_file");
    ScheduleSeeds schedules(dir);
    schedules.add(every_directive());
    write_schedules_file(dir / "schedules_file" / "every-directive.json",
                         {{"conv1", every_directive()}});

    std::mt19937 rng(1);
    for (const std::string &target_name : targets) {
        const target::Target target = target::load_target(target_name);
        write_text(dir / "target" / (target_name + ".canonical.json"), target.description_json);
        for (const std::string &network : fuzz::seed_network_names()) {
            dsl::Graph graph = fuzz::seed_network(network);
            std::map<std::string, dsl::Schedule> lowered; // each layer's, own or default
            codegen::LowerOptions options;
            options.schedules = &lowered;
            const std::vector<uint8_t> bytes = codegen::lower(graph, target, options);
            const std::string file = network + "-" + target_name + ".vpub";
            blob::write_file((dir / "blob" / file).string(), bytes);
            if (network != "small_net")
                blob::write_file((dir / "blob_small" / file).string(), bytes);
            for (const dsl::Layer &layer : graph.layers()) {
                schedules.add(lowered.at(layer.name()));
                for (int i = 0; i < kRandomSchedulesPerLayer; ++i)
                    schedules.add(codegen::random_schedule(graph, layer, target, rng,
                                                           shave_layer(layer) ? dsl::Engine::SHAVE
                                                                              : dsl::Engine::DPU));
            }
            write_schedules_file(dir / "schedules_file" / (network + "-" + target_name + ".json"),
                                 lowered);
        }
    }
    write_tensor_file_seeds(dir / "tensor_file");
    write_onnx_seeds(dir / "onnx");
    for (const auto &file :
         fs::directory_iterator(fs::path(VPUC_SOURCE_DIR) / "vpu_target" / "targets"))
        fs::copy_file(file.path(), dir / "target" / file.path().filename(),
                      fs::copy_options::overwrite_existing);
}

} // namespace

int main(int argc, char **argv) {
    if (argc != 2) {
        std::fprintf(stderr, "usage: %s DIR\n", argv[0]);
        return 2;
    }
    try {
        write_seeds(argv[1]);
    } catch (const std::exception &e) {
        std::fprintf(stderr, "make_fuzz_seeds: %s\n", e.what());
        return 1;
    }
    return 0;
}
