#include "ortmem/mechanism/vmm/mapped_bytes.hpp"

#include <algorithm>
#include <map>
#include <new>
#include <string>
#include <vector>

#include "ortmem/allocator.hpp"
#include "ortmem/mechanism/vmm/granules.hpp"

namespace ortmem::vmm {

Expected<std::uint64_t, MemoryError> mapped_bytes_for_allocation(std::size_t bytes, std::size_t align,
                                                                 std::size_t granularity, Tier tier) {
  if (!is_valid_alignment(align)) {
    return fail(
        MemoryError::invalid_request(tier, bytes, "alignment " + std::to_string(align) + " is not a power of two"));
  }
  const auto mapped = round_up(bytes, granularity);
  if (!mapped)
    return fail(MemoryError::invalid_request(tier, bytes, "the size overflows when rounded up to whole granules"));
  return static_cast<std::uint64_t>(*mapped);
}

Expected<std::uint64_t, MemoryError> mapped_bytes_for_ranges(std::span<const AllocationCommitRange> ranges,
                                                             std::size_t granularity, Tier tier) {
  try {
    std::map<const void*, std::vector<bool>> touched;
    for (const AllocationCommitRange& range : ranges) {
      if (range.offset > range.allocation_bytes || range.bytes > range.allocation_bytes - range.offset) {
        return fail(MemoryError::invalid_request(tier, range.bytes, "a range lies outside its allocation"));
      }
      const GranuleSpan span = granules_holding(range.offset, range.bytes, granularity);
      if (span.count == 0) continue;
      auto& granules = touched[range.ptr];
      if (granules.size() < span.end()) granules.resize(span.end(), false);
      std::fill(granules.begin() + static_cast<std::ptrdiff_t>(span.first),
                granules.begin() + static_cast<std::ptrdiff_t>(span.end()), true);
    }
    std::uint64_t total = 0;
    for (const auto& [ptr, granules] : touched) {
      total += static_cast<std::uint64_t>(std::count(granules.begin(), granules.end(), true)) * granularity;
    }
    return total;
  } catch (const std::bad_alloc&) {
    return fail(MemoryError::allocation_failed(tier, 0, "out of host memory estimating ranges"));
  }
}

}  // namespace ortmem::vmm
