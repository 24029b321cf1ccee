// ortmem/report/speed_profile.hpp: the JSON `ortmem-cts profile` writes,
// read and rendered as a section of a report for people.
//
// A speed profile is informational: `report render --speed-profile` shows it
// beside a report as a small chart, and nothing else reads it. It never
// enters a report's JSON, its verdict, merge or diff.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "ortmem/expected.hpp"
#include "ortmem/report/report.hpp"

namespace ortmem::report {

struct SpeedProfile {
  struct Size {
    std::uint64_t bytes = 0;
    double adapter_ns = 0;    // allocate+release, median
    double reference_ns = 0;  // the same, of the reference host allocator, in the same run
    double ratio = 0;         // adapter ÷ reference
  };
  std::string adapter;
  std::string reference;
  std::vector<Size> sizes;
  std::uint64_t scaling_bytes = 0;
  double adapter_scaling = 0;  // items/s with two threads ÷ with one
  double reference_scaling = 0;
};

// The profile in `json`, or what is wrong with it, for people.
[[nodiscard]] Expected<SpeedProfile, std::string> read_speed_profile(const nlohmann::json& json);
// Whether `profile` measured the adapter `report` certified: its name, or a
// plugin's "path#mechanism".
[[nodiscard]] bool profiles_adapter_of(const SpeedProfile& profile, const Report& report);
// The section rendered for a report in Markdown (a table with text bars) or
// HTML (a table with bars drawn by inline style, as the page allows nothing else).
[[nodiscard]] std::string speed_profile_markdown(const SpeedProfile& profile);
[[nodiscard]] std::string speed_profile_html(const SpeedProfile& profile);

}  // namespace ortmem::report
