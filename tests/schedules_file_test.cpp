// The schedules file of `vpuc compile --schedules` (dsl/schedules_file.h): what it reads, and
// one test per message it refuses a file with.
#include <gtest/gtest.h>

#include <string>

#include "dsl/schedules_file.h"

namespace {

using namespace vpuc::dsl;

std::map<std::string, Schedule> parse(const std::string &text) {
    return parse_schedules_file(std::vector<uint8_t>(text.begin(), text.end()), "s.json");
}

// The message parse() throws for `text`.
std::string error_of(const std::string &text) {
    try {
        parse(text);
    } catch (const ScheduleError &e) {
        return e.what();
    }
    ADD_FAILURE() << "accepted: " << text;
    return "";
}

TEST(SchedulesFile, ReadsEachLayersSchedule) {
    Schedule conv;
    conv.split("y", "yo", "yi", 8).on_dpu();
    const auto schedules =
        parse("{\"conv1\": " + conv.to_json() + ", \"relu1\": [], \"\\u00e9\": []}");
    ASSERT_EQ(schedules.size(), 3u);
    EXPECT_EQ(schedules.at("conv1"), conv);
    EXPECT_TRUE(schedules.at("relu1").empty());
    EXPECT_TRUE(schedules.at("\xc3\xa9").empty());
    EXPECT_TRUE(parse("{}").empty());
}

TEST(SchedulesFile, RefusesWhatIsNotJson) {
    EXPECT_EQ(error_of("{\"conv1\": [}").rfind("schedules file 's.json': not JSON: ", 0), 0u);
    EXPECT_EQ(error_of("").rfind("schedules file 's.json': not JSON: ", 0), 0u);
}

TEST(SchedulesFile, RefusesJsonThatIsNotAnObject) {
    EXPECT_EQ(error_of("[]"),
              "schedules file 's.json': not a JSON object of layer names to schedules");
}

TEST(SchedulesFile, RefusesALayerGivenTwice) {
    EXPECT_EQ(error_of("{\"conv1\": [], \"relu1\": [], \"conv1\": []}"),
              "schedules file 's.json': layer 'conv1' is given twice");
}

TEST(SchedulesFile, RefusesDeepNesting) {
    const std::string deep =
        "{\"conv1\": " + std::string(100000, '[') + std::string(100000, ']') + "}";
    EXPECT_EQ(error_of(deep), "schedules file 's.json': nested deeper than 16 levels; a "
                              "schedule nests 4");
}

TEST(SchedulesFile, NamesTheLayerOfABadSchedule) {
    EXPECT_EQ(error_of("{\"conv1\": {}}"),
              "schedules file 's.json': layer 'conv1': schedule JSON: not an array of directives");
}

} // namespace
