#include "ortmem/allocator.hpp"

#include "ortmem/capability.hpp"

namespace ortmem {

// The structured release over the legacy entry points: they cannot report a
// partial failure, so the only honest shape left is Complete.
AllocationReleaseOutcome DeviceAllocator::release(void* ptr, std::size_t bytes, std::size_t align) noexcept {
  const std::uint64_t unmapped = deallocate_with_unmapped(ptr, bytes, align);
  return AllocationReleaseOutcome::complete({bytes, unmapped});
}

std::uint64_t DeviceAllocator::deallocate_with_unmapped(void* ptr, std::size_t bytes, std::size_t align) noexcept {
  deallocate(ptr, bytes, align);
  return 0;
}

Expected<void, MemoryError> VirtualBacking::commit_allocation_ranges(
    std::span<const AllocationCommitRange> ranges) noexcept {
  for (const AllocationCommitRange& range : ranges) {
    auto committed = commit_allocation_range(range.ptr, range.allocation_bytes, range.align, range.offset, range.bytes);
    if (!committed) return committed;
  }
  return {};
}

}  // namespace ortmem
