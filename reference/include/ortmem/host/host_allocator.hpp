// ortmem/host/host_allocator.hpp: the reference eager allocator over host memory.
//
// Eager only: no virtual backing, no shared mapping. It keeps a record of
// every live allocation so that release can be honest: a (ptr, bytes, align)
// that is not exactly a live allocation of this allocator (unknown address,
// wrong size, wrong alignment, released twice) is reported Failed and nothing
// is touched; a matching release is Complete with allocation_bytes == bytes
// and zero unmapped bytes (host memory has no mapped attribution).
//
// Zero bytes is accepted: the allocator hands out a distinct one-byte block so
// the address is unique and releasable like any other.
//
// Thread-safe: any method may be called from any thread at any time.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

#include "ortmem/allocator.hpp"

namespace ortmem::host {

class HostAllocator final : public DeviceAllocator {
 public:
  HostAllocator();
  // Gives nothing back: a block still live may be quarantined, and
  // quarantined memory is never reissued, so it stays allocated for the life
  // of the process unless reclaim_all_after_context_destroyed() is called.
  ~HostAllocator() override;

  [[nodiscard]] Expected<void*, MemoryError> allocate(std::size_t bytes, std::size_t align) noexcept override;
  [[nodiscard]] AllocationReleaseOutcome release(void* ptr, std::size_t bytes, std::size_t align) noexcept override;
  // Legacy path: a request that names no live allocation is ignored (it cannot be reported).
  void deallocate(void* ptr, std::size_t bytes, std::size_t align) noexcept override;
  [[nodiscard]] DeviceKey device() const noexcept override { return DeviceKey::host(); }

  // Exact while no allocation or release runs; otherwise a sum of parts that
  // may belong to different instants.
  [[nodiscard]] std::size_t live_allocations() const noexcept;
  [[nodiscard]] std::uint64_t live_bytes() const noexcept;

  // Frees every block still live, quarantined ones included, and returns how
  // many: what destroying the memory's provider context does. The host has no
  // such context, so whoever plays it calls this once nothing can use the
  // memory any more; the destructor never does.
  std::size_t reclaim_all_after_context_destroyed() noexcept;

 private:
  struct Shards;  // the live records and their totals (host_allocator.cpp)
  const std::unique_ptr<Shards> shards_;
};

}  // namespace ortmem::host
