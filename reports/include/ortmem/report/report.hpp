// ortmem/report/report.hpp: the certification report and how it is judged.
//
// A run produces one Report: who was tested (adapter), with what (kit,
// environment, run), what every test did, and what that means per
// requirement and per profile. judge() is the only place that turns test
// results into verdicts, so the runner, `report recover` and every later
// reader apply the same rules:
//   - a requirement fails when a failed check charges it: a failing test
//     (fail, crash, timeout, error, flaky) counts against the requirements
//     its failed checks name (Failure::requirements), and says nothing of
//     the others it covers (their checks may not have run); a requirement
//     passes when at least one test naming it passed and none failed it; is
//     not-applicable when all its tests were (the adapter does not declare the
//     capability) or it has none and the spec justifies why it cannot be
//     violated observably; otherwise not-run.
//   - a profile is not-conformant when a MUST requirement failed; partial when
//     a MUST requirement did not run; not-run when nothing ran; waived when a
//     MUST requirement failed only in tests an expectation waived; else
//     conformant. A failing SHOULD is reported but does not fail a profile.
//   - overall, in this order: not-conformant when any profile is, or a failed
//     test charged no requirement (it names none, or only its preconditions
//     failed: a failure is a finding whether or not its profile was asked
//     for); incomplete when the run was stopped before
//     it finished; conformant when core and every declared profile are
//     conformant and the run was not a subset (filter, profile selection,
//     shard); not-run when nothing ran; else partial.
// Report keys are a public interface (tools read them); report_json.hpp reads
// and writes them, reports/schema/report.schema.json describes them.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace ortmem::report {

inline constexpr const char* kSchemaId = "https://ortmem-cts.invalid/schema/report.schema.json";
inline constexpr const char* kSchemaVersion = "1.5.0";

// kFlaky: a test run several times (--repeat) that both passed and failed.
enum class TestStatus { kPass, kFail, kNotApplicable, kSkipped, kCrash, kTimeout, kWaived, kError, kFlaky };
// kOutOfScope: its checks need a control the adapter's surface does not
// offer (an nxmem plugin's), so nothing could show it either way.
enum class RequirementStatus { kPass, kFail, kNotApplicable, kNotRun, kWaived, kOutOfScope };
// kIncomplete is an overall result only: the run stopped before it finished.
// kWaived: conformant but for failures that expectations list (expectations.hpp).
enum class ProfileResult { kConformant, kNotConformant, kPartial, kNotRun, kIncomplete, kWaived };

// Every profile, in report order: core, pins, deferred, virtual, shared, abi.
[[nodiscard]] const std::vector<std::string>& all_profiles();
// The profiles an adapter declaring `capabilities` (report names such as
// "context-pins") must pass: core, then one per capability that has a profile.
[[nodiscard]] std::vector<std::string> declared_profiles(const std::vector<std::string>& capabilities);

[[nodiscard]] std::string to_string(TestStatus status);
[[nodiscard]] std::string to_string(RequirementStatus status);
[[nodiscard]] std::string to_string(ProfileResult result);
// The inverses; nullopt for a name that is not one of the statuses.
[[nodiscard]] std::optional<TestStatus> test_status_named(std::string_view name);
[[nodiscard]] std::optional<RequirementStatus> requirement_status_named(std::string_view name);
[[nodiscard]] std::optional<ProfileResult> profile_result_named(std::string_view name);

// A failing test status: one that fails every requirement the test names.
// A flaky test is one: a race that shows once in N runs is still a race.
[[nodiscard]] bool is_failure(TestStatus status);

struct Failure {
  std::string file;
  int line = 0;
  std::string message;
  // The requirements this failed check counts against.
  //   nullopt: the check names none of its own (a crash, a hang, an assertion
  //     outside any ORTMEM_CTS_CHECKING scope, a report older than 1.2.0), so
  //     it counts against every requirement its test names;
  //   empty: a precondition of the test failed (the adapter broke something
  //     the test stands on, which another test charges), so it judges none of
  //     this test's requirements; the run still is not conformant.
  std::optional<std::vector<std::string>> requirements;
};

// "file:line: message", or the message alone when no place is known (a
// crash, a hang, an error of the test process).
[[nodiscard]] std::string located(const Failure& failure);

// A test id is "Suite.Name", "Suite" possibly "Adapters/Suite" and "Name"
// possibly "Case/param": the suite a test belongs to, and the rest.
[[nodiscard]] std::string_view suite_of(std::string_view test_id);
[[nodiscard]] std::string_view name_in_suite(std::string_view test_id);

struct TestResult {
  std::string id;
  std::vector<std::string> requirements;
  TestStatus status = TestStatus::kPass;
  double duration_s = 0;
  std::vector<Failure> failures;
  std::string skip_reason;
  // The seed the test ran with (property tests) and a command that runs
  // exactly this test again (every failing test).
  std::optional<std::uint64_t> seed;
  std::optional<std::string> reproduce;
  // A waived test: what really happened, and why it was expected.
  std::optional<TestStatus> actual_status;
  std::string waiver_reason;
  // How often it ran (--repeat) and how often it failed; 1 and 0 or 1 otherwise.
  int runs = 1;
  int failed_runs = 0;
};

