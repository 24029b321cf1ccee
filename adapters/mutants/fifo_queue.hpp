// adapters/mutants/fifo_queue.hpp: a FIFO deferred release queue over a
// host stream, with a hook for each step a known-bad queue gets wrong.
//
// Correct as written: fences recorded at enqueue, FIFO execution outside the
// bookkeeping lock, exact pending(), capacity, device-lost/closed/full
// precedence, device loss settled without the allocator, each pin released
// only after its request settled. A known-bad queue overrides one hook.
#pragma once

#include <algorithm>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <new>
#include <optional>
#include <vector>

#include "ortmem/context_pin.hpp"
#include "ortmem/cts/adapter.hpp"
#include "ortmem/deferred.hpp"
#include "ortmem/mechanism/host_stream.hpp"
#include "ortmem/release_outcome.hpp"

namespace ortmem::adapters::mutants {

class FifoQueue : public cts::QueueUnderTest, public DeferredReleaseQueue {
 public:
  FifoQueue(std::shared_ptr<ProviderContextPinSource> context, cts::QueueOptions options)
      : context_(std::move(context)), identity_(context_->context()), capacity_(options.capacity) {}
  ~FifoQueue() override = default;  // what is still pending abandons itself (quarantine), frees nothing
  FifoQueue(const FifoQueue&) = delete;
  FifoQueue& operator=(const FifoQueue&) = delete;

  // QueueUnderTest.
  DeferredReleaseQueue& queue() override { return *this; }
  void record_use() override { (void)stream_.submit(); }
  void signal_fences() override { stream_.complete_all(); }
  std::size_t drain() override {
    const std::unique_lock executing(execute_mutex_, std::try_to_lock);
    if (!executing.owns_lock()) return 0;  // another drain is executing: never reorder, never wait
    std::vector<Entry> batch;
    {
      const std::lock_guard lock(mutex_);
      const std::size_t ready = std::min(ready_locked(stream_.completed()), entries_.size());
      try {
        batch.reserve(ready);
      } catch (const std::bad_alloc&) {
        return 0;
      }
      for (std::size_t i = 0; i < ready; ++i) {
        batch.push_back(std::move(entries_.front()));
        entries_.pop_front();
      }
      if (!batch.empty() && entries_.empty()) on_emptied_locked();
    }
    order_batch(batch);
    for (Entry& entry : batch) {
      const auto outcome = std::move(entry.request).execute();
      settled(entry, outcome);
    }
    return batch.size();
  }
  void close() override {
    const std::lock_guard lock(mutex_);
    closed_ = true;
  }
  void mark_device_lost() override {
    std::deque<Entry> lost;
    {
      const std::lock_guard lock(mutex_);
      note_device_lost_locked();
      lost.swap(entries_);
    }
    for (Entry& entry : lost) (void)std::move(entry.request).quarantine_device_lost();
  }
  std::optional<std::size_t> capacity() const override { return capacity_; }

  // DeferredReleaseQueue.
  Expected<ProviderContextPin, ProviderContextPinError> pin_context() noexcept override { return context_->pin(); }
  Expected<DeferredEnqueued, DeferredEnqueueError> enqueue(PreparedAllocationRelease&& request,
                                                           ProviderContextPin pin) noexcept override {
    const bool foreign = !pin.holds_claim() || pin.context() != identity_ || request.provider_context() != identity_;
    {
      const std::lock_guard lock(mutex_);
      std::optional<DeferredEnqueueRejection> rejection = rejection_locked(entries_.size());
      if (!rejection && foreign) rejection = DeferredEnqueueRejection::kRefused;
      if (rejection) return fail(DeferredEnqueueError(*rejection, std::move(request)));
      Entry entry{fence_locked(), std::move(request), std::move(pin)};
      accepting_locked(entry);
      try {
        entries_.push_back(std::move(entry));
      } catch (const std::bad_alloc&) {
        return fail(DeferredEnqueueError(DeferredEnqueueRejection::kRefused, std::move(entry.request)));
      }
    }
    return DeferredEnqueued{};
  }
  std::size_t pending() const noexcept override {
    const std::lock_guard lock(mutex_);
    return entries_.size();
  }

 protected:
  struct Entry {
    std::uint64_t fence;
    PreparedAllocationRelease request;
    ProviderContextPin pin;  // released after the request settles
  };

  // Hooks; the *_locked ones are called with mutex_ held.
  // How many entries at the head may execute now.
  [[nodiscard]] virtual std::size_t ready_locked(std::uint64_t completed) const {
    std::size_t ready = 0;
    while (ready < entries_.size() && entries_[ready].fence <= completed) ++ready;
    return ready;
  }
  [[nodiscard]] virtual std::optional<DeferredEnqueueRejection> rejection_locked(std::size_t pending) const {
    return first_rejection(device_lost_, closed_, pending, capacity_);
  }
  // The fence a request enqueued now waits for.
  [[nodiscard]] virtual std::uint64_t fence_locked() { return stream_.submitted(); }
  // A drain has just taken the last pending entries.
  virtual void on_emptied_locked() {}
  // The order a drain executes its batch in (called without mutex_).
  virtual void order_batch(std::vector<Entry>&) {}
  virtual void note_device_lost_locked() { device_lost_ = true; }
  // An entry about to be stored.
  virtual void accepting_locked(Entry&) {}
  // An entry whose request has just settled with `outcome` (called without mutex_).
  virtual void settled(Entry& entry, const AllocationReleaseOutcome&) { entry.pin.reset(); }

  const std::shared_ptr<ProviderContextPinSource> context_;
  const ProviderContextIdentity identity_;
  const std::optional<std::size_t> capacity_;
  mechanism::HostStream stream_;
  mutable std::mutex mutex_;  // bookkeeping only, never held while a request executes
  std::mutex execute_mutex_;  // one drain executes at a time
  std::deque<Entry> entries_;
  bool closed_ = false;
  bool device_lost_ = false;
};

}  // namespace ortmem::adapters::mutants
