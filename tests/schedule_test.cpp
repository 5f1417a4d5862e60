// The schedule as data: printing and parsing the chain back, JSON round trips, and the errors
// malformed chains and JSON get.
#include <gtest/gtest.h>

#include "dsl/schedule.h"

using namespace vpuc::dsl;

namespace {

// One directive of every kind, with every strategy and memory level somewhere.
Schedule every_kind() {
    Schedule s;
    s.split("y", "yo", "yi", 8)
        .split("x", "xo", "xi", {4, 12, 8})
        .tile("x", "yi", "xo", "yio", "xi", "yii", 16, 4)
        .reorder({"xi", "yii", "c"})
        .fuse("xi", "yii", "f")
        .unroll("f")
        .vectorize("c", 16)
        .compute_root()
        .compute_at("conv2", "yo")
        .store_in(MemoryLevel::CMX)
        .store_in(MemoryLevel::DDR)
        .on_dpu("CUBOID_16x16")
        .on_dpu()
        .on_shave()
        .workloads("c", 4)
        .distribute("yo", 2, Strategy::SplitOverHeight)
        .distribute("c", 2, Strategy::SplitOverKernel)
        .distribute("yo", 2, Strategy::Clustering)
        .distribute("yo", 2, Strategy::HKSwitch)
        .prefetch(1)
        .spill();
    return s;
}

// Reading `text` with `read` (Schedule::from_json or Schedule::parse) throws `message`.
void expect_read_error(Schedule (*read)(const std::string &), const std::string &text,
                       const std::string &message) {
    try {
        read(text);
        ADD_FAILURE() << "no error for " << text;
    } catch (const ScheduleError &e) {
        EXPECT_EQ(e.what(), message);
    }
}

void expect_json_error(const std::string &text, const std::string &message) {
    expect_read_error(&Schedule::from_json, text, message);
}

void expect_parse_error(const std::string &text, const std::string &message) {
    expect_read_error(&Schedule::parse, text, message);
}

} // namespace

TEST(Schedule, PrintsEveryDirective) {
    Schedule s = every_kind();
    std::vector<std::string> printed;
    for (const Directive &d : s.directives()) printed.push_back(d.to_string());
    std::vector<std::string> expected = {
        "split(y, yo, yi, 8)",
        "split(x, xo, xi, {4, 12, 8})",
        "tile(x, yi, xo, yio, xi, yii, 16, 4)",
        "reorder(xi, yii, c)",
        "fuse(xi, yii, f)",
        "unroll(f)",
        "vectorize(c, 16)",
        "compute_root()",
        "compute_at(conv2, yo)",
        "store_in(CMX)",
        "store_in(DDR)",
        "on_dpu(CUBOID_16x16)",
        "on_dpu()",
        "on_shave()",
        "workloads(c, 4)",
        "distribute(yo, 2, SOH)",
        "distribute(c, 2, SOK)",
        "distribute(yo, 2, Clustering)",
        "distribute(yo, 2, HKSwitch)",
        "prefetch(1)",
        "spill()",
    };
    EXPECT_EQ(printed, expected);
}

TEST(Schedule, PrintsAsAChain) {
    Schedule s;
    EXPECT_EQ(s.to_string(), "");
    s.split("y", "yo", "yi", 8).on_dpu("CUBOID_16x16").prefetch(1);
    EXPECT_EQ(s.to_string(), "split(y, yo, yi, 8).on_dpu(CUBOID_16x16).prefetch(1)");
}

TEST(Schedule, EnumNames) {
    EXPECT_STREQ(to_string(MemoryLevel::CMX), "CMX");
    EXPECT_STREQ(to_string(MemoryLevel::DDR), "DDR");
    EXPECT_STREQ(to_string(Strategy::SplitOverHeight), "SOH");
    EXPECT_STREQ(to_string(Strategy::SplitOverKernel), "SOK");
    EXPECT_STREQ(to_string(Strategy::Clustering), "Clustering");
    EXPECT_STREQ(to_string(Strategy::HKSwitch), "HKSwitch");
    EXPECT_STREQ(to_string(Directive::Kind::ComputeAt), "compute_at");
    EXPECT_STREQ(to_string(Directive::Kind::OnShave), "on_shave");
}

TEST(Schedule, JsonRoundTripIsExactForEveryKind) {
    Schedule s = every_kind();
    Schedule back = Schedule::from_json(s.to_json());
    EXPECT_EQ(back, s);
    EXPECT_EQ(back.to_json(), s.to_json());
    EXPECT_EQ(Schedule::from_json(Schedule().to_json()), Schedule());
}

TEST(Schedule, PrintedChainParsesBackForEveryKind) {
    Schedule s = every_kind();
    EXPECT_EQ(Schedule::parse(s.to_string()), s);
    EXPECT_EQ(Schedule::parse(""), Schedule());
    EXPECT_EQ(Schedule::parse(" split( y,yo , yi,{4,12 , 8} ) .\n prefetch(1) "),
              Schedule().split("y", "yo", "yi", {4, 12, 8}).prefetch(1));
    EXPECT_EQ(Schedule::parse("split(y, yo, yi, {8})"), Schedule().split("y", "yo", "yi", 8));
    EXPECT_EQ(Schedule::parse("compute_at(block1/conv.0, yo)"),
              Schedule().compute_at("block1/conv.0", "yo"));
}

