// conformance/suites/support/kit_heap_allocator.hpp: heap memory of the kit's own.
//
// For a check that registers a mechanism of its own beside the adapter's
// (allocator interposition) and needs many requests that may stay
// quarantined: a quarantined allocation keeps its memory to the end of the
// test, and the adapter's may hold a scarce resource each (under the
// simulated CUDA driver, a file descriptor), where this holds heap bytes.
// Releases go through DeviceAllocator's default: Complete, by deallocate.
// A test double, not a mechanism: its destructor frees what is still out
// (what the registry kept quarantined), so a sanitized test leaks nothing.
#pragma once

#include <cstddef>
#include <mutex>
#include <new>
#include <unordered_map>

#include "ortmem/allocator.hpp"

namespace ortmem::cts {

class KitHeapAllocator final : public DeviceAllocator {
 public:
  explicit KitHeapAllocator(DeviceKey device) : device_(device) {}
  KitHeapAllocator(const KitHeapAllocator&) = delete;
  KitHeapAllocator& operator=(const KitHeapAllocator&) = delete;
  ~KitHeapAllocator() override {
    for (const auto& [ptr, align] : live_) ::operator delete (ptr, std::align_val_t{align});
  }

  Expected<void*, MemoryError> allocate(std::size_t bytes, std::size_t align) noexcept override {
    void* ptr = ::operator new (bytes == 0 ? 1 : bytes, std::align_val_t{align}, std::nothrow);
    if (ptr == nullptr) {
      return fail(MemoryError::allocation_failed(device_.tier, bytes, "the kit's heap is out of memory"));
    }
    try {
      const std::lock_guard lock(mutex_);
      live_.emplace(ptr, align);
    } catch (const std::bad_alloc&) {
      ::operator delete (ptr, std::align_val_t{align});
      return fail(MemoryError::allocation_failed(device_.tier, bytes, "the kit's heap is out of memory"));
    }
    return ptr;
  }
  void deallocate(void* ptr, std::size_t /*bytes*/, std::size_t align) noexcept override {
    {
      const std::lock_guard lock(mutex_);
      live_.erase(ptr);
    }
    ::operator delete (ptr, std::align_val_t{align});
  }
  [[nodiscard]] DeviceKey device() const noexcept override { return device_; }

 private:
  DeviceKey device_;
  std::mutex mutex_;
  std::unordered_map<void*, std::size_t> live_;  // address -> alignment, of what is still out
};

}  // namespace ortmem::cts
