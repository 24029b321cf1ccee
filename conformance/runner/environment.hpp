// environment.hpp: where a run happened, for the report.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

namespace ortmem::cts {

[[nodiscard]] nlohmann::json describe_environment();
// UTC, ISO 8601: "2026-11-29T20:30:00Z".
[[nodiscard]] std::string iso_now();

}  // namespace ortmem::cts
