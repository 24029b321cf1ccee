#include "ortmem/mechanism/vmm/regions.hpp"

#include <string>

namespace ortmem::vmm {

MemoryError not_live(Tier tier, std::uint64_t requested) {
  return MemoryError::invalid_request(tier, requested,
                                      "the address is not a live allocation of this size and alignment");
}

MemoryError out_of_records(Tier tier, std::uint64_t requested) {
  return MemoryError::allocation_failed(tier, requested, "out of host memory for the allocator's records");
}

AllocationReleaseOutcome release_of_no_live_allocation() {
  return AllocationReleaseOutcome::failed(
      "the address is not a live allocation of this virtual allocator with this size and alignment "
      "(never allocated here, already released, or a mismatched size or alignment); nothing was changed");
}

Expected<std::size_t, MemoryError> reservation_bytes(std::size_t bytes, std::size_t align, std::size_t granularity,
                                                     Tier tier) {
  if (!is_valid_alignment(align)) {
    return fail(
        MemoryError::invalid_request(tier, bytes, "alignment " + std::to_string(align) + " is not a power of two"));
  }
  const std::size_t boundary = std::max(align, granularity);
  const auto span = round_up(std::max<std::size_t>(bytes, 1), granularity);
  if (!span || *span > SIZE_MAX - boundary) {
    return fail(MemoryError::invalid_request(tier, bytes,
                                             "the size overflows when rounded up to whole granules of " +
                                                 std::to_string(granularity) + " bytes at alignment " +
                                                 std::to_string(align)));
  }
  return *span;
}

std::optional<MemoryError> check_committed_ranges(std::size_t bytes, std::span<const ByteRange> committed, Tier tier) {
  for (const ByteRange& range : committed) {
    if (range.begin > range.end || range.end > bytes) {
      return MemoryError::invalid_request(tier, bytes,
                                          "committed range " + std::to_string(range.begin) + ".." +
                                              std::to_string(range.end) + " lies outside the allocation");
    }
  }
  return std::nullopt;
}

std::optional<MemoryError> check_inside(std::size_t allocation_bytes, std::size_t offset, std::size_t bytes,
                                        Tier tier) {
  if (offset <= allocation_bytes && bytes <= allocation_bytes - offset) return std::nullopt;
  return MemoryError::invalid_request(tier, bytes,
                                      "range " + std::to_string(offset) + "+" + std::to_string(bytes) +
                                          " lies outside the allocation of " + std::to_string(allocation_bytes) +
                                          " bytes");
}

}  // namespace ortmem::vmm
