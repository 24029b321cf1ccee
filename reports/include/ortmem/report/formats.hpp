// ortmem/report/formats.hpp: the report in the formats other tools and
// people read. The JSON report stays the evidence; these are views of it.
//
//   JUnit XML (`--junit`): as Jenkins, GitLab and Ant read it, valid against
//     the Ant JUnit XSD vendored in reports/schema/third_party/. One
//     <testsuite> per suite, one <testcase> per test. fail is <failure>;
//     crash, timeout and error are <error type="crash|timeout|error"> (a
//     crashed or hung allocator is not an assertion that failed);
//     not-applicable, skipped and waived are <skipped>. That XSD allows
//     properties only on a testsuite, so each test's requirement ids are the
//     suite property "requirements:<testcase name>", next to the adapter,
//     seed, run id and verdict.
//   CTRF JSON (`--ctrf`): the Common Test Report Format of the npm package
//     `ctrf` (spec 0.0.0). Its five statuses: pass is passed, fail is failed,
//     skipped is skipped; crash, timeout, error, not-applicable and waived are
//     other, with our status kept as rawStatus. Requirement ids are tags.
//   Markdown and HTML (`report render`): for people: the verdict per profile,
//     every failing requirement with the checks that failed it (file:line,
//     message, reproduce command), the environment. The HTML is one
//     self-contained file: no script, no external style, font or image.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "ortmem/report/report.hpp"

namespace ortmem::report {

[[nodiscard]] std::string to_junit_xml(const Report& report);
[[nodiscard]] nlohmann::json to_ctrf(const Report& report);
// `appendix`: a section of the renderer's own format to show after the report
// (a speed profile, speed_profile.hpp), at the end of the document's body.
[[nodiscard]] std::string render_markdown(const Report& report, std::string_view appendix = {});
[[nodiscard]] std::string render_html(const Report& report, std::string_view appendix = {});

// Text made safe for XML 1.0 character data and attributes: markup escaped,
// characters XML cannot carry and bytes that are not UTF-8 replaced by U+FFFD.
[[nodiscard]] std::string xml_escape(std::string_view text);

}  // namespace ortmem::report
