// The conformance runner (frontend/conformance.h): each way a test can end, on tiny generated
// tests, then the whole of libonnx-testdata, whose counts must be the table of
// docs/conformance.md.
#include <gtest/gtest.h>
#include <onnx/onnx_pb.h>

#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>

#include "codegen/lower.h"
#include "frontend/conformance.h"
#include "frontend/onnx_import.h"

using namespace vpuc;
namespace fs = std::filesystem;

namespace {

const std::string kTestData = "/usr/share/libonnx-testdata/data";

frontend::ConformanceOptions lowering_options() {
    frontend::ConformanceOptions options;
    options.compile = [](const dsl::Graph &graph, const target::Target &target) {
        return codegen::lower(graph, target);
    };
    return options;
}

const std::vector<int64_t> kShape = {1, 16, 4, 4};

void set_shape(onnx::ValueInfoProto &v, const std::string &name,
               const std::vector<int64_t> &shape) {
    v.set_name(name);
    onnx::TypeProto_Tensor &t = *v.mutable_type()->mutable_tensor_type();
    t.set_elem_type(onnx::TensorProto::FLOAT);
    for (int64_t d : shape) t.mutable_shape()->add_dim()->set_dim_value(d);
}

// y = op(x) over a 1x16x4x4 float input.
onnx::ModelProto unary_model(const std::string &op, const std::string &domain = "") {
    onnx::ModelProto m;
    m.set_ir_version(8);
    m.add_opset_import()->set_version(13);
    if (!domain.empty()) {
        onnx::OperatorSetIdProto &set = *m.add_opset_import();
        set.set_domain(domain);
        set.set_version(1);
    }
    onnx::GraphProto &g = *m.mutable_graph();
    g.set_name("unary");
    set_shape(*g.add_input(), "x", kShape);
    onnx::NodeProto &node = *g.add_node();
    node.set_op_type(op);
    node.set_domain(domain);
    node.add_input("x");
    node.add_output("y");
    set_shape(*g.add_output(), "y", kShape);
    return m;
}

onnx::TensorProto float_tensor(const std::vector<float> &values) {
    onnx::TensorProto t;
    t.set_data_type(onnx::TensorProto::FLOAT);
    for (int64_t d : kShape) t.add_dims(d);
    for (float v : values) t.add_float_data(v);
    return t;
}

void write(const fs::path &file, const google::protobuf::MessageLite &message) {
    std::ofstream out(file, std::ios::binary);
    ASSERT_TRUE(message.SerializeToOstream(&out)) << file;
}

// A test directory under a fresh temporary directory: the model, and one data set of input x
// and expected output y (none when empty).
class GeneratedTest : public ::testing::Test {
  protected:
    void SetUp() override {
        root_ = fs::temp_directory_path() /
                ("vpuc_conformance_" + std::to_string(::getpid()) + "_" +
                 ::testing::UnitTest::GetInstance()->current_test_info()->name());
        fs::remove_all(root_);
        fs::create_directories(root_ / "suite" / "test_generated" / "test_data_set_0");
    }
    void TearDown() override { fs::remove_all(root_); }

    frontend::ConformanceTest make(const onnx::ModelProto &model, const std::vector<float> &x,
                                   const std::vector<float> &y) {
        const fs::path dir = root_ / "suite" / "test_generated";
        write(dir / "model.onnx", model);
        if (!x.empty()) write(dir / "test_data_set_0" / "input_0.pb", float_tensor(x));
        if (!y.empty()) write(dir / "test_data_set_0" / "output_0.pb", float_tensor(y));
        const std::vector<frontend::ConformanceTest> tests =
            frontend::discover_conformance_tests(root_.string());
        EXPECT_EQ(tests.size(), 1u);
        EXPECT_EQ(tests.at(0).name, "suite/test_generated");
        return tests.at(0);
    }

