#include "test_selection.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <charconv>

#include "result_collector.hpp"

namespace ortmem::cts {
namespace {

bool any_matches(std::string_view patterns, std::string_view text) {
  for (;;) {
    const std::size_t colon = patterns.find(':');
    if (glob_matches(patterns.substr(0, colon), text)) return true;
    if (colon == std::string_view::npos) return false;
    patterns.remove_prefix(colon + 1);
  }
}

std::optional<int> parse_int(std::string_view text) {
  int value = 0;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (error != std::errc{} || end != text.data() + text.size() || text.empty()) return std::nullopt;
  return value;
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

std::optional<Shard> parse_shard(std::string_view text) {
  const std::size_t slash = text.find('/');
  if (slash == std::string_view::npos) return std::nullopt;
  const auto index = parse_int(text.substr(0, slash));
  const auto count = parse_int(text.substr(slash + 1));
  if (!index || !count || *count < 1 || *index < 0 || *index >= *count) return std::nullopt;
  return Shard{*index, *count};
}

std::vector<std::string> registered_tests() {
  std::vector<std::string> ids;
  const auto& unit = *::testing::UnitTest::GetInstance();
  for (int i = 0; i < unit.total_test_suite_count(); ++i) {
    const auto& suite = *unit.GetTestSuite(i);
    for (int j = 0; j < suite.total_test_count(); ++j) ids.push_back(test_id(*suite.GetTestInfo(j)));
  }
  return ids;
}

Selection select_tests(const std::vector<std::string>& tests, const SelectionRequest& request,
                       std::string (*profile_of)(std::string_view requirement)) {
  Selection selection;
  std::size_t position = 0;
  for (const std::string& id : tests) {
    if (!filter_selects(request.filter, id)) continue;
    if (!request.profiles.empty()) {
      const auto requirements = static_requirements(id);
      const bool in_profile = std::any_of(requirements.begin(), requirements.end(), [&](const std::string& requirement) {
        const std::string profile = profile_of(requirement);
        return std::find(request.profiles.begin(), request.profiles.end(), profile) != request.profiles.end();
      });
      if (!in_profile) continue;
    }
    // Shards split the filtered list round-robin, so every shard of a run
    // sees the same list and together they cover it exactly once.
    const bool in_shard = !request.shard || static_cast<int>(position % request.shard->count) == request.shard->index;
    ++position;
    if (in_shard) selection.tests.push_back(id);
  }
  selection.subset = selection.tests.size() != tests.size();
  return selection;
}

std::string_view suite_of(std::string_view id) { return id.substr(0, id.find('.')); }

}  // namespace ortmem::cts
