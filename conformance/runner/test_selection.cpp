#include "test_selection.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <charconv>

#include "result_collector.hpp"

namespace ortmem::cts {
namespace {

std::optional<int> parse_int(std::string_view text) {
  int value = 0;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (error != std::errc{} || end != text.data() + text.size() || text.empty()) return std::nullopt;
  return value;
}

}  // namespace

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
      const bool in_profile =
          std::any_of(requirements.begin(), requirements.end(), [&](const std::string& requirement) {
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
  selection.filtered = position != tests.size();
  selection.subset = selection.tests.size() != tests.size();
  return selection;
}

}  // namespace ortmem::cts
