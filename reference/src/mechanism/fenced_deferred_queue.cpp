#include "ortmem/mechanism/fenced_deferred_queue.hpp"

#include <atomic>
#include <mutex>
#include <new>

#include "mechanism/reusable_fifo.hpp"
#include "ortmem/detail/lock_guard.hpp"
#include "ortmem/detail/spin_lock.hpp"

namespace ortmem::mechanism {

// Lock order: `executing` before `bookkeeping`. Neither is held across a
// request's execution (the allocator may call back into this queue), nor
// across a fence record or query unless the fences say they are callable
// under a lock (a driver call is not).
class FencedDeferredQueue::Impl {
 public:
  struct Entry {
    // Takes the request and pin over from the caller's lvalues, so enqueue
    // can still hand them back when the entry's storage cannot be allocated.
    Entry(FenceToken fence_, PreparedAllocationRelease& request_, ProviderContextPin& pin_) noexcept
        : fence(fence_), request(std::move(request_)), pin(std::move(pin_)) {}
    Entry(Entry&&) noexcept = default;
    Entry& operator=(Entry&&) noexcept = default;

    FenceToken fence;
    PreparedAllocationRelease request;
    ProviderContextPin pin;  // released after the request settles
  };

  Impl(std::shared_ptr<ProviderContextPinSource> context_, std::shared_ptr<StreamFences> fences_,
       std::optional<std::size_t> capacity_)
      : context(std::move(context_)), context_identity(context->context()), fences(std::move(fences_)),
        fences_under_lock(fences->callable_under_lock()), capacity(capacity_) {}

  ~Impl() {
    // The entries abandon themselves (quarantine) as they go; their fences
    // go back first, unless the device is lost and must not be touched.
    if (device_lost) return;
    for (const Entry& entry : entries) fences->discard(entry.fence);
  }

  // The first state rejection that applies now, if any.
  std::optional<DeferredEnqueueRejection> rejection() const noexcept {
    const ortmem::detail::LockGuard lock(bookkeeping);
    return first_rejection(device_lost, closed, entries.size(), capacity);
  }

  const std::shared_ptr<ProviderContextPinSource> context;
  const ProviderContextIdentity context_identity;  // the one context `context` pins, read once
  const std::shared_ptr<StreamFences> fences;
  const bool fences_under_lock;  // fences->callable_under_lock(), read once
  const std::optional<std::size_t> capacity;

  // Guards the entries and the two flags; held for bookkeeping only.
  mutable ortmem::detail::SpinLock bookkeeping;
  detail::ReusableFifo<Entry> entries ORTMEM_GUARDED_BY(bookkeeping);
  bool closed ORTMEM_GUARDED_BY(bookkeeping) = false;
  bool device_lost ORTMEM_GUARDED_BY(bookkeeping) = false;
  // closed || device_lost, readable without the lock: enqueue reads it
  // before recording a fence, so a stopped queue records none (on a lost
  // device that would be a driver call). Only a hint: the decision is made
  // again under the lock.
  std::atomic<bool> stopped{false};

