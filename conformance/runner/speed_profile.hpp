// conformance/runner/speed_profile.hpp: `ortmem-cts profile`, how fast an
// adapter's allocator is beside the kit's reference host allocator.
//
// Informational and separate from certification: it is never part of `run`,
// a verdict, merge or diff, and nothing it measures can pass or fail
// anything. Both allocators are measured in the same run, so the figures to
// read are the ratios, not the nanoseconds, which move with the machine.
#pragma once

#include <optional>
#include <string>

namespace ortmem::cts {

struct SpeedProfileOptions {
  std::string adapter;                // registered already (a plugin's "path#MECHANISM" too)
  std::optional<std::string> output;  // the JSON, to this file or "-"
  double min_time_s = 0.2;            // Google Benchmark's least time per measurement
};

// Measures allocate+release at a few sizes and the two-thread scaling of the
// adapter's allocator and of the reference host allocator, prints a table,
// and writes the JSON when asked. Exit 0, or 2 with one line for an adapter
// that does not exist, cannot run here or refuses to allocate.
[[nodiscard]] int speed_profile(const SpeedProfileOptions& options);

}  // namespace ortmem::cts
