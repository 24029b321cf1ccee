// report_commands.hpp: `ortmem-cts report ...`, working with reports
// already written. Each returns the exit status (run_output.hpp).
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace ortmem::cts {

// `ortmem-cts report recover JOURNAL [--report FILE] [--sign KEY]`.
[[nodiscard]] int recover(const std::string& journal, const std::optional<std::string>& report_path,
                          const std::optional<std::string>& signing_key_path);
// `ortmem-cts report verify FILE [--pubkey KEY]`: 0 verified, 1 not, 2 unreadable.
[[nodiscard]] int verify(const std::string& report_path, const std::optional<std::string>& public_key_path);
// `ortmem-cts report merge SHARD... --report FILE`: the exit status of the merged verdict.
[[nodiscard]] int merge(const std::vector<std::string>& shard_paths, const std::string& report_path);
// `ortmem-cts report diff BASE NEW`: 0 no regression, 1 regressions, 2 unreadable.
[[nodiscard]] int diff(const std::string& base_path, const std::string& next_path);
// `ortmem-cts report render REPORT --format md|html [--output FILE] [--speed-profile FILE]`.
// With `speed_profile_path`, the speed profile `ortmem-cts profile` wrote for
// the same adapter is shown after the report (informational).
[[nodiscard]] int render(const std::string& report_path, const std::string& format,
                         const std::optional<std::string>& output,
                         const std::optional<std::string>& speed_profile_path = std::nullopt);
// `ortmem-cts report keygen --secret FILE --public FILE`.
[[nodiscard]] int keygen(const std::string& secret_path, const std::string& public_path);

}  // namespace ortmem::cts
