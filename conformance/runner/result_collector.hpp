// result_collector.hpp: turns GoogleTest events into report test results.
//
// The collector replaces GoogleTest's console printer: it records each test
// with the requirement ids it named (its "requirements" property), its status
// (a skip whose message starts with "not-applicable: " is not-applicable), its
// duration, every failure with file:line, and for a failing test the command
// that runs it again. Each start and result also goes to the sink, which
// journals it (the runner) or streams it to the parent (a test child). A
// watchdog may ask it, from another thread, which test is running and for how
// long, and record that test as timed out; every member is guarded by one
// mutex for that reason.
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "inherited_settings.hpp"
#include "ortmem/detail/mutex.hpp"
#include "ortmem/detail/thread_annotations.hpp"
#include "ortmem/report/report.hpp"

namespace ortmem::cts {

// Where the collector sends what it sees as it happens.
class ResultSink {
 public:
  virtual ~ResultSink() = default;
  virtual void test_started(const std::string& id) = 0;
  virtual void test_finished(const report::TestResult& result) = 0;
  // Called now and then while tests run, from the scheduler or watchdog.
  virtual void heartbeat() {}
};

// How a test is run again: the program, adapter and seed, plus its id.
struct ReproduceCommand {
  std::string program;
  std::string adapter;
  std::uint64_t seed = 0;
  ModelBudget budget{kDefaultModelRuns, kDefaultModelLength};

  [[nodiscard]] std::string for_test(const std::string& id) const;
};

class ResultCollector final : public ::testing::EmptyTestEventListener {
 public:
  ResultCollector(ReproduceCommand reproduce, ResultSink* sink) : reproduce_(std::move(reproduce)), sink_(sink) {}

  void OnTestStart(const ::testing::TestInfo& info) override;
  void OnTestEnd(const ::testing::TestInfo& info) override;

  struct Running {
    std::string id;
    std::chrono::steady_clock::time_point started;
  };
  // The test now running, if any.
  [[nodiscard]] std::optional<Running> running() const;
  // Records test `id` as timed out if it is still the one running, and then
  // ignores later events; returns whether it did. (The watchdog's view of the
  // running test may be stale by the time it decides.)
  bool record_timeout(const std::string& id, double limit_s);
  [[nodiscard]] std::vector<report::TestResult> results() const;

 private:
  void add(report::TestResult result);

  const ReproduceCommand reproduce_;
  ResultSink* const sink_;  // may be null
  mutable detail::Mutex mutex_;
  bool frozen_ ORTMEM_GUARDED_BY(mutex_) = false;
  std::optional<Running> running_ ORTMEM_GUARDED_BY(mutex_);
  std::vector<report::TestResult> results_ ORTMEM_GUARDED_BY(mutex_);
};

// A failed assertion as the report records it, charged to the requirements
// its innermost ORTMEM_CTS_CHECKING / ORTMEM_CTS_PRECONDITION scope (or
// tagged RapidCheck failure) names; untagged, to every id of its test.
[[nodiscard]] report::Failure attributed_failure(const ::testing::TestPartResult& part);
// "Suite.Name/param" for a GoogleTest test.
[[nodiscard]] std::string test_id(const ::testing::TestInfo& info);
// The requirement ids the source of test `id` names (see static_coverage.hpp).
[[nodiscard]] std::vector<std::string> static_requirements(std::string_view id);

}  // namespace ortmem::cts
