#include <sstream>

#include "detail/report_view.hpp"
#include "ortmem/report/formats.hpp"

namespace ortmem::report {
namespace {

// Table cells and inline code cannot hold '|' or newlines.
std::string cell(std::string_view text) {
  std::string safe;
  for (char c : text) safe += c == '|' ? std::string("\\|") : c == '\n' ? std::string(" ") : std::string(1, c);
  return safe;
}

}  // namespace

std::string render_markdown(const Report& report, std::string_view appendix) {
  std::ostringstream out;
  out << "# ortmem-cts report: " << cell(report.adapter.name) << "\n\n";
  out << "**Verdict: " << to_string(report.judgement.verdict.overall) << "**";
  if (!report.run.interruption.empty()) out << " (" << cell(report.run.interruption) << ")";
  out << "\n\n| profile | result | declared | requirements |\n|---|---|---|---|\n";
  for (const ProfileVerdict& profile : report.judgement.verdict.profiles) {
    const std::string counts = detail::counts_text(profile);
    out << "| " << profile.name << " | " << to_string(profile.result)
        << (profile.note.empty() ? "" : " (" + cell(profile.note) + ")") << " | " << (profile.declared ? "yes" : "no")
        << " | " << counts << " |\n";
  }
  const auto failing = detail::failing_requirements(report);
  out << "\n## Failing requirements (" << failing.size() << ")\n\n";
  if (failing.empty()) out << "None.\n";
  for (const auto& entry : failing) {
    const SpecRequirement& requirement = entry.requirement->requirement;
    out << "### " << requirement.id << " (" << requirement.level << ", " << requirement.profile
        << "): " << cell(requirement.title) << "\n\n";
    if (!requirement.remedy.empty()) out << "> Remedy: " << cell(requirement.remedy) << "\n\n";
    for (const auto& check : entry.checks) {
      out << "- `" << cell(check.test->id) << "` " << to_string(check.test->status)
          << (check.where.empty() ? "" : " at `" + cell(check.where) + "`") << ": "
          << cell(check.message.substr(0, 500)) << "\n";
      if (check.test->reproduce) out << "  - reproduce: `" << cell(*check.test->reproduce) << "`\n";
    }
    out << "\n";
  }
  out << "## Run\n\n| | |\n|---|---|\n";
  const auto row = [&](const std::string& key, const std::string& value) {
    out << "| " << key << " | " << cell(value) << " |\n";
  };
  for (const auto& [key, value] : detail::run_facts(report)) row(key, value);
  out << appendix;
  return out.str();
}

}  // namespace ortmem::report
