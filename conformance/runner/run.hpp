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
// Exit status: see run_output.hpp.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "ortmem/report/report.hpp"
#include "run_output.hpp"
#include "test_selection.hpp"

namespace ortmem::cts {

enum class Isolation { kNone, kGroup, kTest };

struct RunOptions {
  std::string adapter;
  std::vector<std::string> profiles;  // empty: every profile
  std::string filter = "*";
  std::optional<std::uint64_t> seed;
  std::optional<std::uint64_t> model_runs;    // --model-runs
  std::optional<std::uint64_t> model_length;  // --model-length
  std::optional<Shard> shard;
  std::optional<std::string> report_path;  // "-": standard output
  Isolation isolation = Isolation::kGroup;
  int jobs = 1;
  int repeat = 1;             // runs of each test; mixed outcomes are flaky
  bool stress = false;        // background load beside the tests (stress_load.hpp)
  long memory_limit_mib = 0;  // address space of each test child; 0: none
  double timeout_s = 60;
  bool quiet = false;
  std::optional<std::string> signing_key_path;   // --sign
  std::optional<std::string> junit_path;         // --junit
  std::optional<std::string> ctrf_path;          // --ctrf
  std::optional<std::string> expectations_path;  // --expectations
  std::optional<std::string> run_id;             // --run-id, shared by a run's shards
  std::vector<std::string> command_line;
  // The highest nxmem minor offered to a plugin adapter (--abi-minor).
  std::uint32_t abi_minor = 1;
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

}  // namespace ortmem::cts
