// ortmem/report/glob.hpp: GoogleTest's filter syntax and meaning, matched in
// one place for the runner's --filter and the expectations' patterns.
//
// A glob has '*' (any run) and '?' (any one character) and matches the whole
// name. A filter is POSITIVE[-NEGATIVE], each a ':'-separated list of globs;
// an empty positive part means '*'. Matching is O(|glob| * |name|) at worst:
// no backtracking blow-up whatever the pattern.
#pragma once

#include <string_view>

namespace ortmem::report {

[[nodiscard]] bool glob_matches(std::string_view pattern, std::string_view text);
[[nodiscard]] bool filter_selects(std::string_view filter, std::string_view id);

}  // namespace ortmem::report
