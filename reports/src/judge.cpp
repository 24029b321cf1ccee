#include <algorithm>
#include <set>

#include "ortmem/report/report.hpp"

namespace ortmem::report {
namespace {

template <class Enum, std::size_t N>
std::optional<Enum> named(std::string_view name, const Enum (&values)[N]) {
  for (Enum value : values) {
    if (to_string(value) == name) return value;
  }
  return std::nullopt;
}

constexpr TestStatus kTestStatuses[] = {TestStatus::kPass,    TestStatus::kFail,  TestStatus::kNotApplicable,
                                        TestStatus::kSkipped, TestStatus::kCrash, TestStatus::kTimeout,
                                        TestStatus::kWaived,  TestStatus::kError, TestStatus::kFlaky};
constexpr RequirementStatus kRequirementStatuses[] = {
    RequirementStatus::kPass,   RequirementStatus::kFail,   RequirementStatus::kNotApplicable,
    RequirementStatus::kNotRun, RequirementStatus::kWaived, RequirementStatus::kOutOfScope};
constexpr ProfileResult kProfileResults[] = {ProfileResult::kConformant, ProfileResult::kNotConformant,
                                             ProfileResult::kPartial,    ProfileResult::kNotRun,
                                             ProfileResult::kIncomplete, ProfileResult::kWaived};

// What `test` says about requirement `id`: its status, or nothing when it
// failed (or was waived) only in checks of other requirements or of its
// preconditions.
std::optional<TestStatus> status_for(const TestResult& test, const std::string& id) {
  const bool judged_by_checks = is_failure(test.status) || test.status == TestStatus::kWaived;
  if (judged_by_checks && !charges(test, id)) return std::nullopt;
  return test.status;
}

RequirementStatus requirement_status(const std::vector<const TestResult*>& tests, const std::string& id) {
  bool any_pass = false;
  bool all_not_applicable = false;
  bool any_other = false;
  bool any_waived = false;
  for (const TestResult* test : tests) {
    const auto status = status_for(*test, id);
    if (!status) continue;
    if (is_failure(*status)) return RequirementStatus::kFail;
    any_pass |= *status == TestStatus::kPass;
    any_waived |= *status == TestStatus::kWaived;
    all_not_applicable |= *status == TestStatus::kNotApplicable;
    any_other |= *status != TestStatus::kNotApplicable;
  }
  all_not_applicable &= !any_other;
  // A waived failure is still a failure of the rule: another test passing
  // does not make the requirement pass.
  if (any_waived) return RequirementStatus::kWaived;
  if (any_pass) return RequirementStatus::kPass;
  if (all_not_applicable) return RequirementStatus::kNotApplicable;
  return RequirementStatus::kNotRun;
}

ProfileVerdict judge_profile(const std::string& profile, bool declared, const std::vector<RequirementResult>& results,
                             const AdapterOrigin* origin) {
  ProfileVerdict verdict{profile, ProfileResult::kNotRun, declared, {}, {}};
  bool must_failed = false;
  bool must_not_run = false;
  bool anything_ran = false;
  bool should_failed = false;
  bool must_waived = false;
  int out_of_scope = 0;
  for (const RequirementResult& result : results) {
    if (result.requirement.profile != profile) continue;
    ++verdict.counts[to_string(result.status)];
    const bool must = result.requirement.level == "MUST";
    anything_ran |= result.status == RequirementStatus::kPass || result.status == RequirementStatus::kFail ||
                    result.status == RequirementStatus::kWaived;
    must_waived |= must && result.status == RequirementStatus::kWaived;
    if (result.status == RequirementStatus::kFail) (must ? must_failed : should_failed) = true;
    out_of_scope += result.status == RequirementStatus::kOutOfScope ? 1 : 0;
    const bool skipped_while_declared = declared && result.applies &&
                                        result.status == RequirementStatus::kNotApplicable &&
                                        !result.requirement.justified;
    if (must && (result.status == RequirementStatus::kNotRun || skipped_while_declared)) must_not_run = true;
  }
  if (must_failed) {
    verdict.result = ProfileResult::kNotConformant;
  } else if (!anything_ran) {
    verdict.result = ProfileResult::kNotRun;
    if (!declared) verdict.note = "the adapter does not declare this profile's capability";
  } else if (must_not_run) {
    verdict.result = ProfileResult::kPartial;
    verdict.note = "some MUST requirements did not run";
  } else if (must_waived) {
    verdict.result = ProfileResult::kWaived;
    verdict.note = "MUST requirements failed as expectations list";
  } else {
    verdict.result = ProfileResult::kConformant;
  }
  if (should_failed) verdict.note += (verdict.note.empty() ? "" : "; ") + std::string("a SHOULD requirement failed");
  if (out_of_scope > 0 && origin != nullptr) {
    // Never a silent pass: the verdict carries how much the surface could not show.
    verdict.note += (verdict.note.empty() ? "" : "; ") + origin->interface + " scope: " + std::to_string(out_of_scope) +
                    (out_of_scope == 1 ? " requirement" : " requirements") + " out of scope";
  }
  return verdict;
}

}  // namespace

std::string to_string(TestStatus status) {
  switch (status) {
    case TestStatus::kPass: return "pass";
    case TestStatus::kFail: return "fail";
    case TestStatus::kNotApplicable: return "not-applicable";
    case TestStatus::kSkipped: return "skipped";
    case TestStatus::kCrash: return "crash";
    case TestStatus::kTimeout: return "timeout";
    case TestStatus::kWaived: return "waived";
    case TestStatus::kError: return "error";
    case TestStatus::kFlaky: return "flaky";
  }
  return "error";
}

std::string to_string(RequirementStatus status) {
  switch (status) {
    case RequirementStatus::kPass: return "pass";
    case RequirementStatus::kFail: return "fail";
    case RequirementStatus::kNotApplicable: return "not-applicable";
    case RequirementStatus::kNotRun: return "not-run";
    case RequirementStatus::kWaived: return "waived";
    case RequirementStatus::kOutOfScope: return "out-of-scope";
  }
  return "not-run";
}

std::string to_string(ProfileResult result) {
  switch (result) {
    case ProfileResult::kConformant: return "conformant";
    case ProfileResult::kNotConformant: return "not-conformant";
    case ProfileResult::kPartial: return "partial";
    case ProfileResult::kNotRun: return "not-run";
    case ProfileResult::kIncomplete: return "incomplete";
    case ProfileResult::kWaived: return "waived";
  }
  return "not-run";
}

std::optional<TestStatus> test_status_named(std::string_view name) { return named(name, kTestStatuses); }
std::optional<RequirementStatus> requirement_status_named(std::string_view name) {
  return named(name, kRequirementStatuses);
}
std::optional<ProfileResult> profile_result_named(std::string_view name) { return named(name, kProfileResults); }

std::string located(const Failure& failure) {
  return failure.file.empty() ? failure.message
                              : failure.file + ":" + std::to_string(failure.line) + ": " + failure.message;
}

bool charges(const Failure& failure, const TestResult& test, std::string_view id) {
  const auto& named = failure.requirements ? *failure.requirements : test.requirements;
  return std::find(named.begin(), named.end(), id) != named.end();
}

bool charges(const TestResult& test, std::string_view id) {
  if (test.failures.empty())
    return std::find(test.requirements.begin(), test.requirements.end(), id) != test.requirements.end();
  return std::any_of(test.failures.begin(), test.failures.end(),
                     [&](const Failure& failure) { return charges(failure, test, id); });
}

std::string_view suite_of(std::string_view test_id) { return test_id.substr(0, test_id.find('.')); }

std::string_view name_in_suite(std::string_view test_id) {
  const std::size_t dot = test_id.find('.');
  return dot == std::string_view::npos ? test_id : test_id.substr(dot + 1);
}

bool is_failure(TestStatus status) {
  return status == TestStatus::kFail || status == TestStatus::kCrash || status == TestStatus::kTimeout ||
         status == TestStatus::kError || status == TestStatus::kFlaky;
}

std::vector<TestResult> combine_repeats(const std::vector<TestResult>& runs) {
  std::vector<TestResult> combined;
  std::map<std::string, std::size_t> index;
  for (const TestResult& run : runs) {
    const auto [found, first] = index.try_emplace(run.id, combined.size());
    if (first) {
      combined.push_back(run);
      combined.back().runs = 1;
      combined.back().failed_runs = is_failure(run.status) ? 1 : 0;
      continue;
    }
    TestResult& test = combined[found->second];
    ++test.runs;
    test.duration_s += run.duration_s;
    if (!is_failure(run.status)) {
      if (is_failure(test.status)) test.status = TestStatus::kFlaky;
      continue;
    }
    ++test.failed_runs;
    if (!is_failure(test.status)) {
      // The first failure's details are the ones to show and reproduce.
      const int runs_so_far = test.runs;
      const int failed = test.failed_runs;
      const double duration = test.duration_s;
      test = run;
      test.runs = runs_so_far;
      test.failed_runs = failed;
      test.duration_s = duration;
      test.status = TestStatus::kFlaky;
    } else if (test.status != run.status && test.status != TestStatus::kFlaky) {
      test.status = TestStatus::kFlaky;  // failing in different ways is not one stable outcome either
    }
  }
  return combined;
}

const std::vector<std::string>& all_profiles() {
  static const std::vector<std::string> profiles = {"core", "pins", "deferred", "virtual", "shared", "abi"};
  return profiles;
}

std::vector<std::string> declared_profiles(const std::vector<std::string>& capabilities) {
  static const std::map<std::string, std::string, std::less<>> kProfileOf = {{"context-pins", "pins"},
                                                                             {"deferred-queue", "deferred"},
                                                                             {"virtual-backing", "virtual"},
                                                                             {"shared-mapping", "shared"},
                                                                             {"nxmem-abi", "abi"}};
  std::vector<std::string> declared = {"core"};
  for (const std::string& profile : all_profiles()) {
    for (const std::string& capability : capabilities) {
      const auto found = kProfileOf.find(capability);
      if (found != kProfileOf.end() && found->second == profile) declared.push_back(profile);
    }
  }
  return declared;
}

// Whether the surface `origin` describes offers every control `requirement` needs.
bool in_scope(const SpecRequirement& requirement, const AdapterOrigin* origin) {
  if (origin == nullptr) return true;
  return std::all_of(requirement.needs.begin(), requirement.needs.end(), [&](const std::string& control) {
    return std::find(origin->controls.begin(), origin->controls.end(), control) != origin->controls.end();
  });
}

Judgement judge(const std::vector<SpecRequirement>& spec, const std::vector<TestResult>& tests,
                const std::vector<std::string>& declared_list, Scope scope, const AdapterOrigin* origin) {
  std::map<std::string, std::vector<const TestResult*>> by_requirement;
  for (const TestResult& test : tests) {
    // A check may name a requirement its test's list leaves out; it still counts.
    std::set<std::string> named(test.requirements.begin(), test.requirements.end());
    for (const Failure& failure : test.failures) {
      if (failure.requirements) named.insert(failure.requirements->begin(), failure.requirements->end());
    }
    for (const std::string& id : named) by_requirement[id].push_back(&test);
  }
  const std::set<std::string> declared(declared_list.begin(), declared_list.end());

  Judgement judgement;
  for (const SpecRequirement& requirement : spec) {
    RequirementResult result{requirement, RequirementStatus::kNotRun, {}};
    const auto& named_by = by_requirement[requirement.id];
    for (const TestResult* test : named_by) result.tests.push_back(test->id);
    result.status = requirement_status(named_by, requirement.id);
    if (result.status == RequirementStatus::kNotRun && named_by.empty() && requirement.justified) {
      result.status = RequirementStatus::kNotApplicable;
    }
    // A failure stays a failure: a check that ran and failed showed something.
    const bool showed = result.status == RequirementStatus::kFail || result.status == RequirementStatus::kWaived;
    const bool profile_declared = requirement.profile == "core" || declared.contains(requirement.profile);
    result.applies = requirement.applies_with.empty() || declared.contains(requirement.applies_with);
    if (!showed && !result.applies) result.status = RequirementStatus::kNotApplicable;
    // Scope is a question only for what the adapter declares.
    if (!showed && result.applies && profile_declared && !in_scope(requirement, origin)) {
      result.status = RequirementStatus::kOutOfScope;
    }
    judgement.requirements.push_back(std::move(result));
  }

  bool any_not_conformant = false;
  bool every_declared_conformant = true;
  bool any_waived = false;
  bool anything_ran = false;
  for (const std::string& profile : all_profiles()) {
    ProfileVerdict verdict =
        judge_profile(profile, profile == "core" || declared.contains(profile), judgement.requirements, origin);
    any_not_conformant |= verdict.result == ProfileResult::kNotConformant;
    anything_ran |= verdict.result != ProfileResult::kNotRun;
    any_waived |= verdict.result == ProfileResult::kWaived;
    const bool passes = verdict.result == ProfileResult::kConformant || verdict.result == ProfileResult::kWaived;
    if (verdict.declared && !passes) every_declared_conformant = false;
    judgement.verdict.profiles.push_back(std::move(verdict));
  }
  // A failure the report cannot charge to any requirement (the test names
  // none, or only its preconditions failed) still fails the run.
  const bool unattributed_failure = std::any_of(tests.begin(), tests.end(), [](const TestResult& test) {
    return is_failure(test.status) && std::none_of(test.requirements.begin(), test.requirements.end(),
                                                   [&](const std::string& id) { return charges(test, id); });
  });
  ProfileResult& overall = judgement.verdict.overall;
  if (any_not_conformant || unattributed_failure) {
    overall = ProfileResult::kNotConformant;
  } else if (scope.incomplete) {
    overall = ProfileResult::kIncomplete;
  } else if (every_declared_conformant && !scope.subset) {
    overall = any_waived ? ProfileResult::kWaived : ProfileResult::kConformant;
  } else if (!anything_ran) {
    overall = ProfileResult::kNotRun;
  } else {
    overall = ProfileResult::kPartial;
  }
  return judgement;
}

void judge_report(const std::vector<SpecRequirement>& spec, Report& report) {
  report.judgement = judge(spec, report.tests, declared_profiles(report.adapter.capabilities), report.run.scope,
                           report.adapter.origin ? &*report.adapter.origin : nullptr);
}

}  // namespace ortmem::report
