#include "ortmem/owning_allocation.hpp"

#include "mechanism.hpp"
#include "release_settlement.hpp"

namespace ortmem {
namespace {

// Settles a release whose record was taken and lets the owner's pin on the
// mechanism go, held until the outcome was known: without it the owner owns
// nothing. One named result and one return, so that the result is built in
// the caller's return slot; with the refusals' returns beside it in one
// function, the whole result was moved there instead.
Expected<AllocationReleaseOutcome, OwningReleaseError> settle_taken(const detail::TakenRelease& taken,
                                                                    std::shared_ptr<detail::Mechanism>& pin) noexcept {
  Expected<AllocationReleaseOutcome, OwningReleaseError> outcome(tl::in_place, detail::ExecutedRelease{taken});
  pin.reset();
  return outcome;
}

}  // namespace

OwnedView::OwnedView(BoundMemoryView view, std::shared_ptr<std::atomic<std::size_t>> outstanding) noexcept
    : view_(std::move(view)), outstanding_(std::move(outstanding)) {}

OwnedView::OwnedView(const OwnedView& other) noexcept : view_(other.view_), outstanding_(other.outstanding_) {
  if (outstanding_) outstanding_->fetch_add(1, std::memory_order_acq_rel);
}

OwnedView& OwnedView::operator=(const OwnedView& other) noexcept {
  if (this != &other) *this = OwnedView(other);
  return *this;
}

OwnedView::OwnedView(OwnedView&& other) noexcept : view_(other.view_), outstanding_(std::move(other.outstanding_)) {}

OwnedView& OwnedView::operator=(OwnedView&& other) noexcept {
  if (this != &other) {
    if (outstanding_) outstanding_->fetch_sub(1, std::memory_order_acq_rel);
    view_ = other.view_;
    outstanding_ = std::move(other.outstanding_);
  }
  return *this;
}

OwnedView::~OwnedView() {
  if (outstanding_) outstanding_->fetch_sub(1, std::memory_order_acq_rel);
}

OwningAllocation& OwningAllocation::operator=(OwningAllocation&& other) noexcept {
  if (this != &other) {
    abandon();
    allocation_ = std::move(other.allocation_);
    views_ = std::move(other.views_);
  }
  return *this;
}

void OwningAllocation::abandon() noexcept {
  if (!owns()) return;
  BoundAllocation allocation = std::move(allocation_);  // takes the pin: this owner owns nothing from here
  // Quarantine, never free: the device may still be using the bytes. If the
  // record cannot be taken (device lost, already terminated) it stays where
  // it is and confirmed termination discharges it.
  if (auto prepared = MemoryBinding::prepare_owned(std::move(allocation))) {
    (void)std::move(*prepared).quarantine(QuarantineReason::of(QuarantineReason::Kind::kOwnerDropped));
  }
}

Expected<OwnedView, BindingError> OwningAllocation::view(std::size_t offset, std::size_t bytes) {
  auto view = allocation_.view(offset, bytes);
  if (!view) return fail(std::move(view.error()));
  if (!views_) views_ = std::make_shared<std::atomic<std::size_t>>(0);
  views_->fetch_add(1, std::memory_order_acq_rel);
  return OwnedView(std::move(*view), views_);
}

std::size_t OwningAllocation::outstanding_views() const noexcept {
  return views_ ? views_->load(std::memory_order_acquire) : 0;
}

template <class T>
[[gnu::cold, gnu::noinline]] Expected<T, OwningReleaseError> OwningAllocation::refuse(BindingError error) && {
  return fail(OwningReleaseError(std::move(error), std::move(*this)));
}

template <class T>
[[gnu::cold, gnu::noinline]] Expected<T, OwningReleaseError> OwningAllocation::refuse_for_views(std::size_t views) && {
  return std::move(*this).refuse<T>(BindingError::outstanding_views(identity(), views));
}

Expected<BoundAllocation, OwningReleaseError> OwningAllocation::take() && {
  if (const std::size_t views = lent_views(); views != 0) {
    return std::move(*this).refuse_for_views<BoundAllocation>(views);
  }
  return std::move(allocation_);  // the pin goes with it
}

Expected<BoundAllocation, OwningReleaseError> OwningAllocation::into_bound() && { return std::move(*this).take(); }

[[gnu::always_inline]] inline detail::TakeResult OwningAllocation::take_own_record(
    MechanismLifecycle& lifecycle) noexcept {
  // Through the allocation's own binding, so the checks that it is this
  // registry's and this binding's hold by construction.
  const detail::AllocationName& name = allocation_.name_;
  return allocation_.mechanism_->take_record(
      name, allocation_.slot_,
      detail::record_of(name.binding(), allocation_.ptr_, allocation_.bytes_, allocation_.align_), lifecycle);
}

Expected<PreparedAllocationRelease, BindingError> OwningAllocation::prepare_in_place() {
  MechanismLifecycle lifecycle{};
  if (const auto taken = take_own_record(lifecycle); taken != detail::TakeResult::kTaken) [[unlikely]] {
    return fail(allocation_.mechanism_->take_error(taken, lifecycle, allocation_.name_));
  }
  // The metadata moves once, into the request, built where the caller
  // receives it; the request takes the metadata's pin, so this owner owns nothing.
  return Expected<PreparedAllocationRelease, BindingError>(
      tl::in_place, detail::BindingKey(), std::move(allocation_.mechanism_), allocation_.name_, allocation_.slot_,
      allocation_.ptr_, allocation_.bytes_, allocation_.align_);
}

Expected<PreparedAllocationRelease, OwningReleaseError> OwningAllocation::prepare_release() && {
  if (const std::size_t views = lent_views(); views != 0) {
    return std::move(*this).refuse_for_views<PreparedAllocationRelease>(views);
  }
  auto prepared = prepare_in_place();
  // Refused before anything changed: this same owner, views and all, goes back.
  if (!prepared) return std::move(*this).refuse<PreparedAllocationRelease>(std::move(prepared.error()));
  return std::move(*prepared);
}

Expected<AllocationReleaseOutcome, OwningReleaseError> OwningAllocation::release_now() && {
  if (const std::size_t views = lent_views(); views != 0) {
    return std::move(*this).refuse_for_views<AllocationReleaseOutcome>(views);
  }
  // Settled in place, exactly as a prepared request would be, without moving
  // the metadata into one: this owner's own pin keeps the mechanism alive
  // until the outcome is known.
  detail::Mechanism& mechanism = *allocation_.mechanism_;
  const detail::AllocationName& name = allocation_.name_;
  MechanismLifecycle lifecycle{};
  if (const auto taken = take_own_record(lifecycle); taken != detail::TakeResult::kTaken) [[unlikely]] {
    return std::move(*this).refuse<AllocationReleaseOutcome>(mechanism.take_error(taken, lifecycle, name));
  }
  return settle_taken({mechanism, name, allocation_.slot_, allocation_.ptr_, allocation_.bytes_, allocation_.align_},
                      allocation_.mechanism_);
}

Expected<DeferredReleaseDisposition, OwningReleaseError> OwningAllocation::enqueue_with_receipt(
    PreparedAllocationRelease& request, ProviderContextPin& pin, DeferredReleaseQueue& queue) noexcept {
  // The receipt is made before the request moves on: the request holds the
  // pin on the mechanism that the identity is read from. No registry or
  // mechanism lock is held here.
  Expected<DeferredReleaseDisposition, OwningReleaseError> disposition(tl::in_place, detail::BindingKey(), request);
  auto queued = queue.enqueue(std::move(request), std::move(pin));
  if (!queued) {
    const DeferredEnqueueRejection rejection = queued.error().rejection();
    *disposition = DeferredReleaseDisposition::quarantined(disposition->identity(), rejection,
                                                           std::move(queued.error()).quarantine());
  }
  return disposition;
}

Expected<DeferredReleaseDisposition, OwningReleaseError> OwningAllocation::release_deferred(
    DeferredReleaseQueue& queue) && {
  if (const std::size_t views = lent_views(); views != 0) {
    return std::move(*this).refuse_for_views<DeferredReleaseDisposition>(views);
  }
  // The pin comes first: a context that takes no more work must leave the
  // allocation live and releasable, which is only true before prepare.
  auto pin = queue.pin_context();
  if (!pin) return std::move(*this).refuse<DeferredReleaseDisposition>(BindingError::deferred_refused(pin.error()));
  auto prepared = prepare_in_place();
  if (!prepared) return std::move(*this).refuse<DeferredReleaseDisposition>(std::move(prepared.error()));
  return enqueue_with_receipt(*prepared, *pin, queue);
}

}  // namespace ortmem
