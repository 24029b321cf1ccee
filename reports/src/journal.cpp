#include "ortmem/report/journal.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <sstream>

#include "ortmem/report/report_file.hpp"
#include "ortmem/report/report_json.hpp"

namespace ortmem::report {
namespace {

constexpr const char* kMagic = "ortmem_cts_journal";
constexpr int kJournalVersion = 1;

bool write_line(int fd, const std::string& line) {
  // One write per line: with O_APPEND a kill can tear only the line being written.
  ssize_t written = 0;
  do {
    written = ::write(fd, line.data(), line.size());
  } while (written < 0 && errno == EINTR);
  return written == static_cast<ssize_t>(line.size());
}

}  // namespace

std::string journal_path_for(const std::string& report_path) { return report_path + ".journal"; }

Expected<Journal, std::string> Journal::create(const std::string& report_path, const Report& header) {
  std::string path = journal_path_for(report_path);
  if (::unlink(path.c_str()) != 0 && errno != ENOENT) {
    return fail("cannot replace the stale journal '" + path + "': " + std::strerror(errno));
  }
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_APPEND | O_CLOEXEC, 0600);
  if (fd < 0) return fail("cannot create the journal '" + path + "': " + std::strerror(errno));
  nlohmann::json first = {{kMagic, kJournalVersion}, {"report_path", report_path}, {"report", to_json(header)}};
  if (!write_line(fd, dump_json(first) + '\n')) {
    const std::string reason = std::strerror(errno);
    ::close(fd);
    ::unlink(path.c_str());
    return fail("cannot write the journal '" + path + "': " + reason);
  }
  return Journal(std::move(path), fd);
}

Journal::Journal(Journal&& other) noexcept : path_(std::move(other.path_)), fd_(other.fd_) { other.fd_ = -1; }

Journal::~Journal() {
  if (fd_ >= 0) ::close(fd_);
}

bool Journal::append(const TestResult& test) {
  if (fd_ < 0) return false;
  if (write_line(fd_, dump_json({{"test", to_json(test)}}) + '\n')) return true;
  // A partial line (a full disk) is only recoverable as the last one: write nothing after it.
  ::close(fd_);
  fd_ = -1;
  return false;
}

void Journal::remove() {
  if (fd_ < 0) return;
  ::close(fd_);
  fd_ = -1;
  ::unlink(path_.c_str());
}

Expected<RecoveredRun, std::string> read_journal(const std::string& path) {
  auto content = read_regular_file(path);
  if (!content) return fail(content.error());
  return parse_journal(*content, path);
}

Expected<RecoveredRun, std::string> parse_journal(const std::string& text, const std::string& path) {
  const std::string* content = &text;
  std::istringstream lines(*content);
  std::string line;
  if (!std::getline(lines, line)) return fail("'" + path + "' is empty: it is not a journal");
  const auto parsed_first = parse_untrusted_json(line);
  const nlohmann::json first = parsed_first ? *parsed_first : nlohmann::json();
  if (!first.is_object() || !first.contains(kMagic)) {
    return fail("'" + path + "' is not an ortmem-cts journal (its first line has no '" + kMagic + "')");
  }
  if (first[kMagic] != kJournalVersion) {
    return fail("'" + path + "' is a journal of version " + first[kMagic].dump() + "; this kit reads version " +
                std::to_string(kJournalVersion));
  }
  if (!first.contains("report_path") || !first["report_path"].is_string() || !first.contains("report")) {
    return fail("'" + path + "' line 1: the header has no report_path or report");
  }
  auto header = report_from_json(first["report"]);
  if (!header) return fail("'" + path + "' line 1: " + header.error());
  RecoveredRun recovered{std::move(*header), first["report_path"].get<std::string>(), 0};
  recovered.report.tests.clear();
  bool ended_with_newline = content->empty() || content->back() == '\n';
  for (std::size_t number = 2; std::getline(lines, line); ++number) {
    const bool last = lines.peek() == std::char_traits<char>::eof();
    const auto parsed = parse_untrusted_json(line);
    const nlohmann::json entry = parsed ? *parsed : nlohmann::json();
    if (!entry.is_object() || !entry.contains("test")) {
      // Only the last line can be torn by a kill; anything earlier is damage.
      if (last && !ended_with_newline) {
        ++recovered.torn_lines;
        break;
      }
      return fail("'" + path + "' line " + std::to_string(number) + ": not a journal entry");
    }
    auto test = test_result_from_json(entry["test"]);
    if (!test) return fail("'" + path + "' line " + std::to_string(number) + ": " + test.error());
    recovered.report.tests.push_back(std::move(*test));
  }
  return recovered;
}

}  // namespace ortmem::report
