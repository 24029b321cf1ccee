// The rules that turn test results into verdicts.
#include <gtest/gtest.h>

#include "ortmem/report/report.hpp"

namespace ortmem::report {
namespace {

const std::vector<SpecRequirement> kSpec = {
    {"ALLOC-001", "MUST", "core", "a"},
    {"ALLOC-002", "SHOULD", "core", "b"},
    {"PIN-001", "MUST", "pins", "c"},
    {"VB-001", "MUST", "virtual", "d"},
};

TestResult test(std::string id, std::vector<std::string> requirements, TestStatus status) {
  TestResult result;
  result.id = std::move(id);
  result.requirements = std::move(requirements);
  result.status = status;
  return result;
}

const ProfileVerdict& profile(const Judgement& judgement, const std::string& name) {
  for (const auto& verdict : judgement.verdict.profiles) {
    if (verdict.name == name) return verdict;
  }
  throw std::logic_error("no profile " + name);
}

TEST(Judge, AllMustRequirementsPassingIsConformant) {
  const auto judgement =
      judge(kSpec,
            {test("a", {"ALLOC-001", "ALLOC-002"}, TestStatus::kPass), test("b", {"PIN-001"}, TestStatus::kPass),
             test("c", {"VB-001"}, TestStatus::kNotApplicable)},
            {"core", "pins"}, Scope{});
  EXPECT_EQ(judgement.verdict.overall, ProfileResult::kConformant);
  EXPECT_EQ(profile(judgement, "virtual").result, ProfileResult::kNotRun);
  EXPECT_EQ(judgement.requirements[3].status, RequirementStatus::kNotApplicable);
}

TEST(Judge, OneFailingTestFailsEveryRequirementItNames) {
  const auto judgement = judge(kSpec,
                               {test("a", {"ALLOC-001"}, TestStatus::kPass),
                                test("b", {"ALLOC-001"}, TestStatus::kFail), test("c", {"PIN-001"}, TestStatus::kPass)},
                               {"core", "pins"}, Scope{});
  EXPECT_EQ(judgement.requirements[0].status, RequirementStatus::kFail);
  EXPECT_EQ(profile(judgement, "core").result, ProfileResult::kNotConformant);
  EXPECT_EQ(judgement.verdict.overall, ProfileResult::kNotConformant);
}

TEST(Judge, ASkippedCoreTestMakesThePartialVerdictNeverConformant) {
  const auto judgement = judge(kSpec,
                               {test("a", {"ALLOC-001"}, TestStatus::kNotApplicable),
                                test("b", {"ALLOC-002"}, TestStatus::kPass), test("c", {"PIN-001"}, TestStatus::kPass)},
                               {"core", "pins"}, Scope{});
  EXPECT_EQ(profile(judgement, "core").result, ProfileResult::kPartial);
  EXPECT_EQ(judgement.verdict.overall, ProfileResult::kPartial);
}

TEST(Judge, ADeclaredProfileThatDidNotRunIsNotConformantOverall) {
  const auto judgement = judge(kSpec, {test("a", {"ALLOC-001"}, TestStatus::kPass)}, {"core", "pins"}, Scope{});
  EXPECT_EQ(profile(judgement, "pins").result, ProfileResult::kNotRun);
  EXPECT_EQ(judgement.verdict.overall, ProfileResult::kPartial);
}

TEST(Judge, AFailingShouldIsReportedButDoesNotFailTheProfile) {
  const auto judgement = judge(kSpec,
                               {test("a", {"ALLOC-001"}, TestStatus::kPass),
                                test("b", {"ALLOC-002"}, TestStatus::kFail), test("c", {"PIN-001"}, TestStatus::kPass)},
                               {"core", "pins"}, Scope{});
  EXPECT_EQ(profile(judgement, "core").result, ProfileResult::kConformant);
  EXPECT_NE(profile(judgement, "core").note.find("SHOULD"), std::string::npos);
}

TEST(Judge, AJustifiedRequirementWithoutTestsDoesNotBlockTheVerdict) {
  auto spec = kSpec;
  spec.push_back({"REL-007", "MUST", "core", "e", true});
  const auto judgement =
      judge(spec, {test("a", {"ALLOC-001", "ALLOC-002"}, TestStatus::kPass), test("b", {"PIN-001"}, TestStatus::kPass)},
            {"core", "pins"}, Scope{});
  EXPECT_EQ(judgement.requirements.back().status, RequirementStatus::kNotApplicable);
  EXPECT_EQ(judgement.verdict.overall, ProfileResult::kConformant);
}

TEST(Judge, ACrashOrTimeoutCountsAsAFailure) {
  for (TestStatus status : {TestStatus::kCrash, TestStatus::kTimeout, TestStatus::kError}) {
    const auto judgement = judge(kSpec, {test("a", {"ALLOC-001"}, status)}, {"core"}, Scope{});
    EXPECT_EQ(judgement.verdict.overall, ProfileResult::kNotConformant) << to_string(status);
  }
}

TEST(Judge, AFailedTestThatNamesNoRequirementStillFailsTheRun) {
  const auto judgement = judge(kSpec,
                               {test("a", {"ALLOC-001", "ALLOC-002"}, TestStatus::kPass),
                                test("b", {"PIN-001"}, TestStatus::kPass), test("c", {}, TestStatus::kCrash)},
                               {"core", "pins"}, Scope{});
  EXPECT_EQ(judgement.verdict.overall, ProfileResult::kNotConformant);
}

TestResult failed_in(std::string id, std::vector<std::string> requirements,
                     std::optional<std::vector<std::string>> charged) {
  TestResult result = test(std::move(id), std::move(requirements), TestStatus::kFail);
  result.failures.push_back({"suite.cpp", 7, "a check failed", std::move(charged)});
  return result;
}

TEST(Judge, AFailedCheckChargesOnlyTheRequirementsItNames) {
  const auto judgement =
      judge(kSpec, {failed_in("a", {"ALLOC-001", "ALLOC-002", "PIN-001"}, {{"ALLOC-001"}})}, {"core", "pins"}, Scope{});
  EXPECT_EQ(judgement.requirements[0].status, RequirementStatus::kFail);
  EXPECT_EQ(judgement.requirements[1].status, RequirementStatus::kNotRun) << "its checks may not have run";
  EXPECT_EQ(judgement.requirements[2].status, RequirementStatus::kNotRun);
  EXPECT_EQ(judgement.verdict.overall, ProfileResult::kNotConformant);
}

TEST(Judge, AnUnscopedFailureChargesEveryRequirementOfItsTest) {
  const auto judgement =
      judge(kSpec, {failed_in("a", {"ALLOC-001", "PIN-001"}, std::nullopt)}, {"core", "pins"}, Scope{});
  EXPECT_EQ(judgement.requirements[0].status, RequirementStatus::kFail);
  EXPECT_EQ(judgement.requirements[2].status, RequirementStatus::kFail);
}

TEST(Judge, AFailedPreconditionChargesNoRequirementButStillFailsTheRun) {
  const auto judgement = judge(kSpec,
                               {failed_in("a", {"ALLOC-001"}, std::vector<std::string>{}),
                                test("b", {"ALLOC-001", "ALLOC-002", "PIN-001"}, TestStatus::kPass)},
                               {"core", "pins"}, Scope{});
  EXPECT_EQ(judgement.requirements[0].status, RequirementStatus::kPass);
  EXPECT_EQ(judgement.verdict.overall, ProfileResult::kNotConformant);
}

const std::vector<TestResult> kAllPassing = {test("a", {"ALLOC-001", "ALLOC-002"}, TestStatus::kPass),
                                             test("b", {"PIN-001"}, TestStatus::kPass)};

TEST(Judge, AFailureInAProfileNotAskedForStillMakesTheRunNotConformant) {
  // `--profile core` on an adapter whose pins test failed: the failure is a finding.
  auto tests = kAllPassing;
  tests[1].status = TestStatus::kFail;
  const auto judgement = judge(kSpec, tests, {"core", "pins"}, Scope{.subset = true});
  EXPECT_EQ(profile(judgement, "core").result, ProfileResult::kConformant);
  EXPECT_EQ(judgement.verdict.overall, ProfileResult::kNotConformant);
}

TEST(Judge, ASubsetIsNeverConformantEvenWhenEverythingItRanPassed) {
  const auto judgement = judge(kSpec, kAllPassing, {"core", "pins"}, Scope{.subset = true});
  EXPECT_EQ(profile(judgement, "core").result, ProfileResult::kConformant);
  EXPECT_EQ(judgement.verdict.overall, ProfileResult::kPartial);
}

TEST(Judge, AnIncompleteRunIsIncompleteUnlessItAlreadyFoundAFailure) {
  EXPECT_EQ(judge(kSpec, kAllPassing, {"core", "pins"}, Scope{.incomplete = true}).verdict.overall,
            ProfileResult::kIncomplete);
  auto tests = kAllPassing;
  tests[0].status = TestStatus::kCrash;
  EXPECT_EQ(judge(kSpec, tests, {"core", "pins"}, Scope{.incomplete = true}).verdict.overall,
            ProfileResult::kNotConformant);
}

TEST(Judge, EveryRequirementOfTheSpecIsListedWhateverRan) {
  const auto judgement =
      judge(kSpec, {test("a", {"PIN-001"}, TestStatus::kPass)}, {"core", "pins"}, Scope{.subset = true});
  EXPECT_EQ(judgement.requirements.size(), kSpec.size());
  EXPECT_EQ(judgement.verdict.profiles.size(), all_profiles().size());
  EXPECT_EQ(judgement.verdict.overall, ProfileResult::kPartial);
}

TEST(Judge, AWaivedFailureIsNotHiddenByAnotherTestPassing) {
  auto tests = kAllPassing;
  TestResult waived = test("w", {"ALLOC-001"}, TestStatus::kWaived);
  waived.actual_status = TestStatus::kFail;
  tests.push_back(waived);
  const auto judgement = judge(kSpec, tests, {"core", "pins"}, Scope{});
  EXPECT_EQ(judgement.requirements[0].status, RequirementStatus::kWaived);
  EXPECT_EQ(judgement.verdict.overall, ProfileResult::kWaived);
}

// A spec whose PIN-001 needs fences: what a surface without them cannot show.
std::vector<SpecRequirement> spec_needing_fences() {
  std::vector<SpecRequirement> spec = kSpec;
  spec[2].needs = {"fences"};
  return spec;
}

AdapterOrigin plugin_origin(std::vector<std::string> controls) {
  return AdapterOrigin{"nxmem 1.1", "libp.so", std::string(64, 'a'), "m", std::move(controls)};
}

TEST(Judge, ARequirementNeedingAControlTheSurfaceLacksIsOutOfScopeAndSaidSo) {
  const AdapterOrigin origin = plugin_origin({});
  const auto judgement = judge(
      spec_needing_fences(),
      {test("a", {"ALLOC-001", "ALLOC-002"}, TestStatus::kPass), test("b", {"PIN-001"}, TestStatus::kNotApplicable)},
      {"core", "pins"}, Scope{}, &origin);
  EXPECT_EQ(judgement.requirements[2].status, RequirementStatus::kOutOfScope);
  const ProfileVerdict& pins = profile(judgement, "pins");
  EXPECT_EQ(pins.result, ProfileResult::kNotRun) << "nothing of pins ran, so nothing of it passed";
  EXPECT_EQ(pins.counts.at("out-of-scope"), 1);
  EXPECT_NE(pins.note.find("nxmem 1.1 scope: 1 requirement out of scope"), std::string::npos) << pins.note;
}

TEST(Judge, OutOfScopeRequirementsDoNotMakeAProfilePartial) {
  std::vector<SpecRequirement> spec = spec_needing_fences();
  spec.push_back({"PIN-002", "MUST", "pins", "e"});
  const AdapterOrigin origin = plugin_origin({"queue-close"});
  const auto judgement =
      judge(spec,
            {test("a", {"ALLOC-001", "ALLOC-002"}, TestStatus::kPass), test("b", {"PIN-002"}, TestStatus::kPass),
             test("c", {"PIN-001"}, TestStatus::kNotApplicable)},
            {"core", "pins"}, Scope{}, &origin);
  EXPECT_EQ(profile(judgement, "pins").result, ProfileResult::kConformant);
  EXPECT_EQ(judgement.verdict.overall, ProfileResult::kConformant);
}

TEST(Judge, ACompiledInAdapterOrASurfaceWithTheControlIsJudgedInFull) {
  const AdapterOrigin with_fences = plugin_origin({"fences"});
  for (const AdapterOrigin* origin : {static_cast<const AdapterOrigin*>(nullptr), &with_fences}) {
    const auto judgement = judge(
        spec_needing_fences(),
        {test("a", {"ALLOC-001", "ALLOC-002"}, TestStatus::kPass), test("b", {"PIN-001"}, TestStatus::kNotApplicable)},
        {"core", "pins"}, Scope{}, origin);
    EXPECT_EQ(judgement.requirements[2].status, RequirementStatus::kNotApplicable);
    EXPECT_EQ(profile(judgement, "pins").counts.count("out-of-scope"), 0U);
    EXPECT_EQ(profile(judgement, "pins").note.find("scope"), std::string::npos);
  }
}

TEST(Judge, AFailureOfAnOutOfScopeRequirementStaysAFailure) {
  const AdapterOrigin origin = plugin_origin({});
  const auto judgement =
      judge(spec_needing_fences(), {test("b", {"PIN-001"}, TestStatus::kFail)}, {"core", "pins"}, Scope{}, &origin);
  EXPECT_EQ(judgement.requirements[2].status, RequirementStatus::kFail);
  EXPECT_EQ(judgement.verdict.overall, ProfileResult::kNotConformant);
}

TEST(Judge, ARequirementAppliesWithItsProfileOrIsNotApplicableWithoutPenalty) {
  std::vector<SpecRequirement> spec = kSpec;
  spec[3].applies_with = "pins";  // VB-001 exists only beside pins
  spec.push_back({"VB-002", "MUST", "virtual", "e"});
  const std::vector<TestResult> tests = {
      test("a", {"ALLOC-001", "ALLOC-002"}, TestStatus::kPass), test("b", {"PIN-001"}, TestStatus::kPass),
      test("c", {"VB-001"}, TestStatus::kNotApplicable), test("d", {"VB-002"}, TestStatus::kPass)};
  const auto without = judge(spec, tests, {"core", "virtual"}, Scope{});
  EXPECT_FALSE(without.requirements[3].applies);
  EXPECT_EQ(without.requirements[3].status, RequirementStatus::kNotApplicable);
  EXPECT_EQ(profile(without, "virtual").result, ProfileResult::kConformant);
  const auto with = judge(spec, tests, {"core", "pins", "virtual"}, Scope{});
  EXPECT_TRUE(with.requirements[3].applies);
  EXPECT_EQ(profile(with, "virtual").result, ProfileResult::kPartial) << "declared beside pins, a skip is partial";
}

TEST(Judge, DeclaredProfilesFollowTheCapabilitiesInReportOrder) {
  EXPECT_EQ(declared_profiles({"shared-mapping", "context-pins", "fault-injection"}),
            (std::vector<std::string>{"core", "pins", "shared"}));
}

TEST(Judge, StatusNamesReadBackToTheirValues) {
  for (TestStatus status : {TestStatus::kPass, TestStatus::kFail, TestStatus::kNotApplicable, TestStatus::kSkipped,
                            TestStatus::kCrash, TestStatus::kTimeout, TestStatus::kWaived, TestStatus::kError}) {
    EXPECT_EQ(test_status_named(to_string(status)), status);
  }
  EXPECT_EQ(test_status_named("passed"), std::nullopt);
  EXPECT_EQ(profile_result_named("incomplete"), ProfileResult::kIncomplete);
  EXPECT_EQ(requirement_status_named(""), std::nullopt);
  EXPECT_EQ(requirement_status_named("out-of-scope"), RequirementStatus::kOutOfScope);
}

}  // namespace
}  // namespace ortmem::report
