// libFuzzer target: arbitrary bytes as an expectations file, parsed and
// applied to a small report with every kind of test status. Built and run
// by scripts/fuzz.sh.
#include <cstddef>
#include <cstdint>
#include <string>

#include "ortmem/report/expectations.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace ortmem::report;
  const std::string text(reinterpret_cast<const char*>(data), size);
  auto expectations = parse_expectations(text, "fuzz.json");
  if (!expectations) return 0;
  Report report;
  report.adapter.name = "host";
  int index = 0;
  for (TestStatus status : {TestStatus::kPass, TestStatus::kFail, TestStatus::kCrash, TestStatus::kTimeout,
                            TestStatus::kError, TestStatus::kNotApplicable, TestStatus::kFlaky}) {
    TestResult test;
    test.id = "Adapters/Suite.Test" + std::to_string(index++) + "/host";
    test.requirements = {"ALLOC-00" + std::to_string(index % 3)};
    test.status = status;
    report.tests.push_back(test);
  }
  apply_expectations(*expectations, report);
  judge_report({{"ALLOC-001", "MUST", "core", "a"}}, report);
  return 0;
}
