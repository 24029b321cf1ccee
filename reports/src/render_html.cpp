#include <sstream>

#include "detail/report_view.hpp"
#include "ortmem/report/formats.hpp"

namespace ortmem::report {

std::string render_html(const Report& report, std::string_view appendix) {
  const auto e = [](std::string_view text) { return xml_escape(text); };
  const std::string verdict = to_string(report.judgement.verdict.overall);
  std::ostringstream out;
  out << "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
      << "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; style-src 'unsafe-inline'\">\n"
      << "<title>ortmem-cts: " << e(report.adapter.name) << " is " << e(verdict) << "</title>\n<style>\n"
      << "body{font-family:sans-serif;margin:2em;max-width:70em}table{border-collapse:collapse}"
      << "td,th{border:1px solid #999;padding:.3em .6em;text-align:left}code{font-size:90%}"
      << ".conformant{color:#070}.not-conformant{color:#b00}.partial,.incomplete,.not-run{color:#a60}\n"
      << "</style>\n</head>\n<body>\n";
  out << "<h1>ortmem-cts report: " << e(report.adapter.name) << "</h1>\n";
  out << "<p id=\"verdict\" class=\"" << e(verdict) << "\"><strong>Verdict: " << e(verdict) << "</strong>"
      << (report.run.interruption.empty() ? "" : " (" + e(report.run.interruption) + ")") << "</p>\n";
  out << "<table>\n<tr><th>profile</th><th>result</th><th>declared</th><th>requirements</th></tr>\n";
  for (const ProfileVerdict& profile : report.judgement.verdict.profiles) {
    const std::string counts = detail::counts_text(profile);
    out << "<tr><td>" << e(profile.name) << "</td><td class=\"" << e(to_string(profile.result)) << "\">"
        << e(to_string(profile.result)) << (profile.note.empty() ? "" : " (" + e(profile.note) + ")") << "</td><td>"
        << (profile.declared ? "yes" : "no") << "</td><td>" << e(counts) << "</td></tr>\n";
  }
  out << "</table>\n";
  const auto failing = detail::failing_requirements(report);
  out << "<h2>Failing requirements (" << failing.size() << ")</h2>\n";
  if (failing.empty()) out << "<p>None.</p>\n";
  for (const auto& entry : failing) {
    const SpecRequirement& requirement = entry.requirement->requirement;
    out << "<h3 class=\"failing-requirement\">" << e(requirement.id) << " (" << e(requirement.level) << ", "
        << e(requirement.profile) << "): " << e(requirement.title) << "</h3>\n";
    if (!requirement.remedy.empty()) out << "<p class=\"remedy\">Remedy: " << e(requirement.remedy) << "</p>\n";
    out << "<ul>\n";
    for (const auto& check : entry.checks) {
      out << "<li><code>" << e(check.test->id) << "</code> " << e(to_string(check.test->status))
          << (check.where.empty() ? "" : " at <code>" + e(check.where) + "</code>") << ": <pre>"
          << e(check.message.substr(0, 2000)) << "</pre>";
      if (check.test->reproduce) out << "reproduce: <code>" << e(*check.test->reproduce) << "</code>";
      out << "</li>\n";
    }
    out << "</ul>\n";
  }
  out << "<h2>Run</h2>\n<table>\n";
  const auto row = [&](const std::string& key, const std::string& value) {
    out << "<tr><th>" << e(key) << "</th><td>" << e(value) << "</td></tr>\n";
  };
  for (const auto& [key, value] : detail::run_facts(report)) row(key, value);
  out << "</table>\n" << appendix << "</body>\n</html>\n";
  return out.str();
}

}  // namespace ortmem::report
