// conformance/suites/support/counting_allocator.hpp: a decorator that counts what the
// registry asks of an adapter's allocator.
//
// Not a test double: every call goes to the real allocator under test, and
// the decorator only counts, so a suite can assert "the allocator was not
// called" (device loss, quarantine) and "released exactly once". Capability
// discovery is forwarded unchanged, so coherence is the inner allocator's.
//
// It also notes the first answer off the plain path (a refused allocate, a
// release of a live allocation with its own size that is not Complete for
// exactly those bytes): a registry test that fails after such an answer
// failed on a precondition, and the ALLOC tests judge the allocator. A
// release the caller got wrong (an address it already released or is
// releasing on another thread, a wrong size) is not noted: that is the registry's bug, and its tests must charge
// it. Nor is a Quarantined release: fault injection produces it on purpose.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <iterator>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "ortmem/allocator.hpp"

namespace ortmem::cts {

class CountingAllocator final : public DeviceAllocator {
 public:
  explicit CountingAllocator(std::shared_ptr<DeviceAllocator> inner) : inner_(std::move(inner)) {}

  Expected<void*, MemoryError> allocate(std::size_t bytes, std::size_t align) noexcept override {
    allocate_calls.fetch_add(1, std::memory_order_relaxed);
    auto ptr = inner_->allocate(bytes, align);
    if (ptr) {
      const std::lock_guard lock(order_mutex_);
      if (bytes != 0 && meets_settled_live(reinterpret_cast<std::uintptr_t>(*ptr), bytes)) overlapped_ = true;
      live_[reinterpret_cast<std::uintptr_t>(*ptr)] = Live{bytes, ++serial_, 0};
    }
    if (!ptr)
      note("refused allocate(" + std::to_string(bytes) + ", " + std::to_string(align) + "): " + ptr.error().message());
    return ptr;
  }
  AllocationReleaseOutcome release(void* ptr, std::size_t bytes, std::size_t align) noexcept override {
    release_calls.fetch_add(1, std::memory_order_relaxed);
    std::optional<std::uint64_t> serial;  // of the allocation this call names, if live
    bool well_formed = false;
    {
      const std::lock_guard lock(order_mutex_);
      release_order_.push_back(ptr);
      if (const auto found = live_.find(reinterpret_cast<std::uintptr_t>(ptr)); found != live_.end()) {
        ++found->second.releases_in_flight;
        serial = found->second.serial;
        well_formed = found->second.bytes == bytes;
      }
    }
    auto outcome = inner_->release(ptr, bytes, align);
    // A release the caller doubled is its bug, whichever of the two reached
    // the allocator first: racing releases of one address (what REL-014
    // charges) reach it in any order, so the one the allocator refuses may
    // be the one that found the record first. So a failure is the
    // allocator's only when no other release of the same allocation was in
    // flight or ended it meanwhile.
    bool alone = false;
    {
      const std::lock_guard lock(order_mutex_);
      const auto found = live_.find(reinterpret_cast<std::uintptr_t>(ptr));
      if (serial && found != live_.end() && found->second.serial == *serial) {
        alone = found->second.releases_in_flight == 1;
        if (outcome.is_failed())
          --found->second.releases_in_flight;  // changed nothing
        else
          live_.erase(found);
      }
    }
    const bool exact = outcome.is_complete() && outcome.accounting()->allocation_bytes == bytes;
    if (well_formed && alone && !exact && !outcome.is_quarantined()) {
      note("answered release(" + std::to_string(bytes) + " bytes) of a live allocation with " + outcome.describe());
    }
    return outcome;
  }
  void deallocate(void* ptr, std::size_t bytes, std::size_t align) noexcept override {
    release_calls.fetch_add(1, std::memory_order_relaxed);
    {
      const std::lock_guard lock(order_mutex_);
      live_.erase(reinterpret_cast<std::uintptr_t>(ptr));
    }
    inner_->deallocate(ptr, bytes, align);
  }
  DeviceKey device() const noexcept override { return inner_->device(); }
  bool commits_on_demand() const noexcept override { return inner_->commits_on_demand(); }
  VirtualBacking* as_virtual_backing() noexcept override { return inner_->as_virtual_backing(); }
  SharedMapping* as_shared_mapping() noexcept override { return inner_->as_shared_mapping(); }

  [[nodiscard]] DeviceAllocator& inner() noexcept { return *inner_; }
  // Every address release() was called with, in call order.
  [[nodiscard]] std::vector<void*> release_order() const {
    const std::lock_guard lock(order_mutex_);
    return release_order_;
  }

  // The first answer off the plain path, if any.
  [[nodiscard]] std::optional<std::string> deviation() const {
    const std::lock_guard lock(order_mutex_);
    return deviation_;
  }

  // Whether allocate ever handed out bytes that overlap a live allocation.
  // Exact only where every release of this allocator's memory passes through
  // it (a queue that frees memory itself leaves stale entries behind), so it
  // is not a deviation: a test whose releases all come here consults it.
  [[nodiscard]] bool overlapped() const {
    const std::lock_guard lock(order_mutex_);
    return overlapped_;
  }

  std::atomic<std::size_t> allocate_calls{0};
  std::atomic<std::size_t> release_calls{0};

 private:
  // Whether [start, start + bytes) meets a live allocation no release is
  // freeing. One a release is freeing may be handed out again as soon as the
  // allocator let it go, before that release returns here. The neighbours
  // suffice: the first overlap is all that is noted.
  [[nodiscard]] bool meets_settled_live(std::uintptr_t start, std::size_t bytes) const {
    const auto next = live_.lower_bound(start);
    if (next != live_.end() && next->first < start + bytes && next->second.releases_in_flight == 0) return true;
    if (next == live_.begin()) return false;
    const auto& [previous, block] = *std::prev(next);
    return previous + block.bytes > start && block.releases_in_flight == 0;
  }

  void note(std::string what) {
    const std::lock_guard lock(order_mutex_);
    if (!deviation_) deviation_ = "the adapter's allocator " + std::move(what);
  }

  std::shared_ptr<DeviceAllocator> inner_;
  mutable std::mutex order_mutex_;
  std::vector<void*> release_order_;
  std::optional<std::string> deviation_;
  bool overlapped_ = false;
  struct Live {
    std::size_t bytes;
    std::uint64_t serial;  // tells a reissued address from the allocation it replaced
    int releases_in_flight;
  };
  std::uint64_t serial_ = 0;
  std::map<std::uintptr_t, Live> live_;  // what allocate handed out, by address
};

}  // namespace ortmem::cts
