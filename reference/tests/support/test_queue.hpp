// support/test_queue.hpp: TEST DOUBLES for deferred release.
//
// ObservingPinSource (test double) is a pin source that counts its pins and
// can run a callback each time a pin is released, so a test can look at the
// registry at the exact moment a queued request gives its pin back.
//
// RecordingQueue (test double) wraps a real DeferredReleaseQueue, counts the
// calls the registry makes into it and can run a callback from inside
// enqueue() (re-entrancy: enqueue must be called with no lock held).
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <mutex>
#include <utility>

#include "ortmem/context_pin.hpp"
#include "ortmem/deferred.hpp"

namespace ortmem::test_support {

class ObservingPinSource final : public ProviderContextPinSource, public PinAnchor {
 public:
  explicit ObservingPinSource(ProviderContextIdentity context) : context_(context) {}
  ObservingPinSource(const ObservingPinSource&) = delete;
  ObservingPinSource& operator=(const ObservingPinSource&) = delete;
  ~ObservingPinSource() override = default;

  [[nodiscard]] ProviderContextIdentity context() const noexcept override { return context_; }
  [[nodiscard]] Expected<ProviderContextPin, ProviderContextPinError> pin() noexcept override {
    pin_calls_.fetch_add(1, std::memory_order_acq_rel);
    if (!accepting_.load(std::memory_order_acquire)) {
      return fail(ProviderContextPinError{ProviderContextPinError::Kind::kContextUnavailable, context_});
    }
    outstanding_.fetch_add(1, std::memory_order_acq_rel);
    return ProviderContextPin::adopt_counted_claim(*this);
  }
  void release_pin() noexcept override {
    std::function<void()> hook;
    {
      const std::lock_guard lock(mutex_);
      hook = on_release_;
    }
    if (hook) hook();  // runs while the pin is still counted
    outstanding_.fetch_sub(1, std::memory_order_acq_rel);
  }

  void stop_accepting() noexcept { accepting_.store(false, std::memory_order_release); }
  // Runs on every pin release, before the count drops.
  void on_release(std::function<void()> hook) {
    const std::lock_guard lock(mutex_);
    on_release_ = std::move(hook);
  }
  [[nodiscard]] std::uint64_t outstanding() const noexcept { return outstanding_.load(); }
  [[nodiscard]] std::uint64_t pin_calls() const noexcept { return pin_calls_.load(); }

 private:
  const ProviderContextIdentity context_;
  std::atomic<bool> accepting_{true};
  std::atomic<std::uint64_t> outstanding_{0};
  std::atomic<std::uint64_t> pin_calls_{0};
  std::mutex mutex_;
  std::function<void()> on_release_;
};

class RecordingQueue final : public DeferredReleaseQueue {
 public:
  explicit RecordingQueue(DeferredReleaseQueue& inner) : inner_(inner) {}

  [[nodiscard]] Expected<ProviderContextPin, ProviderContextPinError> pin_context() noexcept override {
    pin_calls_.fetch_add(1, std::memory_order_acq_rel);
    return inner_.pin_context();
  }
  [[nodiscard]] Expected<DeferredEnqueued, DeferredEnqueueError> enqueue(PreparedAllocationRelease&& request,
                                                                         ProviderContextPin pin) noexcept override {
    enqueue_calls_.fetch_add(1, std::memory_order_acq_rel);
    std::function<void(const PreparedAllocationRelease&)> hook;
    {
      const std::lock_guard lock(mutex_);
      hook = std::exchange(on_enqueue_, nullptr);
    }
    if (hook) hook(request);
    return inner_.enqueue(std::move(request), std::move(pin));
  }
  [[nodiscard]] std::size_t pending() const noexcept override { return inner_.pending(); }

  // Runs once, from inside the next enqueue(), before forwarding.
  void on_next_enqueue(std::function<void(const PreparedAllocationRelease&)> hook) {
    const std::lock_guard lock(mutex_);
    on_enqueue_ = std::move(hook);
  }
  [[nodiscard]] std::size_t pin_calls() const noexcept { return pin_calls_.load(); }
  [[nodiscard]] std::size_t enqueue_calls() const noexcept { return enqueue_calls_.load(); }
  [[nodiscard]] std::size_t total_calls() const noexcept { return pin_calls() + enqueue_calls(); }

 private:
  DeferredReleaseQueue& inner_;
  std::mutex mutex_;
  std::function<void(const PreparedAllocationRelease&)> on_enqueue_;
  std::atomic<std::size_t> pin_calls_{0};
  std::atomic<std::size_t> enqueue_calls_{0};
};

}  // namespace ortmem::test_support
