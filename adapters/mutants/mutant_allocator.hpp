// adapters/mutants/mutant_allocator.hpp: the host allocator with one hook per
// rule a known-bad allocator breaks.
//
// Known-bad on purpose: each mutant adapter sets exactly one hook, and the kit
// must fail it on the requirements in manifest.json. Unset hooks forward to
// the reference HostAllocator.
#pragma once

#include <functional>
#include <memory>
#include <mutex>
#include <unordered_map>

#include "ortmem/host/host_allocator.hpp"

namespace ortmem::adapters::mutants {

class MutantAllocator : public DeviceAllocator {
 public:
  Expected<void*, MemoryError> allocate(std::size_t bytes, std::size_t align) noexcept override {
    return reference_.allocate(bytes, align);
  }
  AllocationReleaseOutcome release(void* ptr, std::size_t bytes, std::size_t align) noexcept override {
    return reference_.release(ptr, bytes, align);
  }
  void deallocate(void* ptr, std::size_t bytes, std::size_t align) noexcept override {
    (void)release(ptr, bytes, align);
  }
  DeviceKey device() const noexcept override { return DeviceKey::host(); }

 protected:
  host::HostAllocator reference_;
};

}  // namespace ortmem::adapters::mutants
