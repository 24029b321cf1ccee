#include "result_collector.hpp"

#include "ortmem/detail/lock_guard.hpp"

#include <algorithm>
#include <iostream>
#include <sstream>

#include "static_coverage.hpp"
#include "support/suite.hpp"

namespace ortmem::cts {

std::string test_id(const ::testing::TestInfo& info) { return std::string(info.test_suite_name()) + "." + info.name(); }

std::string ReproduceCommand::for_test(const std::string& id) const {
  std::string command = program + " run --adapter " + adapter + " --filter '" + id + "' --seed " + std::to_string(seed);
  if (budget.runs != kDefaultModelRuns) command += " --model-runs " + std::to_string(budget.runs);
  if (budget.length != kDefaultModelLength) command += " --model-length " + std::to_string(budget.length);
  return command + " --isolate none";
}

void ResultCollector::OnTestStart(const ::testing::TestInfo& info) {
  const std::string id = test_id(info);
  {
    const detail::LockGuard lock(mutex_);
    running_ = Running{id, std::chrono::steady_clock::now()};
  }
  if (sink_ != nullptr) sink_->test_started(id);
}

namespace {

std::vector<std::string> split_ids(std::string_view text) {
  std::istringstream ids{std::string(text)};
  std::vector<std::string> split;
  for (std::string id; ids >> id;) split.push_back(id);
  return split;
}

std::optional<std::string> property_of(const ::testing::TestResult& outcome, std::string_view key) {
  for (int i = 0; i < outcome.test_property_count(); ++i) {
    const auto& property = outcome.GetTestProperty(i);
    if (property.key() == key) return property.value();
  }
  return std::nullopt;
}

// The ids the test recorded, or, when it failed before recording them, the
// ids its source names ("Adapters/Suite.Name/adapter" -> "Suite.Name").
std::vector<std::string> requirements_of(const ::testing::TestInfo& info) {
  if (const auto ids = property_of(*info.result(), "requirements")) return split_ids(*ids);
  return static_requirements(test_id(info));
}

}  // namespace

report::Failure attributed_failure(const ::testing::TestPartResult& part) {
  // GoogleTest gives line -1 for a failure with no source line (an exception
  // out of the test body); the report's "unknown" is 0, and a child's event
  // with -1 would be unreadable, turning the test into an error.
  report::Failure failure{
      part.file_name() ? part.file_name() : "", std::max(part.line_number(), 0), part.summary(), {}};
  // The innermost tag names the check: RC_FAIL's message comes before the
  // trace, and GoogleTest lists the traces innermost first.
  const std::string_view text = failure.message;
  const auto tag = text.find(kChecksTag);
  const auto precondition = text.find(kPreconditionTag);
  if (precondition != std::string_view::npos && precondition < tag) {
    failure.requirements.emplace();
  } else if (tag != std::string_view::npos) {
    const auto start = tag + kChecksTag.size();
    failure.requirements = split_ids(text.substr(start, text.find(']', start) - start));
  }
  // The trace only carried the tags; the report says the same in its own key.
  if (const auto trace = failure.message.find("\nGoogle Test trace:"); trace != std::string::npos) {
    failure.message.erase(trace);
  }
  return failure;
}

std::vector<std::string> static_requirements(std::string_view id) {
  // "Adapters/Suite.Name/adapter" -> "Suite.Name".
  if (const auto slash = id.find('/'); slash != std::string_view::npos && slash < id.find('.'))
    id.remove_prefix(slash + 1);
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
    result.failures.push_back(attributed_failure(part));
  }
  if (const auto precondition = property_of(outcome, kPreconditionProperty)) {
    // Even a scoped check judged nothing here: what it observed stood on
    // the broken part (a queue check, say, over pins naming another context).
    for (report::Failure& failure : result.failures) {
      failure.requirements.emplace();
      failure.message += " [precondition: " + *precondition + "]";
    }
  }
  if (outcome.Failed()) {
    result.status = report::TestStatus::kFail;
  } else if (outcome.Skipped()) {
    result.status = result.skip_reason.starts_with(kNotApplicable) ? report::TestStatus::kNotApplicable
                                                                   : report::TestStatus::kSkipped;
  }
  // Randomized suites (properties, state machines) carry the seed that replays them.
  const std::string suite = info.test_suite_name();
  if (suite.find("Property") != std::string::npos || suite.find("Model") != std::string::npos) {
    result.seed = reproduce_.seed;
  }
  if (result.seed || report::is_failure(result.status)) result.reproduce = reproduce_.for_test(result.id);
  add(std::move(result));
}

void ResultCollector::add(report::TestResult result) {
  {
    const detail::LockGuard lock(mutex_);
    if (frozen_) return;
    running_.reset();
    results_.push_back(result);
  }
  if (sink_ != nullptr) sink_->test_finished(result);
}

std::optional<ResultCollector::Running> ResultCollector::running() const {
  const detail::LockGuard lock(mutex_);
  return running_;
}

bool ResultCollector::record_timeout(const std::string& id, double limit_s) {
  const detail::LockGuard lock(mutex_);
  if (!running_ || running_->id != id || frozen_) return false;
  report::TestResult result;
  result.id = running_->id;
  // The stuck test named its requirements before it blocked; its thread is
  // not running GoogleTest code while blocked, so reading them here is safe.
  if (const auto* current = ::testing::UnitTest::GetInstance()->current_test_info()) {
    result.requirements = requirements_of(*current);
  }
  result.status = report::TestStatus::kTimeout;
  result.duration_s = limit_s;
  result.failures.push_back({"",
                             0,
                             "the test did not finish within " + std::to_string(limit_s) +
                                 " s (a hang or a blocking call); the run was stopped here",
                             {}});
  result.reproduce = reproduce_.for_test(result.id);
  results_.push_back(result);
  frozen_ = true;  // the stuck test may still end later; its result must not count
  if (sink_ != nullptr) sink_->test_finished(result);
  return true;
}

std::vector<report::TestResult> ResultCollector::results() const {
  const detail::LockGuard lock(mutex_);
  return results_;
}

}  // namespace ortmem::cts
