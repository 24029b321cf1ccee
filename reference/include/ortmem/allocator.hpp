// ortmem/allocator.hpp: the ordinary allocator contract.
//
// DeviceAllocator covers device identity, ordinary allocation and terminal
// release; nothing else is required of an eager allocator. Lazy virtual
// backing and shared physical mappings are optional capabilities
// (ortmem/capability.hpp) discovered from the allocator.
//
// What every implementation promises:
//   - allocate(bytes, align) returns a non-null address aligned to `align`,
//     distinct from every other live allocation of this allocator (no two
//     [p, p + bytes) ranges overlap). Zero bytes is a valid request; a
//     mechanism that cannot serve it refuses with invalid-request, never
//     crashes and never rounds silently. A non-power-of-two alignment or a size
//     that overflows when rounded is invalid-request with a reason saying so.
//     A backing refusal is allocation-failed carrying the backing reason.
//   - The bytes of a live allocation are readable and writable by the owner
//     and keep their contents until release.
//   - release(ptr, bytes, align) reports honestly (ortmem/release_outcome.hpp):
//     Complete when all is gone, Failed only when nothing was mutated,
//     Quarantined for anything partial. A (ptr, bytes, align) that does not
//     name a live allocation of this allocator (unknown address, wrong size,
//     wrong alignment, already released) is Failed with nothing mutated.
//   - Whole-allocation terminal release always comes back here, including for
//     allocations reserved through VirtualBacking; capabilities never own it.
//   - device() and capability discovery answer the same for the allocator's
//     whole life, and a returned capability works on this same mechanism and
//     DeviceKey (coherence). The two capabilities are independent.
//   - Every method is safe to call from several threads at once.
//
// Addresses are void* because they may be device addresses: nothing in the
// contract dereferences them.
#pragma once

#include <cstddef>
#include <cstdint>

#include "ortmem/device.hpp"
#include "ortmem/expected.hpp"
#include "ortmem/memory_error.hpp"
#include "ortmem/release_outcome.hpp"

namespace ortmem {

class VirtualBacking;
class SharedMapping;

class DeviceAllocator {
 public:
  virtual ~DeviceAllocator() = default;

  [[nodiscard]] virtual Expected<void*, MemoryError> allocate(std::size_t bytes, std::size_t align) noexcept = 0;

  // The canonical, structured release. The default adapts the legacy entry
  // points below and can only ever report Complete; allocators that can fail
  // part-way or detect a bad request override it.
  [[nodiscard]] virtual AllocationReleaseOutcome release(void* ptr, std::size_t bytes, std::size_t align) noexcept;

  // Legacy migration adapter: gives back one live allocation of exactly this
  // (bytes, align) and cannot report failure. New code calls release().
  virtual void deallocate(void* ptr, std::size_t bytes, std::size_t align) noexcept = 0;
  // Legacy: as deallocate, also reporting bytes whose mapping went away. Zero
  // is valid (eager allocators have no mapped attribution) and never a failure.
  virtual std::uint64_t deallocate_with_unmapped(void* ptr, std::size_t bytes, std::size_t align) noexcept;

  [[nodiscard]] virtual DeviceKey device() const noexcept = 0;

  // An accounting promise, not discovery: true only when physical memory is
  // mapped lazily AND a governor is charged per commit. False is the safe
  // default and is allowed even when virtual backing is present.
  [[nodiscard]] virtual bool commits_on_demand() const noexcept { return false; }

  // Capability discovery: null when absent, the same answer every time.
  [[nodiscard]] virtual VirtualBacking* as_virtual_backing() noexcept { return nullptr; }
  [[nodiscard]] virtual SharedMapping* as_shared_mapping() noexcept { return nullptr; }

 protected:
  DeviceAllocator() = default;

 public:
  // An allocator owns the records of its live allocations: a copy would
  // split them, and two owners could each release the same memory.
  DeviceAllocator(const DeviceAllocator&) = delete;
  DeviceAllocator& operator=(const DeviceAllocator&) = delete;
};

// True when `align` is a power of two (zero is not).
[[nodiscard]] constexpr bool is_valid_alignment(std::size_t align) noexcept {
  return align != 0 && (align & (align - 1)) == 0;
}

}  // namespace ortmem
