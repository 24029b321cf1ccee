#include <chrono>
#include <ctime>

#include "ortmem/report/formats.hpp"

namespace ortmem::report {
namespace {

// Milliseconds since the epoch of an ISO 8601 UTC time ("...T...Z"); 0 if unreadable.
std::int64_t epoch_ms(const std::string& iso) {
  std::tm time{};
  if (::strptime(iso.c_str(), "%Y-%m-%dT%H:%M:%SZ", &time) == nullptr) return 0;
  return static_cast<std::int64_t>(::timegm(&time)) * 1000;
}

// Milliseconds of a duration read from a report, clamped so no cast overflows.
std::int64_t milliseconds(double seconds) {
  if (!(seconds > 0)) return 0;
  return seconds > 1e12 ? std::int64_t{1000000000000000} : static_cast<std::int64_t>(seconds * 1000);
}

std::string ctrf_status(TestStatus status) {
  switch (status) {
    case TestStatus::kPass: return "passed";
    case TestStatus::kFail:
    case TestStatus::kFlaky: return "failed";
    case TestStatus::kSkipped: return "skipped";
    default: return "other";
  }
}

}  // namespace

nlohmann::json to_ctrf(const Report& report) {
  using nlohmann::json;
  std::map<std::string, int> counts = {{"passed", 0}, {"failed", 0}, {"skipped", 0}, {"pending", 0}, {"other", 0}};
  json tests = json::array();
  for (const TestResult& test : report.tests) {
    const std::string status = ctrf_status(test.status);
    ++counts[status];
    json entry = {{"name", test.id},
                  {"status", status},
                  {"rawStatus", to_string(test.status)},
                  {"duration", milliseconds(test.duration_s)},
                  {"suite", json::array({std::string(suite_of(test.id))})},
                  {"tags", test.requirements}};
    if (!test.failures.empty()) {
      std::string trace;
      for (const Failure& failure : test.failures) trace += located(failure) + "\n";
      entry["message"] = test.failures.front().message;
      entry["trace"] = trace;
      if (!test.failures.front().file.empty()) {
        entry["filePath"] = test.failures.front().file;
        entry["line"] = test.failures.front().line;
      }
    }
    if (!test.skip_reason.empty()) entry["message"] = test.skip_reason;
    if (test.reproduce) entry["extra"] = {{"reproduce", *test.reproduce}};
    if (test.runs > 1) {
      entry["flaky"] = test.status == TestStatus::kFlaky;
      entry["retries"] = test.runs - 1;
    }
    tests.push_back(std::move(entry));
  }
  const std::int64_t start = epoch_ms(report.run.start);
  const std::int64_t stop = std::max(start, epoch_ms(report.run.end));
  return {{"reportFormat", "CTRF"},
          {"specVersion", "0.0.0"},
          {"runId", report.run.id},
          {"timestamp", report.run.end},
          {"generatedBy", "ortmem-cts " + report.kit.version},
          {"results",
           {{"tool", {{"name", "ortmem-cts"}, {"version", report.kit.version}}},
            {"summary",
             {{"tests", report.tests.size()},
              {"passed", counts["passed"]},
              {"failed", counts["failed"]},
              {"skipped", counts["skipped"]},
              {"pending", counts["pending"]},
              {"other", counts["other"]},
              {"start", start},
              {"stop", stop},
              {"duration", milliseconds(report.run.duration_s)},
              {"extra", {{"verdict", to_string(report.judgement.verdict.overall)}, {"adapter", report.adapter.name}}}}},
            {"tests", std::move(tests)},
            {"environment",
             {{"appName", report.adapter.name},
              {"appVersion", report.adapter.version},
              {"osPlatform", report.environment.os},
              {"osRelease", report.environment.kernel}}}}}};
}

}  // namespace ortmem::report
