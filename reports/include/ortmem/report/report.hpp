// ortmem/report/report.hpp: the certification report and how it is judged.
//
// A run produces one Report: who was tested (adapter), with what (kit,
// environment, run), what every test did, and what that means per
// requirement and per profile. judge() is the only place that turns test
// results into verdicts, so the runner, `report verify` and CI read the same
// rules:
//   - a requirement fails when any test naming it failed; passes when at least
//     one passed and none failed; is not-applicable when all its tests were
//     (the adapter does not declare the capability) or it has none and the
//     spec justifies why it cannot be violated observably; otherwise not-run.
//   - a profile is not-conformant when a MUST requirement failed; partial when
//     a MUST requirement did not run; not-run when nothing ran; else
//     conformant. A failing SHOULD is reported but does not fail a profile.
//   - core never skips: a core profile that is not fully run is partial.
//   - overall: not-conformant if any profile is, or a test that names no
//     requirement failed; conformant only when core
//     and every profile the adapter declares are conformant; else partial.
// Report keys are a public interface (tools read them); see
// reports/schema/report.schema.json.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace ortmem::report {

inline constexpr const char* kSchemaId = "https://ortmem-cts.invalid/schema/report.schema.json";
inline constexpr const char* kSchemaVersion = "1.0.0";

enum class TestStatus { kPass, kFail, kNotApplicable, kSkipped, kCrash, kTimeout, kWaived, kError };
enum class RequirementStatus { kPass, kFail, kNotApplicable, kNotRun, kWaived };
enum class ProfileResult { kConformant, kNotConformant, kPartial, kNotRun };

// Every profile, in report order: core, pins, deferred, virtual, shared.
[[nodiscard]] const std::vector<std::string>& all_profiles();

[[nodiscard]] std::string to_string(TestStatus status);
[[nodiscard]] std::string to_string(RequirementStatus status);
[[nodiscard]] std::string to_string(ProfileResult result);

struct Failure {
  std::string file;
  int line = 0;
  std::string message;
};

struct TestResult {
  std::string id;
  std::vector<std::string> requirements;
  TestStatus status = TestStatus::kPass;
  double duration_s = 0;
  std::vector<Failure> failures;
  std::string skip_reason;
  // Property tests: the seed and a command that reproduces the run.
  std::optional<std::uint64_t> seed;
  std::optional<std::string> reproduce;
};

// One requirement of the spec, as the report needs it.
struct SpecRequirement {
  std::string id;
  std::string level;    // MUST, SHOULD, MAY
  std::string profile;  // core, pins, deferred, virtual, shared
  std::string title;
  // The spec explains why no implementation can violate it observably.
  bool justified = false;
};

struct RequirementResult {
  SpecRequirement requirement;
  RequirementStatus status = RequirementStatus::kNotRun;
  std::vector<std::string> tests;
};

struct ProfileVerdict {
  std::string name;
  ProfileResult result = ProfileResult::kNotRun;
  bool declared = false;
  std::map<std::string, int> counts;  // per requirement status
  std::string note;
};

struct Verdict {
  ProfileResult overall = ProfileResult::kNotRun;
  std::vector<ProfileVerdict> profiles;
};

struct Judgement {
  std::vector<RequirementResult> requirements;
  Verdict verdict;
};

// `declared_profiles`: core plus those whose capability the adapter declares.
// `selected_profiles`: the ones this run was asked to judge (empty: all).
[[nodiscard]] Judgement judge(const std::vector<SpecRequirement>& spec, const std::vector<TestResult>& tests,
                              const std::vector<std::string>& declared_profiles,
                              const std::vector<std::string>& selected_profiles);

// The sections the runner fills in as it goes; judgement is added by to_json.
struct Report {
  nlohmann::json kit;
  nlohmann::json adapter;
  nlohmann::json environment;
  nlohmann::json run;
  std::vector<TestResult> tests;
  Judgement judgement;
};

[[nodiscard]] nlohmann::json to_json(const Report& report);

// Writes `document` to `path` through a temporary file in the same directory
// and a rename, so readers never see a half-written report. Returns an error
// message on failure (and leaves no temporary file behind).
[[nodiscard]] std::optional<std::string> write_atomically(const std::string& path, const nlohmann::json& document);

}  // namespace ortmem::report
