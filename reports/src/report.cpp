#include "ortmem/report/report.hpp"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <set>

#include <unistd.h>

namespace ortmem::report {

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
  }
  return "not-run";
}

std::string to_string(ProfileResult result) {
  switch (result) {
    case ProfileResult::kConformant: return "conformant";
    case ProfileResult::kNotConformant: return "not-conformant";
    case ProfileResult::kPartial: return "partial";
    case ProfileResult::kNotRun: return "not-run";
  }
  return "not-run";
}

namespace {

bool is_failure(TestStatus status) {
  return status == TestStatus::kFail || status == TestStatus::kCrash || status == TestStatus::kTimeout ||
         status == TestStatus::kError;
}

RequirementStatus requirement_status(const std::vector<const TestResult*>& tests) {
  bool any_pass = false;
  bool all_not_applicable = !tests.empty();
  bool any_waived = false;
  for (const TestResult* test : tests) {
    if (is_failure(test->status)) return RequirementStatus::kFail;
    any_pass |= test->status == TestStatus::kPass;
    any_waived |= test->status == TestStatus::kWaived;
    all_not_applicable &= test->status == TestStatus::kNotApplicable;
  }
  if (any_pass) return RequirementStatus::kPass;
  if (any_waived) return RequirementStatus::kWaived;
  if (all_not_applicable) return RequirementStatus::kNotApplicable;
  return RequirementStatus::kNotRun;
}

}  // namespace

const std::vector<std::string>& all_profiles() {
  static const std::vector<std::string> profiles = {"core", "pins", "deferred", "virtual", "shared"};
  return profiles;
}

Judgement judge(const std::vector<SpecRequirement>& spec, const std::vector<TestResult>& tests,
                const std::vector<std::string>& declared_profiles,
                const std::vector<std::string>& selected_profiles) {
  std::map<std::string, std::vector<const TestResult*>> by_requirement;
  for (const TestResult& test : tests) {
    for (const std::string& id : test.requirements) by_requirement[id].push_back(&test);
  }
  const std::set<std::string> declared(declared_profiles.begin(), declared_profiles.end());
  const std::set<std::string> selected =
      selected_profiles.empty() ? std::set<std::string>(all_profiles().begin(), all_profiles().end())
                                : std::set<std::string>(selected_profiles.begin(), selected_profiles.end());

  Judgement judgement;
  for (const SpecRequirement& requirement : spec) {
    if (!selected.contains(requirement.profile)) continue;
    RequirementResult result{requirement, RequirementStatus::kNotRun, {}};
    const auto& named = by_requirement[requirement.id];
    for (const TestResult* test : named) result.tests.push_back(test->id);
    result.status = requirement_status(named);
    if (result.status == RequirementStatus::kNotRun && named.empty() && requirement.justified) {
      result.status = RequirementStatus::kNotApplicable;
    }
    judgement.requirements.push_back(std::move(result));
  }

  bool any_not_conformant = false;
  bool all_required_conformant = true;
  for (const std::string& profile : all_profiles()) {
    if (!selected.contains(profile)) continue;
    ProfileVerdict verdict{profile, ProfileResult::kNotRun, profile == "core" || declared.contains(profile), {}, {}};
    bool must_failed = false;
    bool must_not_run = false;
    bool anything_ran = false;
    bool should_failed = false;
    for (const RequirementResult& result : judgement.requirements) {
      if (result.requirement.profile != profile) continue;
      ++verdict.counts[to_string(result.status)];
      const bool must = result.requirement.level == "MUST";
      anything_ran |= result.status == RequirementStatus::kPass || result.status == RequirementStatus::kFail;
      if (result.status == RequirementStatus::kFail) (must ? must_failed : should_failed) = true;
      const bool skipped_while_declared = verdict.declared && result.status == RequirementStatus::kNotApplicable &&
                                          !result.requirement.justified;
      if (must && (result.status == RequirementStatus::kNotRun || skipped_while_declared)) {
        must_not_run = true;
      }
    }
    if (must_failed) {
      verdict.result = ProfileResult::kNotConformant;
    } else if (!anything_ran) {
      verdict.result = ProfileResult::kNotRun;
      if (!verdict.declared) verdict.note = "the adapter does not declare this profile's capability";
    } else if (must_not_run) {
      verdict.result = ProfileResult::kPartial;
      verdict.note = "some MUST requirements did not run";
    } else {
      verdict.result = ProfileResult::kConformant;
    }
    if (should_failed) verdict.note += (verdict.note.empty() ? "" : "; ") + std::string("a SHOULD requirement failed");
    any_not_conformant |= verdict.result == ProfileResult::kNotConformant;
    if (verdict.declared && verdict.result != ProfileResult::kConformant) all_required_conformant = false;
    judgement.verdict.profiles.push_back(std::move(verdict));
  }
  // A failure the report cannot charge to any requirement still fails the run.
  const bool unattributed_failure = std::any_of(tests.begin(), tests.end(), [](const TestResult& test) {
    return is_failure(test.status) && test.requirements.empty();
  });
  const bool core_judged = selected.contains("core");
  if (any_not_conformant || unattributed_failure) {
    judgement.verdict.overall = ProfileResult::kNotConformant;
  } else if (all_required_conformant && core_judged) {
    judgement.verdict.overall = ProfileResult::kConformant;
  } else if (std::none_of(judgement.verdict.profiles.begin(), judgement.verdict.profiles.end(),
                          [](const ProfileVerdict& v) { return v.result != ProfileResult::kNotRun; })) {
    judgement.verdict.overall = ProfileResult::kNotRun;
  } else {
    judgement.verdict.overall = ProfileResult::kPartial;
  }
  return judgement;
}

