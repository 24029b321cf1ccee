#include "result_collector.hpp"

#include <iostream>
#include <sstream>

#include "ortmem/cts/static_coverage.hpp"
#include "ortmem/cts/suite.hpp"

namespace ortmem::cts {

std::string test_id(const ::testing::TestInfo& info) {
  return std::string(info.test_suite_name()) + "." + info.name();
}

void ResultCollector::OnTestProgramStart(const ::testing::UnitTest& unit) {
  const std::lock_guard lock(mutex_);
  total_ = unit.test_to_run_count();
}

void ResultCollector::OnTestStart(const ::testing::TestInfo& info) {
  const std::lock_guard lock(mutex_);
  running_ = Running{test_id(info), std::chrono::steady_clock::now()};
}

namespace {

std::vector<std::string> split_ids(std::string_view text) {
  std::istringstream ids{std::string(text)};
  std::vector<std::string> split;
  for (std::string id; ids >> id;) split.push_back(id);
  return split;
}

// The ids the test recorded, or, when it failed before recording them, the
// ids its source names ("Adapters/Suite.Name/adapter" -> "Suite.Name").
std::vector<std::string> requirements_of(const ::testing::TestInfo& info) {
  const ::testing::TestResult& outcome = *info.result();
  for (int i = 0; i < outcome.test_property_count(); ++i) {
    const auto& property = outcome.GetTestProperty(i);
    if (std::string(property.key()) == "requirements") return split_ids(property.value());
  }
  return static_requirements(test_id(info));
}

}  // namespace

std::vector<std::string> static_requirements(std::string_view id) {
  // "Adapters/Suite.Name/adapter" -> "Suite.Name".
  if (const auto slash = id.find('/'); slash != std::string_view::npos && slash < id.find('.')) id.remove_prefix(slash + 1);
  id = id.substr(0, id.find('/'));
  const auto found = static_coverage().find(id);
  return found == static_coverage().end() ? std::vector<std::string>{} : split_ids(found->second);
}

void ResultCollector::OnTestEnd(const ::testing::TestInfo& info) {
  const ::testing::TestResult& outcome = *info.result();
  report::TestResult result;
  result.id = test_id(info);
  result.requirements = requirements_of(info);
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
  add(std::move(result));
}

void ResultCollector::add(report::TestResult result) {
  const std::lock_guard lock(mutex_);
  if (frozen_) return;
  running_.reset();
  if (result.status == report::TestStatus::kFail) ++failed_;
  results_.push_back(std::move(result));
  if (progress_) {
    std::cerr << "\r" << results_.size() << "/" << total_ << " tests, " << failed_ << " failed" << std::flush;
  }
}

std::optional<ResultCollector::Running> ResultCollector::running() const {
  const std::lock_guard lock(mutex_);
  return running_;
}

void ResultCollector::record_timeout(double limit_s) {
  const std::lock_guard lock(mutex_);
  if (!running_ || frozen_) return;
  report::TestResult result;
  result.id = running_->id;
  // The stuck test named its requirements before it blocked; its thread is
  // not running GoogleTest code while blocked, so reading them here is safe.
  if (const auto* current = ::testing::UnitTest::GetInstance()->current_test_info()) {
    result.requirements = requirements_of(*current);
  }
  result.status = report::TestStatus::kTimeout;
  result.duration_s = limit_s;
  result.failures.push_back({"", 0, "the test did not finish within " + std::to_string(limit_s) +
                                        " s (a hang or a blocking call); the run was stopped here"});
  results_.push_back(std::move(result));
  frozen_ = true;  // the stuck test may still end later; its result must not count
}

std::vector<report::TestResult> ResultCollector::results() const {
  const std::lock_guard lock(mutex_);
  return results_;
}

void ResultCollector::OnTestProgramEnd(const ::testing::UnitTest&) {
  if (progress_) std::cerr << '\n';
}

}  // namespace ortmem::cts
