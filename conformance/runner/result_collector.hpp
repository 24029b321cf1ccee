// result_collector.hpp: turns GoogleTest events into report test results.
//
// The collector replaces GoogleTest's console printer: it records each test
// with the requirement ids it named (its "requirements" property), its status
// (a skip whose message starts with "not-applicable: " is not-applicable), its
// duration and every failure with file:line, and prints one progress line on
// a terminal.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
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
  void OnTestEnd(const ::testing::TestInfo& info) override;
  void OnTestProgramEnd(const ::testing::UnitTest& unit) override;

  [[nodiscard]] const std::vector<report::TestResult>& results() const { return results_; }

 private:
  std::string adapter_;
  std::uint64_t seed_;
  bool progress_;
  int total_ = 0;
  int failed_ = 0;
  std::vector<report::TestResult> results_;
};

}  // namespace ortmem::cts