    fs::path root_;
};

// Values from -1 to 1 and their rectified ones.
std::vector<float> ramp() {
    std::vector<float> v;
    for (int i = 0; i < 256; ++i) v.push_back(float(i - 128) / 128);
    return v;
}
std::vector<float> relu(std::vector<float> v) {
    for (float &x : v) x = std::max(x, 0.0f);
    return v;
}

TEST_F(GeneratedTest, AReluWithItsExpectedOutputPasses) {
    const frontend::ConformanceResult r = frontend::run_conformance_test(
        make(unary_model("Relu"), ramp(), relu(ramp())), lowering_options());
    EXPECT_EQ(r.outcome, frontend::Outcome::Passed) << r.reason;
    EXPECT_EQ(r.ops, std::vector<std::string>{"Relu"});
    EXPECT_EQ(r.reason, "");
}

TEST_F(GeneratedTest, AnOutputOutsideTheToleranceFailsTheComparison) {
    const frontend::ConformanceTest test = make(unary_model("Relu"), ramp(), ramp());
    const frontend::ConformanceResult r = frontend::run_conformance_test(test, lowering_options());
    EXPECT_EQ(r.outcome, frontend::Outcome::Failed);
    EXPECT_EQ(r.stage, frontend::Stage::Compare);
    EXPECT_NE(r.reason.find("not within the tolerance: output 'y': 127 of 256 elements"),
              std::string::npos)
        << r.reason;
    EXPECT_EQ(frontend::failure_cause(r, test.directory), "compare: not within the tolerance");
}

TEST_F(GeneratedTest, AnOpOfAnotherDomainIsUnsupportedAndDoesNotRun) {
    const frontend::ConformanceResult r = frontend::run_conformance_test(
        make(unary_model("Frobnicate", "com.example"), ramp(), ramp()), lowering_options());
    EXPECT_EQ(r.outcome, frontend::Outcome::Unsupported);
    EXPECT_EQ(r.stage, frontend::Stage::UnlistedOp);
    EXPECT_EQ(r.reason, "ops not listed: com.example:Frobnicate");
}

TEST_F(GeneratedTest, WhatTheImporterRefusesOfAListedOpIsAFailure) {
    onnx::ModelProto model = unary_model("Relu");
    model.mutable_graph()
        ->mutable_input(0)
        ->mutable_type()
        ->mutable_tensor_type()
        ->mutable_shape()
        ->mutable_dim(0)
        ->set_dim_param("batch");
    // No input value: a known one would make the input a constant.
    const frontend::ConformanceTest test = make(model, {}, relu(ramp()));
    const frontend::ConformanceResult r = frontend::run_conformance_test(test, lowering_options());
    EXPECT_EQ(r.outcome, frontend::Outcome::Failed);
    EXPECT_EQ(r.stage, frontend::Stage::Unsupported);
    EXPECT_NE(r.reason.find("graph input 'x': dimension 0 is 'batch', not a fixed extent"),
              std::string::npos)
        << r.reason;
    EXPECT_EQ(frontend::failure_cause(r, test.directory),
              "unsupported by the importer: graph input '...': dimension N is 'batch', not a fixed "
              "extent");
}

TEST_F(GeneratedTest, ACompileErrorIsAFailureWithItsMessage) {
    frontend::ConformanceOptions options = lowering_options();
    options.compile = [](const dsl::Graph &, const target::Target &) -> std::vector<uint8_t> {
        throw codegen::LoweringError("layer 'y': no schedule fits");
    };
    const frontend::ConformanceResult r =
        frontend::run_conformance_test(make(unary_model("Relu"), ramp(), relu(ramp())), options);
    EXPECT_EQ(r.outcome, frontend::Outcome::Failed);
    EXPECT_EQ(r.stage, frontend::Stage::Compile);
    EXPECT_EQ(r.reason, "layer 'y': no schedule fits");
}

TEST_F(GeneratedTest, ATestLargerThanTheLimitFailsWithoutRunning) {
    frontend::ConformanceOptions options = lowering_options();
    options.max_test_bytes = 1024;
    const frontend::ConformanceResult r =
        frontend::run_conformance_test(make(unary_model("Relu"), ramp(), relu(ramp())), options);
    EXPECT_EQ(r.outcome, frontend::Outcome::Failed);
    EXPECT_EQ(r.stage, frontend::Stage::TooLarge);
    EXPECT_NE(r.reason.find("more than the limit of 1 KiB"), std::string::npos) << r.reason;
}

TEST_F(GeneratedTest, MissingOrBadTestDataIsAFailureNamingTheFile) {
    const frontend::ConformanceTest test = make(unary_model("Relu"), ramp(), relu(ramp()));
    std::ofstream(fs::path(test.directory) / "test_data_set_0" / "output_0.pb") << "\xff\xff";
    const frontend::ConformanceResult r = frontend::run_conformance_test(test, lowering_options());
    EXPECT_EQ(r.outcome, frontend::Outcome::Failed);
    EXPECT_EQ(r.stage, frontend::Stage::TestData);
    EXPECT_NE(r.reason.find("output_0.pb: not a TensorProto"), std::string::npos) << r.reason;

    std::ofstream(fs::path(test.directory) / "model.onnx") << "not a model";
    const frontend::ConformanceResult model =
        frontend::run_conformance_test(test, lowering_options());
    EXPECT_EQ(model.stage, frontend::Stage::TestData);
    EXPECT_NE(model.reason.find("model.onnx: not an ONNX model (does not parse)"),
              std::string::npos)
        << model.reason;

    write(fs::path(test.directory) / "model.onnx", unary_model("Relu"));
    fs::remove_all(fs::path(test.directory) / "test_data_set_0");
    const frontend::ConformanceResult none =
        frontend::run_conformance_test(test, lowering_options());
    EXPECT_EQ(none.stage, frontend::Stage::TestData);
    EXPECT_NE(none.reason.find("no test_data_set_N directory"), std::string::npos) << none.reason;
}

TEST(Conformance, ADirectoryWithoutTestsIsAnError) {
    const fs::path empty =
        fs::temp_directory_path() / ("vpuc_no_tests_" + std::to_string(getpid()));
    fs::create_directories(empty / "suite");
    EXPECT_THROW(frontend::discover_conformance_tests(empty.string()), frontend::ConformanceError);
    fs::remove_all(empty);
    EXPECT_THROW(frontend::discover_conformance_tests(empty.string()), frontend::ConformanceError);
}

TEST(Conformance, ATestCountsTowardEachOfItsOpsAndOnceInTheTotal) {
    const auto result = [](const std::string &name, std::vector<std::string> ops,
                           frontend::Outcome outcome, frontend::Stage stage,
                           const std::string &reason) {
        frontend::ConformanceResult r;
        r.name = name;
        r.ops = std::move(ops);
        r.outcome = outcome;
        r.stage = stage;
        r.reason = reason;
        return r;
    };
    const frontend::ConformanceResult conv_relu =
        result("a", {"Conv", "Relu"}, frontend::Outcome::Passed, frontend::Stage::None, "");
    const frontend::ConformanceResult relu = result("b", {"Relu"}, frontend::Outcome::Failed,
                                                    frontend::Stage::Compile, "layer 'b': too big");
    const frontend::ConformanceResult unlisted =
        result("c", {"Frobnicate", "Relu"}, frontend::Outcome::Unsupported,
               frontend::Stage::UnlistedOp, "ops not listed: Frobnicate");
    const frontend::ConformanceSummary s =
        frontend::summarize_conformance({conv_relu, relu, unlisted}, {});
    EXPECT_EQ(s.listed.at("Conv").passed, 1);
    EXPECT_EQ(s.listed.at("Relu").passed, 1);
    EXPECT_EQ(s.listed.at("Relu").failed, 1);
    EXPECT_EQ(s.listed.at("Relu").unsupported, 1);
    EXPECT_EQ(s.listed.at("Relu").failure_causes.at("compile: layer '...': too big"), 1);
    EXPECT_EQ(s.unlisted.at("Frobnicate"), 1);
    EXPECT_EQ(s.total.passed + s.total.failed + s.total.unsupported, 3);
    EXPECT_DOUBLE_EQ(s.pass_rate(), 0.5);
    EXPECT_NE(frontend::conformance_markdown(s).find("| Relu | 3 | 1 | 1 | 1 | compile: layer "
                                                     "'...': too big (1) |"),
              std::string::npos);
}

// Tests run on several threads give what they give one at a time.
TEST(Conformance, ParallelRunsGiveTheResultsOfASerialOne) {
    std::vector<frontend::ConformanceTest> tests;
    for (const frontend::ConformanceTest &t : frontend::discover_conformance_tests(kTestData))
        if (t.name.find("test_conv") != std::string::npos ||
            t.name.find("test_add") != std::string::npos ||
            t.name.find("Conv2d") != std::string::npos)
            tests.push_back(t);
    ASSERT_GT(tests.size(), 10u);
    const auto serial = frontend::run_conformance_tests(tests, lowering_options(), 1, {});
    const auto parallel = frontend::run_conformance_tests(tests, lowering_options(), 3, {});
    ASSERT_EQ(serial.size(), parallel.size());
    for (size_t i = 0; i < serial.size(); ++i) {
        EXPECT_EQ(serial[i].name, parallel[i].name);
        EXPECT_EQ(serial[i].outcome, parallel[i].outcome) << serial[i].name;
        EXPECT_EQ(serial[i].reason, parallel[i].reason) << serial[i].name;
    }
}

// Per op (and "**total**"): passed, failed, unsupported.
using Counts = std::map<std::string, std::array<int, 3>>;

// The counts of a table conformance_markdown printed, and its list of ops not listed.
std::pair<Counts, std::string> parse_table(const std::string &markdown) {
    static const std::regex row(R"(^\| ([^ |]+) \| (\d+) \| (\d+) \| (\d+) \| (\d+) \|)");
    Counts counts;
    std::string unlisted;
    std::istringstream in(markdown);
    for (std::string line; std::getline(in, line);) {
        std::smatch m;
        if (std::regex_search(line, m, row))
            counts[m[1]] = {std::stoi(m[3]), std::stoi(m[4]), std::stoi(m[5])};
        else if (line.rfind("Ops not listed", 0) == 0)
            unlisted = line;
    }
    return {counts, unlisted};
}

// The table of docs/conformance.md is what running the suite gives (`vpuc conformance` prints
// the same table): an op's counts cannot change without the page saying so.
TEST(Conformance, TheWholeSuiteGivesTheTableOfTheDocs) {
    std::ifstream doc(std::string(VPUC_SOURCE_DIR) + "/docs/conformance.md");
    ASSERT_TRUE(doc) << "docs/conformance.md";
    const std::string text((std::istreambuf_iterator<char>(doc)), std::istreambuf_iterator<char>());
    const auto [documented, documented_unlisted] = parse_table(text);
    ASSERT_GT(documented.size(), 10u) << "docs/conformance.md holds no table of op counts";

    const std::vector<frontend::ConformanceTest> tests =
        frontend::discover_conformance_tests(kTestData);
    const std::vector<frontend::ConformanceResult> results =
        frontend::run_conformance_tests(tests, lowering_options(), 2, {});
    const std::string markdown =
        frontend::conformance_markdown(frontend::summarize_conformance(results, tests));
    const auto [measured, measured_unlisted] = parse_table(markdown);
    std::string differ;
    for (const auto &[op, counts] : measured) {
        const auto found = documented.find(op);
        if (found == documented.end())
            differ += " " + op + " (missing)";
        else if (found->second != counts)
            differ += " " + op;
    }
    for (const auto &[op, counts] : documented)
        if (!measured.count(op)) differ += " " + op + " (not listed any more)";
    if (measured_unlisted != documented_unlisted) differ += " (the ops not listed)";
    EXPECT_EQ(differ, "") << "docs/conformance.md's table differs from the suite's counts; run "
                             "`vpuc conformance --jobs 2` and paste its table:\n"
                          << markdown;
    // The reasons for failures too, word for word.
    EXPECT_NE(text.find(markdown), std::string::npos)
        << "docs/conformance.md's table is not the one the suite prints; paste:\n"
        << markdown;
}

} // namespace
