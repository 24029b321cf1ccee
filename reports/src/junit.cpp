#include <cstdio>
#include <map>
#include <sstream>

#include "ortmem/report/formats.hpp"

namespace ortmem::report {
namespace {

struct Suite {
  std::string name;
  std::vector<const TestResult*> tests;
};

std::vector<Suite> suites_of(const Report& report) {
  std::vector<Suite> suites;
  std::map<std::string, std::size_t> index;
  for (const TestResult& test : report.tests) {
    const std::string name(suite_of(test.id));
    const auto [found, inserted] = index.try_emplace(name, suites.size());
    if (inserted) suites.push_back({name, {}});
    suites[found->second].tests.push_back(&test);
  }
  return suites;
}

std::string joined(const std::vector<std::string>& parts) {
  std::string text;
  for (const auto& part : parts) text += (text.empty() ? "" : " ") + part;
  return text;
}

std::string failure_text(const TestResult& test) {
  std::string text;
  for (const Failure& failure : test.failures) text += located(failure) + "\n";
  if (!test.requirements.empty()) text += "requirements: " + joined(test.requirements) + "\n";
  if (test.reproduce) text += "reproduce: " + *test.reproduce + "\n";
  return text;
}

// xs:decimal has no exponent: 0.000076, never 7.6e-05.
std::string seconds(double value) {
  char text[32];
  std::snprintf(text, sizeof text, "%.6f", value < 0 ? 0.0 : value);
  return text;
}

void property(std::ostringstream& out, const std::string& name, const std::string& value) {
  out << "      <property name=\"" << xml_escape(name) << "\" value=\"" << xml_escape(value) << "\"/>\n";
}

}  // namespace

std::string to_junit_xml(const Report& report) {
  std::ostringstream out;
  out << "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<testsuites>\n";
  // The Ant XSD's timestamp has no zone; the report's start is UTC.
  std::string timestamp = report.run.start;
  if (!timestamp.empty() && timestamp.back() == 'Z') timestamp.pop_back();
  if (timestamp.empty()) timestamp = "1970-01-01T00:00:00";
  int id = 0;
  for (const Suite& suite : suites_of(report)) {
    int failures = 0;
    int errors = 0;
    int skipped = 0;
    double time = 0;
    for (const TestResult* test : suite.tests) {
      const bool asserted = test->status == TestStatus::kFail || test->status == TestStatus::kFlaky;
      failures += asserted ? 1 : 0;
      errors += is_failure(test->status) && !asserted ? 1 : 0;
      skipped += test->status == TestStatus::kNotApplicable || test->status == TestStatus::kSkipped ||
                         test->status == TestStatus::kWaived
                     ? 1
                     : 0;
      time += test->duration_s;
    }
    out << "  <testsuite name=\"" << xml_escape(suite.name) << "\" package=\"ortmem-cts."
        << xml_escape(report.adapter.name) << "\" id=\"" << id++ << "\" timestamp=\"" << xml_escape(timestamp)
        << "\" hostname=\"localhost\" tests=\"" << suite.tests.size() << "\" failures=\"" << failures << "\" errors=\""
        << errors << "\" skipped=\"" << skipped << "\" time=\"" << seconds(time) << "\">\n";
    out << "    <properties>\n";
    property(out, "adapter", report.adapter.name);
    property(out, "run_id", report.run.id);
    property(out, "seed", std::to_string(report.run.seed));
    property(out, "verdict", to_string(report.judgement.verdict.overall));
    for (const TestResult* test : suite.tests) {
      property(out, "requirements:" + std::string(name_in_suite(test->id)), joined(test->requirements));
    }
    out << "    </properties>\n";
    for (const TestResult* test : suite.tests) {
      out << "    <testcase name=\"" << xml_escape(name_in_suite(test->id)) << "\" classname=\""
          << xml_escape(suite.name) << "\" time=\"" << seconds(test->duration_s) << "\"";
      const std::string first = test->failures.empty() ? to_string(test->status) : test->failures.front().message;
      switch (test->status) {
        case TestStatus::kPass: out << "/>\n"; continue;
        case TestStatus::kFail:
        case TestStatus::kFlaky:
        case TestStatus::kCrash:
        case TestStatus::kTimeout:
        case TestStatus::kError: {
          // JUnit tells a check that failed from a test that could not finish.
          const bool failed = test->status == TestStatus::kFail || test->status == TestStatus::kFlaky;
          const std::string_view element = failed ? "failure" : "error";
          out << ">\n      <" << element << " type=\"" << to_string(test->status) << "\" message=\""
              << xml_escape(first.substr(0, 200)) << "\">" << xml_escape(failure_text(*test)) << "</" << element
              << ">\n";
          break;
        }
        case TestStatus::kNotApplicable:
        case TestStatus::kSkipped:
        case TestStatus::kWaived: out << ">\n      <skipped/>\n"; break;
      }
      out << "    </testcase>\n";
    }
    out << "    <system-out></system-out>\n    <system-err></system-err>\n  </testsuite>\n";
  }
  out << "</testsuites>\n";
  return out.str();
}

}  // namespace ortmem::report
