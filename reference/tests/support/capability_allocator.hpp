// support/capability_allocator.hpp: TEST DOUBLE for bound capabilities.
//
// CapabilityAllocator (test double) is an allocator that also implements
// VirtualBacking and SharedMapping over plain host memory. "Committing" only
// updates a per-allocation byte count and a shared prefix is a host buffer, so
// the registry's checks can be exercised without a device. Every allocator
// call and every capability call is counted separately, so a test can prove a
// refusal happened before any callback. A one-shot hook can run inside the
// next capability call (re-entrancy).
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <span>
#include <unordered_map>
#include <utility>
#include <vector>

#include "ortmem/allocator.hpp"
#include "ortmem/capability.hpp"
#include "ortmem/host/host_allocator.hpp"

namespace ortmem::test_support {

class CapabilityAllocator final : public DeviceAllocator, public VirtualBacking, public SharedMapping {
 public:
  static constexpr std::size_t kGranule = 4096;

  // Test double: a prefix is a host buffer remembered by the capability that made it.
  class Prefix final : public SharedDevicePrefix {
   public:
    Prefix(const CapabilityAllocator* owner, std::size_t bytes)
        : owner_(owner), bytes_(bytes), storage_(round_up(bytes)) {}
    [[nodiscard]] std::uint64_t device_ptr() const noexcept override {
      return reinterpret_cast<std::uintptr_t>(storage_.data());
    }
    [[nodiscard]] std::uint64_t committed_physical_bytes() const noexcept override { return storage_.size(); }
    [[nodiscard]] std::size_t mapped_bytes() const noexcept override { return storage_.size(); }
    [[nodiscard]] std::size_t requested_bytes() const noexcept override { return bytes_; }
    [[nodiscard]] const CapabilityAllocator* owner() const noexcept { return owner_; }

   private:
    const CapabilityAllocator* owner_;
    std::size_t bytes_;
    std::vector<unsigned char> storage_;
  };

  // --- DeviceAllocator -------------------------------------------------------
  [[nodiscard]] Expected<void*, MemoryError> allocate(std::size_t bytes, std::size_t align) noexcept override {
    allocator_calls_.fetch_add(1, std::memory_order_acq_rel);
    auto ptr = host_.allocate(bytes, align);
    if (ptr) {
      const std::lock_guard lock(mutex_);
      committed_[key(*ptr)] = bytes;
    }
    return ptr;
  }
  [[nodiscard]] AllocationReleaseOutcome release(void* ptr, std::size_t bytes, std::size_t align) noexcept override {
    allocator_calls_.fetch_add(1, std::memory_order_acq_rel);
    release_calls_.fetch_add(1, std::memory_order_acq_rel);
    auto outcome = host_.release(ptr, bytes, align);
    if (outcome.is_complete()) {
      const std::lock_guard lock(mutex_);
      committed_.erase(key(ptr));
    }
    return outcome;
  }
  void deallocate(void* ptr, std::size_t bytes, std::size_t align) noexcept override {
    (void)release(ptr, bytes, align);
  }
  [[nodiscard]] DeviceKey device() const noexcept override { return DeviceKey::host(); }
  [[nodiscard]] VirtualBacking* as_virtual_backing() noexcept override { return this; }
  [[nodiscard]] SharedMapping* as_shared_mapping() noexcept override { return this; }

  // --- VirtualBacking --------------------------------------------------------
  [[nodiscard]] Expected<void*, MemoryError> allocate_committed(
      std::size_t bytes, std::size_t align, std::span<const ByteRange> committed) noexcept override {
    capability_call();
    auto ptr = host_.allocate(bytes, align);
    if (!ptr) return ptr;
    std::size_t total = 0;
    for (const ByteRange& range : committed) total += range.size();
    const std::lock_guard lock(mutex_);
    committed_[key(*ptr)] = total;
    return ptr;
  }
  [[nodiscard]] Expected<void, MemoryError> commit_allocation_range(void* ptr, std::size_t allocation_bytes,
                                                                    std::size_t /*align*/, std::size_t offset,
                                                                    std::size_t bytes) noexcept override {
    capability_call();
    if (offset > allocation_bytes || bytes > allocation_bytes - offset) {
      return fail(MemoryError::invalid_request(Tier::kHost, bytes, "test double: range outside the allocation"));
    }
    const std::lock_guard lock(mutex_);
    auto& committed = committed_[key(ptr)];
    committed = std::min(allocation_bytes, committed + bytes);
    return {};
  }
  [[nodiscard]] Expected<std::uint64_t, MemoryError> decommit_allocation_range(void* ptr, std::size_t allocation_bytes,
                                                                               std::size_t /*align*/,
                                                                               std::size_t offset,
                                                                               std::size_t bytes) noexcept override {
    capability_call();
    if (offset > allocation_bytes || bytes > allocation_bytes - offset) {
      return fail(MemoryError::invalid_request(Tier::kHost, bytes, "test double: range outside the allocation"));
    }
    const std::lock_guard lock(mutex_);
    auto& committed = committed_[key(ptr)];
    const std::size_t unmapped = std::min(committed, bytes);
    committed -= unmapped;
    return std::uint64_t{unmapped};
  }
  [[nodiscard]] Expected<std::uint64_t, MemoryError> mapped_bytes_for_allocation(
      std::size_t bytes, std::size_t /*align*/) const noexcept override {
    capability_call();
    return std::uint64_t{round_up(bytes)};
  }
  [[nodiscard]] Expected<std::uint64_t, MemoryError> mapped_bytes_for_allocation_ranges(
      std::span<const AllocationCommitRange> ranges) const noexcept override {
    capability_call();
    std::uint64_t total = 0;
    for (const auto& range : ranges) total += round_up(range.bytes);
    return total;
  }
  [[nodiscard]] std::size_t allocation_committed_bytes(void* ptr, std::size_t /*allocation_bytes*/,
                                                       std::size_t /*align*/) const noexcept override {
    capability_call();
    const std::lock_guard lock(mutex_);
    const auto found = committed_.find(key(ptr));
    return found == committed_.end() ? 0 : found->second;
  }

