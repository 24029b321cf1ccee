// ortmem/cuda/testing/simulated_vmm_driver.hpp: a TEST DOUBLE of the CUDA
// virtual memory driver, over host mmap and memfd.
//
// It exists so that CudaVirtualAllocator's state machine (unwinding,
// transactional decommit, run-by-run release, shared prefixes) runs, and can
// be certified by the kit, on machines with no GPU. It is not a CUDA
// implementation and certifies nothing about a device.
//
// It is as strict as the driver where the driver is strict, so that a
// mechanism that would misuse the real driver fails here too:
//   - map() needs a reserved, unmapped range exactly the size of the handle;
//   - set_access() needs the whole range mapped;
//   - unmap() must cover whole mappings, never part of one;
//   - free_reservation() is refused while anything in the range is mapped;
//   - a released handle's memory lives until its last mapping goes.
// Refusals read like the driver's (CUDA_ERROR_INVALID_VALUE). It counts every
// call and what is still held, so tests can check that nothing leaks and how
// many unmaps a release made. Thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <mutex>
#include <string_view>

#include "ortmem/cuda/vmm_driver.hpp"

namespace ortmem::cuda::testing {

class SimulatedVmmDriver final : public VmmDriver {
 public:
  // `granularity`: a power-of-two multiple of the host page size.
  explicit SimulatedVmmDriver(std::size_t granularity);
  ~SimulatedVmmDriver() override;
  SimulatedVmmDriver(const SimulatedVmmDriver&) = delete;
  SimulatedVmmDriver& operator=(const SimulatedVmmDriver&) = delete;

  [[nodiscard]] std::size_t granularity() const noexcept override { return granularity_; }
  [[nodiscard]] Expected<DevicePtr, DriverFault> reserve(std::size_t bytes, std::size_t alignment) noexcept override;
  Expected<void, DriverFault> free_reservation(DevicePtr address, std::size_t bytes) noexcept override;
  [[nodiscard]] Expected<PhysicalHandle, DriverFault> create(std::size_t bytes) noexcept override;
  Expected<void, DriverFault> release(PhysicalHandle handle) noexcept override;
  Expected<void, DriverFault> map(DevicePtr address, std::size_t bytes, PhysicalHandle handle) noexcept override;
  Expected<void, DriverFault> unmap(DevicePtr address, std::size_t bytes) noexcept override;
  Expected<void, DriverFault> set_access(DevicePtr address, std::size_t bytes, Access access) noexcept override;
  // What the last set_access over `address` granted, which is also what
  // mprotect enforces on the host memory standing in for the device's.
  [[nodiscard]] Expected<std::optional<Access>, DriverFault> access(DevicePtr address) const noexcept override;

  // Handles whose physical memory still exists (not released, or still mapped).
  [[nodiscard]] std::size_t live_handles() const;
  [[nodiscard]] std::size_t mappings() const;
  [[nodiscard]] std::size_t reservations() const;
  // Successful calls of one entry point so far ("cuMemUnmap", ...).
  [[nodiscard]] std::uint64_t calls(std::string_view entry_point) const;

 private:
  struct Handle {
    int fd;
    std::size_t bytes;
    std::size_t mappings = 0;
    bool released = false;
  };
  struct Mapping {
    std::size_t bytes;
    PhysicalHandle handle;
    std::optional<Access> access;  // none until set_access
  };

  void count(std::string_view entry_point);
  void drop_if_unused(PhysicalHandle handle);
  [[nodiscard]] bool reserved(DevicePtr address, std::size_t bytes) const;

  const std::size_t granularity_;
  mutable std::mutex mutex_;
  std::map<DevicePtr, std::size_t> reservations_;  // address -> bytes
  std::map<DevicePtr, Mapping> mappings_;          // address -> mapping
  std::map<PhysicalHandle, Handle> handles_;
  std::map<std::string_view, std::uint64_t> calls_;
  PhysicalHandle next_handle_ = 1;
};

}  // namespace ortmem::cuda::testing
