// ortmem/mechanism/vmm/regions.hpp: the records every virtual-backing
// mechanism keeps of its allocations, and the checks they all make before
// they touch memory.
//
// A region is one allocation: a reservation of address space carved into
// granules, each described by the mechanism's own Slot (a state on the host;
// a state, a physical handle and a shared prefix on CUDA), plus the byte
// ranges the caller committed. The table keys regions by address. A region
// whose release stopped part way is retired: it stays in the table, so its
// address range is never reissued, and no lookup finds it live again.
//
// What differs between mechanisms (how a granule is mapped, unmapped, or
// shared) stays in each; what must agree (which allocation a call names,
// which ranges are in bounds, which granules a decommit frees, where a prefix
// may go, and the words of each refusal) is written here once.
//
// Not thread-safe: each mechanism guards its table with its own lock.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <new>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "ortmem/allocator.hpp"
#include "ortmem/capability.hpp"
#include "ortmem/device.hpp"
#include "ortmem/mechanism/vmm/byte_range_set.hpp"
#include "ortmem/mechanism/vmm/granules.hpp"
#include "ortmem/release_outcome.hpp"

namespace ortmem::vmm {

template <class Slot>
struct Region {
  std::uintptr_t address = 0;  // the allocation, aligned to max(align, granularity)
  std::size_t bytes = 0;
  std::size_t align = 0;
  std::vector<Slot> slots;  // one per granule of round_up(max(bytes, 1), granularity)
  ByteRangeSet committed;   // the bytes the caller committed
  bool retired = false;     // release stopped part way: kept reserved, never live again

  [[nodiscard]] std::uintptr_t granule_address(std::size_t g, std::size_t granularity) const noexcept {
    return address + g * granularity;
  }
  [[nodiscard]] std::size_t reserved_bytes(std::size_t granularity) const noexcept {
    return slots.size() * granularity;
  }
  // Bytes of the granules whose slot satisfies `counted`.
  template <class Predicate>
  [[nodiscard]] std::size_t bytes_of_granules(std::size_t granularity, Predicate counted) const {
    return static_cast<std::size_t>(std::count_if(slots.begin(), slots.end(), counted)) * granularity;
  }
};

// Regions of type R (derived from Region<Slot>), keyed by address.
template <class R>
class RegionTable {
 public:
  using Map = std::map<std::uintptr_t, std::unique_ptr<R>>;

  // The live region at `address` made with exactly `bytes` and `align`, or null.
  [[nodiscard]] R* find_live(std::uintptr_t address, std::size_t bytes, std::size_t align) const noexcept {
    R* region = find_live_of_size(address, bytes);
    return region != nullptr && region->align == align ? region : nullptr;
  }
  // The live region at `address` of exactly `bytes`, whatever its alignment.
  [[nodiscard]] R* find_live_of_size(std::uintptr_t address, std::size_t bytes) const noexcept {
    const auto found = regions_.find(address);
    if (found == regions_.end() || found->second->retired || found->second->bytes != bytes) return nullptr;
    return found->second.get();
  }
  // Throws std::bad_alloc when the host heap is exhausted.
  R& insert(std::unique_ptr<R> region) {
    const std::uintptr_t address = region->address;
    return *regions_.emplace(address, std::move(region)).first->second;
  }
  void erase(std::uintptr_t address) noexcept { regions_.erase(address); }
  [[nodiscard]] std::size_t live_count() const noexcept {
    return static_cast<std::size_t>(
        std::count_if(regions_.begin(), regions_.end(), [](const auto& entry) { return !entry.second->retired; }));
  }
  // Calls fn(region) for every region, live or retired.
  template <class Fn>
  void for_each(Fn fn) const {
    for (const auto& [address, region] : regions_) fn(*region);
  }
  // Every region, live or retired; the table is empty afterwards.
  [[nodiscard]] Map take_all() noexcept { return std::exchange(regions_, Map{}); }

