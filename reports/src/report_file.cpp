#include "ortmem/report/report_file.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "ortmem/report/integrity.hpp"
#include "ortmem/report/report_json.hpp"

namespace ortmem::report {
namespace {

std::string directory_of(const std::string& path) {
  const std::string parent = std::filesystem::path(path).parent_path().string();
  return parent.empty() ? "." : parent;
}

// The mode a new file gets from open(0666): read from /proc because umask()
// can only be read by changing it, which would race with other threads.
mode_t new_file_mode() {
  std::ifstream status("/proc/self/status");
  for (std::string line; std::getline(status, line);) {
    if (line.starts_with("Umask:")) return 0666 & ~static_cast<mode_t>(std::strtoul(line.c_str() + 6, nullptr, 8));
  }
  return 0644;
}

bool write_all(int fd, std::string_view content) {
  while (!content.empty()) {
    const ssize_t written = ::write(fd, content.data(), content.size());
    if (written < 0 && errno == EINTR) continue;
    if (written <= 0) return false;
    content.remove_prefix(static_cast<std::size_t>(written));
  }
  return true;
}

}  // namespace

std::optional<std::string> check_output_path(const std::string& path, std::string_view option) {
  const std::string flag(option);
  if (path.empty()) return flag + " needs a file path (or '-' for standard output)";
  if (path == "-") return std::nullopt;
  struct stat existing {};
  if (::stat(path.c_str(), &existing) == 0) {
    if (S_ISDIR(existing.st_mode)) return flag + " '" + path + "' is a directory; give a file path inside it";
    if (!S_ISREG(existing.st_mode)) {
      return flag + " '" + path + "' is not a regular file (a device, pipe or socket); give a file path";
    }
  }
  const std::string directory = directory_of(path);
  struct stat parent {};
  if (::stat(directory.c_str(), &parent) != 0 || !S_ISDIR(parent.st_mode)) {
    return "cannot write " + flag + " '" + path + "': the directory '" + directory +
           "' does not exist; create it first";
  }
  if (::access(directory.c_str(), W_OK | X_OK) != 0) {
    return "cannot write " + flag + " '" + path + "': the directory '" + directory + "' is not writable (" +
           std::strerror(errno) + ")";
  }
  return std::nullopt;
}

std::optional<std::string> write_file_atomically(const std::string& path, std::string_view content) {
  if (auto problem = check_output_path(path, "the file")) return problem;
  const std::string directory = directory_of(path);
  std::string temporary = directory + "/." + std::filesystem::path(path).filename().string() + ".XXXXXX";
  const int fd = ::mkostemp(temporary.data(), O_CLOEXEC);
  if (fd < 0) return "cannot create a temporary file in '" + directory + "': " + std::strerror(errno);
  struct stat existing {};
  const mode_t mode = ::stat(path.c_str(), &existing) == 0 ? (existing.st_mode & 07777) : new_file_mode();
  const auto abandon = [&](const std::string& what) {
    const std::string reason = std::strerror(errno);
    ::close(fd);
    ::unlink(temporary.c_str());
    return "cannot " + what + " '" + path + "': " + reason;
  };
  if (::fchmod(fd, mode) != 0) return abandon("set the mode of");
  if (!write_all(fd, content)) return abandon("write");
  if (::fsync(fd) != 0) return abandon("flush");
  if (::close(fd) != 0) {
    const std::string reason = std::strerror(errno);
    ::unlink(temporary.c_str());
    return "cannot write '" + path + "': " + reason;
  }
  if (::rename(temporary.c_str(), path.c_str()) != 0) {
    const std::string reason = std::strerror(errno);
    ::unlink(temporary.c_str());
    return "cannot replace '" + path + "': " + reason;
  }
  // The rename is durable only once the directory entry is.
  if (const int directory_fd = ::open(directory.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC); directory_fd >= 0) {
    ::fsync(directory_fd);
    ::close(directory_fd);
  }
  return std::nullopt;
}

Expected<std::string, std::string> read_regular_file(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) return fail("cannot read '" + path + "': " + std::strerror(errno));
  struct stat info {};
  if (::fstat(fd, &info) != 0 || !S_ISREG(info.st_mode)) {
    ::close(fd);
    return fail("cannot read '" + path + "': not a regular file");
  }
  if (static_cast<std::size_t>(info.st_size) > kMaxReadBytes) {
    ::close(fd);
    return fail("'" + path + "' is " + std::to_string(info.st_size) + " bytes, more than any report (" +
                std::to_string(kMaxReadBytes) + ")");
  }
  std::string content;
  char buffer[1 << 16];
  for (;;) {
    const ssize_t got = ::read(fd, buffer, sizeof buffer);
    if (got < 0 && errno == EINTR) continue;
    if (got < 0) {
      const std::string reason = std::strerror(errno);
      ::close(fd);
      return fail("cannot read '" + path + "': " + reason);
    }
    if (got == 0) break;
    content.append(buffer, static_cast<std::size_t>(got));
    if (content.size() > kMaxReadBytes) {
      ::close(fd);
      return fail("'" + path + "' grew past " + std::to_string(kMaxReadBytes) + " bytes while being read");
    }
  }
  ::close(fd);
  return content;
}

std::optional<std::string> write_report_file(const std::string& path, const Report& report,
                                             const std::optional<SigningKey>& key) {
  return write_file_atomically(path, sealed_report_text(report, key));
}

std::string sealed_report_text(const Report& report, const std::optional<SigningKey>& key) {
  nlohmann::json document = to_json(report);
  seal(document, key);
  return dump_json(document, 2) + '\n';
}

Expected<Report, std::string> read_report_file(const std::string& path) {
  auto content = read_regular_file(path);
  if (!content) return fail(content.error());
  const auto document = parse_untrusted_json(*content);
  if (!document) return fail("'" + path + "': " + document.error());
  auto report = report_from_json(*document);
  if (!report) return fail("'" + path + "': " + report.error());
  return report;
}

}  // namespace ortmem::report
