// inherited_settings.hpp: what the runner takes from its environment.
//
// GoogleTest and RapidCheck read variables a CI system may have set for
// something else. Left alone they would change a certification behind the
// kit's back (GTEST_SHARD_INDEX running a shard in every child, GTEST_REPEAT
// doubling entries, RC_PARAMS's seed overridden), so the runner decides once:
//   - GTEST_TOTAL_SHARDS / GTEST_SHARD_INDEX become --shard when no --shard
//     is given (GTEST_SHARD_STATUS_FILE is touched, as GoogleTest's sharding
//     protocol asks); every other GTEST_* variable is dropped with a note;
//     none reaches GoogleTest or a test child;
//   - RC_PARAMS is honoured: its seed is the run's seed, its max_success and
//     max_size the model budget (a flag that says otherwise is a usage
//     error), its other settings are kept, and the variable the children see
//     holds the values the report records.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "ortmem/expected.hpp"
#include "test_selection.hpp"

namespace ortmem::cts {

// How much a model-based (RapidCheck) test explores: `runs` random command
// sequences (RapidCheck's max_success), the longest `length` + 1 commands
// (its max_size). A test's sequence is fixed by the seed and this budget, so
// a reproduction needs all three.
struct ModelBudget {
  std::uint64_t runs = 0;
  std::uint64_t length = 0;
};
inline constexpr std::uint64_t kDefaultModelRuns = 100;
inline constexpr std::uint64_t kDefaultModelLength = 100;

// --model-runs and --model-length, when given.
struct ModelBudgetFlags {
  std::optional<std::uint64_t> runs;
  std::optional<std::uint64_t> length;
};

struct InheritedSettings {
  std::uint64_t seed = 0;
  ModelBudget budget;
  std::optional<Shard> shard;
  std::vector<std::string> notes;  // one line each, for stderr
};

// Reads and then cleans the environment as described above. `random_seed`
// is used when neither --seed nor RC_PARAMS gives one.
[[nodiscard]] Expected<InheritedSettings, std::string> take_inherited_settings(std::optional<std::uint64_t> seed_flag,
                                                                               std::optional<Shard> shard_flag,
                                                                               ModelBudgetFlags budget,
                                                                               std::uint64_t random_seed);

// A seed as the command line gives it: decimal digits that fit 64 bits.
[[nodiscard]] std::optional<std::uint64_t> parse_seed(std::string_view text);

}  // namespace ortmem::cts
