// ortmem/report/report_json.hpp: the report's JSON form, written and read.
//
// The one place that spells the report's keys. Writing then reading gives the
// same Report back. The reader is strict: a missing key, a value of the wrong
// type or an unknown status name is an error naming where it is
// ("tests[3].status: 'bogus' is not a test status"), never a default. It does
// not re-judge: the judgement read is the one written (report verify compares
// it with a fresh one).
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "ortmem/expected.hpp"
#include "ortmem/report/report.hpp"

namespace ortmem::report {

// Parses JSON from outside: more than 64 levels of nesting (a recursion bomb
// for every later walk of the document) and an object with a key twice (where
// readers disagree on which one counts, so a signed document could say two
// things) are errors, as is text that is not JSON. Errors say where.
[[nodiscard]] Expected<nlohmann::json, std::string> parse_untrusted_json(std::string_view text);

[[nodiscard]] nlohmann::json to_json(const Report& report);
[[nodiscard]] Expected<Report, std::string> report_from_json(const nlohmann::json& document);

// JSON text of any document the kit writes. Text that is not UTF-8 (a
// crashed child's last output can end mid-character) becomes U+FFFD instead
// of making the writer throw; `indent` < 0 gives one line.
[[nodiscard]] std::string dump_json(const nlohmann::json& document, int indent = -1);

// One test result alone, as the journal and the isolated runner's children pass it.
[[nodiscard]] nlohmann::json to_json(const TestResult& test);
[[nodiscard]] Expected<TestResult, std::string> test_result_from_json(const nlohmann::json& document);

}  // namespace ortmem::report
