// run.hpp: `ortmem-cts run`, certifying one adapter.
//
// Two ways to run the selected tests:
//   - in this process (--isolate none, the default): fast; a watchdog stops
//     the run at the first test that outlives --timeout, records it as
//     timeout and still writes a valid report;
//   - one child process per test (--isolate test): a crash (signal) or a hang
//     costs that test only (crash with the signal's name, or timeout) and the
//     run goes on.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace ortmem::cts {

inline constexpr int kExitConformant = 0;
inline constexpr int kExitNotConformant = 1;
inline constexpr int kExitUsage = 2;

struct RunOptions {
  std::string adapter;
  std::vector<std::string> profiles;  // empty: judge every profile
  std::string filter = "*";
  std::optional<std::uint64_t> seed;
  std::string report_path;
  bool isolate = false;
  double timeout_s = 60;
  std::vector<std::string> command_line;
};

[[nodiscard]] int run(const RunOptions& options);

// Prints "ortmem-cts: <reason>" on stderr and returns the usage exit status.
int usage_error(const std::string& reason);

}  // namespace ortmem::cts