TEST(Schedule, ParseErrorsNameTheDirectiveAndWhatIsWrong) {
    expect_parse_error("splt(y, yo, yi, 8)",
                       "schedule 'splt(y, yo, yi, 8)', at character 5 (splt): unknown directive "
                       "'splt' (legal: split, tile, reorder, fuse, unroll, vectorize, "
                       "compute_root, compute_at, store_in, on_dpu, on_shave, workloads, "
                       "distribute, prefetch, spill)");
    expect_parse_error("prefetch(1) on_dpu()",
                       "schedule 'prefetch(1) on_dpu()', at character 13: expected '.', found 'o'");
    expect_parse_error("split(y, yo, yi, eight)",
                       "schedule 'split(y, yo, yi, eight)', at character 24 (split): 'eight' is "
                       "not an integer");
    expect_parse_error("split(y, yo, yi)",
                       "schedule 'split(y, yo, yi)', at character 17 (split): missing a number");
    expect_parse_error("split(y, yo, {4, 8}, 8)",
                       "schedule 'split(y, yo, {4, 8}, 8)', at character 24 (split): expected a "
                       "loop name, found a {list}");
    expect_parse_error("prefetch(1, 2)",
                       "schedule 'prefetch(1, 2)', at character 15 (prefetch): too many "
                       "arguments (2, expected 1)");
    expect_parse_error("distribute(y, 2, SOX)",
                       "schedule 'distribute(y, 2, SOX)', at character 22 (distribute): 'SOX' is "
                       "not one of SOH, SOK, Clustering, HKSwitch");
    expect_parse_error("split(y, yo, yi, {})",
                       "schedule 'split(y, yo, yi, {})', at character 19 (split): expected a name "
                       "or a number");
    expect_parse_error("prefetch(1",
                       "schedule 'prefetch(1', at character 11 (prefetch): expected ')' at the "
                       "end");
}

// A chain may hold any bytes in a name, JSON only UTF-8: to_json writes U+FFFD for the rest
// rather than throw (found by fuzzing), and UTF-8 names round-trip.
TEST(Schedule, JsonOfANameThatIsNotUtf8) {
    const Schedule raw = Schedule::parse("compute_at(conv\xff\xc3, yo)");
    EXPECT_EQ(Schedule::from_json(raw.to_json()),
              Schedule().compute_at("conv\xef\xbf\xbd\xef\xbf\xbd", "yo"));
    const Schedule accented = Schedule::parse("compute_at(conv_\xc3\xa9, y\xe2\x82\xac)");
    EXPECT_EQ(Schedule::from_json(accented.to_json()), accented);
}

TEST(Schedule, JsonHasOnlyTheFieldsADirectiveUses) {
    Schedule s;
    s.split("y", "yo", "yi", 8)
        .compute_at("conv2", "yo")
        .store_in(MemoryLevel::CMX)
        .on_dpu()
        .distribute("yo", 2, Strategy::SplitOverKernel)
        .spill();
    EXPECT_EQ(s.to_json(), R"([
  {"directive":"split","loops":["y","yo","yi"],"factors":[8]},
  {"directive":"compute_at","loops":["yo"],"name":"conv2"},
  {"directive":"store_in","memory":"CMX"},
  {"directive":"on_dpu","name":""},
  {"directive":"distribute","loops":["yo"],"factors":[2],"strategy":"SOK"},
  {"directive":"spill"}
])");
}

TEST(Schedule, EqualityComparesEveryField) {
    Schedule a, b;
    a.split("y", "yo", "yi", 8);
    b.split("y", "yo", "yi", 4);
    EXPECT_NE(a, b);
    EXPECT_NE(Schedule().distribute("y", 2, Strategy::SplitOverHeight),
              Schedule().distribute("y", 2, Strategy::HKSwitch));
}

TEST(Schedule, AddRejectsMalformedDirectives) {
    Directive d;
    d.kind = Directive::Kind::Split;
    d.loops = {"y", "yo"};
    d.factors = {8};
    try {
        Schedule().add(d);
        ADD_FAILURE() << "no error";
    } catch (const ScheduleError &e) {
        EXPECT_STREQ(e.what(), "Schedule::add(split): 'loops' must be an array of 3 strings");
    }
}

// Fields a kind does not use cannot make equal-looking schedules differ.
TEST(Schedule, AddResetsUnusedFields) {
    Directive d;
    d.kind = Directive::Kind::Spill;
    d.name = "ignored";
    d.memory = MemoryLevel::CMX;
    d.strategy = Strategy::HKSwitch;
    Schedule s;
    s.add(d);
    EXPECT_EQ(s, Schedule().spill());
}

