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
// Thread-safe. The live records are split into shards keyed by address, so
// threads that allocate and release different blocks rarely share a lock.
#pragma once

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <unordered_map>

#include "ortmem/allocator.hpp"

namespace ortmem::host {

class HostAllocator final : public DeviceAllocator {
 public:
  HostAllocator() = default;
  // Frees what is still live: destroying the allocator ends every allocation it made.
  ~HostAllocator() override;
  HostAllocator(const HostAllocator&) = delete;
  HostAllocator& operator=(const HostAllocator&) = delete;

  [[nodiscard]] Expected<void*, MemoryError> allocate(std::size_t bytes,
                                                      std::size_t align) noexcept override;
  [[nodiscard]] AllocationReleaseOutcome release(void* ptr, std::size_t bytes,
                                                 std::size_t align) noexcept override;
  // Legacy path: a request that names no live allocation is ignored (it cannot be reported).
  void deallocate(void* ptr, std::size_t bytes, std::size_t align) noexcept override;
  [[nodiscard]] DeviceKey device() const noexcept override { return DeviceKey::host(); }

  [[nodiscard]] std::size_t live_allocations() const noexcept {
    return live_allocations_.load(std::memory_order_relaxed);
  }
  [[nodiscard]] std::uint64_t live_bytes() const noexcept {
    return live_bytes_.load(std::memory_order_relaxed);
  }

 private:
  struct LiveRecord {
    std::size_t bytes;
    std::size_t align;
  };
  struct alignas(64) Shard {
    std::mutex mutex;
    std::unordered_map<std::uintptr_t, LiveRecord> live;
  };
  static constexpr std::size_t kShardCount = 64;

  [[nodiscard]] Shard& shard_for(const void* ptr) noexcept;

  std::array<Shard, kShardCount> shards_;
  std::atomic<std::size_t> live_allocations_{0};
  std::atomic<std::uint64_t> live_bytes_{0};
};

}  // namespace ortmem::host
