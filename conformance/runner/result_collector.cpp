#include "result_collector.hpp"

#include <iostream>
#include <sstream>

#include "ortmem/cts/suite.hpp"

namespace ortmem::cts {

void ResultCollector::OnTestProgramStart(const ::testing::UnitTest& unit) { total_ = unit.test_to_run_count(); }

void ResultCollector::OnTestEnd(const ::testing::TestInfo& info) {
  const ::testing::TestResult& outcome = *info.result();
  report::TestResult result;
  result.id = std::string(info.test_suite_name()) + "." + info.name();
  for (int i = 0; i < outcome.test_property_count(); ++i) {
    const auto& property = outcome.GetTestProperty(i);
    if (std::string(property.key()) != "requirements") continue;
    std::istringstream ids(property.value());
    for (std::string id; ids >> id;) result.requirements.push_back(id);
  }
  result.duration_s = static_cast<double>(outcome.elapsed_time()) / 1000.0;
  for (int i = 0; i < outcome.total_part_count(); ++i) {
    const auto& part = outcome.GetTestPartResult(i);
    if (part.skipped()) {
      result.skip_reason = part.message();
      continue;
    }
    if (!part.failed()) continue;
    result.failures.push_back({part.file_name() ? part.file_name() : "", part.line_number(), part.summary()});
  }
  if (outcome.Failed()) {
    result.status = report::TestStatus::kFail;
  } else if (outcome.Skipped()) {
    result.status = result.skip_reason.starts_with(kNotApplicable) ? report::TestStatus::kNotApplicable
                                                                   : report::TestStatus::kSkipped;
  }
  if (std::string(info.test_suite_name()).find("Property") != std::string::npos) {
    result.seed = seed_;
    result.reproduce = "ortmem-cts run --adapter " + adapter_ + " --filter '" + result.id + "' --seed " +
                       std::to_string(seed_);
  }
  if (result.status == report::TestStatus::kFail) ++failed_;
  results_.push_back(std::move(result));
  if (progress_) {
    std::cerr << "\r" << results_.size() << "/" << total_ << " tests, " << failed_ << " failed" << std::flush;
  }
}

void ResultCollector::OnTestProgramEnd(const ::testing::UnitTest&) {
  if (progress_) std::cerr << '\n';
}

}  // namespace ortmem::cts
