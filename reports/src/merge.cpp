#include "ortmem/report/merge.hpp"

#include <algorithm>
#include <charconv>
#include <map>
#include <set>

#include "ortmem/report/expectations.hpp"

namespace ortmem::report {
namespace {

struct ShardIndex {
  int index = 0;
  int count = 1;
};

std::optional<ShardIndex> shard_of(const Report& report) {
  if (report.run.shard.empty()) return ShardIndex{0, 1};
  const auto number = [](std::string_view text) -> std::optional<int> {
    int value = 0;
    const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
    if (error != std::errc{} || end != text.data() + text.size() || text.empty()) return std::nullopt;
    return value;
  };
  const std::string_view shard = report.run.shard;
  const auto slash = shard.find('/');
  if (slash == std::string_view::npos) return std::nullopt;
  const auto index = number(shard.substr(0, slash));
  const auto count = number(shard.substr(slash + 1));
  if (!index || !count || *count < 1 || *index < 0 || *index >= *count) return std::nullopt;
  return ShardIndex{*index, *count};
}

// The first field in which `shard` is not of the same run as `first`, or empty.
std::string differing_field(const Report& first, const Report& shard) {
  if (shard.run.id != first.run.id) return "run id";
  if (shard.run.seed != first.run.seed) return "seed";
  if (shard.run.model_runs != first.run.model_runs || shard.run.model_length != first.run.model_length) {
    return "model budget";
  }
  if (shard.adapter.name != first.adapter.name || shard.adapter.version != first.adapter.version ||
      shard.adapter.capabilities != first.adapter.capabilities || shard.adapter.origin != first.adapter.origin) {
    return "adapter";
  }
  if (shard.kit.version != first.kit.version || shard.kit.git_sha != first.kit.git_sha ||
      shard.kit.spec_version != first.kit.spec_version) {
    return "kit";
  }
  if (shard.run.filter != first.run.filter || shard.run.profiles != first.run.profiles) return "selection";
  return "";
}

int rank(ProfileResult result) {
  switch (result) {
    case ProfileResult::kConformant: return 0;
    case ProfileResult::kWaived: return 1;
    case ProfileResult::kNotConformant: return 3;
    default: return 2;
  }
}

bool is_good(RequirementStatus status) {
  return status == RequirementStatus::kPass || status == RequirementStatus::kNotApplicable ||
         status == RequirementStatus::kWaived || status == RequirementStatus::kOutOfScope;
}

bool is_good(TestStatus status) { return !is_failure(status); }

}  // namespace

Expected<Report, std::string> merge_shards(std::vector<Report> shards, const std::vector<SpecRequirement>& spec) {
  if (shards.empty()) return fail(std::string("merge needs at least one shard report"));
  const Report& first = shards.front();
  const auto first_shard = shard_of(first);
  if (!first_shard) return fail("run.shard '" + first.run.shard + "' is not I/N");
  std::map<int, const Report*> by_index;
  for (const Report& shard : shards) {
    if (const std::string field = differing_field(first, shard); !field.empty()) {
      return fail("the shards are not of one run: their " + field + " differs (" + first.run.id + " and " +
                  shard.run.id + "); give every shard the same --run-id and --seed");
    }
    const auto index = shard_of(shard);
    if (!index || index->count != first_shard->count) {
      return fail("shard '" + shard.run.shard + "' is not one of " + std::to_string(first_shard->count));
    }
    if (!by_index.emplace(index->index, &shard).second) return fail("shard " + shard.run.shard + " is given twice");
  }

  Report merged = first;
  merged.tests.clear();
  merged.waivers.clear();
  merged.run.shard.clear();
  merged.run.scope = {};
  std::set<std::string> seen;
  // Shard I holds positions I, I+N, I+2N, ... of the selection.
  std::map<int, std::size_t> next;
  for (bool added = true; added;) {
    added = false;
    for (const auto& [index, shard] : by_index) {
      std::size_t& position = next[index];
      if (position >= shard->tests.size()) continue;
      const TestResult& test = shard->tests[position++];
      if (!seen.insert(test.id).second) return fail("test " + test.id + " is in two shards");
      merged.tests.push_back(test);
      added = true;
    }
  }
  std::vector<std::string> interruptions;
  for (const auto& [index, shard] : by_index) {
    merged.run.start = std::min(merged.run.start, shard->run.start);
    merged.run.end = std::max(merged.run.end, shard->run.end);
    merged.run.duration_s = std::max(merged.run.duration_s, shard->run.duration_s);
    merged.run.scope.subset |= shard->run.scope.filtered;
    merged.run.scope.filtered |= shard->run.scope.filtered;
    merged.run.scope.incomplete |= shard->run.scope.incomplete;
    if (!shard->run.interruption.empty())
      interruptions.push_back("shard " + shard->run.shard + ": " + shard->run.interruption);
    if (shard->waivers.size() != first.waivers.size())
      return fail(std::string("the shards ran with different expectations"));
  }
  // The same expectations ran in every shard: applied again to the merged
  // results they give each entry's tests in run order and its state over the whole run.
  merged.waivers = first.waivers;
  merged = replay_waivers(merged);
  // A missing shard leaves tests out by design of the merge, as a filter would: partial.
  if (static_cast<int>(by_index.size()) < first_shard->count) merged.run.scope.subset = true;
  merged.run.interruption.clear();
  for (const auto& part : interruptions)
    merged.run.interruption += (merged.run.interruption.empty() ? "" : "; ") + part;
  merged.run.command_line = "ortmem-cts report merge (" + std::to_string(by_index.size()) + " shards)";
  judge_report(spec, merged);
  return merged;
}

ReportDiff diff_reports(const Report& base, const Report& next) {
  ReportDiff diff;
  const auto base_overall = base.judgement.verdict.overall;
  const auto next_overall = next.judgement.verdict.overall;
  if (rank(next_overall) > rank(base_overall)) {
    diff.regressions.push_back("verdict: " + to_string(base_overall) + " -> " + to_string(next_overall));
  } else if (rank(next_overall) < rank(base_overall)) {
    diff.fixes.push_back("verdict: " + to_string(base_overall) + " -> " + to_string(next_overall));
  }
  std::map<std::string, RequirementStatus> base_requirements;
  for (const auto& requirement : base.judgement.requirements)
    base_requirements[requirement.requirement.id] = requirement.status;
  for (const auto& requirement : next.judgement.requirements) {
    const auto found = base_requirements.find(requirement.requirement.id);
    if (found == base_requirements.end() || found->second == requirement.status) continue;
    const std::string change =
        requirement.requirement.id + ": " + to_string(found->second) + " -> " + to_string(requirement.status);
    if (is_good(found->second) && requirement.status == RequirementStatus::kFail) diff.regressions.push_back(change);
    if (found->second == RequirementStatus::kFail && is_good(requirement.status)) diff.fixes.push_back(change);
  }
  std::map<std::string, TestStatus> base_tests;
  for (const auto& test : base.tests) base_tests[test.id] = test.status;
  std::set<std::string> next_ids;
  for (const auto& test : next.tests) {
    next_ids.insert(test.id);
    const auto found = base_tests.find(test.id);
    if (found == base_tests.end()) {
      diff.new_tests.push_back(test.id + " (" + to_string(test.status) + ")");
      if (is_failure(test.status)) diff.regressions.push_back("new test " + test.id + " " + to_string(test.status));
      continue;
    }
    const std::string change = "test " + test.id + ": " + to_string(found->second) + " -> " + to_string(test.status);
    if (is_good(found->second) && is_failure(test.status)) diff.regressions.push_back(change);
    if (is_failure(found->second) && is_good(test.status)) diff.fixes.push_back(change);
  }
  for (const auto& test : base.tests) {
    if (!next_ids.contains(test.id)) diff.removed_tests.push_back(test.id + " (" + to_string(test.status) + ")");
  }
  return diff;
}

}  // namespace ortmem::report
