// support/counting_allocator.hpp: TEST DOUBLES for the binding-layer tests.
//
// CountingAllocator (test double) decorates a real allocator (HostAllocator by
// default) and counts every call the registry makes into it, so a test can
// assert "the allocator was (not) called" exactly. It can be told to answer
// release() with Failed or Quarantined instead of forwarding, to run a one-shot
// callback from inside allocate() or release() (re-entrancy, in-flight
// operations) or from inside device() (registration races), to report another
// DeviceKey, and to run a callback from its
// destructor (teardown order).
//
// RecyclingAllocator (test double) serves a handful of fixed slots and always
// hands out the lowest free one, so a released address is reused at once
// (a real allocator under ASan's quarantine would not reuse it).
#pragma once

#include <algorithm>
#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <utility>
#include <vector>

#include "ortmem/allocator.hpp"
#include "ortmem/host/host_allocator.hpp"

namespace ortmem::test_support {

class CountingAllocator final : public DeviceAllocator {
 public:
  enum class ReleaseMode : std::uint8_t {
    kForward,     // forward to the inner allocator
    kFail,        // answer Failed, touch nothing
    kQuarantine,  // answer Quarantined with a residual (the inner block is kept until destruction)
  };

  explicit CountingAllocator(DeviceKey device = DeviceKey::host(),
                             std::unique_ptr<DeviceAllocator> inner = std::make_unique<host::HostAllocator>())
      : device_(device), inner_(std::move(inner)) {}
  ~CountingAllocator() override {
    if (on_destroy_) on_destroy_();
  }
  CountingAllocator(const CountingAllocator&) = delete;
  CountingAllocator& operator=(const CountingAllocator&) = delete;

  [[nodiscard]] Expected<void*, MemoryError> allocate(std::size_t bytes, std::size_t align) noexcept override {
    allocate_calls_.fetch_add(1, std::memory_order_acq_rel);
    if (auto hook = take(on_allocate_)) hook();
    auto ptr = inner_->allocate(bytes, align);
    if (ptr) allocations_.fetch_add(1, std::memory_order_acq_rel);
    return ptr;
  }

  [[nodiscard]] AllocationReleaseOutcome release(void* ptr, std::size_t bytes, std::size_t align) noexcept override {
    release_calls_.fetch_add(1, std::memory_order_acq_rel);
    {
      const std::lock_guard lock(mutex_);
      released_.push_back(ptr);
    }
    if (auto hook = take(on_release_)) hook();
    switch (mode_.load(std::memory_order_acquire)) {
      case ReleaseMode::kForward: {
        auto outcome = inner_->release(ptr, bytes, align);
        if (outcome.is_failed()) failed_releases_.fetch_add(1, std::memory_order_acq_rel);
        if (outcome.is_complete()) complete_releases_.fetch_add(1, std::memory_order_acq_rel);
        return outcome;
      }
      case ReleaseMode::kFail:
        return AllocationReleaseOutcome::failed("test double: release refused, nothing was changed");
      case ReleaseMode::kQuarantine: {
        const std::uint64_t retained =
            quarantine_state_ == AllocationReleaseState::kPartiallyUnmapped ? bytes / 2 : bytes;
        return AllocationReleaseOutcome::quarantined(
            {bytes, bytes - retained},
            ResidualOwnership{quarantine_state_, QuarantineReason::of(QuarantineReason::Kind::kPartialRelease),
                              retained, reinterpret_cast<std::uintptr_t>(ptr), align});
      }
    }
    return AllocationReleaseOutcome::failed("unreachable");
  }

  void deallocate(void* ptr, std::size_t bytes, std::size_t align) noexcept override {
    deallocate_calls_.fetch_add(1, std::memory_order_acq_rel);
    inner_->deallocate(ptr, bytes, align);
  }
  std::uint64_t deallocate_with_unmapped(void* ptr, std::size_t bytes, std::size_t align) noexcept override {
    deallocate_calls_.fetch_add(1, std::memory_order_acq_rel);
    return inner_->deallocate_with_unmapped(ptr, bytes, align);
  }
  [[nodiscard]] DeviceKey device() const noexcept override {
    device_calls_.fetch_add(1, std::memory_order_acq_rel);
    if (auto hook = take(on_device_)) hook();
    return device_;
  }
  [[nodiscard]] VirtualBacking* as_virtual_backing() noexcept override {
    discovery_calls_.fetch_add(1, std::memory_order_acq_rel);
    return nullptr;
  }
  [[nodiscard]] SharedMapping* as_shared_mapping() noexcept override {
    discovery_calls_.fetch_add(1, std::memory_order_acq_rel);
    return nullptr;
  }

  // --- configuration -------------------------------------------------------
  void set_release_mode(ReleaseMode mode,
                        AllocationReleaseState quarantine_state = AllocationReleaseState::kPartiallyUnmapped) {
    quarantine_state_ = quarantine_state;
    mode_.store(mode, std::memory_order_release);
  }
  // Runs once, from inside the next allocate() / release(), before forwarding.
  void on_next_allocate(std::function<void()> hook) { put(on_allocate_, std::move(hook)); }
  void on_next_release(std::function<void()> hook) { put(on_release_, std::move(hook)); }
  // Runs once, from inside the next device() query (registration asks it with no lock held).
  void on_next_device_query(std::function<void()> hook) { put(on_device_, std::move(hook)); }
  // Set before the allocator is shared; runs from the destructor.
  void on_destroy(std::function<void()> hook) { on_destroy_ = std::move(hook); }

