// conformance/suites/support/elsewhere_allocator.hpp: a test double, an
// allocator of a device no adapter has.
//
// The registry's rules about devices (a refusal names the device it refused,
// invalidating one device leaves the others alone) are invisible with one
// device: every adapter's allocator reports host:0 or its GPU, which is also
// what a default DeviceKey looks like. A second mechanism on this double's
// device makes them observable. It refuses every allocation with a reason of
// its own, so a refusal that reaches the caller can be told from one the
// registry made up.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

#include "ortmem/allocator.hpp"

namespace ortmem::cts {

class ElsewhereAllocator final : public DeviceAllocator {
 public:
  static constexpr std::string_view kReason = "test double: this device has no memory";
  static constexpr DeviceKey kDevice = DeviceKey::device(9);

  explicit ElsewhereAllocator(DeviceKey device = kDevice) : device_(device) {}
  Expected<void*, MemoryError> allocate(std::size_t bytes, std::size_t) noexcept override {
    return tl::unexpected(MemoryError::allocation_failed(Tier::kDevice, bytes, std::string(kReason)));
  }
  // Nothing is ever allocated, so nothing is ever given back.
  void deallocate(void*, std::size_t, std::size_t) noexcept override {}
  [[nodiscard]] DeviceKey device() const noexcept override { return device_; }

 private:
  DeviceKey device_;
};

}  // namespace ortmem::cts
