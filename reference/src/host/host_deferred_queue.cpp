#include "ortmem/host/host_deferred_queue.hpp"

#include <mutex>

namespace ortmem::host {

HostDeferredReleaseQueue::HostDeferredReleaseQueue(std::shared_ptr<ProviderContextPinSource> context,
                                                   std::shared_ptr<HostStream> stream, Options options)
    : context_(std::move(context)), context_identity_(context_->context()), stream_(std::move(stream)),
      capacity_(options.capacity) {}

HostDeferredReleaseQueue::~HostDeferredReleaseQueue() = default;

Expected<ProviderContextPin, ProviderContextPinError> HostDeferredReleaseQueue::pin_context() noexcept {
  return context_->pin();
}

Expected<DeferredEnqueued, DeferredEnqueueError> HostDeferredReleaseQueue::enqueue(
    PreparedAllocationRelease&& request, ProviderContextPin pin) noexcept {
  // The pin must be this queue's, and the request must belong to this
  // queue's context too: a request of another context would be queued holding
  // a pin on the wrong context, and its own context's teardown would not
  // observe it (DQ-009). Read before the lock: asking the pin is a call out.
  const bool foreign = !pin.holds_claim() || pin.context() != context_identity_ ||
                       request.provider_context() != context_identity_;
  const std::lock_guard lock(mutex_);
  std::optional<DeferredEnqueueRejection> rejection = first_rejection(device_lost_, closed_, entries_.size(), capacity_);
  if (!rejection && foreign) rejection = DeferredEnqueueRejection::kRefused;
  if (rejection) return fail(DeferredEnqueueError(*rejection, std::move(request)));
  try {
    // Built in place: a request is large, and every move of it is a copy.
    entries_.emplace_back(stream_->submitted(), request, pin);
  } catch (const std::bad_alloc&) {
    // emplace_back is all-or-nothing (storage is allocated before the entry
    // is built), so the request is still ours to hand back.
    return fail(DeferredEnqueueError(DeferredEnqueueRejection::kRefused, std::move(request)));
  }
  return DeferredEnqueued{};
}

std::size_t HostDeferredReleaseQueue::pending() const noexcept {
  const std::lock_guard lock(mutex_);
  return entries_.size();
}

std::size_t HostDeferredReleaseQueue::executed() const noexcept {
  return executed_.load(std::memory_order_acquire);
}

std::size_t HostDeferredReleaseQueue::poll() noexcept {
  const std::uint64_t completed = stream_->completed();
  std::size_t ran = 0;
  std::unique_lock lock(mutex_);
  // The claim to execute is read and taken under the bookkeeping lock that
  // the first pop needs anyway, so a poll that runs one request takes one lock.
  if (executing_.load(std::memory_order_acquire)) return 0;
  for (bool more = true; more;) {
    if (entries_.empty() || entries_.front().fence > completed) break;
    executing_.store(true, std::memory_order_relaxed);
    Entry entry = entries_.pop_front();
    // Whether the next one is ready too is read in the same critical section.
    // A request enqueued after this read waits for the next poll, as one
    // enqueued after poll() began may.
    more = !entries_.empty() && entries_.front().fence <= completed;
    lock.unlock();
    // Outside the bookkeeping lock: the allocator may call back into this queue.
    (void)std::move(entry.request).execute();
    entry.pin.reset();  // released only now, after the request settled
    // Only the executing poller writes it: a store, not a read-modify-write.
    executed_.store(executed_.load(std::memory_order_relaxed) + 1, std::memory_order_release);
    ++ran;
    if (more) lock.lock();
  }
  // With or without the lock: the next poller's acquire sees every request run here as settled.
  executing_.store(false, std::memory_order_release);
  return ran;
}

void HostDeferredReleaseQueue::close() noexcept {
  const std::lock_guard lock(mutex_);
  closed_ = true;
}

std::size_t HostDeferredReleaseQueue::mark_device_lost() noexcept {
  detail::ReusableFifo<Entry> lost;
  {
    const std::lock_guard lock(mutex_);
    device_lost_ = true;
    lost.swap(entries_);
  }
  for (Entry& entry : lost) (void)std::move(entry.request).quarantine_device_lost();
  // Destroying the entries releases the pins, each after its request settled.
  return lost.size();
}

}  // namespace ortmem::host
