// ortmem/report/expectations.hpp: known deviations, listed so that they are
// reported as such instead of failing a pipeline every day.
//
// An expectations file (`--expectations FILE`) is JSON:
//   {"expectations": [
//     {"test": "Adapters/Allocator.Serves*", "requirement": "ALLOC-007",
//      "adapter": "glibc*", "status": "fail",
//      "reason": "glibc returns NULL for zero bytes", "url": "https://..."}]}
// Each entry names tests by `test` (a glob over test ids), by `requirement`
// (tests that name that id), or both (both must hold); `adapter` (a glob,
// default '*') scopes it; `status` is the failure expected: fail, crash,
// timeout, error, or failure (any of them, the default); `reason` is
// required, `url` optional. Unknown keys are errors, so a typo cannot
// silently disable an entry.
//
// Applied to a run's results before judging: a test whose failure an entry
// expects becomes `waived` (keeping its real status and the reason); a
// requirement failed only by waived tests is waived; a profile whose MUST
// requirements are met or waived is `waived`, never `conformant`. Every entry
// goes into the report's `waivers` with its state: applied; unexpected-pass
// (the tests it names passed: the deviation is gone, remove the entry);
// other-outcome (they failed, but not as expected: the failure stands); or
// stale (it names no test of this run).
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "ortmem/expected.hpp"
#include "ortmem/report/report.hpp"

namespace ortmem::report {

struct Expectation {
  std::string test = "*";
  std::string requirement;
  std::string adapter = "*";
  std::string status = "failure";
  std::string reason;
  std::string url;
};

// Parses an expectations document; errors name `source` and the entry.
[[nodiscard]] Expected<std::vector<Expectation>, std::string> parse_expectations(std::string_view text,
                                                                                 const std::string& source);

// Waives what the expectations expect and records every entry in
// report.waivers. Call before judge_report().
void apply_expectations(const std::vector<Expectation>& expectations, Report& report);

// The report with its own waivers applied afresh to its real results (each
// waived test back to its actual status first): what merge records and what
// verify compares with.
[[nodiscard]] Report replay_waivers(const Report& report);

}  // namespace ortmem::report
