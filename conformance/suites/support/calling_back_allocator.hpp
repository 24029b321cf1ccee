// conformance/suites/support/calling_back_allocator.hpp: a test double, an
// allocator that calls back into whatever is releasing through it.
//
// Forwards every call to the adapter's allocator and, inside each release,
// first runs `on_release`; inside each allocate and device(), `on_allocate`
// and `on_device`. Those are where
// the contract lets the allocator re-enter its caller (the registry runs them
// unlocked, LOCK-002; a queue runs a release outside its own lock, DQ-017),
// so a test sets them to re-enter, and a caller that still holds its lock
// deadlocks there, where the test's watchdog ends it. Capability discovery is not forwarded: a test that needs
// capabilities derives and adds its own.
#pragma once

#include <cstddef>
#include <functional>
#include <memory>
#include <utility>

#include "ortmem/allocator.hpp"

namespace ortmem::cts {

class CallingBackAllocator : public DeviceAllocator {
 public:
  explicit CallingBackAllocator(std::shared_ptr<DeviceAllocator> inner) : inner_(std::move(inner)) {}

  Expected<void*, MemoryError> allocate(std::size_t bytes, std::size_t align) noexcept override {
    if (on_allocate) on_allocate();
    return inner_->allocate(bytes, align);
  }
  AllocationReleaseOutcome release(void* ptr, std::size_t bytes, std::size_t align) noexcept override {
    if (on_release) on_release();
    return inner_->release(ptr, bytes, align);
  }
  void deallocate(void* ptr, std::size_t bytes, std::size_t align) noexcept override {
    inner_->deallocate(ptr, bytes, align);
  }
  [[nodiscard]] DeviceKey device() const noexcept override {
    if (on_device) on_device();
    return inner_->device();
  }

  [[nodiscard]] DeviceAllocator& inner() noexcept { return *inner_; }

  // Set before the allocator is shared with another thread; read by each call.
  std::function<void()> on_release;
  std::function<void()> on_allocate;
  std::function<void()> on_device;

 private:
  std::shared_ptr<DeviceAllocator> inner_;
};

}  // namespace ortmem::cts
