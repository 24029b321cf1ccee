// ortmem/report/report_file.hpp: reports and journals on disk, safely.
//
// A report is evidence, so writing one must never destroy something else or
// leave a half-written file a reader could take for a whole one:
//   - the path is checked before a run starts (check_output_path): it must be
//     absent or a regular file, in an existing writable directory; device
//     nodes, directories and empty paths are refused, and the check creates
//     no probe file;
//   - a write goes to a fresh file in the same directory (created O_EXCL, so
//     a planted symlink or file is never followed or truncated), takes the
//     mode of the file it replaces, is fsynced, then renamed over the path;
//     the directory is fsynced so the rename survives a crash.
// Errors are one sentence naming the path and what to do.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "ortmem/expected.hpp"
#include "ortmem/report/integrity.hpp"
#include "ortmem/report/report.hpp"

namespace ortmem::report {

// The largest file the readers accept; a report of every test of every
// profile is well under 10 MiB.
inline constexpr std::size_t kMaxReadBytes = std::size_t{256} << 20;

// nullopt when `path` can take a file; otherwise why not. `option` names the
// flag in the message ("--report").
[[nodiscard]] std::optional<std::string> check_output_path(const std::string& path, std::string_view option);

// Replaces `path` with `content` atomically, as described above.
[[nodiscard]] std::optional<std::string> write_file_atomically(const std::string& path, std::string_view content);

// The whole of a regular file of at most kMaxReadBytes.
[[nodiscard]] Expected<std::string, std::string> read_regular_file(const std::string& path);

// The report as its file holds it: JSON with its integrity section (signed
// with `key` when one is given).
[[nodiscard]] std::string sealed_report_text(const Report& report, const std::optional<SigningKey>& key = std::nullopt);
[[nodiscard]] std::optional<std::string> write_report_file(const std::string& path, const Report& report,
                                                           const std::optional<SigningKey>& key = std::nullopt);
// Reads and parses a report; every error starts with the path.
[[nodiscard]] Expected<Report, std::string> read_report_file(const std::string& path);

}  // namespace ortmem::report
