// The runner's decisions that need no child process: which tests a filter,
// profile or shard selects, what it takes from the environment, and which
// requirements a failed check is charged to.
#include <gtest/gtest.h>

#include <cstdlib>
#include <set>

#include "inherited_settings.hpp"
#include "result_collector.hpp"
#include "test_selection.hpp"

namespace ortmem::cts {
namespace {

TEST(Filter, HasGoogleTestsMeaning) {
  EXPECT_TRUE(filter_selects("*", "Adapters/Pins.A/host"));
  EXPECT_TRUE(filter_selects("", "Adapters/Pins.A/host")) << "an empty positive part means *";
  EXPECT_TRUE(filter_selects("*Pins*:*Owning*", "Adapters/Owning.B/host"));
  EXPECT_FALSE(filter_selects("*Pins*-*.A/*", "Adapters/Pins.A/host"));
  EXPECT_TRUE(filter_selects("-*Owning*", "Adapters/Pins.A/host"));
  EXPECT_FALSE(filter_selects("-*Owning*:*Pins*", "Adapters/Pins.A/host"));
  EXPECT_TRUE(filter_selects("Adapters/Pins.?/host", "Adapters/Pins.A/host"));
  EXPECT_FALSE(filter_selects("Adapters/Pins.?/host", "Adapters/Pins.AB/host"));
  EXPECT_FALSE(filter_selects("Adapters/Pins.A", "Adapters/Pins.A/host")) << "a glob matches the whole name";
}

TEST(Filter, GlobsMatchLikeTheTextbook) {
  EXPECT_TRUE(glob_matches("", ""));
  EXPECT_FALSE(glob_matches("", "a"));
  EXPECT_TRUE(glob_matches("***", ""));
  EXPECT_TRUE(glob_matches("a*b*c", "aXbYbZc"));
  EXPECT_FALSE(glob_matches("a*b*c", "aXbYbZ"));
  EXPECT_TRUE(glob_matches("*ab", "aab"));
  EXPECT_TRUE(glob_matches("*a?", "xaab"));
}

TEST(Filter, APathologicalGlobIsAnsweredWithoutBacktrackingBlowUp) {
  // Exponential backtracking takes minutes here (the ctest timeout catches it);
  // the matcher answers in microseconds.
  const std::string name(200, 'a');
  EXPECT_FALSE(glob_matches("*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*b", name));
  EXPECT_TRUE(glob_matches("*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a", name));
}

TEST(Shard, OnlyIOfNWithIBelowNIsAShard) {
  EXPECT_EQ(parse_shard("1/2")->index, 1);
  EXPECT_EQ(parse_shard("0/1")->count, 1);
  for (const char* bad : {"2/2", "-1/2", "1/0", "1", "a/b", "1/2/3", " 1/2", ""}) {
    EXPECT_FALSE(parse_shard(bad)) << bad;
  }
}

std::string no_profile(std::string_view) { return ""; }

TEST(Shard, TheShardsOfARunRunEveryTestExactlyOnce) {
  std::vector<std::string> tests;
  for (int i = 0; i < 23; ++i)
    tests.push_back("Adapters/S" + std::to_string(i % 4) + ".T" + std::to_string(i) + "/host");
  for (int count : {1, 2, 3, 7, 30}) {
    std::multiset<std::string> seen;
    for (int index = 0; index < count; ++index) {
      const Selection shard = select_tests(tests, {"*", {}, Shard{index, count}}, no_profile);
      EXPECT_EQ(shard.subset, count > 1);
      seen.insert(shard.tests.begin(), shard.tests.end());
    }
    EXPECT_EQ(seen, std::multiset<std::string>(tests.begin(), tests.end())) << count << " shards";
  }
}

TEST(Seed, OnlyDecimalNumbersThatFit64BitsAreSeeds) {
  EXPECT_EQ(parse_seed("0"), 0U);
  EXPECT_EQ(parse_seed("18446744073709551615"), 18446744073709551615ULL);
  for (const char* bad : {"-1", "18446744073709551616", "+1", "1e3", "0x10", "", " 1", "1 "}) {
    EXPECT_FALSE(parse_seed(bad)) << bad;
  }
}

// The environment is process-wide: each case sets what it needs and checks
// what the runner left behind.
class Inherited : public ::testing::Test {
 protected:
  void SetUp() override {
    for (const char* name : {"GTEST_SHARD_INDEX", "GTEST_TOTAL_SHARDS", "GTEST_REPEAT", "RC_PARAMS"}) ::unsetenv(name);
  }
};

TEST_F(Inherited, GoogleTestShardVariablesBecomeTheShardAndAreRemoved) {
  ::setenv("GTEST_SHARD_INDEX", "1", 1);
  ::setenv("GTEST_TOTAL_SHARDS", "3", 1);
  ::setenv("GTEST_REPEAT", "2", 1);
  const auto settings = take_inherited_settings(std::nullopt, std::nullopt, {}, 5);
  ASSERT_TRUE(settings) << settings.error();
  ASSERT_TRUE(settings->shard);
  EXPECT_EQ(settings->shard->index, 1);
  EXPECT_EQ(settings->shard->count, 3);
  for (const char* name : {"GTEST_SHARD_INDEX", "GTEST_TOTAL_SHARDS", "GTEST_REPEAT"}) {
    EXPECT_EQ(std::getenv(name), nullptr) << name << " would reach GoogleTest";
  }
  bool noted = false;
  for (const auto& note : settings->notes) noted |= note.find("ignoring GTEST_REPEAT") != std::string::npos;
  EXPECT_TRUE(noted);
}

TEST_F(Inherited, TheSeedOfRcParamsIsTheRunsSeedAndItsOtherSettingsStay) {
  ::setenv("RC_PARAMS", "max_success=10 seed=42", 1);
  const auto settings = take_inherited_settings(std::nullopt, std::nullopt, {}, 5);
  ASSERT_TRUE(settings) << settings.error();
  EXPECT_EQ(settings->seed, 42U);
  EXPECT_EQ(settings->budget.runs, 10U) << "max_success is the model budget's runs";
  EXPECT_EQ(settings->budget.length, kDefaultModelLength);
  EXPECT_STREQ(std::getenv("RC_PARAMS"), "max_success=10 seed=42 max_size=100 verbose_progress=0 verbose_shrinking=0");
  EXPECT_FALSE(take_inherited_settings(7, std::nullopt, {}, 5)) << "--seed 7 and seed=42 disagree";
  ::setenv("RC_PARAMS", "seed=-3", 1);
  EXPECT_FALSE(take_inherited_settings(std::nullopt, std::nullopt, {}, 5));
}

TEST_F(Inherited, WithoutRcParamsTheFlagOrTheRandomSeedIsUsed) {
  EXPECT_EQ(take_inherited_settings(std::nullopt, std::nullopt, {}, 5)->seed, 5U);
  ::unsetenv("RC_PARAMS");  // the runner takes its settings once; the first call set it
  EXPECT_EQ(take_inherited_settings(9, std::nullopt, {}, 5)->seed, 9U);
  EXPECT_STREQ(std::getenv("RC_PARAMS"), "seed=9 max_success=100 max_size=100 verbose_progress=0 verbose_shrinking=0");
}

TEST_F(Inherited, TheModelBudgetFlagsReachRapidCheckAndMustAgreeWithRcParams) {
  const auto settings = take_inherited_settings(std::nullopt, std::nullopt, {.runs = 7, .length = 400}, 5);
  ASSERT_TRUE(settings) << settings.error();
  EXPECT_EQ(settings->budget.runs, 7U);
  EXPECT_EQ(settings->budget.length, 400U);
  EXPECT_STREQ(std::getenv("RC_PARAMS"), "seed=5 max_success=7 max_size=400 verbose_progress=0 verbose_shrinking=0");
  ::setenv("RC_PARAMS", "max_size=50", 1);
  const auto disagreeing = take_inherited_settings(std::nullopt, std::nullopt, {.runs = std::nullopt, .length = 60}, 5);
  ASSERT_FALSE(disagreeing);
  EXPECT_NE(disagreeing.error().find("--model-length 60 and RC_PARAMS's max_size=50 disagree"), std::string::npos)
      << disagreeing.error();
  ::setenv("RC_PARAMS", "max_success=0", 1);
  EXPECT_FALSE(take_inherited_settings(std::nullopt, std::nullopt, {}, 5)) << "no run at all explores nothing";
}

}  // namespace
}  // namespace ortmem::cts

