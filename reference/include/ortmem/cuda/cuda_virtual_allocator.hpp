// ortmem/cuda/cuda_virtual_allocator.hpp: the reference virtual-backing and
// shared-mapping mechanism of a CUDA device, over the driver's virtual
// memory management (cuMemAddressReserve, cuMemCreate, cuMemMap,
// cuMemSetAccess and their inverses), reached through a VmmDriver.
//
// An allocation is a reserved address range carved into granules of the
// driver's recommended granularity. Each committed granule has its own
// physical handle, mapped and made read-write; a granule of a shared prefix
// maps the prefix's handle read-only. Committed bytes are tracked as byte
// ranges, so two ranges that share a granule keep it until both go.
//
// Commit unwinds in reverse on any failure (unmap, then release the handles
// it created), so a failed commit leaves nothing mapped that was not.
// Decommit unmaps only granules no committed byte still needs; if an unmap
// fails, the granules already unmapped are mapped back (rolled back). A
// handle that cannot be remapped or released is stranded: the allocation is
// damaged, and its release will report it quarantined with that residual. A
// granule whose failed mapping cannot even be taken back is orphaned: mapped
// without access, never committed over, given back with the allocation.
//
// Release unmaps one contiguous run of mapped granules at a time, releasing
// each run's handles after its unmap succeeded:
//   - the first run's unmap fails       -> Failed, nothing changed;
//   - a later run's unmap fails         -> Quarantined, partially-unmapped,
//                                          with what is still mapped;
//   - a handle cannot be released       -> Quarantined with the handle's bytes;
//   - the address range cannot be freed -> Quarantined, nothing retained.
// A quarantined allocation's address range stays reserved: never reissued.
//
// A shared prefix has one handle per granule, created once, mapped
// read-write into an owner window and read-only into each sharer. The prefix
// handle and every mapping hold it; the last of them unmaps the owner window
// and releases the handles, exactly once.
//
// Every cuMemUnmap, cuMemRelease, cuMemMap and cuMemSetAccess can be failed
// on purpose by an optional DriverFaults plan. Thread-safe: one lock guards
// the records and is held across driver calls (they do not call back).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

#include "ortmem/allocator.hpp"
#include "ortmem/capability.hpp"
#include "ortmem/cuda/vmm_driver.hpp"

namespace ortmem::cuda {

class CudaVirtualAllocator final : public DeviceAllocator, public VirtualBacking, public SharedMapping {
 public:
  struct Options {
    DeviceKey device = DeviceKey::device(0);
    // Optional: makes chosen driver calls fail, for fault-injection tests.
    std::shared_ptr<DriverFaults> faults;
  };

  // Refuses a driver whose granularity is not a power of two.
  [[nodiscard]] static Expected<std::shared_ptr<CudaVirtualAllocator>, MemoryError> create(
      std::shared_ptr<VmmDriver> driver, Options options);
  // Gives nothing back: what is left may be quarantined (see the .cpp).
  ~CudaVirtualAllocator() override;

  // DeviceAllocator: an ordinary allocation is reserved and fully committed.
  [[nodiscard]] Expected<void*, MemoryError> allocate(std::size_t bytes, std::size_t align) noexcept override;
  [[nodiscard]] AllocationReleaseOutcome release(void* ptr, std::size_t bytes, std::size_t align) noexcept override;
  void deallocate(void* ptr, std::size_t bytes, std::size_t align) noexcept override;
  [[nodiscard]] DeviceKey device() const noexcept override { return device_; }
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

  [[nodiscard]] std::size_t granularity() const noexcept { return granularity_; }
  [[nodiscard]] std::size_t live_allocations() const noexcept;
  // Physical handles this allocator holds that could not be given back.
  [[nodiscard]] std::size_t stranded_handles() const noexcept;

 private:
  struct State;  // the region records, their lock and the driver (cuda_virtual_allocator.cpp)
  CudaVirtualAllocator(std::shared_ptr<VmmDriver> driver, Options options);

  const std::size_t granularity_;
  const DeviceKey device_;
  const std::unique_ptr<State> state_;
};

}  // namespace ortmem::cuda