  // --- SharedMapping ---------------------------------------------------------
  [[nodiscard]] Expected<std::unique_ptr<SharedDevicePrefix>, MemoryError> create_shared_prefix(
      std::size_t bytes) noexcept override {
    capability_call();
    return std::unique_ptr<SharedDevicePrefix>(std::make_unique<Prefix>(this, bytes));
  }
  [[nodiscard]] Expected<std::uint64_t, MemoryError> incremental_owned_bytes_for_shared_prefix(
      const SharedDevicePrefix& prefix) const noexcept override {
    capability_call();
    if (!is_mine(prefix)) return fail(MemoryError::invalid_request(Tier::kHost, 0, "test double: foreign prefix"));
    return std::uint64_t{0};
  }
  [[nodiscard]] Expected<SharedPrefixCommitInfo, MemoryError> commit_shared_prefix(
      const SharedDevicePrefix& prefix, void* /*ptr*/, std::size_t allocation_bytes,
      std::size_t byte_offset) noexcept override {
    capability_call();
    if (!is_mine(prefix)) return fail(MemoryError::invalid_request(Tier::kHost, 0, "test double: foreign prefix"));
    if (byte_offset % kGranule != 0 || byte_offset > allocation_bytes ||
        prefix.mapped_bytes() > allocation_bytes - byte_offset) {
      return fail(MemoryError::invalid_request(Tier::kHost, prefix.mapped_bytes(), "test double: does not fit"));
    }
    return SharedPrefixCommitInfo{0, prefix.mapped_bytes(), prefix.mapped_bytes() / kGranule};
  }

  // --- test controls ---------------------------------------------------------
  // Runs once, from inside the next capability call.
  void on_next_capability_call(std::function<void()> hook) {
    const std::lock_guard lock(mutex_);
    hook_ = std::move(hook);
  }
  [[nodiscard]] std::size_t allocator_calls() const noexcept { return allocator_calls_.load(); }
  [[nodiscard]] std::size_t release_calls() const noexcept { return release_calls_.load(); }
  [[nodiscard]] std::size_t capability_calls() const noexcept { return capability_calls_.load(); }
  // Reserves through the raw capability, as a provider's specialised entry point would.
  [[nodiscard]] Expected<void*, MemoryError> raw_reserve(std::size_t bytes, std::size_t align) {
    const ByteRange none[] = {ByteRange{0, 0}};
    return allocate_committed(bytes, align, none);
  }

 private:
  static std::size_t round_up(std::size_t bytes) { return (bytes + kGranule - 1) / kGranule * kGranule; }
  static std::uintptr_t key(const void* ptr) { return reinterpret_cast<std::uintptr_t>(ptr); }
  bool is_mine(const SharedDevicePrefix& prefix) const {
    const auto* own = dynamic_cast<const Prefix*>(&prefix);
    return own != nullptr && own->owner() == this;
  }
  void capability_call() const {
    capability_calls_.fetch_add(1, std::memory_order_acq_rel);
    std::function<void()> hook;
    {
      const std::lock_guard lock(mutex_);
      hook = std::exchange(hook_, nullptr);
    }
    if (hook) hook();
  }

  host::HostAllocator host_;
  mutable std::mutex mutex_;
  mutable std::function<void()> hook_;
  std::unordered_map<std::uintptr_t, std::size_t> committed_;
  std::atomic<std::size_t> allocator_calls_{0};
  std::atomic<std::size_t> release_calls_{0};
  mutable std::atomic<std::size_t> capability_calls_{0};
};

}  // namespace ortmem::test_support
