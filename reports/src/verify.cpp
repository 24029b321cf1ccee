#include "ortmem/report/verify.hpp"

#include <map>
#include <set>

#include "ortmem/report/expectations.hpp"
#include "ortmem/report/integrity.hpp"
#include "ortmem/report/report_json.hpp"

namespace ortmem::report {
namespace {

void compare_judgements(const Judgement& stated, const Judgement& recomputed, std::vector<std::string>& problems) {
  if (stated.verdict.overall != recomputed.verdict.overall) {
    problems.push_back("verdict.overall says " + to_string(stated.verdict.overall) + ", but its tests make it " +
                       to_string(recomputed.verdict.overall));
  }
  std::map<std::string, const ProfileVerdict*> profiles;
  for (const auto& profile : stated.verdict.profiles) profiles[profile.name] = &profile;
  for (const auto& expected : recomputed.verdict.profiles) {
    const auto found = profiles.find(expected.name);
    if (found == profiles.end()) {
      problems.push_back("verdict.profiles has no " + expected.name);
      continue;
    }
    const ProfileVerdict& profile = *found->second;
    if (profile.result != expected.result || profile.declared != expected.declared ||
        profile.counts != expected.counts) {
      problems.push_back("profile " + expected.name + " says " + to_string(profile.result) +
                         ", but its requirements make it " + to_string(expected.result) +
                         (profile.counts != expected.counts ? " (and its counts differ)" : ""));
    }
  }
  if (stated.verdict.profiles.size() != recomputed.verdict.profiles.size()) {
    problems.push_back("verdict.profiles lists " + std::to_string(stated.verdict.profiles.size()) + " profiles, not " +
                       std::to_string(recomputed.verdict.profiles.size()));
  }
  std::map<std::string, const RequirementResult*> requirements;
  for (const auto& requirement : stated.requirements) requirements[requirement.requirement.id] = &requirement;
  for (const auto& expected : recomputed.requirements) {
    const auto found = requirements.find(expected.requirement.id);
    if (found == requirements.end()) continue;  // reported by the spec check
    const RequirementResult& requirement = *found->second;
    if (requirement.status != expected.status) {
      problems.push_back("requirement " + expected.requirement.id + " says " + to_string(requirement.status) +
                         ", but its tests make it " + to_string(expected.status));
    }
    if (std::multiset<std::string>(requirement.tests.begin(), requirement.tests.end()) !=
        std::multiset<std::string>(expected.tests.begin(), expected.tests.end())) {
      problems.push_back("requirement " + expected.requirement.id + " lists other tests than those that name it");
    }
  }
}

void check_against_spec(const Report& report, const std::vector<SpecRequirement>& spec,
                        std::vector<std::string>& problems) {
  std::map<std::string, const SpecRequirement*> by_id;
  for (const auto& requirement : spec) by_id[requirement.id] = &requirement;
  std::set<std::string> listed;
  for (const auto& result : report.judgement.requirements) {
    const auto& id = result.requirement.id;
    if (!listed.insert(id).second) problems.push_back("requirement " + id + " is listed twice");
    const auto found = by_id.find(id);
    if (found == by_id.end()) {
      problems.push_back("requirement " + id + " is not in the spec");
    } else if (result.requirement.level != found->second->level ||
               result.requirement.profile != found->second->profile) {
      problems.push_back("requirement " + id + " is listed as " + result.requirement.level + " of " +
                         result.requirement.profile + "; the spec has it " + found->second->level + " of " +
                         found->second->profile);
    }
  }
  for (const auto& requirement : spec) {
    if (!listed.contains(requirement.id)) problems.push_back("requirement " + requirement.id + " is missing");
  }
  std::set<std::string> tests;
  for (const auto& test : report.tests) {
    if (!tests.insert(test.id).second) problems.push_back("test " + test.id + " is listed twice");
    for (const auto& id : test.requirements) {
      if (!by_id.contains(id)) problems.push_back("test " + test.id + " names " + id + ", which is not in the spec");
    }
  }
}

// The waivers must be what the report's own expectations make of its real
// results: re-applied to the unwaived tests, they give the same tests and states.
void check_waivers(const Report& report, std::vector<std::string>& problems) {
  const Report replay = replay_waivers(report);
  for (std::size_t i = 0; i < report.tests.size(); ++i) {
    if (report.tests[i].status != replay.tests[i].status) {
      problems.push_back("test " + report.tests[i].id + " is " + to_string(report.tests[i].status) +
                         ", but its waivers make it " + to_string(replay.tests[i].status));
    }
  }
  for (std::size_t i = 0; i < report.waivers.size(); ++i) {
    if (report.waivers[i].state != replay.waivers[i].state || report.waivers[i].tests != replay.waivers[i].tests) {
      problems.push_back("waivers[" + std::to_string(i) + "] says " + report.waivers[i].state +
                         ", but the tests make it " + replay.waivers[i].state);
    }
  }
}

}  // namespace

Verification verify_report(const nlohmann::json& document, const std::vector<SpecRequirement>& spec,
                           const std::string& spec_version,
                           const std::optional<std::array<unsigned char, 32>>& trusted_key) {
  Verification verification;
  auto& problems = verification.problems;
  if (auto problem = check_seal(document, trusted_key)) problems.push_back(*problem);
  auto read = report_from_json(document);
  if (!read) {
    problems.push_back(read.error());
    return verification;
  }
  const Report& report = *read;
  if (report.kit.name != "ortmem-cts" || report.kit.version.empty() || report.kit.git_sha.empty()) {
    problems.push_back("kit: the name, version or git sha is missing");
  }
  if (report.kit.git_dirty) verification.warnings.push_back("the kit was built from a tree with uncommitted changes");
  const auto minor_of = [](const std::string& version) { return version.substr(0, version.rfind('.')); };
  if (report.kit.spec_version != spec_version && minor_of(report.kit.spec_version) == minor_of(spec_version)) {
    verification.warnings.push_back("the report is of spec " + report.kit.spec_version + " and this kit carries " +
                                    spec_version + ": a patch apart, which changes wording only");
  } else if (report.kit.spec_version != spec_version) {
    problems.push_back("the report is of spec " + report.kit.spec_version + " and this kit checks spec " +
                       spec_version + ": verify it with a kit of spec " + report.kit.spec_version);
    verification.report = std::move(*read);
    return verification;
  }
  check_against_spec(report, spec, problems);
  check_waivers(report, problems);
  // The judgement must follow from the tests, with the spec's own levels and
  // justifications, not with what the report claims about them.
  compare_judgements(report.judgement,
                     judge(spec, report.tests, declared_profiles(report.adapter.capabilities), report.run.scope,
                           report.adapter.origin ? &*report.adapter.origin : nullptr),
                     problems);
  verification.report = std::move(*read);
  return verification;
}

}  // namespace ortmem::report
