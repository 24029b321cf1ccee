#include "ortmem/report/glob.hpp"

namespace ortmem::report {
namespace {

bool any_matches(std::string_view patterns, std::string_view text) {
  for (;;) {
    const std::size_t colon = patterns.find(':');
    if (glob_matches(patterns.substr(0, colon), text)) return true;
    if (colon == std::string_view::npos) return false;
    patterns.remove_prefix(colon + 1);
  }
}

}  // namespace

bool glob_matches(std::string_view pattern, std::string_view text) {
  // Greedy match remembering only the last '*': on a mismatch the star takes
  // one more character. Each star restart moves forward, so this is
  // O(|pattern| * |text|) at worst instead of exponential.
  std::size_t p = 0;
  std::size_t t = 0;
  std::size_t star = std::string_view::npos;
  std::size_t star_text = 0;
  while (t < text.size()) {
    if (p < pattern.size() && (pattern[p] == '?' || pattern[p] == text[t])) {
      ++p;
      ++t;
    } else if (p < pattern.size() && pattern[p] == '*') {
      star = p++;
      star_text = t;
    } else if (star != std::string_view::npos) {
      p = star + 1;
      t = ++star_text;
    } else {
      return false;
    }
  }
  while (p < pattern.size() && pattern[p] == '*') ++p;
  return p == pattern.size();
}

bool filter_selects(std::string_view filter, std::string_view id) {
  const std::size_t dash = filter.find('-');
  std::string_view positive = filter.substr(0, dash);
  if (positive.empty()) positive = "*";
  if (!any_matches(positive, id)) return false;
  return dash == std::string_view::npos || !any_matches(filter.substr(dash + 1), id);
}

}  // namespace ortmem::report
