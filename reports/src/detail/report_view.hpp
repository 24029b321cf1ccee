// What the Markdown and HTML renderings show, gathered once so the two say
// the same thing: the failing requirements with the checks that failed them.
#pragma once

#include <algorithm>
#include <string>
#include <vector>

#include "ortmem/report/report.hpp"

namespace ortmem::report::detail {

struct FailedCheck {
  const TestResult* test;
  std::string where;  // "file:line", or empty for a crash, hang or error
  std::string message;
};

struct FailingRequirement {
  const RequirementResult* requirement;
  std::vector<FailedCheck> checks;
};

inline std::vector<FailingRequirement> failing_requirements(const Report& report) {
  std::vector<FailingRequirement> failing;
  for (const RequirementResult& requirement : report.judgement.requirements) {
    if (requirement.status != RequirementStatus::kFail) continue;
    FailingRequirement entry{&requirement, {}};
    for (const TestResult& test : report.tests) {
      const std::string& id = requirement.requirement.id;
      const bool names = std::find(test.requirements.begin(), test.requirements.end(), id) != test.requirements.end();
      if (!names || !is_failure(test.status)) continue;
      for (const Failure& failure : test.failures) {
        if (!charges(failure, test, id)) continue;
        entry.checks.push_back(
            {&test, failure.file.empty() ? "" : failure.file + ":" + std::to_string(failure.line), failure.message});
      }
    }
    failing.push_back(std::move(entry));
  }
  return failing;
}

// "pass 12, not-run 1" for a profile.
inline std::string counts_text(const ProfileVerdict& profile) {
  std::string counts;
  for (const auto& [status, count] : profile.counts)
    counts += (counts.empty() ? "" : ", ") + status + " " + std::to_string(count);
  return counts;
}

// The facts of the run, as rows of (what, value).
inline std::vector<std::pair<std::string, std::string>> run_facts(const Report& report) {
  const auto& kit = report.kit;
  const auto& run = report.run;
  const auto& environment = report.environment;
  std::vector<std::pair<std::string, std::string>> facts = {
      {"adapter", report.adapter.name + " " + report.adapter.version + " (" + report.adapter.vendor + "), " +
                      report.adapter.device},
      {"kit", kit.name + " " + kit.version + " (git " + kit.git_sha + (kit.git_dirty ? ", modified" : "") + "), spec " +
                  kit.spec_version},
      {"run", run.id + ", " + run.start + " to " + run.end + ", seed " + std::to_string(run.seed)},
      {"selection", "filter " + run.filter + (run.shard.empty() ? "" : ", shard " + run.shard) +
                        (run.scope.subset ? " (a subset)" : "")},
      {"environment", environment.os + " " + environment.kernel + ", " + environment.cpu + ", " +
                          std::to_string(environment.cpus) + " CPUs, " + environment.compiler},
      {"tests", std::to_string(report.tests.size())},
  };
  if (const auto& origin = report.adapter.origin) {
    facts.insert(facts.begin() + 1, {"loaded from", origin->path + " (sha256 " + origin->sha256 + "), mechanism " +
                                                        origin->mechanism + ", " + origin->interface});
  }
  return facts;
}

}  // namespace ortmem::report::detail
