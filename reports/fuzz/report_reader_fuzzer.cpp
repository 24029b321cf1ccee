// libFuzzer target: arbitrary bytes as a report or a journal, through every
// reader and everything that consumes what a reader accepts (verify, merge,
// diff, render, JUnit, CTRF). Nothing may crash, leak or trip a sanitizer;
// a malformed file must come back as an error value. Built and run by
// scripts/fuzz.sh.
#include <cstddef>
#include <cstdint>
#include <string>

#include "ortmem/report/formats.hpp"
#include "ortmem/report/journal.hpp"
#include "ortmem/report/merge.hpp"
#include "ortmem/report/report_json.hpp"
#include "ortmem/report/verify.hpp"

namespace {

const std::vector<ortmem::report::SpecRequirement> kSpec = {{"ALLOC-001", "MUST", "core", "a"},
                                                            {"PIN-001", "MUST", "pins", "b", true}};

void exercise(const ortmem::report::Report& report) {
  using namespace ortmem::report;
  const auto document = to_json(report);
  (void)verify_report(document, kSpec, "1.0.0", std::nullopt);
  (void)merge_shards({report, report}, kSpec);
  (void)diff_reports(report, report);
  (void)render_markdown(report);
  (void)render_html(report);
  (void)to_junit_xml(report);
  (void)dump_json(to_ctrf(report));
  (void)combine_repeats(report.tests);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace ortmem::report;
  const std::string text(reinterpret_cast<const char*>(data), size);
  if (const auto document = parse_untrusted_json(text)) {
    (void)verify_report(*document, kSpec, "1.0.0", std::nullopt);
    if (auto report = report_from_json(*document)) {
      exercise(*report);
      // Shards of one run: the same report split in two, so merge goes past its identity checks.
      Report first = *report;
      Report second = *report;
      first.run.shard = "0/2";
      second.run.shard = "1/2";
      second.tests.clear();
      (void)merge_shards({first, second}, kSpec);
    }
  }
  if (auto journal = parse_journal(text, "fuzz.journal")) exercise(journal->report);
  return 0;
}
