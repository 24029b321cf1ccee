#include "ortmem/report/report_json.hpp"

#include <climits>
#include <set>
#include <utility>

namespace ortmem::report {
namespace {

using nlohmann::json;

// Thrown inside the reader only; report_from_json turns it into an error value.
struct ReadError {
  std::string message;
};

// One JSON object being read, with the path that names it in errors.
class Fields {
 public:
  Fields(const json& object, std::string path) : object_(object), path_(std::move(path)) {
    if (!object_.is_object()) throw ReadError{where() + "is not an object"};
  }

  [[nodiscard]] const json& at(const char* key) const {
    const auto found = object_.find(key);
    if (found == object_.end()) throw ReadError{where() + "has no '" + key + "'"};
    return *found;
  }
  [[nodiscard]] bool has(const char* key) const { return object_.contains(key); }
  [[nodiscard]] std::string path(const char* key) const { return path_.empty() ? key : path_ + "." + key; }

  [[nodiscard]] std::string string(const char* key) const { return expect(at(key), json::value_t::string, key); }
  [[nodiscard]] std::string optional_string(const char* key) const { return has(key) ? string(key) : ""; }
  [[nodiscard]] bool boolean(const char* key) const { return expect(at(key), json::value_t::boolean, key); }
  [[nodiscard]] double number(const char* key) const {
    const json& value = at(key);
    if (!value.is_number()) throw ReadError{path(key) + ": expected a number"};
    return value.get<double>();
  }
  [[nodiscard]] std::int64_t integer(const char* key) const {
    const json& value = at(key);
    if (!value.is_number_integer()) throw ReadError{path(key) + ": expected an integer"};
    return value.get<std::int64_t>();
  }
  // A count, line or size that fits an int: never silently truncated.
  [[nodiscard]] int small_integer(const char* key, int minimum) const {
    const std::int64_t value = integer(key);
    if (value < minimum || value > INT_MAX) {
      throw ReadError{path(key) + ": " + std::to_string(value) + " is out of range"};
    }
    return static_cast<int>(value);
  }
  [[nodiscard]] std::uint64_t unsigned_integer(const char* key) const {
    const json& value = at(key);
    if (!value.is_number_unsigned() && !(value.is_number_integer() && value.get<std::int64_t>() >= 0)) {
      throw ReadError{path(key) + ": expected a non-negative integer"};
    }
    return value.get<std::uint64_t>();
  }
  [[nodiscard]] const json& array(const char* key) const {
    const json& value = at(key);
    if (!value.is_array()) throw ReadError{path(key) + ": expected an array"};
    return value;
  }
  [[nodiscard]] std::vector<std::string> strings(const char* key) const {
    std::vector<std::string> values;
    const json& items = array(key);
    for (std::size_t i = 0; i < items.size(); ++i) {
      if (!items[i].is_string()) throw ReadError{path(key) + "[" + std::to_string(i) + "]: expected a string"};
      values.push_back(items[i].get<std::string>());
    }
    return values;
  }
  template <class Enum>
  [[nodiscard]] Enum status(const char* key, std::optional<Enum> (*parse)(std::string_view), const char* kind) const {
    const std::string name = string(key);
    const auto value = parse(name);
    if (!value) throw ReadError{path(key) + ": '" + name + "' is not " + kind};
    return *value;
  }

 private:
  [[nodiscard]] std::string where() const { return path_.empty() ? "the report " : path_ + " "; }
  const json& expect(const json& value, json::value_t type, const char* key) const {
    if (value.type() != type) {
      throw ReadError{path(key) + ": expected a " + (type == json::value_t::string ? "string" : "boolean")};
    }
    return value;
  }