// Whether `failure` of `test` counts against requirement `id`.
[[nodiscard]] bool charges(const Failure& failure, const TestResult& test, std::string_view id);
// Whether the failing or waived `test` counts against requirement `id`: one
// of its failures charges it, or it recorded none (then every id it names).
[[nodiscard]] bool charges(const TestResult& test, std::string_view id);

// One result per test from a run that ran each test several times: all
// runs alike give that status; some passing and some failing give flaky,
// with the first failure's details. Order is that of the first runs.
[[nodiscard]] std::vector<TestResult> combine_repeats(const std::vector<TestResult>& runs);

// One expectation as the report records it, with what it did in this run.
struct Waiver {
  std::string test;         // glob over test ids
  std::string requirement;  // a requirement id, or empty
  std::string adapter;      // glob over adapter names
  std::string expected;     // fail, crash, timeout, error or failure (any of them)
  std::string reason;
  std::string url;
  // applied, unexpected-pass, other-outcome or stale (expectations.hpp).
  std::string state;
  std::vector<std::string> tests;  // the tests it matched
};

// One requirement of the spec, as the report needs it.
struct SpecRequirement {
  std::string id;
  std::string level;    // MUST, SHOULD, MAY
  std::string profile;  // core, pins, deferred, virtual, shared, abi
  std::string title;
  // The spec explains why no implementation can violate it observably.
  bool justified = false;
  // What implementations usually get wrong about it, and the fix: shown
  // beside its failures.
  std::string remedy{};
  // The controls its checks drive (control names such as "fences"): an
  // adapter whose surface lacks one cannot be judged on it.
  std::vector<std::string> needs{};
  // A profile the rule exists only alongside (ABI-007 is about completions,
  // so it applies to a plugin that declares deferred release); empty for
  // a rule of its own profile alone.
  std::string applies_with{};
};

struct RequirementResult {
  SpecRequirement requirement;
  RequirementStatus status = RequirementStatus::kNotRun;
  std::vector<std::string> tests;
  // False when the adapter does not declare the profile the requirement
  // applies with: then it is not applicable without making its profile partial.
  bool applies = true;
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

// What a run covered, as far as the verdict is concerned.
struct Scope {
  // Not every test ran by design: a filter, a profile selection or a shard.
  bool subset = false;
  // The filter or profile selection alone left tests out (a merge of every
  // shard is complete exactly when no shard was filtered).
  bool filtered = false;
  // The run stopped before it finished (interrupted, or recovered from its journal).
  bool incomplete = false;
};

struct AdapterOrigin;

// `declared`: core plus the profiles whose capability the adapter declares.
// `origin`: where a loaded adapter came from, whose controls bound what can
// be judged; null for a compiled-in adapter.
[[nodiscard]] Judgement judge(const std::vector<SpecRequirement>& spec, const std::vector<TestResult>& tests,
                              const std::vector<std::string>& declared, Scope scope,
                              const AdapterOrigin* origin = nullptr);

struct KitSection {
  std::string name = "ortmem-cts";
  std::string version;
  std::string git_sha;
  std::string spec_version;
  bool git_dirty = false;     // built from a tree with uncommitted changes
  std::string build_type;     // CMake's, e.g. RelWithDebInfo
  std::string binary_sha256;  // of the runner that made the report
};

// Where an adapter loaded from a file came from (an nxmem plugin): what ties
// a verdict to one binary.
struct AdapterOrigin {
  std::string interface;  // the ABI and the version negotiated: "nxmem 1.1"
  std::string path;       // the file, as named on the command line
  std::string sha256;     // of that file, as loaded
  std::string mechanism;  // the factory certified
  // The controls the surface offers; a requirement needing any other is out
  // of its scope. (A compiled-in adapter has no origin and offers them all.)
  std::vector<std::string> controls{};
  friend bool operator==(const AdapterOrigin&, const AdapterOrigin&) = default;
};

struct AdapterSection {
  std::string name;
  std::string version;
  std::string vendor;
  std::string device;
  std::vector<std::string> capabilities;
  std::optional<AdapterOrigin> origin = std::nullopt;  // compiled-in adapters have none
};

struct EnvironmentSection {
  std::string os;
  std::string kernel;
  std::string machine;
  std::string cpu;
  long cpus = 0;
  std::string compiler;
};

struct RunSection {
  std::string id;
  std::string start;
  std::string end;
  double duration_s = 0;
  std::uint64_t seed = 0;
  // The model budget (--model-runs, --model-length): with the seed it fixes
  // every command sequence a model-based test tried.
  std::uint64_t model_runs = 100;
  std::uint64_t model_length = 100;
  std::string filter = "*";
  std::vector<std::string> profiles;  // the profiles whose tests were selected
  std::string shard;                  // "I/N", empty when not sharded
  std::string isolation = "group";    // none, group or test
  int jobs = 1;
  double timeout_s = 60;
  int repeat = 1;       // runs of each test
  bool stress = false;  // with background load
  std::string command_line;
  Scope scope;
  // Why the run is incomplete, for people; empty when it finished.
  std::string interruption;
};

struct Report {
  KitSection kit;
  AdapterSection adapter;
  EnvironmentSection environment;
  RunSection run;
  std::vector<TestResult> tests;
  std::vector<Waiver> waivers;
  Judgement judgement;
};

// Judges `report.tests` against `spec` with the adapter's declared profiles
// and the run's scope, and stores the judgement in the report.
void judge_report(const std::vector<SpecRequirement>& spec, Report& report);

}  // namespace ortmem::report
