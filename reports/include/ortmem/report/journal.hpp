// ortmem/report/journal.hpp: a run's results as they finish, so that no kill
// can lose them.
//
// While a run writes a report to PATH it keeps PATH.journal: one JSON line
// saying what is being certified (the report so far, without tests), then one
// line per finished test, each written with a single write() so a kill leaves
// at most the last line torn. When the report is written the journal is
// removed. If the runner dies first (SIGKILL, a crash of the runner itself),
// `ortmem-cts report recover PATH.journal` turns it into a valid report
// marked incomplete; a torn last line is dropped and counted. Lines are not
// fsynced one by one (that would cost a disk flush per test): after a power
// cut the journal holds what the kernel had written back. After a failed
// write nothing more is appended, so a torn line is always the last.
//
// A Journal has one writer; it is not safe to append from two threads.
#pragma once

#include <string>

#include "ortmem/expected.hpp"
#include "ortmem/report/report.hpp"

namespace ortmem::report {

// The journal that backs the report at `report_path`.
[[nodiscard]] std::string journal_path_for(const std::string& report_path);

class Journal {
 public:
  // Starts the journal at journal_path_for(report_path), replacing a stale
  // one, with `header` (everything but the tests) as its first line. The file
  // is created O_EXCL|O_NOFOLLOW: a planted symlink is never written through.
  [[nodiscard]] static Expected<Journal, std::string> create(const std::string& report_path, const Report& header);

  Journal(Journal&& other) noexcept;
  Journal& operator=(Journal&&) = delete;
  Journal(const Journal&) = delete;
  ~Journal();  // closes the file and leaves it in place

  // Appends one finished test. Returns false when the line could not be written.
  [[nodiscard]] bool append(const TestResult& test);
  // Closes and deletes the journal: call once the report it backs is written.
  void remove();
  [[nodiscard]] const std::string& path() const { return path_; }

 private:
  Journal(std::string path, int fd) : path_(std::move(path)), fd_(fd) {}
  std::string path_;
  int fd_ = -1;
};

struct RecoveredRun {
  Report report;            // header and tests, not yet judged
  std::string report_path;  // where the run meant to write its report
  std::size_t torn_lines = 0;
};

// Reads a journal back; errors name the path and line.
[[nodiscard]] Expected<RecoveredRun, std::string> read_journal(const std::string& path);
// The same for a journal's text; `path` only names it in errors.
[[nodiscard]] Expected<RecoveredRun, std::string> parse_journal(const std::string& text, const std::string& path);

}  // namespace ortmem::report
