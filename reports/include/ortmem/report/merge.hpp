// ortmem/report/merge.hpp: the reports of one run's shards as one report,
// and what changed between two reports.
//
// merge_shards takes the reports of `run --shard I/N` (each partial) and
// gives the report the unsharded run would have written: the same tests in
// the same order (shards split the selection round-robin, so the order is
// rebuilt by interleaving), judged afresh. It refuses shards that are not of
// one run: their run id, seed, adapter, kit, filter, profiles or shard count
// differ, an index repeats, or a test appears twice. A missing shard or an
// incomplete one leaves the merge partial or incomplete, never conformant.
//
// diff_reports compares two reports of one adapter, per requirement and per
// test: a regression is a requirement or test that passed (or was
// not-applicable or waived) in the base and fails in the new one, or an
// overall verdict that got worse; a fix is the reverse.
#pragma once

#include <string>
#include <vector>

#include "ortmem/expected.hpp"
#include "ortmem/report/report.hpp"

namespace ortmem::report {

[[nodiscard]] Expected<Report, std::string> merge_shards(std::vector<Report> shards,
                                                         const std::vector<SpecRequirement>& spec);

struct ReportDiff {
  std::vector<std::string> regressions;
  std::vector<std::string> fixes;
  std::vector<std::string> new_tests;
  std::vector<std::string> removed_tests;
  [[nodiscard]] bool regressed() const { return !regressions.empty(); }
};

[[nodiscard]] ReportDiff diff_reports(const Report& base, const Report& next);

}  // namespace ortmem::report
