#include "ortmem/cuda/cuda_deferred_queue.hpp"

#include <mutex>

namespace ortmem::cuda {

CudaDeferredReleaseQueue::CudaDeferredReleaseQueue(std::shared_ptr<ProviderContextPinSource> context,
                                                   std::shared_ptr<StreamFences> fences, Options options)
    : context_(std::move(context)), fences_(std::move(fences)), capacity_(options.capacity) {}

CudaDeferredReleaseQueue::~CudaDeferredReleaseQueue() {
  // Pending requests abandon themselves (quarantine) as the entries go; their
  // fences go back to the pool, unless the device is lost and must not be touched.
  if (device_lost_) return;
  for (const Entry& entry : entries_) fences_->discard(entry.fence);
}

Expected<ProviderContextPin, ProviderContextPinError> CudaDeferredReleaseQueue::pin_context() noexcept {
  return context_->pin();
}

Expected<DeferredEnqueued, DeferredEnqueueError> CudaDeferredReleaseQueue::enqueue(
    PreparedAllocationRelease&& request, ProviderContextPin pin) noexcept {
  const auto refuse = [&](DeferredEnqueueRejection rejection) {
    return fail(DeferredEnqueueError(rejection, std::move(request)));
  };
  {
    const std::lock_guard lock(mutex_);
    if (const auto rejection = first_rejection(device_lost_, closed_, entries_.size(), capacity_)) {
      return refuse(*rejection);
    }
  }
  // The pin and the request must both be this queue's context's, or the
  // request would be queued where its own context's teardown cannot see it.
  if (!pin.holds_claim() || pin.context() != context_->context() || request.provider_context() != context_->context()) {
    return refuse(DeferredEnqueueRejection::kRefused);
  }
  // Recorded outside the lock: an event record is a driver call.
  auto fence = fences_->record();
  if (!fence) return refuse(DeferredEnqueueRejection::kRefused);
  std::optional<DeferredEnqueueRejection> rejection;
  {
    const std::lock_guard lock(mutex_);
    // The state may have moved while the fence was recorded: check again.
    rejection = first_rejection(device_lost_, closed_, entries_.size(), capacity_);
    if (!rejection) {
      try {
        entries_.emplace_back(Entry{*fence, std::move(request), std::move(pin)});
        return DeferredEnqueued{};
      } catch (const std::bad_alloc&) {
        rejection = DeferredEnqueueRejection::kRefused;  // emplace_back is all-or-nothing: the request is still ours
      }
    }
  }
  // The fence goes back with the lock released: the spin lock is never held across a call out.
  if (*rejection != DeferredEnqueueRejection::kDeviceLost) fences_->discard(*fence);
  return refuse(*rejection);
}

std::size_t CudaDeferredReleaseQueue::pending() const noexcept {
  const std::lock_guard lock(mutex_);
  return entries_.size();
}

std::size_t CudaDeferredReleaseQueue::poll() noexcept {
  const std::unique_lock executing(executing_, std::try_to_lock);
  if (!executing.owns_lock()) return 0;
  std::size_t ran = 0;
  for (;;) {
    FenceToken head = 0;
    {
      const std::lock_guard lock(mutex_);
      if (entries_.empty()) break;
      head = entries_.front().fence;
    }
    // Only this poller removes entries (it holds the execution lock), so the
    // head is still the same entry after the unlocked query.
    const FenceState state = fences_->query(head);
    if (state == FenceState::kPending) break;
    if (state == FenceState::kBroken) {
      (void)mark_device_lost();
      break;
    }
    std::unique_lock lock(mutex_);
    if (entries_.empty() || entries_.front().fence != head) break;  // settled by device loss meanwhile
    Entry entry = entries_.pop_front();
    lock.unlock();
    fences_->discard(entry.fence);
    // Outside the bookkeeping lock: the allocator may call back into this queue.
    (void)std::move(entry.request).execute();
    ++ran;
    // The pin goes only now, with `entry`, after the request settled.
  }
  return ran;
}

void CudaDeferredReleaseQueue::close() noexcept {
  const std::lock_guard lock(mutex_);
  closed_ = true;
}

std::size_t CudaDeferredReleaseQueue::mark_device_lost() noexcept {
  detail::ReusableFifo<Entry> lost;
  {
    const std::lock_guard lock(mutex_);
    device_lost_ = true;
    lost.swap(entries_);
  }
  // Fences are not discarded: that would be a driver call on a lost device.
  for (Entry& entry : lost) (void)std::move(entry.request).quarantine_device_lost();
  return lost.size();
}

}  // namespace ortmem::cuda
