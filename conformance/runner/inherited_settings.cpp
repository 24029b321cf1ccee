#include "inherited_settings.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <charconv>
#include <cstdlib>
#include <map>
#include <sstream>

extern char** environ;

namespace ortmem::cts {
namespace {

std::optional<std::string> variable(const char* name) {
  const char* value = std::getenv(name);
  return value == nullptr ? std::nullopt : std::optional<std::string>(value);
}

std::vector<std::string> gtest_variables() {
  std::vector<std::string> names;
  for (char** entry = environ; *entry != nullptr; ++entry) {
    const std::string_view text(*entry);
    if (text.starts_with("GTEST_")) names.emplace_back(text.substr(0, text.find('=')));
  }
  return names;
}

}  // namespace

std::optional<std::uint64_t> parse_seed(std::string_view text) {
  std::uint64_t value = 0;
  if (text.empty() || text.front() < '0' || text.front() > '9') return std::nullopt;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (error != std::errc{} || end != text.data() + text.size()) return std::nullopt;
  return value;
}

Expected<InheritedSettings, std::string> take_inherited_settings(std::optional<std::uint64_t> seed_flag,
                                                                 std::optional<Shard> shard_flag,
                                                                 ModelBudgetFlags budget, std::uint64_t random_seed) {
  InheritedSettings settings;
  settings.shard = shard_flag;
  const auto total = variable("GTEST_TOTAL_SHARDS");
  const auto index = variable("GTEST_SHARD_INDEX");
  if (total || index) {
    const auto shard = parse_shard(index.value_or("") + "/" + total.value_or(""));
    if (!shard) {
      return fail("GTEST_SHARD_INDEX=" + index.value_or("(unset)") +
                  " and GTEST_TOTAL_SHARDS=" + total.value_or("(unset)") +
                  " do not name a shard; set both, with 0 <= index < total, or use --shard I/N");
    }
    if (!shard_flag) {
      settings.shard = shard;
      settings.notes.push_back("running shard " + *index + "/" + *total + " from GTEST_SHARD_INDEX/GTEST_TOTAL_SHARDS");
    } else if (shard->index != shard_flag->index || shard->count != shard_flag->count) {
      settings.notes.push_back("--shard overrides GTEST_SHARD_INDEX/GTEST_TOTAL_SHARDS");
    }
    if (const auto status_file = variable("GTEST_SHARD_STATUS_FILE")) {
      // GoogleTest's protocol: the file says "this program understood sharding".
      const int fd = ::open(status_file->c_str(), O_WRONLY | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0644);
      if (fd >= 0) ::close(fd);
    }
  }
  for (const std::string& name : gtest_variables()) {
    if (name != "GTEST_TOTAL_SHARDS" && name != "GTEST_SHARD_INDEX" && name != "GTEST_SHARD_STATUS_FILE" &&
        name != "GTEST_COLOR" && name != "GTEST_BRIEF") {
      settings.notes.push_back("ignoring " + name + ": ortmem-cts chooses its tests itself (see --filter, --shard)");
    }
    ::unsetenv(name.c_str());
  }

  // RC_PARAMS: "key=value key=value".
  std::map<std::string, std::string> params;
  std::vector<std::string> order;
  if (const auto rc = variable("RC_PARAMS")) {
    std::istringstream tokens(*rc);
    for (std::string token; tokens >> token;) {
      const std::size_t equals = token.find('=');
      const std::string key = token.substr(0, equals);
      if (!params.contains(key)) order.push_back(key);
      params[key] = equals == std::string::npos ? "" : token.substr(equals + 1);
    }
  }
  // Each setting the kit has a flag for: the flag and RC_PARAMS must agree,
  // and the variable ends up holding the value the report records.
  const auto settle = [&](const char* key, const char* flag, std::optional<std::uint64_t> flag_value,
                          std::uint64_t fallback, std::uint64_t least) -> Expected<std::uint64_t, std::string> {
    std::uint64_t value = flag_value.value_or(fallback);
    if (const auto given = params.find(key); given != params.end()) {
      const auto parsed = parse_seed(given->second);
      if (!parsed || *parsed < least) {
        return fail("RC_PARAMS has " + std::string(key) + "=" + given->second +
                    ", which is not a whole number of at least " + std::to_string(least));
      }
      if (flag_value && *flag_value != *parsed) {
        return fail(std::string(flag) + " " + std::to_string(*flag_value) + " and RC_PARAMS's " + key + "=" +
                    given->second + " disagree; give one of them");
      }
      value = *parsed;
    }
    if (!params.contains(key)) order.push_back(key);
    params[key] = std::to_string(value);
    return value;
  };
  const auto seed = settle("seed", "--seed", seed_flag, random_seed, 0);
  if (!seed) return fail(seed.error());
  settings.seed = *seed;
  const auto runs = settle("max_success", "--model-runs", budget.runs, kDefaultModelRuns, 1);
  if (!runs) return fail(runs.error());
  const auto length = settle("max_size", "--model-length", budget.length, kDefaultModelLength, 1);
  if (!length) return fail(length.error());
  settings.budget = {*runs, *length};
  for (const char* key : {"verbose_progress", "verbose_shrinking"}) {
    if (!params.contains(key)) order.push_back(key);
  }
  params.try_emplace("verbose_progress", "0");
  params.try_emplace("verbose_shrinking", "0");
  std::string rc_params;
  for (const std::string& key : order) rc_params += (rc_params.empty() ? "" : " ") + key + "=" + params[key];
  ::setenv("RC_PARAMS", rc_params.c_str(), 1);
  return settings;
}

}  // namespace ortmem::cts
