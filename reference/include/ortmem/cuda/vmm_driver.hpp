// ortmem/cuda/vmm_driver.hpp: the driver calls a virtual-memory mechanism
// makes, and nothing else.
//
// CudaVirtualAllocator keeps its whole state machine (granules, commits,
// unwinding, transactional decommit, partial release, shared prefixes) on
// this side of the interface. The CUDA implementation (cuda_vmm_driver.hpp)
// maps each call onto one driver entry point; a test double over host mmap
// runs the same state machine on a machine with no GPU, which is the only
// way a partial-failure path is exercised at all on most CI machines.
//
// Every call either does all of what it says or nothing, as the driver's
// entry points do, and reports a failure as a DriverFault naming the entry
// point and the driver's own error name.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "ortmem/expected.hpp"
#include "ortmem/mechanism/fault_plan.hpp"

namespace ortmem::cuda {

using DevicePtr = std::uint64_t;       // a device virtual address (CUdeviceptr)
using PhysicalHandle = std::uint64_t;  // a physical allocation (CUmemGenericAllocationHandle)

// The entry points a fault plan can fail: the four whose failure leaves a
// multi-step operation part way done.
enum class DriverCall : std::uint8_t { kMemUnmap = 0, kMemRelease = 1, kMemMap = 2, kMemSetAccess = 3 };
inline constexpr std::size_t kDriverCallKinds = 4;
[[nodiscard]] std::string_view driver_call_name(DriverCall call) noexcept;

// Fails the Nth cuMemUnmap / cuMemRelease / cuMemMap / cuMemSetAccess of
// every allocator that shares the plan.
using DriverFaults = mechanism::FaultPlan<DriverCall, kDriverCallKinds>;

struct DriverFault {
  std::string_view entry_point;  // "cuMemMap", ...
  std::string error;             // the driver's error name, e.g. "CUDA_ERROR_OUT_OF_MEMORY"
  [[nodiscard]] std::string message() const { return std::string(entry_point) + " failed: " + error; }
};

enum class Access : std::uint8_t { kReadWrite, kReadOnly };

class VmmDriver {
 public:
  virtual ~VmmDriver() = default;
  // The granularity physical handles and mappings use (a power of two).
  [[nodiscard]] virtual std::size_t granularity() const noexcept = 0;
  // Address space only: nothing is readable until a handle is mapped.
  [[nodiscard]] virtual Expected<DevicePtr, DriverFault> reserve(std::size_t bytes, std::size_t alignment) noexcept = 0;
  virtual Expected<void, DriverFault> free_reservation(DevicePtr address, std::size_t bytes) noexcept = 0;
  // Physical memory of `bytes` (a multiple of the granularity).
  [[nodiscard]] virtual Expected<PhysicalHandle, DriverFault> create(std::size_t bytes) noexcept = 0;
  virtual Expected<void, DriverFault> release(PhysicalHandle handle) noexcept = 0;
  // Maps all of `handle` at `address`; the mapping has no access until set_access.
  virtual Expected<void, DriverFault> map(DevicePtr address, std::size_t bytes, PhysicalHandle handle) noexcept = 0;
  virtual Expected<void, DriverFault> unmap(DevicePtr address, std::size_t bytes) noexcept = 0;
  virtual Expected<void, DriverFault> set_access(DevicePtr address, std::size_t bytes, Access access) noexcept = 0;
  // The access the driver grants this device at `address` (cuMemGetAccess):
  // nullopt when the address is mapped without any. This is the system's
  // own record of a mapping's protection, which a caller that may not write
  // through the mapping (device memory, where a faulting write poisons the
  // whole context) can read instead.
  [[nodiscard]] virtual Expected<std::optional<Access>, DriverFault> access(DevicePtr address) const noexcept = 0;
};

}  // namespace ortmem::cuda
