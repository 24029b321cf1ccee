// run_output.hpp: what `run` and the `report` commands say and write the
// same way: the summary on stdout, exit statuses, usage errors, files or
// standard output, the signing key.
#pragma once

#include <optional>
#include <ostream>
#include <string>

#include "ortmem/report/integrity.hpp"
#include "ortmem/report/report.hpp"

namespace ortmem::cts {

// Exit status (rank order for "the worst of several runs": 2 > 1 > 3 > 0):
//   0 conformant (or waived: every failure expected); 1 not conformant;
//   2 usage or infrastructure error; 3 incomplete or partial (a filter,
//   profile selection or shard; an interrupted run; nothing judged).
inline constexpr int kExitConformant = 0;
inline constexpr int kExitNotConformant = 1;
inline constexpr int kExitUsage = 2;
inline constexpr int kExitIncomplete = 3;

[[nodiscard]] int exit_code_for(report::ProfileResult overall);

// Prints "ortmem-cts: <reason>" on stderr and returns the usage exit status.
int usage_error(const std::string& reason);

// The verdict per profile, every failing requirement with its first failure
// (file:line), expectations that did not apply, and reproduce commands.
void print_summary(const report::Report& result, std::ostream& out);

// Writes `content` to `path` atomically, or to stdout for "-"; an error message on failure.
[[nodiscard]] std::optional<std::string> write_output(const std::string& path, const std::string& content);

// Reads --sign's key into `key` when a path is given; an error message on failure.
[[nodiscard]] std::optional<std::string> load_signing_key(const std::optional<std::string>& path,
                                                          std::optional<report::SigningKey>& key);

}  // namespace ortmem::cts
