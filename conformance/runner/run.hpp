// run.hpp: `ortmem-cts run`, certifying one adapter, and its helpers.
//
// Three ways to run the selected tests:
//   - isolation "group" (the default): each suite in a child process, up to
//     --jobs at a time; a crash or a hang costs one test (see isolated_run.hpp);
//   - isolation "test": the same with one child per test;
//   - isolation "none": in this process, for debugging; a watchdog stops the
//     run at the first test past its deadline and still writes a report.
// While it runs, the report path holds a report marked incomplete and
// PATH.journal collects every finished test, so an interrupt or a kill never
// leaves an older report looking current and loses nothing that finished.
//
// Exit status (rank order for "the worst of several runs": 2 > 1 > 3 > 0):
//   0 conformant; 1 not conformant; 2 usage or infrastructure error;
//   3 incomplete or partial (a filter, profile selection or shard; an
//     interrupted run; nothing judged).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "ortmem/report/report.hpp"
#include "test_selection.hpp"

namespace ortmem::cts {

inline constexpr int kExitConformant = 0;
inline constexpr int kExitNotConformant = 1;
inline constexpr int kExitUsage = 2;
inline constexpr int kExitIncomplete = 3;

[[nodiscard]] int exit_code_for(report::ProfileResult overall);

enum class Isolation { kNone, kGroup, kTest };

struct RunOptions {
  std::string adapter;
  std::vector<std::string> profiles;  // empty: every profile
  std::string filter = "*";
  std::optional<std::uint64_t> seed;
  std::optional<Shard> shard;
  std::optional<std::string> report_path;  // "-": standard output
  Isolation isolation = Isolation::kGroup;
  int jobs = 1;
  int repeat = 1;                  // runs of each test; mixed outcomes are flaky
  bool stress = false;             // background load beside the tests (stress_load.hpp)
  long memory_limit_mib = 0;       // address space of each test child; 0: none
  double timeout_s = 60;
  bool quiet = false;
  std::optional<std::string> signing_key_path;  // --sign
  std::optional<std::string> junit_path;        // --junit
  std::optional<std::string> ctrf_path;         // --ctrf
  std::optional<std::string> expectations_path; // --expectations
  std::optional<std::string> run_id;            // --run-id, shared by a run's shards
  std::vector<std::string> command_line;
};

[[nodiscard]] int run(const RunOptions& options);

// The hidden `child` command an isolated run starts for each group.
struct ChildOptions {
  std::string adapter;
  std::uint64_t seed = 0;
  std::string tests;  // ':'-joined exact test ids
  long parent = 0;
  long memory_limit_mib = 0;
  bool stress = false;
};
[[nodiscard]] int run_child(const ChildOptions& options, char* program);

// `ortmem-cts report recover JOURNAL [--report FILE] [--sign KEY]`.
[[nodiscard]] int recover(const std::string& journal, const std::optional<std::string>& report_path,
                          const std::optional<std::string>& signing_key_path);
// `ortmem-cts report verify FILE [--pubkey KEY]`: 0 verified, 1 not, 2 unreadable.
[[nodiscard]] int verify(const std::string& report_path, const std::optional<std::string>& public_key_path);
// `ortmem-cts report merge SHARD... --report FILE`: the exit status of the merged verdict.
[[nodiscard]] int merge(const std::vector<std::string>& shard_paths, const std::string& report_path);
// `ortmem-cts report diff BASE NEW`: 0 no regression, 1 regressions, 2 unreadable.
[[nodiscard]] int diff(const std::string& base_path, const std::string& next_path);
// `ortmem-cts report render REPORT --format md|html [--output FILE]`.
[[nodiscard]] int render(const std::string& report_path, const std::string& format, const std::optional<std::string>& output);
// `ortmem-cts report keygen --secret FILE --public FILE`.
[[nodiscard]] int keygen(const std::string& secret_path, const std::string& public_path);

// Prints "ortmem-cts: <reason>" on stderr and returns the usage exit status.
int usage_error(const std::string& reason);

}  // namespace ortmem::cts
