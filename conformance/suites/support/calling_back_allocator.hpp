// conformance/suites/support/calling_back_allocator.hpp: a test double, an
// allocator that calls back into whatever is releasing through it.
//
// Forwards every call to the adapter's allocator and, inside each release,
// first runs `on_release`. A release is where the contract lets the allocator
// re-enter its caller (the registry runs it unlocked, LOCK-002; a queue runs
// it outside its own lock, DQ-017), so a test sets `on_release` to re-enter
// and a caller that still holds its lock deadlocks there, where the test's
// watchdog ends it. Capability discovery is not forwarded: a test that needs
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
    return inner_->allocate(bytes, align);
  }
  AllocationReleaseOutcome release(void* ptr, std::size_t bytes, std::size_t align) noexcept override {
    if (on_release) on_release();
    return inner_->release(ptr, bytes, align);
  }
  void deallocate(void* ptr, std::size_t bytes, std::size_t align) noexcept override {
    inner_->deallocate(ptr, bytes, align);
  }
  [[nodiscard]] DeviceKey device() const noexcept override { return inner_->device(); }

  [[nodiscard]] DeviceAllocator& inner() noexcept { return *inner_; }

  // Set before the allocator is shared with another thread; read by each release.
  std::function<void()> on_release;

 private:
  std::shared_ptr<DeviceAllocator> inner_;
};

}  // namespace ortmem::cts
