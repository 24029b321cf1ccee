#include "run_output.hpp"

#include <algorithm>
#include <iostream>

#include "ortmem/report/report_file.hpp"

namespace ortmem::cts {

int exit_code_for(report::ProfileResult overall) {
  switch (overall) {
    case report::ProfileResult::kConformant:
    case report::ProfileResult::kWaived: return kExitConformant;
    case report::ProfileResult::kNotConformant: return kExitNotConformant;
    case report::ProfileResult::kPartial:
    case report::ProfileResult::kNotRun:
    case report::ProfileResult::kIncomplete: return kExitIncomplete;
  }
  return kExitIncomplete;
}

int usage_error(const std::string& reason) {
  std::cerr << "ortmem-cts: " << reason << '\n';
  return kExitUsage;
}

void print_summary(const report::Report& result, std::ostream& out) {
  const report::Judgement& judgement = result.judgement;
  out << "verdict: " << to_string(judgement.verdict.overall);
  if (!result.run.interruption.empty()) out << " (" << result.run.interruption << ")";
  out << '\n';
  for (const auto& profile : judgement.verdict.profiles) {
    out << "  " << profile.name << ": " << to_string(profile.result);
    for (const auto& [status, count] : profile.counts) out << "  " << status << " " << count;
    if (!profile.note.empty()) out << "  (" << profile.note << ")";
    out << '\n';
  }
  for (const auto& requirement : judgement.requirements) {
    if (requirement.status != report::RequirementStatus::kFail) continue;
    // The first failed check charged to this requirement (not merely a
    // failure of a test that names it: that may be another rule's check).
    std::string first_failure;
    for (const auto& test : result.tests) {
      const auto charged = std::find_if(
          test.failures.begin(), test.failures.end(),
          [&](const report::Failure& failure) { return report::charges(failure, test, requirement.requirement.id); });
      if (charged != test.failures.end()) {
        first_failure = test.id + ": " + located(*charged).substr(0, 300);
        break;
      }
    }
    out << "  FAIL " << requirement.requirement.id << " (" << requirement.requirement.title << ") " << first_failure
        << '\n';
    if (!requirement.requirement.remedy.empty()) out << "       remedy: " << requirement.requirement.remedy << '\n';
  }
  for (const auto& waiver : result.waivers) {
    if (waiver.state == "applied") continue;
    out << "  expectation " << (waiver.requirement.empty() ? waiver.test : waiver.requirement) << " is " << waiver.state
        << (waiver.state == "stale"             ? ": it names no test of this run"
            : waiver.state == "unexpected-pass" ? ": remove it"
                                                : "")
        << " (" << waiver.reason << ")\n";
  }
  for (const auto& test : result.tests) {
    if (report::is_failure(test.status) && test.reproduce) {
      out << "  reproduce " << test.id << " (" << to_string(test.status) << "): " << *test.reproduce << '\n';
    }
  }
}

// Writes `content` to `path`, or to stdout for "-"; returns an error message.
std::optional<std::string> write_output(const std::string& path, const std::string& content) {
  if (path != "-") return report::write_file_atomically(path, content);
  std::cout << content;
  return std::nullopt;
}

std::optional<std::string> load_signing_key(const std::optional<std::string>& path,
                                            std::optional<report::SigningKey>& key) {
  if (!path) return std::nullopt;
  auto read = report::read_signing_key(*path);
  if (!read) return "--sign: " + read.error();
  key = *read;
  return std::nullopt;
}

}  // namespace ortmem::cts