namespace ortmem::cts {
namespace {

report::Failure attributed(const char* message) {
  return attributed_failure(
      ::testing::TestPartResult(::testing::TestPartResult::kNonFatalFailure, "suite.cpp", 9, message));
}

TEST(Attribution, TheInnermostScopeNamesTheRequirementsAndTheTraceLeavesTheMessage) {
  const auto failure = attributed(
      "Expected equality\nGoogle Test trace:\nsuite.cpp:8: [checks ALLOC-005 ALLOC-006]\n"
      "suite.cpp:4: [precondition]");
  EXPECT_EQ(failure.requirements, (std::vector<std::string>{"ALLOC-005", "ALLOC-006"}));
  EXPECT_EQ(failure.message, "Expected equality");
  EXPECT_EQ(failure.line, 9);
}

TEST(Attribution, AFailureWithNoSourceLineIsRecordedAtLineZero) {
  // What GoogleTest reports for an exception out of a test body: line -1,
  // which a child's event must never carry (the parent cannot read it).
  const auto failure = attributed_failure(
      ::testing::TestPartResult(::testing::TestPartResult::kFatalFailure, nullptr, -1, "C++ exception thrown"));
  EXPECT_EQ(failure.line, 0);
  EXPECT_EQ(failure.file, "");
}

TEST(Attribution, APreconditionScopeChargesNothing) {
  const auto failure =
      attributed("allocate failed\nGoogle Test trace:\nsuite.cpp:8: [precondition]\nsuite.cpp:4: [checks DQ-001]");
  ASSERT_TRUE(failure.requirements.has_value());
  EXPECT_TRUE(failure.requirements->empty());
}

TEST(Attribution, ATaggedRapidCheckMessageWinsOverTheTestsScope) {
  const auto failure = attributed(
      "Falsifiable after 3 tests\n[checks DQ-002] order == model\n"
      "Google Test trace:\nsuite.cpp:8: [checks DQ-001]");
  EXPECT_EQ(failure.requirements, (std::vector<std::string>{"DQ-002"}));
}

TEST(Attribution, AnUntaggedFailureCountsAgainstTheWholeTest) {
  EXPECT_FALSE(attributed("Expected true").requirements.has_value());
}

}  // namespace
}  // namespace ortmem::cts
