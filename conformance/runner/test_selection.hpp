// test_selection.hpp: which tests a run runs, decided once, in the parent.
//
// Both run modes execute exactly this list (in-process as an exact-name
// filter, isolated as the children's lists), so a filter can never mean two
// things. The filter has GoogleTest's syntax and meaning: POSITIVE[-NEGATIVE],
// each a ':'-separated list of globs with '*' and '?' over "Suite.Name"; an
// empty positive part means '*'. Matching is linear in the name for each
// glob (no backtracking blow-up).
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace ortmem::cts {

[[nodiscard]] bool glob_matches(std::string_view pattern, std::string_view text);
[[nodiscard]] bool filter_selects(std::string_view filter, std::string_view id);

struct Shard {
  int index = 0;  // 0-based, as GTEST_SHARD_INDEX
  int count = 1;
};
// "I/N" with 0 <= I < N; nullopt otherwise.
[[nodiscard]] std::optional<Shard> parse_shard(std::string_view text);

struct SelectionRequest {
  std::string filter = "*";
  std::vector<std::string> profiles;  // empty: every profile
  std::optional<Shard> shard;
};

struct Selection {
  std::vector<std::string> tests;  // in registration order
  bool subset = false;             // a filter, profile or shard left tests out
};

// Every registered test, in registration order ("Adapters/Suite.Name/param").
[[nodiscard]] std::vector<std::string> registered_tests();

// Applies the request to `tests`. A profile selection keeps the tests whose
// requirement ids (from their source) include one of the profiles;
// `profile_of` maps a requirement id to its profile.
[[nodiscard]] Selection select_tests(const std::vector<std::string>& tests, const SelectionRequest& request,
                                     std::string (*profile_of)(std::string_view requirement));

// "Adapters/Suite" for "Adapters/Suite.Name/param": the unit tests are grouped by.
[[nodiscard]] std::string_view suite_of(std::string_view id);

}  // namespace ortmem::cts
