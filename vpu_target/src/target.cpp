#include "vpu_target/target.h"

#include <system_error>

#include "json_fields.h"
#include "vpu_target/input_file.h"
#include "vpu_target/printable.h"

namespace vpuc::target {

// Generated at build time from vpu_target/targets/*.json.
extern const char *const kBundledTargetNames[];
extern const char *const kBundledTargetTexts[];
extern const int kBundledTargetCount;

const MpeMode *Target::find_mpe_mode(const std::string &mode_name) const {
    for (const auto &m : mpe_modes)
        if (m.name == mode_name) return &m;
    return nullptr;
}

int Target::shaves_available(int tile) const {
    (void)tile;
    return shaves_per_tile > 0 ? shaves_per_tile : shared_shaves;
}

int Target::macs_per_cycle(DType input) const {
    return input == DType::F16 ? fp16_macs_per_cycle : int8_macs_per_cycle;
}

Target parse_target(const std::string &text, const std::string &origin) {
    nlohmann::json doc;
    try {
        doc = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/true,
                                    /*ignore_comments=*/true);
    } catch (const nlohmann::json::exception &e) { // a syntax error, or a number out of range
        const std::string reason = printable(e.what(), detail::kMessageTextChars);
        throw TargetError(origin + ": not valid JSON: " + reason);
    }
    if (!doc.is_object()) throw TargetError(origin + ": the top level must be an object");
    detail::FieldReader root(doc, "", origin);

    Target t;
    t.name = root.string("name");
    t.description = root.string("description");
    t.tiles = int(root.integer("tiles", 1, 64));

    detail::FieldReader dpu = root.object("dpu");
    t.dpus_per_tile = int(dpu.integer("per_tile", 1, 16));
    t.int8_macs_per_cycle = int(dpu.integer("int8_macs_per_cycle", 1, 1 << 20));
    t.fp16_macs_per_cycle = int(dpu.integer("fp16_macs_per_cycle", 1, 1 << 20));
    if (t.fp16_macs_per_cycle > t.int8_macs_per_cycle)
        dpu.fail("fp16_macs_per_cycle", "must not exceed int8_macs_per_cycle");
    t.dpu_clock_mhz = dpu.real("clock_mhz", 1, 10000);
    t.channel_alignment = int(dpu.integer("channel_alignment", 1, 256));
    t.max_stride = int(dpu.integer("max_stride", 1, 64));
    t.max_kernel = int(dpu.integer("max_kernel", 1, 64));
    t.weight_table_entry_bytes = int(dpu.integer("weight_table_entry_bytes", 16, 16));
    const auto &modes = dpu.array("mpe_modes");
    detail::FieldReader mode_list(modes, dpu.field_path("mpe_modes"), origin);
    for (size_t i = 0; i < modes.size(); ++i) {
        detail::FieldReader mode = mode_list.element(i);
        MpeMode mm;
        mm.name = mode.string("name");
        mm.block_w = int(mode.integer("block_w", 1, 64));
        mm.block_h = int(mode.integer("block_h", 1, 64));
        mm.block_c = int(mode.integer("block_c", 1, 256));
        mm.int8 = mode.boolean("int8");
        mm.fp16 = mode.boolean("fp16");
        if (!mm.int8 && !mm.fp16) mode.fail("int8", "a mode must support int8 or fp16");
        if (t.find_mpe_mode(mm.name)) mode.fail("name", "duplicate MPE mode " + mm.name);
        t.mpe_modes.push_back(mm);
    }

    detail::FieldReader cmx = root.object("cmx");
    t.cmx_bytes_per_tile = uint64_t(cmx.integer("bytes_per_tile", 1024, int64_t(1) << 32));
    t.cmx_usable_bytes = uint64_t(cmx.integer("usable_bytes", 1024, int64_t(1) << 32));
    if (t.cmx_usable_bytes > t.cmx_bytes_per_tile)
        cmx.fail("usable_bytes", "must not exceed bytes_per_tile");
    t.cmx_clock_mhz = cmx.real("clock_mhz", 1, 10000);

    detail::FieldReader ddr = root.object("ddr");
    t.ddr_bytes = uint64_t(ddr.integer("bytes", 1 << 20, int64_t(1) << 36));
    t.ddr_bandwidth_gbps = ddr.real("bandwidth_gbps", 0.01, 10000);
    t.ddr_latency_ns = ddr.real("latency_ns", 0, 1e6);

    detail::FieldReader shave = root.object("shave");
    // Its timing coefficients are in "timing.shave".
    shave.only_keys({"per_tile", "shared", "vector_bits", "clock_mhz"});
    t.shaves_per_tile = int(shave.integer("per_tile", 0, 64));
    t.shared_shaves = int(shave.integer("shared", 0, 64));
    if (t.shaves_per_tile == 0 && t.shared_shaves == 0)
        shave.fail("per_tile", "the target needs SHAVEs per tile or shared SHAVEs");
    t.shave_vector_bits = int(shave.integer("vector_bits", 32, 2048));
    if (t.shave_vector_bits % 32 != 0) shave.fail("vector_bits", "must be a multiple of 32");
    t.shave_clock_mhz = shave.real("clock_mhz", 1, 10000);

    detail::FieldReader dma = root.object("dma");
    t.dma_engines = int(dma.integer("engines", 1, 16));
    t.dma_clock_mhz = dma.real("clock_mhz", 1, 10000);
    t.dma_engine_bytes_per_cycle = dma.real("engine_bytes_per_cycle", 1, 4096);

    t.barriers = int(root.integer("barriers", 2, 4096));
    detail::parse_timing_section(root.object("timing"), t);
    t.description_json = doc.dump();
    t.description_sha256 = blob::sha256(t.description_json.data(), t.description_json.size());
    return t;
}

std::vector<std::string> bundled_target_names() {
    return std::vector<std::string>(kBundledTargetNames, kBundledTargetNames + kBundledTargetCount);
}

Target load_target(const std::string &name_or_path) {
    for (int i = 0; i < kBundledTargetCount; ++i)
        if (name_or_path == kBundledTargetNames[i])
            return parse_target(kBundledTargetTexts[i], name_or_path + ".json");
    std::string text;
    try {
        text = files::read_text_file(name_or_path, files::FileKind::Target);
    } catch (const files::InputFileError &e) {
        if (e.code() != std::errc::no_such_file_or_directory) throw TargetError(e.what());
        std::string known;
        for (const auto &n : bundled_target_names()) known += (known.empty() ? "" : ", ") + n;
        throw TargetError("unknown target '" + name_or_path + "': not a bundled target (" + known +
                          ") and no such file");
    }
    return parse_target(text, name_or_path);
}

} // namespace vpuc::target
