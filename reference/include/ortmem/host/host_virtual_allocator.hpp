// ortmem/host/host_virtual_allocator.hpp: the reference virtual-backing and
// shared-mapping mechanism, on the operating system's own virtual memory.
//
// An allocation is a reservation of address space (mmap PROT_NONE) carved
// into granules (the page size by default, or any power-of-two multiple of
// it, e.g. 2 MiB to mirror CUDA). A granule is either unmapped, committed
// (readable and writable private memory) or shared (a read-only mapping of a
// prefix's memfd). Committed bytes are tracked as byte ranges, so two ranges
// that share a granule keep it mapped until both are decommitted.
//
// Release unmaps the mapped granules one contiguous run at a time. If a run's
// munmap fails, nothing of that run is disposed: the allocation is reported
// Quarantined (partially-unmapped while anything is still mapped) with the
// bytes actually unmapped, and its address range is kept reserved so it is
// never handed out again. A failure before anything changed is Failed.
//
// Commit and decommit are transactional: a failure part way rolls back what
// the call did and reports an error. Decommit removes access first (reversible)
// and discards pages last.
//
// A shared prefix is a memfd of the requested size rounded up to granules,
// mapped read-write once for its owner (device_ptr) and read-only, with
// MAP_FIXED, into each target range. The kernel keeps the memory until the
// owner window and every mapping are gone; this allocator holds a reference
// per mapping so its own bookkeeping of the physical bytes ends exactly once.
//
// Every mmap, munmap, mprotect and madvise goes through an optional
// SyscallFaults plan. Thread-safe: one lock guards the allocator's records;
// it is the allocator's own lock, taken only inside its own methods.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

#include "ortmem/allocator.hpp"
#include "ortmem/capability.hpp"
#include "ortmem/host/syscall_faults.hpp"

namespace ortmem::host {

class HostVirtualAllocator final : public DeviceAllocator, public VirtualBacking, public SharedMapping {
 public:
  struct Options {
    // 0: the page size. Otherwise a power-of-two multiple of the page size.
    std::size_t granularity = 0;
    // Optional: makes chosen system calls fail, for fault-injection tests.
    std::shared_ptr<SyscallFaults> faults;
  };

  // Refuses a granularity that is not a power-of-two multiple of the page size.
  [[nodiscard]] static Expected<std::shared_ptr<HostVirtualAllocator>, MemoryError> create(Options options);
  // Unmaps nothing: a region still reserved may be quarantined, and its
  // addresses must never be reissued (see reclaim_all_after_context_destroyed).
  ~HostVirtualAllocator() override;

  // DeviceAllocator: an ordinary allocation is reserved and fully committed.
  [[nodiscard]] Expected<void*, MemoryError> allocate(std::size_t bytes, std::size_t align) noexcept override;
  [[nodiscard]] AllocationReleaseOutcome release(void* ptr, std::size_t bytes, std::size_t align) noexcept override;
  void deallocate(void* ptr, std::size_t bytes, std::size_t align) noexcept override;
  [[nodiscard]] DeviceKey device() const noexcept override { return DeviceKey::host(); }
  [[nodiscard]] VirtualBacking* as_virtual_backing() noexcept override { return this; }
  [[nodiscard]] SharedMapping* as_shared_mapping() noexcept override { return this; }

  // VirtualBacking.
  [[nodiscard]] Expected<void*, MemoryError> allocate_committed(std::size_t bytes, std::size_t align,
                                                                std::span<const ByteRange> committed) noexcept override;
  [[nodiscard]] Expected<void, MemoryError> commit_allocation_range(void* ptr, std::size_t allocation_bytes,
                                                                    std::size_t align, std::size_t offset,
                                                                    std::size_t bytes) noexcept override;
  [[nodiscard]] Expected<std::uint64_t, MemoryError> decommit_allocation_range(void* ptr, std::size_t allocation_bytes,
                                                                               std::size_t align, std::size_t offset,
                                                                               std::size_t bytes) noexcept override;
  [[nodiscard]] Expected<std::uint64_t, MemoryError> mapped_bytes_for_allocation(
      std::size_t bytes, std::size_t align) const noexcept override;
  [[nodiscard]] Expected<std::uint64_t, MemoryError> mapped_bytes_for_allocation_ranges(
      std::span<const AllocationCommitRange> ranges) const noexcept override;
  [[nodiscard]] std::size_t allocation_committed_bytes(void* ptr, std::size_t allocation_bytes,
                                                       std::size_t align) const noexcept override;

  // SharedMapping.
  [[nodiscard]] Expected<std::unique_ptr<SharedDevicePrefix>, MemoryError> create_shared_prefix(
      std::size_t bytes) noexcept override;
  [[nodiscard]] Expected<std::uint64_t, MemoryError> incremental_owned_bytes_for_shared_prefix(
      const SharedDevicePrefix& prefix) const noexcept override;
  [[nodiscard]] Expected<SharedPrefixCommitInfo, MemoryError> commit_shared_prefix(
      const SharedDevicePrefix& prefix, void* ptr, std::size_t allocation_bytes,
      std::size_t byte_offset) noexcept override;

  // Unmaps every region still reserved, live or quarantined, and returns how
  // many: what destroying the memory's provider context does (as destroying a
  // CUDA context reclaims every allocation made in it). The host has no such
  // context, so whoever plays it calls this once nothing can use the memory
  // any more (the conformance adapters do when the kit lets go of the
  // allocator). The destructor never does: it cannot know that moment.
  std::size_t reclaim_all_after_context_destroyed() noexcept;

  [[nodiscard]] std::size_t granularity() const noexcept { return granularity_; }
  [[nodiscard]] std::size_t live_allocations() const noexcept;
  // Prefix memories whose physical bytes are still held (handle or mappings).
  [[nodiscard]] std::size_t live_prefix_memories() const noexcept;

 private:
  struct State;  // the region records, their lock and the fault plan (host_virtual_allocator.cpp)
  HostVirtualAllocator(std::size_t granularity, std::shared_ptr<SyscallFaults> faults);

  const std::size_t granularity_;
  const std::unique_ptr<State> state_;
};

}  // namespace ortmem::host
