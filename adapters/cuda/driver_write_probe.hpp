// adapters/cuda/driver_write_probe.hpp: SM-008's write probe for memory a
// VmmDriver maps, answered from the driver's own record of the mapping.
//
// A device write through a read-only CUDA mapping faults and leaves the
// whole context unusable, and a forked child cannot use CUDA at all, so the
// kit's default probe (a write from a child) cannot run on device memory.
// cuMemGetAccess is the driver's statement of what it will enforce; it is not
// the allocator's belief about what it asked for, so an allocator that maps a
// prefix writable is still caught.
#pragma once

#include <cstdint>
#include <string>

#include "ortmem/cts/adapter.hpp"
#include "ortmem/cuda/vmm_driver.hpp"

namespace ortmem::adapters {

[[nodiscard]] inline cts::WriteProbe probe_through_driver(const cuda::VmmDriver& driver, const void* ptr) {
  using Outcome = cts::WriteProbe::Outcome;
  const auto access = driver.access(static_cast<cuda::DevicePtr>(reinterpret_cast<std::uintptr_t>(ptr)));
  if (!access) return {Outcome::kUnknown, "cuMemGetAccess failed: " + access.error().message()};
  if (!*access) return {Outcome::kRefused, "cuMemGetAccess reports no access at all"};
  if (**access == cuda::Access::kReadOnly) return {Outcome::kRefused, "cuMemGetAccess reports read-only access"};
  return {Outcome::kAllowed, "cuMemGetAccess reports read-write access"};
}

}  // namespace ortmem::adapters
