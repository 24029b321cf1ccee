// isolation.hpp: running one test in a child process with a deadline.
#pragma once

#include <string>
#include <vector>

#include "ortmem/report/report.hpp"

namespace ortmem::cts {

struct ChildRun {
  std::vector<std::string> arguments;  // the child's argv after the program name
  std::string report_path;             // where the child writes its report
  std::string test_id;
  double timeout_s;
};

// Runs the child and returns its test results. A child killed by a signal
// yields one crash result naming the signal; one that outlives the deadline
// is killed and yields one timeout result; one that wrote no report yields an
// error result. The child's report file is removed afterwards.
[[nodiscard]] std::vector<report::TestResult> run_in_child(const ChildRun& child);

}  // namespace ortmem::cts
