// Shards merge into the unsharded run's report; diffs find regressions;
// expectations waive exactly what they expect and say when they are stale.
#include <gtest/gtest.h>

#include "ortmem/report/expectations.hpp"
#include "ortmem/report/merge.hpp"

namespace ortmem::report {
namespace {

const std::vector<SpecRequirement> kSpec = {{"ALLOC-001", "MUST", "core", "a"}, {"ALLOC-002", "MUST", "core", "b"}};

Report run_of(std::vector<std::pair<std::string, TestStatus>> tests, std::string shard = "") {
  Report report;
  report.kit = {"ortmem-cts", "0.1.0", "abc", "1.0.0", false, "Release", ""};
  report.adapter = {"host", "1", "ortmem", "host:0", {}};
  report.run.id = "run-7";
  report.run.seed = 7;
  report.run.shard = std::move(shard);
  report.run.scope.subset = !report.run.shard.empty();
  for (auto& [id, status] : tests) {
    TestResult test;
    test.id = id;
    test.requirements = {id.find("Two") != std::string::npos ? "ALLOC-002" : "ALLOC-001"};
    test.status = status;
    report.tests.push_back(std::move(test));
  }
  judge_report(kSpec, report);
  return report;
}

std::vector<std::string> ids(const Report& report) {
  std::vector<std::string> names;
  for (const auto& test : report.tests) names.push_back(test.id);
  return names;
}

TEST(Merge, EveryShardGivesBackTheUnshardedRunInItsOrder) {
  const auto pass = TestStatus::kPass;
  const Report whole =
      run_of({{"S.One1", pass}, {"S.Two1", pass}, {"S.One2", pass}, {"S.Two2", pass}, {"S.One3", pass}});
  const Report shard0 = run_of({{"S.One1", pass}, {"S.One2", pass}, {"S.One3", pass}}, "0/2");
  const Report shard1 = run_of({{"S.Two1", pass}, {"S.Two2", pass}}, "1/2");
  EXPECT_EQ(shard0.judgement.verdict.overall, ProfileResult::kPartial);
  const auto merged = merge_shards({shard1, shard0}, kSpec);
  ASSERT_TRUE(merged) << merged.error();
  EXPECT_EQ(ids(*merged), ids(whole));
  EXPECT_EQ(merged->judgement.verdict.overall, whole.judgement.verdict.overall);
  EXPECT_EQ(merged->judgement.verdict.overall, ProfileResult::kConformant);
}

TEST(Merge, AMissingShardLeavesThePartialVerdict) {
  const auto merged =
      merge_shards({run_of({{"S.One1", TestStatus::kPass}, {"S.Two1", TestStatus::kPass}}, "0/3")}, kSpec);
  ASSERT_TRUE(merged);
  EXPECT_EQ(merged->judgement.verdict.overall, ProfileResult::kPartial);
}

TEST(Merge, ShardsOfDifferentRunsOrRepeatedShardsAreRefused) {
  const Report a = run_of({{"S.One1", TestStatus::kPass}}, "0/2");
  Report b = run_of({{"S.Two1", TestStatus::kPass}}, "1/2");
  b.run.seed = 8;
  EXPECT_NE(merge_shards({a, b}, kSpec).error().find("seed differs"), std::string::npos);
  b = run_of({{"S.Two1", TestStatus::kPass}}, "1/2");
  b.run.id = "run-8";
  EXPECT_NE(merge_shards({a, b}, kSpec).error().find("run id differs"), std::string::npos);
  EXPECT_NE(merge_shards({a, a}, kSpec).error().find("given twice"), std::string::npos);
  b = run_of({{"S.One1", TestStatus::kPass}}, "1/2");
  EXPECT_NE(merge_shards({a, b}, kSpec).error().find("in two shards"), std::string::npos);
  b = run_of({{"S.Two1", TestStatus::kPass}}, "1/3");
  EXPECT_NE(merge_shards({a, b}, kSpec).error().find("not one of 2"), std::string::npos);
  // Two builds of one plugin are two adapters, whatever their names say.
  Report plugin_a = a;
  plugin_a.adapter.origin = AdapterOrigin{"nxmem 1.1", "libp.so", std::string(64, 'a'), "host"};
  b = run_of({{"S.Two1", TestStatus::kPass}}, "1/2");
  b.adapter.origin = AdapterOrigin{"nxmem 1.1", "libp.so", std::string(64, 'b'), "host"};
  EXPECT_NE(merge_shards({plugin_a, b}, kSpec).error().find("adapter"), std::string::npos);
}

TEST(Merge, WaiversAreReplayedOverTheMergedRunInItsOrder) {
  const auto fail = TestStatus::kFail;
  const std::vector<Expectation> expected = {{"*", "ALLOC-001", "*", "fail", "known", ""}};
  Report shard0 = run_of({{"S.One1", fail}, {"S.One3", fail}}, "0/2");
  Report shard1 = run_of({{"S.One2", fail}}, "1/2");
  for (Report* shard : {&shard0, &shard1}) {
    apply_expectations(expected, *shard);
    judge_report(kSpec, *shard);
  }
  const auto merged = merge_shards({shard0, shard1}, kSpec);
  ASSERT_TRUE(merged) << merged.error();
  ASSERT_EQ(merged->waivers.size(), 1U);
  EXPECT_EQ(merged->waivers[0].tests, (std::vector<std::string>{"S.One1", "S.One2", "S.One3"}));
  EXPECT_EQ(merged->waivers[0].state, "applied");
  Report other = shard1;
  other.waivers.clear();
  EXPECT_NE(merge_shards({shard0, other}, kSpec).error().find("different expectations"), std::string::npos);
}

TEST(Merge, AShardOutsideItsCountIsRefused) {
  const Report a = run_of({{"S.One1", TestStatus::kPass}}, "0/2");
  for (const char* bad : {"5/2", "1x/2", "-1/2"}) {
    EXPECT_TRUE(!merge_shards({a, run_of({{"S.Two1", TestStatus::kPass}}, bad)}, kSpec)) << bad;
  }
}

TEST(Diff, APassThatFailsIsARegressionAndTheReverseAFix) {
  const Report base = run_of({{"S.One1", TestStatus::kPass}, {"S.Two1", TestStatus::kFail}});
  const Report next =
      run_of({{"S.One1", TestStatus::kCrash}, {"S.Two1", TestStatus::kPass}, {"S.New", TestStatus::kPass}});
  const ReportDiff diff = diff_reports(base, next);
  EXPECT_TRUE(diff.regressed());
  EXPECT_EQ(diff.regressions, (std::vector<std::string>{"ALLOC-001: pass -> fail", "test S.One1: pass -> crash"}));
  EXPECT_EQ(diff.fixes, (std::vector<std::string>{"ALLOC-002: fail -> pass", "test S.Two1: fail -> pass"}));
  EXPECT_EQ(diff.new_tests, std::vector<std::string>{"S.New (pass)"});
  EXPECT_FALSE(diff_reports(next, next).regressed());
  EXPECT_TRUE(diff_reports(next, base).removed_tests == std::vector<std::string>{"S.New (pass)"});
}

TEST(Expectations, AnExpectedFailureIsWaivedAndTheRunIsWaivedNotConformant) {
  Report report = run_of({{"S.One1", TestStatus::kPass}, {"S.Two1", TestStatus::kFail}});
  apply_expectations({{"*", "ALLOC-002", "*", "fail", "known", ""},
                      {"S.Gone", "", "*", "failure", "old", ""},
                      {"S.One1", "", "*", "failure", "fixed since", ""}},
                     report);
  judge_report(kSpec, report);
  EXPECT_EQ(report.tests[1].status, TestStatus::kWaived);
  EXPECT_EQ(report.tests[1].actual_status, TestStatus::kFail);
  EXPECT_EQ(report.judgement.verdict.overall, ProfileResult::kWaived);
  ASSERT_EQ(report.waivers.size(), 3U);
  EXPECT_EQ(report.waivers[0].state, "applied");
  EXPECT_EQ(report.waivers[1].state, "stale");
  EXPECT_EQ(report.waivers[2].state, "unexpected-pass");
}

TEST(Expectations, AFailureOfAnotherKindOrAnotherAdapterStands) {
  Report report = run_of({{"S.Two1", TestStatus::kCrash}});
  apply_expectations(
      {{"*", "ALLOC-002", "*", "fail", "a fail, not a crash", ""}, {"*", "", "glibc", "failure", "x", ""}}, report);
  judge_report(kSpec, report);
  EXPECT_EQ(report.tests[0].status, TestStatus::kCrash);
  EXPECT_EQ(report.waivers[0].state, "other-outcome");
  EXPECT_EQ(report.waivers[1].state, "stale");
  EXPECT_EQ(report.judgement.verdict.overall, ProfileResult::kNotConformant);
}

TEST(Expectations, AMalformedFileSaysWhatIsWrongAndWhere) {
  EXPECT_EQ(parse_expectations("[]", "x.json").error(), "x.json: expected an object {\"expectations\": [...]}");
  EXPECT_EQ(
      parse_expectations(R"({"expectations": [{"test": "*", "reason": "r", "stauts": "fail"}]})", "x.json").error(),
      "x.json: expectations[0]: unknown key 'stauts' (keys are test, requirement, adapter, status, reason, url)");
  EXPECT_NE(parse_expectations(R"({"expectations": [{"test": "*"}]})", "x.json").error().find("'reason' is required"),
            std::string::npos);
  EXPECT_NE(parse_expectations(R"({"expectations": [{"reason": "r"}]})", "x.json").error().find("name the tests"),
            std::string::npos);
  EXPECT_NE(parse_expectations(R"({"expectations": [{"test": "*", "reason": "r", "status": "pass"}]})", "x")
                .error()
                .find("'pass' is not"),
            std::string::npos);
  EXPECT_EQ(parse_expectations("{", "x.json").error().rfind("x.json: not JSON", 0), 0U);
  EXPECT_EQ(parse_expectations(R"({"expectations": []})", "x.json")->size(), 0U);
}

}  // namespace
}  // namespace ortmem::report
