// ortmem/capability.hpp: optional capabilities discovered from an allocator.
//
// An eager allocator needs neither. A VMM-style allocator exposes
// VirtualBacking; a mechanism with reusable physical handles exposes
// SharedMapping; either, both or neither may be present. Every pointer a
// capability accepts or returns belongs to the allocator it was discovered
// from, and terminal release of a whole allocation always goes back through
// that allocator's release(): no capability owns it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>

#include "ortmem/expected.hpp"
#include "ortmem/memory_error.hpp"
#include "ortmem/shared_prefix.hpp"

namespace ortmem {

// One byte range [begin, end) of an allocation, relative to its start.
struct ByteRange {
  std::size_t begin = 0;
  std::size_t end = 0;
  [[nodiscard]] constexpr std::size_t size() const noexcept { return end - begin; }
  friend constexpr bool operator==(ByteRange, ByteRange) noexcept = default;
};

// A range of one live allocation, named by the allocation's full identity.
struct AllocationCommitRange {
  void* ptr = nullptr;
  std::size_t allocation_bytes = 0;
  std::size_t align = 0;
  std::size_t offset = 0;
  std::size_t bytes = 0;
};

// Lazy reservation plus physical commit and decommit.
//
// Ranges outside the allocation, or a (ptr, allocation_bytes, align) that is
// not a live allocation of this mechanism, are refused and change nothing.
// A decommit that fails either rolls back completely or is reported with
// residual facts; it never reports success after a partial change.
class VirtualBacking {
 public:
  virtual ~VirtualBacking() = default;

  // Reserves one allocation and commits only `committed` (offsets into it).
  [[nodiscard]] virtual Expected<void*, MemoryError> allocate_committed(
      std::size_t bytes, std::size_t align, std::span<const ByteRange> committed) noexcept = 0;

  // Maps physical memory under [offset, offset + bytes) of the allocation.
  [[nodiscard]] virtual Expected<void, MemoryError> commit_allocation_range(void* ptr, std::size_t allocation_bytes,
                                                                            std::size_t align, std::size_t offset,
                                                                            std::size_t bytes) noexcept = 0;
  // Several commits; the default commits them in order and stops at the first error.
  [[nodiscard]] virtual Expected<void, MemoryError> commit_allocation_ranges(
      std::span<const AllocationCommitRange> ranges) noexcept;

  // Releases physical backing but keeps the virtual allocation. Returns the
  // bytes that actually became unmapped once granularity and sharing apply: a
  // granule still holding committed bytes outside the range stays mapped.
  [[nodiscard]] virtual Expected<std::uint64_t, MemoryError> decommit_allocation_range(
      void* ptr, std::size_t allocation_bytes, std::size_t align, std::size_t offset, std::size_t bytes) noexcept = 0;

  // Conservative estimates (never below what a commit would map), in whole
  // granules; only the mechanism knows its granularity and which tiny ranges
  // share a granule.
  [[nodiscard]] virtual Expected<std::uint64_t, MemoryError> mapped_bytes_for_allocation(
      std::size_t bytes, std::size_t align) const noexcept = 0;
  [[nodiscard]] virtual Expected<std::uint64_t, MemoryError> mapped_bytes_for_allocation_ranges(
      std::span<const AllocationCommitRange> ranges) const noexcept = 0;

  // Bytes currently committed in the allocation, consistent with every commit
  // and decommit made so far.
  [[nodiscard]] virtual std::size_t allocation_committed_bytes(void* ptr, std::size_t allocation_bytes,
                                                               std::size_t align) const noexcept = 0;
};

// Shared physical prefixes mapped read-only into several allocations.
class SharedMapping {
 public:
  virtual ~SharedMapping() = default;

  [[nodiscard]] virtual Expected<std::unique_ptr<SharedDevicePrefix>, MemoryError> create_shared_prefix(
      std::size_t bytes) noexcept = 0;

  // The extra physical cost of one more mapping. Zero is valid only for a
  // prefix this capability can map: a foreign, wrong-device or wrong-authority
  // prefix is refused here exactly as commit_shared_prefix would refuse it,
  // before any cost is reported.
  [[nodiscard]] virtual Expected<std::uint64_t, MemoryError> incremental_owned_bytes_for_shared_prefix(
      const SharedDevicePrefix& prefix) const noexcept = 0;

  // Maps the prefix read-only at [byte_offset, byte_offset + mapped_bytes) of
  // the allocation. Transactional: on error no mapping made by this call
  // remains. Refused when the offset is not granule-aligned, the prefix does
  // not fit, the target is already committed, the allocation is not live at
  // exactly `allocation_bytes`, or the prefix is foreign.
  [[nodiscard]] virtual Expected<SharedPrefixCommitInfo, MemoryError> commit_shared_prefix(
      const SharedDevicePrefix& prefix, void* ptr, std::size_t allocation_bytes, std::size_t byte_offset) noexcept = 0;
};

}  // namespace ortmem