 private:
  Map regions_;
};

// The refusals every mechanism words alike.
[[nodiscard]] MemoryError not_live(Tier tier, std::uint64_t requested);
[[nodiscard]] MemoryError out_of_records(Tier tier, std::uint64_t requested);
[[nodiscard]] AllocationReleaseOutcome release_of_no_live_allocation();

// The bytes to reserve for an allocation of `bytes` at `align`: whole
// granules, at least one. Refuses an alignment that is not a power of two,
// and a size that overflows once rounded up and aligned to max(align,
// granularity) (a bad request, not a failure of the memory underneath).
[[nodiscard]] Expected<std::size_t, MemoryError> reservation_bytes(std::size_t bytes, std::size_t align,
                                                                   std::size_t granularity, Tier tier);
// Refuses a committed range that is reversed or reaches past `bytes`.
[[nodiscard]] std::optional<MemoryError> check_committed_ranges(std::size_t bytes, std::span<const ByteRange> committed,
                                                                Tier tier);
// Refuses [offset, offset + bytes) unless it lies inside an allocation of `allocation_bytes`.
[[nodiscard]] std::optional<MemoryError> check_inside(std::size_t allocation_bytes, std::size_t offset,
                                                      std::size_t bytes, Tier tier);

// The granules of [offset, offset + bytes) for which is_committed(g) holds
// and that hold no byte of `remaining` (what is still committed once the
// range goes): a granule shared with a range still committed stays mapped.
template <class IsCommitted>
[[nodiscard]] std::vector<std::size_t> granules_to_decommit(const ByteRangeSet& remaining, std::size_t offset,
                                                            std::size_t bytes, std::size_t granularity,
                                                            IsCommitted is_committed) {
  std::vector<std::size_t> victims;
  const GranuleSpan span = granules_holding(offset, bytes, granularity);
  for (std::size_t g = span.first; g < span.end(); ++g) {
    if (is_committed(g) && !remaining.intersects(g * granularity, (g + 1) * granularity)) victims.push_back(g);
  }
  return victims;
}

// Where a shared prefix goes in a region: the granules it will occupy.
// Refuses an offset that is not a whole number of granules, a prefix that
// does not fit (its requested bytes in the allocation, its mapped granules in
// the reservation), and a target granule that is not unmapped.
template <class R, class IsUnmapped>
[[nodiscard]] Expected<GranuleSpan, MemoryError> place_prefix(const R& region, const SharedDevicePrefix& prefix,
                                                              std::size_t byte_offset, std::size_t granularity,
                                                              Tier tier, IsUnmapped is_unmapped) {
  const std::size_t requested = prefix.mapped_bytes();
  if (byte_offset % granularity != 0) {
    return fail(MemoryError::invalid_request(tier, requested,
                                             "offset " + std::to_string(byte_offset) +
                                                 " is not a multiple of the granularity " +
                                                 std::to_string(granularity)));
  }
  const std::size_t reserved = region.reserved_bytes(granularity);
  if (byte_offset > region.bytes || prefix.requested_bytes() > region.bytes - byte_offset ||
      prefix.mapped_bytes() > reserved - std::min(reserved, byte_offset)) {
    return fail(MemoryError::invalid_request(
        tier, requested, "the prefix does not fit in the allocation at offset " + std::to_string(byte_offset)));
  }
  const GranuleSpan span{byte_offset / granularity, prefix.mapped_bytes() / granularity};
  for (std::size_t g = span.first; g < span.end(); ++g) {
    if (!is_unmapped(region.slots[g])) {
      return fail(MemoryError::invalid_request(tier, requested, "the target range is already committed"));
    }
  }
  return span;
}

// Runs fn, reporting an exhausted host heap (the records cannot grow) as the
// allocation failure every mechanism call reports for it.
template <class Fn>
[[nodiscard]] auto with_records(Tier tier, std::uint64_t requested, Fn&& fn) noexcept -> decltype(fn()) {
  try {
    return std::forward<Fn>(fn)();
  } catch (const std::bad_alloc&) {
    return fail(out_of_records(tier, requested));
  }
}

}  // namespace ortmem::vmm
