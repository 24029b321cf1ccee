#include "ortmem/report/expectations.hpp"

#include <algorithm>
#include <set>

#include <nlohmann/json.hpp>

#include "ortmem/report/glob.hpp"
#include "ortmem/report/report_json.hpp"

namespace ortmem::report {
namespace {

const std::set<std::string, std::less<>> kKeys = {"test", "requirement", "adapter", "status", "reason", "url"};
const std::set<std::string, std::less<>> kStatuses = {"fail", "crash", "timeout", "error", "failure"};

bool expects(const Expectation& expectation, TestStatus status) {
  return expectation.status == "failure" ? is_failure(status) : expectation.status == to_string(status);
}

bool names(const Expectation& expectation, const TestResult& test) {
  const bool by_requirement =
      expectation.requirement.empty() ||
      std::find(test.requirements.begin(), test.requirements.end(), expectation.requirement) != test.requirements.end();
  return by_requirement && glob_matches(expectation.test, test.id);
}

}  // namespace

Expected<std::vector<Expectation>, std::string> parse_expectations(std::string_view text, const std::string& source) {
  const auto parsed = parse_untrusted_json(text);
  if (!parsed) return fail(source + ": " + parsed.error());
  const nlohmann::json& document = *parsed;
  if (!document.is_object() || !document.contains("expectations") || !document["expectations"].is_array()) {
    return fail(source + ": expected an object {\"expectations\": [...]}");
  }
  std::vector<Expectation> expectations;
  const auto& entries = document["expectations"];
  for (std::size_t i = 0; i < entries.size(); ++i) {
    const std::string where = source + ": expectations[" + std::to_string(i) + "]";
    const auto& entry = entries[i];
    if (!entry.is_object()) return fail(where + ": expected an object");
    Expectation expectation;
    for (const auto& [key, value] : entry.items()) {
      if (!kKeys.contains(key)) {
        return fail(where + ": unknown key '" + key + "' (keys are test, requirement, adapter, status, reason, url)");
      }
      if (!value.is_string()) return fail(where + "." + key + ": expected a string");
    }
    const auto text_of = [&](const char* key, std::string& out) {
      if (entry.contains(key)) out = entry[key].get<std::string>();
    };
    text_of("test", expectation.test);
    text_of("requirement", expectation.requirement);
    text_of("adapter", expectation.adapter);
    text_of("status", expectation.status);
    text_of("reason", expectation.reason);
    text_of("url", expectation.url);
    if (!entry.contains("test") && !entry.contains("requirement")) {
      return fail(where + ": name the tests it expects with 'test', 'requirement' or both");
    }
    if (!kStatuses.contains(expectation.status)) {
      return fail(where + ".status: '" + expectation.status + "' is not fail, crash, timeout, error or failure");
    }
    if (expectation.reason.empty()) return fail(where + ": a 'reason' is required: say why the deviation is expected");
    expectations.push_back(std::move(expectation));
  }
  return expectations;
}

void apply_expectations(const std::vector<Expectation>& expectations, Report& report) {
  for (const Expectation& expectation : expectations) {
    Waiver waiver{expectation.test,
                  expectation.requirement,
                  expectation.adapter,
                  expectation.status,
                  expectation.reason,
                  expectation.url,
                  "stale",
                  {}};
    if (glob_matches(expectation.adapter, report.adapter.name)) {
      bool waived_any = false;
      bool failed_otherwise = false;
      for (TestResult& test : report.tests) {
        if (!names(expectation, test)) continue;
        waiver.tests.push_back(test.id);
        const TestStatus actual = test.actual_status.value_or(test.status);
        if (!expects(expectation, actual)) {
          failed_otherwise |= is_failure(actual);
          continue;
        }
        waived_any = true;
        if (!test.actual_status) {
          test.actual_status = actual;
          test.status = TestStatus::kWaived;
          test.waiver_reason = expectation.reason;
        }
      }
      if (!waiver.tests.empty()) {
        waiver.state = waived_any ? "applied" : failed_otherwise ? "other-outcome" : "unexpected-pass";
      }
    }
    report.waivers.push_back(std::move(waiver));
  }
}

Report replay_waivers(const Report& report) {
  Report replay = report;
  replay.waivers.clear();
  std::vector<Expectation> expectations;
  for (const Waiver& waiver : report.waivers) {
    expectations.push_back(
        {waiver.test, waiver.requirement, waiver.adapter, waiver.expected, waiver.reason, waiver.url});
  }
  for (TestResult& test : replay.tests) {
    if (test.actual_status) test.status = *test.actual_status;
    test.actual_status.reset();
    test.waiver_reason.clear();
  }
  apply_expectations(expectations, replay);
  return replay;
}

}  // namespace ortmem::report