  // Held while requests execute, so two pollers cannot reorder the FIFO.
  // Only ever tried, never waited for: a second poller returns at once.
  ortmem::detail::SpinLock executing;
  // Raised after each request settled and its pin went, only by the poller
  // holding `executing`: a store, not a read-modify-write.
  std::atomic<std::size_t> executed{0};
};

FencedDeferredQueue::FencedDeferredQueue(std::shared_ptr<ProviderContextPinSource> context,
                                         std::shared_ptr<StreamFences> fences, Options options)
    : impl_(std::make_unique<Impl>(std::move(context), std::move(fences), options.capacity)) {}

FencedDeferredQueue::~FencedDeferredQueue() = default;

Expected<ProviderContextPin, ProviderContextPinError> FencedDeferredQueue::pin_context() noexcept {
  return impl_->context->pin();
}

Expected<DeferredEnqueued, DeferredEnqueueError> FencedDeferredQueue::enqueue(PreparedAllocationRelease&& request,
                                                                              ProviderContextPin pin) noexcept {
  Impl& q = *impl_;
  const auto refuse = [&](DeferredEnqueueRejection rejection) {
    return fail(DeferredEnqueueError(rejection, std::move(request)));
  };
  // The pin and the request must both be this queue's context's, or the
  // request would be queued holding a pin on the wrong context, where its
  // own context's teardown cannot see it (DQ-009).
  const bool foreign =
      !pin.holds_claim() || pin.context() != q.context_identity || request.provider_context() != q.context_identity;
  if (foreign || q.stopped.load(std::memory_order_acquire)) {
    return refuse(q.rejection().value_or(DeferredEnqueueRejection::kRefused));
  }
  // A fence that is a driver call is recorded before the lock, never under
  // it; one callable under the lock is recorded there, so accepting a
  // request takes the lock once either way.
  std::optional<FenceToken> fence;
  if (!q.fences_under_lock) {
    auto recorded = q.fences->record();
    if (!recorded) return refuse(q.rejection().value_or(DeferredEnqueueRejection::kRefused));
    fence = *recorded;
  }
  std::optional<DeferredEnqueueRejection> rejection;
  {
    const ortmem::detail::LockGuard lock(q.bookkeeping);
    rejection = first_rejection(q.device_lost, q.closed, q.entries.size(), q.capacity);
    if (!rejection && !fence) {
      if (auto recorded = q.fences->record())
        fence = *recorded;
      else
        rejection = DeferredEnqueueRejection::kRefused;
    }
    if (!rejection) {
      try {
        // Built in place: a request is large, and every move of it is a copy.
        q.entries.emplace_back(*fence, request, pin);
        return DeferredEnqueued{};
      } catch (const std::bad_alloc&) {
        // emplace_back is all-or-nothing (storage is allocated before the
        // entry is built), so the request is still ours to hand back.
        rejection = DeferredEnqueueRejection::kRefused;
      }
    }
  }
  // A refused request hands its fence back, unless the device is lost.
  if (fence && *rejection != DeferredEnqueueRejection::kDeviceLost) q.fences->discard(*fence);
  return refuse(*rejection);
}

std::size_t FencedDeferredQueue::pending() const noexcept {
  const ortmem::detail::LockGuard lock(impl_->bookkeeping);
  return impl_->entries.size();
}

std::size_t FencedDeferredQueue::poll() noexcept {
  Impl& q = *impl_;
  const std::unique_lock executing(q.executing, std::try_to_lock);
  if (!executing.owns_lock()) return 0;
  std::size_t ran = 0;
  for (;;) {
    ortmem::detail::LockGuard lock(q.bookkeeping);
    if (q.entries.empty()) break;
    const FenceToken head = q.entries.front().fence;
    FenceState state;
    if (q.fences_under_lock) {
      state = q.fences->query(head);
    } else {
      // Queried unlocked: only this poller removes entries (it holds the
      // execution claim), so the head is the same entry afterwards, unless
      // device loss settled them all meanwhile.
      lock.unlock();
      state = q.fences->query(head);
      lock.lock();
      if (q.entries.empty()) break;
    }
    if (state == FenceState::kPending) break;
    if (state == FenceState::kBroken) {
      lock.unlock();
      (void)mark_device_lost();
      break;
    }
    Impl::Entry entry = q.entries.pop_front();
    // Read in the same critical section, so a poll that runs the only
    // request takes the lock once. One enqueued after this read waits for
    // the next poll, as one enqueued after poll() began may.
    const bool more = !q.entries.empty();
    lock.unlock();
    q.fences->discard(entry.fence);
    // Outside the bookkeeping lock: the allocator may call back into this queue.
    (void)std::move(entry.request).execute();
    entry.pin.reset();  // released only now, after the request settled
    q.executed.store(q.executed.load(std::memory_order_relaxed) + 1, std::memory_order_release);
    ++ran;
    if (!more) break;
  }
  return ran;
}

void FencedDeferredQueue::close() noexcept {
  const ortmem::detail::LockGuard lock(impl_->bookkeeping);
  impl_->closed = true;
  impl_->stopped.store(true, std::memory_order_release);
}

std::size_t FencedDeferredQueue::mark_device_lost() noexcept {
  detail::ReusableFifo<Impl::Entry> lost;
  {
    const ortmem::detail::LockGuard lock(impl_->bookkeeping);
    impl_->device_lost = true;
    impl_->stopped.store(true, std::memory_order_release);
    lost.swap(impl_->entries);
  }
  // Their fences are not discarded: that would be a driver call on a lost device.
  for (Impl::Entry& entry : lost) (void)std::move(entry.request).quarantine_device_lost();
  // Destroying the entries releases the pins, each after its request settled.
  return lost.size();
}

std::optional<std::size_t> FencedDeferredQueue::capacity() const noexcept { return impl_->capacity; }

std::size_t FencedDeferredQueue::executed() const noexcept { return impl_->executed.load(std::memory_order_acquire); }

}  // namespace ortmem::mechanism
