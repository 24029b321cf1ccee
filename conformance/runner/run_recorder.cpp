#include "run_recorder.hpp"

#include "ortmem/detail/lock_guard.hpp"

#include <unistd.h>

#include <iostream>

#include "test_selection.hpp"

namespace ortmem::cts {
namespace {

constexpr std::chrono::seconds kHeartbeat{10};
constexpr std::size_t kTerminalWidth = 100;

}  // namespace

RunRecorder::RunRecorder(std::optional<report::Journal> journal, std::size_t total, bool quiet, bool suites_in_sequence)
    : journal_(std::move(journal)), total_(total), quiet_(quiet), terminal_(isatty(STDERR_FILENO) != 0),
      suites_in_sequence_(suites_in_sequence) {}

void RunRecorder::test_started(const std::string& id) {
  const detail::LockGuard lock(mutex_);
  running_ = id;
  if (suites_in_sequence_) {
    const std::string suite(suite_of(id));
    if (!current_suite_.empty() && suite != current_suite_) announce(current_suite_ + " done");
    current_suite_ = suite;
  }
  redraw();
}

void RunRecorder::test_finished(const report::TestResult& result) {
  const detail::LockGuard lock(mutex_);
  if (journal_ && !journal_->append(result) && !journal_failed_) {
    journal_failed_ = true;
    std::cerr << "ortmem-cts: warning: cannot append to the journal " << journal_->path()
              << "; the report is still written at the end\n";
  }
  ++done_;
  failed_ += report::is_failure(result.status) ? 1 : 0;
  if (running_ == result.id) running_.clear();
  redraw();
}

void RunRecorder::heartbeat() {
  const detail::LockGuard lock(mutex_);
  if (Clock::now() - last_line_ >= kHeartbeat) announce("still running" + (running_.empty() ? "" : " " + running_));
}

void RunRecorder::group_done(const std::string& group) {
  const detail::LockGuard lock(mutex_);
  announce(group + " done");
}

void RunRecorder::close(bool keep_journal) {
  const detail::LockGuard lock(mutex_);
  if (!current_suite_.empty()) announce(current_suite_ + " done");
  current_suite_.clear();
  if (terminal_ && !quiet_ && done_ > 0) std::cerr << '\n';
  if (journal_ && !keep_journal) journal_->remove();
}

void RunRecorder::announce(const std::string& what) {
  last_line_ = Clock::now();
  // A CI log is no terminal: lines that stay, instead of a counter redrawn.
  if (terminal_ || quiet_) return;
  const double elapsed = std::chrono::duration<double>(last_line_ - started_).count();
  std::cerr << "ortmem-cts: [" << static_cast<int>(elapsed) << " s] " << what << ": " << done_ << "/" << total_
            << " tests, " << failed_ << " failed\n";
}

void RunRecorder::redraw() {
  if (!terminal_ || quiet_) return;
  std::string line = std::to_string(done_) + "/" + std::to_string(total_) + " tests, " + std::to_string(failed_) +
                     " failed" + (running_.empty() ? "" : "  " + running_);
  if (line.size() > kTerminalWidth) line = line.substr(0, kTerminalWidth - 3) + "...";
  std::cerr << "\r\033[K" << line << std::flush;
}

}  // namespace ortmem::cts
