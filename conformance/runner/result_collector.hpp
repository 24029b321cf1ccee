// result_collector.hpp: turns GoogleTest events into report test results.
//
// The collector replaces GoogleTest's console printer: it records each test
// with the requirement ids it named (its "requirements" property), its status
// (a skip whose message starts with "not-applicable: " is not-applicable), its
// duration and every failure with file:line, and prints one progress line on
// a terminal. A watchdog may ask it, from another thread, which test is
// running and for how long, and record that test as timed out.
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "ortmem/report/report.hpp"

namespace ortmem::cts {

class ResultCollector final : public ::testing::EmptyTestEventListener {
 public:
  ResultCollector(std::string adapter, std::uint64_t seed, bool progress)
      : adapter_(std::move(adapter)), seed_(seed), progress_(progress) {}

  void OnTestProgramStart(const ::testing::UnitTest& unit) override;
  void OnTestStart(const ::testing::TestInfo& info) override;
  void OnTestEnd(const ::testing::TestInfo& info) override;
  void OnTestProgramEnd(const ::testing::UnitTest& unit) override;

  struct Running {
    std::string id;
    std::chrono::steady_clock::time_point started;
  };
  // The test now running, if any.
  [[nodiscard]] std::optional<Running> running() const;
  // Records the running test as timed out; later events are ignored.
  void record_timeout(double limit_s);
  [[nodiscard]] std::vector<report::TestResult> results() const;

 private:
  void add(report::TestResult result);

  const std::string adapter_;
  const std::uint64_t seed_;
  const bool progress_;
  mutable std::mutex mutex_;
  int total_ = 0;
  int failed_ = 0;
  bool frozen_ = false;
  std::optional<Running> running_;
  std::vector<report::TestResult> results_;
};

// "Suite.Name/param" for a GoogleTest test.
[[nodiscard]] std::string test_id(const ::testing::TestInfo& info);
// The requirement ids the source of test `id` names (see static_coverage.hpp).
[[nodiscard]] std::vector<std::string> static_requirements(std::string_view id);

}  // namespace ortmem::cts
