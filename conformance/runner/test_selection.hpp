// test_selection.hpp: which tests a run runs, decided once, in the parent.
//
// Both run modes execute exactly this list (in-process as an exact-name
// filter, isolated as the children's lists), so a filter can never mean two
// things. The filter has GoogleTest's syntax and meaning (glob.hpp).
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "ortmem/report/glob.hpp"
#include "ortmem/report/report.hpp"

namespace ortmem::cts {

using report::filter_selects;
using report::glob_matches;

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
  bool filtered = false;           // the filter or profile alone did
};

// Every registered test, in registration order ("Adapters/Suite.Name/param").
[[nodiscard]] std::vector<std::string> registered_tests();

// Applies the request to `tests`. A profile selection keeps the tests whose
// requirement ids (from their source) include one of the profiles;
// `profile_of` maps a requirement id to its profile.
[[nodiscard]] Selection select_tests(const std::vector<std::string>& tests, const SelectionRequest& request,
                                     std::string (*profile_of)(std::string_view requirement));

// "Adapters/Suite" for "Adapters/Suite.Name/param": the unit tests are grouped by.
using report::suite_of;

}  // namespace ortmem::cts