  const json& object_;
  std::string path_;
};

std::string indexed(const std::string& path, std::size_t index) { return path + "[" + std::to_string(index) + "]"; }

TestResult read_test(const json& object, const std::string& path) {
  const Fields fields(object, path);
  TestResult test;
  test.id = fields.string("id");
  if (test.id.empty()) throw ReadError{fields.path("id") + ": is empty"};
  test.requirements = fields.strings("requirements");
  test.status = fields.status<TestStatus>("status", test_status_named, "a test status");
  test.duration_s = fields.number("duration_s");
  if (test.duration_s < 0) throw ReadError{fields.path("duration_s") + ": is negative"};
  const json& failures = fields.array("failures");
  for (std::size_t i = 0; i < failures.size(); ++i) {
    const Fields failure(failures[i], indexed(fields.path("failures"), i));
    test.failures.push_back({failure.string("file"), failure.small_integer("line", 0), failure.string("message"), {}});
    if (failure.has("requirements")) test.failures.back().requirements = failure.strings("requirements");
  }
  test.skip_reason = fields.optional_string("skip_reason");
  if (fields.has("seed")) test.seed = fields.unsigned_integer("seed");
  if (fields.has("reproduce")) test.reproduce = fields.string("reproduce");
  if (fields.has("runs")) {
    test.runs = fields.small_integer("runs", 1);
    test.failed_runs = fields.small_integer("failed_runs", 0);
    if (test.failed_runs > test.runs) throw ReadError{fields.path("failed_runs") + ": more than runs"};
  }
  if (test.status == TestStatus::kWaived || fields.has("actual_status")) {
    // A waived test must say what really happened; only a failure is waived.
    test.actual_status = fields.status<TestStatus>("actual_status", test_status_named, "a test status");
    test.waiver_reason = fields.string("waiver_reason");
    if (test.status != TestStatus::kWaived || !is_failure(*test.actual_status)) {
      throw ReadError{fields.path("actual_status") + ": only a waived test has one, and it is a failure"};
    }
  }
  return test;
}

Report read_report(const json& document) {
  const Fields root(document, "");
  const Fields schema(root.at("schema"), "schema");
  if (schema.string("id") != kSchemaId)
    throw ReadError{"schema.id: not an ortmem-cts report (" + schema.string("id") + ")"};
  const std::string version = schema.string("version");
  if (!version.starts_with("1.")) {
    throw ReadError{"schema.version: " + version + " is not a 1.x report; this kit reads " + kSchemaVersion};
  }

  Report report;
  const Fields kit(root.at("kit"), "kit");
  report.kit = {kit.string("name"),
                kit.string("version"),
                kit.string("git_sha"),
                kit.string("spec_version"),
                kit.has("git_dirty") && kit.boolean("git_dirty"),
                kit.optional_string("build_type"),
                kit.optional_string("binary_sha256")};
  const Fields adapter(root.at("adapter"), "adapter");
  report.adapter = {adapter.string("name"),   adapter.string("version"),       adapter.string("vendor"),
                    adapter.string("device"), adapter.strings("capabilities"), std::nullopt};
  if (adapter.has("origin")) {
    const Fields origin(adapter.at("origin"), "adapter.origin");
    // A 1.4.0 origin has no controls: plugins then offered none.
    report.adapter.origin = AdapterOrigin{
        origin.string("interface"), origin.string("path"), origin.string("sha256"), origin.string("mechanism"),
        origin.has("controls") ? origin.strings("controls") : std::vector<std::string>{}};
  }
  const Fields environment(root.at("environment"), "environment");
  report.environment = {environment.string("os"),
                        environment.string("kernel"),
                        environment.optional_string("machine"),
                        environment.string("cpu"),
                        environment.has("cpus") ? environment.small_integer("cpus", 0) : 0,
                        environment.string("compiler")};

  const Fields run(root.at("run"), "run");
  RunSection& section = report.run;
  section.id = run.string("id");
  section.start = run.string("start");
  section.end = run.string("end");
  section.duration_s = run.number("duration_s");
  section.seed = run.unsigned_integer("seed");
  if (run.has("model_runs")) section.model_runs = run.unsigned_integer("model_runs");
  if (run.has("model_length")) section.model_length = run.unsigned_integer("model_length");
  section.filter = run.string("filter");
  section.profiles = run.strings("profiles");
  section.shard = run.optional_string("shard");
  section.isolation = run.string("isolation");
  if (run.has("jobs")) section.jobs = run.small_integer("jobs", 1);
  if (run.has("timeout_s")) section.timeout_s = run.number("timeout_s");
  if (run.has("repeat")) section.repeat = run.small_integer("repeat", 1);
  if (run.has("stress")) section.stress = run.boolean("stress");
  section.command_line = run.string("command_line");
  if (run.has("scope")) {
    const Fields scope(run.at("scope"), "run.scope");
    section.scope.subset = scope.boolean("subset");
    section.scope.incomplete = scope.boolean("incomplete");
    section.scope.filtered = scope.has("filtered") ? scope.boolean("filtered") : section.scope.subset;
  }
  section.interruption = run.optional_string("interruption");

  const Fields verdict(root.at("verdict"), "verdict");
  report.judgement.verdict.overall = verdict.status<ProfileResult>("overall", profile_result_named, "a verdict");
  const json& profiles = verdict.array("profiles");
  for (std::size_t i = 0; i < profiles.size(); ++i) {
    const Fields profile(profiles[i], indexed("verdict.profiles", i));
    ProfileVerdict entry{profile.string("name"),
                         profile.status<ProfileResult>("result", profile_result_named, "a verdict"),
                         profile.boolean("declared"),
                         {},
                         profile.optional_string("note")};
    const Fields counts(profile.at("counts"), profile.path("counts"));
    for (const auto& [status, count] : profile.at("counts").items()) {
      if (!requirement_status_named(status))
        throw ReadError{counts.path(status.c_str()) + ": not a requirement status"};
      entry.counts[status] = counts.small_integer(status.c_str(), 0);
    }
    report.judgement.verdict.profiles.push_back(std::move(entry));
  }

  const json& requirements = root.array("requirements");
  for (std::size_t i = 0; i < requirements.size(); ++i) {
    const Fields requirement(requirements[i], indexed("requirements", i));
    RequirementResult entry;
    entry.requirement = {requirement.string("id"), requirement.string("level"), requirement.string("profile"),
                         requirement.optional_string("title")};
    entry.requirement.remedy = requirement.optional_string("remedy");
    if (requirement.has("needs")) entry.requirement.needs = requirement.strings("needs");
    entry.requirement.applies_with = requirement.optional_string("applies_with");
    entry.status = requirement.status<RequirementStatus>("status", requirement_status_named, "a requirement status");
    entry.tests = requirement.strings("tests");
    report.judgement.requirements.push_back(std::move(entry));
  }
  const json& tests = root.array("tests");
  for (std::size_t i = 0; i < tests.size(); ++i) report.tests.push_back(read_test(tests[i], indexed("tests", i)));
  const json& waivers = root.array("waivers");
  for (std::size_t i = 0; i < waivers.size(); ++i) {
    const Fields waiver(waivers[i], indexed("waivers", i));
    static const std::set<std::string> kExpected = {"fail", "crash", "timeout", "error", "failure"};
    static const std::set<std::string> kStates = {"applied", "unexpected-pass", "other-outcome", "stale"};
    Waiver entry{waiver.string("test"),     waiver.string("requirement"), waiver.string("adapter"),
                 waiver.string("expected"), waiver.string("reason"),      waiver.optional_string("url"),
                 waiver.string("state"),    waiver.strings("tests")};
    if (!kExpected.contains(entry.expected))
      throw ReadError{waiver.path("expected") + ": '" + entry.expected + "' is not a failure kind"};
    if (!kStates.contains(entry.state))
      throw ReadError{waiver.path("state") + ": '" + entry.state + "' is not a waiver state"};
    report.waivers.push_back(std::move(entry));
  }
  return report;
}

}  // namespace

Expected<json, std::string> parse_untrusted_json(std::string_view text) {
  constexpr int kMaxDepth = 64;
  // Depth first, with a linear scan: the parser itself would build the whole
  // bomb before a callback could see its depth.
  int depth = 0;
  bool in_string = false;
  std::size_t line = 1;
  for (std::size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (c == '\n') ++line;
    if (in_string) {
      if (c == '\\')
        ++i;
      else if (c == '"')
        in_string = false;
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (++depth > kMaxDepth) return fail("line " + std::to_string(line) + ": nested more than 64 levels deep");
    } else if (c == ']' || c == '}') {
      --depth;
    }
  }
  struct DuplicateKey {
    std::string key;
  };
  std::vector<std::set<std::string>> keys;
  const auto refuse_duplicates = [&keys](int, json::parse_event_t event, json& parsed) {
    if (event == json::parse_event_t::object_start) keys.emplace_back();
    if (event == json::parse_event_t::object_end && !keys.empty()) keys.pop_back();
    if (event == json::parse_event_t::key && !keys.empty() && !keys.back().insert(parsed.get<std::string>()).second) {
      throw DuplicateKey{parsed.get<std::string>()};
    }
    return true;
  };
  try {
    return json::parse(text, refuse_duplicates);
  } catch (const DuplicateKey& duplicate) {
    return fail("the key '" + duplicate.key + "' appears twice in one object");
  } catch (const json::exception& error) {
    // parse_error, and out_of_range for a number past a double (3e+9999).
    return fail(std::string("not JSON: ") + error.what());
  }
}

std::string dump_json(const json& document, int indent) {
  return document.dump(indent, ' ', /*ensure_ascii=*/false, json::error_handler_t::replace);
}

json to_json(const TestResult& test) {
  json failures = json::array();
  for (const Failure& failure : test.failures) {
    json entry = {{"file", failure.file}, {"line", failure.line}, {"message", failure.message}};
    if (failure.requirements) entry["requirements"] = *failure.requirements;
    failures.push_back(std::move(entry));
  }
  json entry = {{"id", test.id},
                {"requirements", test.requirements},
                {"status", to_string(test.status)},
                {"duration_s", test.duration_s},
                {"failures", std::move(failures)}};
  if (!test.skip_reason.empty()) entry["skip_reason"] = test.skip_reason;
  if (test.seed) entry["seed"] = *test.seed;
  if (test.reproduce) entry["reproduce"] = *test.reproduce;
  if (test.runs > 1) {
    entry["runs"] = test.runs;
    entry["failed_runs"] = test.failed_runs;
  }
  if (test.actual_status) {
    entry["actual_status"] = to_string(*test.actual_status);
    entry["waiver_reason"] = test.waiver_reason;
  }
  return entry;
}

Expected<TestResult, std::string> test_result_from_json(const json& document) {
  try {
    return read_test(document, "test");
  } catch (const ReadError& error) {
    return fail(error.message);
  } catch (const json::exception& error) {
    return fail(std::string("test: ") + error.what());
  }
}

json to_json(const Report& report) {
  json tests = json::array();
  for (const TestResult& test : report.tests) tests.push_back(to_json(test));
  json requirements = json::array();
  for (const RequirementResult& result : report.judgement.requirements) {
    requirements.push_back({{"id", result.requirement.id},
                            {"level", result.requirement.level},
                            {"profile", result.requirement.profile},
                            {"title", result.requirement.title},
                            {"status", to_string(result.status)},
                            {"tests", result.tests}});
    if (!result.requirement.remedy.empty()) requirements.back()["remedy"] = result.requirement.remedy;
    if (!result.requirement.needs.empty()) requirements.back()["needs"] = result.requirement.needs;
    if (!result.requirement.applies_with.empty()) requirements.back()["applies_with"] = result.requirement.applies_with;
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
  json waivers = json::array();
  for (const Waiver& waiver : report.waivers) {
    waivers.push_back({{"test", waiver.test},
                       {"requirement", waiver.requirement},
                       {"adapter", waiver.adapter},
                       {"expected", waiver.expected},
                       {"reason", waiver.reason},
                       {"url", waiver.url},
                       {"state", waiver.state},
                       {"tests", waiver.tests}});
  }
  const RunSection& run = report.run;
  json run_json = {
      {"id", run.id},
      {"start", run.start},
      {"end", run.end},
      {"duration_s", run.duration_s},
      {"seed", run.seed},
      {"model_runs", run.model_runs},
      {"model_length", run.model_length},
      {"filter", run.filter},
      {"profiles", run.profiles},
      {"isolation", run.isolation},
      {"jobs", run.jobs},
      {"timeout_s", run.timeout_s},
      {"repeat", run.repeat},
      {"stress", run.stress},
      {"command_line", run.command_line},
      {"scope",
       {{"subset", run.scope.subset}, {"filtered", run.scope.filtered}, {"incomplete", run.scope.incomplete}}}};
  if (!run.shard.empty()) run_json["shard"] = run.shard;
  if (!run.interruption.empty()) run_json["interruption"] = run.interruption;
  json adapter = {{"name", report.adapter.name},
                  {"version", report.adapter.version},
                  {"vendor", report.adapter.vendor},
                  {"device", report.adapter.device},
                  {"capabilities", report.adapter.capabilities}};
  if (const auto& origin = report.adapter.origin) {
    adapter["origin"] = {{"interface", origin->interface},
                         {"path", origin->path},
                         {"sha256", origin->sha256},
                         {"mechanism", origin->mechanism},
                         {"controls", origin->controls}};
  }
  const EnvironmentSection& environment = report.environment;
  return {{"schema", {{"id", kSchemaId}, {"version", kSchemaVersion}}},
          {"kit",
           {{"name", report.kit.name},
            {"version", report.kit.version},
            {"git_sha", report.kit.git_sha},
            {"git_dirty", report.kit.git_dirty},
            {"spec_version", report.kit.spec_version},
            {"build_type", report.kit.build_type},
            {"binary_sha256", report.kit.binary_sha256}}},
          {"adapter", std::move(adapter)},
          {"environment",
           {{"os", environment.os},
            {"kernel", environment.kernel},
            {"machine", environment.machine},
            {"cpu", environment.cpu},
            {"cpus", environment.cpus},
            {"compiler", environment.compiler}}},
          {"run", std::move(run_json)},
          {"verdict", {{"overall", to_string(report.judgement.verdict.overall)}, {"profiles", std::move(profiles)}}},
          {"requirements", std::move(requirements)},
          {"tests", std::move(tests)},
          {"waivers", std::move(waivers)}};
}

Expected<Report, std::string> report_from_json(const json& document) {
  try {
    return read_report(document);
  } catch (const ReadError& error) {
    return fail(error.message);
  } catch (const json::exception& error) {
    return fail(std::string("the report: ") + error.what());
  }
}

}  // namespace ortmem::report
