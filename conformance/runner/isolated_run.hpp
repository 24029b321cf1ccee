// isolated_run.hpp: running tests in child processes, so that a crash or a
// hang costs one test and never the run.
//
// The tests come in groups (by default one per suite); each group runs in a
// child process of its own, up to `jobs` children at a time. A child is in a
// process group of its own and is killed with everything it started: when
// the test it is running passes its deadline, when the run is interrupted
// (SIGINT, SIGTERM, SIGHUP), and by the kernel when the parent dies
// (PR_SET_PDEATHSIG), so no child outlives the run. When a child dies in the
// middle of a group, the test it was running is recorded as a crash (with
// the signal and its last output), a timeout or an error, and the rest of the
// group goes on in a fresh child.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "result_collector.hpp"

namespace ortmem::cts {

struct IsolatedPlan {
  // The child's arguments after the program name, before "--tests".
  std::vector<std::string> child_arguments;
  std::vector<std::vector<std::string>> groups;
  double timeout_s = 60;
  int jobs = 1;
  ReproduceCommand reproduce;
};

struct IsolatedOutcome {
  std::vector<report::TestResult> results;  // the finished tests, in plan order
  int interrupted_by = 0;                   // the signal that stopped the run; 0 when it finished
};

// Runs the plan. Each result goes to `sink` as soon as it is known;
// `group_done` is called with a group's suite name when its last test is.
[[nodiscard]] IsolatedOutcome run_isolated(const IsolatedPlan& plan, ResultSink& sink,
                                           const std::function<void(const std::string& group)>& group_done);

// Test children call this first. The kernel kills the child when the parent
// dies, and a child whose parent is already gone exits at once. Limits keep
// a runaway adapter to one test: no core dumps, at most 4096 open files, and
// `memory_limit_mib` MiB of address space (0: none; never under a sanitizer,
// whose shadow memory needs terabytes of it).
void prepare_child(long parent_pid, long memory_limit_mib);

// Half the machine's memory, in MiB: the default --memory-limit.
[[nodiscard]] long default_memory_limit_mib();

}  // namespace ortmem::cts
