// ortmem/report/verify.hpp: `ortmem-cts report verify`, what an auditor runs
// before accepting a report as evidence.
//
// A report verifies when all of this holds:
//   - its integrity digest matches its content (and, given a trusted public
//     key, its signature is by that key; see integrity.hpp);
//   - it reads as a report of schema 1.x: every key present with its type,
//     every status one of the allowed names (report_json.hpp);
//   - the kit, its version and git sha are present;
//   - it is of the spec this kit carries, up to the patch number: a patch
//     changes wording only, so its requirements are the same; another minor
//     or major version has other requirements and is refused (the policy is
//     in spec/README.md, "Versioning");
//   - it lists every requirement of that spec once, with the spec's level and
//     profile, names only tests it holds, and holds no test twice;
//   - its waivers are what its expectations make of the real results (each
//     waived test keeps its real status; re-applying gives the same);
//   - the judgement recomputed from its tests (judge(), with the profiles its
//     adapter declares and its run's scope) is the judgement it states, for
//     every requirement, every profile and the overall verdict.
// Problems are returned one sentence each; warnings do not fail a report.
#pragma once

#include <array>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "ortmem/report/report.hpp"

namespace ortmem::report {

struct Verification {
  std::vector<std::string> problems;
  std::vector<std::string> warnings;
  std::optional<Report> report;  // when it could be read
  [[nodiscard]] bool ok() const { return problems.empty(); }
};

[[nodiscard]] Verification verify_report(const nlohmann::json& document, const std::vector<SpecRequirement>& spec,
                                         const std::string& spec_version,
                                         const std::optional<std::array<unsigned char, 32>>& trusted_key);

}  // namespace ortmem::report
