// environment.hpp: the machine a run happened on, for the report.
#pragma once

#include <string>

#include "ortmem/report/report.hpp"

namespace ortmem::cts {

[[nodiscard]] report::EnvironmentSection describe_environment();
// The current UTC time as ISO 8601 ("2026-12-01T10:00:00Z").
[[nodiscard]] std::string iso_now();

}  // namespace ortmem::cts
