// ortmem/mechanism/vmm/mapped_bytes.hpp: what committing would map, stated before it
// happens (VirtualBacking's estimates), for any granule-mapping mechanism.
//
// Estimates count granules, not bytes: a commit maps whole granules, and two
// ranges that touch one granule map it once.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "ortmem/capability.hpp"
#include "ortmem/device.hpp"

namespace ortmem::vmm {

// Bytes mapped by committing a whole allocation of `bytes` at `align`.
[[nodiscard]] Expected<std::uint64_t, MemoryError> mapped_bytes_for_allocation(std::size_t bytes, std::size_t align,
                                                                               std::size_t granularity, Tier tier);
// Bytes mapped by committing every range, each granule counted once.
[[nodiscard]] Expected<std::uint64_t, MemoryError> mapped_bytes_for_ranges(
    std::span<const AllocationCommitRange> ranges, std::size_t granularity, Tier tier);

}  // namespace ortmem::vmm