nlohmann::json to_json(const Report& report) {
  using nlohmann::json;
  json tests = json::array();
  for (const TestResult& test : report.tests) {
    json failures = json::array();
    for (const Failure& failure : test.failures) {
      failures.push_back({{"file", failure.file}, {"line", failure.line}, {"message", failure.message}});
    }
    json entry = {{"id", test.id},
                  {"requirements", test.requirements},
                  {"status", to_string(test.status)},
                  {"duration_s", test.duration_s},
                  {"failures", failures}};
    if (!test.skip_reason.empty()) entry["skip_reason"] = test.skip_reason;
    if (test.seed) entry["seed"] = *test.seed;
    if (test.reproduce) entry["reproduce"] = *test.reproduce;
    tests.push_back(std::move(entry));
  }
  json requirements = json::array();
  for (const RequirementResult& result : report.judgement.requirements) {
    requirements.push_back({{"id", result.requirement.id},
                            {"level", result.requirement.level},
                            {"profile", result.requirement.profile},
                            {"title", result.requirement.title},
                            {"status", to_string(result.status)},
                            {"tests", result.tests}});
  }
  json profiles = json::array();
  for (const ProfileVerdict& verdict : report.judgement.verdict.profiles) {
    json profile = {{"name", verdict.name},
                    {"result", to_string(verdict.result)},
                    {"declared", verdict.declared},
                    {"counts", verdict.counts}};
    if (!verdict.note.empty()) profile["note"] = verdict.note;
    profiles.push_back(std::move(profile));
  }
  return {{"schema", {{"id", kSchemaId}, {"version", kSchemaVersion}}},
          {"kit", report.kit},
          {"adapter", report.adapter},
          {"environment", report.environment},
          {"run", report.run},
          {"verdict", {{"overall", to_string(report.judgement.verdict.overall)}, {"profiles", profiles}}},
          {"requirements", requirements},
          {"tests", tests},
          {"waivers", json::array()}};
}

std::optional<std::string> write_atomically(const std::string& path, const nlohmann::json& document) {
  const std::string temporary = path + ".partial." + std::to_string(::getpid());
  {
    std::ofstream out(temporary, std::ios::trunc);
    if (!out) return "cannot create " + temporary + ": " + std::strerror(errno);
    out << document.dump(2) << '\n';
    out.flush();
    if (!out) {
      std::remove(temporary.c_str());
      return "cannot write " + temporary + ": " + std::strerror(errno);
    }
  }
  if (std::rename(temporary.c_str(), path.c_str()) != 0) {
    const std::string reason = std::strerror(errno);
    std::remove(temporary.c_str());
    return "cannot rename " + temporary + " to " + path + ": " + reason;
  }
  return std::nullopt;
}

}  // namespace ortmem::report
