#include "report_commands.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <iostream>

#include "spec_catalog.hpp"
#include "ortmem/report/expectations.hpp"
#include "ortmem/report/formats.hpp"
#include "ortmem/report/integrity.hpp"
#include "ortmem/report/speed_profile.hpp"
#include "ortmem/report/journal.hpp"
#include "ortmem/report/merge.hpp"
#include "ortmem/report/report_file.hpp"
#include "ortmem/report/report_json.hpp"
#include "ortmem/report/verify.hpp"
#include "run_output.hpp"

namespace ortmem::cts {

int recover(const std::string& journal_path, const std::optional<std::string>& report_path,
            const std::optional<std::string>& signing_key_path) {
  std::optional<report::SigningKey> signing_key;
  if (auto problem = load_signing_key(signing_key_path, signing_key)) return usage_error(*problem);
  auto recovered = report::read_journal(journal_path);
  if (!recovered) return usage_error(recovered.error());
  // The journal names its report, but a journal is only a file: it may say
  // anything. Its own report is written only where the journal sits beside
  // it, as the runner left it; anywhere else needs --report.
  if (!report_path && report::journal_path_for(recovered->report_path) != journal_path) {
    return usage_error("the journal names the report '" + recovered->report_path + "', which is not beside it ('" +
                       journal_path + "'); give --report FILE");
  }
  const std::string target = report_path.value_or(recovered->report_path);
  if (auto problem = report::check_output_path(target, "--report")) return usage_error(*problem);
  report::Report& result = recovered->report;
  result.tests = report::combine_repeats(result.tests);
  result = report::replay_waivers(result);  // the run's expectations came in the journal's header
  result.run.scope.incomplete = true;
  result.run.interruption = "the runner stopped before finishing; recovered from " + journal_path + " with " +
                            std::to_string(result.tests.size()) + " finished tests" +
                            (recovered->torn_lines > 0 ? " (a torn last line was dropped)" : "");
  report::judge_report(spec_catalog().requirements, result);
  print_summary(result, target == "-" ? std::cerr : std::cout);
  if (target == "-") {
    std::cout << report::sealed_report_text(result, signing_key);
  } else {
    if (auto error = report::write_report_file(target, result, signing_key)) return usage_error(*error);
    std::cout << "report: " << target << '\n';
    // Everything the journal held is in the report now.
    if (target == recovered->report_path) std::remove(journal_path.c_str());
  }
  return exit_code_for(result.judgement.verdict.overall);
}

int verify(const std::string& report_path, const std::optional<std::string>& public_key_path) {
  std::optional<std::array<unsigned char, 32>> trusted;
  if (public_key_path) {
    auto key = report::read_public_key(*public_key_path);
    if (!key) return usage_error("--pubkey: " + key.error());
    trusted = *key;
  }
  auto content = report::read_regular_file(report_path);
  if (!content) return usage_error(content.error());
  const auto document = report::parse_untrusted_json(*content);
  if (!document) return usage_error("'" + report_path + "': " + document.error());
  const SpecCatalog& catalog = spec_catalog();
  const report::Verification verification =
      report::verify_report(*document, catalog.requirements, catalog.version, trusted);
  for (const auto& warning : verification.warnings) std::cout << "warning: " << warning << '\n';
  if (!verification.ok()) {
    for (const auto& problem : verification.problems) std::cout << "problem: " << problem << '\n';
    std::cerr << "ortmem-cts: " << report_path << " does not verify (" << verification.problems.size()
              << " problems)\n";
    return kExitNotConformant;
  }
  const report::Report& verified = *verification.report;
  std::cout << "verified: " << report_path << ": adapter " << verified.adapter.name << ", verdict "
            << to_string(verified.judgement.verdict.overall) << ", spec " << verified.kit.spec_version << ", "
            << verified.tests.size() << " tests" << (trusted ? ", signed by the given key" : ", digest only") << '\n';
  return kExitConformant;
}

int merge(const std::vector<std::string>& shard_paths, const std::string& report_path) {
  if (auto problem = report::check_output_path(report_path, "--report")) return usage_error(*problem);
  std::vector<report::Report> shards;
  for (const auto& path : shard_paths) {
    auto shard = report::read_report_file(path);
    if (!shard) return usage_error(shard.error());
    shards.push_back(std::move(*shard));
  }
  auto merged = report::merge_shards(std::move(shards), spec_catalog().requirements);
  if (!merged) return usage_error(merged.error());
  std::ostream& out = report_path == "-" ? std::cerr : std::cout;
  print_summary(*merged, out);
  if (auto error = write_output(report_path, report::sealed_report_text(*merged))) return usage_error(*error);
  if (report_path != "-") out << "report: " << report_path << '\n';
  return exit_code_for(merged->judgement.verdict.overall);
}

int diff(const std::string& base_path, const std::string& next_path) {
  auto base = report::read_report_file(base_path);
  if (!base) return usage_error(base.error());
  auto next = report::read_report_file(next_path);
  if (!next) return usage_error(next.error());
  if (base->adapter.name != next->adapter.name) {
    return usage_error("the reports are of different adapters ('" + base->adapter.name + "' and '" +
                       next->adapter.name + "'): diff compares two runs of one adapter");
  }
  const report::ReportDiff changes = report::diff_reports(*base, *next);
  for (const auto& [title, lines] :
       {std::pair{"regression", &changes.regressions}, std::pair{"fix", &changes.fixes},
        std::pair{"new", &changes.new_tests}, std::pair{"removed", &changes.removed_tests}}) {
    for (const auto& line : *lines) std::cout << title << ": " << line << '\n';
  }
  std::cout << changes.regressions.size() << " regressions, " << changes.fixes.size() << " fixes, "
            << changes.new_tests.size() << " new tests, " << changes.removed_tests.size() << " removed tests\n";
  return changes.regressed() ? kExitNotConformant : kExitConformant;
}

int render(const std::string& report_path, const std::string& format, const std::optional<std::string>& output,
           const std::optional<std::string>& speed_profile_path) {
  if (output) {
    if (auto problem = report::check_output_path(*output, "--output")) return usage_error(*problem);
  }
  auto read = report::read_report_file(report_path);
  if (!read) return usage_error(read.error());
  std::string appendix;
  if (speed_profile_path) {
    std::ifstream file(*speed_profile_path);
    if (!file) return usage_error("--speed-profile '" + *speed_profile_path + "': cannot be read");
    const nlohmann::json json = nlohmann::json::parse(file, nullptr, /*allow_exceptions=*/false);
    auto profile = report::read_speed_profile(json);
    if (!profile) return usage_error("--speed-profile '" + *speed_profile_path + "': " + profile.error());
    if (!report::profiles_adapter_of(*profile, *read)) {
      return usage_error("--speed-profile '" + *speed_profile_path + "' measured '" + profile->adapter +
                         "', but the report certified '" + read->adapter.name + "'");
    }
    appendix = format == "html" ? report::speed_profile_html(*profile) : report::speed_profile_markdown(*profile);
  }
  const std::string content =
      format == "html" ? report::render_html(*read, appendix) : report::render_markdown(*read, appendix);
  if (auto error = write_output(output.value_or("-"), content)) return usage_error("--output: " + *error);
  return kExitConformant;
}

int keygen(const std::string& secret_path, const std::string& public_path) {
  for (const auto& [path, option] : {std::pair{secret_path, "--secret"}, std::pair{public_path, "--public"}}) {
    if (path == "-") return usage_error(std::string(option) + " needs a file path");
    if (auto problem = report::check_output_path(path, option)) return usage_error(*problem);
  }
  auto key = report::generate_signing_key();
  if (!key) return usage_error(key.error());
  // Created 0600 and never over an existing file: a secret is not replaced by accident, nor readable for a moment.
  const int fd = ::open(secret_path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd < 0)
    return usage_error("--secret '" + secret_path + "': " + std::strerror(errno) +
                       " (an existing key is never overwritten)");
  const std::string secret = report::secret_key_text(*key);
  const bool written =
      ::write(fd, secret.data(), secret.size()) == static_cast<ssize_t>(secret.size()) && ::fsync(fd) == 0;
  ::close(fd);
  if (!written) return usage_error("--secret '" + secret_path + "': cannot write the key");
  if (auto error = report::write_file_atomically(public_path, report::public_key_text(*key)))
    return usage_error(*error);
  std::cout << "secret key: " << secret_path << " (keep it private)\npublic key: " << public_path << '\n';
  return kExitConformant;
}

}  // namespace ortmem::cts
