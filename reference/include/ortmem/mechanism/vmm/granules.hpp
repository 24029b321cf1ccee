// ortmem/mechanism/vmm/granules.hpp: the arithmetic every virtual-backing mechanism
// shares, kept apart from any driver so it is tested on any machine.
//
// Physical memory is mapped in granules (a page on the host, the driver's
// recommended granularity on CUDA, always a power of two). Byte ranges are
// widened to the granules that hold them; releases unmap contiguous runs of
// mapped granules, one driver call per run, so that a failure leaves whole
// runs either mapped or not.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <vector>

namespace ortmem::vmm {

// `value` rounded up to a multiple of `unit` (a power of two); nothing on overflow.
[[nodiscard]] constexpr std::optional<std::size_t> round_up(std::size_t value, std::size_t unit) noexcept {
  if (value > SIZE_MAX - (unit - 1)) return std::nullopt;
  return (value + unit - 1) & ~(unit - 1);
}

// The granules [first, first + count) that hold the bytes [offset, offset + bytes).
struct GranuleSpan {
  std::size_t first = 0;
  std::size_t count = 0;
  [[nodiscard]] std::size_t end() const noexcept { return first + count; }
  friend constexpr bool operator==(GranuleSpan, GranuleSpan) = default;
};

// Zero bytes touch no granule. The caller has checked offset + bytes fits.
[[nodiscard]] constexpr GranuleSpan granules_holding(std::size_t offset, std::size_t bytes,
                                                     std::size_t granularity) noexcept {
  if (bytes == 0) return {offset / granularity, 0};
  const std::size_t first = offset / granularity;
  return {first, (offset + bytes - 1) / granularity - first + 1};
}

// Maximal runs of consecutive granules for which `mapped(g)` holds, in address order.
template <class Predicate>
[[nodiscard]] std::vector<GranuleSpan> contiguous_runs(std::size_t granule_count, Predicate mapped) {
  std::vector<GranuleSpan> runs;
  for (std::size_t g = 0; g < granule_count;) {
    if (!mapped(g)) {
      ++g;
      continue;
    }
    std::size_t end = g;
    while (end < granule_count && mapped(end)) ++end;
    runs.push_back({g, end - g});
    g = end;
  }
  return runs;
}

}  // namespace ortmem::vmm
