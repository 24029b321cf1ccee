// run_recorder.hpp: what the runner does with each result as it arrives:
// journal it (journal.hpp) and show progress.
//
// Progress goes to stderr and never to a report. On a terminal: one line,
// rewritten, with the counts and the test now running. In a CI log (no
// terminal): one line per finished suite, and a heartbeat line when ten
// seconds pass without one, so a slow run never looks hung. --quiet: nothing.
// Called from the test thread, the scheduler and, once, the in-process
// watchdog, so every member is guarded by one lock.
#pragma once

#include <chrono>
#include <optional>
#include <string>

#include "ortmem/detail/mutex.hpp"
#include "ortmem/detail/thread_annotations.hpp"
#include "ortmem/report/journal.hpp"
#include "result_collector.hpp"

namespace ortmem::cts {

class RunRecorder final : public ResultSink {
 public:
  // `suites_in_sequence`: the tests run one suite after another in one
  // process, so a new suite starting means the last one is done.
  RunRecorder(std::optional<report::Journal> journal, std::size_t total, bool quiet, bool suites_in_sequence);

  void test_started(const std::string& id) override;
  void test_finished(const report::TestResult& result) override;
  void heartbeat() override;
  void group_done(const std::string& group);
  // Called once the report is written (or the run gave up).
  void close(bool keep_journal);

 private:
  void announce(const std::string& what) ORTMEM_REQUIRES(mutex_);
  void redraw() ORTMEM_REQUIRES(mutex_);

  using Clock = std::chrono::steady_clock;
  detail::Mutex mutex_;
  std::optional<report::Journal> journal_ ORTMEM_GUARDED_BY(mutex_);
  const std::size_t total_;
  const bool quiet_;
  const bool terminal_;
  const bool suites_in_sequence_;
  const Clock::time_point started_ = Clock::now();
  Clock::time_point last_line_ ORTMEM_GUARDED_BY(mutex_) = Clock::now();
  std::size_t done_ ORTMEM_GUARDED_BY(mutex_) = 0;
  std::size_t failed_ ORTMEM_GUARDED_BY(mutex_) = 0;
  bool journal_failed_ ORTMEM_GUARDED_BY(mutex_) = false;
  std::string current_suite_ ORTMEM_GUARDED_BY(mutex_);
  std::string running_ ORTMEM_GUARDED_BY(mutex_);
};

}  // namespace ortmem::cts