  // --- observations --------------------------------------------------------
  [[nodiscard]] std::size_t allocate_calls() const noexcept { return allocate_calls_.load(); }
  [[nodiscard]] std::size_t allocations() const noexcept { return allocations_.load(); }
  [[nodiscard]] std::size_t release_calls() const noexcept { return release_calls_.load(); }
  [[nodiscard]] std::size_t complete_releases() const noexcept { return complete_releases_.load(); }
  [[nodiscard]] std::size_t failed_releases() const noexcept { return failed_releases_.load(); }
  [[nodiscard]] std::size_t deallocate_calls() const noexcept { return deallocate_calls_.load(); }
  [[nodiscard]] std::size_t device_calls() const noexcept { return device_calls_.load(); }
  [[nodiscard]] std::size_t discovery_calls() const noexcept { return discovery_calls_.load(); }
  // Every entry point the registry can reach.
  [[nodiscard]] std::size_t total_calls() const noexcept {
    return allocate_calls() + release_calls() + deallocate_calls() + device_calls() + discovery_calls();
  }
  [[nodiscard]] std::vector<void*> released_addresses() const {
    const std::lock_guard lock(mutex_);
    return released_;
  }

 private:
  std::function<void()> take(std::function<void()>& slot) const {
    const std::lock_guard lock(mutex_);
    return std::exchange(slot, nullptr);
  }
  void put(std::function<void()>& slot, std::function<void()> hook) {
    const std::lock_guard lock(mutex_);
    slot = std::move(hook);
  }

  const DeviceKey device_;
  std::unique_ptr<DeviceAllocator> inner_;
  std::atomic<ReleaseMode> mode_{ReleaseMode::kForward};
  AllocationReleaseState quarantine_state_ = AllocationReleaseState::kPartiallyUnmapped;

  mutable std::mutex mutex_;
  std::function<void()> on_allocate_;
  std::function<void()> on_release_;
  mutable std::function<void()> on_device_;
  std::function<void()> on_destroy_;
  std::vector<void*> released_;

  std::atomic<std::size_t> allocate_calls_{0};
  std::atomic<std::size_t> allocations_{0};
  std::atomic<std::size_t> release_calls_{0};
  std::atomic<std::size_t> complete_releases_{0};
  std::atomic<std::size_t> failed_releases_{0};
  std::atomic<std::size_t> deallocate_calls_{0};
  mutable std::atomic<std::size_t> device_calls_{0};
  std::atomic<std::size_t> discovery_calls_{0};
};

// Test double: a few fixed slots, lowest free slot first, so addresses recycle immediately.
class RecyclingAllocator final : public DeviceAllocator {
 public:
  static constexpr std::size_t kSlotBytes = 256;
  static constexpr std::size_t kSlots = 8;

  [[nodiscard]] Expected<void*, MemoryError> allocate(std::size_t bytes, std::size_t align) noexcept override {
    if (bytes > kSlotBytes || !is_valid_alignment(align) || align > kSlotBytes) {
      return fail(MemoryError::invalid_request(Tier::kHost, bytes, "test double: at most 256 bytes at 256 alignment"));
    }
    const std::lock_guard lock(mutex_);
    for (std::size_t i = 0; i < kSlots; ++i) {
      if (!slots_[i].live) {
        slots_[i] = Slot{true, bytes, align};
        return static_cast<void*>(storage_[i].data());
      }
    }
    return fail(MemoryError::allocation_failed(Tier::kHost, bytes, "test double: every slot is live"));
  }
  [[nodiscard]] AllocationReleaseOutcome release(void* ptr, std::size_t bytes, std::size_t align) noexcept override {
    const std::lock_guard lock(mutex_);
    for (std::size_t i = 0; i < kSlots; ++i) {
      if (storage_[i].data() == ptr && slots_[i].live && slots_[i].bytes == bytes && slots_[i].align == align) {
        slots_[i].live = false;
        return AllocationReleaseOutcome::complete(ReleaseAccounting::eager(bytes));
      }
    }
    return AllocationReleaseOutcome::failed("test double: not a live slot of this size and alignment");
  }
  void deallocate(void* ptr, std::size_t bytes, std::size_t align) noexcept override {
    (void)release(ptr, bytes, align);
  }
  [[nodiscard]] DeviceKey device() const noexcept override { return DeviceKey::host(); }

 private:
  struct Slot {
    bool live = false;
    std::size_t bytes = 0;
    std::size_t align = 0;
  };
  std::mutex mutex_;
  std::array<Slot, kSlots> slots_{};
  alignas(kSlotBytes) std::array<std::array<unsigned char, kSlotBytes>, kSlots> storage_{};
};

}  // namespace ortmem::test_support