TEST(ScheduleJson, MalformedText) {
    // nlohmann's own wording follows the prefix; only the prefix is ours.
    try {
        Schedule::from_json("[");
        ADD_FAILURE() << "no error";
    } catch (const ScheduleError &e) {
        EXPECT_EQ(std::string(e.what()).rfind("schedule JSON: ", 0), 0u) << e.what();
        EXPECT_NE(std::string(e.what()).find("parse error"), std::string::npos) << e.what();
    }
    expect_json_error(R"({"directive":"spill"})", "schedule JSON: not an array of directives");
}

TEST(ScheduleJson, EntryNotAnObject) {
    expect_json_error(R"([{"directive":"spill"}, 3])",
                      "schedule JSON entry 1: not an object (each entry is {\"directive\": "
                      "\"split\", ...})");
}

TEST(ScheduleJson, MissingDirective) {
    expect_json_error(R"([{"loops":["y"]}])",
                      "schedule JSON entry 0: 'directive' must be a string");
    expect_json_error(R"([{"directive":7}])",
                      "schedule JSON entry 0: 'directive' must be a string");
}

TEST(ScheduleJson, UnknownDirective) {
    expect_json_error(R"([{"directive":"parallel"}])",
                      "schedule JSON entry 0: unknown directive 'parallel' (legal: split, tile, "
                      "reorder, fuse, unroll, vectorize, compute_root, compute_at, store_in, "
                      "on_dpu, on_shave, workloads, distribute, prefetch, spill)");
}

TEST(ScheduleJson, UnexpectedField) {
    expect_json_error(R"([{"directive":"spill","loops":["x"]}])",
                      "schedule JSON entry 0 (spill): unexpected field 'loops' (fields: "
                      "directive)");
    expect_json_error(R"([{"directive":"split","loops":["y","yo","yi"],"factors":[8],"name":"a"}])",
                      "schedule JSON entry 0 (split): unexpected field 'name' (fields: directive, "
                      "loops, factors)");
}

TEST(ScheduleJson, Loops) {
    expect_json_error(R"([{"directive":"split","loops":["y","yo"],"factors":[8]}])",
                      "schedule JSON entry 0 (split): 'loops' must be an array of 3 strings");
    expect_json_error(R"([{"directive":"unroll","loops":[1]}])",
                      "schedule JSON entry 0 (unroll): 'loops' must be an array of 1 string");
    expect_json_error(R"([{"directive":"unroll"}])",
                      "schedule JSON entry 0 (unroll): 'loops' must be an array of 1 string");
    expect_json_error(R"([{"directive":"reorder","loops":[]}])",
                      "schedule JSON entry 0 (reorder): 'loops' must be a non-empty array of "
                      "strings");
}

TEST(ScheduleJson, Factors) {
    expect_json_error(R"([{"directive":"spill"}, {"directive":"spill"},
                          {"directive":"split","loops":["y","yo","yi"],"factors":[]}])",
                      "schedule JSON entry 2 (split): 'factors' must be a non-empty array of "
                      "integers");
    expect_json_error(R"([{"directive":"split","loops":["y","yo","yi"],"factors":[8, 8.5]}])",
                      "schedule JSON entry 0 (split): 'factors' must be a non-empty array of "
                      "integers");
    expect_json_error(R"([{"directive":"split","loops":["y","yo","yi"],"factors":"8"}])",
                      "schedule JSON entry 0 (split): 'factors' must be a non-empty array of "
                      "integers");
    expect_json_error(R"([{"directive":"vectorize","loops":["c"],"factors":[8, 2]}])",
                      "schedule JSON entry 0 (vectorize): 'factors' must be an array of 1 "
                      "integer");
    expect_json_error(R"([{"directive":"prefetch","factors":[18446744073709551615]}])",
                      "schedule JSON entry 0 (prefetch): 'factors' must be an array of 1 "
                      "integer");
    expect_json_error(R"([{"directive":"tile","loops":["x","y","xo","yo","xi","yi"],
                           "factors":[8]}])",
                      "schedule JSON entry 0 (tile): 'factors' must be an array of 2 integers");
}

TEST(ScheduleJson, Name) {
    expect_json_error(R"([{"directive":"compute_at","loops":["yo"]}])",
                      "schedule JSON entry 0 (compute_at): 'name' must be a non-empty string");
    expect_json_error(R"([{"directive":"compute_at","loops":["yo"],"name":""}])",
                      "schedule JSON entry 0 (compute_at): 'name' must be a non-empty string");
    expect_json_error(R"([{"directive":"on_dpu","name":3}])",
                      "schedule JSON entry 0 (on_dpu): 'name' must be a string");
}

TEST(ScheduleJson, MemoryAndStrategy) {
    expect_json_error(R"([{"directive":"store_in","memory":"SRAM"}])",
                      "schedule JSON entry 0 (store_in): 'memory' must be one of CMX, DDR");
    expect_json_error(R"([{"directive":"distribute","loops":["y"],"factors":[2]}])",
                      "schedule JSON entry 0 (distribute): 'strategy' must be one of SOH, SOK, "
                      "Clustering, HKSwitch");
}
